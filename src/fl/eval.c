/* Evaluation of the global model: on the global test set in chunks of EVAL_CHUNK examples, and on each client's
 * own test split where the partition has them (their mean and spread); with fl.personalization = helper or an
 * personal parameters also each client's own model (its helper model or the global one, with its own transform and
 * personal layers) on its own split; on the worker threads.  A helper model evaluated since it last changed is not
 * evaluated again (its figures are kept with the client: the same numbers, PriFedSync's clients that did not sync);
 * a block paged out to its state file is read by the worker that evaluates it. */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>

enum { EVAL_CHUNK = 500 };

struct eval_job {
    const float *w;     /* the model evaluated */
    const float *pv;    /* NULL, or the client's own personal parameters in place of w's personal slices */
    const int32_t *idx; /* test-set indices */
    int32_t n;
    int32_t paged;      /* k + 1: client k's own model, from its state file (blocks[worker]); 0: w and pv */
    int done;           /* loss and acc are known already (a helper model that did not change) */
    float **blocks;     /* one block per worker for paged-out clients (allocated by the worker when needed) */
    double loss, acc;
};

/* Loss and accuracy of model w on the examples idx[0..n) of d, in batches of `batch` through ws (xbuf, ybuf: room
 * for one batch).  Every evaluation goes through here (with the chunking of global_chunks and the sums of
 * global_result below), so that `dpfl eval` reproduces a run's numbers bit for bit. */
static void eval_examples(const dpfl_model *m, const float *w, dpfl_nn_ws *ws, const dpfl_dataset *d,
                          const int32_t *idx, int32_t n, int32_t batch, float *xbuf, int32_t *ybuf, double *loss,
                          double *acc)
{
    double loss_sum = 0, correct = 0;
    for (int32_t i = 0; i < n; i += batch) {
        int32_t b = n - i < batch ? n - i : batch;
        fl_gather(d, idx + i, b, xbuf, ybuf);
        double l, a2;
        dpfl_nn_evaluate(m, w, ws, xbuf, ybuf, b, &l, &a2);
        loss_sum += l * b;
        correct += a2 * b;
    }
    *loss = n ? loss_sum / n : NAN;
    *acc = n ? correct / n : NAN;
}

static void eval_worker(void *ctx, int32_t id)
{
    dpfl_sim *s = ctx;
    worker *w = &s->wk.workers[id];
    for (;;) {
        int j = atomic_fetch_add(&s->wk.next, 1);
        if (j >= s->wk.count) break;
        eval_job *job = &s->jobs[j];
        if (job->done) continue;
        const float *model = job->w;
        if (job->paged) {
            const fl_state_layout *L = &s->cl.layout;
            fl_state_files *F = &s->cl.store.files;
            const int32_t k = job->paged - 1;
            float **b = &job->blocks[id];
            dpfl_error e;
            if ((!*b && !(*b = dpfl_alloc(F->floats * sizeof(float), &e))) ||
                fl_files_read(F, &s->cl.store.cstate[k], k, *b, &e)) {
                job->loss = job->acc = NAN; /* and the run stops with e */
                int no = 0;
                if (atomic_compare_exchange_strong(&F->read_failed, &no, 1)) F->read_err = e;
                continue;
            }
            model = L->helper ? *b : job->w;
            if (L->pers.npers) {
                dpfl_vec_copy(w->local, model, s->model->nparam);
                fl_personal_load(&L->pers, fl_layout_personal(L, *b), w->local);
                model = w->local;
            }
        } else if (job->pv) { /* the worker's own copy: w with the client's personal parameters */
            dpfl_vec_copy(w->local, job->w, s->model->nparam);
            fl_personal_load(&s->cl.layout.pers, job->pv, w->local);
            model = w->local;
        }
        eval_examples(s->model, model, w->ws, s->test, job->idx, job->n, s->eval_batch, w->xbuf, w->ybuf, &job->loss,
                      &job->acc);
    }
}

/* The whole test set in chunks of EVAL_CHUNK examples (jobs[0 .. chunks)): all[i] = i, n examples. */
static int32_t global_chunks(eval_job *jobs, const float *w, const int32_t *all, int32_t n)
{
    int32_t chunks = (n + EVAL_CHUNK - 1) / EVAL_CHUNK;
    for (int32_t c = 0; c < chunks; c++) {
        jobs[c].w = w;
        jobs[c].idx = all + (size_t)c * EVAL_CHUNK;
        jobs[c].n = n - c * EVAL_CHUNK < EVAL_CHUNK ? n - c * EVAL_CHUNK : EVAL_CHUNK;
    }
    return chunks;
}

