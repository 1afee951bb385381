/* The experiment configuration: one table of keys (type, range or choices, help) drives INI parsing, --set
 * overrides, validation messages, --help and the resolved config written to the run directory. */
#include "dpfl/fl.h"

#include <errno.h>
#include <ini.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef enum { K_INT, K_DOUBLE, K_STR, K_CHOICE, K_NAME } ktype; /* K_CHOICE: int (position in choices); K_NAME: a string from choices */

typedef struct {
    const char *section, *key;
    ktype type;
    size_t off, size;
    double lo, hi;       /* inclusive range for numbers */
    const char *choices; /* "a|b|c" for K_CHOICE */
    const char *help;
} keydef;

#define F(field) offsetof(dpfl_config, field), sizeof(((dpfl_config *)0)->field)
static const keydef keys[] = {
    {"data", "dataset", K_NAME, F(data.dataset), 0, 0, "mnist|fashion-mnist|heart|synthetic", "dataset, or your own files: csv:FILES (files, folders, glob patterns; one source per file) or idx:FOLDER / idx:IMAGES,LABELS"},
    {"data", "partition", K_CHOICE, F(data.partition), 0, 0, "iid|shards|dirichlet|classes|natural", "how the training set is split into clients"},
    {"data", "clients", K_INT, F(data.clients), 1, 1000000, NULL, "number of clients"},
    {"data", "shards", K_INT, F(data.shards), 1, 100000, NULL, "shards per client (partition = shards)"},
    {"data", "beta", K_DOUBLE, F(data.beta), 1e-6, 1e6, NULL, "Dirichlet concentration (partition = dirichlet)"},
    {"data", "classes_per_client", K_INT, F(data.classes_per_client), 1, 1000, NULL, "classes per client (partition = classes)"},
    {"data", "samples_per_client", K_INT, F(data.samples_per_client), 0, 100000000, NULL, "replicate to exactly this many examples per client (0 = split the data)"},
    {"data", "test_per_client", K_INT, F(data.test_per_client), 0, 100000000, NULL, "per-client test set drawn from the test set (any partition but natural)"},
    {"data", "normalize", K_CHOICE, F(data.normalize), 0, 0, "none|standard", "standardize pixels with the dataset's published mean/std (not computed from the private data)"},
    {"data", "label_column", K_STR, F(data.label_column), 0, 0, NULL, "csv: the label column, a header name or a 0-based index (negative from the end); empty: the last"},
    {"data", "feature_columns", K_STR, F(data.feature_columns), 0, 0, NULL, "csv: comma-separated names or indices of the feature columns; empty: every other column"},
    {"data", "header", K_CHOICE, F(data.header), 0, 0, "auto|yes|no", "csv: does the first line name the columns (auto: yes when it holds a field that is not a number)"},
    {"data", "missing", K_CHOICE, F(data.missing), 0, 0, "error|drop", "csv: a row with a missing label or feature (empty, ?, NA, NaN, null) fails the load, or is dropped"},
    {"data", "test", K_STR, F(data.test), 0, 0, NULL, "own data: a separate test set, csv:FILES or idx:FILES (empty: hold out test_fraction of each file)"},
    {"data", "test_fraction", K_DOUBLE, F(data.test_fraction), 0.0, 0.95, NULL, "own data: share of each file held out as test set by a seeded shuffle (no separate test set)"},
    {"data", "feature_mean", K_STR, F(data.feature_mean), 0, 0, NULL, "own data, normalize = standard: public constants (1 value, or one per feature), never computed from the private data"},
    {"data", "feature_std", K_STR, F(data.feature_std), 0, 0, NULL, "own data, normalize = standard: public constants (1 value, or one per feature)"},
    {"data", "source_rows", K_STR, F(data.source_rows), 0, 0, NULL, "own data: the usable rows (images) of each listed file (idx: folder); with them a process may lack the other sites' files (a deployment: dpfl serve needs none, dpfl join --client K only file K)"},
    {"data", "classes", K_INT, F(data.classes), 0, 65536, NULL, "own data: the number of classes (0: the largest label + 1); needed with files absent"},
    {"data", "data_dir", K_STR, F(data.data_dir), 0, 0, NULL, "folder holding mnist/ (empty: $DPFL_DATA/cache, else $XDG_CACHE_HOME/dpfl or ~/.cache/dpfl)"},
    {"model", "arch", K_STR, F(model.arch), 0, 0, NULL, "logreg | mlp:784-600-100-10[:nobias] | cnn-mnist | cnn-mcmahan | cnn-small"},
    {"model", "transform", K_CHOICE, F(model.transform), 0, 0, "none|affine|sigmoid|tanh|relu", "PrivateFL: each client's own input transform a (.) x + b, trained with the model, never sent; sigmoid, tanh, relu: that function of a (.) x + b (the paper's Table 1 ablation)"},
    {"model", "transform_shape", K_STR, F(model.transform_shape), 0, 0, NULL, "a and b of the transform: two of n (none), c (per channel), p (per pixel); cp = the paper's"},
    {"fl", "algorithm", K_CHOICE, F(fl.algorithm), 0, 0, "custom|fedavg|dp-fedavg|dp-fedavg-adaptive|dp-sgd|e2e|prifedsync", "a preset: expands into the settings below (keys you set win)"},
    {"fl", "rounds", K_INT, F(fl.rounds), 1, 100000000, NULL, "communication rounds"},
    {"fl", "sampling", K_CHOICE, F(fl.sampling), 0, 0, "poisson|fixed|all", "client sampling per round"},
    {"fl", "client_rate", K_DOUBLE, F(fl.client_rate), 0, 1, NULL, "Poisson client sampling probability"},
    {"fl", "clients_per_round", K_INT, F(fl.clients_per_round), 1, 1000000, NULL, "clients per round (sampling = fixed)"},
    {"fl", "local_epochs", K_INT, F(fl.local_epochs), 0, 100000, NULL, "local epochs per round (when local_steps = 0)"},
    {"fl", "local_steps", K_INT, F(fl.local_steps), 0, 100000000, NULL, "local steps per round (0 = use local_epochs)"},
    {"fl", "batch", K_INT, F(fl.batch), 1, 1000000, NULL, "local batch size"},
    {"fl", "lr", K_DOUBLE, F(fl.lr), 0, 1e6, NULL, "local learning rate"},
    {"fl", "optimizer", K_CHOICE, F(fl.optimizer), 0, 0, "sgd|adam|adamw", "local optimizer"},
    {"fl", "momentum", K_DOUBLE, F(fl.momentum), 0, 1, NULL, "SGD momentum"},
    {"fl", "weight_decay", K_DOUBLE, F(fl.weight_decay), 0, 1e3, NULL, "weight decay"},
    {"fl", "schedule", K_CHOICE, F(fl.schedule), 0, 0, "constant|step|exp", "learning-rate schedule over rounds"},
    {"fl", "lr_gamma", K_DOUBLE, F(fl.lr_gamma), 0, 1e3, NULL, "schedule factor"},
    {"fl", "lr_step", K_INT, F(fl.lr_step), 1, 100000000, NULL, "rounds between steps (schedule = step)"},
    {"fl", "eta", K_DOUBLE, F(fl.eta), 0, 10, NULL, "server mixing rate"},
    {"fl", "client_rate_schedule", K_STR, F(fl.client_rate_schedule), 0, 0, NULL, "ROUND:P, ... client_rate from each round on"},
    {"fl", "clients_per_round_schedule", K_STR, F(fl.clients_per_round_schedule), 0, 0, NULL, "ROUND:M, ... clients_per_round from each round on"},
    {"fl", "weighting", K_CHOICE, F(fl.weighting), 0, 0, "size|uniform", "FedAvg weights: client size or uniform"},
    {"fl", "client_state", K_CHOICE, F(fl.client_state), 0, 0, "reset|keep", "local optimizer state (momentum, Adam moments and step count): fresh each round, or kept per client across its rounds"},
    {"fl", "client_state_max_mb", K_INT, F(fl.client_state_max_mb), 1, 1 << 30, NULL, "largest total per-client state (kept optimizer state, helper models; clients x per-client MiB) a run may need"},
    {"fl", "personalization", K_CHOICE, F(fl.personalization), 0, 0, "none|helper", "helper: each client keeps and uses its own helper model (1 - helper_alpha) w_i + helper_alpha w_global (PriFedSync)"},
    {"fl", "helper_alpha", K_DOUBLE, F(fl.helper_alpha), 0, 1, NULL, "personalization = helper: weight of the global model in a client's helper model"},
    {"fl", "target_accuracy", K_DOUBLE, F(fl.target_accuracy), 0, 1, NULL, "summary.json reports the first evaluated round whose mean accuracy reaches this"},
    {"record_dp", "enabled", K_CHOICE, F(record_dp.enabled), 0, 0, "no|yes", "DP-SGD inside every client"},
    {"record_dp", "clip", K_DOUBLE, F(record_dp.clip), 1e-12, INFINITY, NULL, "per-example L2 clipping norm C"},
    {"record_dp", "noise", K_DOUBLE, F(record_dp.noise), 0, 1e6, NULL, "noise multiplier z (std / sensitivity); 0 = calibrate from target_epsilon"},
    {"record_dp", "target_epsilon", K_DOUBLE, F(record_dp.target_epsilon), 0, 1e6, NULL, "record-level epsilon target (0 = none)"},
    {"record_dp", "delta", K_DOUBLE, F(record_dp.delta), 1e-300, 0.999999, NULL, "record-level delta"},
    {"record_dp", "sampler", K_CHOICE, F(record_dp.sampler), 0, 0, "poisson|fixed", "batch sampler (poisson: add-remove; fixed: replace-one)"},
    {"record_dp", "accountant", K_CHOICE, F(record_dp.accountant), 0, 0, "rdp|pld", "record-level accountant"},
    {"record_dp", "adjacency", K_CHOICE, F(record_dp.adjacency), 0, 0, "auto|add-remove|replace-one", "record adjacency (must match the sampler)"},
    {"record_dp", "per_layer", K_CHOICE, F(record_dp.per_layer), 0, 0, "no|yes", "clip each layer to C*sqrt(share) instead of the whole gradient"},
    {"record_dp", "secure_mode", K_CHOICE, F(record_dp.secure_mode), 0, 0, "no|yes", "exact discrete-Gaussian noise on a grid (RDP accountant only)"},
    {"record_dp", "e2e", K_CHOICE, F(record_dp.e2e), 0, 0, "no|yes", "also report the client-level guarantee implied by the same noise"},
    {"record_dp", "budgets", K_CHOICE, F(record_dp.budgets), 0, 0, "none|threelevels|mixgauss|pareto|file|class", "rPDP-FL: a privacy budget per record (non-uniform Poisson sampling; noise calibrated to budget_max)"},
    {"record_dp", "budget_file", K_STR, F(record_dp.budget_file), 0, 0, NULL, "budgets = file: one epsilon per training record in the dataset's order, or record_id,epsilon rows"},
    {"record_dp", "class_budgets", K_STR, F(record_dp.class_budgets), 0, 0, NULL, "budgets = class: E0,E1,... one epsilon per class"},
    {"record_dp", "budget_min", K_DOUBLE, F(record_dp.budget_min), 1e-6, 1e6, NULL, "generated budgets are clipped to [budget_min, budget_max]"},
    {"record_dp", "budget_max", K_DOUBLE, F(record_dp.budget_max), 1e-6, 1e6, NULL, "the largest budget: the noise makes a record sampled with p = 1 meet it"},
    {"record_dp", "budget_shuffle", K_CHOICE, F(record_dp.budget_shuffle), 0, 0, "no|yes", "threelevels: shuffled over records (yes) or the published record order (no)"},
    {"record_dp", "budget_policy", K_CHOICE, F(record_dp.budget_policy), 0, 0, "rpdp|minimum|dropout|filter", "rpdp: a rate per budget; minimum: everyone at the smallest budget; dropout: below the mean dropped, the rest at the mean; filter: every record in every step, clipped to what its budget has left (Feldman-Zrnic individual RDP filter)"},
    {"record_dp", "filter_order", K_DOUBLE, F(record_dp.filter_order), 0, 1e6, NULL, "budget_policy = filter: the RDP order alpha of the filter (0 = 1 + 2 ln(1/delta) / smallest budget)"},
    {"record_dp", "budget_rounds", K_INT, F(record_dp.budget_rounds), 0, 100000000, NULL, "rounds the per-record rates are planned for (0 = fl.rounds); later rounds opt records out"},
    {"record_dp", "two_stage_bound", K_CHOICE, F(record_dp.two_stage_bound), 0, 0, "published|pld", "rounds with client rate lambda: the paper's RDP bound (joint convexity) or the PLD of the two-stage round (tightest); both for participation that is visible, as it is in dpfl"},
    {"client_dp", "enabled", K_CHOICE, F(client_dp.enabled), 0, 0, "no|yes", "server clips and noises client updates (client-level DP)"},
    {"client_dp", "clip", K_DOUBLE, F(client_dp.clip), 1e-12, 1e12, NULL, "L2 bound S on each client update (initial S for adaptive)"},
    {"client_dp", "clip_strategy", K_CHOICE, F(client_dp.clip_strategy), 0, 0, "fixed|per-step|adaptive|median", "how S is chosen (median is NOT differentially private)"},
    {"client_dp", "noise", K_DOUBLE, F(client_dp.noise), 0, 1e6, NULL, "noise multiplier z (std / S on the sum); 0 = calibrate from target_epsilon"},
    {"client_dp", "target_epsilon", K_DOUBLE, F(client_dp.target_epsilon), 0, 1e6, NULL, "client-level epsilon target (0 = none)"},
    {"client_dp", "delta", K_DOUBLE, F(client_dp.delta), 1e-300, 0.999999, NULL, "client-level delta"},
    {"client_dp", "accountant", K_CHOICE, F(client_dp.accountant), 0, 0, "rdp|pld", "client-level accountant"},
    {"client_dp", "target_quantile", K_DOUBLE, F(client_dp.target_quantile), 0, 1, NULL, "adaptive clipping: target quantile of update norms"},
    {"client_dp", "clip_lr", K_DOUBLE, F(client_dp.clip_lr), 0, 100, NULL, "adaptive clipping: geometric learning rate"},
    {"client_dp", "quantile_noise", K_DOUBLE, F(client_dp.quantile_noise), 0, 1e9, NULL, "adaptive clipping: noise std on the unclipped count (0 = expected clients / 20)"},
    {"client_dp", "dropout", K_DOUBLE, F(client_dp.dropout), 0, 1, NULL, "probability that a sampled client drops out (noise is not reduced)"},
    {"client_dp", "noise_schedule", K_STR, F(client_dp.noise_schedule), 0, 0, NULL, "ROUND:Z, ... noise from each round on"},
    {"client_dp", "per_layer", K_CHOICE, F(client_dp.per_layer), 0, 0, "no|yes", "clip each layer to S*sqrt(share) instead of the whole update"},
    {"client_dp", "mechanism", K_CHOICE, F(client_dp.mechanism), 0, 0, "gaussian|ddp", "gaussian: the server adds the noise (trusted server); ddp: distributed DP, every client adds Skellam noise to its clipped, rotated, rounded update and the server learns only the secure-aggregation sum"},
    {"client_dp", "ddp_bits", K_INT, F(client_dp.ddp_bits), 0, 32, NULL, "ddp: the secure sum is taken modulo 2^bits (0 = the smallest with overflow probability <= 1e-9 per round)"},
    {"client_dp", "ddp_inflation", K_DOUBLE, F(client_dp.ddp_inflation), 1e-6, 1, NULL, "ddp: the integer grid is fine enough that rounding adds at most this share to the L2 sensitivity"},
    {"client_dp", "ddp_tolerated_dropout", K_DOUBLE, F(client_dp.ddp_tolerated_dropout), 0, 0.49, NULL, "ddp: secure aggregation threshold t = ceil((1 - f) n) of a round of n clients; each adds 1/t of the noise, and a round with fewer than t survivors releases nothing"},
    {"client_dp", "ddp_secagg", K_CHOICE, F(client_dp.ddp_secagg), 0, 0, "no|yes", "ddp: run secure aggregation (pairwise masks, Shamir shares, dropout recovery) in process; no adds the wrapped vectors directly (the same sum, faster)"},
    {"run", "seed", K_STR, F(run.seed), 0, 0, NULL, "integer: reproducible mode (not for deployment); empty: OS entropy"},
    {"run", "allow_large_delta", K_CHOICE, F(run.allow_large_delta), 0, 0, "no|yes", "accept delta >= 1/n records (1/K clients): such a delta allows releasing a whole record"},
    {"run", "threads", K_INT, F(run.threads), 1, 256, NULL, "worker threads"},
    {"run", "eval_every", K_INT, F(run.eval_every), 1, 100000000, NULL, "evaluate every N rounds (and at the last)"},
};
#undef F
#define NKEYS (sizeof keys / sizeof keys[0])
/* first line of a config written by dpfl_config_to_ini (a run's config.ini) */
#define RESOLVED_MARK "# dpfl resolved config: every key, as the run used it"
/* longest "key = value" line of a string value, so that inih (INI_MAX_LINE bytes with "\r\n\0") reads it whole */
#define STR_LINE_MAX ((size_t)INI_MAX_LINE - 3)

