/* dpfl fl: the federated round loop and the run driver (the experiment configuration: dpfl/config.h).
 *
 * A run is: config -> dataset -> partition -> rounds of {sample clients; each sampled client trains locally
 * from the global model; the server aggregates the updates Delta_k = local_k - global} -> outputs in a run
 * directory (resolved config, metrics.jsonl, summary.json, model).
 *
 * Determinism: every random choice draws from a stream derived from the root rng by (round, client, purpose),
 * and updates are summed in client order, so a seeded run is bit-identical whatever the thread count. */
#ifndef DPFL_FL_H
#define DPFL_FL_H

#include "dpfl/core.h"
#include "dpfl/data.h"
#include "dpfl/nn.h"
#include "dpfl/optim.h"
#include "dpfl/mech.h"
#include "dpfl/privacy.h"
#include "dpfl/ddp.h"
#include "dpfl/config.h"

#include <signal.h>

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* ------------------------------------------------------------------------------------------ round loop */
typedef struct {
    int32_t round;
    int32_t clients;  /* clients that took part */
    int64_t examples; /* examples processed in local training */
    double train_loss;
    double test_accuracy, test_loss; /* NAN when not evaluated this round */
    double client_acc_mean, client_acc_std; /* global model on the per-client test sets; NAN when none */
    double personal_acc_mean, personal_acc_std; /* each client's helper model on its own test set; NAN when off */
    double local_acc_mean, local_acc_std; /* helper models: each client's model right after its latest local
                                             training, before the sync mixes it (what PriFedSync's code reports) */
    double clip_fraction; /* DP-SGD: share of examples whose gradient was clipped; NAN when off */
    double noise_std;     /* DP-SGD: std of the noise added to each step's clipped sum */
    /* client-level DP (NAN when off) */
    int32_t replied;            /* sampled clients whose update arrived (the rest dropped out); any mode */
    double update_clip;         /* S used this round */
    double update_clip_fraction; /* share of updates whose norm exceeded S */
    double update_noise_std;    /* std of the noise on the averaged update */
    double between_client_variance, update_scale; /* Geyer's V_c and U_s over the raw updates */
    /* client_dp.mechanism = ddp (NAN / 0 when off) */
    int32_t ddp_threshold;      /* survivors the round needed (secure aggregation threshold) */
    int ddp_released;           /* 1 if the round's sum was decoded and applied (enough survivors) */
    double ddp_overflow;        /* upper bound on the probability that the round's modular sum wrapped */
    double wall_seconds; /* since the start of the run */
} dpfl_round_metrics;

typedef struct dpfl_sim dpfl_sim;

/* The simulation borrows everything passed in; global (model->nparam floats) is updated in place. */
dpfl_status dpfl_sim_create(const dpfl_config *cfg, const dpfl_model *model, const dpfl_dataset *train,
                            const dpfl_dataset *test, const dpfl_partition *part, const dpfl_rng *root,
                            float *global, dpfl_sim **out, dpfl_error *err);
void dpfl_sim_free(dpfl_sim *s);
/* One round (round numbers start at 1): sample, train locally, aggregate into the global model. */
dpfl_status dpfl_sim_round(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err);
/* The same in two halves, so that a budget can be checked against the sampled clients before any of them
 * trains: dpfl_sim_sample returns how many clients round `round` samples (their ids in *clients, ascending),
 * dpfl_sim_train then runs that round. */
int32_t dpfl_sim_sample(dpfl_sim *s, int32_t round, const int32_t **clients);
dpfl_status dpfl_sim_train(dpfl_sim *s, int32_t round, dpfl_round_metrics *m, dpfl_error *err);
/* The simulation's sides, each a sub-handle reached once from the simulation and then used on its own (all live
 * as long as it does; none is freed apart from it):
 *   dpfl_clients (dpfl_sim_clients): every client's own state, kept across rounds -- helper models, optimizer
 *     states, the initial model -- and the local steps and learning-rate schedule their local training follows;
 *   dpfl_record_dp (dpfl_sim_record_dp): record-level DP as the clients run it -- the noise, rPDP-FL's per-record
 *     rates and the round they make (the rPDP design), the filter's spend, the rates digest, and the record-level
 *     accounting;
 *   dpfl_server (dpfl_sim_server): the aggregation mode's public state -- client-level noise and the event it
 *     releases, the update clip, adaptive clipping's noises, the DDP plan, SCAFFOLD's control variate c -- and
 *     what the server keeps of the rounds: the ledger it charges, the reports it received, the auditing observer.
 * The round itself (sample, train, evaluate), a client process's own round, and the guarantees of the ledger
 * (dpfl_sim_epsilon, which reads the record level and the server) stay on the dpfl_sim. */
