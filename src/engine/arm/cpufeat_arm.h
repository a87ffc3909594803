/* ARM (aarch64) feature detection for kernel dispatch. Only the aarch64 build has these
 * symbols (engine/arm/ is compiled for ARM alone): call them under #if defined(__aarch64__). */
#ifndef ENGINE_ARM_CPUFEAT_ARM_H
#define ENGINE_ARM_CPUFEAT_ARM_H

/* ARM kernel levels, each implying the ones below it. */
enum cpufeat_arm_level {
    CPUFEAT_ARM_SCALAR = 0,  // the _ref kernels (forced)
    CPUFEAT_ARM_NEON = 1,    // Advanced SIMD, in every ARMv8-A core
    CPUFEAT_ARM_DOTPROD = 2, // + sdot/udot (ARMv8.2 optional, v8.4 mandatory; Cortex-A55/A76)
    CPUFEAT_ARM_I8MM = 3,    // + smmla (ARMv8.6; Cortex-A510/A710 and later)
};

/* The ARM level to run: what getauxval(AT_HWCAP/AT_HWCAP2) reports for this core, capped by
 * LLAMAPI_ISA=scalar|neon|dotprod|i8mm (a level the core lacks gives the best one below it;
 * other values, such as another architecture's names, are ignored) and by LLAMAPI_NO_SIMD=1
 * (scalar). Cannot fail. Thread-safe. */
enum cpufeat_arm_level cpufeat_arm_level(void);

/* The level the core itself supports, ignoring the environment (for tests that skip paths the
 * core lacks). Cannot fail. */
enum cpufeat_arm_level cpufeat_arm_hw_level(void);

#endif
