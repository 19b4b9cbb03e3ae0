/* Internal error helpers: set the per-thread message and return the code. */
#ifndef FCCL_ERR_H
#define FCCL_ERR_H

#include <stdarg.h>

#include "fccl/core.h"

/* Record a formatted message for this thread and return `code`, so that
 * error paths read `return fccl_err(FCCL_ERR_IO, "connect %s: %s", a, e);`. */
int fccl_err(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* fccl_err with a va_list, for functions that take a format themselves. */
int fccl_verr(int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));

/* Same, appending ": strerror(errnum)". */
int fccl_err_sys(int code, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepend context to the current message, keeping the code:
 * `return fccl_err_wrap(rc, "rank %d", r);` gives "rank 3: <old message>". */
int fccl_err_wrap(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void fccl_err_clear(void);

/* Evaluate a status expression; on failure jump to `label` with rc set. */
#define CHECK_GOTO(expr, rc, label)                                            \
    do {                                                                       \
        (rc) = (expr);                                                         \
        if ((rc) < 0)                                                          \
            goto label;                                                        \
    } while (0)

#endif