void dpfl_config_defaults(dpfl_config *c)
{
    memset(c, 0, sizeof *c);
    strcpy(c->data.dataset, "mnist");
    c->data.partition = DPFL_PART_IID;
    c->data.clients = 10;
    c->data.shards = 2;
    c->data.beta = 0.5;
    c->data.classes_per_client = 2;
    c->data.data_dir[0] = '\0'; /* the data folders of include/dpfl/data.h, never the current directory */
    c->data.normalize = DPFL_NORM_NONE;
    c->data.test_fraction = 0.2;
    strcpy(c->model.arch, "mlp:784-200-10");
    strcpy(c->model.transform_shape, "cp");
    c->fl.rounds = 10;
    c->fl.sampling = DPFL_SAMPLE_ALL;
    c->fl.client_rate = 0.1;
    c->fl.clients_per_round = 10;
    c->fl.local_epochs = 1;
    c->fl.batch = 32;
    c->fl.lr = 0.05;
    c->fl.optimizer = DPFL_OPT_SGD;
    c->fl.schedule = DPFL_SCHED_CONSTANT;
    c->fl.lr_gamma = 1.0;
    c->fl.lr_step = 1;
    c->fl.eta = 1.0;
    c->fl.weighting = DPFL_WEIGHT_SIZE;
    c->fl.client_state = DPFL_STATE_RESET;
    c->fl.client_state_max_mb = 8192;
    c->fl.personalization = DPFL_PERSONAL_NONE;
    c->fl.helper_alpha = 0.1;
    c->fl.target_accuracy = 0.9;
    c->run.allow_large_delta = 0;
    c->record_dp.enabled = 0;
    c->record_dp.clip = 1.0;
    c->record_dp.delta = 1e-5;
    c->record_dp.sampler = DPFL_BATCH_POISSON;
    c->record_dp.accountant = DPFL_ACC_RDP;
    c->record_dp.adjacency = DPFL_RADJ_AUTO;
    c->record_dp.per_layer = 0;
    c->record_dp.e2e = 0;
    c->record_dp.secure_mode = 0;
    c->record_dp.budget_min = 0.1;
    c->record_dp.budget_max = 10.0;
    c->record_dp.budget_shuffle = 1;
    c->client_dp.enabled = 0;
    c->client_dp.clip = 1.0;
    c->client_dp.clip_strategy = DPFL_CLIP_FIXED;
    c->client_dp.delta = 1e-5;
    c->client_dp.accountant = DPFL_ACC_RDP;
    c->client_dp.target_quantile = 0.5;
    c->client_dp.clip_lr = 0.2;
    c->client_dp.per_layer = 0;
    c->client_dp.ddp_inflation = 0.01;
    c->client_dp.ddp_tolerated_dropout = 0.1;
    c->client_dp.ddp_secagg = 1;
    c->run.threads = 2;
    c->run.eval_every = 1;
}

