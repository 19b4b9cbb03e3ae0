/*
 * Intrusive lists: the links are fields of the element, named by the
 * caller (as in BSD's sys/queue.h), so that one element can sit in
 * several lists at once (a server connection is in the server's list,
 * its address's list and a tier queue).  `head` and `tail` are the
 * list's ends (lvalues); the arguments are evaluated more than once.
 */
#ifndef FCCL_DLIST_H
#define FCCL_DLIST_H

/* Put n first in a doubly linked list. */
#define DLIST_PUSH(head, n, prev, next)                                      \
    do {                                                                     \
        (n)->prev = NULL;                                                    \
        (n)->next = (head);                                                  \
        if (head)                                                            \
            (head)->prev = (n);                                              \
        (head) = (n);                                                        \
    } while (0)

/* Put n last in a singly linked queue that keeps its tail (n->next is
 * the caller's to clear). */
#define QUEUE_APPEND(head, tail, n, next)                                    \
    do {                                                                     \
        if (tail)                                                            \
            (tail)->next = (n);                                              \
        else                                                                 \
            (head) = (n);                                                    \
        (tail) = (n);                                                        \
    } while (0)

/* Put n last in a doubly linked list that keeps its tail. */
#define DLIST_APPEND(head, tail, n, prev, next)                              \
    do {                                                                     \
        (n)->next = NULL;                                                    \
        (n)->prev = (tail);                                                  \
        QUEUE_APPEND(head, tail, n, next);                                   \
    } while (0)

/* Take n out of a doubly linked list (its own links are left as they
 * were). */
#define DLIST_UNLINK(head, n, prev, next)                                    \
    do {                                                                     \
        if ((n)->prev)                                                       \
            (n)->prev->next = (n)->next;                                     \
        else                                                                 \
            (head) = (n)->next;                                              \
        if ((n)->next)                                                       \
            (n)->next->prev = (n)->prev;                                     \
    } while (0)

/* The same for a list that keeps its tail. */
#define DLIST_UNLINK_TAIL(head, tail, n, prev, next)                         \
    do {                                                                     \
        if ((n)->next)                                                       \
            (n)->next->prev = (n)->prev;                                     \
        else                                                                 \
            (tail) = (n)->prev;                                              \
        DLIST_UNLINK(head, n, prev, next);                                   \
    } while (0)

/* Double the buckets of a chained hash table of T (`buckets` a T **,
 * `mask` their count less one, both lvalues), moving each element to the
 * bucket its own `hash` field picks; its link is `next`.  Without memory
 * nothing changes: longer chains, still correct.  (server_slots.c's
 * addresses and waiters.c's key lists.)  Needs <stdint.h>, <stdlib.h>. */
#define HASH_DOUBLE(T, buckets, mask, next, hash)                            \
    do {                                                                     \
        uint64_t n_ = ((mask) + 1) * 2;                                      \
        T **nb_ = calloc(n_, sizeof(*nb_));                                  \
        if (!nb_)                                                            \
            break;                                                           \
        for (uint64_t i_ = 0; i_ <= (mask); i_++) {                          \
            for (T *e_ = (buckets)[i_], *x_; e_; e_ = x_) {                  \
                x_ = e_->next;                                               \
                e_->next = nb_[e_->hash & (n_ - 1)];                         \
                nb_[e_->hash & (n_ - 1)] = e_;                               \
            }                                                                \
        }                                                                    \
        free(buckets);                                                       \
        (buckets) = nb_;                                                     \
        (mask) = n_ - 1;                                                     \
    } while (0)

#endif
