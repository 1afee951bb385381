/* The tables of dpfl report's page: summary.json's keys with what each one means (docs/privacy.md), the command
 * that recomputes the record-level epsilon, and rPDP-FL's budget levels and distributions. */
#include "internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* What summary.json's keys mean (docs/privacy.md, README "A run directory"). */
static const char *const MEANING[][2] = {
    {"test_accuracy", "accuracy of the released global model on the held-out test set (last evaluation)"},
    {"test_loss", "its loss on the same test set"},
    {"rounds", "rounds trained, released and charged to the privacy ledger"},
    {"rounds_planned", "fl.rounds"},
    {"stopped_at_budget", "the run stopped before the first round whose release would pass target_epsilon (that "
                          "round was never trained)"},
    {"interrupted", "the run was stopped (Ctrl-C, SIGTERM) before rounds_planned; dpfl train --resume continues "
                    "it"},
    {"unit", "what is protected: record = one training example (the client level is in the client_* keys)"},
    {"epsilon", "record-level ε after every released round, in nats: the worst case over records, an upper bound"},
    {"epsilon_from", "federated_fdp: PriFedSync's f-DP bound was smaller than the ledger's, so it is the guarantee"},
    {"epsilon_ledger", "the ledger's ε (the syncs that happened, no amplification), larger than epsilon here"},
    {"epsilon_is", "how to read ε for this run"},
    {"delta", "record-level δ"},
    {"accountant", "how ε was computed: rdp (Rényi DP, tight conversion) or pld (privacy loss distribution)"},
    {"accountant_answered", "the accountant that gave the number (PLD could not answer for the worst client)"},
    {"accountant_fallback", "why"},
    {"sampler", "how each local batch is drawn: poisson (each record with probability q) or fixed (B of n without "
                "replacement)"},
    {"adjacency", "neighbouring datasets: add-remove (one record added or removed) or replace-one (one replaced)"},
    {"noise", "noise multiplier z: the noise std divided by the L2 sensitivity under that adjacency (C for "
              "add-remove, 2C for replace-one)"},
    {"clip", "C: the L2 clip of each per-example gradient"},
    {"noise_kind", "the noise sampler"},
    {"noise_calibrated_for", "z was calibrated before training so that this fits"},
    {"worst_client", "the client whose records have the largest ε"},
    {"worst_client_q", "its per-step sampling rate q = B/n"},
    {"worst_client_steps", "its DP-SGD steps charged (only the rounds it took part in)"},
    {"worst_client_n", "its number of records"},
    {"worst_client_batch", "its batch size B"},
    {"worst_record_copies", "replication: the clients holding the worst record, each charged (worst_client_steps is "
                            "the sum of their steps)"},
    {"order", "the Rényi order where the RDP bound was tightest"},
    {"client_epsilon", "client-level ε (one client's whole data), in nats, an upper bound; null when not private"},
    {"client_epsilon_reason", "why there is no client-level ε"},
    {"client_epsilon_e2e", "the client level implied by the record-level noise (end-to-end, participation visible)"},
    {"client_delta", "client-level δ"},
    {"client_noise", "client-level noise multiplier (of the sum of clipped updates; e2e: of a round)"},
    {"client_adjacency", "client-level neighbouring relation of the e2e guarantee"},
    {"client_q", "client sampling rate accounted"},
    {"client_sampler", "how clients are drawn each round"},
    {"client_adjacency_accounted", "client-level neighbouring relation accounted"},
    {"client_rounds_charged", "rounds charged at client level"},
    {"client_accountant", "client-level accountant"},
    {"clip_strategy", "client update clipping: fixed, per-step, adaptive (private quantile) or median (NOT private)"},
    {"update_noise", "adaptive clipping: the multiplier on the update sum"},
    {"quantile_noise", "adaptive clipping: the noise on the count of unclipped updates"},
    {"update_clip", "S: the client update clip (adaptive: the last round's, from the private estimate)"},
    {"private", "differentially private at every level the run enabled (and at least one)"},
    {"privacy", "the guarantee in words"},
    {"config_sha256", "SHA-256 of config.ini"},
    {"partition_sha256", "which records each client held (kept across resumes)"},
    {"seed", "fixed seed (reproducible mode; with DP, an ε holds only while the seed is secret)"},
    {"randomness", "where the noise and sampling come from"},
    {"dataset", "dataset"},
    {"model", "model"},
    {"parameters", "model parameters"},
    {"clients", "clients in the federation"},
    {"transport", "how the clients were reached in this session (mpirun: the ranks that took part)"},
    {"started_at", "when this session started (a resume starts a new one)"},
    {"dpfl_version", "the dpfl that wrote the run"},
    /* federated_fdp */
    {"mu", "weak federated μ-GDP (PriFedSync): CLT, asymptotic, not a bound"},
    {"mu_strong", "strong federated μ-GDP: CLT, asymptotic, not a bound"},
    {"mu_asymptotic", "the μ values are asymptotic (central limit)"},
    {"epsilon_clt", "ε of the weak μ at δ: asymptotic"},
    {"epsilon_strong_clt", "ε of the strong μ at δ: asymptotic"},
    {"p", "the sync probability"},
    {"batch", "the fixed batch size"},
    {"local_steps", "local steps per round"},
    {"not_reported", "why there is no federated f-DP number"},
    /* record_budgets */
    {"budgets", "where the per-record budgets come from"},
    {"policy", "rpdp (each record its own rate), minimum or dropout (the paper's baselines), filter (Feldman-Zrnic)"},
    {"bound", "the two-stage bound used"},
    {"budget_max", "the largest budget: a record sampled with p = 1 meets it"},
    {"planned_rounds", "rounds the rates were planned for"},
    {"client_rate", "λ: client participation rate charged"},
    {"scf_r2", "R² of the SCF curve fit (first guess only; every rate is checked with the accountant)"},
    {"records", "training records"},
    {"unused", "records whose budget buys nothing (never sampled)"},
    {"dropped", "records dropped by the policy"},
    {"opted_out", "records whose level stopped before passing its budget"},
    {"over_budget", "records over their budget (0 by construction)"},
    {"epsilon_minus_budget_max", "the largest ε_i − budget_i (≤ 0)"},
    {"filter_order", "the Rényi order of the filter"},
    {"filter_conversion", "the cost of converting that order to (ε, δ)"},
    /* not_private */
    {"note", ""},
    {"examples", "examples trained on (exact Poisson batch totals)"},
    {"communication", "client updates sent, in all"},
    {"filtered_out", "the filter: records whose Rényi budget was spent (depends on their gradient norms)"},
    {"filtered_out_per_client", "… per client"},
    {"client_accuracy_mean", "global model on the clients' own test sets: mean"},
    {"client_accuracy_std", "… and its spread over clients"},
    {"target_accuracy", "fl.target_accuracy"},
    {"client_accuracy_reached_round", "the first evaluated round whose clients' mean reached it (null: never)"},
    {"personal_accuracy_mean", "personal models (helper or own transform) on the clients' test sets: mean"},
    {"personal_accuracy_std", "… and its spread over clients"},
    {"personal_accuracy_reached_round", "the first evaluated round whose personal mean reached target_accuracy"},
    {"local_accuracy_mean", "freshly trained local models on the clients' test sets: mean"},
    {"local_accuracy_std", "… and its spread over clients"},
    {"local_accuracy_reached_round", "the first evaluated round whose local mean reached target_accuracy"},
    {"emd_mean", "PrivateFL's EMD between the clients' training-loss distributions: mean over pairs"},
    {"emd_std", "… and its spread"},
    {"wall_seconds_cumulative", "wall-clock seconds over every session of the run"},
};

