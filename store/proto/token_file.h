/*
 * Token files (tcpstore-server --token-file, tcpstore --token-file): one
 * line of at least 16 bytes; a trailing newline (and CR) is ignored.  The
 * file must not be readable by group or others.
 */
#ifndef FCCL_STORE_TOKEN_FILE_H
#define FCCL_STORE_TOKEN_FILE_H

#include <stddef.h>

#define TOKEN_MIN 16
#define TOKEN_MAX 4096

/* Read the token of `path` into out (cap >= TOKEN_MAX), *len its length.
 * FCCL_OK; FCCL_ERR_AUTH (mode & 077, too short, more than one line);
 * FCCL_ERR_IO (cannot be read); FCCL_ERR_INVALID (longer than TOKEN_MAX). */
int store_read_token(const char *path, unsigned char *out, size_t cap,
                     size_t *len);

/* HMAC-SHA256 over "fccl-auth-v1", the server nonce and the client nonce
 * (AUTH_NONCE_LEN bytes each) with the token as key, into mac (32 bytes).
 * FCCL_OK or FCCL_ERR_NOMEM. */
int store_auth_mac(const unsigned char *token, size_t tlen,
                   const unsigned char *snonce, const unsigned char *cnonce,
                   unsigned char *mac);

#endif
