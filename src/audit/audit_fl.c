/* Record-level privacy audit of the federated simulation (include/dpfl/audit.h): gradient canaries given to one
 * client, the server as the attacker, and the statistics of src/audit/audit_stats.c on the canaries' scores.
 *
 * A canary is an input that is zero except one feature j that is zero in every training record, with a label of
 * its own.  In the first (linear) layer only the canary moves the weights W[:, j] (no other record has x_j != 0),
 * so client 0's update restricted to W[:, j] is the canary's clipped gradients (if it was sampled) plus the DP
 * noise, and nothing else -- the most a single record can show, as in the "Dirac canary" audits of DP-SGD.  The
 * score projects that slice on minus the canary's own gradient at the round's global model (what a step on the
 * canary moves it by), summed over the rounds client 0 takes part in.  Without the canary the projection is pure
 * Gaussian noise of mean 0. */
#include "dpfl/audit.h"
#include "dpfl/fl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { PURPOSE_AUDIT = 0xA0D1 };

void dpfl_audit_defaults(dpfl_audit_options *o)
{
    memset(o, 0, sizeof *o);
    o->canaries = 64;
    o->runs = 1;
    o->method = DPFL_AUDIT_ONE_RUN;
    o->confidence = 0.95;
    o->canary_value = 1.0;
    o->seed = 1;
}

typedef struct {
    const dpfl_model *model;
    const float *global; /* the round's global model (the server updates it after every client has replied) */
    dpfl_nn_ws *ws;
    float *grad, *x;
    int32_t k, client, classes;
    const int32_t *feature; /* canary i's feature */
    double value;
    size_t w_off;           /* first linear layer: weights (OC, in) at w_off */
    int32_t oc, in;
    double *score;          /* k scores of this run */
} observer;

static int32_t canary_label(int32_t i, int32_t classes) { return i % classes; }

static void observe(void *ctx, int32_t round, int32_t client, const float *update, size_t P)
{
    (void)round;
    (void)P;
    observer *o = ctx;
    if (client != o->client) return;
    for (int32_t i = 0; i < o->k; i++) {
        const int32_t j = o->feature[i];
        memset(o->x, 0, (size_t)o->model->in_dim * sizeof(float));
        o->x[j] = (float)o->value;
        int32_t y = canary_label(i, o->classes);
        dpfl_nn_grad(o->model, o->global, o->ws, o->x, &y, 1, NULL, o->grad, NULL);
        double gg = 0, dot = 0;
        for (int32_t c = 0; c < o->oc; c++) {
            size_t at = o->w_off + (size_t)c * (size_t)o->in + (size_t)j;
            gg += (double)o->grad[at] * o->grad[at];
            dot += (double)update[at] * o->grad[at];
        }
        if (gg > 0) o->score[i] += -dot / sqrt(gg);
    }
}

/* The first layer with parameters must be linear on the raw input features. */
static dpfl_status first_linear(const dpfl_model *m, size_t *off, int32_t *oc, int32_t *in, dpfl_error *err)
{
    for (int32_t l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (L->kind == DPFL_LAYER_FLATTEN) continue;
        if (L->kind != DPFL_LAYER_LINEAR)
            break;
        *off = L->param_off;
        *oc = L->out_w;
        *in = L->in_w;
        if (*in != m->in_dim) break;
        return DPFL_OK;
    }
    return dpfl_fail(err, DPFL_EINVAL, "audit: model %s: gradient canaries need a first layer that is linear on the "
                                       "input (logreg, mlp:..., net:fc...); convolutional models are not supported",
                     m->spec);
}