typedef struct dpfl_clients dpfl_clients;
typedef struct dpfl_record_dp dpfl_record_dp;
typedef struct dpfl_server dpfl_server;
dpfl_clients *dpfl_sim_clients(dpfl_sim *s);
dpfl_record_dp *dpfl_sim_record_dp(dpfl_sim *s);
dpfl_server *dpfl_sim_server(dpfl_sim *s);

/* ---- the clients' side */
/* Local steps client k takes when it participates (what the ledger charges). */
int64_t dpfl_clients_steps(const dpfl_clients *c, int32_t k);
/* fl.personalization = helper: the model client k uses, h_k (Algorithm 1 of PriFedSync): the initial model w0 until
 * the client first syncs; after each sync (1 - alpha) w~_k + alpha w_global, w~_k its freshly trained local model
 * and w_global the new global model.  A client keeps it across the rounds it sits out and trains from it. */
const float *dpfl_clients_helper_model(const dpfl_clients *c, int32_t k);
/* Per-client state, for checkpoints: with fl.personalization = helper the helper model (P floats), then with
 * fl.client_state = keep the local optimizer state (momentum, or Adam m then v: 0 for plain SGD); and a step count
 * t.  One client's state is dpfl_clients_state_floats floats.  dpfl_clients_keep_state is 0 when neither is on
 * (then no client has a state).  The helper models need w0 too: dpfl_clients_initial_model (NULL without). */
int dpfl_clients_keep_state(const dpfl_clients *c);
size_t dpfl_clients_state_floats(const dpfl_clients *c);
/* Client k's step count t (0: it has not trained yet and has no state); *state gets its floats (NULL if none). */
int64_t dpfl_clients_state(const dpfl_clients *c, int32_t k, const float **state);
/* Restore client k's state (t > 0; state holds dpfl_clients_state_floats floats). */
dpfl_status dpfl_clients_set_state(dpfl_clients *c, int32_t k, int64_t t, const float *state, dpfl_error *err);
const float *dpfl_clients_initial_model(const dpfl_clients *c);
void dpfl_clients_set_initial_model(dpfl_clients *c, const float *w0);

/* ---- record-level DP on the clients */
/* rPDP-FL: the per-record sampling round this simulation runs (mech/rpdp.c), what every level's event is built
 * from: the client sampler's design (the one it returned for the round sampled last, else round 1's), the local
 * steps a participating client takes (the most of any client), and the record-level noise in force. */
dpfl_mech_rpdp dpfl_record_dp_design(const dpfl_record_dp *r);
/* Replace the record-level noise multiplier (after calibration). */
void dpfl_record_dp_set_noise(dpfl_record_dp *r, double z);
/* rPDP-FL: record i (training-set index) is sampled with probability p[i] at every local step, and client k's
 * noisy clipped sum is divided by client_denom[k] (its expected batch).  Both arrays stay the caller's and are
 * read during training (p may change between rounds: opt-outs).  Needs the Poisson sampler. */
void dpfl_record_dp_set_rates(dpfl_record_dp *r, double *p, const double *client_denom);
/* budget_policy = filter, after dpfl_record_dp_set_rates: spent[i] (updated in place) is record i's Renyi loss at
 * order alpha so far, cap[i] its filter budget; the sampler's p[i] becomes 0 once less than DPFL_FILTER_OUT cap[i]
 * is left. */
#define DPFL_FILTER_OUT 1e-4
void dpfl_record_dp_set_filter(dpfl_record_dp *r, double *spent, const double *cap, double alpha);
/* The filter's spend of client k's records (spent[i] of each, in partition order) for a process that trains the
 * client apart from the one that checkpoints it (mpirun's workers): dpfl_record_dp_filter_spent copies it into out
 * (NULL: only counts) and returns how many records (0 without the filter); dpfl_record_dp_set_filter_spent takes
 * them back and leaves out of the sampler each record within DPFL_FILTER_OUT of its cap, as a step's charge does
 * (DPFL_EINVAL, nothing taken, for a value outside [0, cap]). */
int32_t dpfl_record_dp_filter_spent(const dpfl_record_dp *r, int32_t k, double *out);
dpfl_status dpfl_record_dp_set_filter_spent(dpfl_record_dp *r, int32_t k, const double *v, dpfl_error *err);

/* ---- the server's side */
/* Client-level noise multiplier z of the round's whole release (adaptive clipping splits it between the update
 * sum and the quantile estimate; an error if the quantile noise in force at `round` leaves nothing for the sum). */
