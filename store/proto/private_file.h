/*
 * Secret files (TLS keys, tokens) must not be readable by anyone but their
 * owner: a key copied around with mode 0644 is a key others can read.
 */
#ifndef FCCL_STORE_PRIVATE_FILE_H
#define FCCL_STORE_PRIVATE_FILE_H

/* FCCL_OK if `path` exists and its mode has none of 077 set; else
 * FCCL_ERR_AUTH (or FCCL_ERR_IO if it cannot be examined) with a message
 * naming `what`, the path, the mode and the chmod that fixes it. */
int store_check_private_file(const char *path, const char *what);

#endif
