/*
 * Reading an etcd watch stream (etcd_watch.h).
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "etcd_watch.h"

static void first_put(struct etcd_watch *w, json_object *evs)
{
    size_t ne = json_object_array_length(evs);
    for (size_t i = 0; i < ne && !w->found; i++) {
        json_object *e = json_object_array_get_idx(evs, i), *t, *kv;
        if (json_object_object_get_ex(e, "type", &t) &&
            strcmp(json_object_get_string(t), "PUT") != 0)
            continue; /* DELETE */
        if (json_object_object_get_ex(e, "kv", &kv) &&
            ej_kv_of(kv, &w->kv) == 0)
            w->found = 1;
    }
}

static void one_line(struct etcd_watch *w, const char *line, size_t n)
{
    json_object *o = NULL, *res = NULL, *evs = NULL, *err = NULL;
    if (n == 0 || ej_parse(line, n, &o) < 0)
        return;
    int code;
    const char *msg;
    if (json_object_object_get_ex(o, "error", &err) &&
        ej_error(err, &code, &msg)) {
        w->canceled = 1;
        snprintf(w->why, sizeof(w->why), "%s", msg);
    } else if (json_object_object_get_ex(o, "result", &res)) {
        if (ej_bool(res, "canceled")) {
            w->canceled = 1;
            snprintf(w->why, sizeof(w->why), "watch canceled (compacted "
                     "to %" PRId64 ")", ej_i64(res, "compact_revision"));
        }
        if (json_object_object_get_ex(res, "events", &evs) &&
            json_object_is_type(evs, json_type_array))
            first_put(w, evs);
    }
    json_object_put(o);
}

int etcd_watch_feed(struct etcd_reply *r, void *arg)
{
    struct etcd_watch *w = arg;
    char *nl;
    while (!w->found && !w->canceled && (nl = memchr(r->p, '\n', r->len))) {
        size_t n = (size_t)(nl - r->p);
        one_line(w, r->p, n);
        memmove(r->p, nl + 1, r->len - n - 1);
        r->len -= n + 1;
        r->p[r->len] = '\0';
    }
    return w->found || w->canceled;
}
