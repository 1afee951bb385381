/* Evaluation of the global model: on the global test set in chunks of EVAL_CHUNK examples, and on each client's
 * own test split where the partition has them (their mean and spread), on the worker threads. */
#include "sim_internal.h"

#include <math.h>
#include <stdlib.h>

enum { EVAL_CHUNK = 500 };

struct eval_job {
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
        double loss_sum = 0, correct = 0;
        for (int32_t i = 0; i < job->n; i += s->eval_batch) {
            int32_t b = job->n - i < s->eval_batch ? job->n - i : s->eval_batch;
            fl_gather(s->test, job->idx + i, b, w->xbuf, w->ybuf);
            double l, a2;
            dpfl_nn_evaluate(s->model, s->global, w->ws, w->xbuf, w->ybuf, b, &l, &a2);
            loss_sum += l * b;
            correct += a2 * b;
        }
        job->loss = job->n ? loss_sum / job->n : NAN;
        job->acc = job->n ? correct / job->n : NAN;
    }
    return NULL;
}

void dpfl_sim_evaluate(dpfl_sim *s, dpfl_round_metrics *m)
{
    const int32_t n = s->test->n;
    int32_t chunks = (n + EVAL_CHUNK - 1) / EVAL_CHUNK;
    int32_t *all = malloc((size_t)n * sizeof *all);
    int32_t nclient = s->part->test_offset ? s->part->clients : 0;
    eval_job *jobs = calloc((size_t)(chunks + nclient), sizeof *jobs);
    if (!all || !jobs) {
        free(all);
        free(jobs);
        return; /* metrics stay NAN */
    }
    for (int32_t i = 0; i < n; i++) all[i] = i;
    for (int32_t c = 0; c < chunks; c++) {
        jobs[c].idx = all + (size_t)c * EVAL_CHUNK;
        jobs[c].n = n - c * EVAL_CHUNK < EVAL_CHUNK ? n - c * EVAL_CHUNK : EVAL_CHUNK;
    }
    for (int32_t k = 0; k < nclient; k++) {
        jobs[chunks + k].idx = s->part->test_index + s->part->test_offset[k];
        jobs[chunks + k].n = s->part->test_offset[k + 1] - s->part->test_offset[k];
    }
    s->jobs = jobs;
    s->chunk_len = chunks + nclient;
    fl_run_parallel(s, eval_worker, s->chunk_len);
    double loss = 0, acc = 0;
    for (int32_t c = 0; c < chunks; c++) {
        loss += jobs[c].loss * jobs[c].n;
        acc += jobs[c].acc * jobs[c].n;
    }
    m->test_loss = n ? loss / n : NAN;
    m->test_accuracy = n ? acc / n : NAN;
    if (nclient) {
        double sum = 0, sum2 = 0;
        int32_t cnt = 0;
        for (int32_t k = 0; k < nclient; k++) {
            if (jobs[chunks + k].n == 0) continue;
            sum += jobs[chunks + k].acc;
            sum2 += jobs[chunks + k].acc * jobs[chunks + k].acc;
            cnt++;
        }
        if (cnt) {
            m->client_acc_mean = sum / cnt;
            m->client_acc_std = sqrt(fmax(0.0, sum2 / cnt - m->client_acc_mean * m->client_acc_mean));
        }
    }
    s->jobs = NULL;
    m->wall_seconds = dpfl_now() - s->t0;
    free(all);
    free(jobs);
}
