/* What a run reports: metrics.jsonl (what the guarantee covers), diagnostics.jsonl (not private), summary.json,
 * the progress line and the final lines on the terminal. */
#include "run_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void json_num(cJSON *o, const char *k, double v)
{
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

/* metrics.jsonl: what the guarantee covers -- the released model's accuracy on the held-out test set, and values
 * computed from public settings or from privatized estimates (epsilon, noise std, adaptive clip). */
static cJSON *round_json(const dpfl_round_metrics *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", m->round);
    json_num(o, "test_accuracy", m->test_accuracy);
    json_num(o, "test_loss", m->test_loss);
    return o;
}

/* diagnostics.jsonl: computed from the clients' raw data, updates or batches and covered by NO epsilon (training
 * loss, clip fractions, exact Poisson batch totals, V_c and U_s of the raw updates, participation counts, client
 * test sets, timing).  For debugging a run, never for publication as if it were private. */
static cJSON *diagnostics_json(const dpfl_round_metrics *m, int cdp, int rdp, int64_t comm)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "round", m->round);
    cJSON_AddBoolToObject(o, "private", 0);
    cJSON_AddNumberToObject(o, "participants", m->clients);
    cJSON_AddNumberToObject(o, "examples", (double)m->examples);
    json_num(o, "train_loss", m->train_loss);
    if (isfinite(m->client_acc_mean)) {
        json_num(o, "client_accuracy_mean", m->client_acc_mean);
        json_num(o, "client_accuracy_std", m->client_acc_std);
    }
    if (isfinite(m->personal_acc_mean)) { /* each client's helper model on its own test set */
        json_num(o, "personal_accuracy_mean", m->personal_acc_mean);
        json_num(o, "personal_accuracy_std", m->personal_acc_std);
    }
    if (isfinite(m->local_acc_mean)) { /* each client's latest freshly trained model, before the sync mixes it */
        json_num(o, "local_accuracy_mean", m->local_acc_mean);
        json_num(o, "local_accuracy_std", m->local_acc_std);
    }
    cJSON_AddNumberToObject(o, "replied", m->replied);
    if (cdp) {
        json_num(o, "update_clip_fraction", m->update_clip_fraction);
        json_num(o, "between_client_variance", m->between_client_variance);
        json_num(o, "update_scale", m->update_scale);
        cJSON_AddNumberToObject(o, "communication", (double)comm);
    }
    if (rdp) json_num(o, "clip_fraction", m->clip_fraction);
    json_num(o, "wall_seconds", m->wall_seconds);
    return o;
}

/* PriFedSync's federated f-DP after the rounds released so far (the keys of `dpfl fdp --json`), or why it does not
 * apply; nothing when record-level DP is off. */
static dpfl_status fdp_json(const run_ctx *c, cJSON *o, dpfl_error *err)
{
    if (!c->rdp_on || c->ledger.rounds < 1) return DPFL_OK;
    cJSON *f = cJSON_AddObjectToObject(o, "federated_fdp");
    const char *why = fl_fdp_not_applicable(c->cfg, c->rs.record_z);
    if (why) {
        cJSON_AddStringToObject(f, "not_reported", why);
        return DPFL_OK;
    }
    dpfl_fdp_params pp;
    dpfl_fdp_result r;
    dpfl_status st = fl_fdp_of_run(c->cfg, &c->part, c->ledger.rounds, c->rs.record_z, &pp, &r, err);
    if (st) return st;
    json_num(f, "mu", r.mu_weak);
    json_num(f, "mu_strong", r.mu_strong);
    cJSON_AddBoolToObject(f, "mu_asymptotic", 1);
    json_num(f, "epsilon_clt", r.eps_weak_clt);
    json_num(f, "epsilon_strong_clt", r.eps_strong_clt);
    json_num(f, "epsilon", r.eps_exact); /* an upper bound: any observer, sync probability p kept */
    cJSON_AddNumberToObject(f, "delta", c->cfg->record_dp.delta);
    cJSON_AddNumberToObject(f, "p", pp.p);
    cJSON_AddNumberToObject(f, "worst_client_n", (double)pp.n);
    cJSON_AddNumberToObject(f, "batch", (double)pp.batch);
    cJSON_AddNumberToObject(f, "local_steps", (double)pp.local_steps);
    cJSON_AddNumberToObject(f, "rounds", (double)pp.rounds);
    return DPFL_OK;
}

