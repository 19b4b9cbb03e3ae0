/*
 * bench_opts.h: the long options fccl-bench and fccl-moe-bench share,
 * for getopt_long: --csv ('C'), --help ('h') and --version ('V').
 */
#ifndef FCCL_CLI_BENCH_OPTS_H
#define FCCL_CLI_BENCH_OPTS_H

#include <getopt.h>
#include <stddef.h>

static const struct option bench_long_opts[] = {
    {"csv", no_argument, NULL, 'C'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

#endif