/* position of value in "a|b|c", or -1 */
static int choice_index(const char *choices, const char *value)
{
    size_t len = strlen(value);
    int i = 0;
    for (const char *p = choices; *p; i++) {
        const char *bar = strchr(p, '|');
        size_t l = bar ? (size_t)(bar - p) : strlen(p);
        if (l == len && !strncmp(p, value, l)) return i;
        p += l + (bar ? 1 : 0);
    }
    return -1;
}

/* the idx-th name of "a|b|c" into buf */
static const char *choice_name(const char *choices, int idx, char *buf, size_t n)
{
    const char *p = choices;
    for (int i = 0; i < idx && p; i++) {
        p = strchr(p, '|');
        if (p) p++;
    }
    if (!p) return "?";
    const char *bar = strchr(p, '|');
    size_t l = bar ? (size_t)(bar - p) : strlen(p);
    if (l >= n) l = n - 1;
    memcpy(buf, p, l);
    buf[l] = '\0';
    return buf;
}

static const keydef *find_key(const char *section, const char *key)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section) && !strcmp(keys[i].key, key)) return &keys[i];
    return NULL;
}

static int section_exists(const char *section)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section)) return 1;
    return 0;
}

static void list_keys(const char *section, char *buf, size_t n)
{
    buf[0] = '\0';
    for (size_t i = 0; i < NKEYS; i++)
        if (!strcmp(keys[i].section, section)) {
            if (buf[0]) strncat(buf, ", ", n - strlen(buf) - 1);
            strncat(buf, keys[i].key, n - strlen(buf) - 1);
        }
}

