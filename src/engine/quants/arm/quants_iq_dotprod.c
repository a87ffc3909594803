/* The IQ4_NL, IQ4_XS and MXFP4 NEON kernels with sdot (built with +dotprod; run when
 * HWCAP_ASIMDDP is set): see quants_iq_neon_body_internal.h. */
#define ISA dotprod
#include "engine/quants/arm/quants_iq_neon_body_internal.h"
#if !defined(__ARM_FEATURE_DOTPROD)
#error "quants_iq_dotprod.c needs -march=...+dotprod (the Makefile's *_dotprod.o rule)"
#endif
