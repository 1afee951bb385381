/* dpfl config: the experiment configuration -- one typed struct per INI section, read and checked once
 * (src/config: the key table with every key's type, default and ignored-key rule), and the values in force in a
 * round (schedules).  Below the simulation: it sees the mechanisms' and accountants' enums, never a model or a run. */
#ifndef DPFL_CONFIG_H
#define DPFL_CONFIG_H

#include "dpfl/core.h"
#include "dpfl/data.h"
#include "dpfl/nn.h"
#include "dpfl/optim.h"
#include "dpfl/mech.h"
#include "dpfl/privacy.h"
#include "dpfl/ddp.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* ------------------------------------------------------------------------------------------ configuration */
/* The configuration, parsed once (dpfl_config_load / dpfl_config_set) into one typed struct per INI section: every
 * key is typed when it is read -- choices are enums (their values are the positions in the key's list of choices),
 * yes/no keys are 0/1, run.seed an integer, schedules, number lists and fl.personal arrays, data.dataset its kind
 * and list of files -- so that a bad value fails there, naming the key, and no consumer parses text.  Only paths,
 * file specs (kept whole for the data module), column names and model specs stay strings.
 * The layers below take their own section or plain numbers.  Noise multipliers follow one convention at both levels: z =
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
/* rounds with client rate lambda: the published RDP bound (joint convexity) or the PLD of the two-stage round */
typedef enum { DPFL_TWO_STAGE_PUBLISHED = 0, DPFL_TWO_STAGE_PLD } dpfl_two_stage_accounting;
/* client_dp.mechanism: the server adds the noise, or distributed DP (include/dpfl/ddp.h) */
typedef enum { DPFL_CLIENT_MECH_GAUSSIAN = 0, DPFL_CLIENT_MECH_DDP } dpfl_client_mechanism;
/* model.transform: PrivateFL's per-client input transform a (.) x + b, or that function of it */
typedef enum {
    DPFL_TRANSFORM_NONE = 0, DPFL_TRANSFORM_AFFINE, DPFL_TRANSFORM_SIGMOID, DPFL_TRANSFORM_TANH, DPFL_TRANSFORM_RELU
} dpfl_input_transform;
/* csv: does the first line name the columns; a row with a missing value fails the load or is dropped */
typedef enum { DPFL_HEADER_AUTO = 0, DPFL_HEADER_YES, DPFL_HEADER_NO } dpfl_csv_header;
typedef enum { DPFL_MISSING_ERROR = 0, DPFL_MISSING_DROP } dpfl_csv_missing;
/* run.emd: PrivateFL's EMD diagnostic -- auto computes it when model.transform is on */
typedef enum { DPFL_EMD_AUTO = 0, DPFL_EMD_NO, DPFL_EMD_YES } dpfl_emd_diagnostic;

/* Schedules: "ROUND:VALUE, ..." piecewise constant from each listed round on; the first entry is round 1 (n = 0:
 * no schedule, the constant key applies).  Parsed when the key is read. */
#define DPFL_SCHEDULE_MAX 32
typedef struct {
    int n;
    int32_t round[DPFL_SCHEDULE_MAX];
    double value[DPFL_SCHEDULE_MAX];
} dpfl_schedule;

/* A comma-separated list of numbers, parsed when the key is read (n = 0: empty); at most DPFL_NUMBER_LIST_MAX
 * values (config lines themselves have no length limit). */
#define DPFL_NUMBER_LIST_MAX 1024
typedef struct {
    int32_t n;
    double v[DPFL_NUMBER_LIST_MAX];
} dpfl_number_list;

/* fl.personal: the layers whose parameters stay with each client, parsed when the key is read ("norm, head, 3"):
 * norm (every GroupNorm layer), head (the last layer with parameters) or a 0-based position in model.arch (below
 * 10^6).  src/fl/personal.c resolves them against the model.  The value is at most DPFL_PERSONAL_TEXT_MAX
 * characters, so at most DPFL_PERSONAL_MAX items; n = 0: none. */
typedef enum { DPFL_PERSONAL_POSITION = 0, DPFL_PERSONAL_NORM, DPFL_PERSONAL_HEAD } dpfl_personal_kind;
#define DPFL_PERSONAL_TEXT_MAX 63
#define DPFL_PERSONAL_MAX 32
typedef struct {
    dpfl_personal_kind kind;
    int32_t position; /* kind = position: the layer's 0-based position in model.arch */
} dpfl_personal_layer;
typedef struct {
    int32_t n;
    dpfl_personal_layer item[DPFL_PERSONAL_MAX];
} dpfl_personal_layers;

