/* The privacy ledger: per-client counts of what was released, and the record-level accounting over them.
 * Accounting deduplicates clients with the same (n_k, steps_k): with shards most clients share a profile, so a
 * round costs a handful of accountant calls, not one per client.
 * Replication (data.samples_per_client) puts one record in several clients; each of them runs its own DP-SGD steps
 * on it with its own noise, so the record's loss is the composition over every copy: it is charged the steps of
 * all the clients that hold it (every replicated client has exactly s records, so one q = B/s throughout). */
#include "dpfl/accounting.h"
#include "dpfl/mech.h"
#include "dpfl/privacy.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

dpfl_status dpfl_ledger_init(dpfl_ledger *l, int32_t clients, dpfl_error *err)
{
    memset(l, 0, sizeof *l);
    l->clients = clients;
    l->participations = dpfl_calloc((size_t)clients, sizeof(int64_t), err);
    l->record_steps = dpfl_calloc((size_t)clients, sizeof(int64_t), err);
    if (!l->participations || !l->record_steps) {
        dpfl_ledger_free(l);
        return DPFL_ENOMEM;
    }
    return DPFL_OK;
}

void dpfl_ledger_free(dpfl_ledger *l)
{
    dpfl_free(l->participations);
    dpfl_free(l->record_steps);
    free(l->client_events);
    l->participations = l->record_steps = NULL;
    l->client_events = NULL;
    l->nclient_events = l->client_cap = 0;
}

/* Field by field (a memcmp would read padding bytes, whose values are unspecified: repeated rounds then merged or
 * not at random, and the composed epsilon moved in its last digits between a run and its resumption). */
#define SAME(codec, ctype, name, key, kinds) && (offsetof(dpfl_event, name) == offsetof(dpfl_event, count) || \
                                                   a->name == b->name)
static int same_but_count(const dpfl_event *a, const dpfl_event *b)
{
    return 1 DPFL_EVENT_FIELDS(SAME);
}

dpfl_status dpfl_ledger_charge_client(dpfl_ledger *l, const dpfl_event *ev, dpfl_error *err)
{
    if (l->nclient_events > 0 && same_but_count(&l->client_events[l->nclient_events - 1], ev)) {
        dpfl_event *last = &l->client_events[l->nclient_events - 1];
        if (ev->count < 0 || last->count < 0 || ev->count > INT64_MAX - last->count)
            return dpfl_fail(err, DPFL_EINVAL, "ledger: event count %lld cannot be added to %lld",
                             (long long)ev->count, (long long)last->count);
        last->count += ev->count;
        return DPFL_OK;
    }
    if (l->nclient_events == l->client_cap) {
        int32_t cap = l->client_cap ? 2 * l->client_cap : 8;
        dpfl_event *e = realloc(l->client_events, (size_t)cap * sizeof *e);
        if (!e) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
        l->client_events = e;
        l->client_cap = cap;
    }
    l->client_events[l->nclient_events++] = *ev;
    return DPFL_OK;
}

dpfl_status dpfl_ledger_charge_round(dpfl_ledger *l, const dpfl_mech_clients *design, int32_t round,
                                     const dpfl_event *ev, dpfl_error *err)
{
    if (design->kind != DPFL_SAMPLE_CROSS_DEVICE || ev->kind == DPFL_EV_NOT_PRIVATE)
        return dpfl_ledger_charge_client(l, ev, err);
    /* shuffled cohorts: who takes part is not independent across clients or rounds, so no subsampling bound holds;
     * what holds is that each client's update enters one Gaussian release per pass (replace-one: 2S) */
    if (ev->kind != DPFL_EV_GAUSSIAN || ev->adjacency != DPFL_ADJ_REPLACE_ONE || ev->count != 1)
        return dpfl_fail(err, DPFL_EINVAL, "ledger: round %d: cross-device cohorts are charged one unsampled Gaussian "
                                           "release under replace-one per pass, not %s (no amplification by sampling "
                                           "is valid for them)",
                         (int)round, dpfl_event_kind_name(ev->kind));
    if (!dpfl_mech_clients_charged(design, round)) return DPFL_OK; /* charged at its pass's first round */
    return dpfl_ledger_charge_client(l, ev, err);
}

