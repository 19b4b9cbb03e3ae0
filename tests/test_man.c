/*
 * The manual pages (man/NAME.SECTION.in, built into BUILD/man): each renders without
 * a warning from man(1) (MANWIDTH=80, C and UTF-8 locales); each program's
 * page names every option (--long and -x) and, for tcpstore, every verb
 * that its --help prints, and has the usual sections; every program in
 * BUILD/bin but the demo has a page; libfccl(3) names every public header
 * and every FCCL_* variable the library's sources name.  An option, verb,
 * header or variable added without its page fails here.
 *
 * Pages: $FCCL_MANDIR, else $FCCL_BIN/../man, else build/man.  Sources:
 * $FCCL_SRCDIR, else the current directory.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fccl/core.h"
#include "lib/proc.h"
#include "lib/srv.h"

static char man_dir[600], bin_dir[512], src_dir[512];

static void setup(void)
{
    const char *m = getenv("FCCL_MANDIR"), *b = getenv("FCCL_BIN"),
               *s = getenv("FCCL_SRCDIR");
    snprintf(bin_dir, sizeof(bin_dir), "%s", b && *b ? b : "build/bin");
    if (m && *m)
        snprintf(man_dir, sizeof(man_dir), "%s", m);
    else
        snprintf(man_dir, sizeof(man_dir), "%s/../man", bin_dir);
    snprintf(src_dir, sizeof(src_dir), "%s", s && *s ? s : ".");
}

TestSuite(man, .init = setup, .timeout = 120);

/* The programs and their pages; libfccl(3) has no --help. */
static const struct {
    const char *prog, *page;
} PAGES[] = {
    {"tcpstore-server", "tcpstore-server.1"}, {"tcpstore", "tcpstore.1"},
    {"fccl-run", "fccl-run.1"},               {"fccl-bench", "fccl-bench.1"},
    {"tcpstore-bench", "tcpstore-bench.1"},   {"fccl-moe-bench", "fccl-moe-bench.1"},
    {NULL, "libfccl.3"},
};
#define NPAGES (sizeof(PAGES) / sizeof(PAGES[0]))

/* Programs without a page of their own. */
static const char *const NO_PAGE[] = {"fccl-demo"};

static struct th_result sh(const char *cmd)
{
    char *argv[] = {"/bin/sh", "-c", (char *)cmd, NULL};
    struct th_result r;
    struct th_cmd tc = {.argv = (const char *const *)argv,
                         .env = NULL, .in = NULL, .inlen = 0,
                         .timeout_s = 60};
    cr_assert_eq(th_run(&tc, &r), 0, "cannot run sh");
    return r;
}

static void need_man(void)
{
    struct th_result r = sh("command -v man");
    int ok = r.status == 0;
    th_result_free(&r);
    cr_assert(ok, "man(1) is missing: scripts/install-deps.sh installs "
                  "man-db and groff-base");
}

/* The page as man(1) shows it, plain text (man strips the overstrikes when
 * its output is not a terminal). */
static char *rendered(const char *page)
{
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "LC_ALL=C MANWIDTH=80 man -l '%s/%s'", man_dir,
             page);
    struct th_result r = sh(cmd);
    cr_assert_eq(r.status, 0, "man -l %s: exit %d: %s", page, r.status, r.err);
    cr_assert_gt(r.outlen, 0, "%s renders to nothing", page);
    char *text = r.out;
    r.out = NULL;
    th_result_free(&r);
    return text;
}

static int word_char(char c)
{
    return isalnum((unsigned char)c) || c == '-' || c == '_';
}

/* `word` in `text` with no word character right before or after it. */
static int has_word(const char *text, const char *word)
{
    size_t n = strlen(word);
    for (const char *p = text; (p = strstr(p, word)); p++)
        if ((p == text || !word_char(p[-1])) && !word_char(p[n]))
            return 1;
    return 0;
}

#define MAX_OPTS 128

/* Append " prefix name" to a list of what is missing. */
static void add_missing(char *buf, size_t cap, const char *prefix,
                        const char *name)
{
    size_t l = strlen(buf);
    if (l + strlen(prefix) + strlen(name) + 2 < cap) {
        strcat(buf, " ");
        strcat(buf, prefix);
        strcat(buf, name);
    }
}

/* The options a --help text names: "--long-name" and "-x" (x a letter or
 * digit), each starting a word, so "0..M-1" or "K*N" name none. */