dpfl_status dpfl_server_set_noise(dpfl_server *sv, int32_t round, double z, dpfl_error *err);
/* The multiplier of the release as configured now, recomputed from the noises actually drawn: z_Delta of the
 * update sum and, with adaptive clipping, sigma_b of the quantile count.  This is what the ledger is charged. */
double dpfl_server_release_noise(const dpfl_server *sv);
/* The client-level event one round `round` of this simulation's aggregation mode releases at noise multiplier z
 * (the mode's own event at the sampling design of that round; adaptive clipping: z split with the quantile count,
 * then recombined from the two noises; distributed DP: its plan for z; median clipping, and the plain mean without
 * client-level DP: not private).  What calibration searches over.  The server is unchanged; DPFL_EINVAL for
 * z <= 0 or a z the mode refuses (adaptive clipping's sigma_b leaving nothing for the sum). */
dpfl_status dpfl_server_client_event(const dpfl_server *sv, int32_t round, double z, dpfl_event *ev,
                                     dpfl_error *err);
/* Adaptive clipping: sigma_b of the centred count (0 otherwise); z_Delta (the update sum's multiplier). */
double dpfl_server_quantile_noise(const dpfl_server *sv);
double dpfl_server_update_noise(const dpfl_server *sv);
/* client_dp.mechanism = ddp: the plan in force (NULL otherwise, or before the noise is set). */
const dpfl_ddp_plan *dpfl_server_ddp_plan(const dpfl_server *sv);
/* The current update clip S (adaptive clipping changes it every round; checkpoints save it). */
double dpfl_server_update_clip(const dpfl_server *sv);
void dpfl_server_set_update_clip(dpfl_server *sv, double S);
/* Auditing (dpfl audit): fn sees every client update the server receives, as it arrives (before any client-level
 * clipping), in client order; NULL removes it.  The update is the server's view of what record-level DP protects. */
typedef void (*dpfl_server_update_fn)(void *ctx, int32_t round, int32_t client, const float *update, size_t P);
void dpfl_server_set_update_observer(dpfl_server *sv, dpfl_server_update_fn fn, void *ctx);
/* Clients that trained in the last round and their mean local training loss (over their local steps), from the
 * reports the server received; returns how many (clients[], losses[] hold at least the sampled count). */
int32_t dpfl_server_client_losses(const dpfl_server *sv, int32_t *clients, double *losses);

/* Global model on the global test set, and per-client test sets when the partition has them (there also each
 * client's helper model, with fl.personalization = helper). */
void dpfl_sim_evaluate(dpfl_sim *s, dpfl_round_metrics *m);
/* Evaluation outside a run (dpfl eval): mean loss and accuracy of params on every example of d, computed the way a
 * run computes the global model's test_loss and test_accuracy (the same chunks, batches and sums, on one thread),
 * so that with batch = dpfl_eval_batch(the run's config) a run's model on its own test set gives summary.json's
 * numbers bit for bit.  Fails, naming the model's spec, when d's examples are not m's input size or a label is not
 * one of m's outputs.  NAN for an empty d. */
dpfl_status dpfl_evaluate(const dpfl_model *m, const float *params, const dpfl_dataset *d, int32_t batch,
                          double *mean_loss, double *accuracy, dpfl_error *err);
/* The batch size of a run's evaluations: max(256, fl.batch) (cfg NULL: 256). */
int32_t dpfl_eval_batch(const dpfl_config *cfg);
/* PrivateFL's heterogeneity metric (emd.c): the 1-D Wasserstein-1 (earth mover's) distance between two empirical
 * distributions (NAN if either is empty), and its mean and spread over all pairs of k clients with samples
 * (samples[i] is sorted in place; NAN when there are fewer than two). */
double dpfl_wasserstein1(const double *a, size_t na, const double *b, size_t nb);
void dpfl_emd_pairwise(double *const *samples, const size_t *counts, int32_t k, double *mean, double *std);

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

/* The server owns the simulation's ledger: dpfl_sim_train charges every round it trains (the sampled clients' local
 * steps, and with client-level DP the round's event at the multiplier actually drawn), so a library caller gets
 * epsilon without filling anything by hand.  dpfl_server_charge charges the round sampled last onto any ledger (the
 * run driver charges a copy first, to check a budget before training); dpfl_record_dp_accounting is the
 * record-level mechanism the clients run; dpfl_sim_epsilon the guarantees of the ledger (record may be NULL;
 * client_eps may be NULL; *client_private = 0 and client_eps = inf for median clipping) -- on the simulation, as it
 * reads two sides: the clients' record-level mechanism (dpfl_record_dp) and the server's ledger and aggregation
 * mode. */