/* The round's metrics line: the covered values, with the epsilons after this round. */
dpfl_status fl_report_round_line(const run_ctx *c, const dpfl_round_metrics *m, char **line, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    cJSON *o = round_json(m);
    if (c->cdp_on) {
        json_num(o, "update_clip", m->update_clip);
        json_num(o, "update_noise_std", m->update_noise_std);
        if (cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP) { /* public: from the cohort size and the plan */
            cJSON_AddNumberToObject(o, "ddp_threshold", m->ddp_threshold);
            cJSON_AddBoolToObject(o, "ddp_released", m->ddp_released);
            json_num(o, "ddp_overflow_bound", m->ddp_overflow);
        }
        if (c->cprivate) json_num(o, "client_epsilon", c->ceps);
        else {
            cJSON_AddNullToObject(o, "client_epsilon"); /* numbers stay numbers: the reason has its own key */
            cJSON_AddStringToObject(o, "client_epsilon_reason", "median clipping is not differentially private");
        }
    }
    if (c->rdp_on) {
        json_num(o, "epsilon", c->report.epsilon);
        json_num(o, "noise_std", m->noise_std);
        if (cfg->record_dp.e2e) {
            double ce, cn;
            dpfl_status st = fl_e2e_client_epsilon(cfg, &c->part, &c->ledger, c->rs.record_z,
                                                   c->cdp_on ? c->rs.client_z : 0.0, &ce, &cn, NULL, err);
            if (st) {
                cJSON_Delete(o);
                return st;
            }
            json_num(o, "client_epsilon", ce);
        }
        if (c->per_client)
            cJSON_AddItemToObject(o, "epsilon_per_client", cJSON_CreateDoubleArray(c->per_client, c->part.clients));
    }
    dpfl_status st = fdp_json(c, o, err);
    if (st) {
        cJSON_Delete(o);
        return st;
    }
    *line = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return *line ? DPFL_OK : dpfl_fail(err, DPFL_ENOMEM, "out of memory (metrics)");
}

/* PrivateFL's EMD over the rounds so far: every client's losses from diagnostics.jsonl's earlier lines (all
 * sessions of the run) and this round's (cur), the mean and spread of the pairwise Wasserstein-1 distances. */
static void emd_so_far(const run_ctx *c, const cJSON *cur, double *mean, double *std)
{
    const int32_t K = c->part.clients;
    double **v = calloc((size_t)K, sizeof *v);
    size_t *n = calloc((size_t)K, sizeof *n), *cap = calloc((size_t)K, sizeof *cap);
    char path[1100], *text = NULL;
    size_t len;
    *mean = *std = NAN;
    int ok = v && n && cap;
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", c->opt->out_dir);
    if (ok && dpfl_file_read_all(path, &text, &len, NULL) != DPFL_OK) text = NULL;
    for (char *line = text, *nl; ok; line = nl + 1) {
        cJSON *o = NULL;
        const cJSON *losses = cur;
        if (line && text && (nl = strchr(line, '\n'))) {
            *nl = 0;
            o = cJSON_Parse(line);
            losses = cJSON_GetObjectItemCaseSensitive(o, "client_train_loss");
        } else {
            nl = NULL;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, losses)
        {
            long k = strtol(e->string, NULL, 10);
            if (k < 0 || k >= K || !cJSON_IsNumber(e)) continue;
            if (n[k] == cap[k]) {
                double *more = realloc(v[k], (cap[k] = cap[k] ? 2 * cap[k] : 16) * sizeof *more);
                if (!more) {
                    ok = 0;
                    break;
                }
                v[k] = more;
            }
            v[k][n[k]++] = e->valuedouble;
        }
        cJSON_Delete(o);
        if (!nl) break; /* the current round was the last */
    }
    if (ok) dpfl_emd_pairwise(v, n, K, mean, std);
    for (int32_t k = 0; v && k < K; k++) free(v[k]);
    free(v);
    free(n);
    free(cap);
    free(text);
}

dpfl_status fl_report_diagnostics(run_ctx *c, const dpfl_round_metrics *m, dpfl_error *err)
{
    cJSON *d = diagnostics_json(m, c->cdp_on, c->rdp_on, c->comm);
    /* every client's mean local training loss of the round, and at evaluated rounds PrivateFL's EMD over them */
    int32_t *ids = malloc((size_t)c->part.clients * sizeof *ids);
    double *loss = malloc((size_t)c->part.clients * sizeof *loss);
    if (!ids || !loss) {
        free(ids);
        free(loss);
        cJSON_Delete(d);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (diagnostics)");
    }
    int32_t nl = dpfl_sim_client_losses(c->sim, ids, loss);
    cJSON *cl = cJSON_AddObjectToObject(d, "client_train_loss");
    for (int32_t i = 0; i < nl; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", ids[i]);
        json_num(cl, key, loss[i]);
    }
    free(ids);
    free(loss);
    if (isfinite(m->test_accuracy) && c->part.clients <= 1000) {
        double mean, std;
        emd_so_far(c, cl, &mean, &std);
        json_num(d, "emd_mean", mean);
        json_num(d, "emd_std", std);
        c->emd_mean = mean, c->emd_std = std;
    }
    char *line = cJSON_PrintUnformatted(d);
    cJSON_Delete(d);
    int bad = !line || fprintf(c->diag, "%s\n", line) < 0 || fflush(c->diag) != 0;
    free(line);
    return bad ? dpfl_fail(err, DPFL_EIO, "cannot write (%s/diagnostics.jsonl)", c->opt->out_dir) : DPFL_OK;
}

