/* summary.json's "events": for each epsilon the run reports, the composition it was computed from, as the mechanisms
 * returned it (dpfl_run_event, privacy/event_json.c), so that `dpfl account --event summary.json` recomputes every
 * number and any other accountant can check it.  The record: the worst record's events (its client's DP-SGD steps,
 * over every copy of a replicated record; rPDP-FL's worst level; the filter's worst cap, an rdp-filter event); the
 * clients: the ledger's per-round events
 * (client-level DP, distributed DP) or the end-to-end client event implied by the record-level noise. */
#include "run_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static dpfl_status add_event(cJSON *events, const char *name, const dpfl_run_event *r, dpfl_error *err)
{
    char *text;
    dpfl_status st = dpfl_run_event_json(r, &text, err);
    if (st) return st;
    cJSON *o = cJSON_Parse(text);
    free(text);
    if (!o) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (summary events)");
    cJSON_AddItemToObject(events, name, o);
    return DPFL_OK;
}

static dpfl_run_event run_event(const char *unit, dpfl_accountant acc, double delta, double eps, dpfl_event *ev,
                                size_t nev)
{
    dpfl_run_event r;
    memset(&r, 0, sizeof r);
    snprintf(r.unit, sizeof r.unit, "%s", unit);
    r.accountant = acc;
    r.orders = DPFL_ORDERS_DEFAULT;
    r.delta = delta;
    r.epsilon = eps;
    r.held_by = 1;
    r.events = ev;
    r.nevents = nev;
    return r;
}

/* the worst record's events: rp (on: rPDP-FL's plan) or the ledger's worst client, with the mechanism ra it ran */
static dpfl_status record_event(const dpfl_config *cfg, const run_guarantees *g, const dpfl_record_accounting *ra,
                                const fl_rpdp *rp, cJSON *events, dpfl_error *err)
{
    dpfl_event ev = g->report.event;
    if (rp->on) { /* the level with the largest epsilon, or under the filter the record with the largest cap */
        dpfl_run_event r = run_event("record", DPFL_ACC_RDP, cfg->record_dp.delta, NAN, &ev, 1);
        dpfl_status st = fl_rpdp_max_event(rp, cfg, &r, err);
        return st ? st : add_event(events, "record", &r, err);
    }
    /* PriFedSync: the ledger's number, when the federated f-DP bound was the smaller (summary "epsilon_from") */
    double eps = isnan(g->ledger_eps) ? g->report.epsilon : g->ledger_eps;
    dpfl_run_event r = run_event("record", ra->pld ? DPFL_ACC_PLD : DPFL_ACC_RDP, cfg->record_dp.delta, eps, &ev, 1);
    r.orders = ra->integer_orders ? DPFL_ORDERS_INTEGER : DPFL_ORDERS_DEFAULT;
    r.held_by = g->report.worst_copies > 0 ? g->report.worst_copies : 1;
    return add_event(events, "record", &r, err);
}

static dpfl_status client_events(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a, cJSON *events,
                                 dpfl_error *err)
{
    const int cdp = cfg->client_dp.enabled;
    dpfl_status st = DPFL_OK;
    if (cdp && a->g.cprivate) {
        dpfl_run_event r = run_event("client", fl_client_accountant(cfg), cfg->client_dp.delta, a->g.ceps,
                                     a->ledger.client_events, (size_t)a->ledger.nclient_events);
        st = add_event(events, "client", &r, err);
    }
    if (!st && cfg->record_dp.enabled && cfg->record_dp.e2e) {
        double noise, eps;
        dpfl_event ev;
        if ((st = fl_run_e2e_client_epsilon(cfg, part, a, &eps, &noise, &ev, err))) return st;
        dpfl_run_event r = run_event("client", DPFL_ACC_GDP, cfg->record_dp.delta, eps, &ev, 1);
        st = add_event(events, cdp ? "client_e2e" : "client", &r, err);
    }
    return st;
}

dpfl_status fl_summary_events(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a, cJSON *sum,
                              dpfl_error *err)
{
    cJSON *events = cJSON_AddObjectToObject(sum, "events");
    dpfl_status st = cfg->record_dp.enabled ? record_event(cfg, &a->g, &a->ra, &a->rpdp, events, err) : DPFL_OK;
    return st ? st : client_events(cfg, part, a, events, err);
}
