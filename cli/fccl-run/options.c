/*
 * fccl-run: the command line (--help, parsing, the checks between
 * options).  A new option goes here and into the file of its job.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fccl-run -n N [options] PROGRAM [ARGS...]\n"
            "Launch N ranks of PROGRAM on this machine with MASTER_ADDR, "
            "MASTER_PORT,\nRANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE "
            "set.\n\n"
            "options:\n"
            "  -n, --nproc N       ranks on this node (required, >= 1)\n"
            "  --nnodes M          nodes in the job (default 1); each runs "
            "fccl-run\n"
            "  --node-rank K       this node, 0..M-1 (default 0): ranks "
            "K*N..K*N+N-1\n"
            "  --store HOST:PORT   use this store instead of starting one "
            "in-process\n"
            "                      (required with --nnodes > 1)\n"
            "  --host-store        serve the store in-process, bound to "
            "--store's\n"
            "                      HOST:PORT (on the node that has that "
            "address)\n"
            "  --store-tls-cert FILE  the hosted store serves TLS only, with "
            "this\n"
            "                      certificate (else FCCL_STORE_SERVER_TLS_CERT);"
            " ranks\n"
            "                      verify it unless FCCL_STORE_TLS_CA says "
            "otherwise\n"
            "  --store-tls-key FILE   its key (else FCCL_STORE_SERVER_TLS_KEY)\n"
            "  --store-tls-ca FILE    demand client certificates of this CA "
            "(else\n"
            "                      FCCL_STORE_SERVER_TLS_CA; ranks present\n"
            "                      FCCL_STORE_TLS_CERT/KEY)\n"
            "  --store-token-file FILE  the hosted store requires this token "
            "and\n"
            "                      the ranks prove it (else "
            "FCCL_STORE_TOKEN_FILE)\n"
            "  --store-journal FILE   the hosted store's journal (else\n"
            "                      FCCL_STORE_SERVER_JOURNAL)\n"
            "  --job-id ID         store key namespace (else FCCL_JOB_ID, "
            "else\n"
            "                      TORCHELASTIC_RUN_ID, else a fresh one "
            "agreed by all\n"
            "                      nodes through the store)\n"
            "  --provider NAME     set FCCL_PROVIDER for every rank "
            "(e.g. shm, \"tcp;ofi_rxm\")\n"
            "  --fake-nodes K      testing: pretend the ranks are spread over "
            "K hosts\n"
            "  --no-prefix         do not prefix output lines with \"[RANK] \"\n"
            "  --log-dir DIR       also write each rank's stdout and stderr to\n"
            "                      DIR/attempt_<A>/rank<R>.stdout and .stderr\n"
            "                      (DIR created if missing)\n"
            "  --max-restarts N    when a rank fails, stop the others and start "
            "all\n"
            "                      again, at most N times (default 0); with "
            "--nnodes\n"
            "                      every node restarts together (give each "
            "node the same N)\n"
            "  --no-kill           a rank that fails does not stop the "
            "others: wait for\n"
            "                      them all, then exit with the first "
            "failure's status\n"
            "                      (as srun's --no-kill; for jobs that "
            "shrink their\n"
            "                      groups and go on)\n"
            "  --respawn N         a rank that fails is started again, alone, "
            "up to N\n"
            "                      times, with FCCL_REJOIN=<k> (it rejoins "
            "through\n"
            "                      fccl_group_grow); implies --no-kill\n"
            "  --bind-to core|none pin each rank to its own share of the cores "
            "this\n"
            "                      launcher may use (default none; more ranks "
            "than\n"
            "                      cores wrap around)\n"
            "  -h, --help          this text\n"
            "  --version           print the version and exit\n\n"
            "Ranks also get FCCL_JOB_ID and GROUP_RANK (the node rank), "
            "RESTART_COUNT and\nTORCHELASTIC_RESTART_COUNT (the attempt, 0 "
            "first), the rest of torchrun's variables\n(ROLE_RANK, "
            "ROLE_NAME, ROLE_WORLD_SIZE, GROUP_WORLD_SIZE, TORCHELASTIC_RUN_ID,"
            "\nTORCHELASTIC_MAX_RESTARTS; with one node rank 0 serves torch's "
            "store at MASTER_PORT\n(USE_LIBUV=0) and TCPSTORE_ADDR is this "
            "one), msrun's MS_WORKER_NUM,\n"
            "MS_SCHED_HOST, MS_SCHED_PORT, "
            "MS_NODE_ID, RANK_ID and RANK_SIZE; with one node,\n"
            "FCCL_NET_IFACE=lo unless set (all ranks are local).  "
            "With --nnodes > 1 a\nrank failing on any node stops every node.\n\n"
            "Exit status: 0 when every rank of an attempt exits 0; else the "
            "last attempt's\nfirst failing rank's status (128 + N if killed "
            "by signal N); 2 on usage\nerrors.\n");
}

static int parse_count(const char *opt, const char *arg, long lo, long hi,
                       int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (!*arg || *end || v < lo || v > hi) {
        fprintf(stderr, "fccl-run: %s must be %ld..%ld, got '%s'\n", opt, lo,
                hi, arg);
        return -1;
    }
    *out = (int)v;
    return 0;
}

static int check_args(struct launcher *L)
{
    if (L->n == 0) {
        fprintf(stderr, "fccl-run: need -n N and a PROGRAM\n");
        return -1;
    }
    if (L->node_rank >= L->nnodes) {
        fprintf(stderr, "fccl-run: --node-rank %d is out of range for "
                        "--nnodes %d\n", L->node_rank, L->nnodes);
        return -1;
    }
    if ((long long)L->n * L->nnodes > 1 << 24) {
        fprintf(stderr, "fccl-run: %d nodes x %d ranks is too many\n",
                L->nnodes, L->n);
        return -1;
    }
    if (L->store_addr && !L->host_store &&
        (L->st_cert || L->st_key || L->st_ca || L->st_token ||
         L->st_journal)) {
        fprintf(stderr, "fccl-run: the --store-* options set up the store "
                        "fccl-run hosts: give --host-store too, or leave out "
                        "--store\n");
        return -1;
    }
    if ((L->nnodes > 1 || L->host_store) && !L->store_addr) {
        fprintf(stderr, "fccl-run: %s needs --store HOST:PORT (the address "
                        "every node can reach)\n",
                L->host_store ? "--host-store" : "--nnodes > 1");
        return -1;
    }
    return 0;
}

int fr_parse_args(struct launcher *L, int argc, char **argv)
{
    static const struct option opts[] = {
        {"nproc", required_argument, NULL, 'n'},
        {"nnodes", required_argument, NULL, 'M'},
        {"node-rank", required_argument, NULL, 'K'},
        {"node_rank", required_argument, NULL, 'K'},
        {"store", required_argument, NULL, 's'},
        {"host-store", no_argument, NULL, 'H'},
        {"store-tls-cert", required_argument, NULL, 1001},
        {"store-tls-key", required_argument, NULL, 1002},
        {"store-tls-ca", required_argument, NULL, 1003},
        {"store-token-file", required_argument, NULL, 1004},
        {"store-journal", required_argument, NULL, 1005},
        {"job-id", required_argument, NULL, 'j'},
        {"provider", required_argument, NULL, 'p'},
        {"fake-nodes", required_argument, NULL, 'k'},
        {"no-prefix", no_argument, NULL, 'q'},
        {"log-dir", required_argument, NULL, 'L'},
        {"max-restarts", required_argument, NULL, 'R'},
        {"bind-to", required_argument, NULL, 'B'},
        {"no-kill", no_argument, NULL, 1006},
        {"respawn", required_argument, NULL, 1007},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0}};
    int c, rc = 0;
    L->prefix = 1;
    L->nnodes = 1;
    while (rc == 0 && (c = getopt_long(argc, argv, "+n:h", opts, NULL)) != -1) {
        switch (c) {
        case 'n': rc = parse_count("-n", optarg, 1, 4096, &L->n); break;
        case 'M': rc = parse_count("--nnodes", optarg, 1, 1 << 16, &L->nnodes); break;
        case 'K': rc = parse_count("--node-rank", optarg, 0, 1 << 16, &L->node_rank); break;
        case 's': L->store_addr = optarg; break;
        case 'H': L->host_store = 1; break;
        case 1001: L->st_cert = optarg; break;
        case 1002: L->st_key = optarg; break;
        case 1003: L->st_ca = optarg; break;
        case 1004: L->st_token = optarg; break;
        case 1005: L->st_journal = optarg; break;
        case 1006: L->no_kill = 1; break;
        case 1007:
            rc = parse_count("--respawn", optarg, 0, 1 << 20, &L->respawn);
            L->no_kill |= L->respawn > 0;
            break;
        case 'j': L->job_opt = optarg; break;
        case 'p': L->provider = optarg; break;
        case 'k': L->fake_nodes = optarg; break;
        case 'q': L->prefix = 0; break;
        case 'L':
            L->log_dir = optarg;
            if (!*optarg) {
                fprintf(stderr, "fccl-run: --log-dir needs a directory\n");
                rc = -1;
            }
            break;
        case 'R': rc = parse_count("--max-restarts", optarg, 0, 1 << 20, &L->max_restarts); break;
        case 'B':
            if (strcmp(optarg, "core") != 0 && strcmp(optarg, "none") != 0) {
                fprintf(stderr, "fccl-run: --bind-to must be core or none, "
                                "got '%s'\n", optarg);
                rc = -1;
            }
            L->bind_cores = strcmp(optarg, "core") == 0;
            break;
        case 'h': usage(stdout); exit(0);
        case 'V': printf("fccl-run (fccl) %s\n", fccl_version()); exit(0);
        default: usage(stderr); return -1;
        }
    }
    if (rc < 0)
        return -1;
    if (optind >= argc) {
        fprintf(stderr, "fccl-run: need -n N and a PROGRAM\n");
        usage(stderr);
        return -1;
    }
    if (check_args(L) < 0)
        return -1;
    L->argv = argv + optind;
    return 0;
}
