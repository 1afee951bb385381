/* What a run reports at its end: model.bin, summary.json (every guarantee, with the events behind it, apart from
 * the values no epsilon covers) and the final lines on the terminal. */
#include "run_internal.h"
#include "core/numtext.h"
#include "fl/sim_internal.h"

#include "dpfl/transport.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* summary.json's record-level report (with the e2e client level implied by the same noise). */
static dpfl_status summary_record(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a, cJSON *sum,
                                  dpfl_error *err)
{
    const dpfl_record_report *rep = &a->g.report;
    dpfl_status st;
    cJSON_AddStringToObject(sum, "unit", "record");
    fl_json_num(sum, "epsilon", rep->epsilon);
    if (isfinite(a->g.ledger_eps)) { /* federated f-DP's bound is the smaller: the guarantee, and the one budgets use */
        cJSON_AddStringToObject(sum, "epsilon_from", "federated_fdp");
        fl_json_num(sum, "epsilon_ledger", a->g.ledger_eps);
    }
    cJSON_AddNumberToObject(sum, "delta", cfg->record_dp.delta);
    if (a->rpdp.on) { /* personalized: each record against its own budget; epsilon above is the largest */
        cJSON_AddStringToObject(sum, "epsilon_is", "the largest epsilon of any record; each record's own is within its "
                                                   "budget (record_budgets)");
        cJSON_AddStringToObject(sum, "accountant", cfg->record_dp.two_stage_bound == DPFL_TWO_STAGE_PLD
                                                       ? "pld (rdp where pld cannot answer), two-stage (client rate "
                                                         "lambda, then Poisson(p_i) per step)"
                                                       : "rdp, two-stage (client rate lambda, then Poisson(p_i) per "
                                                         "step)");
        cJSON_AddStringToObject(sum, "sampler", "poisson, a rate per record");
        cJSON_AddStringToObject(sum, "adjacency", "add-remove");
        cJSON_AddNumberToObject(sum, "noise", a->rs.record_z);
        cJSON_AddNumberToObject(sum, "clip", cfg->record_dp.clip);
        return fl_rpdp_report(&a->rpdp, cfg, part, cJSON_AddObjectToObject(sum, "record_budgets"), NULL, err);
    }
    cJSON_AddStringToObject(sum, "accountant", dpfl_config_choice(cfg, "record_dp.accountant"));
    if (rep->answered != cfg->record_dp.accountant) { /* PLD could not answer for the worst client */
        cJSON_AddStringToObject(sum, "accountant_answered", dpfl_accountant_name(rep->answered));
        cJSON_AddStringToObject(sum, "accountant_fallback", rep->fallback);
    }
    cJSON_AddStringToObject(sum, "sampler", dpfl_config_choice(cfg, "record_dp.sampler"));
    cJSON_AddStringToObject(sum, "adjacency", a->ra.poisson ? "add-remove" : "replace-one");
    cJSON_AddNumberToObject(sum, "noise", a->rs.record_z);
    cJSON_AddNumberToObject(sum, "clip", cfg->record_dp.clip);
    cJSON_AddStringToObject(sum, "noise_kind", cfg->record_dp.secure_mode
                                                   ? "discrete Gaussian, exact (secure mode; RDP at integer orders)"
                                                   : "Gaussian, floating point (ziggurat on ChaCha20)");
    if (cfg->record_dp.noise == 0.0) cJSON_AddStringToObject(sum, "noise_calibrated_for", "target_epsilon over all rounds");
    cJSON_AddNumberToObject(sum, "worst_client", rep->worst_client);
    cJSON_AddNumberToObject(sum, "worst_client_q", rep->worst_q);
    cJSON_AddNumberToObject(sum, "worst_client_steps", (double)rep->worst_steps);
    cJSON_AddNumberToObject(sum, "worst_client_n", (double)rep->worst_n);
    cJSON_AddNumberToObject(sum, "worst_client_batch", (double)rep->worst_batch);
    if (rep->worst_copies > 1) /* replication: worst_client_steps sums the steps of every client holding it */
        cJSON_AddNumberToObject(sum, "worst_record_copies", (double)rep->worst_copies);
    if (rep->order > 0) cJSON_AddNumberToObject(sum, "order", rep->order);
    if (cfg->record_dp.e2e) {
        double ce, cn;
        if ((st = fl_run_e2e_client_epsilon(cfg, part, a, &ce, &cn, NULL, err))) return st;
        fl_json_num(sum, cfg->client_dp.enabled ? "client_epsilon_e2e" : "client_epsilon", ce);
        cJSON_AddNumberToObject(sum, "client_delta", cfg->record_dp.delta);
        cJSON_AddNumberToObject(sum, "client_noise", cn);
        cJSON_AddStringToObject(sum, "client_adjacency", (cfg->fl.sampling == DPFL_SAMPLE_FIXED)
                                                             ? "replace-one, participation visible"
                                                             : "zero-out, participation visible (replace-by-special)");
    }
    return DPFL_OK;
}

