/* The NEON kernels with sdot (built with +dotprod; run when HWCAP_ASIMDDP is set): see
 * quants_neon_body_internal.h. */
#define ISA dotprod
#include "engine/quants/arm/quants_neon_body_internal.h"
#if !defined(__ARM_FEATURE_DOTPROD)
#error "quants_dotprod.c needs -march=...+dotprod (the Makefile's *_dotprod.o rule)"
#endif
