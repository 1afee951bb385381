/* ChaCha20 keystream as the one source of randomness for noise, sampling and initialisation.
 * Floating-point samplers here are standard (ziggurat normals, Marsaglia-Tsang gammas); their low bits are not a
 * secret channel we defend against in the default mode (see docs/privacy.md). */
#include "dpfl/core.h"

#include "core/chacha20.h"
#include "core/rng_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <string.h>

#define NOISE_VEC 0 /* the portable copy of the bulk-noise code */
#include "core/rng_noise.h"

static void rng_start(dpfl_rng *r)
{
    r->counter = 0;
    r->pos = sizeof r->buf;
}

static int sodium_ready(void) { return sodium_init() >= 0; }

dpfl_status dpfl_rng_init_os(dpfl_rng *r, dpfl_error *err)
{
    if (!sodium_ready()) return dpfl_fail(err, DPFL_EIO, "libsodium could not be initialised (no OS entropy?)");
    randombytes_buf(r->key, sizeof r->key);
    r->seeded = 0;
    rng_start(r);
    return DPFL_OK;
}

void dpfl_rng_init_seed(dpfl_rng *r, uint64_t seed)
{
    DPFL_ASSERT(sodium_ready());
    uint8_t msg[17] = "dpfl-seed";
    for (int i = 0; i < 8; i++) msg[9 + i] = (uint8_t)(seed >> (8 * i));
    crypto_generichash(r->key, sizeof r->key, msg, sizeof msg, NULL, 0);
    r->seeded = 1;
    rng_start(r);
}

void dpfl_rng_init_key(dpfl_rng *r, const uint8_t key[32], int seeded)
{
    memcpy(r->key, key, sizeof r->key);
    r->seeded = seeded;
    rng_start(r);
}

void dpfl_rng_derive(const dpfl_rng *parent, dpfl_rng *child, uint64_t a, uint64_t b, uint64_t c)
{
    uint8_t msg[24];
    uint64_t v[3] = {a, b, c};
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < 8; i++) msg[8 * k + i] = (uint8_t)(v[k] >> (8 * i));
    uint8_t key[32];
    crypto_generichash(key, sizeof key, msg, sizeof msg, parent->key, sizeof parent->key);
    memcpy(child->key, key, sizeof key);
    child->seeded = parent->seeded;
    rng_start(child);
}

void dpfl_rng_refill(dpfl_rng *r)
{
    dpfl_chacha20_keystream(r->buf, sizeof r->buf / 64, r->key, r->counter);
    r->counter += sizeof r->buf / 64;
    r->pos = 0;
}

uint64_t dpfl_rng_u64(dpfl_rng *r)
{
    if (r->pos + 8 > sizeof r->buf) dpfl_rng_refill(r);
    uint64_t v;
    memcpy(&v, r->buf + r->pos, 8);
    r->pos += 8;
    return v;
}

double dpfl_rng_uniform(dpfl_rng *r) { return (double)(dpfl_rng_u64(r) >> 11) * 0x1.0p-53; }

uint64_t dpfl_rng_below(dpfl_rng *r, uint64_t n)
{
    DPFL_ASSERT(n > 0);
    uint64_t limit = UINT64_MAX - UINT64_MAX % n; /* accept v < limit: an exact multiple of n values */
    uint64_t v;
    do v = dpfl_rng_u64(r);
    while (v >= limit);
    return v % n;
}

/* Ziggurat tables for the standard normal, 256 layers, built once (Marsaglia & Tsang's construction with the
 * layer edges R = 3.6541528853610088 and area V = 0.00492867323399; 52-bit magnitudes). */
#define ZIG_V 0.00492867323399
static uint64_t zig_k[256];
static double zig_w[256];
DPFL_HIDDEN double dpfl_zig_f[256];
/* layer i's outer edge x_i (the abscissa dpfl_zig_f[i] is the density at); x_0 = 0 */
DPFL_HIDDEN double dpfl_zig_x[256];
/* the same tables for 23-bit magnitudes (bulk float noise), aligned for the vector path's 16-entry loads */
DPFL_HIDDEN _Alignas(64) uint32_t dpfl_zig_k32[256];
DPFL_HIDDEN _Alignas(64) float dpfl_zig_w32[256];
/* and as byte planes for the VBMI lookup (rng_noise.h): bytes 0..2 of dpfl_zig_k32 (below 2^23), bytes 0..3 of
 * dpfl_zig_w32's bits */
