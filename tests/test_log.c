/*
 * Logging: FCCL_LOG_SUBSYS selects subsystems (a list, or '^' and a list to
 * exclude), FCCL_LOG_LEVEL the level, and at debug level warnings carry
 * file:line.  Each case runs in a child process, since the environment is
 * read once per process, and captures what the child wrote to stderr.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"

/* Run LOG_WARN in STORE, BOOT and FABRIC and LOG_DEBUG in COLL with the
 * given variables; return what was logged (static buffer). */
static const char *logged(const char *level, const char *subsys)
{
    static char out[8192];
    int p[2];
    cr_assert_eq(pipe(p), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        dup2(p[1], STDERR_FILENO);
        close(p[0]);
        if (level)
            setenv("FCCL_LOG_LEVEL", level, 1);
        else
            unsetenv("FCCL_LOG_LEVEL");
        if (subsys)
            setenv("FCCL_LOG_SUBSYS", subsys, 1);
        else
            unsetenv("FCCL_LOG_SUBSYS");
        LOG_WARN("STORE", "store-line");
        LOG_WARN("BOOT", "boot-line");
        LOG_WARN("FABRIC", "fabric-line");
        LOG_DEBUG("COLL", "coll-debug-line");
        _exit(0);
    }
    close(p[1]);
    size_t n = 0;
    ssize_t r;
    while ((r = read(p[0], out + n, sizeof(out) - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = '\0';
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    return out;
}

Test(log, default_shows_warnings_of_every_subsystem)
{
    const char *o = logged(NULL, NULL);
    cr_expect(strstr(o, "store-line") && strstr(o, "boot-line") &&
              strstr(o, "fabric-line"), "%s", o);
    cr_expect_null(strstr(o, "coll-debug-line"), "%s", o);
    cr_expect_null(strstr(o, "test_log.c:"), "no file:line at warn: %s", o);
}

Test(log, include_list)
{
    const char *o = logged("warn", "STORE,boot");
    cr_expect(strstr(o, "store-line") && strstr(o, "boot-line"), "%s", o);
    cr_expect_null(strstr(o, "fabric-line"), "%s", o);
}

Test(log, exclude_list)
{
    const char *o = logged("warn", "^FABRIC");
    cr_expect(strstr(o, "store-line") && strstr(o, "boot-line"), "%s", o);
    cr_expect_null(strstr(o, "fabric-line"), "%s", o);
}

Test(log, all_and_debug_file_line)
{
    const char *o = logged("debug", "ALL");
    cr_expect(strstr(o, "coll-debug-line") && strstr(o, "fabric-line"), "%s",
              o);
    cr_expect_not_null(strstr(o, "test_log.c:"), "warnings name file:line at "
                       "debug level: %s", o);
}
