/* The ladder from CPU features to kernel sets, run once. Each architecture's sets are
 * supersets of the ones below them, so the ladder takes the highest set the CPU runs and the
 * environment allows, per table: the quant table distinguishes AVX-VNNI and the ARM dot
 * extensions, the ops, attention and sampler tables only the vector width. */
#include "engine/kernels.h"
#include "engine/attn.h"
#include "engine/cpufeat.h"
#include "engine/ops.h"
#include "engine/quants/quants.h"
#include "engine/sampler.h"
#include "engine/ssm.h"
#if defined(__x86_64__) || defined(__i386__)
#include "engine/x86/ops_avx2.h"
#include "engine/x86/ops_avx512.h"
#include "engine/x86/sampler_x86.h"
#endif
#if defined(__aarch64__)
#include "engine/arm/attn_neon.h"
#include "engine/arm/ops_neon.h"
#endif

#include <pthread.h>

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static enum quant_simd quant_set(const struct cpufeat_caps *use)
{
    if (use->has_avx512) return QUANT_SIMD_AVX512;
    if (use->has_avx2) return use->has_avx_vnni ? QUANT_SIMD_AVX2_VNNI : QUANT_SIMD_AVX2;
    if (use->has_i8mm) return QUANT_SIMD_NEON_I8MM;
    if (use->has_dotprod) return QUANT_SIMD_NEON_DOTPROD;
    if (use->has_neon) return QUANT_SIMD_NEON;
    return QUANT_SIMD_SCALAR;
}

static void select_ops(const struct cpufeat_caps *use)
{
#if defined(__x86_64__) || defined(__i386__)
    if (use->has_avx512) {
        ops_select(ops_avx512_kernels(), "avx512");
        return;
    }
    if (use->has_avx2) ops_select(ops_avx2_kernels(), "avx2");
#elif defined(__aarch64__)
    if (use->has_neon) ops_select(ops_neon_kernels(), "neon");
#else
    (void)use;
#endif
}

static void select_attn(const struct cpufeat_caps *use)
{
#if defined(__x86_64__) || defined(__i386__)
    if (use->has_avx512) {
        attn_select(attn_run_avx512, "avx512");
        return;
    }
    if (use->has_avx2) attn_select(attn_run_avx2, "avx2");
#elif defined(__aarch64__)
    if (use->has_neon) attn_select(attn_run_neon, "neon");
#else
    (void)use;
#endif
}

static void select_sampler(const struct cpufeat_caps *use)
{
#if defined(__x86_64__) || defined(__i386__)
    static const struct sampler_passes avx512 = {
        .argmax = sampler_argmax_avx512,
        .next_above = sampler_next_above_avx512,
        .sum_exp = sampler_sum_exp_avx512,
    };
    static const struct sampler_passes avx2 = {
        .argmax = sampler_argmax_avx2,
        .next_above = sampler_next_above_avx2,
        .sum_exp = sampler_sum_exp_avx2,
    };
    if (use->has_avx512)
        sampler_passes_select(&avx512);
    else if (use->has_avx2)
        sampler_passes_select(&avx2);
#else
    (void)use; // no ARM passes: the scalar loops stay
#endif
}

static void select_ssm(const struct cpufeat_caps *use)
{
#if defined(__x86_64__) || defined(__i386__)
    if (use->has_avx512)
        ssm_select(ssm_avx512_kernels());
    else if (use->has_avx2)
        ssm_select(ssm_avx2_kernels());
#elif defined(__aarch64__)
    if (use->has_neon) ssm_select(ssm_neon_kernels()); // dotprod and i8mm add nothing here
#else
    (void)use;
#endif
}

static void select_all(void)
{
    struct cpufeat_caps hw, use;
    cpufeat_caps_hw(&hw);
    cpufeat_caps_allowed(&hw, &use);
    quant_select(&hw, quant_set(&use));
    select_ops(&use);
    select_attn(&use);
    select_sampler(&use);
    select_ssm(&use);
}

void kernels_init(void)
{
    pthread_once(&init_once, select_all);
}
