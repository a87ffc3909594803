/* Kernel selection: the one place that turns this CPU's features (engine/cpufeat, with its
 * LLAMAPI_ISA, LLAMAPI_NO_SIMD and LLAMAPI_NO_VNNI overrides) into the kernel set the engine
 * runs, and installs that set in every table: weight products (engine/quants), the small
 * float ops (engine/ops), tiled attention (engine/attn), the sampler's vocabulary passes and the
 * recurrent scans of hybrid models (engine/ssm).
 * Not a kernel: the modules below hold the kernels and their reference twins. */
#ifndef ENGINE_KERNELS_H
#define ENGINE_KERNELS_H

/* Reads the CPU and the environment once and installs the chosen set in every table.
 * Thread-safe: the first call does the work, concurrent and later calls return once it is
 * done. Call it before starting worker threads and before using a table (until then each
 * table holds its scalar references). Cannot fail. */
void kernels_init(void);

#endif
