/* One round of a run: the budget check on a copy of the ledger (a round that would pass a budget is never
 * trained, let alone released), training, then the release in order -- checkpoint (model + ledger + the round's
 * metrics line) first, then metrics.jsonl and diagnostics.jsonl. */
#include "dpfl/run.h"
#include "run_internal.h"
#include "fl/sim_internal.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double fl_cpu_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static dpfl_status eval_failed(const fl_state_files *f, dpfl_error *err)
{
    if (!atomic_load(&f->read_failed)) return DPFL_OK;
    *err = f->read_err;
    return DPFL_EFORMAT;
}

/* The clients' state files of the round (the blocks that changed: its clients), written by a thread of their own
 * while the round is evaluated: mostly waiting on the disk.  The checkpoint names them only after the join. */
typedef struct {
    fl_state_store *store;
    int32_t gen;
    int running;
    pthread_t th;
    dpfl_status st;
    dpfl_error err;
    double wall, cpu; /* the thread's own */
} files_job;

static void *files_thread(void *p)
{
    files_job *j = p;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    const double w0 = dpfl_now();
    j->st = fl_store_flush(j->store, j->gen, &j->err);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    j->wall = dpfl_now() - w0;
    j->cpu = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    return NULL;
}

/* with no thread (none to start, or pthread_create failed) the checkpoint writes the files itself */
static void files_start(files_job *j, fl_state_store *s, int32_t gen)
{
    memset(j, 0, sizeof *j);
    if (!s || !s->cstate || !s->files.dir || !s->floats) return;
    j->store = s;
    j->gen = gen;
    j->running = pthread_create(&j->th, NULL, files_thread, j) == 0;
}

static dpfl_status files_join(files_job *j, run_progress *pr, dpfl_error *err)
{
    if (!j->running) return DPFL_OK;
    pthread_join(j->th, NULL);
    j->running = 0;
    pr->stage_wall[RUN_STAGE_FILES] += j->wall;
    pr->stage_cpu[RUN_STAGE_FILES] += j->cpu;
    if (j->st) *err = j->err;
    return j->st;
}

/* stage i of the round ends now: its time since *wall / *cpu, which restart there */
static void stage_end(run_progress *pr, int i, double *wall, double *cpu)
{
    const double w = dpfl_now(), u = fl_cpu_seconds();
    pr->stage_wall[i] += w - *wall;
    pr->stage_cpu[i] += u - *cpu;
    *wall = w;
    *cpu = u;
}

/* Round r's clients sampled, and with client-level DP the noise multiplier in force for it set: what the charge
 * below prices and the training after it releases. */
static dpfl_status sample_round(const run_inputs *in, const run_acct *a, int32_t r, dpfl_error *err)
{
    dpfl_sim_sample(in->sim, r, NULL);
    if (!in->cdp_on) return DPFL_OK;
    return dpfl_server_set_noise(in->server, r, dpfl_round_client_noise(in->cfg, r, a->rs.client_z), err);
}

/* Charge round r, sampled, to a->trial; next (a copy of a->g): the guarantees after it (its per_client is a->g's own
 * buffer, written in place: it is read only from the round's metrics line, after the round is released); *stop = 1
 * if that passes a budget. */
static dpfl_status charge(const run_inputs *in, run_acct *a, int32_t r, run_guarantees *next, int *stop,
                          dpfl_error *err)
{
    const dpfl_config *cfg = in->cfg;
    dpfl_status st;
    /* the charge the simulation will make when it trains this round, on a copy */
    if ((st = dpfl_ledger_copy(&a->trial, &a->ledger, err))) return st;
    if ((st = dpfl_server_charge(in->server, &a->trial, err))) return st;
    *stop = 0;
    if (a->rpdp.on) { /* per-record budgets: the round sampled is the plan's; levels whose next round would pass
                       * their budget opt out first */
        const dpfl_mech_rpdp ran = dpfl_record_dp_design(in->record_dp);
        int changed;
        if ((st = fl_rpdp_check_round(&a->rpdp.levels, &ran, r, err)) ||
            (st = fl_rpdp_before_round(&a->rpdp, cfg, &changed, err)))
            return st;
    } else if (in->rdp_on) {
        if ((st = fl_record_guarantee(cfg, &in->part, &a->ra, a->rs.record_z, &a->trial, &next->report,
                                      next->per_client, &next->ledger_eps, err)))
            return st;
        if (cfg->record_dp.target_epsilon > 0 && next->report.epsilon > cfg->record_dp.target_epsilon) *stop = 1;
    }
    if (in->cdp_on && !*stop) {
        if ((st = fl_client_epsilon(cfg, &a->trial, &next->ceps, &next->cprivate, err))) return st;
        const double target = cfg->client_dp.target_epsilon;
        if (next->cprivate && target > 0 && next->ceps > target) *stop = 1;
    }
    return DPFL_OK;
}

