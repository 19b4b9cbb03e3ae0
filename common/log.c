#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static const char *const level_names[] = {"error", "warn", "info", "debug",
                                          "trace"};

/* Above every level until the environment is read, so the first log call
 * of any level reaches fccl_log_write, which reads it. */
int fccl_log_level_cur = FCCL_LOG_TRACE + 1;

/* FCCL_LOG_SUBSYS, parsed: the names listed and whether they are the only
 * ones shown (include) or the ones hidden (exclude). */
#define SUBSYS_MAX 16
static struct {
    int exclude;
    int n; /* 0 with !exclude: everything */
    char names[SUBSYS_MAX][16];
} subsys_sel;

static pthread_once_t env_once = PTHREAD_ONCE_INIT;
static int level_set_by_program;

static void parse_subsys(const char *s)
{
    if (!s || !*s)
        return;
    if (*s == '^') {
        subsys_sel.exclude = 1;
        s++;
    }
    while (*s && subsys_sel.n < SUBSYS_MAX) {
        size_t len = strcspn(s, ",");
        int all = len == 3 && strncasecmp(s, "ALL", 3) == 0;
        if (all && !subsys_sel.exclude) { /* ALL: no filter */
            subsys_sel.n = 0;
            return;
        }
        if (len && len < sizeof(subsys_sel.names[0])) {
            memcpy(subsys_sel.names[subsys_sel.n], s, len);
            subsys_sel.names[subsys_sel.n++][len] = '\0';
        }
        s += len + (s[len] == ',');
    }
}

static void read_env(void)
{
    const char *s = getenv("FCCL_LOG_LEVEL");
    int lvl = s ? fccl_log_parse_level(s) : -1;
    if (!level_set_by_program)
        fccl_log_level_cur = lvl >= 0 ? lvl : FCCL_LOG_WARN;
    parse_subsys(getenv("FCCL_LOG_SUBSYS"));
}

void fccl_log_init_env(void)
{
    pthread_once(&env_once, read_env);
}

int fccl_log_set_level(int level)
{
    fccl_log_init_env();
    int old = fccl_log_level_cur;
    if (level < FCCL_LOG_ERROR)
        level = FCCL_LOG_ERROR;
    if (level > FCCL_LOG_TRACE)
        level = FCCL_LOG_TRACE;
    level_set_by_program = 1;
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

int fccl_log_subsys_on(const char *subsys)
{
    fccl_log_init_env();
    if (subsys_sel.n == 0)
        return 1;
    for (int i = 0; i < subsys_sel.n; i++)
        if (strcasecmp(subsys, subsys_sel.names[i]) == 0)
            return !subsys_sel.exclude;
    return subsys_sel.exclude;
}

void fccl_log_write(int level, const char *subsys, const char *file,
                    int lineno, const char *fmt, ...)
{
    fccl_log_init_env();
    if (level > fccl_log_level_cur || !fccl_log_subsys_on(subsys))
        return;
    char line[2048];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    localtime_r(&ts.tv_sec, &tm);
    int n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s %s [%d] ",
                     tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                     level_names[level < 0 ? 0 : level > 4 ? 4 : level], subsys,
                     (int)getpid());
    /* Where a problem was logged helps whoever turned on debug output. */
    if (n >= 0 && (size_t)n < sizeof(line) && level <= FCCL_LOG_WARN &&
        fccl_log_level_cur >= FCCL_LOG_DEBUG && file) {
        const char *base = strrchr(file, '/');
        n += snprintf(line + n, sizeof(line) - (size_t)n, "%s:%d: ",
                      base ? base + 1 : file, lineno);
    }
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