/* "1h02m", "3m05s", "12s" */
static void fmt_duration(char *out, size_t len, double s)
{
    if (!isfinite(s) || s < 0) s = 0;
    long t = lround(s);
    if (t >= 3600) snprintf(out, len, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else if (t >= 60) snprintf(out, len, "%ldm%02lds", t / 60, t % 60);
    else snprintf(out, len, "%lds", t);
}

/* The progress line: round, latest test accuracy, the epsilon spent so far (with its target, or for rPDP-FL the
 * largest record epsilon against the largest budget) and the time left at the mean pace of the rounds so far. */
void fl_report_progress_line(const run_ctx *c, const dpfl_round_metrics *m, char *buf, size_t len)
{
    const dpfl_config *cfg = c->cfg;
    size_t n = 0;
#define ADD(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
    ADD("round %d/%d  test acc ", m->round, cfg->fl.rounds);
    if (isfinite(c->last_eval.test_accuracy)) ADD("%.4f", c->last_eval.test_accuracy);
    else ADD("n/a"); /* no evaluation yet (eval_every) */
    if (c->rpdp.on) {
        ADD("  max eps_i %.3g", c->report.epsilon);
        if (cfg->record_dp.budget_max > 0) ADD(" (budgets <= %g)", cfg->record_dp.budget_max);
    } else if (c->rdp_on) {
        ADD("  eps %.3g", c->report.epsilon);
        if (cfg->record_dp.target_epsilon > 0) ADD("/%g", cfg->record_dp.target_epsilon);
    }
    if (c->cdp_on) {
        if (c->cprivate) ADD("  client eps %.3g", c->ceps);
        else ADD("  client eps n/a (median clip: not private)");
        if (c->cprivate && cfg->client_dp.target_epsilon > 0) ADD("/%g", cfg->client_dp.target_epsilon);
    }
    if (!c->rdp_on && !c->cdp_on) ADD("  not private");
    char eta[32], el[32];
    double per = m->wall_seconds / m->round;
    fmt_duration(eta, sizeof eta, per * (cfg->fl.rounds - m->round));
    fmt_duration(el, sizeof el, m->wall_seconds);
    /* a target with the noise given is a stop rule: the run may end before fl.rounds */
    int stop_rule = (c->rdp_on && !c->rpdp.on && cfg->record_dp.target_epsilon > 0 && cfg->record_dp.noise > 0) ||
                    (c->cdp_on && cfg->client_dp.target_epsilon > 0 && cfg->client_dp.noise > 0);
    ADD("  %s elapsed, ETA %s%s", el, stop_rule ? "<= " : "", eta);
#undef ADD
}

void fl_report_progress(const run_ctx *c, const dpfl_round_metrics *m)
{
    char line[256];
    fl_report_progress_line(c, m, line, sizeof line);
    /* \r and a clear to the end of the line: the line can get shorter */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
}

/* summary.json's record-level report (with the e2e client level implied by the same noise). */
static dpfl_status summary_record(const run_ctx *c, cJSON *sum, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    dpfl_status st;
    cJSON_AddStringToObject(sum, "unit", "record");
    json_num(sum, "epsilon", c->report.epsilon);
    if (isfinite(c->ledger_eps)) { /* federated f-DP's bound is the smaller: the guarantee, and the one budgets use */
        cJSON_AddStringToObject(sum, "epsilon_from", "federated_fdp");
        json_num(sum, "epsilon_ledger", c->ledger_eps);
    }
    cJSON_AddNumberToObject(sum, "delta", cfg->record_dp.delta);
    if (c->rpdp.on) { /* personalized: each record against its own budget; epsilon above is the largest */
        cJSON_AddStringToObject(sum, "epsilon_is", "the largest epsilon of any record; each record's own is within its "
                                                   "budget (record_budgets)");
        cJSON_AddStringToObject(sum, "accountant", "rdp, two-stage (client rate lambda, then Poisson(p_i) per step)");
        cJSON_AddStringToObject(sum, "sampler", "poisson, a rate per record");
        cJSON_AddStringToObject(sum, "adjacency", "add-remove");
        cJSON_AddNumberToObject(sum, "noise", c->rs.record_z);
        cJSON_AddNumberToObject(sum, "clip", cfg->record_dp.clip);
        return fl_rpdp_report(&c->rpdp, cfg, &c->part, cJSON_AddObjectToObject(sum, "record_budgets"), NULL, err);
    }
    cJSON_AddStringToObject(sum, "accountant", dpfl_config_choice(cfg, "record_dp.accountant"));
    if (c->report.answered != cfg->record_dp.accountant) { /* PLD could not answer for the worst client */
        cJSON_AddStringToObject(sum, "accountant_answered", dpfl_accountant_name(c->report.answered));
        cJSON_AddStringToObject(sum, "accountant_fallback", c->report.fallback);
    }
    cJSON_AddStringToObject(sum, "sampler", dpfl_config_choice(cfg, "record_dp.sampler"));
    cJSON_AddStringToObject(sum, "adjacency", c->ra.poisson ? "add-remove" : "replace-one");
    cJSON_AddNumberToObject(sum, "noise", c->rs.record_z);
    cJSON_AddNumberToObject(sum, "clip", cfg->record_dp.clip);
    cJSON_AddStringToObject(sum, "noise_kind", cfg->record_dp.secure_mode
                                                   ? "discrete Gaussian, exact (secure mode; RDP at integer orders)"
                                                   : "Gaussian, floating point (ziggurat on ChaCha20)");
    if (cfg->record_dp.noise == 0.0) cJSON_AddStringToObject(sum, "noise_calibrated_for", "target_epsilon over all rounds");
    cJSON_AddNumberToObject(sum, "worst_client", c->report.worst_client);
    cJSON_AddNumberToObject(sum, "worst_client_q", c->report.worst_q);
    cJSON_AddNumberToObject(sum, "worst_client_steps", (double)c->report.worst_steps);
    cJSON_AddNumberToObject(sum, "worst_client_n", (double)c->report.worst_n);
    cJSON_AddNumberToObject(sum, "worst_client_batch", (double)c->report.worst_batch);
    if (c->report.worst_copies > 1) /* replication: worst_client_steps sums the steps of every client holding it */
        cJSON_AddNumberToObject(sum, "worst_record_copies", (double)c->report.worst_copies);
    if (c->report.order > 0) cJSON_AddNumberToObject(sum, "order", c->report.order);
    if (cfg->record_dp.e2e) {
        double ce, cn;
        if ((st = fl_e2e_client_epsilon(cfg, &c->part, &c->ledger, c->rs.record_z, c->cdp_on ? c->rs.client_z : 0.0,
                                        &ce, &cn, NULL, err)))
            return st;
        json_num(sum, c->cdp_on ? "client_epsilon_e2e" : "client_epsilon", ce);
        cJSON_AddNumberToObject(sum, "client_delta", cfg->record_dp.delta);
        cJSON_AddNumberToObject(sum, "client_noise", cn);
        cJSON_AddStringToObject(sum, "client_adjacency", (cfg->fl.sampling == DPFL_SAMPLE_FIXED)
                                                             ? "replace-one, participation visible"
                                                             : "zero-out, participation visible (replace-by-special)");
    }
    return DPFL_OK;
}

/* summary.json's client-level report. */
static void summary_client(const run_ctx *c, cJSON *sum)
{
    const dpfl_config *cfg = c->cfg;
    if (c->cprivate) {
        json_num(sum, "client_epsilon", c->ceps);
    } else {
        cJSON_AddNullToObject(sum, "client_epsilon");
        cJSON_AddStringToObject(sum, "client_epsilon_reason", "median clipping is not differentially private");
    }
    cJSON_AddNumberToObject(sum, "client_delta", cfg->client_dp.delta);
    cJSON_AddNumberToObject(sum, "client_q", fl_client_rate_accounted(cfg, c->part.clients, c->ledger.rounds > 0 ? c->ledger.rounds : 1));
    cJSON_AddStringToObject(sum, "client_sampler", dpfl_config_choice(cfg, "fl.sampling"));
    cJSON_AddStringToObject(sum, "client_adjacency_accounted", cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP ? "zero-out"
                                                               : (cfg->fl.sampling == DPFL_SAMPLE_FIXED) ? "replace-one"
                                                                                                  : "add-remove");
    cJSON_AddNumberToObject(sum, "client_rounds_charged", c->ledger.rounds);
    cJSON_AddNumberToObject(sum, "client_noise", c->rs.client_z);
    cJSON_AddStringToObject(sum, "client_accountant", dpfl_config_choice(cfg, "client_dp.accountant"));
    cJSON_AddStringToObject(sum, "clip_strategy", dpfl_config_choice(cfg, "client_dp.clip_strategy"));
    if ((cfg->client_dp.clip_strategy == DPFL_CLIP_ADAPTIVE)) { /* the two noises whose combination was charged */
        cJSON_AddNumberToObject(sum, "update_noise", dpfl_sim_update_noise(c->sim));
        cJSON_AddNumberToObject(sum, "quantile_noise", dpfl_sim_quantile_noise(c->sim));
    }
    cJSON_AddNumberToObject(sum, "update_clip", c->rs.S);
}

/* Distributed DP's two guarantees and the sampling slack (docs/privacy.md, "Distributed DP"):
 *   eps       against anyone who sees the released models but not who took part (Poisson amplification, q)
 *   eps_srv   against the aggregation server, which sees each round's cohort: the client that took part most
 *             (R rounds), each round at q = 1 -- participation is data-independent, so conditioning on it is sound
 *   dsamp     the Poisson table's total variation over every draw of the run, (1 + e^eps) times it added to delta */
typedef struct {
    double eps_srv, dsamp;
    int64_t rmax, draws;
} ddp_report;

static dpfl_status ddp_guarantees(const run_ctx *c, ddp_report *g, dpfl_error *err)
{
    const dpfl_ddp_plan *p = dpfl_sim_ddp_plan(c->sim);
    memset(g, 0, sizeof *g);
    if (!p) return DPFL_OK;
    int64_t total = 0;
    for (int32_t k = 0; k < c->ledger.clients; k++) {
        total += c->ledger.participations[k];
        if (c->ledger.participations[k] > g->rmax) g->rmax = c->ledger.participations[k];
    }
    dpfl_event ev = dpfl_ddp_event(p, 1.0);
    ev.count = g->rmax;
    dpfl_guarantee gg;
    dpfl_status st = dpfl_account_epsilon(&ev, 1, c->cfg->client_dp.delta, DPFL_ACC_RDP, NULL, &gg, err);
    if (st) return st;
    g->eps_srv = gg.epsilon;
    /* the largest lambda any round uses: a round of two clients, each adding mu / 2 */
    dpfl_poisson_table *t;
    if ((st = dpfl_poisson_table_make(fmin(p->mu / 4, 1e9), &t, err))) return st;
    g->draws = 2 * (int64_t)p->d * total;
    g->dsamp = (1 + exp(fmin(700, fmax(c->ceps, g->eps_srv)))) * (double)g->draws * dpfl_poisson_table_tv(t);
    dpfl_poisson_table_free(t);
    return DPFL_OK;
}

static dpfl_status summary_ddp(const run_ctx *c, cJSON *sum, dpfl_error *err)
{
    const dpfl_ddp_plan *p = dpfl_sim_ddp_plan(c->sim);
    if (!p) return DPFL_OK;
    ddp_report g;
    dpfl_status st = ddp_guarantees(c, &g, err);
    if (st) return st;
    cJSON *o = cJSON_AddObjectToObject(sum, "ddp");
    cJSON_AddStringToObject(o, "mechanism", "distributed DP: each client clips, rotates (randomized Hadamard), "
                                            "rounds conditionally and adds Skellam noise; the server learns the sum "
                                            "modulo 2^bits only");
    cJSON_AddStringToObject(o, "secure_aggregation", c->cfg->client_dp.ddp_secagg
                                                         ? "in process: pairwise X25519 masks, Shamir-shared seeds, "
                                                           "dropout recovery (docs/secagg.md)"
                                                         : "off: the wrapped vectors are summed directly (the same "
                                                           "sum; the server would see each one)");
    cJSON_AddStringToObject(o, "adjacency", "zero-out: a client's data replaced by data whose update is zero");
    json_num(o, "epsilon", c->ceps);
    cJSON_AddStringToObject(o, "epsilon_covers", "observers of the released models who do not see the cohorts "
                                                 "(client sampling amplifies)");
    json_num(o, "epsilon_vs_server", g.eps_srv);
    cJSON_AddStringToObject(o, "epsilon_vs_server_covers", "the aggregation server, which sees who took part: the "
                                                           "client that took part most, every one of its rounds at q = 1");
    cJSON_AddNumberToObject(o, "max_participations", (double)g.rmax);
    cJSON_AddNumberToObject(o, "delta", c->cfg->client_dp.delta);
    cJSON_AddNumberToObject(o, "delta_sampling", g.dsamp);
    cJSON_AddNumberToObject(o, "delta_total", c->cfg->client_dp.delta + g.dsamp);
    cJSON_AddNumberToObject(o, "noise_draws", (double)g.draws);
    cJSON_AddNumberToObject(o, "dimension", (double)p->d);
    cJSON_AddNumberToObject(o, "bits", p->bits);
    cJSON_AddNumberToObject(o, "grid_step", p->gamma);
    cJSON_AddNumberToObject(o, "l2_sensitivity", p->d2);
    cJSON_AddNumberToObject(o, "l1_sensitivity", p->d1);
    cJSON_AddNumberToObject(o, "variance", p->mu);
    cJSON_AddNumberToObject(o, "noise_multiplier", p->z);
    cJSON_AddNumberToObject(o, "tolerated_dropout", p->tolerated_dropout);
    return DPFL_OK;
}

/* One sentence on what the run guarantees; returns 1 if it is differentially private at every level it enabled
 * (and at least one), 0 otherwise ("NOT differentially private"). */
static int privacy_statement(const run_ctx *c, char *buf, size_t len)
{
    const dpfl_config *cfg = c->cfg;
    size_t n = 0;
    buf[0] = 0;
    if (!c->rdp_on && !c->cdp_on) {
        snprintf(buf, len, "NOT differentially private: neither [record_dp] nor [client_dp] is enabled");
        return 0;
    }
    if (c->cdp_on && !c->cprivate) {
        snprintf(buf, len, "NOT differentially private at client level: median clipping has no sensitivity bound%s",
                 c->rdp_on ? "; the record-level guarantee below still holds" : "");
        return 0;
    }
    if (c->rpdp.on)
        n += (size_t)snprintf(buf + n, len - n, "record-level personalized DP: every record (eps_i, %g)-DP within its "
                                                "own budget, largest eps_i %.4g (%s budgets, %s policy, two-stage RDP)",
                              cfg->record_dp.delta, c->report.epsilon, dpfl_config_choice(cfg, "record_dp.budgets"),
                              dpfl_config_choice(cfg, "record_dp.budget_policy"));
    else if (c->rdp_on)
        n += (size_t)snprintf(buf + n, len - n, "record-level (%.4g, %g)-DP for every record (worst %s; %s "
                                                "adjacency, %s sampler, %s accountant)",
                              c->report.epsilon, cfg->record_dp.delta,
                              c->report.worst_copies > 1 ? "record, charged in every client that holds a copy" : "client",
                              c->ra.poisson ? "add-remove" : "replace-one",
                              dpfl_config_choice(cfg, "record_dp.sampler"), dpfl_config_choice(cfg, "record_dp.accountant"));
    ddp_report g;
    dpfl_error e;
    if (c->cdp_on && dpfl_sim_ddp_plan(c->sim) && n < len && ddp_guarantees(c, &g, &e) == DPFL_OK)
        n += (size_t)snprintf(buf + n, len - n, "%sclient-level distributed DP (zero-out adjacency; the server sees "
                                                "only the secure sum): (%.4g, %.3g)-DP for every client against "
                                                "observers of the released models, (%.4g, %.3g)-DP against the "
                                                "aggregation server, which sees the cohorts (%lld rounds for the client "
                                                "that took part most)",
                              n ? "; " : "", c->ceps, cfg->client_dp.delta + g.dsamp, g.eps_srv,
                              cfg->client_dp.delta + g.dsamp, (long long)g.rmax);
    else if (c->cdp_on && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%sclient-level (%.4g, %g)-DP for every client (%s client sampling, %s "
                                                "accountant)",
                              n ? "; " : "", c->ceps, cfg->client_dp.delta, dpfl_config_choice(cfg, "fl.sampling"), dpfl_config_choice(cfg, "client_dp.accountant"));
    if (cfg->run.seed.given && n < len)
        snprintf(buf + n, len - n, "; holds only if the seed is secret (fixed seed: reproducible mode)");
    return 1;
}

/* The first evaluated round whose mean accuracy on the clients' test sets reached fl.target_accuracy: the global
 * model's, and with helper models each client's own; from diagnostics.jsonl (all sessions of the run). */
static void reached_rounds(const run_ctx *c, cJSON *np)
{
    static const char *const keys[][2] = {{"client_accuracy_mean", "client_accuracy_reached_round"},
                                          {"personal_accuracy_mean", "personal_accuracy_reached_round"},
                                          {"local_accuracy_mean", "local_accuracy_reached_round"}};
    int32_t first[3] = {0, 0, 0};
    char path[1100], *text = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", c->opt->out_dir);
    if (dpfl_file_read_all(path, &text, &len, NULL) == DPFL_OK) {
        for (char *line = text, *nl; *line; line = nl + 1) {
            if (!(nl = strchr(line, '\n'))) break;
            *nl = 0;
            cJSON *o = cJSON_Parse(line);
            const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "round");
            for (int i = 0; i < 3 && cJSON_IsNumber(r); i++) {
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, keys[i][0]);
                if (!first[i] && cJSON_IsNumber(a) && a->valuedouble >= c->cfg->fl.target_accuracy)
                    first[i] = (int32_t)r->valuedouble;
            }
            cJSON_Delete(o);
        }
        free(text);
    }
    cJSON_AddNumberToObject(np, "target_accuracy", c->cfg->fl.target_accuracy);
    for (int i = 0; i < 3; i++) {
        if (i >= 1 && !isfinite(c->last_eval.personal_acc_mean)) break;
        if (first[i]) cJSON_AddNumberToObject(np, keys[i][1], first[i]);
        else cJSON_AddNullToObject(np, keys[i][1]); /* not reached */
    }
}