dpfl_status dpfl_server_charge(const dpfl_server *sv, dpfl_ledger *l, dpfl_error *err);
const dpfl_ledger *dpfl_server_ledger(const dpfl_server *sv);
dpfl_status dpfl_server_restore_ledger(dpfl_server *sv, const dpfl_ledger *l, dpfl_error *err);
dpfl_record_accounting dpfl_record_dp_accounting(const dpfl_record_dp *r);
dpfl_status dpfl_sim_epsilon(const dpfl_sim *s, dpfl_record_report *record, double *client_eps, int *client_private,
                             dpfl_error *err);

/* ------------------------------------------------------------------------------------------ run driver */
/* What the run driver tells a caller after each released round (dpfl_run_options.on_round): the round's figures,
 * all already in metrics.jsonl (metrics_line is that line, valid during the call). */
typedef struct {
    int32_t round, rounds;        /* the round released (from 1); fl.rounds */
    int32_t participants;         /* clients that took part */
    double train_loss;
    double test_accuracy, test_loss; /* NAN when the round was not evaluated */
    double record_epsilon;        /* record-level guarantee so far (rPDP-FL: the largest over the records); NAN off */
    double client_epsilon;        /* client-level (DP-FedAvg), NAN when off or not private (median clipping) */
    double wall_seconds;          /* since the run started (all sessions) */
    const char *metrics_line;     /* the round's line of metrics.jsonl (one JSON object, no newline) */
} dpfl_run_round;
/* Called after round r's checkpoint and metrics line are written; a nonzero return stops the run there (the run
 * folder is complete for its rounds so far, and a resume continues it). */
typedef int (*dpfl_run_round_fn)(void *ctx, const dpfl_run_round *r);

typedef struct {
    const char *out_dir; /* created if absent */
    int quiet;           /* no progress line */
    int resume;          /* continue from out_dir/checkpoint.bin */
    int force;           /* replace a previous run in out_dir (its files are removed first); without it (or resume)
                            a non-empty out_dir is an error */
    dpfl_run_round_fn on_round; /* NULL: none */
    void *on_round_ctx;
    /* The data as the caller's arrays instead of data.dataset's files (NULL: the config's dataset): checked, then
     * used in place (dpfl_dataset_from_caller: test NULL holds out data.test_fraction of each source, into copies;
     * data.normalize = standard works on copies).  The caller's arrays stay unchanged.  data.dataset must then be
     * "memory:NAME", which config.ini records: a resume needs the same arrays again. */
    const dpfl_dataset *train, *test;
    volatile sig_atomic_t *stop; /* NULL, or a flag (a signal handler may set it) read between rounds: nonzero
                                    stops the run after the round in progress -- an interrupted run */
} dpfl_run_options;

/* Everything `dpfl train` does after parsing: load data, partition, train, write the run directory.  An
 * interrupted run (opt->stop) still returns DPFL_OK and writes what a finished one does for the rounds it completed:
 * summary.json (with "interrupted": true), model.bin and checkpoint.bin, so that it can be reported, evaluated,
 * exported, and continued bit-identically with opt->resume.  The library installs no signal handler. */
dpfl_status dpfl_run(const dpfl_config *cfg, const dpfl_run_options *opt, dpfl_error *err);

/* For bindings that cannot declare the C structs (python/dpfl, src/run/binding.c): a config on the heap -- the
 * defaults, then the INI file at ini_path when not NULL (dpfl_config_load); change it with dpfl_config_set -- and
 * its release.  *out is NULL on failure. */
dpfl_status dpfl_config_create(const char *ini_path, dpfl_config **out, dpfl_error *err);
void dpfl_config_destroy(dpfl_config *c);
/* Text the library malloc'd for a binding (dpfl_config_to_ini), released. */
void dpfl_text_free(char *text);
/* sizeof / offsetof for the run driver's structs a binding passes (dpfl_run_options, dpfl_run_round,
 * dpfl_dataset), like dpfl_abi_layout (dpfl/abi.h); -1 for a type or field not listed. */
long dpfl_run_abi_layout(const char *type, const char *field);
/* A model file (model.bin, dpfl_model_save) as the .npz of dpfl_model_export_npz (PyTorch state_dict names),
 * the model rebuilt from the spec and shape the file stores. */
dpfl_status dpfl_model_file_export_npz(const char *model_path, const char *npz_path, dpfl_error *err);

#pragma GCC visibility pop

#endif
