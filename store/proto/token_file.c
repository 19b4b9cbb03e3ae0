#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "codec.h"
#include "err.h"
#include "private_file.h"
#include "token_file.h"

int store_read_token(const char *path, unsigned char *out, size_t cap,
                     size_t *len)
{
    int rc = store_check_private_file(path, "token file");
    if (rc < 0)
        return rc;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fccl_err_sys(FCCL_ERR_IO, errno, "token file %s", path);
    size_t n = fread(out, 1, cap, f);
    int err = ferror(f);
    fclose(f);
    if (err)
        return fccl_err(FCCL_ERR_IO, "token file %s: read error", path);
    if (n == cap || cap < TOKEN_MAX)
        return fccl_err(FCCL_ERR_INVALID, "token file %s: longer than %d "
                        "bytes", path, TOKEN_MAX - 1);
    if (n > 0 && out[n - 1] == '\n')
        n--;
    if (n > 0 && out[n - 1] == '\r')
        n--;
    if (memchr(out, '\n', n))
        return fccl_err(FCCL_ERR_AUTH, "token file %s: more than one line",
                        path);
    if (n < TOKEN_MIN)
        return fccl_err(FCCL_ERR_AUTH, "token file %s: the token has %zu "
                        "bytes, at least %d are needed", path, n, TOKEN_MIN);
    *len = n;
    return FCCL_OK;
}

int store_auth_mac(const unsigned char *token, size_t tlen,
                   const unsigned char *snonce, const unsigned char *cnonce,
                   unsigned char *mac)
{
    static const char label[] = "fccl-auth-v1";
    unsigned char msg[sizeof(label) - 1 + 2 * AUTH_NONCE_LEN];
    memcpy(msg, label, sizeof(label) - 1);
    memcpy(msg + sizeof(label) - 1, snonce, AUTH_NONCE_LEN);
    memcpy(msg + sizeof(label) - 1 + AUTH_NONCE_LEN, cnonce, AUTH_NONCE_LEN);
    unsigned int ml = 0;
    if (!HMAC(EVP_sha256(), token, (int)tlen, msg, sizeof(msg), mac, &ml) ||
        ml != AUTH_MAC_LEN)
        return fccl_err(FCCL_ERR_NOMEM, "HMAC-SHA256 failed");
    return FCCL_OK;
}
