/* Secure aggregation (src/secagg/): whole rounds run in-process, clients and server exchanging the byte
 * messages a transport would carry.  Each test fails when the protocol breaks: a wrong sum, a secret that t-1
 * shares reveal, a masked input that looks like its input, a tampered or misrouted share that is not caught, or
 * too many dropouts that do not stop the round. */
#include "testutil.h"
#include "dpfl/secagg.h"

#include <sodium.h>
#include <stdlib.h>

#define MASKED_VALUES 24 /* header 12 + bits 4 + len 8 */

enum { AT_SHARES_FOR, AT_UNMASK };
/* Called on a message before it is delivered: stage, the client it is for (AT_SHARES_FOR) or from (AT_UNMASK),
 * and all messages of that stage (so one may be replaced by a copy of another). */
typedef void (*tamper_fn)(int stage, uint32_t client, dpfl_secagg_msg *msgs, void *ctx);

typedef struct {
    dpfl_secagg_params p;
    uint64_t seed;
    const uint8_t *drop_shared; /* n flags: drops out after ShareKeys (no masked input) */
    const uint8_t *drop_masked; /* n flags: drops out after MaskedInput (no unmasking answer) */
    tamper_fn tamper;
    void *ctx;
    dpfl_secagg_msg *keep_masked, *keep_unmask; /* if set (n each): copies of the MASKED and UNMASK messages */
    dpfl_secagg_msg *keep_keys;                 /* if set: a copy of the KEYS broadcast */
    const uint64_t *client_seed;                /* if set (n): client u's own seed, else seed and u */
} round_spec;

static void keep(dpfl_secagg_msg *to, const dpfl_secagg_msg *m)
{
    to->data = malloc(m->len);
    to->len = m->len;
    memcpy(to->data, m->data, m->len);
}

static uint32_t **inputs_make(const dpfl_secagg_params *p, dpfl_rng *r)
{
    uint32_t **x = malloc(p->n * sizeof *x);
    const uint64_t m = p->bits == 32 ? UINT64_C(1) << 32 : UINT64_C(1) << p->bits;
    for (uint32_t u = 0; u < p->n; u++) {
        x[u] = malloc(p->len * sizeof **x);
        for (size_t i = 0; i < p->len; i++) x[u][i] = (uint32_t)dpfl_rng_below(r, m);
    }
    return x;
}

static void inputs_free(const dpfl_secagg_params *p, uint32_t **x)
{
    for (uint32_t u = 0; u < p->n; u++) free(x[u]);
    free(x);
}

static uint8_t *flags(uint32_t n) { return calloc(n, 1); }

/* A full round; returns the status of the first step that failed (steps that must not fail are asserted). */
static dpfl_status run_round(const round_spec *rs, uint32_t **x, uint32_t *sum, uint32_t *nsum, dpfl_error *err)
{
    const dpfl_secagg_params *p = &rs->p;
    const uint32_t n = p->n;
    dpfl_secagg_server *srv;
    dpfl_secagg_client **c = calloc(n, sizeof *c);
    dpfl_secagg_msg m, keys, *sf = calloc(n, sizeof *sf), *um = calloc(n, sizeof *um);
    dpfl_error e;
    dpfl_status st = DPFL_OK;
    assert_int_equal(dpfl_secagg_server_create(p, &srv, &e), DPFL_OK);
    for (uint32_t u = 0; u < n; u++) {
        uint8_t seed[32] = {0};
        const uint64_t sd = rs->client_seed ? rs->client_seed[u] : rs->seed;
        for (int i = 0; i < 8; i++) seed[i] = (uint8_t)(sd >> (8 * i));
        for (int i = 0; i < 4; i++) seed[8 + i] = (uint8_t)((rs->client_seed ? 0 : u) >> (8 * i));
        assert_int_equal(dpfl_secagg_client_create(p, u, seed, &c[u], &e), DPFL_OK);
        assert_int_equal(dpfl_secagg_client_advertise(c[u], &m, &e), DPFL_OK);
        assert_int_equal(dpfl_secagg_server_add_advert(srv, m.data, m.len, &e), DPFL_OK);
        dpfl_secagg_msg_free(&m);
    }
    assert_int_equal(dpfl_secagg_server_keys(srv, &keys, &e), DPFL_OK);
    if (rs->keep_keys) keep(rs->keep_keys, &keys);
    for (uint32_t u = 0; u < n; u++) {
        assert_int_equal(dpfl_secagg_client_share_keys(c[u], keys.data, keys.len, &m, &e), DPFL_OK);
        assert_int_equal(dpfl_secagg_server_add_shares(srv, m.data, m.len, &e), DPFL_OK);
        dpfl_secagg_msg_free(&m);
    }
    for (uint32_t u = 0; u < n; u++)
        if (!rs->drop_shared || !rs->drop_shared[u])
            assert_int_equal(dpfl_secagg_server_shares_for(srv, u, &sf[u], &e), DPFL_OK);
    for (uint32_t u = 0; st == DPFL_OK && u < n; u++) {
        if (rs->drop_shared && rs->drop_shared[u]) continue;
        if (rs->tamper) rs->tamper(AT_SHARES_FOR, u, sf, rs->ctx);
        st = dpfl_secagg_client_masked_input(c[u], sf[u].data, sf[u].len, x[u], &m, err);
        if (st == DPFL_OK) assert_int_equal(dpfl_secagg_server_add_masked(srv, m.data, m.len, &e), DPFL_OK);
        if (st == DPFL_OK && rs->keep_masked) keep(&rs->keep_masked[u], &m);
        dpfl_secagg_msg_free(&m);
    }
    dpfl_secagg_msg req = {0};
    if (st == DPFL_OK) st = dpfl_secagg_server_unmask_request(srv, &req, err);
    for (uint32_t u = 0; st == DPFL_OK && u < n; u++) {
        if ((rs->drop_shared && rs->drop_shared[u]) || (rs->drop_masked && rs->drop_masked[u])) continue;
        assert_int_equal(dpfl_secagg_client_unmask(c[u], req.data, req.len, &um[u], &e), DPFL_OK);
    }
    for (uint32_t u = 0; st == DPFL_OK && u < n; u++) {
        if (!um[u].data) continue;
        if (rs->tamper) rs->tamper(AT_UNMASK, u, um, rs->ctx);
        assert_int_equal(dpfl_secagg_server_add_unmask(srv, um[u].data, um[u].len, &e), DPFL_OK);
        if (rs->keep_unmask) keep(&rs->keep_unmask[u], &um[u]);
    }
    if (st == DPFL_OK) st = dpfl_secagg_server_finish(srv, sum, nsum, err);
    for (uint32_t u = 0; u < n; u++) {
        dpfl_secagg_client_free(c[u]);
        dpfl_secagg_msg_free(&sf[u]);
        dpfl_secagg_msg_free(&um[u]);
    }
    dpfl_secagg_msg_free(&keys);
    dpfl_secagg_msg_free(&req);
    dpfl_secagg_server_free(srv);
    free(c);
    free(sf);
    free(um);
    return st;
}

