/* What a program run by th_run must have done (expect.h). */
#include <criterion/criterion.h>
#include <string.h>

#include "expect.h"

void th_expect_out(struct th_result r, int status, const void *out,
                   size_t len)
{
    cr_assert_eq(r.status, status, "exit %d, want %d; stderr: %s", r.status,
                 status, r.err);
    if (out)
        cr_assert(r.outlen == len && memcmp(r.out, out, len) == 0,
                  "stdout '%s' (%zu bytes), want %zu bytes", r.out, r.outlen,
                  len);
    th_result_free(&r);
}

void th_expect_err(struct th_result r, int status, const char *needle)
{
    cr_assert_eq(r.status, status, "exit %d, want %d; stderr: %s", r.status,
                 status, r.err);
    cr_assert(strstr(r.err, needle), "stderr '%s' lacks '%s'", r.err, needle);
    cr_assert_eq(r.outlen, 0, "stdout not empty: %s", r.out);
    th_result_free(&r);
}
