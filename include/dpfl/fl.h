/* dpfl fl: the experiment configuration, the federated round loop and the run driver.
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

/* ------------------------------------------------------------------------------------------ configuration */
/* The configuration, parsed once (dpfl_config_load / dpfl_config_set) into one typed struct per INI section:
 * choices are enums (their values are the positions in the key's list of choices), yes/no keys are 0/1.  The layers
 * below take their own section or plain numbers.  Noise multipliers follow one convention at both levels: z =
 * noise std / the L2 sensitivity under the adjacency the sampler is analysed with (docs/privacy.md). */
typedef enum { DPFL_NORM_NONE = 0, DPFL_NORM_STANDARD } dpfl_normalize;
typedef enum { DPFL_WEIGHT_SIZE = 0, DPFL_WEIGHT_UNIFORM } dpfl_weighting;
typedef enum { DPFL_STATE_RESET = 0, DPFL_STATE_KEEP } dpfl_client_state;
typedef enum { DPFL_BATCH_POISSON = 0, DPFL_BATCH_FIXED } dpfl_batch_sampler;
typedef enum { DPFL_RADJ_AUTO = 0, DPFL_RADJ_ADD_REMOVE, DPFL_RADJ_REPLACE_ONE } dpfl_record_adjacency;
typedef enum { DPFL_CLIP_FIXED = 0, DPFL_CLIP_PER_STEP, DPFL_CLIP_ADAPTIVE, DPFL_CLIP_MEDIAN } dpfl_clip_strategy;
typedef enum { DPFL_PERSONAL_NONE = 0, DPFL_PERSONAL_HELPER } dpfl_personalization;
/* rPDP-FL: where each record's epsilon budget comes from, and how the budgets become sampling rates */
typedef enum {
    DPFL_BUDGETS_NONE = 0, DPFL_BUDGETS_THREELEVELS, DPFL_BUDGETS_MIXGAUSS, DPFL_BUDGETS_PARETO, DPFL_BUDGETS_FILE,
    DPFL_BUDGETS_CLASS
} dpfl_budget_source;
typedef enum { DPFL_POLICY_RPDP = 0, DPFL_POLICY_MINIMUM, DPFL_POLICY_DROPOUT, DPFL_POLICY_FILTER } dpfl_budget_policy;

typedef struct {                  /* [data] */
    char dataset[256];            /* mnist | fashion-mnist | heart | synthetic | csv:FILES | idx:FILES */
    dpfl_partition_kind partition;
    int32_t clients;
    int32_t shards;
    double beta;
    int32_t classes_per_client;
    int32_t samples_per_client;
    int32_t test_per_client;
    char data_dir[256];
    dpfl_normalize normalize;     /* standard: (x - mean) / std with the dataset's published constants */
    /* own data (csv: / idx:, include/dpfl/data.h) */
    char label_column[64];        /* csv: header name or 0-based index; "" the last column */
    char feature_columns[192];    /* csv: names or indices; "" every other column */
    int header;                   /* csv: 0 auto, 1 yes, 2 no */
    int missing;                  /* csv: 0 error, 1 drop the row */
    char test[192];               /* a separate test set (csv: / idx:), "" none */
    double test_fraction;         /* held out of each source without a separate test set */
    char feature_mean[192];       /* normalize = standard with own data: public constants, 1 or one per feature */
    char feature_std[192];
    char source_rows[192];        /* csv: usable rows per listed file; lets a process lack the others' files */
    int32_t classes;              /* own data: number of classes (0: the largest label + 1) */
} dpfl_data_config;

typedef struct {                  /* [model] */
    char arch[128];
    int transform;                /* PrivateFL: a private input transform per client in front of arch (0 none) */
    char transform_shape[8];      /* its a and b: two of n (none), c (per channel), p (per pixel); "cp" the paper's */
} dpfl_model_config;

/* [fl] algorithm: a preset that expands into ordinary settings when it is read (keys the user sets, before or
 * after it, win); custom = none. */