static size_t help_options(const char *help, char opts[][64])
{
    size_t n = 0;
    for (const char *p = help; *p && n < MAX_OPTS; p++) {
        if (*p != '-' || (p > help && (word_char(p[-1]) || p[-1] == '-')))
            continue;
        size_t len = 0;
        if (p[1] == '-' && isalpha((unsigned char)p[2])) {
            len = 2;
            while (isalnum((unsigned char)p[len]) || p[len] == '-')
                len++;
            while (p[len - 1] == '-') /* "--tls-*" names --tls */
                len--;
        } else if (isalnum((unsigned char)p[1]) && !word_char(p[2])) {
            len = 2;
        }
        if (!len || len >= 64)
            continue;
        char o[64];
        snprintf(o, sizeof(o), "%.*s", (int)len, p);
        int dup = 0;
        for (size_t i = 0; i < n; i++)
            dup |= strcmp(opts[i], o) == 0;
        if (!dup)
            snprintf(opts[n++], 64, "%s", o);
        p += len - 1;
    }
    return n;
}

/* tcpstore's verbs: the first word of each line under "Verbs:". */
static size_t help_verbs(const char *help, char verbs[][64])
{
    const char *p = strstr(help, "\nVerbs:\n");
    size_t n = 0;
    if (!p)
        return 0;
    for (p = strchr(p + 1, '\n') + 1; *p && *p != '\n' && n < MAX_OPTS;
         p = strchr(p, '\n') ? strchr(p, '\n') + 1 : p + strlen(p)) {
        if (strncmp(p, "  ", 2) != 0 || p[2] == ' ')
            continue; /* a continuation line */
        size_t len = strcspn(p + 2, " \n");
        snprintf(verbs[n++], 64, "%.*s", (int)len, p + 2);
    }
    return n;
}

Test(man, pages_render_without_warnings)
{
    need_man();
    DIR *d = opendir(man_dir);
    cr_assert(d, "no %s: build the pages with make", man_dir);
    struct dirent *e;
    int pages = 0;
    while ((e = readdir(d)) != NULL) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || !isdigit((unsigned char)dot[1]) || dot[2])
            continue;
        static const char *const locales[] = {"C", "C.UTF-8"};
        for (size_t l = 0; l < 2; l++) {
            char cmd[1400];
            snprintf(cmd, sizeof(cmd),
                     "LC_ALL=%s MANWIDTH=80 man --warnings -l '%s/%s' "
                     ">/dev/null",
                     locales[l], man_dir, e->d_name);
            struct th_result r = sh(cmd);
            cr_expect_eq(r.status, 0, "%s: man exit %d", e->d_name,
                         r.status);
            cr_expect_eq(r.errlen, 0, "%s (LC_ALL=%s) warns:\n%s", e->d_name,
                         locales[l], r.err);
            th_result_free(&r);
        }
        pages++;
    }
    closedir(d);
    cr_expect_geq(pages, (int)NPAGES, "only %d pages in %s", pages, man_dir);
}

Test(man, every_help_option_is_in_its_page)
{
    need_man();
    for (size_t i = 0; i < NPAGES; i++) {
        if (!PAGES[i].prog)
            continue;
        char cmd[1200];
        snprintf(cmd, sizeof(cmd), "'%s/%s' --help", bin_dir, PAGES[i].prog);
        struct th_result r = sh(cmd);
        cr_assert_eq(r.status, 0, "%s --help: exit %d", PAGES[i].prog,
                     r.status);
        static char opts[MAX_OPTS][64];
        size_t n = help_options(r.out, opts);
        cr_expect_geq(n, 3, "%s --help names only %zu options:\n%s",
                      PAGES[i].prog, n, r.out);
        char *text = rendered(PAGES[i].page);
        char missing[4096] = "";
        for (size_t k = 0; k < n; k++)
            if (!has_word(text, opts[k]))
                add_missing(missing, sizeof(missing), "", opts[k]);
        if (strcmp(PAGES[i].prog, "tcpstore") == 0) {
            static char verbs[MAX_OPTS][64];
            size_t v = help_verbs(r.out, verbs);
            cr_expect_geq(v, 10, "tcpstore --help lists %zu verbs", v);
            for (size_t k = 0; k < v; k++)
                if (!has_word(text, verbs[k]))
                    add_missing(missing, sizeof(missing), "verb ", verbs[k]);
        }
        cr_expect(!missing[0], "%s --help names what %s lacks:%s",
                  PAGES[i].prog, PAGES[i].page, missing);
        free(text);
        th_result_free(&r);
    }
}

