/* Group normalization (Wu & He, "Group Normalization", ECCV 2018, eq. 1-3): each example's channels are split into
 * G groups of C/G channels, and every group is standardized with its own mean and variance, then scaled and
 * shifted per channel:  y = (x - mu_bg) / sqrt(var_bg + eps) * gamma_c + beta_c  (eps = 1e-5, as PyTorch).
 * LayerNorm is the case G = 1.  The statistics are those of ONE example, never of the batch: an example's output
 * and gradient depend on no other example, which is what DP-SGD's per-example clipping needs (BatchNorm mixes
 * examples and is refused; see model.c).
 *
 * Backward, with xhat = (x - mu) rstd and dxhat = dy gamma_c over the N = (C/G) S values of a group:
 *   dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat)),  dgamma_c = sum_s dy xhat,  dbeta_c = sum_s dy.
 * The parameter gradients are formed per example (2C numbers), so the batch gradient is their sum in example
 * order (the same bits for any number of threads) and DP-SGD reads them directly. */
#include "layers.h"

#include <math.h>
#include <string.h>

#define GN_EPS 1e-5

static inline size_t plane(int cnhw, int b, int c, int B, int C, int S)
{
    return (cnhw ? (size_t)c * B + b : (size_t)b * C + c) * (size_t)S;
}

/* Groups are worked on GN_LANES at a time (tasks t = b G + g, consecutive): each group's sums are one chain of
 * double additions in the order of one group alone (channel by channel, value by value), so the results are the
 * same bits as a group at a time, but the lanes' chains run side by side instead of each waiting on its own
 * adder latency. */
#define GN_LANES 4

/* the plane of channel j of task t's group */
static inline const float *group_plane(const float *x, int64_t t, int j, int G, int cg, int B, int C, int S, int cnhw)
{
    return x + plane(cnhw, (int)(t / G), (int)(t % G) * cg + j, B, C, S);
}

/* Mean and 1/sqrt(var + eps) of tasks t0 .. t0 + n - 1 (n <= GN_LANES), in double, two passes. */
static void moments(double *mu, double *rstd, const float *x, int64_t t0, int n, int G, int cg, int B, int C, int S,
                    int cnhw)
{
    double s[GN_LANES] = {0}, v[GN_LANES] = {0}, m[GN_LANES];
    const float *p[GN_LANES];
    const double cnt = (double)cg * S;
    for (int j = 0; j < cg; j++) {
        for (int l = 0; l < n; l++) p[l] = group_plane(x, t0 + l, j, G, cg, B, C, S, cnhw);
        if (n == GN_LANES)
            for (int i = 0; i < S; i++) s[0] += p[0][i], s[1] += p[1][i], s[2] += p[2][i], s[3] += p[3][i];
        else
            for (int l = 0; l < n; l++)
                for (int i = 0; i < S; i++) s[l] += p[l][i];
    }
    for (int l = 0; l < n; l++) m[l] = s[l] / cnt;
    for (int j = 0; j < cg; j++) {
        for (int l = 0; l < n; l++) p[l] = group_plane(x, t0 + l, j, G, cg, B, C, S, cnhw);
        if (n == GN_LANES)
            for (int i = 0; i < S; i++) {
                const double d0 = (double)p[0][i] - m[0], d1 = (double)p[1][i] - m[1];
                const double d2 = (double)p[2][i] - m[2], d3 = (double)p[3][i] - m[3];
                v[0] += d0 * d0, v[1] += d1 * d1, v[2] += d2 * d2, v[3] += d3 * d3;
            }
        else
            for (int l = 0; l < n; l++)
                for (int i = 0; i < S; i++) v[l] += ((double)p[l][i] - m[l]) * ((double)p[l][i] - m[l]);
    }
    for (int l = 0; l < n; l++) mu[l] = m[l], rstd[l] = 1.0 / sqrt(v[l] / cnt + GN_EPS);
}

void dpfl_nn_groupnorm_forward(float *out, float *stats, const float *inp, const float *w, int B, int C, int S, int G,
                               int cnhw, int64_t lo, int64_t hi)
{
    const int cg = C / G;
    const float *gamma = w, *beta = w + C;
    for (int64_t t0 = lo; t0 < hi; t0 += GN_LANES) {
        const int n = hi - t0 < GN_LANES ? (int)(hi - t0) : GN_LANES;
        double mu[GN_LANES], rstd[GN_LANES];
        moments(mu, rstd, inp, t0, n, G, cg, B, C, S, cnhw);
        for (int l = 0; l < n; l++) {
            const int64_t t = t0 + l;
            const int b = (int)(t / G), g = (int)(t % G);
            stats[2 * t] = (float)mu[l], stats[2 * t + 1] = (float)rstd[l];
            const float fm = (float)mu[l], fr = (float)rstd[l];
            for (int c = g * cg; c < (g + 1) * cg; c++) {
                const size_t o = plane(cnhw, b, c, B, C, S);
                const float a = fr * gamma[c], sh = beta[c] - fm * a;
                for (int i = 0; i < S; i++) out[o + i] = inp[o + i] * a + sh;
            }
        }
    }
}