DPFL_HIDDEN _Alignas(64) uint8_t dpfl_zig_planes[7][256];
static pthread_once_t zig_once = PTHREAD_ONCE_INIT;

static void zig_init(void)
{
    const double m = 4503599627370496.0; /* 2^52 */
    double dn = ZIG_R, tn = dn, q = ZIG_V / exp(-0.5 * dn * dn);
    zig_k[0] = (uint64_t)((dn / q) * m);
    zig_k[1] = 0;
    zig_w[0] = q / m;
    zig_w[255] = dn / m;
    dpfl_zig_f[0] = 1.0;
    dpfl_zig_f[255] = exp(-0.5 * dn * dn);
    dpfl_zig_x[0] = 0.0;
    dpfl_zig_x[255] = dn;
    for (int i = 254; i >= 1; i--) {
        dn = sqrt(-2.0 * log(ZIG_V / dn + exp(-0.5 * dn * dn)));
        zig_k[i + 1] = (uint64_t)((dn / tn) * m);
        tn = dn;
        dpfl_zig_f[i] = exp(-0.5 * dn * dn);
        zig_w[i] = dn / m;
        dpfl_zig_x[i] = dn;
    }
    for (int i = 0; i < 256; i++) {
        dpfl_zig_k32[i] = (uint32_t)(zig_k[i] >> 29);
        dpfl_zig_w32[i] = (float)(zig_w[i] * 536870912.0); /* 2^29 */
        DPFL_ASSERT(dpfl_zig_k32[i] < (1u << 24));
        uint32_t wb;
        memcpy(&wb, &dpfl_zig_w32[i], sizeof wb);
        for (int b = 0; b < 3; b++) dpfl_zig_planes[b][i] = (uint8_t)(dpfl_zig_k32[i] >> (8 * b));
        for (int b = 0; b < 4; b++) dpfl_zig_planes[3 + b][i] = (uint8_t)(wb >> (8 * b));
    }
}

/* The ziggurat's slow path for a draw in layer i at abscissa x that fell outside the layer's rectangle: returns 1
 * and sets *out when the draw is accepted (tail or wedge: zig_tail, zig_wedge in rng_noise.h), 0 when it must be
 * redrawn. */
static int zig_slow(dpfl_rng *r, unsigned i, double x, int neg, double *out)
{
    if (i == 0) {
        double t = zig_tail(r);
        *out = neg ? -t : t;
        return 1;
    }
    if (zig_wedge(i, x, (dpfl_zig_f[i - 1] - dpfl_zig_f[i]) * dpfl_rng_uniform(r) + dpfl_zig_f[i])) {
        *out = neg ? -x : x;
        return 1;
    }
    return 0;
}

double dpfl_rng_gaussian(dpfl_rng *r)
{
    pthread_once(&zig_once, zig_init);
    for (;;) {
        uint64_t u = dpfl_rng_u64(r);
        unsigned i = (unsigned)(u & 0xff);
        int neg = (int)((u >> 8) & 1);
        uint64_t mag = (u >> 9) & 0x000fffffffffffffULL; /* 52 bits */
        double x = (double)mag * zig_w[i];
        if (mag < zig_k[i]) return neg ? -x : x; /* inside the layer's rectangle */
        double g;
        if (zig_slow(r, i, x, neg, &g)) return g;
    }
}

typedef struct {
    const dpfl_rng *parent;
    uint64_t nonce;
    noise_out o;
    size_t n, nchunks;
    double sigma;
    int vec; /* 1: the AVX-512 code (rng_avx512.c); 0: the portable code */
    atomic_size_t next;
} chunk_job;

static void *chunk_worker(void *arg)
{
    chunk_job *job = arg;
    for (;;) {
        size_t c = atomic_fetch_add(&job->next, 1);
        if (c >= job->nchunks) return NULL;
        size_t off = c * DPFL_NOISE_CHUNK, len = job->n - off < DPFL_NOISE_CHUNK ? job->n - off : DPFL_NOISE_CHUNK;
        dpfl_rng child;
        dpfl_rng_derive(job->parent, &child, NOISE_TAG, job->nonce, (uint64_t)c);
        noise_out o = job->o;
        o.x += off;
        if (o.y) o.y += off;
#if DPFL_KERNELS_AVX512
        if (job->vec) {
            dpfl_noise_chunk_avx512(&child, &o, len, job->sigma);
            continue;
        }
#endif
        noise_chunk(&child, &o, len, job->sigma);
    }
}

