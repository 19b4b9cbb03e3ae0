/* ftlines.h: reading the fault-tolerance helper programs' lines. */
#include "ftlines.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proc.h"

void th_rank_line(const char *out, int r, const char *key, char *buf,
                  size_t len)
{
    char want[96];
    snprintf(want, sizeof(want), "] R%d %s", r, key);
    th_line_at(out, want, 2, buf, len);
}

long long th_num_after(const char *line, const char *key)
{
    const char *p = strstr(line, key);
    return p ? atoll(p + strlen(key)) : -1;
}

void th_group_name(const int *ranks, int n, char *name, size_t len)
{
    char list[256] = "", cmd[320], *out = NULL;
    size_t off = 0;
    for (int i = 0; i < n && off < sizeof(list); i++)
        off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%d",
                                i ? "_" : "", ranks[i]);
    snprintf(cmd, sizeof(cmd), "printf %s | sha1sum | cut -c1-40", list);
    cr_assert_eq(th_sh(cmd, 10, &out), 0);
    out[strcspn(out, "\n")] = '\0';
    snprintf(name, len, "fccl_%d_%s", n, out);
    free(out);
}

int th_expect_shm_clean(const char *out)
{
    int seen = 0;
    for (const char *p = strstr(out, "] R"); p; p = strstr(p + 1, "] R")) {
        int r;
        long long pid;
        if (sscanf(p, "] R%d pid %lld", &r, &pid) != 2)
            continue;
        seen++;
        char cmd[160], *ls = NULL;
        snprintf(cmd, sizeof(cmd), "ls /dev/shm | grep -c '^%lld:'; "
                 "rm -f /dev/shm/%lld:*", pid, pid);
        th_sh(cmd, 10, &ls);
        cr_expect(ls && atoi(ls) == 0, "rank %d (pid %lld) left %s file(s) "
                  "in /dev/shm", r, pid, ls ? ls : "?");
        free(ls);
    }
    return seen;
}