/* The final evaluation (if the last round was not evaluated), model.bin and summary.json. */
dpfl_status fl_report_summary(run_ctx *c, dpfl_error *err)
{
    const dpfl_config *cfg = c->cfg;
    dpfl_status st;
    char path[1100];
    if (!isfinite(c->last_eval.test_accuracy) || c->last_eval.round != c->ledger.rounds) { /* stopped or resumed */
        dpfl_round_metrics m;
        memset(&m, 0, sizeof m);
        m.client_acc_mean = m.personal_acc_mean = m.local_acc_mean = NAN;
        dpfl_sim_evaluate(c->sim, &m);
        m.round = c->ledger.rounds;
        c->last_eval = m;
    }
    snprintf(path, sizeof path, "%s/model.bin", c->opt->out_dir);
    if ((st = dpfl_model_save(&c->model, c->global, path, err))) return st;
    cJSON *sum = cJSON_CreateObject();
    json_num(sum, "test_accuracy", c->last_eval.test_accuracy);
    json_num(sum, "test_loss", c->last_eval.test_loss);
    cJSON_AddNumberToObject(sum, "rounds", c->ledger.rounds);
    cJSON_AddNumberToObject(sum, "rounds_planned", cfg->fl.rounds);
    cJSON_AddBoolToObject(sum, "stopped_at_budget", c->stopped_early);
    /* values no epsilon covers (raw data, exact batch totals, participation, client test sets, timing): kept apart */
    cJSON *np = cJSON_AddObjectToObject(sum, "not_private");
    cJSON_AddStringToObject(np, "note", "diagnostics computed from raw data: covered by no epsilon; do not publish");
    cJSON_AddNumberToObject(np, "examples", (double)c->rs.examples);
    if (c->cdp_on) cJSON_AddNumberToObject(np, "communication", (double)c->comm);
    if (isfinite(c->last_eval.client_acc_mean)) {
        json_num(np, "client_accuracy_mean", c->last_eval.client_acc_mean);
        json_num(np, "client_accuracy_std", c->last_eval.client_acc_std);
        reached_rounds(c, np);
    }
    if (isfinite(c->last_eval.personal_acc_mean)) {
        json_num(np, "personal_accuracy_mean", c->last_eval.personal_acc_mean);
        json_num(np, "personal_accuracy_std", c->last_eval.personal_acc_std);
    }
    if (isfinite(c->emd_mean)) { /* PrivateFL's heterogeneity of the clients' training losses */
        json_num(np, "emd_mean", c->emd_mean);
        json_num(np, "emd_std", c->emd_std);
    }
    if (isfinite(c->last_eval.local_acc_mean)) {
        json_num(np, "local_accuracy_mean", c->last_eval.local_acc_mean);
        json_num(np, "local_accuracy_std", c->last_eval.local_acc_std);
    }
    /* over every session of the run (a resumed run adds its sessions) */
    cJSON_AddNumberToObject(np, "wall_seconds_cumulative", c->wall0 + (dpfl_now() - c->t_start));
    if (c->rdp_on && (st = summary_record(c, sum, err))) {
        cJSON_Delete(sum);
        return st;
    }
    if (c->cdp_on) summary_client(c, sum);
    if ((st = summary_ddp(c, sum, err)) || (st = fdp_json(c, sum, err)) || (st = fl_summary_events(c, sum, err))) {
        cJSON_Delete(sum);
        return st;
    }
    char words[1024];
    cJSON_AddBoolToObject(sum, "private", privacy_statement(c, words, sizeof words));
    cJSON_AddStringToObject(sum, "privacy", words);
    if (c->nwarn) {
        cJSON *w = cJSON_AddArrayToObject(sum, "warnings");
        for (int i = 0; i < c->nwarn; i++) cJSON_AddItemToArray(w, cJSON_CreateString(c->warnings[i]));
    }
    cJSON_AddStringToObject(sum, "config_sha256", c->sha);
    char part[65];
    for (int i = 0; i < 32; i++) snprintf(part + 2 * i, 3, "%02x", c->rs.partition_digest[i]);
    cJSON_AddStringToObject(sum, "partition_sha256", part); /* which records each client held (kept across resumes) */
    if (cfg->run.seed.given) {
        cJSON_AddNumberToObject(sum, "seed", (double)c->seed);
        cJSON_AddStringToObject(sum, "randomness", "reproducible mode (fixed seed) - not for deployment: every "
                                                   "epsilon above holds only if the seed is secret");
    } else {
        cJSON_AddNullToObject(sum, "seed");
        cJSON_AddStringToObject(sum, "randomness", "OS entropy (ChaCha20)");
    }
    cJSON_AddStringToObject(sum, "dataset", cfg->data.dataset);
    cJSON_AddStringToObject(sum, "model", c->model.spec);
    cJSON_AddNumberToObject(sum, "parameters", (double)c->model.nparam);
    cJSON_AddNumberToObject(sum, "clients", c->part.clients); /* in the federation (participants: diagnostics) */
    char when[32];
    time_t t0 = (time_t)c->started_at;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t0));
    cJSON_AddStringToObject(sum, "started_at", when); /* this session (a resume starts a new one) */
    cJSON_AddStringToObject(sum, "dpfl_version", DPFL_VERSION);
    char *text = cJSON_Print(sum);
    cJSON_Delete(sum);
    snprintf(path, sizeof path, "%s/summary.json", c->opt->out_dir);
    if (!text) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    size_t tl = strlen(text);
    char *withnl = realloc(text, tl + 2);
    if (withnl) {
        text = withnl;
        text[tl] = '\n';
        text[tl + 1] = '\0';
    }
    st = dpfl_file_write_text(path, text, strlen(text), err);
    free(text);
    return st;
}

