/* dpfl audit's training runs: synthetic data plus canaries, DP-SGD on one client through the ordinary simulation,
 * each canary scored by how much the model's margin for its label on its own input moved (see dpfl/audit.h). */
#include "dpfl/audit.h"
#include "dpfl/fl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { BASE_DIM = 20, CLASSES = 10 };

/* margin of label y on input x: logit_y - mean of the other logits */
static double margin(const dpfl_model *m, const float *params, dpfl_nn_ws *ws, const float *x, int32_t y)
{
    const float *out = dpfl_nn_forward(m, params, ws, x, 1, 0, NULL);
    double others = 0;
    for (int c = 0; c < CLASSES; c++)
        if (c != y) others += out[c];
    return out[y] - others / (CLASSES - 1);
}

/* how far training moved canary i's margin on its own input, net of what moved it on the zero input */
static double canary_score(const dpfl_model *m, const float *before, const float *after, dpfl_nn_ws *ws, float *x,
                           int32_t dim, int32_t i, double scale)
{
    memset(x, 0, (size_t)dim * sizeof *x);
    const int32_t y = i % CLASSES;
    double z0 = margin(m, after, ws, x, y) - margin(m, before, ws, x, y);
    x[BASE_DIM + i] = (float)scale;
    double z1 = margin(m, after, ws, x, y) - margin(m, before, ws, x, y);
    return z1 - z0;
}

/* the training set: the ordinary records (canary features 0), then the included canaries */
static dpfl_status build_data(const dpfl_dataset *base, const int *in, const dpfl_audit_params *p, dpfl_dataset *d,
                              dpfl_error *err)
{
    const int32_t m = p->canaries, dim = BASE_DIM + m;
    int32_t nin = 0;
    for (int32_t i = 0; i < m; i++) nin += in[i] != 0;
    memset(d, 0, sizeof *d);
    d->n = base->n + nin;
    d->c = d->h = 1;
    d->w = d->dim = dim;
    d->classes = CLASSES;
    if (!(d->x = dpfl_calloc((size_t)d->n * (size_t)dim, sizeof(float), err)) ||
        !(d->y = dpfl_alloc((size_t)d->n * sizeof(int32_t), err)))
        return DPFL_ENOMEM;
    for (int32_t r = 0; r < base->n; r++) {
        memcpy(d->x + (size_t)r * dim, base->x + (size_t)r * BASE_DIM, BASE_DIM * sizeof(float));
        d->y[r] = base->y[r];
    }
    int32_t r = base->n;
    for (int32_t i = 0; i < m; i++)
        if (in[i]) {
            d->x[(size_t)r * dim + BASE_DIM + i] = (float)p->canary_scale;
            d->y[r++] = i % CLASSES;
        }
    return DPFL_OK;
}

/* One training run; scores[0..m) filled, *claimed = the run's record-level epsilon. */
static dpfl_status one_run(const dpfl_audit_params *p, const dpfl_dataset *base, const int *in, dpfl_rng *root,
                           double *scores, double *claimed, dpfl_error *err)
{
    const int32_t m = p->canaries, dim = BASE_DIM + m;
    dpfl_dataset train = {0}, test = {0};
    dpfl_model model = {0};
    dpfl_partition part = {0};
    dpfl_sim *sim = NULL;
    dpfl_nn_ws *ws = NULL;
    float *g = NULL, *g0 = NULL, *x = NULL;
    int *none = calloc((size_t)m, sizeof *none); /* the test set: the ordinary records, no canary */
    dpfl_status st = none ? build_data(base, in, p, &train, err) : dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit)");
    if (!st) st = build_data(base, none, p, &test, err);
    free(none);
    if (st) goto done;
    test.n = test.n < 50 ? test.n : 50;
    if ((st = dpfl_model_create("logreg", 1, 1, dim, CLASSES, &model, err))) goto done;
    part.clients = 1;
    part.offset = malloc(2 * sizeof(int32_t));
    part.index = malloc((size_t)train.n * sizeof(int32_t));
    g = malloc(model.nparam * sizeof *g);
    g0 = malloc(model.nparam * sizeof *g0);
    x = malloc((size_t)dim * sizeof *x);
    if (!part.offset || !part.index || !g || !g0 || !x) {
        st = dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit)");
        goto done;
    }
    part.offset[0] = 0;
    part.offset[1] = train.n;
    for (int32_t i = 0; i < train.n; i++) part.index[i] = i;
    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    strcpy(cfg.data.dataset, "synthetic");
    cfg.data.clients = 1;
    cfg.fl.rounds = 1;
    cfg.fl.local_steps = (int32_t)p->steps;
    cfg.fl.batch = p->batch;
    cfg.fl.lr = p->lr;
    cfg.fl.sampling = DPFL_SAMPLE_ALL;
    cfg.record_dp.enabled = 1;
    cfg.record_dp.noise = p->noise;
    cfg.record_dp.clip = p->clip;
    cfg.record_dp.delta = p->delta;
    cfg.run.threads = 1;
    dpfl_rng irng;
    dpfl_rng_derive(root, &irng, 0, 0, 3);
    dpfl_model_init(&model, g, &irng);
    memcpy(g0, g, model.nparam * sizeof *g);
    if ((st = dpfl_sim_create(&cfg, &model, &train, &test, &part, root, g, &sim, err))) goto done;
    dpfl_round_metrics met;
    if ((st = dpfl_sim_round(sim, 1, &met, err))) goto done;
    dpfl_record_report rep;
    if ((st = dpfl_sim_epsilon(sim, &rep, NULL, NULL, err))) goto done;
    *claimed = rep.epsilon;
    if (!(ws = dpfl_nn_ws_create(&model, 1, err))) {
        st = DPFL_ENOMEM;
        goto done;
    }
    for (int32_t i = 0; i < m; i++) scores[i] = canary_score(&model, g0, g, ws, x, dim, i, p->canary_scale);