dpfl_status dpfl_ledger_copy(dpfl_ledger *dst, const dpfl_ledger *src, dpfl_error *err)
{
    DPFL_ASSERT(dst->clients == src->clients);
    memcpy(dst->participations, src->participations, (size_t)src->clients * sizeof(int64_t));
    memcpy(dst->record_steps, src->record_steps, (size_t)src->clients * sizeof(int64_t));
    dst->rounds = src->rounds;
    dst->nclient_events = 0;
    for (int32_t i = 0; i < src->nclient_events; i++) {
        dpfl_status st = dpfl_ledger_charge_client(dst, &src->client_events[i], err);
        if (st) return st;
    }
    return DPFL_OK;
}

void dpfl_ledger_charge(dpfl_ledger *l, const int32_t *clients, int32_t m, const int64_t *steps)
{
    for (int32_t i = 0; i < m; i++) {
        l->participations[clients[i]]++;
        l->record_steps[clients[i]] += steps[i];
    }
    l->rounds++;
}

/* the events of the mechanism the client ran (mech/dpsgd.c: the same struct the training loop used) */
static dpfl_event record_event(const dpfl_record_accounting *ra, int64_t n, int64_t steps)
{
    dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(ra->poisson, (int32_t)n, ra->batch, 1.0, ra->z);
    return dpfl_mech_dpsgd_event(&d, steps);
}

static dpfl_status event_epsilon(const dpfl_record_accounting *ra, int64_t n, int64_t steps, double *eps,
                                 double *order, dpfl_guarantee *gout, dpfl_event *evout, dpfl_error *err)
{
    dpfl_event ev = record_event(ra, n > 0 ? n : 1, steps);
    if (evout) *evout = ev;
    if (steps == 0 || n == 0) {
        *eps = 0.0;
        *order = 0.0;
        return DPFL_OK;
    }
    dpfl_guarantee g;
    dpfl_account_opts o = {0};
    if (ra->integer_orders) o.orders = dpfl_rdp_default_orders(&o.norders); /* integers, no refinement */
    dpfl_status st = dpfl_account_epsilon(&ev, 1, ra->delta, ra->pld ? DPFL_ACC_PLD : DPFL_ACC_RDP, &o, &g, err);
    if (st) return st;
    *eps = g.epsilon;
    *order = g.order;
    if (gout) *gout = g;
    return DPFL_OK;
}

/* the worst client's batch and rate, as its DP-SGD mechanism (mech/dpsgd.c) has them */
static void worst_sampling(const dpfl_record_accounting *ra, int64_t n, dpfl_record_report *out)
{
    dpfl_mech_dpsgd d = dpfl_mech_dpsgd_make(ra->poisson, (int32_t)n, ra->batch, 1.0, ra->z);
    out->worst_batch = d.batch;
    out->worst_q = d.q;
}

/* Per record (indices < n): how many clients hold it and, with steps != NULL, the sum of their steps.  A record
 * twice in one client is an error. */
static dpfl_status record_totals(const dpfl_partition *part, const int64_t *steps, int32_t n, int32_t *copies,
                                 int64_t *total, dpfl_error *err)
{
    int32_t *last = malloc((size_t)n * sizeof *last);
    if (!last) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
    for (int32_t i = 0; i < n; i++) last[i] = -1;
    dpfl_status st = DPFL_OK;
    for (int32_t k = 0; k < part->clients && !st; k++)
        for (int32_t j = part->offset[k]; j < part->offset[k + 1]; j++) {
            int32_t i = part->index[j];
            if (last[i] == k) {
                st = dpfl_fail(err, DPFL_EINVAL, "data.samples_per_client: client %d holds record %d twice, so one "
                               "DP-SGD step can sample both copies (group privacy, which record-level DP does not "
                               "account); use fewer samples per client, another partition, or no replication", k, i);
                break;
            }
            last[i] = k;
            copies[i]++;
            if (total) total[i] += steps[k];
        }
    free(last);
    return st;
}

