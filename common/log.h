/* Leveled logging to stderr, one line per event, by subsystem.
 * The level comes from FCCL_LOG_LEVEL (error|warn|info|debug|trace or 0-4,
 * default warn) unless a program sets it with fccl_log_set_level().
 * FCCL_LOG_SUBSYS picks subsystems, as NCCL_DEBUG_SUBSYS does: a comma
 * list (STORE,BOOT,COLL,FABRIC,PROTO,MOE,RUN; ALL is every one), or the
 * same list after '^' to exclude those (default: all).  Level and
 * subsystem are checked before any formatting happens.  At debug level and
 * above, warnings and errors carry the file:line that logged them.  Both
 * variables are read at the first log call, not at load. */
#ifndef FCCL_LOG_H
#define FCCL_LOG_H

enum fccl_log_level {
    FCCL_LOG_ERROR = 0,
    FCCL_LOG_WARN = 1,
    FCCL_LOG_INFO = 2,
    FCCL_LOG_DEBUG = 3,
    FCCL_LOG_TRACE = 4,
};

extern int fccl_log_level_cur; /* read through FCCL_LOG_ON only; above
                                  TRACE until the environment is read */

/* Set the level; returns the previous one. */
int fccl_log_set_level(int level);
/* Parse "info", "3", ... into a level; -1 if unknown. */
int fccl_log_parse_level(const char *s);
/* Apply FCCL_LOG_LEVEL and FCCL_LOG_SUBSYS (once; the first log call does
 * it lazily). */
void fccl_log_init_env(void);
/* 1 if lines of this subsystem are wanted. */
int fccl_log_subsys_on(const char *subsys);

void fccl_log_write(int level, const char *subsys, const char *file,
                    int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define FCCL_LOG_ON(lvl) ((lvl) <= fccl_log_level_cur)
#define FCCL_LOG(lvl, subsys, ...)                                             \
    do {                                                                       \
        if (FCCL_LOG_ON(lvl))                                                  \
            fccl_log_write((lvl), (subsys), __FILE__, __LINE__,             \
                           __VA_ARGS__);                      \
    } while (0)

#define LOG_ERROR(sub, ...) FCCL_LOG(FCCL_LOG_ERROR, sub, __VA_ARGS__)
#define LOG_WARN(sub, ...) FCCL_LOG(FCCL_LOG_WARN, sub, __VA_ARGS__)
#define LOG_INFO(sub, ...) FCCL_LOG(FCCL_LOG_INFO, sub, __VA_ARGS__)
#define LOG_DEBUG(sub, ...) FCCL_LOG(FCCL_LOG_DEBUG, sub, __VA_ARGS__)
#define LOG_TRACE(sub, ...) FCCL_LOG(FCCL_LOG_TRACE, sub, __VA_ARGS__)

#endif