/* Runs the round and checks the sum against the plain sum over the clients that sent masked inputs. */
static void check_round(const round_spec *rs, dpfl_rng *r)
{
    const dpfl_secagg_params *p = &rs->p;
    uint32_t **x = inputs_make(p, r), *sum = malloc(p->len * sizeof *sum), nsum = 0, want_n = 0;
    dpfl_error err;
    dpfl_status st = run_round(rs, x, sum, &nsum, &err);
    if (st != DPFL_OK) print_error("n = %u, t = %u, bits = %u: %s\n", p->n, p->t, p->bits, err.msg);
    assert_int_equal(st, DPFL_OK);
    const uint32_t mask = p->bits == 32 ? 0xFFFFFFFFu : (1u << p->bits) - 1;
    size_t wrong = 0;
    for (size_t i = 0; i < p->len; i++) {
        uint32_t want = 0;
        for (uint32_t u = 0; u < p->n; u++)
            if (!rs->drop_shared || !rs->drop_shared[u]) want += x[u][i];
        wrong += (want & mask) != sum[i];
    }
    for (uint32_t u = 0; u < p->n; u++) want_n += !rs->drop_shared || !rs->drop_shared[u];
    if (wrong) print_error("n = %u, t = %u, bits = %u: %zu of %zu sums wrong\n", p->n, p->t, p->bits, wrong, p->len);
    assert_int_equal(wrong, 0);
    assert_int_equal(nsum, want_n);
    inputs_free(p, x);
    free(sum);
}

/* Marks k distinct random clients out of n in f (among those not yet marked in `skip`, if given). */
static void pick(dpfl_rng *r, uint8_t *f, const uint8_t *skip, uint32_t n, uint32_t k)
{
    while (k) {
        uint32_t u = (uint32_t)dpfl_rng_below(r, n);
        if (f[u] || (skip && skip[u])) continue;
        f[u] = 1;
        k--;
    }
}

static void sum_is_exact_without_dropouts(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 1);
    const uint32_t ns[] = {2, 3, 10, 25}, bits[] = {16, 20, 32};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (size_t b = 0; b < 3; b++) {
            round_spec rs = {.p = {.n = ns[a], .t = ns[a] / 2 + 1 < 2 ? 2 : ns[a] / 2 + 1, .bits = bits[b],
                                   .len = 1001}, .seed = 100 * a + b};
            check_round(&rs, &r);
        }
    /* t = n (no dropout tolerated) and t = 2 (the smallest threshold) */
    round_spec rs = {.p = {.n = 6, .t = 6, .bits = 20, .len = 77}, .seed = 9};
    check_round(&rs, &r);
    rs.p.t = 2;
    check_round(&rs, &r);
}

static void sum_is_exact_with_dropouts_up_to_n_minus_t(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 2);
    const uint32_t ns[] = {5, 10, 25}, bits[] = {16, 20, 32};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (uint32_t late = 0; late < 2; late++) {
                const uint32_t n = ns[a], t = n / 2 + 1;
                uint8_t *d1 = flags(n), *d2 = flags(n);
                /* n - t dropouts, the last `late` of them after sending their masked input (they are in the sum:
                 * the server then needs their self-mask shares, from t of the others) */
                pick(&r, d1, NULL, n, n - t - late);
                pick(&r, d2, d1, n, late);
                round_spec rs = {.p = {.n = n, .t = t, .bits = bits[b], .len = 513}, .seed = 7 + a,
                                 .drop_shared = d1, .drop_masked = d2};
                check_round(&rs, &r);
                /* and a single dropout */
                memset(d1, 0, n);
                memset(d2, 0, n);
                pick(&r, d1, NULL, n, 1);
                check_round(&rs, &r);
                free(d1);
                free(d2);
            }
}