/* where: "file:line" or "--set"; fills err naming the key */
/* The presets of fl.algorithm, in the order of its choices: ordinary settings, "section.key=value" each. */
static const char *const PRESETS[][9] = {
    {NULL},                                                                 /* custom */
    {"record_dp.enabled=no", "client_dp.enabled=no", NULL},                 /* FedAvg (McMahan et al. 2017) */
    {"client_dp.enabled=yes", "fl.sampling=poisson", "client_dp.clip_strategy=fixed", "record_dp.enabled=no",
     NULL},                                                                 /* DP-FedAvg (McMahan 2018, Geyer 2017) */
    {"client_dp.enabled=yes", "fl.sampling=poisson", "client_dp.clip_strategy=adaptive", "record_dp.enabled=no",
     NULL},                                                                 /* adaptive clipping (Andrew et al. 2021) */
    {"record_dp.enabled=yes", "record_dp.sampler=poisson", "client_dp.enabled=no", NULL}, /* DP-SGD in clients */
    {"record_dp.enabled=yes", "record_dp.sampler=poisson", "record_dp.e2e=yes", "fl.sampling=poisson", NULL},
    {"record_dp.enabled=yes", "record_dp.sampler=fixed", "fl.client_state=keep", "fl.optimizer=adam",
     "fl.personalization=helper", "fl.sampling=poisson", "fl.weighting=uniform", NULL}, /* PriFedSync (Algorithm 1) */
};

static dpfl_status set_value(dpfl_config *c, const char *where, const char *section, const char *key,
                             const char *value, dpfl_error *err);

/* Expand a preset: each of its settings unless the user already set that key (keys set later override it). */
static dpfl_status apply_preset(dpfl_config *c, int algo, dpfl_error *err)
{
    for (int i = 0; PRESETS[algo][i]; i++) {
        char sec[32], key[48];
        const char *a = PRESETS[algo][i], *dot = strchr(a, '.'), *eq = strchr(a, '=');
        snprintf(sec, sizeof sec, "%.*s", (int)(dot - a), a);
        snprintf(key, sizeof key, "%.*s", (int)(eq - dot - 1), dot + 1);
        const keydef *k = find_key(sec, key);
        DPFL_ASSERT(k);
        if (c->user_set[k - keys]) continue;
        dpfl_status st = set_value(c, "fl.algorithm", sec, key, eq + 1, err);
        if (st) return st;
        c->user_set[k - keys] = 0; /* set by the preset, not the user */
    }
    return DPFL_OK;
}