/* Helper threads for chunked noise, started on first use and kept for the life of the process, asleep on a
 * condition variable between calls (a DP-SGD step calls once per step: starting threads each time would cost tens
 * of microseconds, a tenth of the work at 2 threads).  One call at a time uses them; a call that finds them
 * busy starts its own threads instead.  Who runs a chunk never changes its values. */
enum { NOISE_MAX_THREADS = 64 };
static struct {
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    int started;     /* helper threads running */
    int busy;        /* a call holds the helpers */
    uint64_t gen;    /* job generation */
    int want;        /* helpers 0 .. want-1 take part in the current job */
    int pending;     /* of those, not yet finished */
    chunk_job *job;
    uint64_t born[NOISE_MAX_THREADS]; /* the generation when helper i started: it waits for the next one */
} helpers = {.mu = PTHREAD_MUTEX_INITIALIZER, .go = PTHREAD_COND_INITIALIZER, .done = PTHREAD_COND_INITIALIZER};

static void *helper_main(void *arg)
{
    const int idx = (int)(intptr_t)arg;
    pthread_mutex_lock(&helpers.mu);
    uint64_t seen = helpers.born[idx];
    for (;;) {
        while (helpers.gen == seen) pthread_cond_wait(&helpers.go, &helpers.mu);
        seen = helpers.gen;
        if (idx >= helpers.want) continue;
        chunk_job *job = helpers.job;
        pthread_mutex_unlock(&helpers.mu);
        chunk_worker(job);
        pthread_mutex_lock(&helpers.mu);
        if (--helpers.pending == 0) pthread_cond_signal(&helpers.done);
    }
    return NULL;
}

/* Takes the helpers and makes sure there are at least k; returns how many it may use (0: busy or none). */
static int helpers_acquire(int k)
{
    pthread_mutex_lock(&helpers.mu);
    if (helpers.busy) {
        pthread_mutex_unlock(&helpers.mu);
        return 0;
    }
    helpers.busy = 1;
    while (helpers.started < k) {
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        helpers.born[helpers.started] = helpers.gen;
        int ok = pthread_create(&t, &at, helper_main, (void *)(intptr_t)helpers.started) == 0;
        pthread_attr_destroy(&at);
        if (!ok) break;
        helpers.started++;
    }
    int got = helpers.started < k ? helpers.started : k;
    if (got <= 0) helpers.busy = 0; /* none could be started */
    pthread_mutex_unlock(&helpers.mu);
    return got;
}

static void chunk_range(void *ctx, int64_t lo, int64_t hi)
{
    (void)lo, (void)hi; /* one call per thread: the chunks are taken from job->next */
    chunk_worker(ctx);
}

/* par != NULL: its threads run the chunks (nthreads is ignored) */
static void noise_chunked(dpfl_rng *r, const noise_out *o, size_t n, double sigma, int nthreads, int vec,
                          dpfl_par *par)
{
    pthread_once(&zig_once, zig_init);
    /* vec = 0: the portable code even where the CPU has AVX-512 (tests) */
    chunk_job job = {.parent = r, .nonce = r->counter++, .o = *o, .n = n, .sigma = sigma,
                     .vec = vec && dpfl_cpu_avx512()};
    job.nchunks = (n + DPFL_NOISE_CHUNK - 1) / DPFL_NOISE_CHUNK;
    atomic_init(&job.next, 0);
    if (par && job.nchunks > 1) {
        dpfl_par_for(par, dpfl_par_size(par), chunk_range, &job);
        return;
    }
    int nt = nthreads < 1 ? 1 : nthreads > NOISE_MAX_THREADS ? NOISE_MAX_THREADS : nthreads;
    if ((size_t)nt > job.nchunks) nt = (int)job.nchunks;
    if (nt <= 1) { /* one thread, or nothing to do (n = 0) */
        chunk_worker(&job);
        return;
    }
    int k = helpers_acquire(nt - 1);
    if (k > 0) {
        pthread_mutex_lock(&helpers.mu);
        helpers.job = &job;
        helpers.want = k;
        helpers.pending = k;
        helpers.gen++;
        pthread_cond_broadcast(&helpers.go);
        pthread_mutex_unlock(&helpers.mu);
        chunk_worker(&job);
        pthread_mutex_lock(&helpers.mu);
        while (helpers.pending > 0) pthread_cond_wait(&helpers.done, &helpers.mu);
        helpers.busy = 0;
        pthread_mutex_unlock(&helpers.mu);
        return;
    }
    /* the helpers are busy (another thread is noising): threads of our own */
    pthread_t th[NOISE_MAX_THREADS];
    int started = 0;
    for (int i = 1; i < nt; i++, started++)
        if (pthread_create(&th[i], NULL, chunk_worker, &job) != 0) break; /* fewer threads, same noise */
    chunk_worker(&job);
    for (int i = 1; i <= started; i++) pthread_join(th[i], NULL);
}

