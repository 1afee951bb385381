/* Run-time choice of the SIMD kernels: see cpu.h. */
#include "core/cpu.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

DPFL_HIDDEN atomic_int dpfl_cpu_state;
static pthread_once_t detect_once = PTHREAD_ONCE_INIT;

static void detect(void)
{
    int s = DPFL_CPU_KNOWN;
#if defined(__x86_64__) && (DPFL_KERNELS_AVX512 || DPFL_KERNELS_AVX2)
    __builtin_cpu_init(); /* in case we run before libgcc's constructor */
    /* __builtin_cpu_supports also checks that the OS saves the vector registers (XCR0) */
    if (DPFL_KERNELS_AVX2 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) s |= DPFL_CPU_AVX2;
    /* every set in the Makefile's AVX512_FLAGS */
    if (DPFL_KERNELS_AVX512 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx2") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") &&
        __builtin_cpu_supports("popcnt"))
        s |= DPFL_CPU_AVX512;
    if ((s & DPFL_CPU_AVX512) && __builtin_cpu_supports("avx512vbmi")) s |= DPFL_CPU_VBMI;
#endif
    const char *e = getenv("DPFL_PORTABLE");
    if (e && *e && strcmp(e, "0") != 0) s |= DPFL_CPU_ENV;
    atomic_fetch_or(&dpfl_cpu_state, s);
}

int dpfl_cpu_detect(void)
{
    pthread_once(&detect_once, detect);
    return atomic_load(&dpfl_cpu_state);
}

void dpfl_cpu_force_portable(int on)
{
    dpfl_cpu_detect();
    if (on) atomic_fetch_or(&dpfl_cpu_state, DPFL_CPU_FORCED);
    else atomic_fetch_and(&dpfl_cpu_state, ~DPFL_CPU_FORCED);
}

void dpfl_cpu_force_no_vbmi(int on)
{
    dpfl_cpu_detect();
    if (on) atomic_fetch_or(&dpfl_cpu_state, DPFL_CPU_NOVBMI);
    else atomic_fetch_and(&dpfl_cpu_state, ~DPFL_CPU_NOVBMI);
}

const char *dpfl_cpu_kernels(void)
{
    return dpfl_cpu_avx512() ? "avx512" : dpfl_cpu_avx2() ? "avx2" : "portable";
}