typedef enum {
    DPFL_ALGO_CUSTOM = 0, DPFL_ALGO_FEDAVG, DPFL_ALGO_DP_FEDAVG, DPFL_ALGO_DP_FEDAVG_ADAPTIVE, DPFL_ALGO_DP_SGD,
    DPFL_ALGO_E2E, DPFL_ALGO_PRIFEDSYNC
} dpfl_algorithm;

typedef struct {                  /* [fl] */
    dpfl_algorithm algorithm;
    int32_t rounds;
    dpfl_client_sampling sampling;
    double client_rate;
    int32_t clients_per_round;
    int32_t local_epochs;         /* used when local_steps == 0 */
    int32_t local_steps;
    int32_t batch;
    double lr;
    dpfl_opt_kind optimizer;
    double momentum;
    double weight_decay;
    dpfl_sched_kind schedule;     /* over rounds */
    double lr_gamma;
    int32_t lr_step;
    double eta;                   /* server mixing rate: w <- (1 - eta) w + eta * mean(local) */
    char client_rate_schedule[128];       /* "ROUND:P, ..." overrides client_rate from each round on */
    char clients_per_round_schedule[128]; /* "ROUND:M, ..." overrides clients_per_round */
    dpfl_weighting weighting;
    dpfl_client_state client_state; /* optimizer state (momentum, Adam m, v, t) reset or kept per client */
    int32_t client_state_max_mb;  /* refuse runs whose per-client state (optimizer state kept, helper models) could
                                     exceed this many MiB in all */
    dpfl_personalization personalization; /* helper: PriFedSync's personalized helper models (Algorithm 1, eq. 2.1) */
    double helper_alpha;          /* alpha of h_i = (1 - alpha) w_i + alpha w_global */
    double target_accuracy;       /* the first round whose mean accuracy reaches this is reported */
} dpfl_fl_config;

typedef struct {                  /* [record_dp]: DP-SGD inside every client (record-level DP) */
    int enabled;
    double clip;                  /* C: per-example L2 clip (inf allowed only with noise 0: non-private check) */
    double noise;                 /* z: noise std / sensitivity (C for add-remove, 2C for replace-one); 0 = calibrate */
    double target_epsilon;        /* > 0: calibrate z (noise = 0) or stop before exceeding it (noise > 0) */
    double delta;
    dpfl_batch_sampler sampler;   /* poisson (add-remove) | fixed (replace-one) */
    dpfl_accountant accountant;   /* rdp | pld */
    dpfl_record_adjacency adjacency; /* auto | add-remove | replace-one: must match the sampler */
    int per_layer;
    int e2e;                      /* also report the client-level guarantee of the same noise */
    int secure_mode;              /* exact discrete-Gaussian noise on a fine grid (slower) */
    /* rPDP-FL: a budget per record (budgets != none): non-uniform Poisson sampling, per-record ledger */
    dpfl_budget_source budgets;
    char budget_file[512];        /* budgets = file: one epsilon per training record, in the dataset's order */
    char class_budgets[256];      /* budgets = class: "E0,E1,..." one epsilon per class */
    double budget_min, budget_max; /* generated budgets are clipped to [min, max]; z meets budget_max at p = 1 */
    int budget_shuffle;           /* threelevels: shuffle (yes) or the published record order (no) */
    dpfl_budget_policy budget_policy; /* rpdp | minimum | dropout (the paper's baselines) | filter (Feldman-Zrnic) */
    double filter_order;          /* budget_policy = filter: the RDP order alpha of the individual filter (0 = auto) */
    int two_stage_bound;          /* 0: the published two-stage bound (joint convexity); 1: the two-stage PLD */
    int32_t budget_rounds;        /* rounds the rates are planned for (0 = fl.rounds); kept across resumes */
} dpfl_record_dp_config;

