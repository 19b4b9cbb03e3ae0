#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warn", "info", "debug",
                                          "trace"};

int fccl_log_level_cur = FCCL_LOG_WARN;

/* Runs before main so that FCCL_LOG_LEVEL applies to the very first
 * FCCL_LOG_ON check without a branch on the hot path. */
__attribute__((constructor)) void fccl_log_init_env(void)
{
    const char *s = getenv("FCCL_LOG_LEVEL");
    int lvl = s ? fccl_log_parse_level(s) : -1;
    if (lvl >= 0)
        fccl_log_level_cur = lvl;
}

int fccl_log_set_level(int level)
{
    int old = fccl_log_level_cur;
    if (level < FCCL_LOG_ERROR)
        level = FCCL_LOG_ERROR;
    if (level > FCCL_LOG_TRACE)
        level = FCCL_LOG_TRACE;
    fccl_log_level_cur = level;
    return old;
}

int fccl_log_parse_level(const char *s)
{
    if (!s || !*s)
        return -1;
    if (s[0] >= '0' && s[0] <= '4' && s[1] == '\0')
        return s[0] - '0';
    for (int i = 0; i <= FCCL_LOG_TRACE; i++)
        if (strcasecmp(s, level_names[i]) == 0)
            return i;
    if (strcasecmp(s, "warning") == 0)
        return FCCL_LOG_WARN;
    return -1;
}

void fccl_log_write(int level, const char *subsys, const char *fmt, ...)
{
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s %s [%d] ",
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     level_names[level < 0 ? 0 : level > 4 ? 4 : level], subsys,
                     (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof(line))
        vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    size_t len = strnlen(line, sizeof(line) - 2);
    line[len++] = '\n';
    /* One write per line so that lines of concurrent processes don't mix. */
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w;
}