/* summary.json's client-level report. */
static void summary_client(const dpfl_config *cfg, int32_t clients, const run_server_report *srv, const run_acct *a,
                           cJSON *sum)
{
    if (a->g.cprivate) {
        fl_json_num(sum, "client_epsilon", a->g.ceps);
    } else {
        cJSON_AddNullToObject(sum, "client_epsilon");
        cJSON_AddStringToObject(sum, "client_epsilon_reason", "median clipping is not differentially private");
    }
    cJSON_AddNumberToObject(sum, "client_delta", cfg->client_dp.delta);
    cJSON_AddNumberToObject(sum, "client_q", fl_client_rate_accounted(cfg, clients, a->ledger.rounds > 0 ? a->ledger.rounds : 1));
    cJSON_AddStringToObject(sum, "client_sampler", dpfl_config_choice(cfg, "fl.sampling"));
    cJSON_AddStringToObject(sum, "client_adjacency_accounted", cfg->client_dp.mechanism == DPFL_CLIENT_MECH_DDP ? "zero-out"
                                                               : (cfg->fl.sampling == DPFL_SAMPLE_FIXED ||
                                                                  cfg->fl.sampling == DPFL_SAMPLE_CROSS_DEVICE) ? "replace-one"
                                                                                                  : "add-remove");
    cJSON_AddNumberToObject(sum, "client_rounds_charged", a->ledger.rounds);
    if (cfg->fl.sampling == DPFL_SAMPLE_CROSS_DEVICE) /* the releases a client's data entered: one per pass */
        cJSON_AddNumberToObject(sum, "client_participations", (double)fl_client_releases(cfg, clients, a->ledger.rounds));
    cJSON_AddNumberToObject(sum, "client_noise", a->rs.client_z);
    cJSON_AddStringToObject(sum, "client_accountant", dpfl_config_choice(cfg, "client_dp.accountant"));
    cJSON_AddStringToObject(sum, "clip_strategy", dpfl_config_choice(cfg, "client_dp.clip_strategy"));
    if ((cfg->client_dp.clip_strategy == DPFL_CLIP_ADAPTIVE)) { /* the two noises whose combination was charged */
        cJSON_AddNumberToObject(sum, "update_noise", srv->update_noise);
        cJSON_AddNumberToObject(sum, "quantile_noise", srv->quantile_noise);
    }
    cJSON_AddNumberToObject(sum, "update_clip", a->rs.S);
}

/* Distributed DP's two guarantees and the sampling slack (docs/privacy.md, "Distributed DP"):
 *   eps       against anyone who sees the released models but not who took part (Poisson amplification, q)
 *   eps_srv   against the aggregation server, which sees each round's cohort: the client that took part most
 *             (R rounds), each round at q = 1 -- participation is data-independent, so conditioning on it is sound;
 *             without secure aggregation (ddp_secagg = no) the server sees each client's vector and its own noise
 *   dsamp     the Poisson table's total variation over every draw of the run, (1 + e^eps) times it added to delta */
typedef struct {
    double eps_srv, dsamp;
    int64_t rmax, draws;
} ddp_report;

static dpfl_status ddp_guarantees(const dpfl_config *cfg, const dpfl_ddp_plan *p, const int64_t *participations,
                                  int32_t clients, double ceps, ddp_report *g, dpfl_error *err)
{
    memset(g, 0, sizeof *g);
    if (!p) return DPFL_OK;
    int64_t total = 0;
    for (int32_t k = 0; k < clients; k++) {
        total += participations[k];
        if (participations[k] > g->rmax) g->rmax = participations[k];
    }
    /* what the server sees: the sum (variance >= mu) under secure aggregation; without it each client's own vector,
     * at its share mu / t of the largest cohort's threshold (the smallest variance any client adds) */
    dpfl_ddp_plan seen = *p;
    if (!cfg->client_dp.ddp_secagg) seen.mu = dpfl_ddp_client_variance(p, clients);
    dpfl_event ev = dpfl_ddp_event(&seen, 1.0);
    ev.count = g->rmax;
    dpfl_guarantee gg;
    dpfl_status st = dpfl_account_epsilon(&ev, 1, cfg->client_dp.delta, DPFL_ACC_RDP, NULL, &gg, err);
    if (st) return st;
    g->eps_srv = gg.epsilon;
    /* the largest lambda any round uses: a round of two clients, each adding mu / 2 */
    dpfl_poisson_table *t;
    if ((st = dpfl_poisson_table_make(fmin(p->mu / 4, 1e9), &t, err))) return st;
    g->draws = 2 * (int64_t)p->d * total;
    g->dsamp = (1 + exp(fmin(700, fmax(ceps, g->eps_srv)))) * (double)g->draws * dpfl_poisson_table_tv(t);
    dpfl_poisson_table_free(t);
    return DPFL_OK;
}