static void shamir_needs_t_shares(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 3);
    const uint32_t ts[] = {2, 3, 5, 10, 40};
    for (size_t a = 0; a < sizeof ts / sizeof *ts; a++) {
        const uint32_t t = ts[a], m = t + 4;
        uint32_t ids[44];
        dpfl_secagg_share sh[44], sub[44];
        for (uint32_t i = 0; i < m; i++) ids[i] = 3 * i + 1; /* any distinct holder ids */
        for (int trial = 0; trial < 20; trial++) {
            uint8_t secret[32], got[32];
            for (int i = 0; i < 32; i++) secret[i] = (uint8_t)dpfl_rng_u64(&r);
            if (trial == 0) memset(secret, 0xFF, sizeof secret); /* largest chunks */
            dpfl_error err;
            assert_int_equal(dpfl_secagg_shamir_split(secret, t, ids, m, &r, sh, &err), DPFL_OK);
            /* a random subset of t shares, in random order, reconstructs; so do all m */
            uint8_t *used = flags(m);
            pick(&r, used, NULL, m, t);
            uint32_t k = 0;
            for (uint32_t i = m; i-- > 0;)
                if (used[i]) sub[k++] = sh[i];
            assert_int_equal(dpfl_secagg_shamir_combine(sub, t, got, &err), DPFL_OK);
            assert_memory_equal(got, secret, 32);
            assert_int_equal(dpfl_secagg_shamir_combine(sh, m, got, &err), DPFL_OK);
            assert_memory_equal(got, secret, 32);
            /* t - 1 of them do not: an error, or a different value */
            dpfl_status st = dpfl_secagg_shamir_combine(sub + 1, t - 1, got, &err);
            assert_true(st != DPFL_OK || memcmp(got, secret, 32) != 0);
            /* nor does one wrong share among t */
            sub[0].y[2] = (sub[0].y[2] + 1) % ((UINT64_C(1) << 61) - 1);
            st = dpfl_secagg_shamir_combine(sub, t, got, &err);
            assert_true(st != DPFL_OK || memcmp(got, secret, 32) != 0);
            free(used);
        }
    }
    /* t - 1 shares of two different secrets can be the same: here with t = 2, one share says nothing.  Checked
     * statistically: the first share's value for chunk 0 is uniform whatever the secret. */
    uint32_t two[2] = {0, 1};
    double mean = 0;
    const int N = 4000;
    for (int i = 0; i < N; i++) {
        uint8_t secret[32] = {0};
        dpfl_secagg_share s2[2];
        dpfl_error err;
        assert_int_equal(dpfl_secagg_shamir_split(secret, 2, two, 2, &r, s2, &err), DPFL_OK);
        mean += (double)s2[0].y[0] / (double)((UINT64_C(1) << 61) - 1);
    }
    mean /= N;
    assert_true(fabs(mean - 0.5) < 5 * sqrt(1.0 / 12 / N));
}

/* One client's masked input is the masked vector the server sees: it must look uniform mod 2^bits whatever x is
 * (here x in [0, 10)): about a fraction 1 - 2^-bits of its coordinates differ from x, its mean is near 2^(bits-1)
 * and each bit is set about half the time. */
static void masked_input_looks_uniform(void **state)
{
    (void)state;
    const uint32_t bits[] = {16, 20, 32};
    for (int b = 0; b < 3; b++) {
        const dpfl_secagg_params p = {.n = 5, .t = 3, .bits = bits[b], .len = 100000};
        dpfl_secagg_client *c[5];
        dpfl_secagg_server *srv;
        dpfl_secagg_msg m, keys, sf;
        dpfl_error err;
        assert_int_equal(dpfl_secagg_server_create(&p, &srv, &err), DPFL_OK);
        for (uint32_t u = 0; u < p.n; u++) {
            assert_int_equal(dpfl_secagg_client_create(&p, u, NULL, &c[u], &err), DPFL_OK); /* OS entropy */
            assert_int_equal(dpfl_secagg_client_advertise(c[u], &m, &err), DPFL_OK);
            assert_int_equal(dpfl_secagg_server_add_advert(srv, m.data, m.len, &err), DPFL_OK);
            dpfl_secagg_msg_free(&m);
        }
        assert_int_equal(dpfl_secagg_server_keys(srv, &keys, &err), DPFL_OK);
        for (uint32_t u = 0; u < p.n; u++) {
            assert_int_equal(dpfl_secagg_client_share_keys(c[u], keys.data, keys.len, &m, &err), DPFL_OK);
            assert_int_equal(dpfl_secagg_server_add_shares(srv, m.data, m.len, &err), DPFL_OK);
            dpfl_secagg_msg_free(&m);
        }
        uint32_t *x = malloc(p.len * sizeof *x);
        for (size_t i = 0; i < p.len; i++) x[i] = (uint32_t)(i % 10);
        for (uint32_t u = 0; u < p.n; u++) {
            assert_int_equal(dpfl_secagg_server_shares_for(srv, u, &sf, &err), DPFL_OK);
            assert_int_equal(dpfl_secagg_client_masked_input(c[u], sf.data, sf.len, x, &m, &err), DPFL_OK);
            dpfl_secagg_msg_free(&sf);
            assert_int_equal(m.len, MASKED_VALUES + 4 * p.len);
            size_t same = 0;
            double mean = 0, ones[32] = {0};
            for (size_t i = 0; i < p.len; i++) {
                const uint8_t *q = m.data + MASKED_VALUES + 4 * i;
                uint32_t y = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
                same += y == x[i];
                mean += y;
                for (uint32_t j = 0; j < p.bits; j++) ones[j] += (y >> j) & 1;
            }
            const double L = (double)p.len, M = ldexp(1.0, (int)p.bits);
            mean /= L;
            /* expected L / 2^bits equal coordinates (1.5 for bits = 16); allow 10 + 10x that */
            if (!(same <= 10 + 10 * L / M)) print_error("bits %u: %zu coordinates unmasked\n", p.bits, same);
            assert_true(same <= 10 + 10 * L / M);
            const double sd_mean = M / sqrt(12 * L);
            if (!(fabs(mean - (M - 1) / 2) < 5 * sd_mean))
                print_error("bits %u: masked mean %.1f, expected %.1f +- %.1f\n", p.bits, mean, (M - 1) / 2, sd_mean);
            assert_true(fabs(mean - (M - 1) / 2) < 5 * sd_mean);
            for (uint32_t j = 0; j < p.bits; j++) assert_true(fabs(ones[j] - L / 2) < 5 * sqrt(L) / 2);
            dpfl_secagg_msg_free(&m);
        }
        free(x);
        dpfl_secagg_msg_free(&keys);
        for (uint32_t u = 0; u < p.n; u++) dpfl_secagg_client_free(c[u]);
        dpfl_secagg_server_free(srv);
    }
}