/* run.seed: given = 0 draws the root seed from the OS (deployment); given = 1 is reproducible mode (not for
 * deployment) with that value. */
typedef struct {
    int given;
    uint64_t value;
} dpfl_seed;

/* data.dataset, typed when the key is read: a named dataset (the positions of the key's choices), your own files
 * (csv:, idx:, npy: specs) or a program's arrays (memory:NAME, the Python binding). */
typedef enum {
    DPFL_DATASET_MNIST = 0, DPFL_DATASET_FASHION_MNIST, DPFL_DATASET_HEART, DPFL_DATASET_SYNTHETIC,
    DPFL_DATASET_CIFAR10, DPFL_DATASET_CIFAR100, DPFL_DATASET_EMNIST_BALANCED, DPFL_DATASET_EMNIST_BYCLASS,
    DPFL_DATASET_EMNIST_BYMERGE, DPFL_DATASET_EMNIST_DIGITS, DPFL_DATASET_EMNIST_LETTERS, DPFL_DATASET_EMNIST_MNIST,
    DPFL_DATASET_CSV, DPFL_DATASET_IDX, DPFL_DATASET_NPY, DPFL_DATASET_MEMORY
} dpfl_dataset_kind;
#define DPFL_DATASET_SPEC 16384 /* data.dataset's text, with its '\0' */
/* The entries of your own files' list, "csv:a.csv, b.csv": the comma-separated items after the prefix as written
 * (blanks kept: the data module trims them; an empty item after a last comma is none), each a file, a folder or a
 * glob pattern, which the data module expands into sources.  entry holds them one after another, each ended by
 * '\0' ("a.csv\0 b.csv\0"). */
typedef struct {
    int32_t n;
    int patterns;                 /* some entry is a glob pattern (holds *, ? or [) */
    char entry[DPFL_DATASET_SPEC];
} dpfl_dataset_files;

typedef struct {                  /* [data] */
    char dataset[DPFL_DATASET_SPEC]; /* mnist | fashion-mnist | heart | synthetic | csv:FILES | idx:FILES ... */
    dpfl_dataset_kind kind;       /* typed with dataset by the config's setters (a caller who writes dataset into
                                     the struct by hand leaves them stale: dpfl_config_validate refuses that) */
    dpfl_dataset_files files;     /* kind = csv, idx, npy: the list's entries (n = 0 otherwise) */
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
    char feature_columns[4096];     /* csv: names or indices; "" every other column */
    dpfl_csv_header header;
    dpfl_csv_missing missing;
    char test[16384];             /* a separate test set (csv: / idx:), "" none */
    double test_fraction;         /* held out of each source without a separate test set */
    dpfl_number_list feature_mean; /* normalize = standard with own data: public constants, 1 or one per feature */
    dpfl_number_list feature_std;
    dpfl_number_list source_rows; /* csv: usable rows per listed file (whole numbers >= 1); lets a process lack the
                                     others' files */
    int32_t classes;              /* own data: number of classes (0: the largest label + 1) */
} dpfl_data_config;

typedef struct {                  /* [model] */
    char arch[128];
    dpfl_input_transform transform; /* PrivateFL: a private input transform per client in front of arch */
    char transform_shape[8];      /* its a and b: two of n (none), c (per channel), p (per pixel); "cp" the paper's */
} dpfl_model_config;

/* [fl] algorithm: a preset that expands into ordinary settings when it is read (keys the user sets, before or
 * after it, win); custom = none. */
typedef enum {
    DPFL_ALGO_CUSTOM = 0, DPFL_ALGO_FEDAVG, DPFL_ALGO_DP_FEDAVG, DPFL_ALGO_DP_FEDAVG_ADAPTIVE, DPFL_ALGO_DP_SGD,
    DPFL_ALGO_E2E, DPFL_ALGO_PRIFEDSYNC, DPFL_ALGO_TRUSTED_CURATOR, DPFL_ALGO_NAIVE_E2E
} dpfl_algorithm;