/* What distributed DP's epsilon against the aggregation server assumes, beyond the server following the protocol
 * (audit 4): it colludes with no client (each client's noise share, variance mu/t, is what it does not know: a
 * client that gave it its own draw takes that share away), and it does not hold the seed (with a fixed [run] seed
 * it can recompute every client's masks and noise: it does in a deployment, whose config it runs). */
#define DDP_SERVER_ASSUMES "; it assumes the server colludes with no client (each client's noise share is unknown to it)"
#define DDP_SERVER_SEEDED                                                                                             \
    "none: with a fixed [run] seed the aggregation server, which runs this config, can recompute every client's "   \
    "masks and noise (reproducible mode; leave run.seed unset for a guarantee against it)"

static dpfl_status summary_ddp(const dpfl_config *cfg, const dpfl_ddp_plan *p, const int64_t *participations,
                               int32_t clients, double ceps, int in_process, cJSON *sum, dpfl_error *err)
{
    if (!p) return DPFL_OK;
    ddp_report g;
    dpfl_status st = ddp_guarantees(cfg, p, participations, clients, ceps, &g, err);
    if (st) return st;
    cJSON *o = cJSON_AddObjectToObject(sum, "ddp");
    cJSON_AddStringToObject(o, "mechanism", "distributed DP: each client clips, rotates (randomized Hadamard), "
                                            "rounds conditionally and adds Skellam noise; the server learns the sum "
                                            "modulo 2^bits only");
    cJSON_AddStringToObject(o, "secure_aggregation",
                            !cfg->client_dp.ddp_secagg ? "off: the wrapped vectors are summed directly (the same sum; "
                                                         "the server would see each one)"
                            : in_process ? "in process: pairwise X25519 masks, Shamir-shared seeds, dropout recovery "
                                           "(docs/secagg.md)"
                                         : "between the server and the clients' processes (transport): pairwise X25519 "
                                           "masks, Shamir-shared seeds, dropout recovery (docs/secagg.md)");
    cJSON_AddStringToObject(o, "adjacency", "zero-out: a client's data replaced by data whose update is zero");
    fl_json_num(o, "epsilon", ceps);
    cJSON_AddStringToObject(o, "epsilon_covers", "observers of the released models who do not see the cohorts "
                                                 "(client sampling amplifies)");
    fl_json_num(o, "epsilon_vs_server", cfg->run.seed.given ? NAN : g.eps_srv); /* NAN: null */
    cJSON_AddStringToObject(o, "epsilon_vs_server_covers",
                            cfg->run.seed.given ? DDP_SERVER_SEEDED
                            : cfg->client_dp.ddp_secagg
                                ? "the aggregation server, which sees who took part: the client that took part most, "
                                  "every one of its rounds at q = 1" DDP_SERVER_ASSUMES
                                : "the aggregation server, which sees each client's own vector (ddp_secagg = no: its "
                                  "own noise only, variance mu / t of the largest cohort) and who took part: the client "
                                  "that took part most, every one of its rounds at q = 1" DDP_SERVER_ASSUMES);
    cJSON_AddNumberToObject(o, "max_participations", (double)g.rmax);
    cJSON_AddNumberToObject(o, "delta", cfg->client_dp.delta);
    cJSON_AddNumberToObject(o, "delta_sampling", g.dsamp);
    cJSON_AddNumberToObject(o, "delta_total", cfg->client_dp.delta + g.dsamp);
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

/* Distributed DP's guarantee against the aggregation server, in words, for the privacy sentence and the final
 * lines: none under a fixed seed (it can recompute every share), else the number and what it assumes. */
static const char *ddp_vs_server(const dpfl_config *cfg, const ddp_report *g, char *buf, size_t cap)
{
    if (cfg->run.seed.given) snprintf(buf, cap, "none against the aggregation server, which holds the seed");
    else
        snprintf(buf, cap, "(%s, %s)-DP against the aggregation server, which sees the cohorts and colludes with no "
                           "client", dpfl_num_up(g->eps_srv, 4).s, dpfl_num_up(cfg->client_dp.delta + g->dsamp, 6).s);
    return buf;
}

/* Which bound rPDP-FL's two-stage rounds are accounted with (record_dp.two_stage_bound). */
static const char *two_stage_bound_name(const dpfl_config *cfg)
{
    return cfg->record_dp.two_stage_bound == DPFL_TWO_STAGE_PLD ? "PLD" : "RDP";
}

/* One sentence on what the run guarantees; returns 1 if it is differentially private at every level it enabled
 * (and at least one), 0 otherwise ("NOT differentially private"). */
static int privacy_statement(const dpfl_config *cfg, const run_server_report *srv, const run_acct *a, char *buf,
                             size_t len)
{
    const int rdp = cfg->record_dp.enabled, cdp = cfg->client_dp.enabled;
    const run_guarantees *gu = &a->g;
    size_t n = 0;
    buf[0] = 0;
    if (!rdp && !cdp) {
        snprintf(buf, len, "NOT differentially private: neither [record_dp] nor [client_dp] is enabled");
        return 0;
    }
    if (cdp && !gu->cprivate) {
        snprintf(buf, len, "NOT differentially private at client level: median clipping has no sensitivity bound%s",
                 rdp ? "; the record-level guarantee below still holds" : "");
        return 0;
    }
    if (a->rpdp.on)
        n += (size_t)snprintf(buf + n, len - n, "record-level personalized DP: every record (eps_i, %g)-DP within its "
                                                "own budget, largest eps_i %s (%s budgets, %s policy, two-stage %s)",
                              cfg->record_dp.delta, dpfl_num_up(gu->report.epsilon, 4).s,
                              dpfl_config_choice(cfg, "record_dp.budgets"),
                              dpfl_config_choice(cfg, "record_dp.budget_policy"), two_stage_bound_name(cfg));
    else if (rdp)
        n += (size_t)snprintf(buf + n, len - n, "record-level (%s, %g)-DP for every record (worst %s; %s "
                                                "adjacency, %s sampler, %s accountant)",
                              dpfl_num_up(gu->report.epsilon, 4).s, cfg->record_dp.delta,
                              gu->report.worst_copies > 1 ? "record, charged in every client that holds a copy" : "client",
                              a->ra.poisson ? "add-remove" : "replace-one",
                              dpfl_config_choice(cfg, "record_dp.sampler"), dpfl_config_choice(cfg, "record_dp.accountant"));
    ddp_report g;
    dpfl_error e;
    char vs[200];
    if (cdp && srv->ddp && n < len &&
        ddp_guarantees(cfg, srv->ddp, a->ledger.participations, a->ledger.clients, gu->ceps, &g, &e) == DPFL_OK)
        n += (size_t)snprintf(buf + n, len - n, "%sclient-level distributed DP (zero-out adjacency; the server sees "
                                                "only the secure sum): (%s, %s)-DP for every client against "
                                                "observers of the released models, %s (%lld round%s for the client "
                                                "that took part most)",
                              n ? "; " : "", dpfl_num_up(gu->ceps, 4).s, dpfl_num_up(cfg->client_dp.delta + g.dsamp, 6).s,
                              ddp_vs_server(cfg, &g, vs, sizeof vs), (long long)g.rmax, g.rmax == 1 ? "" : "s");
    else if (cdp && n < len)
        n += (size_t)snprintf(buf + n, len - n, "%sclient-level (%s, %g)-DP for every client (%s client sampling, %s "
                                                "accountant)",
                              n ? "; " : "", dpfl_num_up(gu->ceps, 4).s, cfg->client_dp.delta, dpfl_config_choice(cfg, "fl.sampling"), dpfl_config_choice(cfg, "client_dp.accountant"));
    if (cfg->run.seed.given && n < len)
        snprintf(buf + n, len - n, "; holds only if the seed is secret (fixed seed: reproducible mode)");
    return 1;
}

/* The first evaluated round whose mean accuracy on the clients' test sets reached fl.target_accuracy: the global
 * model's, and with helper models each client's own; from diagnostics.jsonl (all sessions of the run). */
static void reached_rounds(const dpfl_config *cfg, const char *dir, const dpfl_round_metrics *last_eval, cJSON *np)
{
    static const char *const keys[][2] = {{"client_accuracy_mean", "client_accuracy_reached_round"},
                                          {"personal_accuracy_mean", "personal_accuracy_reached_round"},
                                          {"local_accuracy_mean", "local_accuracy_reached_round"}};
    int32_t first[3] = {0, 0, 0};
    char path[1100], *text = NULL;
    size_t len;
    snprintf(path, sizeof path, "%s/diagnostics.jsonl", dir);
    if (dpfl_file_read_all(path, &text, &len, NULL) == DPFL_OK) {
        for (char *line = text, *nl; *line; line = nl + 1) {
            if (!(nl = strchr(line, '\n'))) break;
            *nl = 0;
            cJSON *o = cJSON_Parse(line);
            const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "round");
            for (int i = 0; i < 3 && cJSON_IsNumber(r); i++) {
                const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, keys[i][0]);
                if (!first[i] && cJSON_IsNumber(a) && a->valuedouble >= cfg->fl.target_accuracy)
                    first[i] = (int32_t)r->valuedouble;
            }
            cJSON_Delete(o);
        }
        free(text);
    }
    cJSON_AddNumberToObject(np, "target_accuracy", cfg->fl.target_accuracy);
    for (int i = 0; i < 3; i++) {
        if (i >= 1 && !isfinite(last_eval->personal_acc_mean)) break;
        if (first[i]) cJSON_AddNumberToObject(np, keys[i][1], first[i]);
        else cJSON_AddNullToObject(np, keys[i][1]); /* not reached */
    }
}