static uint32_t load32(const uint8_t *q)
{
    return (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
}

/* What the server learns: after the unmasking round it holds every survivor's self-mask seed b_u (rebuilt here
 * from t UNMASK messages, as the server does), yet y_u - PRG(b_u) must still look uniform -- the pairwise masks
 * hide x_u -- while the sum of y_u - PRG(b_u) over all clients is the plain sum (the pairwise masks cancel; PRG is
 * libsodium's crypto_stream_chacha20 with nonce 0, read as little-endian words).  Fails if the pairwise masks are
 * left out, or if they do not cancel. */
static void server_learns_only_the_sum(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 7);
    const dpfl_secagg_params p = {.n = 4, .t = 3, .bits = 16, .len = 20000};
    dpfl_secagg_msg masked[4] = {{0}}, unmask[4] = {{0}};
    round_spec rs = {.p = p, .seed = 21, .keep_masked = masked, .keep_unmask = unmask};
    uint32_t **x = inputs_make(&p, &r), *sum = malloc(p.len * sizeof *sum), *total = calloc(p.len, sizeof *total);
    uint8_t *ks = malloc(4 * p.len);
    dpfl_error err;
    assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_OK);
    const uint32_t mask = (1u << p.bits) - 1;
    for (uint32_t u = 0; u < p.n; u++) {
        /* b_u from the shares of clients 1, 2, 3 (entry u of each UNMASK: kind 0, five field elements) */
        dpfl_secagg_share sh[3];
        for (uint32_t k = 0; k < 3; k++) {
            const uint8_t *e = unmask[k + 1].data + 16 + 45 * (size_t)u;
            assert_int_equal(load32(e), u);
            assert_int_equal(e[4], 0);
            sh[k].x = k + 2;
            for (int c = 0; c < 5; c++) sh[k].y[c] = (uint64_t)load32(e + 5 + 8 * c) | (uint64_t)load32(e + 9 + 8 * c) << 32;
        }
        uint8_t b[32], nonce[crypto_stream_chacha20_NONCEBYTES] = {0};
        assert_int_equal(dpfl_secagg_shamir_combine(sh, 3, b, &err), DPFL_OK);
        crypto_stream_chacha20(ks, 4 * p.len, nonce, b);
        size_t same = 0;
        double mean = 0;
        for (size_t i = 0; i < p.len; i++) {
            uint32_t z = (load32(masked[u].data + MASKED_VALUES + 4 * i) - load32(ks + 4 * i)) & mask;
            same += z == x[u][i];
            mean += z;
            total[i] += z;
        }
        mean /= (double)p.len;
        const double M = 65536, sd_mean = M / sqrt(12.0 * (double)p.len);
        if (same > 10) print_error("client %u: %zu of %zu values unmasked by the self mask alone\n", u, same, p.len);
        assert_true(same <= 10);
        assert_true(fabs(mean - (M - 1) / 2) < 5 * sd_mean);
    }
    for (size_t i = 0; i < p.len; i++) {
        uint32_t want = 0;
        for (uint32_t u = 0; u < p.n; u++) want += x[u][i];
        assert_int_equal(total[i] & mask, want & mask);
        assert_int_equal(sum[i], want & mask);
    }
    for (uint32_t u = 0; u < p.n; u++) {
        dpfl_secagg_msg_free(&masked[u]);
        dpfl_secagg_msg_free(&unmask[u]);
    }
    free(ks);
    free(sum);
    free(total);
    inputs_free(&p, x);
}

/* ---------------------------------------------------------------- tampering and misrouting */
typedef struct {
    uint32_t victim;  /* the message for (AT_SHARES_FOR) or from (AT_UNMASK) this client is altered */
    uint32_t entry;   /* which entry of it */
    size_t byte;      /* which byte of the entry */
    int mode;         /* 0: flip a byte; 1: hand the victim the message meant for client `other`, recipient field
                         rewritten to the victim; 2: the same, not rewritten; 3: add 1 to a share value */
    uint32_t other;
} tamper_ctx;

