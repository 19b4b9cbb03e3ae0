#include <errno.h>
#include <sys/stat.h>

#include "err.h"
#include "private_file.h"

int store_check_private_file(const char *path, const char *what)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return fccl_err_sys(FCCL_ERR_IO, errno, "%s %s", what, path);
    if (st.st_mode & 077)
        return fccl_err(FCCL_ERR_AUTH,
                        "%s %s is readable or writable by others (mode "
                        "%04o): refused; chmod 600 %s",
                        what, path, (unsigned)(st.st_mode & 07777), path);
    return FCCL_OK;
}