static dpfl_status set_value(dpfl_config *c, const char *where, const char *section, const char *key,
                             const char *value, dpfl_error *err)
{
    if (!section_exists(section))
    {
        char valid[128] = "";
        for (size_t i = 0; i < NKEYS; i++) /* each section once, in table order */
            if (i == 0 || strcmp(keys[i].section, keys[i - 1].section)) {
                if (valid[0]) strncat(valid, ", ", sizeof valid - strlen(valid) - 1);
                strncat(valid, keys[i].section, sizeof valid - strlen(valid) - 1);
            }
        return dpfl_fail(err, DPFL_EINVAL, "unknown section [%s] (%s): valid sections are %s", section, where, valid);
    }
    const keydef *k = find_key(section, key);
    if (!k) {
        char valid[512];
        list_keys(section, valid, sizeof valid);
        return dpfl_fail(err, DPFL_EINVAL, "unknown key %s.%s (%s): valid keys in [%s] are %s", section, key, where,
                         section, valid);
    }
    char *field = (char *)c + k->off;
    DPFL_ASSERT((size_t)(k - keys) < sizeof c->user_set);
    c->user_set[k - keys] = 1;
    char *end;
    errno = 0;
    switch (k->type) {
    case K_INT: {
        long v = strtol(value, &end, 10);
        if (end == value || *end || errno)
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): '%s' is not an integer", section, key, where, value);
        if (v < k->lo || v > k->hi)
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): %ld is out of range [%.0f, %.0f]", section, key, where, v,
                             k->lo, k->hi);
        *(int32_t *)field = (int32_t)v;
        break;
    }
    case K_DOUBLE: {
        double v = strtod(value, &end);
        if (end == value || *end || errno || isnan(v) || (isinf(v) && !(v > 0 && isinf(k->hi))))
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): '%s' is not a number", section, key, where, value);
        if (v < k->lo || v > k->hi)
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): %g is out of range [%g, %g]", section, key, where, v,
                             k->lo, k->hi);
        *(double *)field = v;
        break;
    }
    case K_CHOICE:
    case K_NAME: {
        int idx = choice_index(k->choices, value);
        if (idx < 0 && field == c->data.dataset && dpfl_dataset_is_files(value)) idx = 0; /* csv:... / idx:... */
        if (idx < 0 && field == (char *)&c->record_dp.two_stage_bound && !strcmp(value, "zhu-wang"))
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): 'zhu-wang' was removed: Zhu-Wang 2019 assumes a client "
                             "that sits a round out is indistinguishable from one that took part, and in dpfl it is not "
                             "(under-reported up to 6x); use published or pld", section, key, where);
        if (idx < 0)
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): '%s' is not one of %s", section, key, where, value,
                             k->choices);
        if (k->type == K_CHOICE) {
            *(int *)field = idx;
            if (field == (char *)&c->fl.algorithm) return apply_preset(c, idx, err);
            break;
        }
    }
        /* fall through */
    case K_STR: {
        /* the run directory's config.ini must read back as the same value (a resume loads it): one line that
         * inih reads whole, no surrounding blanks (stripped) and no blank before ';' (an inline comment) */
        const size_t max = k->size - 1 < STR_LINE_MAX - strlen(key) - 3 ? k->size - 1 : STR_LINE_MAX - strlen(key) - 3;
        for (const char *p = value; *p; p++) {
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): value contains a control character (0x%02x at "
                                 "position %d)", section, key, where, (unsigned char)*p, (int)(p - value));
            if (*p == ';' && (p == value || p[-1] == ' '))
                return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): a ';' %s would start a comment in the config file",
                                 section, key, where, p == value ? "at the start of the value" : "after a blank");
        }
        if (strlen(value) > max)
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): value is too long (max %zu characters)", section, key,
                             where, max);
        if (value[0] == ' ' || (value[0] && value[strlen(value) - 1] == ' '))
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s (%s): value '%s' starts or ends with a blank", section, key,
                             where, value);
        strcpy(field, value);
        break;
    }
    }
    return DPFL_OK;
}

typedef struct {
    dpfl_config *c;
    const char *path;
    dpfl_error *err;
    dpfl_status status;
    FILE *f;
    int line; /* Debian's inih does not pass line numbers to handlers: count them in the reader */
} ini_ctx;

static char *read_line(char *str, int num, void *stream)
{
    ini_ctx *x = stream;
    char *r = fgets(str, num, x->f);
    if (r) x->line++;
    if (r && !x->status && !strchr(r, '\n') && !feof(x->f)) { /* inih would read the rest as another line */
        x->status = dpfl_fail(x->err, DPFL_EFORMAT, "config line too long (%s:%d): more than %d characters", x->path,
                              x->line, num - 2);
        return NULL;
    }
    return r;
}

static int on_key(void *user, const char *section, const char *name, const char *value)
{
    ini_ctx *x = user;
    if (x->status) return 0;
    char where[300];
    snprintf(where, sizeof where, "%s:%d", x->path, x->line);
    x->status = set_value(x->c, where, section, name, value, x->err);
    return x->status == DPFL_OK;
}

dpfl_status dpfl_config_load(dpfl_config *c, const char *path, dpfl_error *err)
{
    struct stat sb;
    if (stat(path, &sb) != 0) return dpfl_fail(err, DPFL_EIO, "cannot open config (%s): %s", path, strerror(errno));
    if (!S_ISREG(sb.st_mode))
        return dpfl_fail(err, DPFL_EINVAL, "config (%s): not a regular file%s", path,
                         S_ISDIR(sb.st_mode) ? " but a directory (give the .ini file)" : "");
    FILE *f = fopen(path, "r");
    if (!f) return dpfl_fail(err, DPFL_EIO, "cannot open config (%s): %s", path, strerror(errno));
    char first[128] = "";
    int resolved = fgets(first, sizeof first, f) && !strncmp(first, RESOLVED_MARK, strlen(RESOLVED_MARK));
    rewind(f);
    ini_ctx x = {c, path, err, DPFL_OK, f, 0};
    int r = ini_parse_stream(read_line, &x, on_key, &x);
    fclose(f);
    if (x.status) return x.status;
    /* a run's own config.ini lists every key: none of them is a user's choice to be checked for being ignored */
    if (resolved) memset(c->user_set, 0, sizeof c->user_set);
    if (r != 0) return dpfl_fail(err, DPFL_EFORMAT, "syntax error in config (%s:%d)", path, r);
    return DPFL_OK;
}

dpfl_status dpfl_config_set(dpfl_config *c, const char *a, dpfl_error *err)
{
    const char *dot = strchr(a, '.'), *eq = strchr(a, '=');
    if (!dot || !eq || dot > eq)
        return dpfl_fail(err, DPFL_EINVAL, "--set '%s': expected section.key=value", a);
    char section[64], key[64];
    size_t ls = (size_t)(dot - a), lk = (size_t)(eq - dot - 1);
    if (ls >= sizeof section || lk >= sizeof key) return dpfl_fail(err, DPFL_EINVAL, "--set '%s': name too long", a);
    memcpy(section, a, ls);
    section[ls] = '\0';
    memcpy(key, dot + 1, lk);
    key[lk] = '\0';
    return set_value(c, "--set", section, key, eq + 1, err);
}