typedef struct {                  /* [fl] */
    dpfl_algorithm algorithm;
    int32_t rounds;
    dpfl_client_sampling sampling;
    double client_rate;
    int32_t clients_per_round;
    int32_t participations;       /* sampling = cross-device: the rounds each client takes part in */
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
    dpfl_schedule client_rate_schedule;       /* "ROUND:P, ..." overrides client_rate from each round on */
    dpfl_schedule clients_per_round_schedule; /* "ROUND:M, ..." overrides clients_per_round */
    dpfl_weighting weighting;
    dpfl_client_state client_state; /* optimizer state (momentum, Adam m, v, t) reset or kept per client */
    int32_t client_state_max_mb;  /* MiB of per-client state (optimizer state kept, helper models) held in memory;
                                     above it, blocks of clients the round does not train page out to their files */
    dpfl_personalization personalization; /* helper: PriFedSync's personalized helper models (Algorithm 1, eq. 2.1) */
    double helper_alpha;          /* alpha of h_i = (1 - alpha) w_i + alpha w_global */
    /* parameters that stay with each client, never sent nor aggregated (FedBN / FedGN, PP-SGD): none (n = 0), or
     * norm (every GroupNorm layer), head (the last layer with parameters), layer positions in model.arch */
    dpfl_personal_layers personal;
    int scaffold;                 /* DP-SCAFFOLD (Noble et al. 2022): control variates, record-level DP only */
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
    dpfl_number_list class_budgets; /* budgets = class: "E0,E1,..." one epsilon (> 0) per class */
    double budget_min, budget_max; /* generated budgets are clipped to [min, max]; z meets budget_max at p = 1 */
    int budget_shuffle;           /* threelevels: shuffle (yes) or the published record order (no) */
    dpfl_budget_policy budget_policy; /* rpdp | minimum | dropout (the paper's baselines) | filter (Feldman-Zrnic) */
    double filter_order;          /* budget_policy = filter: the RDP order alpha of the individual filter (0 = auto) */
    dpfl_two_stage_accounting two_stage_bound;
    int32_t budget_rounds;        /* rounds the rates are planned for (0 = fl.rounds); kept across resumes */
    /* the thesis's Algorithm 6: round t clips to max(clip (1 - clip_decay)^(t-1), clip_min), a public schedule
     * (dpfl_round_record_clip); the noise std follows z C_t, the accounting (z alone) is unchanged */
    double clip_decay;            /* in [0, 1); 0 = a constant clip */
    double clip_min;              /* the floor C_min (0: none) */
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
    dpfl_schedule noise_schedule; /* "ROUND:Z, ..." overrides noise from each round on */
    int per_layer;
    /* mechanism = ddp: distributed DP (include/dpfl/ddp.h): each client clips, rounds and adds Skellam noise to
     * its own update; the server learns only the secure-aggregation sum */
    dpfl_client_mechanism mechanism;
    int32_t ddp_bits;             /* modulus 2^bits of the secure sum (0 = the smallest with overflow <= 1e-9) */
    double ddp_inflation;         /* the integer grid's step: rounding may add this share to the L2 sensitivity */
    double ddp_tolerated_dropout; /* secure aggregation threshold t = ceil((1 - f) n): rounds with fewer survivors
                                     release nothing; each client adds variance mu / t */
    int ddp_secagg;               /* run the secure aggregation protocol in process (no: add the wrapped vectors
                                     directly; the same sum, for speed) */
} dpfl_client_dp_config;

