/* The NEON kernels for every ARMv8-A core (no extension): see quants_neon_body_internal.h. */
#define ISA neon
#include "engine/quants/arm/quants_neon_body_internal.h"
