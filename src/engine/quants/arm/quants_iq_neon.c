/* The IQ4_NL, IQ4_XS and MXFP4 NEON kernels for ARMv8.0 (int8 dots by smull + saddlp + addp):
 * see quants_iq_neon_body_internal.h. */
#define ISA neon
#include "engine/quants/arm/quants_iq_neon_body_internal.h"
