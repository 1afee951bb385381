/* The AVX-512 copy of the bulk-noise code (core/rng_noise.h with NOISE_VEC 1), compiled with the Makefile's
 * AVX512_FLAGS; rng.c calls it only when dpfl_cpu_avx512(). */
#include "core/cpu.h"

#if DPFL_KERNELS_AVX512 && !DPFL_AVX512_TARGET
#error "rng_avx512.c must be compiled with the Makefile's AVX512_FLAGS"
#endif

#if DPFL_AVX512_TARGET
#define NOISE_VEC 1
#include "core/rng_noise.h"

void dpfl_noise_chunk_avx512(dpfl_rng *r, const noise_out *o, size_t n, double sigma) { noise_chunk(r, o, n, sigma); }
#else
typedef int dpfl_rng_avx512_unused; /* an empty file is not C */
#endif