done:
    dpfl_nn_ws_free(ws);
    dpfl_sim_free(sim);
    free(g);
    free(g0);
    free(x);
    dpfl_partition_free(&part);
    dpfl_model_free(&model);
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    return st;
}

dpfl_status dpfl_audit_run(const dpfl_audit_params *p, dpfl_audit_result *r, dpfl_error *err)
{
    if (p->canaries < 8 || p->canaries > 100000 || p->runs < 1 || p->n < 10 || p->batch < 1 || p->steps < 1 ||
        !(p->noise >= 0) || !(p->clip > 0) || !(p->delta > 0 && p->delta < 1) || !(p->beta > 0 && p->beta < 1))
        return dpfl_fail(err, DPFL_EINVAL, "audit: need canaries in [8, 100000], runs, n >= 10, batch, steps >= 1, "
                                           "noise >= 0, clip > 0, delta and beta in (0, 1)");
    const double t0 = dpfl_now();
    memset(r, 0, sizeof *r);
    r->eps_multi_run = NAN;
    dpfl_rng root;
    dpfl_status st;
    if (p->seed) dpfl_rng_init_seed(&root, p->seed);
    else if ((st = dpfl_rng_init_os(&root, err))) return st;
    dpfl_dataset base = {0};
    const int64_t total = (int64_t)p->canaries * p->runs;
    double *scores = malloc((size_t)total * sizeof *scores);
    int *in = malloc((size_t)total * sizeof *in);
    if (!scores || !in) {
        free(scores);
        free(in);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit)");
    }
    st = dpfl_synthetic(p->n, BASE_DIM, CLASSES, 2.0, p->seed ? p->seed : dpfl_rng_u64(&root), &base, err);
    double sin = 0, sout = 0;
    int32_t nin = 0;
    for (int32_t run = 0; run < p->runs && !st; run++) {
        dpfl_rng rr, crng;
        dpfl_rng_derive(&root, &rr, (uint64_t)run, 1, 0x61756469u /* "audi" */);
        dpfl_rng_derive(&rr, &crng, 0, 0, 1);
        int *ri = in + (size_t)run * p->canaries;
        for (int32_t i = 0; i < p->canaries; i++) ri[i] = dpfl_rng_bernoulli(&crng, 0.5);
        double claimed = NAN;
        st = one_run(p, &base, ri, &rr, scores + (size_t)run * p->canaries, &claimed, err);
        if (st) break;
        if (run == 0) {
            r->claimed_epsilon = claimed;
            r->eps_one_run = dpfl_audit_one_run(scores, in, p->canaries, p->delta, p->beta, &r->correct, &r->guesses);
        }
    }
    if (!st) {
        for (int64_t i = 0; i < total; i++) {
            if (in[i]) sin += scores[i], nin++;
            else sout += scores[i];
        }
        r->mean_in = nin ? sin / nin : NAN;
        r->mean_out = total > nin ? sout / (double)(total - nin) : NAN;
        if (p->runs > 1) r->eps_multi_run = dpfl_audit_multi_run(scores, in, (int32_t)total, p->delta, p->beta);
    }
    r->seconds = dpfl_now() - t0;
    dpfl_dataset_free(&base);
    free(scores);
    free(in);
    return st;
}
