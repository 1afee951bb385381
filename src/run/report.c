/* What a run reports round by round: metrics.jsonl (what the guarantee covers), diagnostics.jsonl (not private)
 * and the progress line on the terminal (summary.json and the final lines: report_summary.c). */
#include "run_internal.h"
#include "core/numtext.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void fl_json_num(cJSON *o, const char *k, double v)
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
    fl_json_num(o, "test_accuracy", m->test_accuracy);
    fl_json_num(o, "test_loss", m->test_loss);
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
    fl_json_num(o, "train_loss", m->train_loss);
    if (isfinite(m->client_acc_mean)) {
        fl_json_num(o, "client_accuracy_mean", m->client_acc_mean);
        fl_json_num(o, "client_accuracy_std", m->client_acc_std);
    }
    if (isfinite(m->personal_acc_mean)) { /* each client's helper model on its own test set */
        fl_json_num(o, "personal_accuracy_mean", m->personal_acc_mean);
        fl_json_num(o, "personal_accuracy_std", m->personal_acc_std);
    }
    if (isfinite(m->local_acc_mean)) { /* each client's latest freshly trained model, before the sync mixes it */
        fl_json_num(o, "local_accuracy_mean", m->local_acc_mean);
        fl_json_num(o, "local_accuracy_std", m->local_acc_std);
    }
    cJSON_AddNumberToObject(o, "replied", m->replied);
    if (cdp) {
        fl_json_num(o, "update_clip_fraction", m->update_clip_fraction);
        fl_json_num(o, "between_client_variance", m->between_client_variance);
        fl_json_num(o, "update_scale", m->update_scale);
        cJSON_AddNumberToObject(o, "communication", (double)comm);
    }
    if (rdp) fl_json_num(o, "clip_fraction", m->clip_fraction);
    fl_json_num(o, "wall_seconds", m->wall_seconds);
    return o;
}

/* PriFedSync's federated f-DP after the rounds released so far (the keys of `dpfl fdp --json`), or why it does not
 * apply; nothing when record-level DP is off. */
dpfl_status fl_report_fdp_json(const dpfl_config *cfg, const dpfl_partition *part, int32_t rounds, double record_z,
                               cJSON *o, dpfl_error *err)
{
    if (!cfg->record_dp.enabled || rounds < 1) return DPFL_OK;
    cJSON *f = cJSON_AddObjectToObject(o, "federated_fdp");
    const char *why = fl_fdp_not_applicable(cfg, record_z);
    if (why) {
        cJSON_AddStringToObject(f, "not_reported", why);
        return DPFL_OK;
    }
    dpfl_fdp_params pp;
    dpfl_fdp_result r;
    dpfl_status st = fl_fdp_of_run(cfg, part, rounds, record_z, &pp, &r, err);
    if (st) return st;
    fl_json_num(f, "mu", r.mu_weak);
    fl_json_num(f, "mu_strong", r.mu_strong);
    cJSON_AddBoolToObject(f, "mu_asymptotic", 1);
    fl_json_num(f, "epsilon_clt", r.eps_weak_clt);
    fl_json_num(f, "epsilon_strong_clt", r.eps_strong_clt);
    fl_json_num(f, "epsilon", r.eps_exact); /* an upper bound: any observer, sync probability p kept */
    cJSON_AddNumberToObject(f, "delta", cfg->record_dp.delta);
    cJSON_AddNumberToObject(f, "p", pp.p);
    cJSON_AddNumberToObject(f, "worst_client_n", (double)pp.n);
    cJSON_AddNumberToObject(f, "batch", (double)pp.batch);
    cJSON_AddNumberToObject(f, "local_steps", (double)pp.local_steps);
    cJSON_AddNumberToObject(f, "rounds", (double)pp.rounds);
    cJSON_AddNumberToObject(f, "record_copies", (double)pp.copies);
    return DPFL_OK;
}

