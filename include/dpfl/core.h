/* dpfl core: errors, the CSPRNG and its distributions, flat float vectors, checksummed files.
 *
 * Every library function that can fail returns a dpfl_status and, on failure, fills a dpfl_error with one
 * human-readable line ("<what> (<where>): <why>").  The library never exits; DPFL_ASSERT is only for internal
 * invariants.
 *
 * Randomness: dpfl_rng is ChaCha20 (libsodium) keyed either from OS entropy (deployment) or from a 64-bit seed
 * (reproducible experiments: NOT for deployment, since anyone who knows the seed knows the noise).  Streams are
 * derived by name (round, client, purpose), so results do not depend on thread scheduling. */
#ifndef DPFL_CORE_H
#define DPFL_CORE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the public headers declare is the library's interface, and all that libdpfl.so exports: the library is
 * compiled with -fvisibility=hidden (Makefile), and each public header marks its own declarations visible.
 * tests/exports.sh checks the two sets are equal. */
#pragma GCC visibility push(default)

#define DPFL_VERSION "0.1.0"

typedef enum {
    DPFL_OK = 0,
    DPFL_EINVAL = 1, /* bad argument or configuration value */
    DPFL_EIO = 2,    /* file could not be read or written */
    DPFL_EFORMAT = 3, /* file content is malformed */
    DPFL_ENOMEM = 4,
    DPFL_ENOTPRIVATE = 5, /* a guarantee was asked of a non-private mechanism */
    DPFL_ENUM = 6         /* numerical failure (no root, overflow) */
} dpfl_status;

typedef struct {
    char msg[512];
} dpfl_error;

