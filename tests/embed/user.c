/*
 * A user's program that happens to define names libfccl uses inside
 * (boot, kv_find, tp_open, sc_read, coll_select): it must link against both
 * the static and the shared library without a clash, and its own
 * definitions must be the ones it calls.  Then it runs a one-rank job
 * through the public API only.  `make check-embed` builds and runs it.
 */
#include <stdio.h>
#include <string.h>

#include <fccl/fccl.h>

int boot = 7;
int kv_find(void) { return 11; }
int tp_open(void) { return 13; }
int sc_read(void) { return 17; }
int coll_select(void) { return 19; }

int main(int argc, char **argv)
{
    if (boot + kv_find() + tp_open() + sc_read() + coll_select() != 67) {
        fprintf(stderr, "embed: the program's own symbols were replaced\n");
        return 1;
    }
    fccl_init_opts_t o;
    fccl_init_opts_init(&o);
    char method[64];
    snprintf(method, sizeof(method), "tcp://127.0.0.1:%s",
             argc > 1 ? argv[1] : "29531");
    o.init_method = method;
    o.world_size = 1;
    o.rank = 0;
    o.host_store = 1;
    o.provider = "shm";
    o.timeout_ms = 20000;
    fccl_group_t *world;
    if (fccl_init(&o, &world) != FCCL_OK) {
        fprintf(stderr, "embed: fccl_init: %s\n", fccl_last_error());
        return 1;
    }
    float v[3] = {1, 2, 3};
    int rc = fccl_all_reduce(v, v, 3, FCCL_FLOAT32, FCCL_SUM, world, NULL);
    fccl_finalize();
    if (rc != FCCL_OK || v[2] != 3) {
        fprintf(stderr, "embed: all_reduce: %s\n", fccl_last_error());
        return 1;
    }
    printf("embed: fccl %s linked beside the program's own boot, kv_find, "
           "tp_open, sc_read, coll_select: ok\n", fccl_version());
    return 0;
}