/* The round's metrics line: the covered values, with the epsilons after this round. */
dpfl_status fl_report_round_line(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a,
                                 const dpfl_round_metrics *m, char **line, dpfl_error *err)
{
    const run_guarantees *g = &a->g;
    cJSON *o = round_json(m);
    if (cfg->client_dp.enabled) {
        fl_json_num(o, "update_clip", m->update_clip);
        fl_json_num(o, "update_noise_std", m->update_noise_std);
        if (cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP) { /* public: from the cohort size and the plan */
            cJSON_AddNumberToObject(o, "ddp_threshold", m->ddp_threshold);
            cJSON_AddBoolToObject(o, "ddp_released", m->ddp_released);
            fl_json_num(o, "ddp_overflow_bound", m->ddp_overflow);
        }
        if (g->cprivate) fl_json_num(o, "client_epsilon", g->ceps);
        else {
            cJSON_AddNullToObject(o, "client_epsilon"); /* numbers stay numbers: the reason has its own key */
            cJSON_AddStringToObject(o, "client_epsilon_reason", "median clipping is not differentially private");
        }
    }
    if (cfg->record_dp.enabled) {
        fl_json_num(o, "epsilon", g->report.epsilon);
        fl_json_num(o, "noise_std", m->noise_std);
        if (cfg->record_dp.e2e) {
            double ce, cn;
            dpfl_status st = fl_run_e2e_client_epsilon(cfg, part, a, &ce, &cn, NULL, err);
            if (st) {
                cJSON_Delete(o);
                return st;
            }
            fl_json_num(o, cfg->client_dp.enabled ? "client_epsilon_e2e" : "client_epsilon", ce); /* summary.json's */
        }
        if (g->per_client)
            cJSON_AddItemToObject(o, "epsilon_per_client", cJSON_CreateDoubleArray(g->per_client, part->clients));
    }
    dpfl_status st = fl_report_fdp_json(cfg, part, a->ledger.rounds, a->rs.record_z, o, err);
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
static void emd_so_far(const char *dir, int32_t K, const cJSON *cur, double *mean, double *std)
{
    double **v = calloc((size_t)K, sizeof *v);
    size_t *n = calloc((size_t)K, sizeof *n), *cap = calloc((size_t)K, sizeof *cap);
    char path[1100], *text = NULL;
    size_t len;
    *mean = *std = NAN;
    int ok = v && n && cap;
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", dir);
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

dpfl_status fl_report_diagnostics(const run_inputs *in, const run_io *io, run_progress *pr, const dpfl_round_metrics *m,
                                  dpfl_error *err)
{
    cJSON *d = diagnostics_json(m, in->cdp_on, in->rdp_on, pr->comm);
    /* every client's mean local training loss of the round, and at evaluated rounds PrivateFL's EMD over them
     * (run.emd: auto computes it with the input transform, which PrivateFL measures it for) */
    int32_t *ids = malloc((size_t)in->part.clients * sizeof *ids);
    double *loss = malloc((size_t)in->part.clients * sizeof *loss);
    if (!ids || !loss) {
        free(ids);
        free(loss);
        cJSON_Delete(d);
        return dpfl_fail(err, DPFL_ENOMEM, "out of memory (diagnostics)");
    }
    int32_t nl = dpfl_server_client_losses(in->server, ids, loss);
    cJSON *cl = cJSON_AddObjectToObject(d, "client_train_loss");
    for (int32_t i = 0; i < nl; i++) {
        char key[16];
        snprintf(key, sizeof key, "%d", ids[i]);
        fl_json_num(cl, key, loss[i]);
    }
    free(ids);
    free(loss);
    const dpfl_emd_diagnostic asked = in->cfg->run.emd;
    const int emd =
        asked == DPFL_EMD_YES || (asked == DPFL_EMD_AUTO && in->cfg->model.transform != DPFL_TRANSFORM_NONE);
    if (emd && isfinite(m->test_accuracy) && in->part.clients <= 1000) {
        double mean, std;
        emd_so_far(io->dir, in->part.clients, cl, &mean, &std);
        fl_json_num(d, "emd_mean", mean);
        fl_json_num(d, "emd_std", std);
        pr->emd_mean = mean, pr->emd_std = std;
    }
    char *line = cJSON_PrintUnformatted(d);
    cJSON_Delete(d);
    int bad = !line || fprintf(io->diag, "%s\n", line) < 0 || fflush(io->diag) != 0;
    free(line);
    return bad ? dpfl_fail(err, DPFL_EIO, "cannot write (%s/diagnostics.jsonl)", io->dir) : DPFL_OK;
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
void fl_report_progress_line(const dpfl_config *cfg, const run_guarantees *g, const dpfl_round_metrics *last_eval,
                             const dpfl_round_metrics *m, char *buf, size_t len)
{
    const int rdp = cfg->record_dp.enabled, cdp = cfg->client_dp.enabled, budgets = fl_rpdp_configured(cfg);
    size_t n = 0;
#define ADD(...) (n += (size_t)snprintf(buf + n, n < len ? len - n : 0, __VA_ARGS__))
    ADD("round %d/%d  test acc ", m->round, cfg->fl.rounds);
    if (isfinite(last_eval->test_accuracy)) ADD("%.4f", last_eval->test_accuracy);
    else ADD("n/a"); /* no evaluation yet (eval_every) */
    if (budgets) {
        ADD("  max eps_i %s", dpfl_num_up(g->report.epsilon, 3).s);
        if (cfg->record_dp.budget_max > 0) ADD(" (budgets <= %g)", cfg->record_dp.budget_max);
    } else if (rdp) {
        ADD("  eps %s", dpfl_num_up(g->report.epsilon, 3).s);
        if (cfg->record_dp.target_epsilon > 0) ADD("/%g", cfg->record_dp.target_epsilon);
    }
    if (cdp) {
        if (g->cprivate) ADD("  client eps %s", dpfl_num_up(g->ceps, 3).s);
        else ADD("  client eps n/a (median clip: not private)");
        if (g->cprivate && cfg->client_dp.target_epsilon > 0) ADD("/%g", cfg->client_dp.target_epsilon);
    }
    if (!rdp && !cdp) ADD("  not private");
    char eta[32], el[32];
    double per = m->wall_seconds / m->round;
    fmt_duration(eta, sizeof eta, per * (cfg->fl.rounds - m->round));
    fmt_duration(el, sizeof el, m->wall_seconds);
    /* a target with the noise given is a stop rule: the run may end before fl.rounds */
    int stop_rule = (rdp && !budgets && cfg->record_dp.target_epsilon > 0 && cfg->record_dp.noise > 0) ||
                    (cdp && cfg->client_dp.target_epsilon > 0 && cfg->client_dp.noise > 0);
    ADD("  %s elapsed, ETA %s%s", el, stop_rule ? "<= " : "", eta);
#undef ADD
}

void fl_report_progress(const dpfl_config *cfg, const run_guarantees *g, const dpfl_round_metrics *last_eval,
                        const dpfl_round_metrics *m)
{
    char line[256];
    fl_report_progress_line(cfg, g, last_eval, m, line, sizeof line);
    /* \r and a clear to the end of the line: the line can get shorter */
    fprintf(stderr, "\r%s\033[K", line);
    fflush(stderr);
}