/* The test set's mean loss and accuracy from its chunks' (NAN when empty). */
static void global_result(const eval_job *jobs, int32_t chunks, int32_t n, double *mean_loss, double *accuracy)
{
    double loss = 0, acc = 0;
    for (int32_t c = 0; c < chunks; c++) {
        loss += jobs[c].loss * jobs[c].n;
        acc += jobs[c].acc * jobs[c].n;
    }
    *mean_loss = n ? loss / n : NAN;
    *accuracy = n ? acc / n : NAN;
}

/* Mean and spread over clients with a test split of jobs[0..n) accuracies. */
static void spread(const eval_job *jobs, int32_t n, double *mean, double *std)
{
    double sum = 0, sum2 = 0;
    int32_t cnt = 0;
    for (int32_t k = 0; k < n; k++) {
        if (jobs[k].n == 0) continue;
        sum += jobs[k].acc;
        sum2 += jobs[k].acc * jobs[k].acc;
        cnt++;
    }
    if (!cnt) return;
    *mean = sum / cnt;
    *std = sqrt(fmax(0.0, sum2 / cnt - *mean * *mean));
}

/* The jobs after the global model's chunks: jobs[k], the global model on client k's test set, for each of the nclient
 * clients with one; jobs[nclient + k], client k's own model (its helper, or the global one with its personal slices)
 * there, for the first npersonal (a helper unchanged since its last evaluation keeps that one; a paged-out block is
 * read by the worker that evaluates it). */
static void client_jobs(dpfl_sim *s, eval_job *jobs, int32_t nclient, int32_t npersonal, float **blocks)
{
    const dpfl_dataset *te = s->test;
    const fl_state_layout *L = &s->cl.layout;
    for (int32_t k = 0; k < nclient; k++) {
        eval_job *g = &jobs[k], *h = &jobs[nclient + k];
        g->w = s->global;
        g->idx = s->part->test_index + s->part->test_offset[k];
        g->n = s->part->test_offset[k + 1] - s->part->test_offset[k];
        if (te->absent && g->n && te->absent[te->group[g->idx[0]]]) g->n = 0; /* not here: not evaluated */
        if (k < npersonal) {
            const client_opt *o = &s->cl.store.cstate[k];
            *h = *g;
            h->blocks = blocks;
            if (L->helper && o->eval_ok) { /* unchanged since its last evaluation */
                h->done = 1;
                h->loss = o->eval_loss;
                h->acc = o->eval_acc;
            } else if (!o->state && o->gen) {
                h->paged = k + 1;
            } else {
                h->w = L->helper ? fl_store_helper(&s->cl.store, L, k) : s->global;
                h->pv = fl_layout_personal(L, o->state);
            }
        }
    }
}

