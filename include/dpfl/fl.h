/* dpfl fl: the federated round loop (the experiment configuration: dpfl/config.h; the ledger it charges:
 * dpfl/accounting.h; the run driver above it: dpfl/run.h).
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
#include "dpfl/accounting.h"

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
 * is left (dpfl/accounting.h). */
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

/* The privacy ledger (what has been released, per client) and the record-level guarantee of it: dpfl/accounting.h. */

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

/* The run driver (dpfl_run: a whole run and its folder, on top of the simulation): dpfl/run.h. */

#pragma GCC visibility pop

#endif
