/*
 * libFuzzer target: the token exchange and the rights gate
 * (store/server/server_auth.c) on one server connection.
 *
 * One in-process server lives across inputs, with a read-write and a
 * read-only token and --auth-required.  The input's first byte chooses
 * what the harness does before handing over: bits 0-1 = 1 authenticate
 * with the read-write token, 2 with the read-only one, 3 with a wrong one,
 * 0 nothing (it reads the server's nonce and computes a real proof, which
 * a fuzzer could not); bit 7 feeds the rest one byte at a time.  The rest
 * of the input is raw requests (AUTH_HELLO/AUTH_PROOF included, so stray
 * and repeated proofs are covered).  Checked: no crash or sanitizer report,
 * and nothing held or queued once the connection is gone.
 */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz_server.h"
#include "token_file.h"

static struct store_server *srv;
static const char *const toks[] = {"fuzz-read-write-token-000",
                                   "fuzz-read-only-token-111",
                                   "fuzz-wrong-token-2222222"};

static void token_file(char *path, size_t len, const char *dir, int i)
{
    snprintf(path, len, "%s/t%d", dir, i);
    FILE *f = fopen(path, "w");
    ASSERT(f);
    fprintf(f, "%s\n", toks[i]);
    fclose(f);
    ASSERT(chmod(path, 0600) == 0);
}

static void setup(void)
{
    signal(SIGPIPE, SIG_IGN); /* writes after the server closed: EPIPE */
    char dir[] = "/tmp/fccl-fuzz-auth-XXXXXX";
    ASSERT(mkdtemp(dir));
    struct store_server_config c;
    fuzz_server_config(&c, 1u << 16);
    token_file(c.token_file, sizeof(c.token_file), dir, 0);
    token_file(c.read_token_file, sizeof(c.read_token_file), dir, 1);
    c.auth_required = 1;
    ASSERT(fccl_server_create(&c, &srv) == 0);
    /* The tokens are loaded: the files are not needed any more. */
    unlink(c.token_file);
    unlink(c.read_token_file);
    rmdir(dir);
}

static void turn(void) { event_base_loop(srv->base, EVLOOP_NONBLOCK); }

static int read_some(int fd, uint8_t *buf, size_t n)
{
    size_t got = 0;
    for (int i = 0; i < 100 && got < n; i++) {
        turn();
        ssize_t r = read(fd, buf + got, n - got);
        if (r > 0)
            got += (size_t)r;
        else if (r == 0 || errno != EAGAIN)
            break;
    }
    return got == n ? 0 : -1;
}

/* VALIDATE, HELLO, a real proof with token i. */
static void authenticate(int fd, int i)
{
    uint8_t v[5] = {0, 0xCE, 0xF7, 0x85, 0x3C}, h = STORE_EXT_AUTH_HELLO;
    ASSERT(write(fd, v, 5) == 5 && write(fd, &h, 1) == 1);
    uint8_t reply[1 + AUTH_NONCE_LEN];
    ASSERT(read_some(fd, reply, sizeof(reply)) == 0);
    ASSERT(reply[0] == AUTH_MODE_CHALLENGE);
    uint8_t msg[1 + AUTH_NONCE_LEN + AUTH_MAC_LEN];
    msg[0] = STORE_EXT_AUTH_PROOF;
    memset(msg + 1, 0x42, AUTH_NONCE_LEN);
    ASSERT(store_auth_mac((const unsigned char *)toks[i], strlen(toks[i]),
                          reply + 1, msg + 1, msg + 1 + AUTH_NONCE_LEN) == 0);
    ASSERT(write(fd, msg, sizeof(msg)) == (ssize_t)sizeof(msg));
    uint8_t res = 9;
    ASSERT(read_some(fd, &res, 1) == 0);
    ASSERT(res == (i == 0 ? AUTH_READ_WRITE : i == 1 ? AUTH_READ_ONLY
                                                     : AUTH_REFUSED));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!srv)
        setup();
    if (size < 1)
        return 0;
    /* A new address per input: refused proofs slow an address down (one
     * proof a second after 10), which would stall later inputs. */
    static uint32_t n_in;
    char addr[32];
    n_in++;
    snprintf(addr, sizeof(addr), "10.%u.%u.%u:1", (n_in >> 16) & 255,
             (n_in >> 8) & 255, n_in & 255);
    int fd = fuzz_client(srv, addr);
    int mode = data[0] & 3;
    if (mode)
        authenticate(fd, mode - 1);
    size_t piece = data[0] & 0x80 ? 1 : 4096;
    fuzz_feed(srv, fd, data + 1, size - 1, piece);
    fuzz_close_and_check(srv, fd);
    return 0;
}