typedef struct {                  /* [run] */
    dpfl_seed seed;
    int allow_large_delta;        /* accept delta >= 1/n (records) or 1/K (clients) */
    int32_t threads;
    int32_t eval_every;
    dpfl_emd_diagnostic emd;      /* PrivateFL's EMD diagnostic: auto (with model.transform), no, yes */
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
/* Every key's default, from the key table (src/config/config_keys.c: the one place defaults are written). */
void dpfl_config_defaults(dpfl_config *c);
/* Load an INI file over the defaults (lines of any length; a value may continue on the following lines that start
 * with a blank).  Unknown sections or keys, a key set twice and bad values fail naming file:line, the key and the
 * valid choices or range. */
dpfl_status dpfl_config_load(dpfl_config *c, const char *path, dpfl_error *err);
/* Apply one "section.key=value" override (same validation).
 * The command line wins over the file: a key the file set that this override makes inapplicable -- its section
 * switched off (record_dp.enabled=no), or e.g. fl.local_epochs once fl.local_steps > 0 -- goes back to its default
 * and is no longer the user's; keys set by two overrides that conflict are still refused by
 * dpfl_config_check_ignored.  dpfl_config_set_noted also writes into note (note_cap bytes; "" when none) one line
 * naming the keys it dropped. */
dpfl_status dpfl_config_set(dpfl_config *c, const char *assignment, dpfl_error *err);
dpfl_status dpfl_config_set_noted(dpfl_config *c, const char *assignment, char *note, size_t note_cap,
                                  dpfl_error *err);
/* "section.key" back to its default, as if the file had not set it; "section": every key of it (fl.algorithm, a
 * preset already expanded, is refused / kept).  The command line's --unset, applied after the file and before any
 * --set. */
dpfl_status dpfl_config_unset(dpfl_config *c, const char *name, dpfl_error *err);
/* The model spec of [model]: arch, behind the input transform when transform = affine ("transform-cp:arch"). */
void dpfl_config_model_spec(const dpfl_config *c, char *out, size_t cap);
/* The [data] section's training and test sets (src/config/config_data.c): the named dataset, or your own csv:/idx:
 * files with the section's column, header, missing-value and test-set keys; then data.normalize (published
 * constants, or data.feature_mean / feature_std for your own data).  seed draws the held-out test rows. */
dpfl_status dpfl_config_load_data(const dpfl_config *cfg, uint64_t seed, dpfl_dataset *train, dpfl_dataset *test,
                                  dpfl_error *err);
/* The standardization dpfl_config_load_data gives examples of c x h x w values (as model.bin records it): n = 0
 * for data.normalize = none, else the published constants (1 pair, or 1 per channel) or data.feature_mean /
 * feature_std (1 pair, or 1 per value when either lists one per feature).  Free with
 * dpfl_input_standardization_free. */
dpfl_status dpfl_config_input_standardization(const dpfl_config *cfg, int32_t c, int32_t h, int32_t w,
                                              dpfl_input_standardization *s, dpfl_error *err);
/* Entry k of data.dataset's list of files (kind csv, idx or npy) replaced by path, as one entry, and the list typed
 * again (join --data: a site's own file, wherever it is).  Errors start with `who`: no entry k, a list too long. */
dpfl_status dpfl_config_replace_dataset_file(dpfl_config *c, int32_t k, const char *path, const char *who,
                                             dpfl_error *err);
/* 1 for data.dataset = your own files or a program's arrays (csv:, idx:, npy:, memory:) */
int dpfl_config_own_data(const dpfl_config *c);
/* With partition = natural and data.dataset = csv:FILES, a data.clients the user did not set is the number of
 * files (one client per file): *inferred = 1 when that changed it.  A no-op otherwise. */
dpfl_status dpfl_config_infer_clients(dpfl_config *c, int *inferred, dpfl_error *err);
/* 1, with a one-line warning in msg, when your own CSV features are far from unit scale (some feature's root mean
 * square above 10 over the training rows here) while data.normalize = none: such runs tend to train to chance. */
int dpfl_config_scale_hint(const dpfl_config *c, const dpfl_dataset *train, char *msg, size_t cap);
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
/* One line per key with its meaning, range or choices, and default, for --help. */
void dpfl_config_print_keys(FILE *f);

/* Parse a schedule (errors name `key`, e.g. "fl.client_rate_schedule (--set)"); the value in force in a round. */
dpfl_status dpfl_schedule_parse(const char *text, const char *key, dpfl_schedule *out, dpfl_error *err);
double dpfl_schedule_at(const dpfl_schedule *s, int32_t round, double fallback);
/* The values in force in a round (schedule or the constant key). */
double dpfl_round_client_rate(const dpfl_config *c, int32_t round);
int32_t dpfl_round_clients_per_round(const dpfl_config *c, int32_t round);
double dpfl_round_client_noise(const dpfl_config *c, int32_t round, double z);
/* The per-example clip C_t of round t (from 1): record_dp.clip decayed by clip_decay per round, floored at clip_min
 * (exactly record_dp.clip without decay). */
double dpfl_round_record_clip(const dpfl_config *c, int32_t round);
/* The thesis's baselines (fl.algorithm = trusted-curator or naive-e2e): one line saying whom the run's epsilons
 * cover -- the trusted curator's client-level number holds against observers of the released models, not against
 * the server that sees every raw update.  NULL for other settings, or once keys set by hand turned the preset into
 * another mechanism (record: record-level DP ran; client: a client-level guarantee was reported). */
const char *dpfl_config_preset_scope(const dpfl_config *c, int record, int client);

#pragma GCC visibility pop

#endif