/* The final evaluation, when the last round released was not evaluated (the run stopped, or a resume released
 * nothing more). */
static void final_evaluation(dpfl_sim *sim, int32_t rounds, run_progress *pr)
{
    if (isfinite(pr->last_eval.test_accuracy) && pr->last_eval.round == rounds) return;
    dpfl_round_metrics m;
    memset(&m, 0, sizeof m);
    m.client_acc_mean = m.personal_acc_mean = m.local_acc_mean = NAN;
    dpfl_sim_evaluate(sim, &m);
    m.round = rounds;
    pr->last_eval = m;
}

/* The filter's records out of the sampler, in all and per client: counts that depend on the records' gradient norms
 * (a record's count changes with its data), so no epsilon covers them. */
static void not_private_filtered(const fl_rpdp_levels *L, const fl_rpdp_records *rec, const dpfl_partition *part,
                                 cJSON *np)
{
    cJSON_AddNumberToObject(np, "filtered_out", (double)fl_rpdp_filtered_out(L, rec, NULL, rec->n));
    if (part->clients > 1000) return;
    cJSON *pc = cJSON_AddArrayToObject(np, "filtered_out_per_client");
    for (int32_t c = 0; c < part->clients; c++)
        cJSON_AddItemToArray(pc, cJSON_CreateNumber((double)fl_rpdp_filtered_out(
                                     L, rec, part->index + part->offset[c], part->offset[c + 1] - part->offset[c])));
}

