/* CPU feature detection and the environment's overrides of it, for kernel selection
 * (engine/kernels.c reads cpufeat_caps_hw and cpufeat_caps_allowed once). x86 through cpuid,
 * aarch64 through engine/arm/cpufeat_arm.c. Not a kernel registry. */
#ifndef ENGINE_CPUFEAT_H
#define ENGINE_CPUFEAT_H

#include <stdbool.h>

/* Kernel sets, each a superset of the one before on x86. */
enum cpufeat_isa {
    CPUFEAT_ISA_SCALAR = 0, // the portable _ref kernels
    CPUFEAT_ISA_AVX2 = 1,   // AVX2 + FMA + F16C (AVX-VNNI used inside it when present)
    CPUFEAT_ISA_AVX512 = 2, // AVX-512 F/BW/VL/DQ + VNNI (+ BF16 when present)
};

/* True on x86 CPUs with AVX2, FMA and F16C, and an OS that saves the AVX state (OSXSAVE and
 * XCR0). Cannot fail; false on other architectures. Thread-safe. */
bool cpufeat_has_avx2_fma_f16c(void);

/* True when the CPU also has AVX-VNNI (the VEX form of vpdpbusd). Cannot fail. */
bool cpufeat_has_avx_vnni(void);

/* True with AVX2/FMA/F16C plus AVX-512 F, BW, VL, DQ and VNNI, and an OS that saves the
 * opmask and zmm state (XCR0 bits 5-7). Cannot fail; thread-safe. */
bool cpufeat_has_avx512(void);

/* True with cpufeat_has_avx512 and AVX512_BF16 (vdpbf16ps). Cannot fail. */
bool cpufeat_has_avx512_bf16(void);

/* The best set this CPU runs. Cannot fail. */
enum cpufeat_isa cpufeat_isa_best(void);

/* The set the engine uses: cpufeat_isa_best(), lowered by LLAMAPI_ISA=scalar|avx2|avx512 (a
 * request above what the CPU runs falls back to the best it has; an unknown value is ignored
 * after one warning on stderr, per process, naming the accepted values) or by
 * LLAMAPI_NO_SIMD=1 (the same as LLAMAPI_ISA=scalar). Reads the environment on every call:
 * call it once at init, before worker threads start. Cannot fail; thread-safe. */
enum cpufeat_isa cpufeat_isa(void);

/* "scalar", "avx2" or "avx512". Cannot fail. */
const char *cpufeat_isa_name(enum cpufeat_isa isa);

/* The instruction-set extensions the kernels use, on either architecture; within each
 * architecture a flag implies the ones above it. */
struct cpufeat_caps {
    bool has_avx2;        // x86: AVX2 + FMA + F16C (cpufeat_has_avx2_fma_f16c)
    bool has_avx_vnni;    // x86: and AVX-VNNI
    bool has_avx512;      // x86: cpufeat_has_avx512
    bool has_avx512_bf16; // x86: and AVX512_BF16
    bool has_neon;        // aarch64: Advanced SIMD
    bool has_dotprod;     // aarch64: and sdot/udot
    bool has_i8mm;        // aarch64: and smmla
};

/* What this CPU runs, whatever the environment says (the sets tests may compare). Cannot
 * fail; thread-safe. */
void cpufeat_caps_hw(struct cpufeat_caps *out);

/* hw (from cpufeat_caps_hw) lowered by the environment: on x86 to cpufeat_isa()'s set, and
 * without AVX-VNNI under LLAMAPI_NO_VNNI=1 (AVX2 kernels without their AVX-VNNI dots, the
 * same bits); on aarch64 to engine/arm/cpufeat_arm.h's level (LLAMAPI_ISA=scalar|neon|
 * dotprod|i8mm, LLAMAPI_NO_SIMD=1). Reads the environment on every call: call it once at
 * init, before worker threads start. Cannot fail. */
void cpufeat_caps_allowed(const struct cpufeat_caps *hw, struct cpufeat_caps *out);

#endif