/* dgamma_c and dbeta_c of channel c of task t's example (sums over the S values of the channel, each its own chain)
 * for n <= GN_LANES tasks side by side */
static void channel_sums(double *dg, double *db, const float *dout, const float *inp, const float *stats, int64_t t0,
                         int n, int j, int G, int cg, int B, int C, int S, int cnhw)
{
    const float *x[GN_LANES], *d[GN_LANES];
    double mu[GN_LANES], rs[GN_LANES];
    for (int l = 0; l < n; l++) {
        x[l] = group_plane(inp, t0 + l, j, G, cg, B, C, S, cnhw);
        d[l] = group_plane(dout, t0 + l, j, G, cg, B, C, S, cnhw);
        mu[l] = stats[2 * (t0 + l)], rs[l] = stats[2 * (t0 + l) + 1];
        dg[l] = 0.0, db[l] = 0.0;
    }
    if (n == GN_LANES)
        for (int i = 0; i < S; i++)
            for (int l = 0; l < GN_LANES; l++) {
                const double xh = ((double)x[l][i] - mu[l]) * rs[l], dy = d[l][i];
                dg[l] += dy * xh, db[l] += dy;
            }
    else
        for (int l = 0; l < n; l++)
            for (int i = 0; i < S; i++) {
                const double xh = ((double)x[l][i] - mu[l]) * rs[l], dy = d[l][i];
                dg[l] += dy * xh, db[l] += dy;
            }
}

void dpfl_nn_groupnorm_backward(float *dinp, float *ps, const float *dout, const float *inp, const float *w,
                                const float *stats, int B, int C, int S, int G, int cnhw, int64_t lo, int64_t hi)
{
    const int cg = C / G;
    const float *gamma = w;
    for (int64_t t0 = lo; t0 < hi; t0 += GN_LANES) {
        const int n = hi - t0 < GN_LANES ? (int)(hi - t0) : GN_LANES;
        double sd[GN_LANES] = {0}, sdx[GN_LANES] = {0}; /* sums of dxhat and dxhat * xhat over each group */
        for (int j = 0; j < cg; j++) {
            double dg[GN_LANES], db[GN_LANES];
            channel_sums(dg, db, dout, inp, stats, t0, n, j, G, cg, B, C, S, cnhw);
            for (int l = 0; l < n; l++) {
                const int64_t t = t0 + l;
                const int c = (int)(t % G) * cg + j;
                float *pg = ps + (size_t)(t / G) * 2 * C;
                pg[c] = (float)dg[l], pg[C + c] = (float)db[l];
                sd[l] += db[l] * gamma[c], sdx[l] += dg[l] * gamma[c];
            }
        }
        if (!dinp) continue;
        for (int l = 0; l < n; l++) {
            const int64_t t = t0 + l;
            const int b = (int)(t / G), g = (int)(t % G);
            const float mu = stats[2 * t], rstd = stats[2 * t + 1];
            const double cnt = (double)cg * S, md = sd[l] / cnt, mdx = sdx[l] / cnt;
            for (int c = g * cg; c < (g + 1) * cg; c++) {
                const size_t o = plane(cnhw, b, c, B, C, S);
                for (int i = 0; i < S; i++) {
                    const double xh = ((double)inp[o + i] - mu) * rstd;
                    dinp[o + i] = (float)(rstd * ((double)dout[o + i] * gamma[c] - md - xh * mdx));
                }
            }
        }
    }
}

/* ---------------------------------------------------------------- the layer: spec, shapes, driver hooks */
/* The channels and values per channel a GroupNorm layer normalizes: a flat input (1, 1, F) is F channels of 1
 * value (LayerNorm over features; both layouts coincide with one channel). */
static void gn_shape(const dpfl_layer *L, int *C, int *S)
{
    if (L->in_c == 1 && L->in_h == 1) *C = L->in_w, *S = 1;
    else *C = L->in_c, *S = L->in_h * L->in_w;
}

static int gn_match(const char *tok) { return !strncmp(tok, "gn", 2) || !strcmp(tok, "ln"); }