#define SF_ENTRY (4 + 24 + 16 + 88)
#define SF_HEAD 20
#define UM_ENTRY (5 + 40)
#define UM_HEAD 16

static void tamper(int stage, uint32_t client, dpfl_secagg_msg *msgs, void *vctx)
{
    tamper_ctx *t = vctx;
    if (client != t->victim) return;
    dpfl_secagg_msg *m = &msgs[client];
    if (stage == AT_SHARES_FOR && t->mode == 0) {
        m->data[SF_HEAD + t->entry * SF_ENTRY + t->byte] ^= 0x40;
    } else if (stage == AT_SHARES_FOR && (t->mode == 1 || t->mode == 2)) {
        const dpfl_secagg_msg *o = &msgs[t->other];
        free(m->data);
        m->data = malloc(o->len);
        m->len = o->len;
        memcpy(m->data, o->data, o->len);
        if (t->mode == 1)
            for (int i = 0; i < 4; i++) m->data[12 + i] = (uint8_t)(client >> (8 * i));
    } else if (stage == AT_UNMASK && t->mode == 3) {
        m->data[UM_HEAD + t->entry * UM_ENTRY + 5 + t->byte] ^= 1; /* low bit of a share value: stays < p */
    }
}

/* The id of the sender of entry e of the SHARES_FOR message for v (senders are U2 \ {v}, ascending). */
static uint32_t sf_sender(uint32_t v, uint32_t e) { return e < v ? e : e + 1; }

static void tampered_or_misrouted_share_is_named(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 4);
    const dpfl_secagg_params p = {.n = 7, .t = 4, .bits = 16, .len = 100};
    uint32_t **x = inputs_make(&p, &r), sum[100];
    /* one flipped byte anywhere in a ciphertext: the nonce (4..27), the tag or the body */
    const size_t bytes[] = {4, 20, 27, 28, 43, 44, 80, SF_ENTRY - 1};
    for (size_t k = 0; k < sizeof bytes / sizeof *bytes; k++) {
        tamper_ctx tc = {.victim = (uint32_t)(k % 7), .entry = (uint32_t)(k % 6), .byte = bytes[k], .mode = 0};
        round_spec rs = {.p = p, .seed = 11, .tamper = tamper, .ctx = &tc};
        dpfl_error err = {{0}};
        assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_EFORMAT);
        char want[64];
        snprintf(want, sizeof want, "the share from client %u failed authentication", sf_sender(tc.victim, tc.entry));
        if (!strstr(err.msg, want)) print_error("got '%s', expected '%s'\n", err.msg, want);
        assert_non_null(strstr(err.msg, want));
    }
    /* client 5 handed client 2's shares, the recipient field rewritten: the first share (from client 0) was not
     * encrypted for client 5 and fails authentication */
    tamper_ctx tc = {.victim = 5, .mode = 1, .other = 2};
    round_spec rs = {.p = p, .seed = 12, .tamper = tamper, .ctx = &tc};
    dpfl_error err = {{0}};
    assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "secagg client 5: the share from client 0 failed authentication"));
    /* not rewritten: refused before any decryption */
    tc.mode = 2;
    assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "secagg client 5: given the shares addressed to client 2"));
    inputs_free(&p, x);
}

/* A corrupted share in the unmasking round: an error naming the client whose secret it was, not a wrong sum --
 * for a dropped client's mask key (checked against its public key) and a survivor's self-mask seed (caught by
 * the range check of the reconstructed chunks, with probability 1 - 2^-49). */
static void corrupted_unmask_share_is_named(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    const dpfl_secagg_params p = {.n = 6, .t = 4, .bits = 20, .len = 50};
    uint32_t **x = inputs_make(&p, &r), sum[50];
    uint8_t d1[6] = {0, 0, 0, 1, 0, 0}; /* client 3 drops after ShareKeys */
    for (int kind = 0; kind < 2; kind++) {
        /* UNMASK entries are U2 = all six clients in order: entry 3 is client 3's mask key, entry 4 client 4's
         * self-mask seed.  Client 0's answer is among the first t the server keeps. */
        tamper_ctx tc = {.victim = 0, .entry = kind ? 4 : 3, .byte = 8 * (uint32_t)kind, .mode = 3};
        round_spec rs = {.p = p, .seed = 13, .drop_shared = d1, .tamper = tamper, .ctx = &tc};
        dpfl_error err = {{0}};
        assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_EFORMAT);
        /* a shifted share almost always moves a chunk out of range; if not, the key check catches it */
        const char *want = kind ? "client 4's self-mask seed do not reconstruct"
                                : "client 3's mask-agreement key do not reconstruct",
                   *alt = kind ? want : "mask-agreement key reconstructed for dropped client 3 does not match";
        if (!strstr(err.msg, want) && !strstr(err.msg, alt)) print_error("got '%s'\n", err.msg);
        assert_true(strstr(err.msg, want) || strstr(err.msg, alt));
    }
    inputs_free(&p, x);
}