/* summary.json's "not_private": values no epsilon covers (raw data, exact batch totals, participation, client test
 * sets, timing), kept apart. */
static void summary_not_private(const dpfl_config *cfg, int64_t examples, const run_progress *pr, const char *dir,
                                cJSON *sum)
{
    const dpfl_round_metrics *e = &pr->last_eval;
    cJSON *np = cJSON_AddObjectToObject(sum, "not_private");
    cJSON_AddStringToObject(np, "note", "diagnostics computed from raw data: covered by no epsilon; do not publish");
    cJSON_AddNumberToObject(np, "examples", (double)examples);
    if (cfg->client_dp.enabled) cJSON_AddNumberToObject(np, "communication", (double)pr->comm);
    if (isfinite(e->client_acc_mean)) {
        fl_json_num(np, "client_accuracy_mean", e->client_acc_mean);
        fl_json_num(np, "client_accuracy_std", e->client_acc_std);
        reached_rounds(cfg, dir, e, np);
    }
    if (isfinite(e->personal_acc_mean)) {
        fl_json_num(np, "personal_accuracy_mean", e->personal_acc_mean);
        fl_json_num(np, "personal_accuracy_std", e->personal_acc_std);
    }
    if (isfinite(pr->emd_mean)) { /* PrivateFL's heterogeneity of the clients' training losses */
        fl_json_num(np, "emd_mean", pr->emd_mean);
        fl_json_num(np, "emd_std", pr->emd_std);
    }
    if (isfinite(e->local_acc_mean)) {
        fl_json_num(np, "local_accuracy_mean", e->local_acc_mean);
        fl_json_num(np, "local_accuracy_std", e->local_acc_std);
    }
    /* over every session of the run (a resumed run adds its sessions) */
    cJSON_AddNumberToObject(np, "wall_seconds_cumulative", pr->wall0 + (dpfl_now() - pr->t_start));
}

/* summary.json's guarantees: record level, client level, distributed DP, federated f-DP, the events behind them,
 * the sentence that says what holds, and the set-up's warnings. */