typedef struct {                  /* [client_dp]: server-side clipping and noise on client updates (DP-FedAvg) */
    int enabled;
    double clip;                  /* S: L2 bound on each client's update (initial value for adaptive) */
    dpfl_clip_strategy clip_strategy; /* median: NOT private */
    double noise;                 /* z: noise std / S on the sum of updates; 0 = calibrate from target_epsilon */
    double target_epsilon;        /* > 0: calibrate z (noise = 0) or stop before exceeding it */
    double delta;
    dpfl_accountant accountant;   /* rdp | pld */
    double target_quantile;       /* adaptive: gamma */
    double clip_lr;               /* adaptive: eta_S (geometric update) */
    double quantile_noise;        /* adaptive: sigma_b on the count of unclipped updates; 0 = expected m / 20 */
    double dropout;               /* probability that a sampled client fails to reply (simulation) */
    char noise_schedule[128];     /* "ROUND:Z, ..." overrides noise from each round on */
    int per_layer;
    /* mechanism = ddp: distributed DP (include/dpfl/ddp.h): each client clips, rounds and adds Skellam noise to
     * its own update; the server learns only the secure-aggregation sum */
    int mechanism;                /* 0 gaussian (the server adds the noise), 1 ddp */
    int32_t ddp_bits;             /* modulus 2^bits of the secure sum (0 = the smallest with overflow <= 1e-9) */
    double ddp_inflation;         /* the integer grid's step: rounding may add this share to the L2 sensitivity */
    double ddp_tolerated_dropout; /* secure aggregation threshold t = ceil((1 - f) n): rounds with fewer survivors
                                     release nothing; each client adds variance mu / t */
    int ddp_secagg;               /* run the secure aggregation protocol in process (no: add the wrapped vectors
                                     directly; the same sum, for speed) */
} dpfl_client_dp_config;

typedef struct {                  /* [run] */
    char seed[24];                /* "" = OS entropy (deployment); a number = reproducible mode, not for deployment */
    int allow_large_delta;        /* accept delta >= 1/n (records) or 1/K (clients) */
    int32_t threads;
    int32_t eval_every;
} dpfl_run_config;

typedef struct {
    dpfl_data_config data;
    dpfl_model_config model;
    dpfl_fl_config fl;
    dpfl_record_dp_config record_dp;
    dpfl_client_dp_config client_dp;
    dpfl_run_config run;
    /* which keys the user set (in the file or by --set), for dpfl_config_check_ignored; not a setting */
    unsigned char user_set[96];
} dpfl_config;

/* The name of a choice key's current value, e.g. dpfl_config_choice(c, "fl.sampling") -> "poisson". */
const char *dpfl_config_choice(const dpfl_config *c, const char *section_key);
void dpfl_config_defaults(dpfl_config *c);
/* Load an INI file over the defaults. Unknown sections or keys and bad values fail naming file:line, the key
 * and the valid choices or range. */
dpfl_status dpfl_config_load(dpfl_config *c, const char *path, dpfl_error *err);
/* Apply one "section.key=value" override (same validation). */
dpfl_status dpfl_config_set(dpfl_config *c, const char *assignment, dpfl_error *err);
/* The model spec of [model]: arch, behind the input transform when transform = affine ("transform-cp:arch"). */
void dpfl_config_model_spec(const dpfl_config *c, char *out, size_t cap);
/* The [data] section's training and test sets (src/fl/config_data.c): the named dataset, or your own csv:/idx:
 * files with the section's column, header, missing-value and test-set keys; then data.normalize (published
 * constants, or data.feature_mean / feature_std for your own data).  seed draws the held-out test rows. */
dpfl_status dpfl_config_load_data(const dpfl_config *cfg, uint64_t seed, dpfl_dataset *train, dpfl_dataset *test,
                                  dpfl_error *err);
/* The partition the [data] section asks for (partition, clients and that partition's parameters), for
 * dpfl_partition_make; every other field zero. */