static const char *meaning(const char *key)
{
    for (size_t i = 0; i < sizeof MEANING / sizeof MEANING[0]; i++)
        if (!strcmp(MEANING[i][0], key)) return MEANING[i][1];
    return "";
}

static void value_html(rp_buf *b, const cJSON *v)
{
    char num[64];
    if (cJSON_IsNumber(v)) {
        snprintf(num, sizeof num, "%.10g", v->valuedouble);
        rp_buf_puts(b, num);
    } else if (cJSON_IsString(v)) {
        rp_buf_html(b, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        rp_buf_puts(b, cJSON_IsTrue(v) ? "true" : "false");
    } else if (cJSON_IsNull(v)) {
        rp_buf_puts(b, "null");
    }
}

/* Every scalar member of o as a row: key, value, what it means. */
void rp_key_table(rp_buf *b, const cJSON *o, const char *const *skip)
{
    rp_buf_puts(b, "<table class=\"keys\">\n<tr><th>key</th><th>value</th><th>what it means</th></tr>\n");
    const cJSON *v;
    cJSON_ArrayForEach(v, o)
    {
        if (cJSON_IsObject(v) || cJSON_IsArray(v)) continue;
        int skipped = 0;
        for (int i = 0; skip && skip[i]; i++) skipped |= !strcmp(skip[i], v->string);
        if (skipped) continue;
        rp_buf_puts(b, "<tr><td><code>");
        rp_buf_html(b, v->string);
        rp_buf_puts(b, "</code></td><td>");
        value_html(b, v);
        rp_buf_puts(b, "</td><td>");
        rp_buf_html(b, meaning(v->string));
        rp_buf_puts(b, "</td></tr>\n");
    }
    rp_buf_puts(b, "</table>\n");
}

/* The command that recomputes the record-level epsilon from the reported worst client (docs/privacy.md §5). */
void rp_reproduce_line(rp_buf *b, const cJSON *sum)
{
    double z = rp_num(sum, "noise"), q = rp_num(sum, "worst_client_q"), T = rp_num(sum, "worst_client_steps"),
           d = rp_num(sum, "delta");
    const char *sampler = rp_str(sum, "sampler"), *acc = rp_str(sum, "accountant_answered");
    if (!acc) acc = rp_str(sum, "accountant");
    if (!isfinite(z) || !isfinite(q) || !isfinite(T) || !(T >= 1) || !isfinite(d) || !sampler || !acc ||
        cJSON_GetObjectItemCaseSensitive(sum, "record_budgets"))
        return;
    rp_buf_printf(b, "<p>Recompute the %s: <code>dpfl account --noise %.17g ",
                  cJSON_GetObjectItemCaseSensitive(sum, "epsilon_ledger") ? "ledger's ε (epsilon_ledger)"
                                                                         : "record-level ε", z);
    if (!strcmp(sampler, "fixed"))
        rp_buf_printf(b, "--sampler fixed --n %.0f --batch %.0f ", rp_num(sum, "worst_client_n"),
                      rp_num(sum, "worst_client_batch"));
    else
        rp_buf_printf(b, "--q %.17g ", q);
    rp_buf_printf(b, "--steps %.0f --delta %.17g --accountant ", T, d);
    rp_buf_html(b, acc);
    rp_buf_puts(b, "</code></p>\n");
}

void rp_levels_table(rp_buf *b, const cJSON *rb)
{
    const cJSON *lv = cJSON_GetObjectItemCaseSensitive(rb, "levels"), *l;
    int n = cJSON_GetArraySize(lv);
    if (n < 1) return;
    rp_buf_printf(b, "<details><summary>%d budget level%s (records sharing a budget and a sampling rate)</summary>\n"
                     "<table class=\"num\"><tr><th>budget</th><th>p</th><th>records</th><th>rounds</th>"
                     "<th>realized ε</th><th>opted out</th></tr>\n", n, n == 1 ? "" : "s");
    cJSON_ArrayForEach(l, lv)
    {
        char v[5][32];
        rp_fmt_num(v[0], sizeof v[0], rp_num(l, "budget"));
        rp_fmt_num(v[1], sizeof v[1], rp_num(l, "p"));
        rp_fmt_num(v[2], sizeof v[2], rp_num(l, "records"));
        rp_fmt_num(v[3], sizeof v[3], rp_num(l, "rounds"));
        rp_fmt_num(v[4], sizeof v[4], rp_num(l, "epsilon"));
        rp_buf_printf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n", v[0], v[1],
                      v[2], v[3], v[4], cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(l, "opted_out")) ? "yes" : "no");
    }
    rp_buf_puts(b, "</table></details>\n");
    rp_buf_puts(b, "<table class=\"num\"><tr><th>over all records</th><th>min</th><th>median</th><th>max</th>"
                   "<th>mean</th></tr>\n");
    static const char *const dist[] = {"budget", "epsilon", "p"};
    for (int i = 0; i < 3; i++) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(rb, dist[i]);
        if (!d) continue;
        char v[4][32];
        rp_fmt_num(v[0], sizeof v[0], rp_num(d, "min"));
        rp_fmt_num(v[1], sizeof v[1], rp_num(d, "median"));
        rp_fmt_num(v[2], sizeof v[2], rp_num(d, "max"));
        rp_fmt_num(v[3], sizeof v[3], rp_num(d, "mean"));
        rp_buf_printf(b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
                      i == 0 ? "budget ε_i" : i == 1 ? "realized ε_i" : "sampling rate p_i (sampled records)", v[0],
                      v[1], v[2], v[3]);
    }
    rp_buf_puts(b, "</table>\n");
}
