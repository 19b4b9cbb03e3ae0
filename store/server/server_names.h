/*
 * Inside store/server/ the public handle and options of fccl/server.h keep
 * their internal names: `struct store_server` is `struct fccl_server` and
 * `struct store_server_config` is `struct fccl_server_opts`.  Every
 * header of this folder that names either includes this one first, so the
 * order of includes in a .c file never makes two different types of them.
 */
#ifndef FCCL_STORE_SERVER_NAMES_H
#define FCCL_STORE_SERVER_NAMES_H

#define store_server fccl_server
#define store_server_config fccl_server_opts

#endif
