#include "err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define ERR_MSG_MAX 1024

static _Thread_local char last_msg[ERR_MSG_MAX];

const char *fccl_version(void) { return FCCL_VERSION_STRING; }

const char *fccl_strerror(int status)
{
    switch (status) {
    case FCCL_OK: return "success";
    case FCCL_ERR_INVALID: return "invalid argument";
    case FCCL_ERR_NOMEM: return "out of memory";
    case FCCL_ERR_TIMEOUT: return "timed out";
    case FCCL_ERR_CONNECT: return "cannot connect";
    case FCCL_ERR_PROTOCOL: return "protocol error";
    case FCCL_ERR_IO: return "I/O error";
    case FCCL_ERR_NOTFOUND: return "not found";
    case FCCL_ERR_UNSUPPORTED: return "not supported";
    case FCCL_ERR_CLOSED: return "connection closed";
    case FCCL_ERR_FABRIC: return "fabric error";
    case FCCL_ERR_ABORTED: return "aborted";
    case FCCL_ERR_PEER: return "peer failed";
    case FCCL_ERR_STATE: return "invalid state";
    case FCCL_ERR_LIMIT: return "limit exceeded";
    case FCCL_ERR_AUTH: return "authentication failed";
    case FCCL_ERR_REVOKED: return "group revoked";
    }
    return "unknown error";
}

const char *fccl_last_error(void) { return last_msg; }

void fccl_err_clear(void) { last_msg[0] = '\0'; }

int fccl_set_error(int status, const char *message)
{
    snprintf(last_msg, sizeof(last_msg), "%s", message ? message : "");
    return status;
}

/* Formatted aside first: the arguments may name the last message. */
int fccl_verr(int code, const char *fmt, va_list ap)
{
    char msg[ERR_MSG_MAX];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    memcpy(last_msg, msg, sizeof(msg));
    return code;
}

int fccl_err(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fccl_verr(code, fmt, ap);
    va_end(ap);
    return code;
}

int fccl_err_sys(int code, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_msg, sizeof(last_msg), fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof(last_msg))
        snprintf(last_msg + n, sizeof(last_msg) - (size_t)n, ": %s",
                 strerror(errnum));
    return code;
}

int fccl_err_wrap(int code, const char *fmt, ...)
{
    char prefix[256], old[ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, last_msg, sizeof(old));
    /* Build by hand: truncation of a long message is fine here. */
    _Static_assert(sizeof(prefix) + 3 < ERR_MSG_MAX, "prefix fits");
    size_t pl = strnlen(prefix, sizeof(prefix) - 1);
    size_t ol = strnlen(old, sizeof(old) - 1);
    memcpy(last_msg, prefix, pl);
    memcpy(last_msg + pl, ": ", 2);
    size_t room = sizeof(last_msg) - pl - 3;
    if (ol > room)
        ol = room;
    memcpy(last_msg + pl + 2, old, ol);
    last_msg[pl + 2 + ol] = '\0';
    return code;
}