static dpfl_status summary_privacy(const dpfl_config *cfg, const dpfl_partition *part, const run_server_report *srv,
                                   const run_acct *a, const run_warnings *w, int in_process, cJSON *sum,
                                   dpfl_error *err)
{
    dpfl_status st;
    if (cfg->record_dp.enabled && (st = summary_record(cfg, part, a, sum, err))) return st;
    if (cfg->client_dp.enabled) summary_client(cfg, part->clients, srv, a, sum);
    if ((st = summary_ddp(cfg, srv->ddp, a->ledger.participations, a->ledger.clients, a->g.ceps, in_process, sum,
                          err)) ||
        (st = fl_report_fdp_json(cfg, part, a->ledger.rounds, a->rs.record_z, sum, err)) ||
        (st = fl_summary_events(cfg, part, a, sum, err)))
        return st;
    char words[1024];
    cJSON_AddBoolToObject(sum, "private", privacy_statement(cfg, srv, a, words, sizeof words));
    cJSON_AddStringToObject(sum, "privacy", words);
    if (w->n) {
        cJSON *arr = cJSON_AddArrayToObject(sum, "warnings");
        for (int i = 0; i < w->n; i++) cJSON_AddItemToArray(arr, cJSON_CreateString(w->text[i]));
    }
    return DPFL_OK;
}

/* summary.json's provenance: the config and partition hashes, the randomness, what was trained, when. */
static void summary_provenance(const run_inputs *in, const run_state *rs, const char *sha, double started_at,
                               cJSON *sum)
{
    const dpfl_config *cfg = in->cfg;
    cJSON_AddStringToObject(sum, "config_sha256", sha);
    char part[65];
    for (int i = 0; i < 32; i++) snprintf(part + 2 * i, 3, "%02x", rs->partition_digest[i]);
    cJSON_AddStringToObject(sum, "partition_sha256", part); /* which records each client held (kept across resumes) */
    if (cfg->run.seed.given) {
        cJSON_AddNumberToObject(sum, "seed", (double)in->seed);
        cJSON_AddStringToObject(sum, "randomness", in->rdp_on || in->cdp_on
                                                   ? "reproducible mode (fixed seed) - not for deployment: every "
                                                     "epsilon above holds only if the seed is secret"
                                                   : "reproducible mode (fixed seed)");
    } else {
        cJSON_AddNullToObject(sum, "seed");
        cJSON_AddStringToObject(sum, "randomness", "OS entropy (ChaCha20)");
    }
    cJSON_AddStringToObject(sum, "dataset", cfg->data.dataset);
    cJSON_AddStringToObject(sum, "model", in->model.spec);
    cJSON_AddNumberToObject(sum, "parameters", (double)in->model.nparam);
    cJSON_AddNumberToObject(sum, "clients", in->part.clients); /* in the federation (participants: diagnostics) */
    char when[32];
    time_t t0 = (time_t)started_at;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t0));
    cJSON_AddStringToObject(sum, "started_at", when); /* this session (a resume starts a new one) */
    cJSON_AddStringToObject(sum, "dpfl_version", DPFL_VERSION);
}

/* sum as indented JSON with a final newline at path (sum is freed). */
static dpfl_status write_json(const char *path, cJSON *sum, dpfl_error *err)
{
    char *text = cJSON_Print(sum);
    cJSON_Delete(sum);
    if (!text) return dpfl_fail(err, DPFL_ENOMEM, "out of memory");
    size_t tl = strlen(text);
    char *withnl = realloc(text, tl + 2);
    if (withnl) {
        text = withnl;
        text[tl] = '\n';
        text[tl + 1] = '\0';
    }
    dpfl_status st = dpfl_file_write_text(path, text, strlen(text), err);
    free(text);
    return st;
}

/* The final evaluation (if the last round was not evaluated), model.bin and summary.json. */
/* "stage_seconds": this session's rounds, wall and process CPU seconds per stage (not private: timing), and what
 * the clients' state files cost it (fl/client_store.c: files written and read, blocks paged out under
 * fl.client_state_max_mb; c NULL: no client keeps a state) */
