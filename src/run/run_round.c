/* One round of a run: the budget check on a copy of the ledger (a round that would pass a budget is never
 * trained, let alone released), training, then the release in order -- checkpoint (model + ledger + the round's
 * metrics line) first, then metrics.jsonl and diagnostics.jsonl. */
#include "run_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Charge round r to c->trial; *stop = 1 if that passes a budget. */
static dpfl_status charge(run_ctx *c, int32_t r, dpfl_record_report *next, double *next_ledger, double *next_ceps,
                          int *stop, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    dpfl_sim_sample(c->sim, r, NULL);
    dpfl_status st;
    if (c->cdp_on && (st = dpfl_sim_set_client_noise(c->sim, r, dpfl_round_client_noise(cfg, r, c->rs.client_z), err)))
        return st;
    /* the charge the simulation will make when it trains this round, on a copy */
    if ((st = dpfl_ledger_copy(&c->trial, &c->ledger, err))) return st;
    if ((st = dpfl_sim_charge(c->sim, &c->trial, err))) return st;
    *stop = 0;
    if (c->rpdp.on) { /* per-record budgets: levels whose next round would pass their budget opt out first */
        int changed;
        if ((st = fl_rpdp_before_round(&c->rpdp, cfg, &changed, err))) return st;
    } else if (c->rdp_on) {
        if ((st = fl_record_guarantee(c, &c->trial, next, c->per_client, next_ledger, err))) return st;
        if (cfg->record_dp.target_epsilon > 0 && next->epsilon > cfg->record_dp.target_epsilon) *stop = 1;
    }
    if (c->cdp_on && !*stop) {
        if ((st = fl_client_epsilon(cfg, &c->trial, next_ceps, &c->cprivate, err))) return st;
        if (c->cprivate && cfg->client_dp.target_epsilon > 0 && *next_ceps > cfg->client_dp.target_epsilon) *stop = 1;
    }
    return DPFL_OK;
}

dpfl_status fl_run_round(run_ctx *c, int32_t r, int *stop, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    dpfl_record_report next = c->report;
    double next_ceps = c->ceps, next_ledger = c->ledger_eps;
    dpfl_status st = charge(c, r, &next, &next_ledger, &next_ceps, stop, err);
    if (st || *stop) {
        c->stopped_early = *stop;
        return st;
    }
    dpfl_round_metrics m;
    if ((st = dpfl_sim_train(c->sim, r, &m, err))) return st;
    if ((st = dpfl_ledger_copy(&c->ledger, dpfl_sim_ledger(c->sim), err))) return st;
    if (c->rpdp.on) {
        fl_rpdp_charge(&c->rpdp);
        if ((st = fl_rpdp_max_epsilon(&c->rpdp, cfg, &next.epsilon, err))) return st;
    }
    c->report = next;
    c->ledger_eps = next_ledger;
    c->ceps = next_ceps;
    c->rs.examples += m.examples;
    c->rs.S = c->cdp_on ? dpfl_sim_update_clip(c->sim) : c->rs.S;
    c->comm += m.clients;
    if (r % cfg->run.eval_every == 0 || r == cfg->fl.rounds) {
        dpfl_sim_evaluate(c->sim, &m);
        c->last_eval = m;
    }
    m.wall_seconds += c->wall0;
    c->rs.wall = m.wall_seconds;
    /* diagnostics first (covered by no epsilon, so not a release to pay for): a crash after the checkpoint can
     * then never lose the round's line, and one before it leaves a line that the resume cuts away */
    if ((st = fl_report_diagnostics(c, &m, err))) return st;
    char *line;
    if ((st = fl_report_round_line(c, &m, &line, err))) return st;
    /* persist the ledger with the model it paid for (and this line), then release */
    if ((st = fl_checkpoint_save(c->opt->out_dir, c->global, c->model.nparam, &c->ledger, &c->rs, c->sim,
                                  c->rpdp.on ? &c->rpdp : NULL, line, err))) {
        free(line);
        return st;
    }
    if (fprintf(c->metrics, "%s\n", line) < 0 || fflush(c->metrics) != 0) {
        free(line);
        return dpfl_fail(err, DPFL_EIO, "cannot write (%s/metrics.jsonl)", c->opt->out_dir);
    }
    free(line);
    if (!c->opt->quiet && isatty(2)) fl_report_progress(c, &m);
    return DPFL_OK;
}
