/** @file fccl/core.h
 *
 * fccl core: the version, the status codes every call returns, and the
 * per-thread error message.
 *
 * Status codes.  Every fallible fccl call returns an int: FCCL_OK (0) on
 * success, a negative FCCL_ERR_* code on failure.  No call aborts the
 * process on bad input; it returns FCCL_ERR_INVALID instead.  A few calls
 * that only report a fact return a plain value instead (a rank, a size, a
 * string); their comments say so.
 *
 * Error messages.  A failing call also leaves a one-line, human-readable
 * message for the calling thread that names the peer (address or rank),
 * the key, the group or the tag involved and the cause.  Read it with
 * fccl_last_error().
 * Messages are per thread, so two threads that fail at once never see each
 * other's text; the message of an asynchronous operation is handed to the
 * thread that collects it with fccl_wait() or fccl_test().
 *
 * Logging.  The library logs to stderr, one line per event, at the level
 * named by the environment variable FCCL_LOG_LEVEL (error, warn, info,
 * debug, trace, or 0-4; default warn), read once when the library loads.
 *
 * Symbols.  Every function of the public headers is marked FCCL_API
 * (default visibility); everything else in the library is internal.  A
 * program may define FCCL_API itself before including any fccl header
 * (for example to nothing) if its toolchain needs something else.
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

/** @name Version
 * The version of the headers, fixed at compile time.  Compare
 * FCCL_VERSION_NUM (major * 10000 + minor * 100 + patch) in #if tests;
 * compare with fccl_version() at run time to detect a program built
 * against other headers than the library it loaded.
 * @{ */
#define FCCL_VERSION_MAJOR 0
#define FCCL_VERSION_MINOR 1
#define FCCL_VERSION_PATCH 0
#define FCCL_VERSION_STRING "0.1.0"
#define FCCL_VERSION_NUM                                                       \
    (FCCL_VERSION_MAJOR * 10000 + FCCL_VERSION_MINOR * 100 + FCCL_VERSION_PATCH)
/** @} */

/**
 * The version of the loaded library, e.g. "0.1.0" (FCCL_VERSION_STRING of
 * the headers it was built with).
 *
 * Never blocks, never fails.  Thread-safe.
 *
 * @return a static string owned by the library; never NULL, never freed.
 */
FCCL_API const char *fccl_version(void);

/**
 * Status codes.  FCCL_OK is 0; every error is negative, so `rc < 0` tests
 * for failure.  Each function's comment lists the codes it can return.
 */
enum fccl_status {
    FCCL_OK = 0,               /**< success */
    FCCL_ERR_INVALID = -1,     /**< bad argument (caller's mistake) */
    FCCL_ERR_NOMEM = -2,       /**< allocation failed */
    FCCL_ERR_TIMEOUT = -3,     /**< a deadline passed */
    FCCL_ERR_CONNECT = -4,     /**< could not reach a server or peer */
    FCCL_ERR_PROTOCOL = -5,    /**< peer sent bytes that break the protocol,
                                    or sizes disagree between ranks */
    FCCL_ERR_IO = -6,          /**< a system call failed */
    FCCL_ERR_NOTFOUND = -7,    /**< key or item does not exist */
    FCCL_ERR_UNSUPPORTED = -8, /**< not available (dialect, provider, op) */
    FCCL_ERR_CLOSED = -9,      /**< connection closed by the peer */
    FCCL_ERR_FABRIC = -10,     /**< libfabric call or completion failed */
    FCCL_ERR_ABORTED = -11,    /**< group aborted by fccl_group_abort */
    FCCL_ERR_PEER = -12,       /**< a remote rank failed or vanished */
    FCCL_ERR_STATE = -13,      /**< call not valid in the current state */
    FCCL_ERR_LIMIT = -14,      /**< a configured limit was exceeded */
    FCCL_ERR_AUTH = -15,       /**< authentication or TLS failure */
    FCCL_ERR_REVOKED = -16,    /**< group revoked by a member
                                    (fccl_group_revoke, fccl/pg.h) */
};

/**
 * The static name of a status code: "success", "timed out", ...
 *
 * Never blocks, never fails.  Thread-safe.
 *
 * @param status any int; codes that are not an fccl_status give
 *     "unknown error".
 * @return a static string owned by the library; never NULL, never freed.
 */
FCCL_API const char *fccl_strerror(int status);

/**
 * The message of the calling thread's most recent error, or "" if this
 * thread has seen none.
 *
 * Read it right after a call returned a negative status: successful calls
 * do not clear it, and any later fccl call on this thread may overwrite
 * it.  Messages longer than 1023 bytes are truncated.
 *
 * Never blocks, never fails.  Thread-safe (each thread has its own).
 *
 * @return a pointer into a per-thread buffer owned by the library (do not
 *     free it); the text is valid until this thread's next fccl call.
 */
FCCL_API const char *fccl_last_error(void);

/**
 * Set the calling thread's error message, for code that plugs into fccl
 * (the entries of a fccl_store_ops_t table): fccl prefixes it with its
 * own context.
 *
 * Never blocks, never fails.  Thread-safe (each thread has its own).
 *
 * @param status returned as it is, so that `return fccl_set_error(rc,
 *     msg);` reads naturally.
 * @param message the text (truncated at 1023 bytes); NULL clears it.
 * @return status.
 */
FCCL_API int fccl_set_error(int status, const char *message);

#ifdef __cplusplus
}
#endif
#endif
