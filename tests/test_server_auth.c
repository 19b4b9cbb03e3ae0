/*
 * Token authentication (docs/PROTOCOL-fccl.md "AUTH"): read-write and
 * read-only tokens through `tcpstore --token-file` / TCPSTORE_TOKEN_FILE,
 * a wrong token, --auth-required (PING allowed, anything else closes), a
 * proof that is not valid on another connection, token files with loose
 * modes or too short, a second VALIDATE, fccl_init with
 * FCCL_STORE_TOKEN_FILE, and the warning when listening beyond loopback.
 * Each case is checked on both sides: the client's error and exit code,
 * the server's log line.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/wire.h"
#include "token_file.h"

static char dir[64];

static void write_file(const char *name, const char *text, int mode)
{
    char p[128];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    cr_assert_eq(th_write_file(p, text, mode), 0, "%s: %s", p,
                 strerror(errno));
}

static void setup(void)
{
    cr_assert_eq(th_mkdtemp(dir, sizeof(dir), "fccl-auth"), 0);
    write_file("rw", "read-write-token-0123456789\n", 0600);
    write_file("ro", "read-only-token-abcdefghij\n", 0400);
    write_file("wrong", "not-the-token-at-all-xyz\n", 0600);
    write_file("open", "read-write-token-0123456789\n", 0644);
    write_file("short", "tooshort\n", 0600);
}

static void teardown(void)
{
    if (dir[0] && th_rmtree(dir) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

TestSuite(auth, .init = setup, .fini = teardown, .timeout = 120);

static void start(struct srv *s, int required, int with_ro)
{
    char rw[128], ro[128];
    snprintf(rw, sizeof(rw), "%s/rw", dir);
    snprintf(ro, sizeof(ro), "%s/ro", dir);
    const char *argv[8];
    int n = 0;
    argv[n++] = "--token-file";
    argv[n++] = rw;
    if (with_ro) {
        argv[n++] = "--read-token-file";
        argv[n++] = ro;
    }
    if (required)
        argv[n++] = "--auth-required";
    argv[n] = NULL;
    srv_start(s, argv);
}

/* Run and expect exit `want` with `needle` (NULL: anything) in the
 * output; returns nothing, frees the output. */
static void expect_cli(int port, const char *env, const char *args, int want,
                       const char *needle)
{
    char *out = NULL;
    int ex = srv_tcpstore(port, dir, env, args, &out);
    cr_assert_eq(ex, want, "tcpstore %s: exit %d: %s", args, ex, out);
    if (needle)
        cr_assert(strstr(out, needle), "'%s' not in: %s", needle, out);
    free(out);
}

Test(auth, tokens_give_their_rights)
{
    struct srv s;
    start(&s, 0, 1);
    expect_cli(s.port, "", "--token-file rw set k v1", 0, NULL);
    expect_cli(s.port, "TCPSTORE_TOKEN_FILE=rw", "add n 5", 0, "5");
    /* Read-only: reads work, a write is refused and says why. */
    expect_cli(s.port, "", "--token-file ro get k", 0, "v1");
    expect_cli(s.port, "", "--token-file ro check k", 0, NULL);
    expect_cli(s.port, "", "--token-file ro set k v2", 4, "read-only");
    cr_assert(srv_log_wait(&s, "SET refused: the client holds the read-only",
                           TH_IO_MS));
    /* ADD has a reply: the server could only close on it, so the client,
     * told its rights by the proof, refuses it itself (issue 25). */
    expect_cli(s.port, "", "--token-file ro add n 1", 4,
               "ADD needs the read-write token; the client holds the "
               "read-only token");
    /* Nothing changed; an unauthenticated client has full access here. */
    expect_cli(s.port, "", "get k", 0, "v1");
    expect_cli(s.port, "", "add n 0", 0, "5");
    expect_cli(s.port, "", "set free yes", 0, NULL);
    /* A wrong token: refused on both sides. */
    expect_cli(s.port, "", "--token-file wrong get k", 4,
               "refused our token");
    cr_assert(srv_log_wait(&s, "token refused", TH_IO_MS));
    cr_assert_eq(srv_log_count(&s, "token refused"), 1);
    srv_finish(&s);
}

