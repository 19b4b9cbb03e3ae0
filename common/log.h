/* Leveled logging to stderr, one line per event, by subsystem.
 * The level comes from FCCL_LOG_LEVEL (error|warn|info|debug|trace or 0-4,
 * default warn) unless a program sets it with fccl_log_set_level().  The
 * level is checked before any formatting happens. */
#ifndef FCCL_LOG_H
#define FCCL_LOG_H

enum fccl_log_level {
    FCCL_LOG_ERROR = 0,
    FCCL_LOG_WARN = 1,
    FCCL_LOG_INFO = 2,
    FCCL_LOG_DEBUG = 3,
    FCCL_LOG_TRACE = 4,
};

extern int fccl_log_level_cur; /* read through FCCL_LOG_ON only */

/* Set the level; returns the previous one. */
int fccl_log_set_level(int level);
/* Parse "info", "3", ... into a level; -1 if unknown. */
int fccl_log_parse_level(const char *s);
/* Apply FCCL_LOG_LEVEL if set (called once lazily by the first log call). */
void fccl_log_init_env(void);

void fccl_log_write(int level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define FCCL_LOG_ON(lvl) ((lvl) <= fccl_log_level_cur)
#define FCCL_LOG(lvl, subsys, ...)                                             \
    do {                                                                       \
        if (FCCL_LOG_ON(lvl))                                                  \
            fccl_log_write((lvl), (subsys), __VA_ARGS__);                      \
    } while (0)

#define LOG_ERROR(sub, ...) FCCL_LOG(FCCL_LOG_ERROR, sub, __VA_ARGS__)
#define LOG_WARN(sub, ...) FCCL_LOG(FCCL_LOG_WARN, sub, __VA_ARGS__)
#define LOG_INFO(sub, ...) FCCL_LOG(FCCL_LOG_INFO, sub, __VA_ARGS__)
#define LOG_DEBUG(sub, ...) FCCL_LOG(FCCL_LOG_DEBUG, sub, __VA_ARGS__)
#define LOG_TRACE(sub, ...) FCCL_LOG(FCCL_LOG_TRACE, sub, __VA_ARGS__)

#endif