static void stage_seconds(const run_progress *pr, const fl_state_store *c, cJSON *sum)
{
    static const char *const names[RUN_STAGES] = {"train", "evaluate", "checkpoint", "client_files_overlapped"};
    cJSON *o = cJSON_AddObjectToObject(sum, "stage_seconds");
    cJSON_AddNumberToObject(o, "session_rounds", pr->stage_rounds);
    cJSON_AddNumberToObject(o, "session_evaluations", pr->stage_evals);
    for (int i = 0; i < RUN_STAGES; i++) {
        cJSON *s = cJSON_AddObjectToObject(o, names[i]);
        fl_json_num(s, "wall", pr->stage_wall[i]);
        fl_json_num(s, "cpu", pr->stage_cpu[i]);
    }
    if (!c) return;
    cJSON *f = cJSON_AddObjectToObject(o, "client_state");
    cJSON_AddNumberToObject(f, "bytes_per_client", (double)(c->floats * sizeof(float)));
    cJSON_AddNumberToObject(f, "files_written", (double)c->files.written);
    cJSON_AddNumberToObject(f, "files_read", (double)c->files.read);
    cJSON_AddNumberToObject(f, "paged_out", (double)c->evictions);
    cJSON_AddNumberToObject(f, "in_memory", c->resident);
}

dpfl_status fl_report_summary(run_ctx *c, dpfl_error *err)
{
    const run_inputs *in = &c->node.in;
    const run_acct *a = &c->node.acct;
    dpfl_status st;
    char path[1100];
    final_evaluation(in->sim, a->ledger.rounds, &c->pr);
    snprintf(path, sizeof path, "%s/model.bin", c->io.dir);
    /* with the standardization its inputs had, so that it can be fed without this run's config */
    dpfl_input_standardization std;
    const dpfl_model *m = &in->model;
    if ((st = dpfl_config_input_standardization(in->cfg, m->in_c, m->in_h, m->in_w, &std, err))) return st;
    st = dpfl_model_save_standardized(m, in->global, &std, path, err);
    dpfl_input_standardization_free(&std);
    if (st) return st;
    cJSON *sum = cJSON_CreateObject();
    fl_json_num(sum, "test_accuracy", c->pr.last_eval.test_accuracy);
    fl_json_num(sum, "test_loss", c->pr.last_eval.test_loss);
    cJSON_AddNumberToObject(sum, "rounds", a->ledger.rounds);
    cJSON_AddNumberToObject(sum, "rounds_planned", in->cfg->fl.rounds);
    cJSON_AddBoolToObject(sum, "stopped_at_budget", c->pr.stopped_early);
    cJSON_AddBoolToObject(sum, "interrupted", c->pr.interrupted); /* resumable: dpfl train --resume */
    fl_report_updates(c->io.dir, &c->pr, sum);
    summary_not_private(in->cfg, a->rs.examples, &c->pr, c->io.dir, sum);
    if (a->rpdp.filter.on)
        not_private_filtered(&a->rpdp.levels, &a->rpdp.rec, &in->part, cJSON_GetObjectItem(sum, "not_private"));
    const run_server_report srv = fl_report_server_of(in->server);
    if ((st = summary_privacy(in->cfg, &in->part, &srv, a, &c->node.warn, !c->transport, sum, err))) {
        cJSON_Delete(sum);
        return st;
    }
    summary_provenance(in, &a->rs, c->io.sha, c->pr.started_at, sum);
    stage_seconds(&c->pr, in->clients && dpfl_clients_keep_state(in->clients) ? &in->clients->store : NULL, sum);
    if (c->transport && c->transport->about) cJSON_AddStringToObject(sum, "transport", c->transport->about);
    snprintf(path, sizeof path, "%s/summary.json", c->io.dir);
    return write_json(path, sum, err);
}

run_server_report fl_report_server_of(const dpfl_server *sv)
{
    return (run_server_report){.update_noise = dpfl_server_update_noise(sv),
                               .quantile_noise = dpfl_server_quantile_noise(sv), .ddp = dpfl_server_ddp_plan(sv)};
}

