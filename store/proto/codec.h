/*
 * The TCPStore wire codec (PROTOCOL.md): op numbering for both dialects, a
 * pure incremental request parser, and encoders for requests and replies.
 *
 * No sockets here.  The parser takes a buffer and its length and returns
 * CODEC_NEED_MORE (with the number of bytes it needs before trying again),
 * CODEC_OK (with the bytes consumed and a parsed request whose strings point
 * into the input buffer), or a named CODEC_E_* error.  Every length field is
 * checked against the limits before the parser asks for the bytes it names,
 * so a caller that allocates by `need` can never be made to reserve more
 * than the limits allow.
 */
#ifndef FCCL_STORE_CODEC_H
#define FCCL_STORE_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Dialect-independent operation ids. */
enum store_op {
    OP_VALIDATE,
    OP_SET,
    OP_COMPARE_SET,
    OP_GET,
    OP_ADD,
    OP_CHECK,
    OP_WAIT,
    OP_GETNUMKEYS,
    OP_WATCH_KEY, /* legacy only, refused */
    OP_DELETE_KEY,
    OP_APPEND,
    OP_MULTI_GET,
    OP_MULTI_SET,
    OP_CANCEL_WAIT,
    OP_PING,
    OP_QUEUE_PUSH,
    OP_QUEUE_POP,
    OP_QUEUE_LEN,
    OP_LIST_ALL,  /* 17, PyTorch's LIST_KEYS: -> i64 n, n keys (all) */
    OP_BARRIER,   /* 18: key, i64 world_size -> u8 STOP_WAITING */
    /* fccl extensions, wire types from 0x80, modern connections only */
    OP_LIST_KEYS, /* 0x80: key prefix -> u64 n, n keys */
    OP_SYNC,      /* 0x81: -> u8 status [, message] (docs/PROTOCOL-fccl.md) */
    OP_STATS,     /* 0x84: -> "name value" text lines as one string */
    OP_AUTH_HELLO, /* 0x82: -> u8 mode [, 32-byte server nonce] */
    OP_AUTH_PROOF, /* 0x83: 32-byte client nonce, 32-byte HMAC -> u8 */
    OP__COUNT
};

enum store_dialect { DIALECT_UNKNOWN, DIALECT_MODERN, DIALECT_LEGACY };

#define STORE_VALIDATE_MAGIC 0x3C85F7CEu
#define STORE_EXT_LIST_KEYS 0x80
#define STORE_EXT_SYNC 0x81
#define STORE_EXT_STATS 0x84
#define STORE_EXT_AUTH_HELLO 0x82
#define STORE_EXT_AUTH_PROOF 0x83
/* Token authentication (docs/PROTOCOL-fccl.md, "AUTH"). */
#define AUTH_NONCE_LEN 32
#define AUTH_MAC_LEN 32
#define AUTH_MODE_NONE 0      /* HELLO reply: the server has no tokens */
#define AUTH_MODE_CHALLENGE 1 /* HELLO reply: a server nonce follows */
#define AUTH_REFUSED 0        /* PROOF reply */
#define AUTH_READ_WRITE 1
#define AUTH_READ_ONLY 2
#define STORE_EXT_FIRST 0x80 /* fccl's own types: 0x80..0xBF */
#define STORE_EXT_LAST 0xBF

/* SYNC reply: u8 status; a non-zero status is followed by a string (u64
 * length, at most SYNC_MSG_MAX bytes) saying what was refused and why. */
#define SYNC_OK 0
#define SYNC_LIMIT 1  /* over a limit: store full, value too large */
#define SYNC_NOMEM 2  /* the server ran out of memory */
#define SYNC_DENIED 3 /* not authorized */
#define SYNC_OTHER 4
#define SYNC_MSG_MAX 1024

/* The fccl hello (docs/PROTOCOL-fccl.md, "The fccl hello"): right after
 * VALIDATE an fccl client sends PING with a nonce of STORE_HELLO_BASE |
 * flags, a value no PyTorch client sends (its nonce is its process id,
 * below 2^22).  A PyTorch server echoes it.  tcpstore-server replies
 * nonce | STORE_HELLO_ACK when it serves the connection (with
 * STORE_HELLO_NEEDS_TOKEN when nothing but PING is served without a
 * token), or ~nonce, a u8 code (SYNC_* numbers) and a string saying why
 * it refuses the connection, and then closes it. */
#define STORE_HELLO_MASK 0xFFFF0000u
#define STORE_HELLO_BASE 0xFCC10000u
#define STORE_HELLO_TOKEN 0x0001u /* an AUTH exchange follows */
#define STORE_HELLO_ACK 0x8000u
#define STORE_HELLO_NEEDS_TOKEN 0x4000u
#define STORE_IS_HELLO(n) (((n) & STORE_HELLO_MASK) == STORE_HELLO_BASE)

/* Reply bytes of CHECK / WAIT / CANCEL_WAIT. */
#define REPLY_READY 0
#define REPLY_NOT_READY 1
#define REPLY_STOP_WAITING 0
#define REPLY_WAIT_CANCELED 1

/* Wire type byte of `op` in `dialect`; -1 if the dialect lacks it. */
int codec_op_to_wire(enum store_dialect dialect, enum store_op op);
/* Op of wire byte `type` in `dialect`; -1 if unknown. */
int codec_wire_to_op(enum store_dialect dialect, uint8_t type);
const char *codec_op_name(enum store_op op);

