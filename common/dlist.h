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

#endif