static int32_t records_indexed(const dpfl_partition *part)
{
    int32_t n = 0;
    for (int32_t j = 0; j < part->offset[part->clients]; j++)
        if (part->index[j] >= n) n = part->index[j] + 1;
    return n;
}

dpfl_status dpfl_record_copies(const dpfl_partition *part, int32_t *max_copies, dpfl_error *err)
{
    int32_t n = records_indexed(part);
    int32_t *copies = calloc((size_t)n + 1, sizeof *copies);
    if (!copies) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
    dpfl_status st = record_totals(part, NULL, n, copies, NULL, err);
    *max_copies = 1;
    for (int32_t i = 0; i < n && !st; i++)
        if (copies[i] > *max_copies) *max_copies = copies[i];
    free(copies);
    return st;
}

/* A replicated partition: the record whose clients ran the most steps in all, charged all of them. */
static dpfl_status replicated_epsilon(const dpfl_ledger *l, const dpfl_partition *part,
                                      const dpfl_record_accounting *ra, dpfl_record_report *out, double *per_client,
                                      dpfl_error *err)
{
    const int64_t s = dpfl_partition_size(part, 0);
    for (int32_t k = 1; k < part->clients; k++)
        if (dpfl_partition_size(part, k) != s)
            return dpfl_fail(err, DPFL_EINVAL, "ledger: replicated clients of unequal sizes (%lld, %lld)",
                             (long long)s, (long long)dpfl_partition_size(part, k));
    int32_t n = records_indexed(part), worst = -1;
    int32_t *copies = calloc((size_t)n + 1, sizeof *copies);
    int64_t *total = calloc((size_t)n + 1, sizeof *total);
    dpfl_status st = copies && total ? record_totals(part, l->record_steps, n, copies, total, err)
                                     : dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
    for (int32_t i = 0; i < n && !st; i++)
        if (copies[i] > 0 && (worst < 0 || total[i] > total[worst])) worst = i;
    if (!st && worst >= 0) {
        dpfl_guarantee g;
        g.answered = ra->pld ? DPFL_ACC_PLD : DPFL_ACC_RDP;
        g.fallback[0] = '\0';
        st = event_epsilon(ra, s, total[worst], &out->epsilon, &out->order, &g, &out->event, err);
        out->answered = g.answered;
        snprintf(out->fallback, sizeof out->fallback, "%s", g.fallback);
        for (int32_t k = 0; k < part->clients && out->worst_client < 0; k++)
            for (int32_t j = part->offset[k]; j < part->offset[k + 1]; j++)
                if (part->index[j] == worst) {
                    out->worst_client = k;
                    break;
                }
        out->worst_n = s;
        worst_sampling(ra, s, out);
        out->worst_steps = total[worst];
        out->worst_copies = copies[worst];
    }
    if (!st && per_client)
        for (int32_t k = 0; k < part->clients; k++) per_client[k] = out->epsilon;
    free(copies);
    free(total);
    return st;
}

static int replicated(const dpfl_partition *part)
{
    int32_t n = records_indexed(part);
    uint8_t *seen = calloc((size_t)n + 1, 1);
    int rep = 0;
    for (int32_t j = 0; seen && j < part->offset[part->clients] && !rep; j++) rep = seen[part->index[j]]++ > 0;
    free(seen);
    return rep || !seen; /* out of memory: the replicated path reports it */
}

typedef struct {
    int64_t n, steps;
    int32_t first;
    double eps;
} profile;

static int cmp_profile(const void *a, const void *b)
{
    const profile *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? -1 : 1;
    if (x->steps != y->steps) return x->steps < y->steps ? -1 : 1;
    return x->first - y->first;
}