/* Run r's partition: client 0 gets the canaries that are in (Poisson: added; fixed: the canary or the blank). */
static dpfl_status canary_partition(const dpfl_partition *base, int32_t n, int32_t k, const int *in, int replace,
                                    dpfl_partition *out, dpfl_error *err)
{
    int32_t extra = 0;
    for (int32_t i = 0; i < k; i++) extra += replace || in[i];
    memset(out, 0, sizeof *out);
    out->clients = base->clients;
    out->offset = malloc((size_t)(base->clients + 1) * sizeof(int32_t));
    out->index = malloc(((size_t)base->offset[base->clients] + (size_t)extra + 1) * sizeof(int32_t));
    if (!out->offset || !out->index) {
        free(out->offset);
        free(out->index);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit partition)");
    }
    int32_t at = 0;
    out->offset[0] = 0;
    for (int32_t c = 0; c < base->clients; c++) {
        for (int32_t t = base->offset[c]; t < base->offset[c + 1]; t++) out->index[at++] = base->index[t];
        if (c == 0)
            for (int32_t i = 0; i < k; i++) {
                if (in[i]) out->index[at++] = n + i;
                else if (replace) out->index[at++] = n + k; /* the blank record */
            }
        out->offset[c + 1] = at;
    }
    out->test_offset = base->test_offset; /* borrowed */
    out->test_index = base->test_index;
    return DPFL_OK;
}

typedef struct {
    dpfl_model model;
    dpfl_dataset aug;
    dpfl_partition base, part;
    float *global;
    observer ob;
    int32_t *feature;
    double *scores;
    int *member;
} audit_state;

static void state_free(audit_state *a)
{
    dpfl_model_free(&a->model);
    dpfl_free(a->aug.x);
    free(a->aug.y);
    dpfl_partition_free(&a->base);
    free(a->part.offset);
    free(a->part.index);
    dpfl_free(a->global);
    dpfl_nn_ws_free(a->ob.ws);
    dpfl_free(a->ob.grad);
    free(a->ob.x);
    free(a->feature);
    free(a->scores);
    free(a->member);
}

static dpfl_status train_one(const dpfl_config *cfg, const dpfl_dataset *test, audit_state *a, const dpfl_rng *root,
                             int32_t run, const dpfl_audit_options *opt, dpfl_audit_report *rep, dpfl_error *err)
{
    const int32_t k = opt->canaries;
    dpfl_rng rr, mrng, irng;
    dpfl_rng_derive(root, &rr, (uint64_t)run, 0, PURPOSE_AUDIT);
    dpfl_rng_derive(root, &mrng, (uint64_t)run, 1, PURPOSE_AUDIT);
    dpfl_rng_derive(root, &irng, (uint64_t)run, 2, PURPOSE_AUDIT);
    int *in = a->member + (size_t)run * (size_t)k;
    for (int32_t i = 0; i < k; i++) in[i] = dpfl_rng_bernoulli(&mrng, 0.5);
    free(a->part.offset);
    free(a->part.index);
    a->part.offset = NULL;
    a->part.index = NULL;
    dpfl_status st = canary_partition(&a->base, a->aug.n - k - 1, k, in, cfg->record_dp.sampler == DPFL_BATCH_FIXED,
                                      &a->part, err);
    if (st) return st;
    dpfl_model_init(&a->model, a->global, &irng);
    double z = cfg->record_dp.noise;
    if (z == 0.0 && (st = dpfl_record_calibrate(&a->part, cfg, cfg->fl.rounds, cfg->record_dp.target_epsilon, &z, err)))
        return st;
    rep->noise = z;
    dpfl_sim *sim;
    if ((st = dpfl_sim_create(cfg, &a->model, &a->aug, test, &a->part, &rr, a->global, &sim, err))) return st;
    dpfl_record_dp_set_noise(dpfl_sim_record_dp(sim), z);
    a->ob.score = a->scores + (size_t)run * (size_t)k;
    for (int32_t i = 0; i < k; i++) a->ob.score[i] = 0.0;
    dpfl_server_set_update_observer(dpfl_sim_server(sim), observe, &a->ob);
    for (int32_t r = 1; r <= cfg->fl.rounds && !st; r++) {
        dpfl_round_metrics m;
        st = dpfl_sim_round(sim, r, &m, err);
    }
    dpfl_record_report rec;
    if (!st) st = dpfl_sim_epsilon(sim, &rec, NULL, NULL, err);
    if (!st && rec.epsilon > rep->claimed_epsilon) rep->claimed_epsilon = rec.epsilon;
    dpfl_sim_free(sim);
    return st;
}

