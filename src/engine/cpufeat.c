/* cpuid-based detection. <cpuid.h> works with gcc and clang alike (clang 14's
 * __builtin_cpu_supports does not know "f16c"). Bits from the Intel SDM, CPUID leaves 1 and 7,
 * and XCR0 (which register states the OS saves on a context switch). */
#include "engine/cpufeat.h"
#if defined(__aarch64__)
#include "engine/arm/cpufeat_arm.h"
#endif
#include "util/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <stdint.h>

static uint32_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return lo;
}

bool cpufeat_has_avx2_fma_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
    bool fma = c & (1u << 12), osxsave = c & (1u << 27), f16c = c & (1u << 29);
    if (!fma || !osxsave || !f16c || (xcr0() & 0x6) != 0x6) return false; // XMM and YMM state
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    return b & (1u << 5); // AVX2
}

bool cpufeat_has_avx_vnni(void)
{
    unsigned a, b, c, d;
    if (!cpufeat_has_avx2_fma_f16c() || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 4) & 1; // leaf 7 sub-leaf 1, EAX bit 4
}

bool cpufeat_has_avx512(void)
{
    unsigned a, b, c, d;
    if (!cpufeat_has_avx2_fma_f16c() || (xcr0() & 0xe6) != 0xe6) return false; // + opmask, zmm
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
    const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
    const bool vnni = c & (1u << 11);
    return (b & (f | dq | bw | vl)) == (f | dq | bw | vl) && vnni;
}

bool cpufeat_has_avx512_bf16(void)
{
    unsigned a, b, c, d;
    if (!cpufeat_has_avx512() || !__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
    return (a >> 5) & 1; // leaf 7 sub-leaf 1, EAX bit 5
}
#else
bool cpufeat_has_avx2_fma_f16c(void)
{
    return false;
}

bool cpufeat_has_avx_vnni(void)
{
    return false;
}

bool cpufeat_has_avx512(void)
{
    return false;
}

bool cpufeat_has_avx512_bf16(void)
{
    return false;
}
#endif

enum cpufeat_isa cpufeat_isa_best(void)
{
    if (cpufeat_has_avx512()) return CPUFEAT_ISA_AVX512;
    if (cpufeat_has_avx2_fma_f16c()) return CPUFEAT_ISA_AVX2;
    return CPUFEAT_ISA_SCALAR;
}

#if defined(__x86_64__) || defined(__i386__)
/* Set by the first warning about an unknown LLAMAPI_ISA, so a value read by every kernel
 * table's init is reported once per process. */
static atomic_flag isa_warned = ATOMIC_FLAG_INIT;

/* LLAMAPI_ISA's set, or best when it is unset or names none (warned once: a typo would
 * otherwise leave a benchmark silently on another set than the one asked for). */
static enum cpufeat_isa isa_requested(const char *isa, enum cpufeat_isa best)
{
    if (!isa) return best;
    if (strcmp(isa, "scalar") == 0) return CPUFEAT_ISA_SCALAR;
    if (strcmp(isa, "avx2") == 0) return CPUFEAT_ISA_AVX2;
    if (strcmp(isa, "avx512") == 0) return CPUFEAT_ISA_AVX512;
    if (!atomic_flag_test_and_set(&isa_warned))
        log_warn("LLAMAPI_ISA=%s is not a kernel set; accepted values: scalar, avx2, avx512 "
                 "(using %s)",
                 isa, cpufeat_isa_name(best));
    return best;
}
#else
static enum cpufeat_isa isa_requested(const char *isa, enum cpufeat_isa best)
{
    // Other architectures pick their level elsewhere (engine/arm/cpufeat_arm.c, which
    // checks the value); only "scalar" means something here.
    return isa && strcmp(isa, "scalar") == 0 ? CPUFEAT_ISA_SCALAR : best;
}
#endif

enum cpufeat_isa cpufeat_isa(void)
{
    enum cpufeat_isa best = cpufeat_isa_best();
    enum cpufeat_isa want = isa_requested(getenv("LLAMAPI_ISA"), best);
    const char *no_simd = getenv("LLAMAPI_NO_SIMD");
    if (no_simd && strcmp(no_simd, "1") == 0) want = CPUFEAT_ISA_SCALAR;
    return want < best ? want : best;
}

const char *cpufeat_isa_name(enum cpufeat_isa isa)
{
    switch (isa) {
    case CPUFEAT_ISA_AVX2:
        return "avx2";
    case CPUFEAT_ISA_AVX512:
        return "avx512";
    default:
        return "scalar";
    }
}

#if defined(__x86_64__) || defined(__i386__)
/* "1" exactly, as every boolean override of the engine reads it. */
static bool env_is_set(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}
#elif defined(__aarch64__)
static void arm_caps(enum cpufeat_arm_level level, struct cpufeat_caps *out)
{
    out->has_neon = level >= CPUFEAT_ARM_NEON;
    out->has_dotprod = level >= CPUFEAT_ARM_DOTPROD;
    out->has_i8mm = level >= CPUFEAT_ARM_I8MM;
}
#endif

void cpufeat_caps_hw(struct cpufeat_caps *out)
{
    *out = (struct cpufeat_caps){0};
    out->has_avx2 = cpufeat_has_avx2_fma_f16c();
    out->has_avx_vnni = cpufeat_has_avx_vnni();
    out->has_avx512 = cpufeat_has_avx512();
    out->has_avx512_bf16 = cpufeat_has_avx512_bf16();
#if defined(__aarch64__)
    arm_caps(cpufeat_arm_hw_level(), out);
#endif
}

void cpufeat_caps_allowed(const struct cpufeat_caps *hw, struct cpufeat_caps *out)
{
    *out = (struct cpufeat_caps){0};
#if defined(__x86_64__) || defined(__i386__)
    const enum cpufeat_isa isa = cpufeat_isa();
    out->has_avx2 = hw->has_avx2 && isa >= CPUFEAT_ISA_AVX2;
    out->has_avx_vnni = out->has_avx2 && hw->has_avx_vnni && !env_is_set("LLAMAPI_NO_VNNI");
    out->has_avx512 = out->has_avx2 && hw->has_avx512 && isa >= CPUFEAT_ISA_AVX512;
    out->has_avx512_bf16 = out->has_avx512 && hw->has_avx512_bf16;
#elif defined(__aarch64__)
    (void)hw; // the level already caps the core's own
    arm_caps(cpufeat_arm_level(), out);
#else
    (void)hw;
#endif
}