Test(auth, auth_required_locks_out_unauthenticated_requests)
{
    struct srv s;
    start(&s, 1, 0);
    expect_cli(s.port, "", "--token-file rw set k v", 0, NULL);
    expect_cli(s.port, "", "ping", 0, NULL);
    /* Our client reads the hello's "needs a token" before a GET's request
     * goes out (sc_fetch_pipelined) and refuses it itself. */
    expect_cli(s.port, "", "get k", 4, "--auth-required");
    expect_cli(s.port, "", "set k2 v", 4, "--auth-required");
    cr_assert(srv_log_wait(&s, "before authentication (auth-required",
                           TH_IO_MS));
    /* A PyTorch-style (raw) client: PING answered, GETNUMKEYS closes. */
    int fd = cli_modern(s.port);
    struct codec_buf b;
    codec_buf_init(&b);
    codec_put_type(&b, DIALECT_MODERN, OP_PING);
    codec_put_u32(&b, 77);
    cli_send(fd, &b);
    cli_expect_u32(fd, 77);
    codec_put_type(&b, DIALECT_MODERN, OP_GETNUMKEYS);
    cli_send(fd, &b);
    cli_expect_closed(fd, TH_IO_MS);
    close(fd);
    codec_buf_free(&b);
    cr_assert(srv_log_wait(&s, "GETNUMKEYS before authentication", TH_IO_MS));
    expect_cli(s.port, "TCPSTORE_TOKEN_FILE=rw", "get k", 0, "v");
    srv_finish(&s);
}

/* HELLO on fd: the server nonce. */
static void hello(int fd, uint8_t nonce[AUTH_NONCE_LEN])
{
    uint8_t op = STORE_EXT_AUTH_HELLO, mode = 9;
    cli_send_raw(fd, &op, 1);
    cli_read(fd, &mode, 1);
    cr_assert_eq(mode, AUTH_MODE_CHALLENGE);
    cli_read(fd, nonce, AUTH_NONCE_LEN);
}

Test(auth, a_proof_is_bound_to_its_connection)
{
    struct srv s;
    start(&s, 1, 0);
    const unsigned char tok[] = "read-write-token-0123456789";
    size_t tl = sizeof(tok) - 1;
    int a = cli_modern(s.port), b = cli_modern(s.port);
    uint8_t na[AUTH_NONCE_LEN], nb[AUTH_NONCE_LEN];
    hello(a, na);
    hello(b, nb);
    cr_assert(memcmp(na, nb, AUTH_NONCE_LEN) != 0, "nonces repeat");
    uint8_t msg[1 + AUTH_NONCE_LEN + AUTH_MAC_LEN];
    msg[0] = STORE_EXT_AUTH_PROOF;
    memset(msg + 1, 0x5A, AUTH_NONCE_LEN);
    cr_assert_eq(store_auth_mac(tok, tl, na, msg + 1, msg + 1 +
                                AUTH_NONCE_LEN), FCCL_OK);
    /* a's proof replayed on b: refused. */
    cli_send_raw(b, msg, sizeof(msg));
    cli_expect_u8(b, AUTH_REFUSED);
    cr_assert(srv_log_wait(&s, "token refused", TH_IO_MS));
    /* On a: accepted with full rights, then served. */
    cli_send_raw(a, msg, sizeof(msg));
    cli_expect_u8(a, AUTH_READ_WRITE);
    cr_assert_eq(cli_numkeys(a, DIALECT_MODERN), 0);
    /* The same proof again on a: no challenge outstanding, closed. */
    cli_send_raw(a, msg, sizeof(msg));
    cli_expect_closed(a, TH_IO_MS);
    cr_assert(srv_log_wait(&s, "AUTH_PROOF without AUTH_HELLO", TH_IO_MS));
    close(a);
    close(b);
    srv_finish(&s);
}

Test(auth, bad_token_files_are_refused)
{
    char *out = NULL, cmd[512];
    snprintf(cmd, sizeof(cmd), "%s/tcpstore-server --port 0 --token-file "
             "%s/open", th_bin_dir(), dir);
    int ex = th_sh(cmd, 30, &out);
    cr_assert_eq(ex, 1, "exit %d: %s", ex, out);
    cr_assert(strstr(out, "chmod 600"), "%s", out);
    free(out);
    snprintf(cmd, sizeof(cmd), "%s/tcpstore-server --port 0 --token-file "
             "%s/short", th_bin_dir(), dir);
    ex = th_sh(cmd, 30, &out);
    cr_assert_eq(ex, 1, "exit %d: %s", ex, out);
    cr_assert(strstr(out, "at least 16"), "%s", out);
    free(out);
    struct srv s;
    start(&s, 0, 0);
    expect_cli(s.port, "", "--token-file open get k", 4, "chmod 600");
    /* A token for a server that has none. */
    struct srv plain;
    srv_start(&plain, NULL);
    expect_cli(plain.port, "", "--token-file rw ping", 4, "has none");
    srv_finish(&plain);
    srv_finish(&s);
}