/* what an audit needs: a record-level claim, 2 canaries, 1 run, a confidence, a canary value */
static dpfl_status audit_check(const dpfl_config *cfg, const dpfl_audit_options *opt, dpfl_error *err)
{
    if (!cfg->record_dp.enabled)
        return dpfl_fail(err, DPFL_EINVAL, "audit: record_dp.enabled = no: there is no record-level claim to audit "
                                           "(set [record_dp] enabled = yes, or --set record_dp.enabled=yes)");
    if (opt->canaries < 2 || opt->runs < 1)
        return dpfl_fail(err, DPFL_EINVAL, "audit: need at least 2 canaries (%d) and 1 run (%d)", opt->canaries,
                         opt->runs);
    if (!(opt->confidence > 0 && opt->confidence < 1))
        return dpfl_fail(err, DPFL_EINVAL, "audit: confidence %g must be in (0, 1)", opt->confidence);
    if (!(opt->canary_value != 0 && isfinite(opt->canary_value)))
        return dpfl_fail(err, DPFL_EINVAL, "audit: canary value must be finite and non-zero");
    return DPFL_OK;
}

/* the canaries' features: the first k that are zero in every training record (rep->free_features: how many are) */
static dpfl_status canary_features(const dpfl_config *cfg, const dpfl_dataset *train, int32_t k, audit_state *a,
                                   dpfl_audit_report *rep, dpfl_error *err)
{
    const int32_t dim = train->dim;
    unsigned char *used = calloc((size_t)dim, 1);
    a->feature = malloc((size_t)k * sizeof(int32_t));
    if (!used || !a->feature) {
        free(used);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit)");
    }
    for (int32_t i = 0; i < train->n; i++)
        for (int32_t j = 0; j < dim; j++) used[j] |= train->x[(size_t)i * (size_t)dim + (size_t)j] != 0.0f;
    for (int32_t j = 0; j < dim; j++)
        if (!used[j]) {
            if (rep->free_features < k) a->feature[rep->free_features] = j;
            rep->free_features++;
        }
    free(used);
    if (rep->free_features < k)
        return dpfl_fail(err, DPFL_EINVAL, "audit: %d canaries need as many input features that are zero in every "
                                           "training record; %s has %d (MNIST has 67; data.normalize = standard leaves "
                                           "none): use --canaries %d or more --runs",
                         k, cfg->data.dataset, rep->free_features, rep->free_features);
    return DPFL_OK;
}

/* the training set, then the k canaries, then one blank record (all zero: the replace-one stand-in) */
static dpfl_status canary_dataset(const dpfl_dataset *train, int32_t k, double value, audit_state *a,
                                  dpfl_error *err)
{
    const int32_t dim = train->dim;
    a->aug = *train;
    a->aug.n = train->n + k + 1;
    a->aug.group = NULL;
    a->aug.absent = NULL;
    a->aug.groups = 0;
    a->aug.x = dpfl_calloc((size_t)a->aug.n * (size_t)dim, sizeof(float), err);
    a->aug.y = malloc((size_t)a->aug.n * sizeof(int32_t));
    if (!a->aug.x || !a->aug.y) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit: training set plus canaries)");
    memcpy(a->aug.x, train->x, (size_t)train->n * (size_t)dim * sizeof(float));
    memcpy(a->aug.y, train->y, (size_t)train->n * sizeof(int32_t));
    for (int32_t i = 0; i < k; i++) {
        a->aug.x[(size_t)(train->n + i) * (size_t)dim + (size_t)a->feature[i]] = (float)value;
        a->aug.y[train->n + i] = canary_label(i, train->classes);
    }
    a->aug.y[train->n + k] = 0;
    return DPFL_OK;
}

/* the observer of the canary client's updates: its buffers, a one-example workspace, the scores of R runs */
static dpfl_status observer_setup(const dpfl_dataset *train, int32_t k, int32_t R, double value, audit_state *a,
                                  dpfl_error *err)
{
    const size_t P = a->model.nparam;
    a->global = dpfl_alloc(P * sizeof(float), err);
    a->ob.grad = dpfl_alloc(P * sizeof(float), err);
    a->ob.x = malloc((size_t)train->dim * sizeof(float));
    a->scores = calloc((size_t)k * (size_t)R, sizeof(double));
    a->member = calloc((size_t)k * (size_t)R, sizeof(int));
    if (!a->global || !a->ob.grad || !a->ob.x || !a->scores || !a->member)
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (audit)");
    if (!(a->ob.ws = dpfl_nn_ws_create(&a->model, 1, err))) return DPFL_ENOMEM;
    dpfl_status st = dpfl_nn_ws_set_threads(a->ob.ws, 1, err);
    if (st) return st;
    a->ob.model = &a->model;
    a->ob.global = a->global;
    a->ob.k = k;
    a->ob.client = 0;
    a->ob.classes = train->classes;
    a->ob.feature = a->feature;
    a->ob.value = value;
    return DPFL_OK;
}

