/* The attention variant kernels_init selected (the scalar reference, attn_ref.c, until it
 * runs) and the CPU checks tests use to pick the variants they compare. */
#include "engine/attn.h"
#include "engine/cpufeat.h"

bool attn_have_avx2(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return cpufeat_has_avx2_fma_f16c();
#else
    return false;
#endif
}

bool attn_have_avx512(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return cpufeat_has_avx512();
#else
    return false;
#endif
}

// Set once by kernels_init before any kernel thread reads it.
static attn_run_fn run_sel = attn_run_ref;
static const char *variant_name = "scalar";

void attn_select(attn_run_fn run, const char *name)
{
    run_sel = run;
    variant_name = name;
}

const char *attn_variant_name(void)
{
    return variant_name;
}

void attn_run(const struct attn_block *b)
{
    run_sel(b);
}