void dpfl_sim_evaluate(dpfl_sim *s, dpfl_round_metrics *m)
{
    const dpfl_dataset *te = s->test;
    int32_t n = te->n;
    int32_t chunks = (n + EVAL_CHUNK - 1) / EVAL_CHUNK;
    int32_t *all = malloc((size_t)n * sizeof *all);
    int32_t nclient = s->part->test_offset ? s->part->clients : 0;
    /* the clients' own models live in their processes (dpfl join, MPI workers): not evaluated here */
    const fl_state_layout *L = &s->cl.layout;
    int32_t npersonal = (L->helper || L->pers.npers) && !s->transport->clients_hold_data ? nclient : 0;
    eval_job *jobs = calloc((size_t)(chunks + nclient + npersonal), sizeof *jobs);
    float **blocks = calloc((size_t)s->wk.nthreads, sizeof *blocks);
    if (!all || !jobs || !blocks) {
        free(all);
        free(jobs);
        free(blocks);
        return; /* metrics stay NAN */
    }
    if (te->absent) { /* a deployment's server without some sites' files: only the rows it holds */
        n = 0;
        for (int32_t i = 0; i < te->n; i++)
            if (!te->absent[te->group[i]]) all[n++] = i;
    } else {
        for (int32_t i = 0; i < n; i++) all[i] = i;
    }
    chunks = global_chunks(jobs, s->global, all, n);
    client_jobs(s, jobs + chunks, nclient, npersonal, blocks);
    s->jobs = jobs;
    s->chunk_len = chunks + nclient + npersonal;
    fl_run_parallel(&s->wk, eval_worker, s, s->chunk_len);
    for (int32_t k = 0; k < npersonal && L->helper; k++) { /* kept until the client's block changes */
        client_opt *o = &s->cl.store.cstate[k];
        const eval_job *h = &jobs[chunks + nclient + k];
        if (!isnan(h->acc)) o->eval_ok = 1, o->eval_loss = h->loss, o->eval_acc = h->acc; /* w0 before it trains */
    }
    for (int32_t i = 0; i < s->wk.nthreads; i++) dpfl_free(blocks[i]);
    free(blocks);
    global_result(jobs, chunks, n, &m->test_loss, &m->test_accuracy);
    spread(jobs + chunks, nclient, &m->client_acc_mean, &m->client_acc_std);
    spread(jobs + chunks + nclient, npersonal, &m->personal_acc_mean, &m->personal_acc_std);
    if (npersonal) { /* the latest freshly trained models, computed by the clients as they trained */
        double sum = 0, sum2 = 0;
        int32_t cnt = 0;
        for (int32_t k = 0; k < npersonal; k++) {
            double a = s->cl.store.cstate[k].local_acc;
            if (!isfinite(a)) continue;
            sum += a;
            sum2 += a * a;
            cnt++;
        }
        if (cnt) {
            m->local_acc_mean = sum / cnt;
            m->local_acc_std = sqrt(fmax(0.0, sum2 / cnt - m->local_acc_mean * m->local_acc_mean));
        }
    }
    s->jobs = NULL;
    m->wall_seconds = dpfl_now() - s->t0;
    free(all);
    free(jobs);
}

int32_t dpfl_eval_batch(const dpfl_config *cfg)
{
    return cfg && cfg->fl.batch > 256 ? cfg->fl.batch : 256;
}

dpfl_status dpfl_evaluate(const dpfl_model *m, const float *params, const dpfl_dataset *d, int32_t batch,
                          double *mean_loss, double *accuracy, dpfl_error *err)
{
    *mean_loss = *accuracy = NAN;
    if (d->dim != m->in_dim)
        return dpfl_fail(err, DPFL_EINVAL, "model (%s) takes %d inputs per example, the data has %d", m->spec,
                         (int)m->in_dim, (int)d->dim);
    const int32_t nlabels = m->out_dim == 1 ? 2 : m->out_dim;
    for (int32_t i = 0; i < d->n; i++)
        if (d->y[i] < 0 || d->y[i] >= nlabels)
            return dpfl_fail(err, DPFL_EINVAL, "model (%s) tells %d classes apart, the data has label %d (example %d)",
                             m->spec, (int)nlabels, (int)d->y[i], (int)i);
    if (batch < 1) return dpfl_fail(err, DPFL_EINVAL, "evaluation batch %d: must be >= 1", (int)batch);
    const int32_t n = d->n, chunks = (n + EVAL_CHUNK - 1) / EVAL_CHUNK;
    dpfl_status st = DPFL_ENOMEM;
    int32_t *all = malloc((size_t)n * sizeof *all + 1);
    eval_job *jobs = calloc((size_t)chunks + 1, sizeof *jobs);
    float *xbuf = dpfl_alloc((size_t)batch * (size_t)d->dim * sizeof(float), err);
    int32_t *ybuf = dpfl_alloc((size_t)batch * sizeof(int32_t), err);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(m, batch, err);
    if (!all || !jobs || !xbuf || !ybuf || !ws) {
        if (!all || !jobs) dpfl_fail(err, DPFL_ENOMEM, "out of memory (evaluation of %d examples)", (int)n);
        goto done;
    }
    /* as a run's workers: one thread each (the results do not depend on it, dpfl_nn_ws_create says) */
    if ((st = dpfl_nn_ws_set_threads(ws, 1, err))) goto done;
    for (int32_t i = 0; i < n; i++) all[i] = i;
    global_chunks(jobs, params, all, n);
    for (int32_t c = 0; c < chunks; c++)
        eval_examples(m, params, ws, d, jobs[c].idx, jobs[c].n, batch, xbuf, ybuf, &jobs[c].loss, &jobs[c].acc);
    global_result(jobs, chunks, n, mean_loss, accuracy);
    st = DPFL_OK;
done:
    dpfl_nn_ws_free(ws);
    dpfl_free(xbuf);
    dpfl_free(ybuf);
    free(all);
    free(jobs);
    return st;
}