/* gn<G> and ln: GroupNorm, LayerNorm (= gn1) */
static dpfl_status gn_parse(dpfl_nn_builder *bd, const char *tok)
{
    const char *p = tok;
    dpfl_layer *L;
    long g = 1;
    if (tok[0] == 'g') {
        p += 2;
        g = dpfl_nn_read_int(&p);
        if (*p || g < 1) return dpfl_nn_build_bad(bd, tok, "expected gn<G> (GroupNorm with G groups) or ln");
    }
    L = dpfl_nn_build_push(bd, DPFL_LAYER_GROUPNORM);
    if (!L) return dpfl_nn_build_bad(bd, tok, "too many layers");
    int C, S;
    gn_shape(L, &C, &S);
    if (C % g) {
        bd->m->nlayers--;
        return dpfl_nn_build_bad(bd, tok, "the number of groups must divide the number of channels");
    }
    L->groups = (int32_t)g;
    L->nparam = 2 * (size_t)C;
    return DPFL_OK;
}

/* PyTorch's: gamma = 1, beta = 0 */
static void gn_init(const dpfl_layer *L, float *p, dpfl_rng *rng)
{
    (void)rng;
    for (size_t i = 0; i < L->nparam; i++) p[i] = i < L->nparam / 2 ? 1.0f : 0.0f;
}

static size_t gn_state_floats(const dpfl_layer *L) { return 2 * (size_t)L->groups; }

typedef struct {
    const dpfl_layer *L;
    float *out, *ps, *stats;
    const float *in, *gout, *w;
    int B, cnhw;
} gn_job;

/* forward (gout == NULL) or backward of the (example, group) items [lo, hi) */
static void gn_run(void *ctx, int64_t lo, int64_t hi)
{
    gn_job *j = ctx;
    int C, S;
    gn_shape(j->L, &C, &S);
    if (j->gout)
        dpfl_nn_groupnorm_backward(j->out, j->ps, j->gout, j->in, j->w, j->stats, j->B, C, S, j->L->groups, j->cnhw,
                                   lo, hi);
    else
        dpfl_nn_groupnorm_forward(j->out, j->stats, j->in, j->w, j->B, C, S, j->L->groups, j->cnhw, lo, hi);
}

static void gn_forward(const dpfl_nn_fwd *f)
{
    dpfl_par_for(f->par, (int64_t)f->B * f->L->groups, gn_run,
                 &(gn_job){.L = f->L, .out = f->out, .in = f->in, .w = f->w, .stats = f->own.state, .B = f->B,
                           .cnhw = f->own.in_cnhw});
}

/* every example's (dgamma, dbeta) into ps; the batch gradient is their sum in example order */
static void gn_backward(const dpfl_nn_bwd *j)
{
    const dpfl_layer *L = j->L;
    const int B = j->B;
    double *sq = j->sq;
    float *ps = j->ps;
    dpfl_par_for(j->par, (int64_t)B * L->groups, gn_run,
                 &(gn_job){.L = L, .out = j->gin, .gout = j->gout, .in = j->in, .w = j->w, .ps = ps,
                           .stats = j->own.state, .B = B, .cnhw = j->own.in_cnhw});
    if (j->mode == DPFL_BWD_PERSAMPLE) {
        for (int b = 0; b < B; b++) sq[b] += dpfl_nn_sumsq(ps + (size_t)b * L->nparam, L->nparam);
    } else {
        dpfl_vec_zero(j->gbuf, L->nparam);
        for (int b = 0; b < B; b++) dpfl_vec_axpy(j->gbuf, 1.0f, ps + (size_t)b * L->nparam, L->nparam);
    }
}

/* nn.GroupNorm's weight (gamma) and bias (beta), (C,) */
static int gn_arrays(const dpfl_layer *L, dpfl_nn_param_array *a)
{
    const size_t C = L->nparam / 2;
    a[0] = (dpfl_nn_param_array){.name = "weight", .off = 0, .count = C, .ndim = 1, .shape = {(int64_t)C}};
    a[1] = (dpfl_nn_param_array){.name = "bias", .off = C, .count = C, .ndim = 1, .shape = {(int64_t)C}};
    return 2;
}

const dpfl_layer_ops dpfl_nn_groupnorm_ops = {
    .name = "groupnorm", .match = gn_match, .syntax = "gn<G>, ln",
    .parse = gn_parse, .init = gn_init, .layout = DPFL_NN_LAYOUT_SAME,
    .keeps_persample = 1, .state_floats = gn_state_floats, .forward = gn_forward, .backward = gn_backward,
    .arrays = gn_arrays,
};
