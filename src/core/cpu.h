/* Run-time choice of the SIMD kernels (internal to the library and its tests).
 *
 * The library is compiled for a portable target (x86-64 by default, see the Makefile) except the kernel files,
 * which the Makefile compiles with AVX-512 flags (conv_direct.c, conv_winograd.c, gemm_avx512.c, rng_avx512.c,
 * chacha20_avx512.c) or AVX2 + FMA flags (conv_direct_avx2.c, chacha20_avx2.c).  Their code may only run on a CPU that has those
 * instructions: every call into a kernel file is behind dpfl_cpu_avx512() or dpfl_cpu_avx2().
 *
 * DPFL_KERNELS_AVX512 / DPFL_KERNELS_AVX2 (compile time, 0 or 1): whether the kernel files have their code in
 * this build.  They do with DPFL_DISPATCH (the Makefile's default on x86-64), and without it when the whole build
 * targets those instructions (make NATIVE=1 DISPATCH=0 on such a machine); otherwise the kernel files are empty
 * and the portable code runs everywhere (make MARCH=x86-64-v2 DISPATCH=0).
 *
 * dpfl_cpu_avx512() / dpfl_cpu_avx2() (run time): the kernels are compiled in, the CPU and the OS support every
 * instruction set they are compiled for (checked once, thread-safely, with __builtin_cpu_supports), and neither
 * the environment variable DPFL_PORTABLE (set and not "0"; read once) nor dpfl_cpu_force_portable asks for the
 * portable code.  The kernels give the portable code's results: bit for bit for ChaCha20 and the noise, within
 * rounding for the convolutions and the GEMMs (another order of summation than im2col + OpenBLAS SGEMM). */
#ifndef DPFL_CPU_H
#define DPFL_CPU_H

#include <stdatomic.h>

/* The instruction sets the AVX-512 kernel files are compiled for (the Makefile's AVX512_FLAGS) */
#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512BW__) && defined(__AVX512VL__) &&            \
    defined(__FMA__) && defined(__BMI2__) && defined(__POPCNT__)
#define DPFL_AVX512_TARGET 1
#else
#define DPFL_AVX512_TARGET 0
#endif

/* ... and the AVX2 kernel files (AVX2_FLAGS: AVX2 with FMA) */
#if defined(__AVX2__) && defined(__FMA__)
#define DPFL_AVX2_TARGET 1
#else
#define DPFL_AVX2_TARGET 0
#endif

#if defined(__x86_64__) && defined(DPFL_DISPATCH) && DPFL_DISPATCH
#define DPFL_KERNELS_AVX512 1
#define DPFL_KERNELS_AVX2 1
#else
#define DPFL_KERNELS_AVX512 DPFL_AVX512_TARGET
#define DPFL_KERNELS_AVX2 DPFL_AVX2_TARGET
#endif

/* Symbols shared between the library's files only: not exported from libdpfl.so. */
#define DPFL_HIDDEN __attribute__((visibility("hidden")))

/* DPFL_CPU_VBMI: the CPU also has AVX512_VBMI (byte permutes; used by a few functions of the AVX-512 kernel files
 * that carry the target attribute, never by the files as a whole); DPFL_CPU_ENV: DPFL_PORTABLE is set;
 * DPFL_CPU_FORCED: dpfl_cpu_force_portable(1); DPFL_CPU_NOVBMI: dpfl_cpu_force_no_vbmi(1) */
enum {
    DPFL_CPU_AVX2 = 1,
    DPFL_CPU_AVX512 = 2,
    DPFL_CPU_ENV = 4,
    DPFL_CPU_FORCED = 8,
    DPFL_CPU_KNOWN = 16,
    DPFL_CPU_VBMI = 32,
    DPFL_CPU_NOVBMI = 64
};
extern DPFL_HIDDEN atomic_int dpfl_cpu_state; /* DPFL_CPU_* bits; 0 until the first dpfl_cpu_detect */
DPFL_HIDDEN int dpfl_cpu_detect(void);

/* What the kernels may use: DPFL_CPU_AVX2 | DPFL_CPU_AVX512 bits, 0 = the portable code only. */
static inline int dpfl_cpu_features(void)
{
    int s = atomic_load_explicit(&dpfl_cpu_state, memory_order_relaxed);
    if (!(s & DPFL_CPU_KNOWN)) s = dpfl_cpu_detect();
    return s & (DPFL_CPU_ENV | DPFL_CPU_FORCED) ? 0 : s & (DPFL_CPU_AVX2 | DPFL_CPU_AVX512);
}
static inline int dpfl_cpu_avx512(void) { return DPFL_KERNELS_AVX512 && (dpfl_cpu_features() & DPFL_CPU_AVX512); }
static inline int dpfl_cpu_avx2(void) { return DPFL_KERNELS_AVX2 && (dpfl_cpu_features() & DPFL_CPU_AVX2); }
/* dpfl_cpu_avx512() and the CPU has AVX512_VBMI, and dpfl_cpu_force_no_vbmi has not turned it off */
static inline int dpfl_cpu_avx512_vbmi(void)
{
    return dpfl_cpu_avx512() &&
           (atomic_load_explicit(&dpfl_cpu_state, memory_order_relaxed) & (DPFL_CPU_VBMI | DPFL_CPU_NOVBMI)) ==
               DPFL_CPU_VBMI;
}

/* Test hook: on = 1 makes dpfl_cpu_avx512/avx2 return 0 from now on (the portable code); on = 0 goes back to what
 * the CPU supports (and DPFL_PORTABLE allows).  Objects that chose their kernels when created keep them (a
 * workspace's convolutions). */
DPFL_HIDDEN void dpfl_cpu_force_portable(int on);
/* Test hook: on = 1 makes dpfl_cpu_avx512_vbmi return 0 (the AVX-512 code without VBMI); on = 0 undoes it. */
DPFL_HIDDEN void dpfl_cpu_force_no_vbmi(int on);
/* "avx512", "avx2" or "portable": the best kernels in use now, for reports. */
DPFL_HIDDEN const char *dpfl_cpu_kernels(void);

#endif