static void too_many_dropouts_is_an_error(void **state)
{
    (void)state;
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 6);
    const dpfl_secagg_params p = {.n = 10, .t = 6, .bits = 32, .len = 64};
    uint32_t **x = inputs_make(&p, &r), sum[64];
    /* n - t + 1 = 5 drop after ShareKeys: 5 masked inputs, fewer than t */
    uint8_t *d1 = flags(p.n), *d2 = flags(p.n);
    pick(&r, d1, NULL, p.n, p.n - p.t + 1);
    round_spec rs = {.p = p, .seed = 14, .drop_shared = d1};
    dpfl_error err = {{0}};
    assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_EINVAL);
    if (!strstr(err.msg, "only 5 of the t = 6 shares needed")) print_error("got '%s'\n", err.msg);
    assert_non_null(strstr(err.msg, "only 5 of the t = 6 shares needed"));
    assert_non_null(strstr(err.msg, "at most n - t = 4 dropouts"));
    /* 2 drop after ShareKeys, 3 more after MaskedInput: 8 in the sum but only 5 answer the unmasking */
    memset(d1, 0, p.n);
    pick(&r, d1, NULL, p.n, 2);
    pick(&r, d2, d1, p.n, 3);
    rs.drop_masked = d2;
    assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "only 5 of the t = 6 shares needed"));
    /* one fewer late dropout: fine */
    for (uint32_t u = 0; u < p.n; u++)
        if (d2[u]) {
            d2[u] = 0;
            break;
        }
    assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_OK);
    free(d1);
    free(d2);
    inputs_free(&p, x);
}