/* rPDP-FL (record_dp.budgets != none): what the two-stage accounting and the non-uniform sampler need. */
static dpfl_status validate_budgets(const dpfl_config *c, dpfl_error *err)
{
    const dpfl_record_dp_config *r = &c->record_dp;
    if (r->noise != 0.0 || r->target_epsilon != 0.0)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.noise: with budgets the noise is calibrated (a record sampled "
                                           "with p = 1 meets budget_max); remove noise and target_epsilon");
    if (r->sampler != DPFL_BATCH_POISSON)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.sampler: budgets need sampler = poisson (each record with its "
                                           "own probability p_i)");
    if (r->accountant != DPFL_ACC_RDP)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.accountant: budgets are accounted with rdp (the two-stage bound "
                                           "of client and record sampling)");
    if (r->secure_mode || r->e2e || r->per_layer)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.%s: not available with budgets",
                         r->secure_mode ? "secure_mode" : r->e2e ? "e2e" : "per_layer");
    if (c->fl.local_steps <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.local_steps: budgets need a fixed number of local steps per round "
                                           "(the two-stage bound's tau); set local_steps > 0");
    if (c->fl.sampling == DPFL_SAMPLE_FIXED || c->fl.client_rate_schedule[0])
        return dpfl_fail(err, DPFL_EINVAL, "fl.sampling: budgets are accounted for Poisson client sampling at one "
                                           "rate (sampling = poisson or all, no client_rate_schedule)");
    if (!(r->budget_min < r->budget_max))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.budget_min: %g must be below budget_max (%g)", r->budget_min,
                         r->budget_max);
    if (r->budgets == DPFL_BUDGETS_FILE && !r->budget_file[0])
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.budget_file: budgets = file needs a file");
    if (r->budgets == DPFL_BUDGETS_CLASS && !r->class_budgets[0])
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.class_budgets: budgets = class needs E0,E1,... (one per class)");
    if (r->budget_policy == DPFL_POLICY_FILTER && r->filter_order != 0.0 && !(r->filter_order > 1.0))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.filter_order: %g must be above 1 (or 0 for auto)",
                         r->filter_order);
    if (r->budget_policy == DPFL_POLICY_FILTER && r->two_stage_bound != 0)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.two_stage_bound: budget_policy = filter charges each step's "
                                           "individual Renyi loss, not a two-stage bound; remove two_stage_bound");
    return DPFL_OK;
}

