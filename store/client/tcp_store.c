/*
 * The TCPStore kind of store: its table of operations and its handles
 * (a connection shared by a handle and its prefixed views).
 */
#include <stdlib.h>
#include <string.h>

#include "client_int.h"
#include "clock.h"
#include "err.h"

static int handle_new(struct store_client_conn *c, const char *pre,
                      size_t prelen, fccl_store_t **out)
{
    int rc = store_handle_new(&tcp_store_vt, NULL, c->addr, c->timeout_ms,
                              pre, prelen, out);
    if (rc == FCCL_OK)
        (*out)->c = c;
    return rc;
}

int tcp_store_connect(const fccl_store_opts_t *opts, fccl_store_t **out)
{
    if (!opts || !out || !opts->addr)
        return fccl_err(FCCL_ERR_INVALID, "store connect: no address given");
    *out = NULL;
    struct store_client_conn *c = NULL;
    int rc = sc_conn_new(opts, &c);
    if (rc < 0)
        return rc;
    rc = handle_new(c, "/", opts->raw_keys ? 0 : 1, out);
    if (rc < 0) {
        sc_conn_unref(c);
        return rc;
    }
    rc = sc_conn_open(c, fccl_deadline_ms(c->timeout_ms));
    if (rc < 0) {
        tcp_store_close(*out); /* keeps the thread's message */
        *out = NULL;
        return rc;
    }
    return FCCL_OK;
}

int tcp_store_prefixed(fccl_store_t *parent, const char *prefix,
                       fccl_store_t **out)
{
    if (!parent || !prefix || !out)
        return fccl_err(FCCL_ERR_INVALID, "store prefixed: NULL argument");
    struct store_client_conn *c = parent->c;
    return store_handle_view(parent, prefix, &c->mu, &c->refs, out);
}

void tcp_store_close(fccl_store_t *s)
{
    if (!s)
        return;
    sc_conn_unref(s->c);
    store_handle_free(s);
}


/* Every back-end fills the same table (store_vt.h): the rows repeat. */
const struct store_vt tcp_store_vt = {
    .kind = "tcpstore",
    .prefixed = tcp_store_prefixed,
    .close = tcp_store_close,
    .set = tcp_store_set,
    .get = tcp_store_get,
    .add = tcp_store_add,
    .compare_set = tcp_store_compare_set,
    .check = tcp_store_check,
    .wait = tcp_store_wait,
    .delete_key = tcp_store_delete,
    .num_keys = tcp_store_num_keys,
    .append = tcp_store_append,
    .multi_get = tcp_store_multi_get,
    .multi_set = tcp_store_multi_set,
    .ping = tcp_store_ping,
    .list_keys = tcp_store_list_keys,
    .stats = tcp_store_stats,
    .barrier = tcp_store_barrier,
    .queue_push = tcp_store_queue_push,
    .queue_pop = tcp_store_queue_pop,
    .queue_len = tcp_store_queue_len,
};