static void bad_parameters_and_calls_are_errors(void **state)
{
    (void)state;
    dpfl_error err;
    dpfl_secagg_server *s = NULL;
    dpfl_secagg_client *c = NULL;
    const dpfl_secagg_params bad[] = {
        {.n = 5, .t = 1, .bits = 16, .len = 1},  {.n = 5, .t = 6, .bits = 16, .len = 1},
        {.n = 1, .t = 1, .bits = 16, .len = 1},  {.n = 5, .t = 3, .bits = 0, .len = 1},
        {.n = 5, .t = 3, .bits = 33, .len = 1},  {.n = 5, .t = 3, .bits = 16, .len = 0},
        {.n = 10001, .t = 3, .bits = 16, .len = 1}, {.n = 5, .t = 3, .bits = 16, .len = 10000001}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        assert_int_equal(dpfl_secagg_server_create(&bad[i], &s, &err), DPFL_EINVAL);
        assert_null(s);
        assert_int_equal(dpfl_secagg_client_create(&bad[i], 0, NULL, &c, &err), DPFL_EINVAL);
    }
    const dpfl_secagg_params p = {.n = 3, .t = 2, .bits = 8, .len = 4};
    assert_int_equal(dpfl_secagg_client_create(&p, 3, NULL, &c, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_secagg_client_create(&p, 1, NULL, &c, &err), DPFL_OK);
    assert_int_equal(dpfl_secagg_server_create(&p, &s, &err), DPFL_OK);
    dpfl_secagg_msg m, keys;
    /* out of order */
    assert_int_equal(dpfl_secagg_client_unmask(c, NULL, 0, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "secagg client 1: unmask called out of order"));
    assert_int_equal(dpfl_secagg_server_finish(s, NULL, NULL, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_secagg_client_advertise(c, &m, &err), DPFL_OK);
    assert_int_equal(dpfl_secagg_server_add_advert(s, m.data, m.len, &err), DPFL_OK);
    /* twice; garbage; a message of the wrong type */
    assert_int_equal(dpfl_secagg_server_add_advert(s, m.data, m.len, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "client 1 advertised twice"));
    assert_int_equal(dpfl_secagg_server_add_advert(s, m.data, 20, &err), DPFL_EFORMAT);
    m.data[5] = 3;
    assert_int_equal(dpfl_secagg_server_add_advert(s, m.data, m.len, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "expected a ADVERT message, got SHARES"));
    dpfl_secagg_msg_free(&m);
    /* one advert of t = 2 needed */
    assert_int_equal(dpfl_secagg_server_keys(s, &keys, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "only 1 of the t = 2"));
    dpfl_secagg_server_free(s);
    dpfl_secagg_client_free(c);
    /* inputs not reduced mod 2^bits */
    assert_int_equal(dpfl_secagg_server_create(&p, &s, &err), DPFL_OK);
    dpfl_secagg_client *cs[3];
    for (uint32_t u = 0; u < 3; u++) {
        assert_int_equal(dpfl_secagg_client_create(&p, u, NULL, &cs[u], &err), DPFL_OK);
        assert_int_equal(dpfl_secagg_client_advertise(cs[u], &m, &err), DPFL_OK);
        assert_int_equal(dpfl_secagg_server_add_advert(s, m.data, m.len, &err), DPFL_OK);
        dpfl_secagg_msg_free(&m);
    }
    assert_int_equal(dpfl_secagg_server_keys(s, &keys, &err), DPFL_OK);
    for (uint32_t u = 0; u < 3; u++) {
        assert_int_equal(dpfl_secagg_client_share_keys(cs[u], keys.data, keys.len, &m, &err), DPFL_OK);
        assert_int_equal(dpfl_secagg_server_add_shares(s, m.data, m.len, &err), DPFL_OK);
        dpfl_secagg_msg_free(&m);
    }
    dpfl_secagg_msg sf;
    assert_int_equal(dpfl_secagg_server_shares_for(s, 0, &sf, &err), DPFL_OK);
    const uint32_t x[4] = {1, 2, 256, 3};
    assert_int_equal(dpfl_secagg_client_masked_input(cs[0], sf.data, sf.len, x, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "secagg client 0: input value 256 at index 2 is not reduced mod 2^8"));
    dpfl_secagg_msg_free(&sf);
    dpfl_secagg_msg_free(&keys);
    for (uint32_t u = 0; u < 3; u++) dpfl_secagg_client_free(cs[u]);
    dpfl_secagg_server_free(s);
}

/* ---------------------------------------------------------------- the pairwise masks, by value */
/* The rebuilt secret of `owner` from the UNMASK messages of holders h[0..k) (entry `owner`, of kind `kind`). */
static void rebuild(const dpfl_secagg_msg *unmask, const uint32_t *h, uint32_t k, uint32_t owner, int kind,
                    uint8_t out[32])
{
    dpfl_secagg_share sh[8];
    for (uint32_t i = 0; i < k; i++) {
        const uint8_t *e = unmask[h[i]].data + 16 + 45 * (size_t)owner;
        assert_int_equal(load32(e), owner);
        assert_int_equal(e[4], kind);
        sh[i].x = h[i] + 1;
        for (int c = 0; c < 5; c++) sh[i].y[c] = (uint64_t)load32(e + 5 + 8 * c) | (uint64_t)load32(e + 9 + 8 * c) << 32;
    }
    dpfl_error err;
    assert_int_equal(dpfl_secagg_shamir_combine(sh, k, out, &err), DPFL_OK);
}

/* The mask-agreement public key of client u from the KEYS broadcast (hdr | count | count x (id | c_pk | s_pk)). */
static const uint8_t *keys_s_pk(const dpfl_secagg_msg *keys, uint32_t u)
{
    uint32_t count = load32(keys->data + 12);
    for (uint32_t i = 0; i < count; i++) {
        const uint8_t *e = keys->data + 16 + 68 * (size_t)i;
        if (load32(e) == u) return e + 4 + 32;
    }
    fail();
    return NULL;
}

/* docs/secagg.md's construction, written here with libsodium's primitives alone:
 * k_uv = BLAKE2b-256("dpfl-secagg-mask-v1" || X25519(s_u^SK, s_v^PK) || min(u,v) || max(u,v)) (ids u32 LE), and
 * PRG(k) = crypto_stream_chacha20 under k with nonce 0, read as little-endian words; acc += sign * PRG(k). */
static void add_prg_of_pair(uint32_t *acc, size_t len, const uint8_t sk[32], const uint8_t pk[32], uint32_t u,
                            uint32_t v, int sign)
{
    uint8_t q[32], in[19 + 32 + 8], k[32], nonce[crypto_stream_chacha20_NONCEBYTES] = {0};
    assert_int_equal(crypto_scalarmult(q, sk, pk), 0);
    memcpy(in, "dpfl-secagg-mask-v1", 19);
    memcpy(in + 19, q, 32);
    const uint32_t lo = u < v ? u : v, hi = u < v ? v : u;
    for (int i = 0; i < 4; i++) in[51 + i] = (uint8_t)(lo >> (8 * i)), in[55 + i] = (uint8_t)(hi >> (8 * i));
    assert_int_equal(crypto_generichash(k, 32, in, sizeof in, NULL, 0), 0);
    uint8_t *ks = malloc(4 * len);
    crypto_stream_chacha20(ks, 4 * len, nonce, k);
    for (size_t i = 0; i < len; i++) acc[i] += (uint32_t)sign * load32(ks + 4 * i);
    free(ks);
}

static void add_prg(uint32_t *acc, size_t len, const uint8_t key[32], int sign)
{
    uint8_t *ks = malloc(4 * len), nonce[crypto_stream_chacha20_NONCEBYTES] = {0};
    crypto_stream_chacha20(ks, 4 * len, nonce, key);
    for (size_t i = 0; i < len; i++) acc[i] += (uint32_t)sign * load32(ks + 4 * i);
    free(ks);
}

/* Known answer for the pairwise masks.  Clients 0, 1, 2 (t = 2); client 2 drops out after sharing its keys, so the
 * survivors' unmasking answers carry the shares of b_0, b_1 (self masks) and of s_2^SK (the dropped client's
 * mask-agreement secret).  Then y_0 + y_1 - x_0 - x_1 - PRG(b_0) - PRG(b_1) must be exactly
 * PRG(k_02) + PRG(k_12) (the pair 0-1's masks cancel; 2 > 0 and 2 > 1 add), each k computed here from s_2^SK and
 * the public keys by the documented construction -- not by the library.  A mask derived from public data only, or
 * any other derivation, fails; so does a mask that does not match libsodium's ChaCha20 stream. */
static void pairwise_masks_are_the_documented_derivation(void **state)
{
    (void)state;
    const dpfl_secagg_params p = {.n = 3, .t = 2, .bits = 32, .len = 300};
    dpfl_secagg_msg masked[3] = {{0}}, unmask[3] = {{0}}, keys = {0};
    uint8_t drop[3] = {0, 0, 1};
    round_spec rs = {.p = p, .seed = 77, .drop_shared = drop, .keep_masked = masked, .keep_unmask = unmask,
                     .keep_keys = &keys};
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 3);
    uint32_t **x = inputs_make(&p, &r), *sum = malloc(p.len * sizeof *sum), *got = calloc(p.len, 4),
             *want = calloc(p.len, 4);
    dpfl_error err;
    assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_OK);
    const uint32_t holders[2] = {0, 1};
    uint8_t b0[32], b1[32], s2[32], pk2[32];
    rebuild(unmask, holders, 2, 0, 0, b0);
    rebuild(unmask, holders, 2, 1, 0, b1);
    rebuild(unmask, holders, 2, 2, 1, s2);
    assert_int_equal(crypto_scalarmult_base(pk2, s2), 0); /* the rebuilt secret is client 2's advertised key's */
    assert_memory_equal(pk2, keys_s_pk(&keys, 2), 32);
    for (size_t i = 0; i < p.len; i++)
        got[i] = load32(masked[0].data + MASKED_VALUES + 4 * i) + load32(masked[1].data + MASKED_VALUES + 4 * i) -
                 x[0][i] - x[1][i];
    add_prg(got, p.len, b0, -1);
    add_prg(got, p.len, b1, -1);
    add_prg_of_pair(want, p.len, s2, keys_s_pk(&keys, 0), 2, 0, +1);
    add_prg_of_pair(want, p.len, s2, keys_s_pk(&keys, 1), 2, 1, +1);
    size_t wrong = 0;
    for (size_t i = 0; i < p.len; i++) wrong += got[i] != want[i];
    if (wrong) print_error("%zu of %zu mask words are not the documented derivation's\n", wrong, p.len);
    assert_int_equal(wrong, 0);
    for (size_t i = 0; i < p.len; i++) assert_int_equal(sum[i], x[0][i] + x[1][i]);
    for (uint32_t u = 0; u < 3; u++) {
        dpfl_secagg_msg_free(&masked[u]);
        dpfl_secagg_msg_free(&unmask[u]);
    }
    dpfl_secagg_msg_free(&keys);
    free(sum);
    free(got);
    free(want);
    inputs_free(&p, x);
}