void dpfl_config_partition_spec(const dpfl_config *cfg, dpfl_partition_spec *sp);
/* Cross-key checks (e.g. clients_per_round <= clients, batch >= 1). */
dpfl_status dpfl_config_validate(const dpfl_config *c, dpfl_error *err);
/* Refuse keys the user set that this run would silently ignore: any [record_dp] or [client_dp] key while that
 * section is not enabled (a run the user believes private would not be), client_rate with sampling != poisson,
 * clients_per_round with sampling != fixed, adaptive-clipping keys without clip_strategy = adaptive, partition
 * parameters of another partition, momentum with Adam, schedule parameters that do not apply, local_epochs with
 * local_steps.  One line naming the key and the fix.  dpfl_run calls it for new runs (not for a resume, whose
 * config.ini lists every key). */
dpfl_status dpfl_config_check_ignored(const dpfl_config *c, dpfl_error *err);
/* The resolved config as INI text (every key), malloc'd. */
char *dpfl_config_to_ini(const dpfl_config *c);
/* One line per key with its range or choices, for --help. */
void dpfl_config_print_keys(FILE *f);

/* Schedules: "ROUND:VALUE, ..." piecewise constant from each listed round on; the first entry is round 1. */
#define DPFL_SCHEDULE_MAX 32
typedef struct {
    int n;
    int32_t round[DPFL_SCHEDULE_MAX];
    double value[DPFL_SCHEDULE_MAX];
} dpfl_schedule;
dpfl_status dpfl_schedule_parse(const char *text, const char *key, dpfl_schedule *out, dpfl_error *err);
double dpfl_schedule_at(const dpfl_schedule *s, int32_t round, double fallback);
/* The values in force in a round (schedule or the constant key). */
double dpfl_round_client_rate(const dpfl_config *c, int32_t round);
int32_t dpfl_round_clients_per_round(const dpfl_config *c, int32_t round);
double dpfl_round_client_noise(const dpfl_config *c, int32_t round, double z);

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
/* Local steps client k takes when it participates (what the ledger charges). */
int64_t dpfl_sim_client_steps(const dpfl_sim *s, int32_t k);
/* Replace the record-level noise multiplier (after calibration). */
void dpfl_sim_set_record_noise(dpfl_sim *s, double z);
/* rPDP-FL: record i (training-set index) is sampled with probability p[i] at every local step, and client k's
 * noisy clipped sum is divided by client_denom[k] (its expected batch).  Both arrays stay the caller's and are
 * read during training (p may change between rounds: opt-outs).  Needs the Poisson sampler. */
void dpfl_sim_set_record_rates(dpfl_sim *s, double *p, const double *client_denom);
/* budget_policy = filter, after set_record_rates: spent[i] (updated in place) is record i's Renyi loss at order
 * alpha so far, cap[i] its filter budget; the sampler's p[i] becomes 0 once less than DPFL_FILTER_OUT cap[i] is
 * left. */
#define DPFL_FILTER_OUT 1e-4
void dpfl_sim_set_record_filter(dpfl_sim *s, double *spent, const double *cap, double alpha);
/* Client-level noise multiplier z of the round's whole release (adaptive clipping splits it between the update
 * sum and the quantile estimate; an error if the quantile noise in force at `round` leaves nothing for the sum). */
dpfl_status dpfl_sim_set_client_noise(dpfl_sim *s, int32_t round, double z, dpfl_error *err);
/* The multiplier of the release as configured now, recomputed from the noises actually drawn: z_Delta of the
 * update sum and, with adaptive clipping, sigma_b of the quantile count.  This is what the ledger is charged. */
double dpfl_sim_client_release_noise(const dpfl_sim *s);
/* Adaptive clipping: sigma_b of the centred count (0 otherwise); z_Delta (the update sum's multiplier). */
double dpfl_sim_quantile_noise(const dpfl_sim *s);
double dpfl_sim_update_noise(const dpfl_sim *s);
/* client_dp.mechanism = ddp: the plan in force (NULL otherwise, or before the noise is set). */
const dpfl_ddp_plan *dpfl_sim_ddp_plan(const dpfl_sim *s);
/* The current update clip S (adaptive clipping changes it every round; checkpoints save it). */
double dpfl_sim_update_clip(const dpfl_sim *s);
void dpfl_sim_set_update_clip(dpfl_sim *s, double S);
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
/* fl.personalization = helper: the model client k uses, h_k (Algorithm 1 of PriFedSync): the initial model w0 until
 * the client first syncs; after each sync (1 - alpha) w~_k + alpha w_global, w~_k its freshly trained local model
 * and w_global the new global model.  A client keeps it across the rounds it sits out and trains from it. */