static void expect_sections(const char *page, const char *const *want,
                            size_t n)
{
    char *text = rendered(page);
    for (size_t k = 0; k < n; k++) {
        char line[64];
        snprintf(line, sizeof(line), "\n%s\n", want[k]);
        cr_expect(strstr(text, line), "%s has no %s section", page, want[k]);
    }
    free(text);
}

Test(man, pages_have_their_sections)
{
    need_man();
    static const char *const prog[] = {"NAME",        "SYNOPSIS",
                                       "DESCRIPTION", "OPTIONS",
                                       "ENVIRONMENT", "EXIT STATUS",
                                       "EXAMPLES",    "SEE ALSO"};
    static const char *const lib[] = {"NAME",         "SYNOPSIS",
                                      "DESCRIPTION",  "ENVIRONMENT",
                                      "RETURN VALUE", "FILES",
                                      "EXAMPLES",     "SEE ALSO"};
    for (size_t i = 0; i < NPAGES; i++) {
        if (PAGES[i].prog)
            expect_sections(PAGES[i].page, prog, 8);
        else
            expect_sections(PAGES[i].page, lib, 8);
    }
}

/* The version and date are filled in, nothing left to substitute. */
Test(man, version_and_date_filled_in)
{
    need_man();
    for (size_t i = 0; i < NPAGES; i++) {
        char path[1200];
        snprintf(path, sizeof(path), "%s/%s", man_dir, PAGES[i].page);
        FILE *f = fopen(path, "r");
        cr_assert(f, "%s missing: build it with make", path);
        char src[1 << 16];
        size_t len = fread(src, 1, sizeof(src) - 1, f);
        src[len] = '\0';
        fclose(f);
        cr_expect(!strstr(src, "@VERSION@") && !strstr(src, "@DATE@") &&
                      !strstr(src, "@PREFIX@"),
                  "%s: a placeholder is left", path);
        char *text = rendered(PAGES[i].page);
        char want[64];
        snprintf(want, sizeof(want), "fccl %s", fccl_version());
        cr_expect(strstr(text, want), "%s does not say '%s'", PAGES[i].page,
                  want);
        free(text);
    }
}

Test(man, every_program_has_a_page)
{
    DIR *d = opendir(bin_dir);
    cr_assert(d, "no %s", bin_dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        int exempt = 0;
        for (size_t k = 0; k < sizeof(NO_PAGE) / sizeof(NO_PAGE[0]); k++)
            exempt |= strcmp(e->d_name, NO_PAGE[k]) == 0;
        char path[1200];
        snprintf(path, sizeof(path), "%s/%s.1", man_dir, e->d_name);
        FILE *f = fopen(path, "r");
        cr_expect(f || exempt, "%s has no page man/%s.1.in", e->d_name,
                  e->d_name);
        if (f)
            fclose(f);
    }
    closedir(d);
}

Test(man, libfccl_names_every_header_and_variable)
{
    need_man();
    char *text = rendered("libfccl.3");
    char cmd[1400];
    snprintf(cmd, sizeof(cmd), "cd '%s' && ls include/fccl/*.h", src_dir);
    struct th_result r = sh(cmd);
    cr_assert_eq(r.status, 0, "no headers in %s/include/fccl", src_dir);
    int headers = 0;
    for (char *line = strtok(r.out, "\n"); line; line = strtok(NULL, "\n")) {
        const char *h = line + strlen("include/");
        cr_expect(strstr(text, h) != NULL, "libfccl(3) does "
                  "not name %s", h);
        headers++;
    }
    cr_expect_geq(headers, 5);
    th_result_free(&r);
    /* Every "FCCL_..." string in the library's sources: a variable it
     * reads (or the stem of some, like FCCL_STORE). */
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && for d in common store coll bootstrap moe; do "
             "[ -d $d ] && grep -rhoE --include='*.[ch]' '\"FCCL_[A-Z0-9_]+\"' "
             "$d; done | tr -d '\"' | sort -u",
             src_dir);
    r = sh(cmd);
    int vars = 0;
    char missing[4096] = "";
    for (char *v = strtok(r.out, "\n"); v; v = strtok(NULL, "\n")) {
        vars++;
        if (!strstr(text, v))
            add_missing(missing, sizeof(missing), "", v);
    }
    cr_expect_geq(vars, 10, "found only %d FCCL_ variables in the sources",
                  vars);
    cr_expect(!missing[0], "libfccl(3) lacks:%s", missing);
    th_result_free(&r);
    free(text);
}