void fl_report_final_lines(const run_ctx *c)
{
    const dpfl_config *cfg = c->cfg;
    char acc[64];
    if (isfinite(c->last_eval.test_accuracy)) snprintf(acc, sizeof acc, "test accuracy %.4f", c->last_eval.test_accuracy);
    else snprintf(acc, sizeof acc, "no test data here"); /* a deployment's server without the sites' files */
    fprintf(stderr, "dpfl: %d rounds%s, %s, %.1f s; run written to %s\n", c->ledger.rounds,
            c->stopped_early ? " (stopped before exceeding the privacy budget)" : "", acc,
            c->wall0 + (dpfl_now() - c->t_start), c->opt->out_dir);
    /* a fixed seed makes every noise draw reproducible: the guarantee then holds only while the seed is secret */
    const char *seedcaveat = cfg->run.seed.given ? "; holds only if the seed is secret (fixed seed: reproducible mode, "
                                            "not for deployment)"
                                          : "";
    if (c->rpdp.on)
        fprintf(stderr, "dpfl: record-level personalized DP: every record within its own budget (largest epsilon "
                        "%.4g, delta %g; %s budgets, %s policy; record_budgets in summary.json)%s\n",
                c->report.epsilon, cfg->record_dp.delta, dpfl_config_choice(cfg, "record_dp.budgets"),
                dpfl_config_choice(cfg, "record_dp.budget_policy"), seedcaveat);
    else if (c->rdp_on)
        fprintf(stderr, "dpfl: record-level (%.4g, %g)-DP, %s, %s accountant, %s sampler%s\n", c->report.epsilon,
                cfg->record_dp.delta,
                isfinite(c->ledger_eps) ? "federated f-DP bound (smaller than the ledger's)"
                : c->report.worst_copies > 1 ? "worst record (every copy charged)" : "worst client",
                dpfl_config_choice(cfg, "record_dp.accountant"), dpfl_config_choice(cfg, "record_dp.sampler"), seedcaveat);
    dpfl_fdp_params pp;
    dpfl_fdp_result fr;
    if (c->rdp_on && c->ledger.rounds > 0 && !fl_fdp_not_applicable(cfg, c->rs.record_z) &&
        fl_fdp_of_run(cfg, &c->part, c->ledger.rounds, c->rs.record_z, &pp, &fr, NULL) == DPFL_OK)
        fprintf(stderr, "dpfl: federated f-DP (PriFedSync): mu = %.4g weak, %.4g strong (CLT, asymptotic); (%.4g, %g)-DP "
                        "against any observer keeping the sync probability %g (RDP bound)%s\n",
                fr.mu_weak, fr.mu_strong, fr.eps_exact, cfg->record_dp.delta, pp.p, seedcaveat);
    ddp_report g;
    if (c->cdp_on && c->cprivate && dpfl_sim_ddp_plan(c->sim) && ddp_guarantees(c, &g, NULL) == DPFL_OK)
        fprintf(stderr, "dpfl: client-level distributed DP (zero-out; secure sum%s): (%.4g, %.3g)-DP against observers "
                        "of the models, (%.4g, %.3g)-DP against the aggregation server (%lld rounds of the busiest "
                        "client)%s\n",
                cfg->client_dp.ddp_secagg ? "" : " NOT run: ddp_secagg = no", c->ceps, cfg->client_dp.delta + g.dsamp,
                g.eps_srv, cfg->client_dp.delta + g.dsamp, (long long)g.rmax, seedcaveat);
    else if (c->cdp_on && c->cprivate)
        fprintf(stderr, "dpfl: client-level (%.4g, %g)-DP, %s client sampling, %s accountant%s\n", c->ceps,
                cfg->client_dp.delta, dpfl_config_choice(cfg, "fl.sampling"), dpfl_config_choice(cfg, "client_dp.accountant"), seedcaveat);
    if (c->cdp_on && !c->cprivate)
        fprintf(stderr, "dpfl: client level: NOT differentially private (median clipping)\n");
    if (!c->rdp_on && !c->cdp_on)
        fprintf(stderr, "dpfl: NOT differentially private (neither [record_dp] nor [client_dp] is enabled)\n");
}