/* dpfl_run_options.on_round with round m's figures; its return value */
static int notify(const run_ctx *c, const dpfl_round_metrics *m, const char *line)
{
    const run_inputs *in = &c->node.in;
    const run_acct *a = &c->node.acct;
    const dpfl_run_round rr = {
        .round = m->round, .rounds = in->cfg->fl.rounds, .participants = m->clients, .train_loss = m->train_loss,
        .test_accuracy = m->test_accuracy, .test_loss = m->test_loss,
        .record_epsilon = in->rdp_on ? a->g.report.epsilon : NAN,
        .client_epsilon = in->cdp_on && a->g.cprivate ? a->g.ceps : NAN,
        .wall_seconds = m->wall_seconds, .metrics_line = line};
    return c->opt->on_round(c->opt->on_round_ctx, &rr);
}

dpfl_status fl_run_round(run_ctx *c, int32_t r, int *stop, dpfl_error *err)
{
    const run_inputs *in = &c->node.in;
    run_acct *a = &c->node.acct;
    const dpfl_config *cfg = in->cfg;
    run_guarantees next = a->g;
    *stop = 0;
    dpfl_status st = sample_round(in, a, r, err);
    if (!st) st = charge(in, a, r, &next, stop, err);
    if (st || *stop) {
        c->pr.stopped_early = *stop;
        return st;
    }
    dpfl_round_metrics m;
    double wall = dpfl_now(), cpu = fl_cpu_seconds();
    if ((st = dpfl_sim_train(in->sim, r, &m, err))) return st;
    stage_end(&c->pr, RUN_STAGE_TRAIN, &wall, &cpu);
    c->pr.stage_rounds++;
    if ((st = dpfl_ledger_copy(&a->ledger, dpfl_server_ledger(in->server), err))) return st;
    if (a->rpdp.on) {
        fl_rpdp_charge(&a->rpdp.levels);
        if ((st = fl_rpdp_max_epsilon(&a->rpdp, cfg, &next.report.epsilon, err))) return st;
    }
    a->g = next;
    a->rs.examples += m.examples;
    a->rs.S = in->cdp_on ? dpfl_server_update_clip(in->server) : a->rs.S;
    c->pr.comm += m.clients;
    stage_end(&c->pr, RUN_STAGE_TRAIN, &wall, &cpu); /* the ledger's bookkeeping above: training's */
    files_job files;
    files_start(&files, &in->clients->store, a->ledger.rounds);
    if (r % cfg->run.eval_every == 0 || r == cfg->fl.rounds) {
        dpfl_sim_evaluate(in->sim, &m);
        if ((st = eval_failed(&in->clients->store.files, err))) { /* a client's state file could not be read */
            files_join(&files, &c->pr, err);
            return st;
        }
        c->pr.last_eval = m;
        stage_end(&c->pr, RUN_STAGE_EVAL, &wall, &cpu);
        c->pr.stage_evals++;
    }
    if ((st = files_join(&files, &c->pr, err))) return st;
    stage_end(&c->pr, RUN_STAGE_CHECKPOINT, &wall, &cpu); /* what the evaluation did not hide of the files */
    m.wall_seconds += c->pr.wall0;
    a->rs.wall = m.wall_seconds;
    /* diagnostics first (covered by no epsilon, so not a release to pay for): a crash after the checkpoint can
     * then never lose the round's line, and one before it leaves a line that the resume cuts away */
    if ((st = fl_report_diagnostics(in, &c->io, &c->pr, &m, err))) return st;
    char *line;
    if ((st = fl_report_round_line(cfg, &in->part, a, &m, &line, err))) return st;
    /* persist the ledger with the model it paid for (and this line), then release */
    wall = dpfl_now(), cpu = fl_cpu_seconds();
    if ((st = fl_checkpoint_save(c->io.dir, in->global, in->model.nparam, &a->ledger, &a->rs, in->clients,
                                  dpfl_server_control(in->server), a->rpdp.on ? &a->rpdp : NULL, line, err))) {
        free(line);
        return st;
    }
    stage_end(&c->pr, RUN_STAGE_CHECKPOINT, &wall, &cpu);
    if (fprintf(c->io.metrics, "%s\n", line) < 0 || fflush(c->io.metrics) != 0) {
        free(line);
        return dpfl_fail(err, DPFL_EIO, "cannot write (%s/metrics.jsonl)", c->io.dir);
    }
    if (!c->opt->quiet && isatty(2)) fl_report_progress(cfg, &a->g, &c->pr.last_eval, &m);
    if (c->opt->on_round && notify(c, &m, line)) { /* the caller's: after the release, a resumable stop */
        *stop = 1;
        c->pr.interrupted = r < cfg->fl.rounds; /* marked as dpfl_run_options.stop marks it */
    }
    free(line);
    return DPFL_OK;
}
