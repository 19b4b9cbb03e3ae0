/*
 * The store server as a library (fccl/server.h), the way the bootstrap
 * embeds it on rank 0: option parsing and checks, create on a free port,
 * serve from a thread, stop from another thread (or before running), a
 * busy port, and teardown with clients still connected and waits parked.
 */
#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "fccl/core.h"
#include "fccl/store.h"
#include "lib/proc.h"
#include "lib/srv.h"
#include "lib/wire.h"
#include "net.h"

#include <pthread.h>

#include "fccl/server.h"

TestSuite(api, .timeout = 60);

Test(api, defaults_match_the_design)
{
    fccl_server_opts_t c;
    fccl_server_opts_init(&c);
    cr_assert_str_eq(c.host, "");
    cr_assert_eq(c.port, 29500);
    cr_assert_eq(c.timeout_ms, 300000);
    cr_assert_eq(c.max_key, 8192);
    cr_assert_eq(c.max_value, 64ull << 20);
    cr_assert_eq(c.max_keys_per_req, 131072);
    cr_assert_eq(c.max_conns, 65536);
    cr_assert_eq(c.max_total_bytes, 4ull << 30);
    cr_assert_eq(c.log_level, -1);
    cr_assert_eq(c.handle_signals, 0);
    cr_assert_eq(fccl_server_opts_check(&c), FCCL_OK);
}

