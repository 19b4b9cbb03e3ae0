/*
 * fccl core: version, status codes, per-thread error messages, logging knobs.
 *
 * Every fallible fccl call returns an int status: FCCL_OK (0) on success, a
 * negative FCCL_ERR_* code on failure.  The call also leaves a human-readable
 * message for the calling thread, naming the peer, key or rank involved and
 * the cause; read it with fccl_last_error() before the next fccl call on the
 * same thread overwrites it.  Messages are per thread, so two threads that
 * fail at once never see each other's text.
 */
#ifndef FCCL_CORE_H
#define FCCL_CORE_H

#include <stddef.h>
#include <stdint.h>

#ifndef FCCL_API
#define FCCL_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FCCL_VERSION_MAJOR 0
#define FCCL_VERSION_MINOR 1
#define FCCL_VERSION_PATCH 0
#define FCCL_VERSION_STRING "0.1.0"
#define FCCL_VERSION_NUM                                                       \
    (FCCL_VERSION_MAJOR * 10000 + FCCL_VERSION_MINOR * 100 + FCCL_VERSION_PATCH)

/* The library's version string, e.g. "0.1.0". Never fails. */
const char *fccl_version(void);

enum fccl_status {
    FCCL_OK = 0,
    FCCL_ERR_INVALID = -1,     /* bad argument (caller's mistake) */
    FCCL_ERR_NOMEM = -2,       /* allocation failed */
    FCCL_ERR_TIMEOUT = -3,     /* a deadline passed */
    FCCL_ERR_CONNECT = -4,     /* could not reach a server or peer */
    FCCL_ERR_PROTOCOL = -5,    /* peer sent bytes that break the protocol */
    FCCL_ERR_IO = -6,          /* a system call failed */
    FCCL_ERR_NOTFOUND = -7,    /* key or item does not exist */
    FCCL_ERR_UNSUPPORTED = -8, /* not available (dialect, provider, op) */
    FCCL_ERR_CLOSED = -9,      /* connection closed by the peer */
    FCCL_ERR_FABRIC = -10,     /* libfabric call or completion failed */
    FCCL_ERR_ABORTED = -11,    /* group aborted by fccl_group_abort */
    FCCL_ERR_PEER = -12,       /* a remote rank failed or vanished */
    FCCL_ERR_STATE = -13,      /* call not valid in the current state */
    FCCL_ERR_LIMIT = -14,      /* a configured limit was exceeded */
    FCCL_ERR_AUTH = -15,       /* authentication or TLS failure */
};

/* Static name of a status code ("timed out", ...). Never NULL. */
const char *fccl_strerror(int status);

/* Message of the calling thread's most recent error ("" if none).  The
 * pointer stays valid until the next fccl call on this thread. */
const char *fccl_last_error(void);

#ifdef __cplusplus
}
#endif
#endif