dpfl_status dpfl_ledger_record_epsilon(const dpfl_ledger *l, const dpfl_partition *part,
                                       const dpfl_record_accounting *ra, dpfl_record_report *out,
                                       double *per_client, dpfl_error *err)
{
    memset(out, 0, sizeof *out);
    out->worst_client = -1;
    out->worst_copies = 1;
    if (replicated(part)) return replicated_epsilon(l, part, ra, out, per_client, err);
    profile *pr = malloc((size_t)l->clients * sizeof *pr);
    if (!pr) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (ledger)");
    for (int32_t k = 0; k < l->clients; k++)
        pr[k] = (profile){dpfl_partition_size(part, k), l->record_steps[k], k, 0.0};
    qsort(pr, (size_t)l->clients, sizeof *pr, cmp_profile);
    dpfl_status st = DPFL_OK;
    for (int32_t i = 0; i < l->clients && !st; i++) {
        if (i > 0 && pr[i].n == pr[i - 1].n && pr[i].steps == pr[i - 1].steps) {
            pr[i].eps = pr[i - 1].eps;
            continue;
        }
        double order;
        dpfl_guarantee g;
        g.answered = ra->pld ? DPFL_ACC_PLD : DPFL_ACC_RDP;
        g.fallback[0] = '\0';
        dpfl_event ev;
        st = event_epsilon(ra, pr[i].n, pr[i].steps, &pr[i].eps, &order, &g, &ev, err);
        if (!st && (out->worst_client < 0 || pr[i].eps > out->epsilon)) {
            out->event = ev;
            out->answered = g.answered;
            snprintf(out->fallback, sizeof out->fallback, "%s", g.fallback);
            out->epsilon = pr[i].eps;
            out->worst_client = pr[i].first;
            out->worst_n = pr[i].n;
            worst_sampling(ra, pr[i].n, out);
            out->worst_steps = pr[i].steps;
            out->order = order;
        }
    }
    if (!st && per_client)
        for (int32_t i = 0; i < l->clients; i++) per_client[pr[i].first] = pr[i].eps;
    free(pr);
    return st;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

dpfl_status dpfl_record_calibrate(const dpfl_partition *part, const dpfl_config *cfg, int32_t rounds,
                                  double target_eps, double *z, dpfl_error *err)
{
    dpfl_record_accounting ra = {0, (cfg->record_dp.sampler == DPFL_BATCH_POISSON), cfg->fl.batch, cfg->record_dp.delta,
                                 (cfg->record_dp.accountant == DPFL_ACC_PLD), cfg->record_dp.secure_mode};
    dpfl_calibrate_opts co = {0};
    co.accountant = ra.pld ? DPFL_ACC_PLD : DPFL_ACC_RDP;
    if (ra.integer_orders) co.opts.orders = dpfl_rdp_default_orders(&co.opts.norders);
    co.tol = 1e-4;
    /* cross-device cohorts: a client trains in its participations only, not in every round */
    const dpfl_mech_clients design = dpfl_mech_clients_make(cfg->fl.sampling, part->clients, cfg->fl.client_rate,
                                                            cfg->fl.clients_per_round);
    if (design.kind == DPFL_SAMPLE_CROSS_DEVICE) rounds = (int32_t)dpfl_mech_clients_releases(&design, rounds);
    /* a replicated record is charged in each of its clients (all of size s) */
    int32_t copies;
    dpfl_status st = dpfl_record_copies(part, &copies, err);
    if (st) return st;
    /* every distinct client size, taking part in every round: sort and deduplicate */
    int64_t *sizes = malloc((size_t)part->clients * sizeof *sizes);
    if (!sizes) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (calibration)");
    for (int32_t k = 0; k < part->clients; k++) sizes[k] = dpfl_partition_size(part, k);
    qsort(sizes, (size_t)part->clients, sizeof *sizes, cmp_i64);
    int32_t ns = 0;
    for (int32_t k = 0; k < part->clients; k++)
        if (sizes[k] > 0 && (ns == 0 || sizes[ns - 1] != sizes[k])) sizes[ns++] = sizes[k];
    double best = 0.0;
    for (int32_t j = 0; j < ns && !st; j++) {
        int64_t n = sizes[j];
        const int64_t steps = dpfl_mech_record_steps(n, cfg->fl.batch, cfg->fl.local_steps, cfg->fl.local_epochs, rounds,
                                                     copies);
        dpfl_event ev = record_event(&ra, n, steps);
        double zj;
        st = dpfl_calibrate_noise(&ev, 1, target_eps, cfg->record_dp.delta, &co, &zj, err);
        if (!st && zj > best) best = zj;
    }
    free(sizes);
    if (!st) *z = best;
    return st;
}