dpfl_status dpfl_config_validate(const dpfl_config *c, dpfl_error *err)
{
    if ((c->fl.sampling == DPFL_SAMPLE_FIXED) && c->fl.clients_per_round > c->data.clients)
        return dpfl_fail(err, DPFL_EINVAL, "fl.clients_per_round: %d is more than data.clients (%d)",
                         c->fl.clients_per_round, c->data.clients);
    if ((c->fl.sampling == DPFL_SAMPLE_POISSON) && c->fl.client_rate <= 0.0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_rate: must be > 0 with sampling = poisson");
    if (c->fl.local_steps == 0 && c->fl.local_epochs == 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.local_steps: one of local_steps and local_epochs must be > 0");
    if (c->run.seed[0]) {
        char *end;
        errno = 0;
        strtoull(c->run.seed, &end, 10);
        if (*end || errno || c->run.seed[0] == '-')
            return dpfl_fail(err, DPFL_EINVAL, "run.seed: '%s' is not a non-negative integer (leave it empty for "
                                               "OS entropy)", c->run.seed);
    }
    if (c->record_dp.enabled) {
        const dpfl_record_adjacency want =
            c->record_dp.sampler == DPFL_BATCH_POISSON ? DPFL_RADJ_ADD_REMOVE : DPFL_RADJ_REPLACE_ONE;
        if (c->record_dp.adjacency != DPFL_RADJ_AUTO && c->record_dp.adjacency != want)
            return dpfl_fail(err, DPFL_EINVAL,
                             "record_dp.adjacency: %s does not match sampler = %s (which is analysed under %s)",
                             dpfl_config_choice(c, "record_dp.adjacency"), dpfl_config_choice(c, "record_dp.sampler"),
                             want == DPFL_RADJ_ADD_REMOVE ? "add-remove" : "replace-one");
        if (c->record_dp.budgets != DPFL_BUDGETS_NONE) {
            dpfl_status bs = validate_budgets(c, err);
            if (bs) return bs;
        } else if (c->record_dp.noise == 0.0 && c->record_dp.target_epsilon == 0.0)
            return dpfl_fail(err, DPFL_EINVAL, "record_dp.noise: set noise > 0 or target_epsilon > 0");
        if (isinf(c->record_dp.clip) && c->record_dp.noise > 0.0)
            return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip: inf gives no sensitivity bound; use a finite clip");
        if (c->record_dp.secure_mode && (c->record_dp.accountant == DPFL_ACC_PLD))
            return dpfl_fail(err, DPFL_EINVAL, "record_dp.accountant: secure_mode is accounted with rdp (integer "
                                               "orders bound the discrete Gaussian); pld is for the continuous one");
        if (isinf(c->record_dp.clip) && c->record_dp.secure_mode)
            return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip: secure_mode needs a finite clip");
        if (isinf(c->record_dp.clip) && c->record_dp.target_epsilon > 0.0)
            return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip: inf is incompatible with target_epsilon");
    }
    if (c->client_dp.enabled && (c->client_dp.clip_strategy != DPFL_CLIP_MEDIAN)) {
        if (c->client_dp.noise == 0.0 && c->client_dp.target_epsilon == 0.0)
            return dpfl_fail(err, DPFL_EINVAL, "client_dp.noise: set noise > 0 or target_epsilon > 0");
    }
    if (c->client_dp.enabled && c->client_dp.mechanism == 1) {
        const char *why = c->client_dp.clip_strategy != DPFL_CLIP_FIXED ? "client_dp.clip_strategy must be fixed (each "
                                                                          "client clips its own update to S)"
                          : c->client_dp.per_layer ? "client_dp.per_layer must be no (one L2 bound for the rotation)"
                          : c->fl.sampling == DPFL_SAMPLE_FIXED ? "fl.sampling must be poisson or all (the Skellam "
                                                                  "accountant's client sampling is Poisson)"
                          : c->client_dp.noise_schedule[0] ? "client_dp.noise_schedule is not supported (one noise "
                                                             "level for the run)"
                          : c->client_dp.ddp_bits != 0 && c->client_dp.ddp_bits < 8 ? "client_dp.ddp_bits must be 0 or "
                                                                                      "in [8, 32]"
                                                                                    : NULL;
        if (why) return dpfl_fail(err, DPFL_EINVAL, "client_dp.mechanism = ddp: %s", why);
    }
    if (c->client_dp.enabled && (c->client_dp.clip_strategy == DPFL_CLIP_ADAPTIVE) && c->client_dp.quantile_noise > 0 &&
        c->client_dp.noise > 0 && 2.0 * c->client_dp.quantile_noise <= c->client_dp.noise)
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.quantile_noise: must exceed noise / 2 (%g) so that the update "
                                           "and the quantile noise together are one Gaussian with multiplier z",
                         c->client_dp.noise / 2.0);
    dpfl_schedule sch;
    dpfl_status st;
    if ((st = dpfl_schedule_parse(c->fl.client_rate_schedule, "fl.client_rate_schedule", &sch, err))) return st;
    for (int i = 0; i < sch.n; i++)
        if (sch.value[i] <= 0 || sch.value[i] > 1)
            return dpfl_fail(err, DPFL_EINVAL, "fl.client_rate_schedule: rates must be in (0, 1]");
    if ((st = dpfl_schedule_parse(c->fl.clients_per_round_schedule, "fl.clients_per_round_schedule", &sch, err))) return st;
    for (int i = 0; i < sch.n; i++)
        if (sch.value[i] < 1 || sch.value[i] > c->data.clients || sch.value[i] != floor(sch.value[i]))
            return dpfl_fail(err, DPFL_EINVAL, "fl.clients_per_round_schedule: counts must be integers in [1, %d]",
                             c->data.clients);
    if ((st = dpfl_schedule_parse(c->client_dp.noise_schedule, "client_dp.noise_schedule", &sch, err))) return st;
    if (sch.n && c->client_dp.noise == 0.0 && c->client_dp.enabled)
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.noise_schedule: give noise too (calibration of a schedule "
                                           "is not supported); target_epsilon then acts as a stop rule");
    for (int i = 0; i < sch.n; i++)
        if (sch.value[i] <= 0) return dpfl_fail(err, DPFL_EINVAL, "client_dp.noise_schedule: noise must be > 0");
    if (c->record_dp.e2e && (c->fl.client_rate_schedule[0] || c->fl.clients_per_round_schedule[0] ||
                                       c->client_dp.noise_schedule[0]))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.e2e: not available with client sampling or noise schedules");
    const int own = dpfl_dataset_is_files(c->data.dataset);
    if (own && !c->data.dataset[4])
        return dpfl_fail(err, DPFL_EINVAL, "data.dataset: '%s' names no file", c->data.dataset);
    if (c->data.test[0] && !dpfl_dataset_is_files(c->data.test))
        return dpfl_fail(err, DPFL_EINVAL, "data.test: '%s' is not csv:FILES or idx:FILES", c->data.test);
    if (c->data.normalize == DPFL_NORM_STANDARD && own && (!c->data.feature_mean[0] || !c->data.feature_std[0]))
        return dpfl_fail(err, DPFL_EINVAL, "data.normalize: standard with your own data needs data.feature_mean and "
                                           "data.feature_std (public constants; dpfl never computes them from the "
                                           "private data)");
    if (c->data.normalize == DPFL_NORM_STANDARD && !own && !dpfl_dataset_has_standardization(c->data.dataset))
        return dpfl_fail(err, DPFL_EINVAL, "data.normalize: standard is defined for mnist and fashion-mnist (heart "
                                           "is already z-scored per centre)");
    if ((c->data.partition == DPFL_PART_NATURAL) && strcmp(c->data.dataset, "heart") && !own)
        return dpfl_fail(err, DPFL_EINVAL, "data.partition: natural needs a dataset with sources (heart, or csv: "
                                           "with one file per client)");
    return DPFL_OK;
}

char *dpfl_config_to_ini(const dpfl_config *c)
{
    size_t cap = 8192, n = 0;
    char *s = malloc(cap);
    if (!s) return NULL;
    n += (size_t)snprintf(s, cap, "%s\n", RESOLVED_MARK);
    const char *cur = "";
    for (size_t i = 0; i < NKEYS; i++) {
        const keydef *k = &keys[i];
        const char *field = (const char *)c + k->off;
        if (strcmp(cur, k->section)) {
            n += (size_t)snprintf(s + n, cap - n, "\n[%s]\n", k->section);
            cur = k->section;
        }
        switch (k->type) {
        case K_INT: n += (size_t)snprintf(s + n, cap - n, "%s = %d\n", k->key, *(const int32_t *)field); break;
        case K_DOUBLE: n += (size_t)snprintf(s + n, cap - n, "%s = %.17g\n", k->key, *(const double *)field); break;
        case K_CHOICE: {
            char name[32];
            n += (size_t)snprintf(s + n, cap - n, "%s = %s\n", k->key,
                                  choice_name(k->choices, *(const int *)field, name, sizeof name));
            break;
        }
        default: n += (size_t)snprintf(s + n, cap - n, "%s = %s\n", k->key, field); break;
        }
        DPFL_ASSERT(n < cap);
    }
    return s;
}

void dpfl_config_print_keys(FILE *f)
{
    const char *cur = "";
    for (size_t i = 0; i < NKEYS; i++) {
        const keydef *k = &keys[i];
        if (strcmp(cur, k->section)) {
            fprintf(f, "  [%s]\n", k->section);
            cur = k->section;
        }
        char range[96] = "";
        if (k->type == K_CHOICE || k->type == K_NAME) snprintf(range, sizeof range, "%s", k->choices);
        else if (k->type == K_INT) snprintf(range, sizeof range, "integer in [%.0f, %.0f]", k->lo, k->hi);
        else if (k->type == K_DOUBLE) snprintf(range, sizeof range, "number in [%g, %g]", k->lo, k->hi);
        else snprintf(range, sizeof range, "text");
        fprintf(f, "    %-20s %s — %s\n", k->key, k->help, range);
    }
}

/* Every choice key's names, split once: dpfl_config_choice returns pointers into this table, so several calls may
 * share one printf. */
enum { MAX_CHOICES = 8, CHOICE_LEN = 24 };
static char choice_names[sizeof keys / sizeof keys[0]][MAX_CHOICES][CHOICE_LEN];
static pthread_once_t choice_once = PTHREAD_ONCE_INIT;
static void split_choices(void)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].type == K_CHOICE)
            for (int j = 0; j < MAX_CHOICES; j++) choice_name(keys[i].choices, j, choice_names[i][j], CHOICE_LEN);
}

const char *dpfl_config_choice(const dpfl_config *c, const char *section_key)
{
    const char *dot = strchr(section_key, '.');
    if (!dot) return "?";
    pthread_once(&choice_once, split_choices);
    for (size_t i = 0; i < NKEYS; i++)
        if (keys[i].type == K_CHOICE && !strncmp(keys[i].section, section_key, (size_t)(dot - section_key)) &&
            keys[i].section[dot - section_key] == '\0' && !strcmp(keys[i].key, dot + 1)) {
            int v = *(const int *)((const char *)c + keys[i].off);
            return v >= 0 && v < MAX_CHOICES ? choice_names[i][v] : "?";
        }
    return "?";
}

/* ------------------------------------------------------------------------------------------ ignored keys */
static int user_set(const dpfl_config *c, const char *section, const char *key)
{
    const keydef *k = find_key(section, key);
    DPFL_ASSERT(k);
    return c->user_set[k - keys];
}