Test(auth, second_validate_closes)
{
    struct srv s;
    srv_start(&s, NULL);
    int fd = cli_modern(s.port);
    cr_assert_eq(cli_numkeys(fd, DIALECT_MODERN), 0);
    struct codec_buf b;
    codec_buf_init(&b);
    f_validate(&b);
    cli_send(fd, &b);
    codec_buf_free(&b);
    cli_expect_closed(fd, TH_IO_MS);
    close(fd);
    cr_assert(srv_log_wait(&s, "a second VALIDATE", TH_IO_MS));
    srv_finish(&s);
}

Test(auth, fccl_init_with_a_token, .timeout = 120)
{
    struct srv s;
    start(&s, 1, 0);
    char env[256];
    snprintf(env, sizeof(env), "FCCL_STORE_TOKEN_FILE=%s/rw", dir);
    srv_boot_check_job(s.port, env);
    cr_assert_eq(srv_log_count(&s, "before authentication"), 0);
    /* Both ranks joined "init/" (raw key). */
    expect_cli(s.port, "TCPSTORE_TOKEN_FILE=rw", "--raw-keys get init/", 0,
               "2");
    srv_finish(&s);
}

Test(auth, warning_when_exposed)
{
    char *out = NULL, cmd[512];
    /* --port 0 on every interface: warned; stopped by the timeout. */
    snprintf(cmd, sizeof(cmd), "%s/tcpstore-server --port 0 & p=$!; "
             "sleep 0.5; kill $p; wait $p", th_bin_dir());
    th_sh(cmd, 30, &out);
    cr_assert(strstr(out, "reachable from other hosts"), "%s", out);
    free(out);
    snprintf(cmd, sizeof(cmd), "%s/tcpstore-server --port 0 --token-file "
             "%s/rw --auth-required & p=$!; sleep 0.5; kill $p; wait $p",
             th_bin_dir(), dir);
    th_sh(cmd, 30, &out);
    cr_assert(strstr(out, "token authentication enabled"), "%s", out);
    cr_assert(!strstr(out, "reachable from other hosts"), "%s", out);
    free(out);
}

/* PyTorch's LIST_KEYS (17): every key, as i64 count and length-prefixed
 * keys; allowed with the read-only token. */
Test(auth, pytorch_list_keys_17)
{
    struct srv s;
    start(&s, 0, 1);
    expect_cli(s.port, "", "set b 2", 0, NULL);
    expect_cli(s.port, "", "set a 1", 0, NULL);
    expect_cli(s.port, "", "--raw-keys set init/ 1", 0, NULL);
    int fd = cli_modern(s.port);
    uint8_t op = 17;
    cli_send_raw(fd, &op, 1);
    cli_expect_i64(fd, 3);
    cli_expect_cstr(fd, "/a");
    cli_expect_cstr(fd, "/b");
    cli_expect_cstr(fd, "init/");
    close(fd);
    expect_cli(s.port, "", "--token-file ro keys", 0, "a\nb\n");
    srv_finish(&s);
}

/* A modern BARRIER(key, world_size) request into b. */
static void put_barrier(struct codec_buf *b, const char *key, int64_t n)
{
    f_key(b, DIALECT_MODERN, OP_BARRIER, key);
    codec_put_i64(b, n);
}

/* PyTorch's BARRIER (18) through `tcpstore barrier`: three arrivals of
 * N = 3 released together; a short one times out (exit 3) and its
 * increment stays; a raw client's BARRIER then CANCEL_WAIT.  The third
 * arrives once the count shows the first two (up to 10 s): a fixed 0.3 s
 * was too short for two processes to start on a busy machine. */
