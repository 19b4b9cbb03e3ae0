/*
 * Data types and reduction ops: sizes, names and parsing.  Names follow the
 * API ("float32", "sum"); the parser also accepts the spellings people type
 * from nccl-tests and PyTorch ("float", "half", "bf16", "fp32", ...).
 * Public calls (fccl/coll.h), on coll's lowest floor with the kernels:
 * every floor above, the algorithms included, asks for element sizes.
 */
#include <stddef.h>
#include <strings.h>

#include "fccl/coll.h"

struct dtype_info {
    const char *name;
    size_t size;
};

static const struct dtype_info dtypes[FCCL_NUM_DTYPES] = {
    [FCCL_INT8] = {"int8", 1},         [FCCL_UINT8] = {"uint8", 1},
    [FCCL_INT32] = {"int32", 4},       [FCCL_UINT32] = {"uint32", 4},
    [FCCL_INT64] = {"int64", 8},       [FCCL_UINT64] = {"uint64", 8},
    [FCCL_FLOAT16] = {"float16", 2},   [FCCL_BFLOAT16] = {"bfloat16", 2},
    [FCCL_FLOAT32] = {"float32", 4},   [FCCL_FLOAT64] = {"float64", 8},
    [FCCL_BOOL] = {"bool", 1},         [FCCL_INT16] = {"int16", 2},
};

static const char *const redops[FCCL_NUM_OPS] = {
    [FCCL_SUM] = "sum", [FCCL_PROD] = "prod", [FCCL_MAX] = "max",
    [FCCL_MIN] = "min", [FCCL_AVG] = "avg", [FCCL_BAND] = "band",
    [FCCL_BOR] = "bor", [FCCL_BXOR] = "bxor",
};

/* Other spellings accepted by the parser. */
static const struct {
    const char *alias;
    fccl_dtype_t dtype;
} dtype_aliases[] = {
    {"char", FCCL_INT8},       {"i8", FCCL_INT8},
    {"u8", FCCL_UINT8},        {"int", FCCL_INT32},
    {"i32", FCCL_INT32},       {"u32", FCCL_UINT32},
    {"i64", FCCL_INT64},       {"u64", FCCL_UINT64},
    {"long", FCCL_INT64},      {"half", FCCL_FLOAT16},
    {"fp16", FCCL_FLOAT16},    {"f16", FCCL_FLOAT16},
    {"bf16", FCCL_BFLOAT16},   {"float", FCCL_FLOAT32},
    {"fp32", FCCL_FLOAT32},    {"f32", FCCL_FLOAT32},
    {"double", FCCL_FLOAT64},  {"fp64", FCCL_FLOAT64},
    {"f64", FCCL_FLOAT64},     {"short", FCCL_INT16},
    {"i16", FCCL_INT16},
};

static int dtype_valid(fccl_dtype_t dtype)
{
    return (int)dtype >= 0 && dtype < FCCL_NUM_DTYPES;
}

size_t fccl_dtype_size(fccl_dtype_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].size : 0;
}

const char *fccl_dtype_name(fccl_dtype_t dtype)
{
    return dtype_valid(dtype) ? dtypes[dtype].name : "?";
}

const char *fccl_redop_name(fccl_redop_t op)
{
    return (int)op >= 0 && op < FCCL_NUM_OPS ? redops[op] : "?";
}

int fccl_dtype_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < FCCL_NUM_DTYPES; i++)
        if (strcasecmp(name, dtypes[i].name) == 0)
            return i;
    for (size_t i = 0; i < sizeof(dtype_aliases) / sizeof(dtype_aliases[0]);
         i++)
        if (strcasecmp(name, dtype_aliases[i].alias) == 0)
            return (int)dtype_aliases[i].dtype;
    return -1;
}

int fccl_redop_parse(const char *name)
{
    if (!name)
        return -1;
    for (int i = 0; i < FCCL_NUM_OPS; i++)
        if (strcasecmp(name, redops[i]) == 0)
            return i;
    if (strcasecmp(name, "product") == 0 || strcasecmp(name, "mul") == 0)
        return FCCL_PROD;
    if (strcasecmp(name, "mean") == 0)
        return FCCL_AVG;
    if (strcasecmp(name, "and") == 0)
        return FCCL_BAND;
    if (strcasecmp(name, "or") == 0)
        return FCCL_BOR;
    if (strcasecmp(name, "xor") == 0)
        return FCCL_BXOR;
    return -1;
}
