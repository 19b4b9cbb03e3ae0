/*
 * The guide's links: every relative link of README.md and the docs/ pages names a
 * file of the tree, and a "#anchor" into a Markdown file names one of its
 * headings (GitHub's anchor of it).  The README stays a guide: no line over
 * 400 characters.  A moved or renamed page, or a heading renamed without
 * its links, fails here.
 *
 * Sources: $FCCL_SRCDIR, else the current directory.
 */
#include <criterion/criterion.h>
#include <ctype.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char src_dir[512];

static void setup(void)
{
    const char *s = getenv("FCCL_SRCDIR");
    snprintf(src_dir, sizeof(src_dir), "%s", s && *s ? s : ".");
}

TestSuite(docs, .init = setup, .timeout = 60);

/* The whole file, NUL-terminated; NULL if missing.  The guide's files are
 * small: one over 4 MiB is refused rather than read. */
static char *slurp(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (4 << 20))
        return NULL;
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    char *b = malloc((size_t)st.st_size + 1);
    size_t n = b ? fread(b, 1, (size_t)st.st_size, f) : 0;
    fclose(f);
    if (b)
        b[n] = '\0';
    return b;
}

/* GitHub's anchor of a heading's text: lower case, spaces to '-', every
 * other character but letters, digits, '-' and '_' dropped. */
static void slug(const char *text, size_t len, char *out, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < len && o + 1 < cap; i++) {
        unsigned char c = (unsigned char)text[i];
        if (isalnum(c) || c == '-' || c == '_')
            out[o++] = (char)tolower(c);
        else if (c == ' ')
            out[o++] = '-';
    }
    out[o] = '\0';
}

/* Whether the Markdown text has a heading whose anchor is ANCHOR. */
static int has_anchor(const char *md, const char *anchor)
{
    int fenced = 0;
    for (const char *l = md, *next; *l; l = next) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        next = l + len + (e != NULL);
        if (len >= 3 && strncmp(l, "```", 3) == 0)
            fenced = !fenced;
        if (fenced || len == 0 || l[0] != '#')
            continue;
        size_t h = 0;
        while (h < len && l[h] == '#')
            h++;
        while (h < len && l[h] == ' ')
            h++;
        char s[256];
        slug(l + h, len - h, s, sizeof(s));
        if (strcmp(s, anchor) == 0)
            return 1;
    }
    return 0;
}

/* Checks one link target of FILE (a path relative to the tree), found on
 * line LINE; returns 1 when it resolves. */
static int check_target(const char *file, int line, const char *target)
{
    if (strncmp(target, "http://", 7) == 0 || strncmp(target, "https://", 8) == 0 ||
        strncmp(target, "mailto:", 7) == 0)
        return 1;
    char path[2048], dir[600];
    snprintf(dir, sizeof(dir), "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    const char *hash = strchr(target, '#');
    size_t plen = hash ? (size_t)(hash - target) : strlen(target);
    if (plen == 0)
        snprintf(path, sizeof(path), "%s/%s", src_dir, file);
    else
        snprintf(path, sizeof(path), "%s/%s/%.*s", src_dir, dir, (int)plen, target);
    struct stat st;
    if (stat(path, &st) != 0) {
        cr_log_error("%s:%d: link to %s: no such file (%s)", file, line, target, path);
        return 0;
    }
    if (!hash || !hash[1])
        return 1;
    size_t n = strlen(path);
    if (n < 3 || strcmp(path + n - 3, ".md") != 0)
        return 1; /* anchors into other files are not checked */
    char *md = slurp(path);
    int ok = md && has_anchor(md, hash + 1);
    free(md);
    if (!ok)
        cr_log_error("%s:%d: link to %s: no heading with that anchor", file, line, target);
    return ok;
}

/* Every "](target)" outside fenced code; returns the number that fail. */
static int check_file(const char *file)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", src_dir, file);
    char *md = slurp(path);
    cr_assert(md, "cannot read %s", path);
    int bad = 0, line = 1, fenced = 0, links = 0;
    for (const char *p = md; *p; p++) {
        if (p == md || p[-1] == '\n') {
            if (strncmp(p, "```", 3) == 0)
                fenced = !fenced;
        }
        if (*p == '\n')
            line++;
        if (fenced || p[0] != ']' || p[1] != '(')
            continue;
        const char *t = p + 2, *e = strchr(t, ')');
        if (!e || e - t >= 512)
            continue;
        char target[512];
        snprintf(target, sizeof(target), "%.*s", (int)(e - t), t);
        links++;
        bad += !check_target(file, line, target);
    }
    free(md);
    cr_log_info("%s: %d links", file, links);
    return bad;
}

Test(docs, links_resolve)
{
    int bad = check_file("README.md"), files = 1;
    char dpath[600];
    snprintf(dpath, sizeof(dpath), "%s/docs", src_dir);
    DIR *d = opendir(dpath);
    cr_assert(d, "cannot open %s", dpath);
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n > 3 && strcmp(de->d_name + n - 3, ".md") == 0) {
            char f[300];
            snprintf(f, sizeof(f), "docs/%s", de->d_name);
            bad += check_file(f);
            files++;
        }
    }
    closedir(d);
    cr_expect(files > 1, "no docs/*.md found");
    cr_expect(bad == 0, "%d broken links (listed above)", bad);
}

Test(docs, readme_lines_short)
{
    char path[600];
    snprintf(path, sizeof(path), "%s/README.md", src_dir);
    char *md = slurp(path);
    cr_assert(md, "cannot read %s", path);
    size_t longest = 0;
    int line = 1, at = 0;
    for (const char *l = md; *l; line++) {
        const char *e = strchr(l, '\n');
        size_t len = e ? (size_t)(e - l) : strlen(l);
        if (len > longest) {
            longest = len;
            at = line;
        }
        l += len + (e != NULL);
    }
    free(md);
    cr_expect(longest <= 400, "README.md line %d has %zu characters (at most 400)", at, longest);
}