/* the first key of `section` the user set, other than `except` (NULL if none) */
static const char *first_set_in(const dpfl_config *c, const char *section, const char *except)
{
    for (size_t i = 0; i < NKEYS; i++)
        if (c->user_set[i] && !strcmp(keys[i].section, section) && strcmp(keys[i].key, except)) return keys[i].key;
    return NULL;
}

dpfl_status dpfl_config_check_ignored(const dpfl_config *c, dpfl_error *err)
{
    const char *k;
    if (!c->record_dp.enabled && (k = first_set_in(c, "record_dp", "enabled")))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.%s is set but record_dp.enabled = no: this run would NOT be "
                                           "differentially private at record level; set record_dp.enabled = yes, or "
                                           "remove record_dp.%s", k, k);
    if (!c->client_dp.enabled && (k = first_set_in(c, "client_dp", "enabled")))
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.%s is set but client_dp.enabled = no: this run would NOT be "
                                           "differentially private at client level; set client_dp.enabled = yes, or "
                                           "remove client_dp.%s", k, k);
    static const struct {
        const char *section, *key, *why;
        int applies_if; /* index into the checks below */
    } rules[] = {
        {"fl", "client_rate", "it applies to sampling = poisson", 0},
        {"fl", "client_rate_schedule", "it applies to sampling = poisson", 0},
        {"fl", "clients_per_round", "it applies to sampling = fixed", 1},
        {"fl", "clients_per_round_schedule", "it applies to sampling = fixed", 1},
        {"client_dp", "target_quantile", "it applies to clip_strategy = adaptive", 2},
        {"client_dp", "clip_lr", "it applies to clip_strategy = adaptive", 2},
        {"client_dp", "quantile_noise", "it applies to clip_strategy = adaptive", 2},
        {"data", "shards", "it applies to partition = shards", 3},
        {"data", "beta", "it applies to partition = dirichlet", 4},
        {"data", "test_per_client", "partition = natural takes each centre's own test split", 10},
        {"data", "classes_per_client", "it applies to partition = classes", 5},
        {"fl", "momentum", "it applies to optimizer = sgd (Adam has its own moments)", 6},
        {"fl", "lr_gamma", "it applies to schedule = step or exp", 7},
        {"fl", "lr_step", "it applies to schedule = step", 8},
        {"fl", "local_epochs", "local_steps > 0 takes precedence", 9},
        {"fl", "helper_alpha", "it applies to personalization = helper", 11},
        {"record_dp", "budget_file", "it applies to budgets = file", 12},
        {"record_dp", "class_budgets", "it applies to budgets = class", 13},
        {"record_dp", "budget_min", "it applies to record_dp.budgets", 14},
        {"record_dp", "budget_max", "it applies to record_dp.budgets", 14},
        {"record_dp", "budget_policy", "it applies to record_dp.budgets", 14},
        {"record_dp", "two_stage_bound", "it applies to record_dp.budgets", 14},
        {"record_dp", "budget_shuffle", "it applies to budgets = threelevels", 15},
        {"record_dp", "filter_order", "it applies to budget_policy = filter", 16},
        {"model", "transform_shape", "it applies to transform = affine", 17},
        {"client_dp", "ddp_bits", "it applies to mechanism = ddp", 18},
        {"client_dp", "ddp_inflation", "it applies to mechanism = ddp", 18},
        {"client_dp", "ddp_tolerated_dropout", "it applies to mechanism = ddp", 18},
        {"client_dp", "ddp_secagg", "it applies to mechanism = ddp", 18},
        {"data", "label_column", "it applies to dataset = csv:...", 19},
        {"data", "feature_columns", "it applies to dataset = csv:...", 19},
        {"data", "header", "it applies to dataset = csv:...", 19},
        {"data", "missing", "it applies to dataset = csv:...", 19},
        {"data", "test", "it applies to dataset = csv:... or idx:...", 20},
        {"data", "test_fraction", "it applies to dataset = csv:... or idx:... without data.test", 21},
        {"data", "feature_mean", "it applies to normalize = standard with dataset = csv:... or idx:...", 22},
        {"data", "feature_std", "it applies to normalize = standard with dataset = csv:... or idx:...", 22},
        {"data", "source_rows", "it applies to dataset = csv:... or idx:...", 20},
        {"data", "classes", "it applies to dataset = csv:... or idx:...", 20},
    };
    const int own = dpfl_dataset_is_files(c->data.dataset);
    const int applies[23] = {
        c->fl.sampling == DPFL_SAMPLE_POISSON,      c->fl.sampling == DPFL_SAMPLE_FIXED,
        c->client_dp.clip_strategy == DPFL_CLIP_ADAPTIVE, c->data.partition == DPFL_PART_SHARDS,
        c->data.partition == DPFL_PART_DIRICHLET,   c->data.partition == DPFL_PART_CLASSES,
        c->fl.optimizer == DPFL_OPT_SGD,            c->fl.schedule != DPFL_SCHED_CONSTANT,
        c->fl.schedule == DPFL_SCHED_STEP,          c->fl.local_steps == 0,
        c->data.partition != DPFL_PART_NATURAL,     c->fl.personalization == DPFL_PERSONAL_HELPER,
        c->record_dp.budgets == DPFL_BUDGETS_FILE,  c->record_dp.budgets == DPFL_BUDGETS_CLASS,
        c->record_dp.budgets != DPFL_BUDGETS_NONE,  c->record_dp.budgets == DPFL_BUDGETS_THREELEVELS,
        c->record_dp.budgets != DPFL_BUDGETS_NONE && c->record_dp.budget_policy == DPFL_POLICY_FILTER,
        c->model.transform != 0,                    c->client_dp.mechanism == 1,
        !strncmp(c->data.dataset, "csv:", 4),       own,
        own && !c->data.test[0],                    own && c->data.normalize == DPFL_NORM_STANDARD,
    };
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (user_set(c, rules[i].section, rules[i].key) && !applies[rules[i].applies_if])
            return dpfl_fail(err, DPFL_EINVAL, "%s.%s is set but would be ignored: %s; remove it or change that setting",
                             rules[i].section, rules[i].key, rules[i].why);
    return DPFL_OK;
}

void dpfl_config_model_spec(const dpfl_config *c, char *out, size_t cap)
{
    static const char *const fn[] = {"", "", "-sigmoid", "-tanh", "-relu"};
    if (c->model.transform)
        snprintf(out, cap, "transform-%s%s:%s", c->model.transform_shape, fn[c->model.transform], c->model.arch);
    else snprintf(out, cap, "%s", c->model.arch);
}
