/* An etcd cluster on loopback for one test (etcd.h). */
#include "etcd.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proc.h"

#define START_S 20

static pid_t spawn(const struct etcd_cluster *c, int i, const char *cluster,
                   const char *const *extra, const struct etcd_tls *tls)
{
    char name[16], dd[200], cu[64], pu[64], log[200];
    snprintf(name, sizeof(name), "m%d", i);
    snprintf(dd, sizeof(dd), "%s/m%d.data", c->dir, i);
    snprintf(cu, sizeof(cu), "%s://127.0.0.1:%d", tls ? "https" : "http",
             c->cport[i]);
    snprintf(pu, sizeof(pu), "http://127.0.0.1:%d", c->pport[i]);
    snprintf(log, sizeof(log), "%s/m%d.log", c->dir, i);
    const char *argv[48] = {"etcd", "--name", name, "--data-dir", dd,
                            "--listen-client-urls", cu,
                            "--advertise-client-urls", cu,
                            "--listen-peer-urls", pu,
                            "--initial-advertise-peer-urls", pu,
                            "--initial-cluster", cluster,
                            "--initial-cluster-state", "new",
                            "--initial-cluster-token", c->dir,
                            "--heartbeat-interval", "50",
                            "--election-timeout", "500",
                            "--snapshot-count", "100000", NULL};
    int a = 0;
    while (argv[a])
        a++;
    if (tls) {
        argv[a++] = "--cert-file";
        argv[a++] = tls->cert;
        argv[a++] = "--key-file";
        argv[a++] = tls->key;
        if (tls->ca) {
            argv[a++] = "--client-cert-auth";
            argv[a++] = "--trusted-ca-file";
            argv[a++] = tls->ca;
        }
    }
    for (int k = 0; extra && extra[k] && a < 46; k++)
        argv[a++] = extra[k];
    argv[a] = NULL;
    return th_spawn_logged(argv, log, 0);
}

static void tail_logs(const struct etcd_cluster *c)
{
    for (int i = 0; i < c->n; i++) {
        char cmd[300], *out = NULL;
        snprintf(cmd, sizeof(cmd), "tail -n 5 %s/m%d.log", c->dir, i);
        th_sh(cmd, 5, &out);
        fprintf(stderr, "etcd m%d: %s\n", i, out ? out : "");
        free(out);
    }
}

int etcd_cluster_start(struct etcd_cluster *c, int n,
                       const char *const *extra)
{
    return etcd_cluster_start_tls(c, n, extra, NULL);
}

int etcd_cluster_start_tls(struct etcd_cluster *c, int n,
                           const char *const *extra,
                           const struct etcd_tls *tls)
{
    memset(c, 0, sizeof(*c));
    if (n < 1 || n > ETCD_CL_MAX || th_mkdtemp(c->dir, sizeof(c->dir),
                                               "fccl-etcd") < 0)
        return -1;
    c->n = n;
    char cluster[400] = "";
    size_t used = 0, eused = 0;
    for (int i = 0; i < n; i++) {
        c->cport[i] = th_free_port();
        c->pport[i] = th_free_port();
        used += (size_t)snprintf(cluster + used, sizeof(cluster) - used,
                                 "%sm%d=http://127.0.0.1:%d", i ? "," : "", i,
                                 c->pport[i]);
        eused += (size_t)snprintf(c->endpoints + eused,
                                  sizeof(c->endpoints) - eused,
                                  "%s127.0.0.1:%d", i ? "," : "",
                                  c->cport[i]);
    }
    snprintf(c->addr, sizeof(c->addr), "etcd%s://%s", tls ? "s" : "",
             c->endpoints);
    if (tls)
        snprintf(c->tlsargs, sizeof(c->tlsargs), "--cacert=%s --cert=%s "
                 "--key=%s", tls->ca ? tls->ca : tls->cert, tls->cert,
                 tls->key);
    for (int i = 0; i < n; i++)
        c->pid[i] = spawn(c, i, cluster, extra, tls);
    double end = th_now() + START_S;
    while (th_now() < end) {
        char args[300];
        snprintf(args, sizeof(args), "endpoint health >/dev/null 2>&1");
        if (etcd_cluster_ctl(c, args, NULL) == 0)
            return 0;
        th_sleep_ms(100);
    }
    fprintf(stderr, "etcd cluster of %d did not come up in %d s\n", n,
            START_S);
    tail_logs(c);
    etcd_cluster_stop(c);
    return -1;
}

void etcd_cluster_kill(struct etcd_cluster *c, int i)
{
    if (i < 0 || i >= c->n || c->pid[i] <= 0)
        return;
    kill(c->pid[i], SIGKILL);
    th_reap(c->pid[i], 5000);
    c->pid[i] = 0;
}

int etcd_cluster_ctl(const struct etcd_cluster *c, const char *args,
                     char **out)
{
    char cmd[2400], *o = NULL;
    snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --dial-timeout=2s "
             "--command-timeout=5s %s --endpoints=%s %s", c->tlsargs,
             c->endpoints, args);
    int rc = th_sh(cmd, 20, &o);
    if (out)
        *out = o;
    else
        free(o);
    return rc;
}

int etcd_cluster_leader(const struct etcd_cluster *c)
{
    for (int i = 0; i < c->n; i++) {
        if (c->pid[i] <= 0)
            continue;
        char cmd[1200], *o = NULL;
        snprintf(cmd, sizeof(cmd), "ETCDCTL_API=3 etcdctl --dial-timeout=2s "
                 "%s --endpoints=127.0.0.1:%d endpoint status -w fields",
                 c->tlsargs, c->cport[i]);
        th_sh(cmd, 10, &o);
        const char *m = o ? strstr(o, "\"MemberID\" : ") : NULL;
        const char *l = o ? strstr(o, "\"Leader\" : ") : NULL;
        int lead = m && l && strtoull(m + 13, NULL, 10) ==
                                 strtoull(l + 11, NULL, 10);
        free(o);
        if (lead)
            return i;
    }
    return -1;
}

void etcd_cluster_stop(struct etcd_cluster *c)
{
    for (int i = 0; i < c->n; i++)
        etcd_cluster_kill(c, i);
    if (c->dir[0])
        th_rmtree(c->dir);
    c->dir[0] = '\0';
}
