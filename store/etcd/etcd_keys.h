/*
 * The etcd key space of one store (README "High availability").
 *
 * A store key K (the TCPStore wire key: "/" + the caller's key unless
 * raw) lives at the etcd key PREFIX K, its bytes unchanged, so etcdctl,
 * the etcd:// client and tcpstore-server --backend all see one key.
 * What the store keeps for itself lives under PREFIX "\0", which no
 * TCPStore key reaches (PyTorch's keys start with "/", fccl's C keys hold
 * no NUL), and which counts and listings leave out:
 *   PREFIX "\0q" K "\0" ID   one queue item of queue K (FIFO by etcd's
 *                            create revision)
 *   PREFIX "\0r" ID          a client's receipt: the last conditional
 *                            write it made, to tell after a lost reply
 *                            whether that write was applied
 *   PREFIX "\0lease"         the job's lease id (decimal), shared by the
 *                            ranks that found no launcher's lease
 */
#ifndef FCCL_STORE_ETCD_KEYS_H
#define FCCL_STORE_ETCD_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* A byte string built by the helpers below (malloc'd; NULL p: no
 * memory). */
struct ek_key {
    uint8_t *p;
    size_t n;
};

/* The first key after every key that starts with p[0..n): p with its last
 * byte below 0xff raised by one, the rest dropped.  Returns its length
 * (0: no such key, which etcd writes "\0", "to the end").  out holds n
 * bytes. */
size_t ek_prefix_end(const uint8_t *p, size_t n, uint8_t *out);

/* Concatenate up to four pieces (NULL pieces skipped). */
struct ek_key ek_cat(const void *a, size_t an, const void *b, size_t bn,
                     const void *c, size_t cn, const void *d, size_t dn);

/* [*lo, *hi) covering the keys that start with p[0..n); for an empty
 * p, every store key of PREFIX (the internal ones left out). */
int ek_user_range(const char *prefix, size_t plen, const void *p, size_t n,
                  struct ek_key *lo, struct ek_key *hi);

/* PREFIX "\0q" K "\0": the start of queue K's items. */
struct ek_key ek_queue(const char *prefix, size_t plen, const void *k,
                       size_t kl);

void ek_free(struct ek_key *k);

#endif