Test(auth, pytorch_barrier_18)
{
    struct srv s;
    srv_start(&s, NULL);
    char cmd[1024], *out = NULL;
    snprintf(cmd, sizeof(cmd),
             "t=%s/tcpstore; a=127.0.0.1:%d; "
             "b() { $t --timeout 20 --addr $a barrier step 3 && "
             "echo released; }; b & b & i=0; "
             "while [ \"$($t --timeout 5 --addr $a get step)\" != 2 ] && "
             "[ $i -lt 200 ]; do i=$((i + 1)); sleep 0.05; done; "
             "$t --addr $a get step; echo; b; wait",
             th_bin_dir(), s.port);
    int ex = th_sh(cmd, 60, &out);
    cr_assert_eq(ex, 0, "%s", out);
    cr_assert(strstr(out, "2\n"), "two arrivals before the third: %s", out);
    cr_assert_eq(th_count(out, "released"), 3, "%s", out);
    free(out);
    expect_cli(s.port, "", "--timeout 0.3 barrier lone 2", 3, "timed out");
    expect_cli(s.port, "", "get lone", 0, "1");
    /* Raw: park, cancel, WAIT_CANCELED; the connection stays usable. */
    int fd = cli_modern(s.port);
    struct codec_buf b;
    codec_buf_init(&b);
    put_barrier(&b, "/raw", 5);
    cli_send(fd, &b);
    cli_expect_silence(fd, 200);
    codec_put_type(&b, DIALECT_MODERN, OP_CANCEL_WAIT);
    cli_send(fd, &b);
    cli_expect_u8(fd, REPLY_WAIT_CANCELED);
    cr_assert_eq(cli_numkeys(fd, DIALECT_MODERN), 3);
    /* A parked barrier on a connection that goes away is dropped. */
    put_barrier(&b, "/raw", 5);
    cli_send(fd, &b);
    codec_buf_free(&b);
    close(fd);
    expect_cli(s.port, "", "get raw", 0, "2");
    srv_finish(&s);
}

/* A plain ADD that brings the counter to a parked BARRIER's world_size
 * releases it (PROTOCOL.md: STOP_WAITING once the counter reaches
 * world_size); one that falls short does not; a barrier with a larger
 * target stays parked until the counter reaches it. */
Test(auth, add_reaching_target_releases_barrier)
{
    struct srv s;
    srv_start(&s, NULL);
    int b3 = cli_modern(s.port), b5 = cli_modern(s.port);
    struct codec_buf b;
    codec_buf_init(&b);
    put_barrier(&b, "/ab", 3);
    cli_send(b3, &b); /* counter 1, parked for 3 */
    put_barrier(&b, "/ab", 5);
    cli_send(b5, &b); /* counter 2, parked for 5 */
    cli_expect_silence(b3, 200);
    int fd = cli_modern(s.port);
    f_add(&b, DIALECT_MODERN, "/ab", 0);
    cli_send(fd, &b);
    cli_expect_i64(fd, 2);
    cli_expect_silence(b3, 200); /* short: still parked */
    f_add(&b, DIALECT_MODERN, "/ab", 1);
    cli_send(fd, &b);
    cli_expect_i64(fd, 3);
    cli_expect_u8(b3, REPLY_STOP_WAITING);
    cli_expect_silence(b5, 200);
    f_add(&b, DIALECT_MODERN, "/ab", 7);
    cli_send(fd, &b);
    cli_expect_i64(fd, 10);
    cli_expect_u8(b5, REPLY_STOP_WAITING);
    /* Both connections are usable again. */
    cr_assert_eq(cli_numkeys(b3, DIALECT_MODERN), 1);
    cr_assert_eq(cli_numkeys(b5, DIALECT_MODERN), 1);
    codec_buf_free(&b);
    close(fd);
    close(b3);
    close(b5);
    srv_finish(&s);
}

/* ---- failed proofs are limited (issue 25) ---- */

/* A wrong proof (HELLO, then a PROOF whose MAC is garbage) into b. */
static void put_wrong_proof(struct codec_buf *b)
{
    uint8_t msg[1 + AUTH_NONCE_LEN + AUTH_MAC_LEN];
    codec_put_u8(b, STORE_EXT_AUTH_HELLO);
    msg[0] = STORE_EXT_AUTH_PROOF;
    memset(msg + 1, 0x11, sizeof(msg) - 1);
    codec_put_bytes(b, msg, sizeof(msg));
}

/* Read HELLO + PROOF replies until the server closes: how many proofs it
 * refused. */
