/* The ops table kernels_init selected: the scalar references (ops_ref.c) until it runs. */
#include "engine/ops.h"

#include <stddef.h>

// Set once by kernels_init before any kernel thread reads it (the CPU feature flags).
static const struct ops_kernels *kernels_sel; // NULL: the references
static const char *variant_name = "scalar";

void ops_select(const struct ops_kernels *k, const char *name)
{
    kernels_sel = k;
    variant_name = name;
}

const struct ops_kernels *ops_get(void)
{
    return kernels_sel ? kernels_sel : ops_ref();
}

const char *ops_variant_name(void)
{
    return variant_name;
}