/* Fill err (may be NULL) with a printf-style message and return code. */
dpfl_status dpfl_fail(dpfl_error *err, dpfl_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
const char *dpfl_status_name(dpfl_status s);

void dpfl_assert_fail(const char *expr, const char *file, int line) __attribute__((noreturn));
#define DPFL_ASSERT(e) ((e) ? (void)0 : dpfl_assert_fail(#e, __FILE__, __LINE__))

/* Allocation that never returns NULL silently: NULL only with err filled. Memory is 64-byte aligned. */
void *dpfl_alloc(size_t bytes, dpfl_error *err);
void *dpfl_calloc(size_t n, size_t size, dpfl_error *err);
void dpfl_free(void *p);

/* ---------------------------------------------------------------- CSPRNG */
typedef struct {
    uint8_t key[32];
    uint64_t counter; /* 64-byte block counter */
    uint8_t buf[2048];
    unsigned pos;     /* next unused byte in buf; sizeof buf = empty */
    int seeded;       /* 1 = from a user seed (reproducible, not for deployment) */
} dpfl_rng;

/* Key from OS entropy (libsodium randombytes). */
dpfl_status dpfl_rng_init_os(dpfl_rng *r, dpfl_error *err);
/* Key = BLAKE2b(seed): reproducible mode. */
void dpfl_rng_init_seed(dpfl_rng *r, uint64_t seed);
/* A stream from a stored key (e.g. a derived stream's key kept in a checkpoint): the same draws as the stream it
 * was taken from had when fresh. */
void dpfl_rng_init_key(dpfl_rng *r, const uint8_t key[32], int seeded);
/* Child stream named by (a, b, c): key = BLAKE2b(parent key, a, b, c). Deterministic; the parent is unchanged. */
void dpfl_rng_derive(const dpfl_rng *parent, dpfl_rng *child, uint64_t a, uint64_t b, uint64_t c);

uint64_t dpfl_rng_u64(dpfl_rng *r);
/* Uniform in [0, 1) with 53 random bits. */
double dpfl_rng_uniform(dpfl_rng *r);
/* Uniform integer in [0, n), unbiased (rejection). */
uint64_t dpfl_rng_below(dpfl_rng *r, uint64_t n);
/* Standard normal: 256-layer ziggurat (Marsaglia & Tsang 2000) on 64-bit ChaCha20 words; about 99% of draws
 * cost one word and a comparison, so noising a million parameters takes a few milliseconds. */
double dpfl_rng_gaussian(dpfl_rng *r);
/* x[i] += sigma * N(0,1), i < n, on the caller's thread: dpfl_rng_add_gaussian_chunked(r, x, n, sigma, 1, 1). */
void dpfl_rng_add_gaussian(dpfl_rng *r, float *x, size_t n, double sigma);
/* Noise for large vectors (DP-SGD, server noise), on up to nthreads threads (the caller's included):
 * x[i] = (x[i] + sigma * N(0,1)) * scale.  The vector is cut into chunks of DPFL_NOISE_CHUNK parameters, each
 * drawn from its own stream derived from r (docs/privacy.md, "Randomness"), so the result depends on r's state
 * alone, never on nthreads; the call advances r by one block (sigma > 0).  The extra threads are helpers started
 * on first use and kept asleep between calls (one caller at a time uses them; concurrent callers start threads of
 * their own). */
#define DPFL_NOISE_CHUNK ((size_t)65536)
void dpfl_rng_add_gaussian_chunked(dpfl_rng *r, float *x, size_t n, double sigma, float scale, int nthreads);
/* The noisy SGD step y[i] += a * (x[i] + sigma * N(0,1)), x left alone: the same noise and the same float
 * operations as dpfl_rng_add_gaussian_chunked(r, x, n, sigma, 1, t) followed by dpfl_vec_axpy(y, a, x, n), in one
 * pass over memory. */
void dpfl_rng_axpy_gaussian_chunked(dpfl_rng *r, float *y, float a, const float *x, size_t n, double sigma,
                                    int nthreads);
int dpfl_rng_bernoulli(dpfl_rng *r, double p);
/* Exact discrete Gaussian N_Z(0, sigma2): P(x) proportional to exp(-x^2 / (2 sigma2)), integer sigma2 in
 * [1, 2^62] (Canonne, Kamath, Steinke 2020), using only integer arithmetic. */
int64_t dpfl_rng_discrete_gaussian(dpfl_rng *r, uint64_t sigma2);
/* Fisher-Yates shuffle of idx[0..n). */
/* Exact Poisson(lambda') with lambda' >= lambda within a relative 2^-52 (src/core/poisson.c: rational Bernoulli
 * draws only; O(lambda) work; lambda <= 1e12), and Skellam(mu) = Poisson(mu / 2) - Poisson(mu / 2) (variance
 * >= mu), the noise of distributed DP. */
uint64_t dpfl_rng_poisson(dpfl_rng *r, double lambda);
int64_t dpfl_rng_skellam(dpfl_rng *r, double mu);
/* Poisson(lambda) for large lambda (up to 1e9) by inversion of a 128-bit fixed-point table built once per lambda
 * in quadruple precision (src/core/poisson_table.c): O(1) per draw (two 64-bit words and a short scan), within
 * total variation dpfl_poisson_table_tv (about 1e-25 at lambda = 1e6, stated with its derivation there) of the
 * exact law.  The table is read-only after make: any number of threads may draw from it with their own rngs. */
typedef struct dpfl_poisson_table dpfl_poisson_table;
dpfl_status dpfl_poisson_table_make(double lambda, dpfl_poisson_table **out, dpfl_error *err);
void dpfl_poisson_table_free(dpfl_poisson_table *t); /* NULL-safe */
double dpfl_poisson_table_lambda(const dpfl_poisson_table *t);
double dpfl_poisson_table_tv(const dpfl_poisson_table *t);
uint64_t dpfl_poisson_table_draw(const dpfl_poisson_table *t, dpfl_rng *r);
/* x[i] += Poisson(lambda) - Poisson(lambda), i < n: Skellam noise of variance 2 lambda. */
void dpfl_poisson_table_add_skellam(const dpfl_poisson_table *t, dpfl_rng *r, int64_t *x, size_t n);
void dpfl_rng_shuffle(dpfl_rng *r, int32_t *idx, size_t n);
/* Gamma(shape, 1) (Marsaglia-Tsang), used for Dirichlet partitions. */
double dpfl_rng_gamma(dpfl_rng *r, double shape);

/* ---------------------------------------------------------------- vectors (float32, length n) */
double dpfl_vec_dot(const float *a, const float *b, size_t n);
double dpfl_vec_norm2(const float *a, size_t n); /* L2 norm, accumulated in double */
void dpfl_vec_scale(float *a, float s, size_t n);
void dpfl_vec_axpy(float *y, float a, const float *x, size_t n); /* y += a x */
void dpfl_vec_copy(float *dst, const float *src, size_t n);
void dpfl_vec_zero(float *a, size_t n);
void dpfl_vec_sub(float *out, const float *a, const float *b, size_t n); /* out = a - b */
/* Scale a to L2 norm <= c; returns the norm before clipping. c = INFINITY leaves a alone. */
double dpfl_vec_clip(float *a, size_t n, double c);

/* ---------------------------------------------------------------- files */
/* dpfl binary files: [magic u32][version u32][payload length u64][payload][crc32 of payload u32].
 * Written to "<path>.tmp.<pid>", fsync'd and renamed, so a crash leaves the old file or the new one. */
dpfl_status dpfl_file_write(const char *path, uint32_t magic, uint32_t version, const void *payload,
                            size_t len, dpfl_error *err);
/* The same with the payload given as nparts pieces written one after another (no copy into one buffer). */
dpfl_status dpfl_file_write_parts(const char *path, uint32_t magic, uint32_t version, const void *const *parts,
                                  const size_t *lens, int nparts, dpfl_error *err);
/* Reads and validates a file written by dpfl_file_write; *payload is malloc'd (free with free()). */
dpfl_status dpfl_file_read(const char *path, uint32_t magic, uint32_t version, void **payload, size_t *len,
                           dpfl_error *err);
/* Atomically replace path with the given text (temp file + fsync + rename). */
dpfl_status dpfl_file_write_text(const char *path, const char *text, size_t len, dpfl_error *err);
/* Read a whole file into a NUL-terminated malloc'd buffer. */
dpfl_status dpfl_file_read_all(const char *path, char **out, size_t *len, dpfl_error *err);
uint32_t dpfl_crc32(const void *data, size_t len);
/* SHA-256 hex (65 bytes incl. NUL) of a buffer. */
void dpfl_sha256_hex(const void *data, size_t len, char out[65]);

/* Monotonic wall clock in seconds. */
double dpfl_now(void);

#pragma GCC visibility pop

#endif