const float *dpfl_sim_helper_model(const dpfl_sim *s, int32_t k);
/* Per-client state, for checkpoints: with fl.personalization = helper the helper model (P floats), then with
 * fl.client_state = keep the local optimizer state (momentum, or Adam m then v: 0 for plain SGD); and a step count
 * t.  One client's state is dpfl_sim_client_state_floats floats.  dpfl_sim_keeps_client_state is 0 when neither
 * is on (then no client has a state).  The helper models need w0 too: dpfl_sim_initial_model (NULL without). */
int dpfl_sim_keeps_client_state(const dpfl_sim *s);
size_t dpfl_sim_client_state_floats(const dpfl_sim *s);
/* Client k's step count t (0: it has not trained yet and has no state); *state gets its floats (NULL if none). */
int64_t dpfl_sim_client_state(const dpfl_sim *s, int32_t k, const float **state);
/* Restore client k's state (t > 0; state holds dpfl_sim_client_state_floats floats). */
dpfl_status dpfl_sim_set_client_state(dpfl_sim *s, int32_t k, int64_t t, const float *state, dpfl_error *err);
const float *dpfl_sim_initial_model(const dpfl_sim *s);
void dpfl_sim_set_initial_model(dpfl_sim *s, const float *w0);

/* Auditing (dpfl audit): fn sees every client update the server receives, as it arrives (before any client-level
 * clipping), in client order; NULL removes it.  The update is the server's view of what record-level DP protects. */
typedef void (*dpfl_sim_update_fn)(void *ctx, int32_t round, int32_t client, const float *update, size_t P);
void dpfl_sim_set_update_observer(dpfl_sim *s, dpfl_sim_update_fn fn, void *ctx);

/* Clients that trained in the last round and their mean local training loss (over their local steps); returns
 * how many (clients[], losses[] hold at least the sampled count). */
int32_t dpfl_sim_client_losses(const dpfl_sim *s, int32_t *clients, double *losses);

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

/* The simulation owns its ledger: dpfl_sim_train charges every round it trains (the sampled clients' local steps,
 * and with client-level DP the round's event at the multiplier actually drawn), so a library caller gets epsilon
 * without filling anything by hand.  dpfl_sim_charge charges the round sampled last onto any ledger (the run driver
 * charges a copy first, to check a budget before training); dpfl_sim_record_accounting is the record-level
 * mechanism the simulation runs; dpfl_sim_epsilon the guarantees of its ledger (record may be NULL; client_eps may
 * be NULL; *client_private = 0 and client_eps = inf for median clipping). */
dpfl_status dpfl_sim_charge(const dpfl_sim *s, dpfl_ledger *l, dpfl_error *err);
const dpfl_ledger *dpfl_sim_ledger(const dpfl_sim *s);
dpfl_status dpfl_sim_restore_ledger(dpfl_sim *s, const dpfl_ledger *l, dpfl_error *err);
dpfl_record_accounting dpfl_sim_record_accounting(const dpfl_sim *s);
dpfl_status dpfl_sim_epsilon(const dpfl_sim *s, dpfl_record_report *record, double *client_eps, int *client_private,
                             dpfl_error *err);

/* ------------------------------------------------------------------------------------------ run driver */
typedef struct {
    const char *out_dir; /* created if absent */
    int quiet;           /* no progress line */
    int resume;          /* continue from out_dir/checkpoint.bin */
    int force;           /* replace a previous run in out_dir (its files are removed first); without it (or resume)
                            a non-empty out_dir is an error */
} dpfl_run_options;

/* Everything `dpfl train` does after parsing: load data, partition, train, write the run directory. */
dpfl_status dpfl_run(const dpfl_config *cfg, const dpfl_run_options *opt, dpfl_error *err);

#endif
