/* ARM feature detection for kernel dispatch: the Linux auxiliary vector (getauxval), which
 * the kernel fills from the ID registers it trusts, so no trapping MRS reads. Bits from
 * <asm/hwcap.h>, spelled out so older headers build too. */
#define _GNU_SOURCE // getauxval
#include "engine/arm/cpufeat_arm.h"
#include "util/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#define HWCAP_ASIMD_BIT   (1ul << 1)
#define HWCAP_ASIMDDP_BIT (1ul << 20)
#define HWCAP2_I8MM_BIT   (1ul << 13)

enum cpufeat_arm_level cpufeat_arm_hw_level(void)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if (!(hw & HWCAP_ASIMD_BIT)) return CPUFEAT_ARM_SCALAR;
    if (!(hw & HWCAP_ASIMDDP_BIT)) return CPUFEAT_ARM_NEON;
    if (!(hw2 & HWCAP2_I8MM_BIT)) return CPUFEAT_ARM_DOTPROD;
    return CPUFEAT_ARM_I8MM;
}

static enum cpufeat_arm_level requested(void)
{
    const char *no_simd = getenv("LLAMAPI_NO_SIMD");
    if (no_simd && strcmp(no_simd, "1") == 0) return CPUFEAT_ARM_SCALAR;
    const char *isa = getenv("LLAMAPI_ISA");
    if (!isa) return CPUFEAT_ARM_I8MM;
    static const char *const names[] = {"scalar", "neon", "dotprod", "i8mm"};
    for (int i = 0; i < 4; i++)
        if (strcmp(isa, names[i]) == 0) return (enum cpufeat_arm_level)i;
    static atomic_flag warned = ATOMIC_FLAG_INIT; // once per process
    if (!atomic_flag_test_and_set(&warned))
        log_warn("LLAMAPI_ISA=%s is not a kernel set on this CPU; accepted values: scalar, neon, "
                 "dotprod, i8mm (using the best the core runs)",
                 isa);
    return CPUFEAT_ARM_I8MM; // no cap
}

enum cpufeat_arm_level cpufeat_arm_level(void)
{
    enum cpufeat_arm_level hw = cpufeat_arm_hw_level(), want = requested();
    return want < hw ? want : hw;
}
