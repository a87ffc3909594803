/* CPU feature detection and the one choice of instruction set for kernel dispatch: every SIMD
 * table in the engine (engine/quants, ops) asks cpufeat_isa(). Not a kernel registry. */
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

#endif