static int refusals_until_closed(int fd)
{
    int n = 0;
    for (;;) {
        uint8_t r[1 + AUTH_NONCE_LEN + 1];
        size_t got = 0;
        while (got < sizeof(r)) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            cr_assert_gt(poll(&p, 1, TH_IO_MS), 0, "after %d refusals the "
                         "server neither answers nor closes", n);
            ssize_t k = read(fd, r + got, sizeof(r) - got);
            if (k <= 0)
                return n; /* closed (mid-reply or between replies) */
            got += (size_t)k;
        }
        cr_assert_eq(r[0], AUTH_MODE_CHALLENGE);
        cr_assert_eq(r[sizeof(r) - 1], AUTH_REFUSED);
        n++;
    }
}

/* 12,294 wrong proofs on one connection used to be answered and logged
 * one by one.  Now the third closes the connection, and the warnings of
 * an address are summarised. */
Test(auth, failed_proofs_close_the_connection_and_are_summarised,
     .timeout = 60)
{
    struct srv s;
    start(&s, 0, 0);
    int fd = cli_modern(s.port);
    struct codec_buf b;
    codec_buf_init(&b);
    for (int i = 0; i < 50; i++)
        put_wrong_proof(&b);
    cli_send(fd, &b);
    cr_assert_eq(refusals_until_closed(fd), 3,
                 "the third refused proof must close the connection");
    close(fd);
    cr_assert(srv_log_wait(&s, "after 3 refused token proofs", TH_IO_MS));
    cr_assert_eq(srv_log_count(&s, "token refused"), 1,
                 "one warning per refused proof");
    cr_assert(srv_log_wait(&s, "2 more refused proofs from 127.0.0.1 in "
                              "the last 10 s", 13000), "no summary");
    codec_buf_free(&b);
    srv_finish(&s);
}

/* After 10 refused proofs in a minute an address is slowed to one proof
 * a second, right ones included; the others stay fast. */
Test(auth, an_address_that_keeps_failing_is_slowed, .timeout = 60)
{
    struct srv s;
    start(&s, 0, 0);
    struct codec_buf b;
    codec_buf_init(&b);
    for (int c = 0; c < 4; c++) { /* 4 x 3 = 12 refused proofs */
        int fd = cli_modern(s.port);
        for (int i = 0; i < 3; i++)
            put_wrong_proof(&b);
        cli_send(fd, &b);
        cr_assert_eq(refusals_until_closed(fd), 3);
        close(fd);
    }
    /* Three more at once, one per connection: taken a second apart. */
    int fds[3];
    for (int i = 0; i < 3; i++) {
        fds[i] = cli_modern(s.port);
        put_wrong_proof(&b);
        cli_send(fds[i], &b);
    }
    double t0 = th_now(), t[3];
    for (int i = 0; i < 3; i++) {
        uint8_t r[1 + AUTH_NONCE_LEN + 1];
        cli_read(fds[i], r, sizeof(r));
        cr_assert_eq(r[sizeof(r) - 1], AUTH_REFUSED);
        t[i] = th_now() - t0;
    }
    cr_log_info("slowed proofs answered after %.2f, %.2f, %.2f s", t[0],
                t[1], t[2]);
    cr_assert_gt(t[2], 1.7, "third proof after %.2f s: not slowed", t[2]);
    for (int i = 0; i < 3; i++)
        close(fds[i]);
    /* The right token from that address waits its turn, then works. */
    char *out = NULL;
    double t1 = th_now();
    int ex = srv_tcpstore(s.port, dir, "", "--token-file rw set k v", &out);
    cr_assert_eq(ex, 0, "%s", out);
    free(out);
    cr_assert_gt(th_now() - t1, 0.5, "not slowed");
    int fd = cli_modern(s.port);
    uint8_t t_ = STORE_EXT_STATS, h[8];
    cli_send_raw(fd, &t_, 1);
    cli_read(fd, h, 8);
    char *text = calloc(1, codec_get_u64(h) + 1);
    cli_read(fd, text, codec_get_u64(h));
    cr_assert(strstr(text, "auth_proofs_refused 15\n"), "%s", text);
    const char *d = strstr(text, "auth_proofs_delayed ");
    cr_assert(d && atoi(d + 20) >= 3, "%s", text);
    free(text);
    close(fd);
    codec_buf_free(&b);
    srv_finish(&s);
}