struct codec_limits {
    uint64_t max_key;       /* bytes, default 8 KiB; must stay << 0x3C85F7CE */
    uint64_t max_value;     /* bytes, default 64 MiB */
    uint64_t max_keys;      /* keys per request, default 131072 */
    uint64_t max_request;   /* bytes of one whole request (all of its
                               strings together); 0 = no limit.  Default
                               2 * max_value + 2 * max_key + 4 KiB, enough
                               for COMPARE_SET with two full values */
};
void codec_limits_default(struct codec_limits *l);

enum codec_result {
    CODEC_OK = 0,
    CODEC_NEED_MORE = 1,
    CODEC_E_BAD_TYPE = -1,  /* unknown type byte for this dialect */
    CODEC_E_KEY_LONG = -2,  /* key length over max_key */
    CODEC_E_VAL_LONG = -3,  /* value length over max_value */
    CODEC_E_TOO_MANY = -4,  /* key count over max_keys */
    CODEC_E_BAD_MAGIC = -5, /* VALIDATE with a wrong magic */
    CODEC_E_REFUSED = -6,   /* known but refused (WATCH_KEY, ext on legacy) */
    CODEC_E_REQ_LONG = -7,  /* whole request over max_request */
};
const char *codec_result_str(int r);

struct codec_slice {
    const uint8_t *p;
    uint64_t len;
};

/*
 * A parsed request.  Single-key ops fill key (and val, val2 for
 * COMPARE_SET's expected/desired).  Multi-key ops (CHECK, WAIT, MULTI_GET,
 * MULTI_SET) set nkeys and `args`, the raw bytes of the key list (or of the
 * key/value pairs); walk them with codec_next_slice().
 */
struct codec_req {
    enum store_op op;
    struct codec_slice key, val, val2;
    int64_t num;     /* ADD delta */
    uint32_t u32;    /* VALIDATE magic, PING nonce */
    uint64_t nkeys;  /* multi-key ops: number of keys (pairs for MULTI_SET) */
    struct codec_slice args;
};

/*
 * Dialect detection for a new connection from its first bytes:
 * returns DIALECT_MODERN if they are 00 CE F7 85 3C, DIALECT_LEGACY if they
 * can't be, DIALECT_UNKNOWN if fewer than 5 bytes decide nothing yet.
 * (A first byte 0x16 is TLS; the caller checks that before.)
 */
enum store_dialect codec_sniff_dialect(const uint8_t *buf, size_t len);

/*
 * Parse one request from buf[0..len) in `dialect`.
 * CODEC_OK: *consumed = its length, *req filled (pointers into buf).
 * CODEC_NEED_MORE: *consumed = total bytes needed before a retry can make
 *   progress (> len).  Nothing in req is valid.
 * < 0: malformed or over a limit; the connection should be closed.
 */
int codec_parse_request(enum store_dialect dialect,
                        const struct codec_limits *lim, const uint8_t *buf,
                        size_t len, struct codec_req *req, size_t *consumed);

/*
 * The head of a SET, APPEND or QUEUE_PUSH: type, key and the value's length
 * field, so that a large value can be read into its own buffer.
 * CODEC_OK: req->op and req->key filled (pointing into buf), *vlen the
 * value's length (checked against the limits), *head the bytes up to the
 * value.  CODEC_NEED_MORE with *head the bytes needed; CODEC_E_REFUSED if
 * buf starts another op; other errors as codec_parse_request.
 */
int codec_parse_value_head(enum store_dialect dialect,
                           const struct codec_limits *lim, const uint8_t *buf,
                           size_t len, struct codec_req *req, uint64_t *vlen,
                           size_t *head);

/* Iterate length-prefixed byte strings inside a validated args slice:
 * returns 1 and fills *out while there is one, 0 at the end. */
int codec_next_slice(struct codec_slice *cursor, struct codec_slice *out);

/* ---- Encoding: a growable byte buffer ---- */
struct codec_buf {
    uint8_t *p;
    size_t len, cap;
    int oom; /* sticky: set once an allocation failed */
};
void codec_buf_init(struct codec_buf *b);
void codec_buf_free(struct codec_buf *b);
void codec_buf_reset(struct codec_buf *b);
void codec_put_u8(struct codec_buf *b, uint8_t v);
void codec_put_u32(struct codec_buf *b, uint32_t v);
void codec_put_u64(struct codec_buf *b, uint64_t v);
void codec_put_i64(struct codec_buf *b, int64_t v);
void codec_put_bytes(struct codec_buf *b, const void *p, size_t len); /* raw */
void codec_put_str(struct codec_buf *b, const void *p, size_t len); /* u64 len + bytes */
/* The type byte of `op` in `dialect`; returns -1 (and puts nothing) if the
 * dialect lacks the op. */
int codec_put_type(struct codec_buf *b, enum store_dialect dialect,
                   enum store_op op);

/* Little-endian loads and stores (the wire is little-endian on every
 * PyTorch build); the stores fill fixed-size arrays without allocating. */
uint32_t codec_get_u32(const uint8_t *p);
uint64_t codec_get_u64(const uint8_t *p);
void codec_set_u32(uint8_t *p, uint32_t v);
void codec_set_u64(uint8_t *p, uint64_t v);

/* A counter's value as the store keeps it (ADD's decimal text): an
 * optional sign and digits only, within int64.  0 with *out, or -1.  The
 * server, the etcd client and the etcd front-end all read counters with
 * this, so a key added through one is read alike through the others. */
int codec_parse_i64(const uint8_t *p, size_t n, int64_t *out);

#endif