void dpfl_rng_add_gaussian_chunked(dpfl_rng *r, float *x, size_t n, double sigma, float scale, int nthreads)
{
    if (sigma == 0.0) {
        if (scale != 1.0f) dpfl_vec_scale(x, scale, n);
        return;
    }
    noise_out o = {x, NULL, scale, 0.0f};
    noise_chunked(r, &o, n, sigma, nthreads, 1, NULL);
}

void dpfl_rng_add_gaussian_chunked_portable(dpfl_rng *r, float *x, size_t n, double sigma, float scale,
                                            int nthreads)
{
    if (sigma == 0.0) {
        if (scale != 1.0f) dpfl_vec_scale(x, scale, n);
        return;
    }
    noise_out o = {x, NULL, scale, 0.0f};
    noise_chunked(r, &o, n, sigma, nthreads, 0, NULL);
}

void dpfl_rng_add_gaussian_par(dpfl_rng *r, float *x, size_t n, double sigma, float scale, dpfl_par *par)
{
    if (sigma == 0.0) {
        if (scale != 1.0f) dpfl_vec_scale(x, scale, n);
        return;
    }
    noise_out o = {x, NULL, scale, 0.0f};
    noise_chunked(r, &o, n, sigma, 1, 1, par);
}

void dpfl_rng_axpy_gaussian_chunked(dpfl_rng *r, float *y, float a, const float *x, size_t n, double sigma,
                                    int nthreads)
{
    if (sigma == 0.0) {
        dpfl_vec_axpy(y, a, x, n);
        return;
    }
    noise_out o = {(float *)x, y, 1.0f, a};
    noise_chunked(r, &o, n, sigma, nthreads, 1, NULL);
}

void dpfl_rng_add_gaussian(dpfl_rng *r, float *x, size_t n, double sigma)
{
    dpfl_rng_add_gaussian_chunked(r, x, n, sigma, 1.0f, 1);
}

int dpfl_rng_bernoulli(dpfl_rng *r, double p)
{
    if (p >= 1.0) return 1;
    if (p <= 0.0) return 0;
    return dpfl_rng_uniform(r) < p;
}

void dpfl_rng_shuffle(dpfl_rng *r, int32_t *idx, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)dpfl_rng_below(r, i);
        int32_t t = idx[i - 1];
        idx[i - 1] = idx[j];
        idx[j] = t;
    }
}

double dpfl_rng_gamma(dpfl_rng *r, double shape)
{
    DPFL_ASSERT(shape > 0);
    if (shape < 1.0) { /* boost: Gamma(a) = Gamma(a+1) * U^(1/a) */
        double u;
        do u = dpfl_rng_uniform(r);
        while (u <= 0.0);
        return dpfl_rng_gamma(r, shape + 1.0) * pow(u, 1.0 / shape);
    }
    double d = shape - 1.0 / 3.0, c = 1.0 / sqrt(9.0 * d);
    for (;;) {
        double x, v;
        do {
            x = dpfl_rng_gaussian(r);
            v = 1.0 + c * x;
        } while (v <= 0.0);
        v = v * v * v;
        double u = dpfl_rng_uniform(r);
        if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
        if (u > 0.0 && log(u) < 0.5 * x * x + d * (1.0 - v + log(v))) return d * v;
    }
}