/* Client 0's pairwise mask with client 1 (y_0 - x_0 - PRG(b_0), b_0 rebuilt from the unmasking shares) changes
 * when client 1's secret keys change and client 0's stay: the mask depends on the shared secret, not only on
 * client 0's own key and the ids.  And it is not the PRG of anything public: not of either public key. */
static void pairwise_mask_depends_on_the_other_partys_secret(void **state)
{
    (void)state;
    const dpfl_secagg_params p = {.n = 2, .t = 2, .bits = 32, .len = 64};
    uint32_t *mask[2];
    dpfl_secagg_msg keys[2] = {{0}};
    for (int run = 0; run < 2; run++) {
        dpfl_secagg_msg masked[2] = {{0}}, unmask[2] = {{0}};
        const uint64_t seeds[2] = {1001, run == 0 ? 2002 : 3003};
        round_spec rs = {.p = p, .keep_masked = masked, .keep_unmask = unmask, .keep_keys = &keys[run],
                         .client_seed = seeds};
        dpfl_rng r;
        dpfl_rng_init_seed(&r, 9);
        uint32_t **x = inputs_make(&p, &r), *sum = malloc(p.len * sizeof *sum);
        dpfl_error err;
        assert_int_equal(run_round(&rs, x, sum, NULL, &err), DPFL_OK);
        const uint32_t holders[2] = {0, 1};
        uint8_t b0[32];
        rebuild(unmask, holders, 2, 0, 0, b0);
        mask[run] = calloc(p.len, 4);
        for (size_t i = 0; i < p.len; i++) mask[run][i] = load32(masked[0].data + MASKED_VALUES + 4 * i) - x[0][i];
        add_prg(mask[run], p.len, b0, -1);
        for (int pub = 0; pub < 2; pub++) { /* not PRG(a public key) */
            uint32_t *z = calloc(p.len, 4);
            add_prg(z, p.len, keys_s_pk(&keys[run], (uint32_t)pub), 1);
            assert_true(memcmp(z, mask[run], 4 * p.len) != 0);
            free(z);
        }
        for (int u = 0; u < 2; u++) {
            dpfl_secagg_msg_free(&masked[u]);
            dpfl_secagg_msg_free(&unmask[u]);
        }
        free(sum);
        inputs_free(&p, x);
    }
    assert_memory_equal(keys_s_pk(&keys[0], 0), keys_s_pk(&keys[1], 0), 32); /* client 0's keys did not change */
    assert_memory_not_equal(keys_s_pk(&keys[0], 1), keys_s_pk(&keys[1], 1), 32);
    size_t same = 0;
    for (size_t i = 0; i < p.len; i++) same += mask[0][i] == mask[1][i];
    assert_true(same <= 1);
    free(mask[0]);
    free(mask[1]);
    dpfl_secagg_msg_free(&keys[0]);
    dpfl_secagg_msg_free(&keys[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sum_is_exact_without_dropouts),
        cmocka_unit_test(sum_is_exact_with_dropouts_up_to_n_minus_t),
        cmocka_unit_test(shamir_needs_t_shares),
        cmocka_unit_test(masked_input_looks_uniform),
        cmocka_unit_test(server_learns_only_the_sum),
        cmocka_unit_test(pairwise_masks_are_the_documented_derivation),
        cmocka_unit_test(pairwise_mask_depends_on_the_other_partys_secret),
        cmocka_unit_test(tampered_or_misrouted_share_is_named),
        cmocka_unit_test(corrupted_unmask_share_is_named),
        cmocka_unit_test(too_many_dropouts_is_an_error),
        cmocka_unit_test(bad_parameters_and_calls_are_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