/* the lower bounds from the runs' scores: the one-run estimator, the multi-run one where both memberships occur;
 * rep->bound the method's, rep->other the other's */
static dpfl_status estimate(const audit_state *a, int32_t k, int32_t R, const dpfl_audit_options *opt,
                            dpfl_audit_report *rep, dpfl_error *err)
{
    const int64_t n = (int64_t)k * R;
    const double level = 1.0 - opt->confidence;
    int64_t nin = 0;
    for (int64_t i = 0; i < n; i++) nin += a->member[i];
    dpfl_audit_bound one, multi;
    memset(&multi, 0, sizeof multi);
    multi.epsilon = NAN;
    dpfl_status st;
    if ((st = dpfl_audit_one_run(a->scores, a->member, n, rep->delta, level, &one, err))) return st;
    if (nin > 0 && nin < n && (st = dpfl_audit_multi_run(a->scores, a->member, n, rep->delta, level, &multi, err)))
        return st;
    if (opt->method == DPFL_AUDIT_MULTI_RUN && !(nin > 0 && nin < n))
        return dpfl_fail(err, DPFL_EINVAL, "audit: every canary was %s: the multi-run estimator needs both; use more "
                                           "canaries or runs", nin ? "in" : "out");
    rep->bound = opt->method == DPFL_AUDIT_MULTI_RUN ? multi : one;
    rep->other = opt->method == DPFL_AUDIT_MULTI_RUN ? one : multi;
    return DPFL_OK;
}

dpfl_status dpfl_audit_record_level(const dpfl_config *cfg, const dpfl_dataset *train, const dpfl_dataset *test,
                                    const dpfl_audit_options *opt, dpfl_audit_report *rep, dpfl_error *err)
{
    memset(rep, 0, sizeof *rep);
    dpfl_status st = audit_check(cfg, opt, err);
    if (st) return st;
    const double t0 = dpfl_now();
    const int32_t k = opt->canaries, R = opt->runs;
    audit_state a;
    memset(&a, 0, sizeof a);
    char mspec[300];
    dpfl_config_model_spec(cfg, mspec, sizeof mspec);
    if ((st = dpfl_model_create(mspec, train->c, train->h, train->w, train->classes, &a.model, err))) goto out;
    if ((st = first_linear(&a.model, &a.ob.w_off, &a.ob.oc, &a.ob.in, err))) goto out;
    if ((st = canary_features(cfg, train, k, &a, rep, err))) goto out;
    if ((st = canary_dataset(train, k, opt->canary_value, &a, err))) goto out;
    dpfl_rng root;
    dpfl_rng_init_seed(&root, opt->seed);
    dpfl_partition_spec spec;
    dpfl_config_partition_spec(cfg, &spec);
    dpfl_rng prng;
    dpfl_rng_derive(&root, &prng, 0, 3, PURPOSE_AUDIT);
    if ((st = dpfl_partition_make(train, test, &spec, &prng, &a.base, err))) goto out;
    if ((st = observer_setup(train, k, R, opt->canary_value, &a, err))) goto out;
    rep->delta = cfg->record_dp.delta;
    rep->canary_client = 0;
    for (int32_t run = 0; run < R; run++) {
        if ((st = train_one(cfg, test, &a, &root, run, opt, rep, err))) goto out;
        if (!opt->quiet)
            fprintf(stderr, "dpfl audit: run %d of %d trained (%.1f s)\n", run + 1, R, dpfl_now() - t0);
    }
    if ((st = estimate(&a, k, R, opt, rep, err))) goto out;
    rep->seconds = dpfl_now() - t0;
out:
    state_free(&a);
    return st;
}
