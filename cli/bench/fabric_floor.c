/*
 * fabric_floor: what any libfabric process pays before it can send a byte,
 * the floor under fccl's job start-up (bench/bootstrap.sh).
 *
 *   fabric_floor --noop            return at once (time-to-main is measured
 *                                  from outside: this vs /bin/true)
 *   fabric_floor [-s N] [PROV...]  per provider (default "shm" and
 *                                  "tcp;ofi_rxm"), in this order in one
 *                                  process: time of fi_getinfo (the first
 *                                  call also loads and initializes every
 *                                  provider), fi_fabric, fi_domain, CQ + AV,
 *                                  fi_endpoint + binds, fi_enable.
 *                                  -s N asks for tx/rx queue sizes of N.
 *
 * It also prints this process's start -> main() time read from
 * /proc/self/stat (10 ms ticks: a cross-check, not the measurement).
 *
 * Hints mirror what an fccl rank asks for: RDM, tagged + msg, FI_CONTEXT2,
 * local MR modes, FI_THREAD_DOMAIN, AV table.  This is a benchmark, so it
 * calls libfabric directly (the library keeps fi_* inside coll/transport*).
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench_clock.h"

struct res {
    struct fi_info *info;
    struct fid_fabric *fabric;
    struct fid_domain *domain;
    struct fid_cq *cq;
    struct fid_av *av;
    struct fid_ep *ep;
};

enum { PH_GETINFO, PH_FABRIC, PH_DOMAIN, PH_CQAV, PH_EP, PH_ENABLE, PH_N };
static const char *ph_names[PH_N] = {"fi_getinfo", "fi_fabric", "fi_domain",
                                     "cq+av", "endpoint", "fi_enable"};

static double clock_ms(clockid_t id) { return bench_clock_s(id) * 1e3; }

static double now_ms(void) { return clock_ms(CLOCK_MONOTONIC); }
/* CPU time of the whole process (all threads): on an oversubscribed host
 * CPU, not wall time, is what N ranks on 2 cores pay N times over. */
static double cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

/* Process age at main() (bench_clock.h); -1 if unreadable. */
static double start_to_main_ms(void)
{
    double s = bench_process_age_s();
    return s < 0 ? -1 : s * 1e3;
}

static struct fi_info *make_hints(const char *prov, size_t qsize)
{
    struct fi_info *h = fi_allocinfo();
    if (!h)
        return NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_TAGGED | FI_MSG | FI_SEND | FI_RECV;
    h->mode = FI_CONTEXT | FI_CONTEXT2;
    h->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR |
                              FI_MR_ALLOCATED | FI_MR_PROV_KEY |
                              FI_MR_ENDPOINT;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    h->domain_attr->av_type = FI_AV_TABLE;
    h->fabric_attr->prov_name = strdup(prov);
    if (qsize) {
        h->tx_attr->size = qsize;
        h->rx_attr->size = qsize;
    }
    return h;
}

static int fail(const char *prov, const char *call, int rc)
{
    fprintf(stderr, "fabric_floor: %s: %s: %s\n", prov, call,
            fi_strerror(-rc));
    return 1;
}

static int open_all(const char *prov, size_t qsize, struct res *r,
                    double *ms)
{
    struct fi_info *hints = make_hints(prov, qsize);
    if (!hints)
        return fail(prov, "fi_allocinfo", -FI_ENOMEM);
    double t = now_ms();
    int rc = fi_getinfo(FI_VERSION(1, 17), NULL, NULL, 0, hints, &r->info);
    fi_freeinfo(hints);
    ms[PH_GETINFO] = now_ms() - t;
    if (rc)
        return fail(prov, "fi_getinfo", rc);
    struct fi_cq_attr cqa = {.format = FI_CQ_FORMAT_TAGGED,
                             .wait_obj = FI_WAIT_NONE};
    struct fi_av_attr ava = {.type = FI_AV_TABLE, .count = 64};
    t = now_ms();
    if ((rc = fi_fabric(r->info->fabric_attr, &r->fabric, NULL)))
        return fail(prov, "fi_fabric", rc);
    ms[PH_FABRIC] = now_ms() - t;
    t = now_ms();
    if ((rc = fi_domain(r->fabric, r->info, &r->domain, NULL)))
        return fail(prov, "fi_domain", rc);
    ms[PH_DOMAIN] = now_ms() - t;
    t = now_ms();
    if ((rc = fi_cq_open(r->domain, &cqa, &r->cq, NULL)) ||
        (rc = fi_av_open(r->domain, &ava, &r->av, NULL)))
        return fail(prov, "fi_cq_open/fi_av_open", rc);
    ms[PH_CQAV] = now_ms() - t;
    t = now_ms();
    if ((rc = fi_endpoint(r->domain, r->info, &r->ep, NULL)) ||
        (rc = fi_ep_bind(r->ep, &r->av->fid, 0)) ||
        (rc = fi_ep_bind(r->ep, &r->cq->fid, FI_TRANSMIT | FI_RECV)))
        return fail(prov, "fi_endpoint/fi_ep_bind", rc);
    ms[PH_EP] = now_ms() - t;
    t = now_ms();
    if ((rc = fi_enable(r->ep)))
        return fail(prov, "fi_enable", rc);
    ms[PH_ENABLE] = now_ms() - t;
    return 0;
}

/* Reverse order of setup; NULL members were never opened. */
static double close_all(struct res *r)
{
    double t = now_ms();
    if (r->ep)
        fi_close(&r->ep->fid);
    if (r->av)
        fi_close(&r->av->fid);
    if (r->cq)
        fi_close(&r->cq->fid);
    if (r->domain)
        fi_close(&r->domain->fid);
    if (r->fabric)
        fi_close(&r->fabric->fid);
    if (r->info)
        fi_freeinfo(r->info);
    memset(r, 0, sizeof(*r));
    return now_ms() - t;
}

static int measure(const char *prov, size_t qsize)
{
    struct res r = {0};
    double ms[PH_N] = {0}, total = 0, cpu0 = cpu_ms();
    int rc = open_all(prov, qsize, &r, ms);
    double cpu = cpu_ms() - cpu0;
    double close_ms = close_all(&r);
    if (rc)
        return rc;
    printf("provider %-12s", prov);
    for (int i = 0; i < PH_N; i++) {
        printf(" %s %.2f ms,", ph_names[i], ms[i]);
        total += ms[i];
    }
    printf(" total %.2f ms (cpu %.2f ms; close %.2f ms)\n", total, cpu,
           close_ms);
    return 0;
}

int main(int argc, char **argv)
{
    double age = start_to_main_ms();
    if (argc > 1 && strcmp(argv[1], "--noop") == 0)
        return 0;
    size_t qsize = 0;
    int first = 1;
    if (argc > 2 && strcmp(argv[1], "-s") == 0) {
        qsize = strtoull(argv[2], NULL, 10);
        first = 3;
    }
    printf("start -> main %.0f ms (10 ms ticks), cpu so far %.1f ms\n", age,
           cpu_ms());
    static const char *defaults[] = {"shm", "tcp;ofi_rxm"};
    int rc = 0;
    if (first >= argc)
        for (int i = 0; i < 2; i++)
            rc |= measure(defaults[i], qsize);
    for (int i = first; i < argc; i++)
        rc |= measure(argv[i], qsize);
    return rc;
}
