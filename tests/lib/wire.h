/*
 * wire.h: a raw TCPStore client for the server tests.  Frames are built
 * with the store's own codec encoders (the tests link the internal
 * library, which has them; the codec itself is checked byte by byte in
 * test_codec), sent over a plain socket, and replies are compared byte
 * for byte.  Every read has a deadline (TH_IO_MS).
 *
 * Every call fails the test (cr_assert) when the server does not do what
 * is expected, so this file is for Criterion test binaries only.
 */
#ifndef FCCL_TESTS_LIB_WIRE_H
#define FCCL_TESTS_LIB_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "codec.h"
#include "srv.h"

/* ---- connections ---- */

/* A TCP connection to 127.0.0.1:port (no VALIDATE: a legacy client). */
int cli_connect(int port);

/* A modern connection: connect and VALIDATE. */
int cli_modern(int port);

/* The local "127.0.0.1:PORT" of fd, as the server names it in logs. */
void cli_name(int fd, char *out, size_t n);

/* ---- sending ---- */

void cli_send_raw(int fd, const void *p, size_t n);

/* Send the frame(s) in b and empty b. */
void cli_send(int fd, struct codec_buf *b);

/* ---- replies ---- */

/* Exactly n bytes. */
void cli_read(int fd, void *buf, size_t n);

/* The next n bytes are want. */
void cli_expect(int fd, const void *want, size_t n);
void cli_expect_u8(int fd, uint8_t v);
void cli_expect_u32(int fd, uint32_t v);
void cli_expect_i64(int fd, int64_t v);

/* A byte-string reply (u64 length + bytes) equal to v[0..n). */
void cli_expect_str(int fd, const void *v, size_t n);
void cli_expect_cstr(int fd, const char *s);

/* A byte-string reply of n bytes, returned (malloc'd) for the test to
 * look into. */
uint8_t *cli_read_str(int fd, size_t n);

/* Nothing arrives for ms milliseconds. */
void cli_expect_silence(int fd, int ms);

/* The server closes the connection within ms (bytes before are
 * discarded). */
void cli_expect_closed(int fd, int ms);

/* A TCP connection from src (a 127.0.0.0/8 address) to the server on
 * 127.0.0.1:port; nothing is sent. */
int cli_connect_from(const char *src, int port);

/* Send VALIDATE with the magic (modern dialect) on fd. */
void cli_validate(int fd);

/* Round trip a PING (modern dialect) with a token: the connection is
 * served. */
void cli_ping_ok(int fd);

/* Round trip a GETNUMKEYS: proves the connection is alive and served. */
int64_t cli_numkeys(int fd, enum store_dialect d);

/* ---- frame builders (dialect-aware; a dialect that lacks the op fails
 * the test) ---- */

void put_op(struct codec_buf *b, enum store_dialect d, enum store_op op);
void put_key(struct codec_buf *b, const char *k);

/* VALIDATE with the magic (modern dialect). */
void f_validate(struct codec_buf *b);

/* OP key */
void f_key(struct codec_buf *b, enum store_dialect d, enum store_op op,
           const char *k);

/* OP key value (SET, APPEND, QUEUE_PUSH) */
void f_kv(struct codec_buf *b, enum store_dialect d, enum store_op op,
          const char *k, const void *v, size_t n);
void f_set(struct codec_buf *b, enum store_dialect d, const char *k,
           const char *v);
void f_add(struct codec_buf *b, enum store_dialect d, const char *k,
           int64_t delta);
void f_cas(struct codec_buf *b, enum store_dialect d, const char *k,
           const char *exp, const char *des);

/* OP n keys... (CHECK, WAIT, MULTI_GET) */
void f_keys(struct codec_buf *b, enum store_dialect d, enum store_op op,
            int n, const char *const *keys);
void f_wait1(struct codec_buf *b, enum store_dialect d, const char *k);

#endif
