/* dpfl accounting: the privacy ledger -- what has been released, per client, charged before the release leaves
 * the server -- and the guarantees of it (record level: every record's composition of the DP-SGD steps its clients
 * took; client level: the round events).  Below the simulation (dpfl/fl.h), which charges it: the ledger knows the
 * mechanisms' events and the partition, never the round loop.  rPDP-FL's per-record budgets and the client-level
 * epsilons the run reports are this module's internals (src/accounting/).
 * References: Mironov 2017 (RDP composition), Abadi et al. 2016 (DP-SGD's accountant), McMahan et al. 2018
 * (client-level DP-FedAvg). */
#ifndef DPFL_ACCOUNTING_H
#define DPFL_ACCOUNTING_H

#include "dpfl/core.h"
#include "dpfl/data.h"
#include "dpfl/mech.h"
#include "dpfl/privacy.h"
#include "dpfl/config.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* rPDP-FL's individual filter (record_dp.budget_policy = filter): a record leaves the sampler once less than
 * DPFL_FILTER_OUT of its cap is left (the simulation's steps and the budget plan test the same). */
#define DPFL_FILTER_OUT 1e-4

/* ------------------------------------------------------------------------------------------ privacy ledger */
/* What has been released, per client: every count here is charged BEFORE the round's model leaves the server
 * (the run driver persists the ledger and the model in one atomic checkpoint, then writes outputs). */
typedef struct {
    int32_t clients;
    int32_t rounds;          /* rounds released */
    int64_t *participations; /* per client: rounds it took part in */
    int64_t *record_steps;   /* per client: DP-SGD steps over its records */
    /* client-level releases: one event per round, consecutive equal rounds merged (count) */
    dpfl_event *client_events;
    int32_t nclient_events, client_cap;
} dpfl_ledger;

dpfl_status dpfl_ledger_init(dpfl_ledger *l, int32_t clients, dpfl_error *err);
void dpfl_ledger_free(dpfl_ledger *l);
/* Charge one round: the m sampled clients, each with its local step count. */
void dpfl_ledger_charge(dpfl_ledger *l, const int32_t *clients, int32_t m, const int64_t *steps);
/* Charge one round's client-level release (merged into the previous run of equal events). */
dpfl_status dpfl_ledger_charge_client(dpfl_ledger *l, const dpfl_event *ev, dpfl_error *err);
/* Charge round `round`'s client-level release ev under the client design that ran: every round as it is, except
 * cross-device cohorts, where a client's data enters exactly one release per pass: the release is charged at the
 * pass's first round for the whole pass and not at its other rounds, and only as an unsampled Gaussian under
 * replace-one -- an event claiming amplification by sampling (poisson, fixed, two-stage) or another adjacency is
 * refused (DPFL_EINVAL), so the ledger composes exactly ceil(round / E) Gaussians. */
dpfl_status dpfl_ledger_charge_round(dpfl_ledger *l, const dpfl_mech_clients *design, int32_t round,
                                     const dpfl_event *ev, dpfl_error *err);
/* Copy src's counts and events into dst (same number of clients). */
dpfl_status dpfl_ledger_copy(dpfl_ledger *dst, const dpfl_ledger *src, dpfl_error *err);

/* Record-level accounting of a ledger: client k's records saw record_steps[k] steps of the sampler actually
 * used, on its n_k records with batch min(B, n_k), noise multiplier z (std / sensitivity under the sampler's
 * adjacency).  Rounds a client sat out touched none of its records, so nothing is charged for them and no
 * amplification by client sampling is claimed. */
typedef struct {
    double z;
    int poisson;   /* 1: Poisson (add-remove), 0: fixed-size without replacement (replace-one) */
    int32_t batch;
    double delta;
    int pld;       /* 1: PLD accountant, 0: RDP */
    int integer_orders; /* 1: RDP at integer orders only (discrete-Gaussian secure mode) */
} dpfl_record_accounting;

typedef struct {
    double epsilon;        /* worst case over clients */
    int32_t worst_client;
    double worst_q;        /* that client's sampling rate B_k / n_k */
    int64_t worst_steps, worst_n, worst_batch;
    double order;          /* RDP order of the worst client (0 for PLD) */
    /* clients holding the worst record: 1, or up to data.samples_per_client's replication, where a record is
     * charged the steps of every client that holds it and worst_steps is that sum */
    int32_t worst_copies;
    dpfl_accountant answered; /* whose number epsilon is: PLD, or RDP where PLD fell back (fallback says why) */
    char fallback[160];
    dpfl_event event;      /* the worst record's composition, as the mechanism returned it (epsilon is its value) */
} dpfl_record_report;

/* Worst-case record-level epsilon over all records (and, if per_client != NULL, each client's epsilon: with a
 * replicated partition, the worst record's for every client, an upper bound for each). */
dpfl_status dpfl_ledger_record_epsilon(const dpfl_ledger *l, const dpfl_partition *part,
                                       const dpfl_record_accounting *ra, dpfl_record_report *out,
                                       double *per_client, dpfl_error *err);
/* Smallest z such that every record, its clients taking part in all `rounds` rounds with their per-round step
 * counts, stays within target_eps (calibrated on the safe side). */
dpfl_status dpfl_record_calibrate(const dpfl_partition *part, const dpfl_config *cfg, int32_t rounds,
                                  double target_eps, double *z, dpfl_error *err);
/* Replication (data.samples_per_client): *max_copies = the most clients that hold one record (1 when none is
 * replicated).  Record-level DP charges a record in every client that holds it; a record held twice by one client
 * (its slots would be sampled together in one step: group privacy, not composition) is refused, naming both. */
dpfl_status dpfl_record_copies(const dpfl_partition *part, int32_t *max_copies, dpfl_error *err);

#pragma GCC visibility pop

#endif