Test(api, config_set_parses_and_checks)
{
    fccl_server_opts_t c;
    fccl_server_opts_init(&c);
    cr_assert_eq(fccl_server_opts_set(&c, "max-value-bytes", "1GiB"), 0);
    cr_assert_eq(c.max_value, 1ull << 30);
    cr_assert_eq(fccl_server_opts_set(&c, "max-value", "3M"), 0);
    cr_assert_eq(c.max_value, 3ull << 20);
    cr_assert_eq(fccl_server_opts_set(&c, "max_key_bytes", "512"), 0);
    cr_assert_eq(c.max_key, 512);
    cr_assert_eq(fccl_server_opts_set(&c, "max-total-bytes", "2G"), 0);
    cr_assert_eq(c.max_total_bytes, 2ull << 30);
    cr_assert_eq(fccl_server_opts_set(&c, "timeout", "1.5"), 0);
    cr_assert_eq(c.timeout_ms, 1500);
    cr_assert_eq(fccl_server_opts_set(&c, "wait-for-workers", ""), 0);
    cr_assert_eq(c.wait_for_workers, 1);
    cr_assert_eq(fccl_server_opts_set(&c, "wait-for-workers", "off"), 0);
    cr_assert_eq(c.wait_for_workers, 0);
    cr_assert_eq(fccl_server_opts_set(&c, "host", "[::1]"), 0);
    cr_assert_str_eq(c.host, "::1");
    cr_assert_eq(fccl_server_opts_set(&c, "host", "*"), 0);
    cr_assert_str_eq(c.host, "");
    cr_assert_eq(fccl_server_opts_set(&c, "log-level", "debug"), 0);
    cr_assert_eq(c.log_level, 3);

    static const char *const bad[][2] = {
        {"port", "-1"},       {"port", "65536"},    {"port", "x"},
        {"max-value", "12Q"}, {"max-value", ""},    {"timeout", "soon"},
        {"nonsense", "1"},    {"log-level", "loud"}, {"wait-for-workers", "2"},
        {"max-key", "99999999999999999999"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int rc = fccl_server_opts_set(&c, bad[i][0], bad[i][1]);
        cr_assert_eq(rc, FCCL_ERR_INVALID, "%s=%s", bad[i][0], bad[i][1]);
        cr_assert(strstr(fccl_last_error(), bad[i][0]), "message '%s'",
                  fccl_last_error());
    }
    fccl_server_opts_init(&c);
    c.max_value = (1ull << 30) + 1;
    cr_assert_eq(fccl_server_opts_check(&c), FCCL_ERR_INVALID);
    fccl_server_opts_init(&c);
    c.max_key = 2u << 20;
    cr_assert_eq(fccl_server_opts_check(&c), FCCL_ERR_INVALID);
    fccl_server_opts_init(&c);
    c.wait_for_workers = 1;
    cr_assert_eq(fccl_server_opts_check(&c), FCCL_ERR_INVALID);
}

Test(api, config_file_errors_name_the_line)
{
    char path[] = "/tmp/fccl-api-conf-XXXXXX";
    int fd = mkstemp(path);
    static const char text[] = "port = 0\n# fine\nmax-value-bytes 12\n";
    cr_assert_eq(write(fd, text, sizeof(text) - 1), (ssize_t)sizeof(text) - 1);
    close(fd);
    fccl_server_opts_t c;
    fccl_server_opts_init(&c);
    cr_assert_eq(fccl_server_opts_load(&c, path), FCCL_ERR_INVALID);
    cr_assert(strstr(fccl_last_error(), ":3:"), "%s", fccl_last_error());
    cr_assert_eq(c.port, 0, "lines before the bad one applied");
    unlink(path);
    cr_assert_eq(fccl_server_opts_load(&c, path), FCCL_ERR_IO);
}

static void embedded_config(fccl_server_opts_t *c)
{
    fccl_server_opts_init(c);
    c->port = 0;
    snprintf(c->host, sizeof(c->host), "127.0.0.1");
}

Test(api, serve_from_a_thread_and_stop)
{
    fccl_server_opts_t c;
    embedded_config(&c);
    fccl_server_t *s;
    cr_assert_eq(fccl_server_create(&c, &s), FCCL_OK, "%s",
                 fccl_last_error());
    int port = fccl_server_port(s);
    cr_assert(port > 0);
    char want[64];
    snprintf(want, sizeof(want), "127.0.0.1:%d", port);
    cr_assert_str_eq(fccl_server_address(s), want);
    /* Connections queue before the loop runs. */
    int early = cli_modern(port);
    cr_assert_eq(fccl_server_start(s), FCCL_OK);
    cr_assert_eq(fccl_server_start(s), FCCL_ERR_STATE);
    cr_assert_eq(cli_numkeys(early, DIALECT_MODERN), 0);
    struct codec_buf b;
    codec_buf_init(&b);
    f_add(&b, DIALECT_MODERN, "init/", 1);
    f_wait1(&b, DIALECT_MODERN, "/never"); /* parked at teardown */
    cli_send(early, &b);
    cli_expect_i64(early, 1);
    cr_assert_eq(fccl_server_joined(s), 1);
    int other = cli_connect(port);
    f_set(&b, DIALECT_LEGACY, "/x", "1");
    cli_send(other, &b);
    cr_assert_eq(cli_numkeys(other, DIALECT_LEGACY), 2);
    /* stop + free from this thread while clients are connected. */
    double t0 = th_now();
    fccl_server_stop(s);
    fccl_server_free(s);
    cr_assert_lt(th_now() - t0, 2.0);
    cli_expect_closed(early, TH_IO_MS);
    cli_expect_closed(other, TH_IO_MS);
    close(early);
    close(other);
    codec_buf_free(&b);
    /* The port is free again. */
    c.port = port;
    cr_assert_eq(fccl_server_create(&c, &s), FCCL_OK, "%s",
                 fccl_last_error());
    fccl_server_free(s);
}

struct runner {
    fccl_server_t *s;
    int rc;
};

static void *run_main(void *arg)
{
    struct runner *r = arg;
    r->rc = fccl_server_run(r->s);
    return NULL;
}

Test(api, stop_before_run_and_from_other_threads)
{
    fccl_server_opts_t c;
    embedded_config(&c);
    fccl_server_t *s;
    cr_assert_eq(fccl_server_create(&c, &s), FCCL_OK);
    fccl_server_stop(s); /* before run: run returns at once */
    double t0 = th_now();
    cr_assert_eq(fccl_server_run(s), FCCL_OK);
    cr_assert_lt(th_now() - t0, 1.0);
    /* Run again in a thread of ours; stop it from here. */
    struct runner r = {s, -99};
    pthread_t t;
    pthread_create(&t, NULL, run_main, &r);
    int fd = cli_modern(fccl_server_port(s));
    cr_assert_eq(cli_numkeys(fd, DIALECT_MODERN), 0);
    fccl_server_stop(s);
    fccl_server_stop(s); /* twice is fine */
    pthread_join(t, NULL);
    cr_assert_eq(r.rc, FCCL_OK);
    close(fd);
    fccl_server_free(s);
    fccl_server_free(NULL);
}

Test(api, busy_port_and_bad_config_fail_cleanly)
{
    fccl_server_opts_t c;
    embedded_config(&c);
    fccl_server_t *a, *b;
    cr_assert_eq(fccl_server_create(&c, &a), FCCL_OK);
    c.port = fccl_server_port(a);
    cr_assert_eq(fccl_server_create(&c, &b), FCCL_ERR_IO);
    cr_assert_null(b);
    cr_assert(strstr(fccl_last_error(), "in use"), "%s", fccl_last_error());
    fccl_server_free(a);
    embedded_config(&c);
    c.max_keys_per_req = 0;
    cr_assert_eq(fccl_server_create(&c, &b), FCCL_ERR_INVALID);
    embedded_config(&c);
    snprintf(c.host, sizeof(c.host), "no-such-host.invalid");
    cr_assert_eq(fccl_server_create(&c, &b), FCCL_ERR_IO);
}

Test(api, all_interfaces_listens_on_v4_and_v6)
{
    fccl_server_opts_t c;
    fccl_server_opts_init(&c);
    c.port = 0;
    fccl_server_t *s;
    cr_assert_eq(fccl_server_create(&c, &s), FCCL_OK);
    cr_assert_eq(fccl_server_start(s), FCCL_OK);
    int port = fccl_server_port(s);
    int v4 = cli_modern(port);
    cr_assert_eq(cli_numkeys(v4, DIALECT_MODERN), 0);
    close(v4);
    int v6 = fccl_tcp_connect("::1", port, fccl_deadline_ms(2000));
    if (v6 >= 0) {
        cr_assert_eq(cli_numkeys(v6, DIALECT_LEGACY), 0);
        close(v6);
    }
    fccl_server_free(s);
}