void fl_report_final_lines(const dpfl_config *cfg, const dpfl_partition *part, const run_server_report *srv,
                           const run_acct *a, const run_progress *pr, const char *dir)
{
    const int rdp = cfg->record_dp.enabled, cdp = cfg->client_dp.enabled;
    const run_guarantees *gu = &a->g;
    char acc[64];
    if (isfinite(pr->last_eval.test_accuracy)) snprintf(acc, sizeof acc, "test accuracy %.4f", pr->last_eval.test_accuracy);
    else snprintf(acc, sizeof acc, "no test data here"); /* a deployment's server without the sites' files */
    char done[96];
    if (pr->interrupted) snprintf(done, sizeof done, "interrupted after round %d of %d", a->ledger.rounds, cfg->fl.rounds);
    else snprintf(done, sizeof done, "%d round%s%s", a->ledger.rounds, a->ledger.rounds == 1 ? "" : "s",
                  pr->stopped_early ? " (stopped before exceeding the privacy budget)" : "");
    fprintf(stderr, "dpfl: %s, %s, %.1f s; run written to %s\n", done, acc, pr->wall0 + (dpfl_now() - pr->t_start), dir);
    if (pr->upd_arrived < pr->upd_sampled) /* dropouts, or a deployment whose clients did not answer */
        fprintf(stderr, "dpfl: %lld of %lld sampled clients' updates arrived; %d round%s without any (per round: "
                "summary.json \"updates\")\n", (long long)pr->upd_arrived, (long long)pr->upd_sampled, pr->upd_empty,
                pr->upd_empty == 1 ? "" : "s");
    if (a->rpdp.on)
        fprintf(stderr, "dpfl: record-level personalized DP: every record within its own budget (largest epsilon "
                        "%s, delta %g; %s budgets, %s policy; record_budgets in summary.json)\n",
                dpfl_num_up(gu->report.epsilon, 4).s, cfg->record_dp.delta, dpfl_config_choice(cfg, "record_dp.budgets"),
                dpfl_config_choice(cfg, "record_dp.budget_policy"));
    else if (rdp)
        fprintf(stderr, "dpfl: record-level (%s, %g)-DP, %s, %s accountant, %s sampler\n",
                dpfl_num_up(gu->report.epsilon, 4).s,
                cfg->record_dp.delta,
                isfinite(gu->ledger_eps) ? "federated f-DP bound (smaller than the ledger's)"
                : gu->report.worst_copies > 1 ? "worst record (every copy charged)" : "worst client",
                dpfl_config_choice(cfg, "record_dp.accountant"), dpfl_config_choice(cfg, "record_dp.sampler"));
    dpfl_fdp_params pp;
    dpfl_fdp_result fr;
    if (rdp && a->ledger.rounds > 0 && !fl_fdp_not_applicable(cfg, a->rs.record_z) &&
        fl_fdp_of_run(cfg, part, a->ledger.rounds, a->rs.record_z, &pp, &fr, NULL) == DPFL_OK)
        fprintf(stderr, "dpfl: federated f-DP (PriFedSync): mu = %s weak, %s strong (CLT, asymptotic); (%s, %g)-DP "
                        "against any observer keeping the sync probability %g (RDP bound)\n",
                dpfl_num_up(fr.mu_weak, 4).s, dpfl_num_up(fr.mu_strong, 4).s, dpfl_num_up(fr.eps_exact, 4).s,
                cfg->record_dp.delta, pp.p);
    ddp_report g;
    char vs[200];
    if (cdp && gu->cprivate && srv->ddp &&
        ddp_guarantees(cfg, srv->ddp, a->ledger.participations, a->ledger.clients, gu->ceps, &g, NULL) == DPFL_OK)
        fprintf(stderr, "dpfl: client-level distributed DP (zero-out; secure sum%s): (%s, %s)-DP against observers "
                        "of the models, %s (%lld round%s of the busiest client%s)\n",
                cfg->client_dp.ddp_secagg ? "" : " NOT run: ddp_secagg = no", dpfl_num_up(gu->ceps, 4).s,
                dpfl_num_up(cfg->client_dp.delta + g.dsamp, 6).s, ddp_vs_server(cfg, &g, vs, sizeof vs),
                (long long)g.rmax, g.rmax == 1 ? "" : "s", cfg->client_dp.ddp_secagg ? "" : ", which the server sees alone");
    else if (cdp && gu->cprivate)
        fprintf(stderr, "dpfl: client-level (%s, %g)-DP, %s client sampling, %s accountant\n",
                dpfl_num_up(gu->ceps, 4).s,
                cfg->client_dp.delta, dpfl_config_choice(cfg, "fl.sampling"), dpfl_config_choice(cfg, "client_dp.accountant"));
    if (cdp && !gu->cprivate)
        fprintf(stderr, "dpfl: client level: NOT differentially private (median clipping)\n");
    const char *scope = dpfl_config_preset_scope(cfg, rdp, cdp && gu->cprivate);
    if (scope) fprintf(stderr, "dpfl: %s\n", scope); /* whom a baseline's numbers cover (docs/privacy.md) */
    if (!rdp && !cdp)
        fprintf(stderr, "dpfl: NOT differentially private (neither [record_dp] nor [client_dp] is enabled)\n");
    /* a fixed seed makes every noise draw reproducible: a guarantee then holds only while the seed is secret (said
     * once, under the guarantees; a run without any has none to qualify) */
    else if (cfg->run.seed.given && (rdp || gu->cprivate))
        fprintf(stderr, "dpfl: every epsilon above holds only if the seed is secret (fixed [run] seed: reproducible "
                        "mode, not for deployment)\n");
}
