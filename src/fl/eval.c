/* Evaluation of the global model: on the global test set in chunks of EVAL_CHUNK examples, and on each client's
 * own test split where the partition has them (their mean and spread); with fl.personalization = helper or an
 * input transform also each client's own model (its helper model or the global one, behind its own transform) on
 * its own split; on the worker threads. */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>

enum { EVAL_CHUNK = 500 };

struct eval_job {
    const float *w;     /* the model evaluated */
    const float *tr;    /* NULL, or the client's own input transform in place of w's first s->tr parameters */
    const int32_t *idx; /* test-set indices */
    int32_t n;
    double loss, acc;
};

static void *eval_worker(void *p)
{
    thread_arg *a = p;
    dpfl_sim *s = a->s;
    worker *w = &s->workers[a->id];
    for (;;) {
        int j = atomic_fetch_add(&s->next, 1);
        if (j >= s->chunk_len) break;
        eval_job *job = &s->jobs[j];
        const float *model = job->w;
        if (job->tr) { /* the worker's own copy: w with the client's transform */
            dpfl_vec_copy(w->local, job->w, s->model->nparam);
            dpfl_vec_copy(w->local, job->tr, s->tr);
            model = w->local;
        }
        double loss_sum = 0, correct = 0;
        for (int32_t i = 0; i < job->n; i += s->eval_batch) {
            int32_t b = job->n - i < s->eval_batch ? job->n - i : s->eval_batch;
            fl_gather(s->test, job->idx + i, b, w->xbuf, w->ybuf);
            double l, a2;
            dpfl_nn_evaluate(s->model, model, w->ws, w->xbuf, w->ybuf, b, &l, &a2);
            loss_sum += l * b;
            correct += a2 * b;
        }
        job->loss = job->n ? loss_sum / job->n : NAN;
        job->acc = job->n ? correct / job->n : NAN;
    }
    return NULL;
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

void dpfl_sim_evaluate(dpfl_sim *s, dpfl_round_metrics *m)
{
    const dpfl_dataset *te = s->test;
    int32_t n = te->n;
    int32_t chunks = (n + EVAL_CHUNK - 1) / EVAL_CHUNK;
    int32_t *all = malloc((size_t)n * sizeof *all);
    int32_t nclient = s->part->test_offset ? s->part->clients : 0;
    int32_t npersonal = s->helper || s->tr ? nclient : 0;
    eval_job *jobs = calloc((size_t)(chunks + nclient + npersonal), sizeof *jobs);
    if (!all || !jobs) {
        free(all);
        free(jobs);
        return; /* metrics stay NAN */
    }
    if (te->absent) { /* a deployment's server without some sites' files: only the rows it holds */
        n = 0;
        for (int32_t i = 0; i < te->n; i++)
            if (!te->absent[te->group[i]]) all[n++] = i;
        chunks = (n + EVAL_CHUNK - 1) / EVAL_CHUNK;
    } else {
        for (int32_t i = 0; i < n; i++) all[i] = i;
    }
    for (int32_t c = 0; c < chunks; c++) {
        jobs[c].w = s->global;
        jobs[c].idx = all + (size_t)c * EVAL_CHUNK;
        jobs[c].n = n - c * EVAL_CHUNK < EVAL_CHUNK ? n - c * EVAL_CHUNK : EVAL_CHUNK;
    }
    for (int32_t k = 0; k < nclient; k++) {
        eval_job *g = &jobs[chunks + k], *h = &jobs[chunks + nclient + k];
        g->w = s->global;
        g->idx = s->part->test_index + s->part->test_offset[k];
        g->n = s->part->test_offset[k + 1] - s->part->test_offset[k];
        if (te->absent && g->n && te->absent[te->group[g->idx[0]]]) g->n = 0; /* not here: not evaluated */
        if (k < npersonal) {
            *h = *g;
            h->w = s->helper ? fl_client_model(s, k) : s->global;
            h->tr = s->tr ? fl_client_transform(s, k) : NULL;
        }
    }
    s->jobs = jobs;
    s->chunk_len = chunks + nclient + npersonal;
    fl_run_parallel(s, eval_worker, s->chunk_len);
    double loss = 0, acc = 0;
    for (int32_t c = 0; c < chunks; c++) {
        loss += jobs[c].loss * jobs[c].n;
        acc += jobs[c].acc * jobs[c].n;
    }
    m->test_loss = n ? loss / n : NAN;
    m->test_accuracy = n ? acc / n : NAN;
    spread(jobs + chunks, nclient, &m->client_acc_mean, &m->client_acc_std);
    spread(jobs + chunks + nclient, npersonal, &m->personal_acc_mean, &m->personal_acc_std);
    if (npersonal) { /* the latest freshly trained models, computed by the clients as they trained */
        double sum = 0, sum2 = 0;
        int32_t cnt = 0;
        for (int32_t k = 0; k < npersonal; k++) {
            double a = s->cstate[k].local_acc;
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
