/* The configuration's keys, as data: one row per key with its type, field, range or choices, default (the one place
 * defaults are written), help text and, for a key that acts only under some other setting, the rule that refuses it
 * elsewhere (applies + ignored_because, read by dpfl_config_check_ignored); the sections switched on and off as a
 * whole; fl.algorithm's presets.  config.c reads and writes the keys from this table; --help and docs/config.md
 * (tools/gen_config_doc.py) print it. */
#include "config_internal.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------------------------------------ ignored-key rules */
static int poisson_sampling(const dpfl_config *c) { return c->fl.sampling == DPFL_SAMPLE_POISSON; }
static int fixed_sampling(const dpfl_config *c) { return c->fl.sampling == DPFL_SAMPLE_FIXED; }
static int cross_device_sampling(const dpfl_config *c) { return c->fl.sampling == DPFL_SAMPLE_CROSS_DEVICE; }
static int rate_sampling(const dpfl_config *c) { return poisson_sampling(c) || cross_device_sampling(c); }
static int adaptive_clipping(const dpfl_config *c) { return c->client_dp.clip_strategy == DPFL_CLIP_ADAPTIVE; }
static int shards_partition(const dpfl_config *c) { return c->data.partition == DPFL_PART_SHARDS; }
static int dirichlet_partition(const dpfl_config *c)
{
    return c->data.partition == DPFL_PART_DIRICHLET || c->data.partition == DPFL_PART_DIRICHLET_CLIENT;
}
static int classes_partition(const dpfl_config *c)
{
    return c->data.partition == DPFL_PART_CLASSES || c->data.partition == DPFL_PART_CLASSES_RANDOM;
}
static int not_natural_partition(const dpfl_config *c) { return c->data.partition != DPFL_PART_NATURAL; }
static int sgd_optimizer(const dpfl_config *c) { return c->fl.optimizer == DPFL_OPT_SGD; }
static int varying_lr(const dpfl_config *c) { return c->fl.schedule != DPFL_SCHED_CONSTANT; }
static int step_lr(const dpfl_config *c) { return c->fl.schedule == DPFL_SCHED_STEP; }
static int epochs_count(const dpfl_config *c) { return c->fl.local_steps == 0; }
static int helper_models(const dpfl_config *c) { return c->fl.personalization == DPFL_PERSONAL_HELPER; }
static int record_budgets(const dpfl_config *c) { return c->record_dp.budgets != DPFL_BUDGETS_NONE; }
static int budgets_from_file(const dpfl_config *c) { return c->record_dp.budgets == DPFL_BUDGETS_FILE; }
static int budgets_per_class(const dpfl_config *c) { return c->record_dp.budgets == DPFL_BUDGETS_CLASS; }
static int three_level_budgets(const dpfl_config *c) { return c->record_dp.budgets == DPFL_BUDGETS_THREELEVELS; }
static int budget_filter(const dpfl_config *c)
{
    return record_budgets(c) && c->record_dp.budget_policy == DPFL_POLICY_FILTER;
}
static int clip_decays(const dpfl_config *c) { return c->record_dp.clip_decay > 0.0; }
static int input_transform(const dpfl_config *c) { return c->model.transform != DPFL_TRANSFORM_NONE; }
static int distributed_dp(const dpfl_config *c) { return c->client_dp.mechanism == DPFL_CLIENT_MECH_DDP; }
static int csv_dataset(const dpfl_config *c) { return c->data.kind == DPFL_DATASET_CSV; }
static int own_dataset(const dpfl_config *c) { return dpfl_config_own_data(c); } /* files, or arrays (memory:) */
static int own_dataset_without_test(const dpfl_config *c) { return own_dataset(c) && !c->data.test[0]; }
static int own_dataset_standardized(const dpfl_config *c)
{
    return own_dataset(c) && c->data.normalize == DPFL_NORM_STANDARD;
}

/* the sections switched on and off as a whole */
static int record_dp_on(const dpfl_config *c) { return c->record_dp.enabled; }
static int client_dp_on(const dpfl_config *c) { return c->client_dp.enabled; }
const fl_switched_section fl_config_switched[FL_CONFIG_NSWITCHED] = {
    {"record_dp", "record", record_dp_on},
    {"client_dp", "client", client_dp_on},
};

/* ------------------------------------------------------------------------------------------ the keys */
#define F(field) .off = offsetof(dpfl_config, field), .size = sizeof(((dpfl_config *)0)->field)
#define WHEN(pred, why) .applies = pred, .ignored_because = why
const fl_keydef fl_config_keys[] = {
    {"data", "dataset", FL_KEY_NAME, F(data.dataset), .choices = "mnist|fashion-mnist|heart|synthetic|cifar10|cifar100|emnist-balanced|emnist-byclass|emnist-bymerge|"
                                                             "emnist-digits|emnist-letters|emnist-mnist", .dflt = "mnist",
     .help = "dataset, or your own files: csv:FILES (files, folders, glob patterns; one source per file) or idx:FOLDER / idx:IMAGES,LABELS or npy:X.npy,Y.npy / npy:FILE.npz"},
    {"data", "partition", FL_KEY_CHOICE, F(data.partition), .choices = "iid|shards|dirichlet|classes|natural|dirichlet-client|classes-random",
     .dflt = "iid", .help = "how the training set is split into clients (dirichlet-client: PriFedSync sec. 4.2, each client its own Dir(beta) mix of samples_per_client examples and test_per_client test examples; classes-random: PrivateFL sec. 5)"},
    {"data", "clients", FL_KEY_INT, F(data.clients), .lo = 1, .hi = 1000000, .dflt = "10",
     .help = "number of clients (partition = natural with csv: files: one per file, when not set)"},
    {"data", "shards", FL_KEY_INT, F(data.shards), .lo = 1, .hi = 100000, .dflt = "2",
     .help = "shards per client (partition = shards)",
     WHEN(shards_partition, "it applies to partition = shards")},
    {"data", "beta", FL_KEY_DOUBLE, F(data.beta), .lo = 1e-6, .hi = 1e6, .dflt = "0.5",
     .help = "Dirichlet concentration (partition = dirichlet or dirichlet-client)",
     WHEN(dirichlet_partition, "it applies to partition = dirichlet or dirichlet-client")},
    {"data", "classes_per_client", FL_KEY_INT, F(data.classes_per_client), .lo = 1, .hi = 1000, .dflt = "2",
     .help = "classes per client (partition = classes or classes-random)",
     WHEN(classes_partition, "it applies to partition = classes or classes-random")},
    {"data", "samples_per_client", FL_KEY_INT, F(data.samples_per_client), .lo = 0, .hi = 100000000, .dflt = "0",
     .help = "replicate to exactly this many examples per client (0 = split the data)"},
    {"data", "test_per_client", FL_KEY_INT, F(data.test_per_client), .lo = 0, .hi = 100000000, .dflt = "0",
     .help = "per-client test set drawn from the test set (any partition but natural)",
     WHEN(not_natural_partition, "partition = natural takes each centre's own test split")},
    {"data", "normalize", FL_KEY_CHOICE, F(data.normalize), .choices = "none|standard", .dflt = "none",
     .help = "standardize pixels with the dataset's published mean/std (not computed from the private data)"},
    {"data", "label_column", FL_KEY_TEXT, F(data.label_column), .dflt = "",
     .help = "csv: the label column, a header name or a 0-based index (negative from the end); empty: the last",
     WHEN(csv_dataset, "it applies to dataset = csv:...")},
    {"data", "feature_columns", FL_KEY_TEXT, F(data.feature_columns), .dflt = "",
     .help = "csv: comma-separated names or indices of the feature columns; empty: every other column",
     WHEN(csv_dataset, "it applies to dataset = csv:...")},
    {"data", "header", FL_KEY_CHOICE, F(data.header), .choices = "auto|yes|no", .dflt = "auto",
     .help = "csv: does the first line name the columns (auto: yes when it holds a field that is not a number)",
     WHEN(csv_dataset, "it applies to dataset = csv:...")},
    {"data", "missing", FL_KEY_CHOICE, F(data.missing), .choices = "error|drop", .dflt = "error",
     .help = "csv: a row with a missing label or feature (empty, ?, NA, NaN, null) fails the load, or is dropped",
     WHEN(csv_dataset, "it applies to dataset = csv:...")},
    {"data", "test", FL_KEY_TEXT, F(data.test), .dflt = "",
     .help = "own data: a separate test set, csv:FILES or idx:FILES (empty: hold out test_fraction of each file)",
     WHEN(own_dataset, "it applies to dataset = csv:... or idx:...")},
    {"data", "test_fraction", FL_KEY_DOUBLE, F(data.test_fraction), .lo = 0.0, .hi = 0.95, .dflt = "0.2",
     .help = "own data: share of each file held out as test set by a seeded shuffle (no separate test set)",
     WHEN(own_dataset_without_test, "it applies to dataset = csv:... or idx:... without data.test")},
    {"data", "feature_mean", FL_KEY_LIST, F(data.feature_mean), .lo = -INFINITY, .hi = INFINITY, .dflt = "",
     .help = "own data, normalize = standard: public constants (1 value, or one per feature), never computed from the private data",
     WHEN(own_dataset_standardized, "it applies to normalize = standard with dataset = csv:... or idx:...")},
    {"data", "feature_std", FL_KEY_LIST, F(data.feature_std), .lo = 0, .hi = INFINITY, .lo_open = 1, .dflt = "",
     .help = "own data, normalize = standard: public constants (1 value, or one per feature)",
     WHEN(own_dataset_standardized, "it applies to normalize = standard with dataset = csv:... or idx:...")},
    {"data", "source_rows", FL_KEY_LIST, F(data.source_rows), .lo = 1, .hi = INT32_MAX, .whole = 1, .dflt = "",
     .help = "own data: the usable rows (images) of each listed file (idx: folder); with them a process may lack the other sites' files (a deployment: dpfl serve needs none, dpfl join --client K only file K)",
     WHEN(own_dataset, "it applies to dataset = csv:... or idx:...")},
    {"data", "classes", FL_KEY_INT, F(data.classes), .lo = 0, .hi = 65536, .dflt = "0",
     .help = "own data: the number of classes (0: the largest label + 1); needed with files absent",
     WHEN(own_dataset, "it applies to dataset = csv:... or idx:...")},
    {"data", "data_dir", FL_KEY_TEXT, F(data.data_dir), .dflt = "",
     .help = "folder holding mnist/ (empty: $DPFL_DATA/cache, else $XDG_CACHE_HOME/dpfl or ~/.cache/dpfl)"},
    {"model", "arch", FL_KEY_TEXT, F(model.arch), .dflt = "mlp:784-200-10",
     .help = "logreg | mlp:784-600-100-10[:nobias] | cnn-mnist | cnn-mcmahan | cnn-small | cnn-tf-cifar | resnet20-gn | "
             "resnet18-gn | privatefl-dnn | privatefl-purchase | net:LAYERS, any layer list, e.g. "
             "net:conv8k3p1,relu,pool2,fc10 from convN[kK][sS][pP][nb] (N channels, K x K kernel, stride S, padding P), "
             "poolK[sS][pP], fcN[nb], relu, tanh, sigmoid, flatten, dropP (nb: no bias; a last item mse: "
             "squared-error loss)"},
    {"model", "transform", FL_KEY_CHOICE, F(model.transform), .choices = "none|affine|sigmoid|tanh|relu", .dflt = "none",
     .help = "PrivateFL: each client's own input transform a (.) x + b, trained with the model, never sent; sigmoid, tanh, relu: that function of a (.) x + b (the paper's Table 1 ablation)"},
    {"model", "transform_shape", FL_KEY_NAME, F(model.transform_shape), .choices = "nc|np|cn|cc|cp|pn|pc|pp", .dflt = "cp",
     .help = "a and b of the transform: two of n (none), c (per channel), p (per pixel); cp = the paper's",
     WHEN(input_transform, "it applies to transform = affine")},
    {"fl", "algorithm", FL_KEY_CHOICE, F(fl.algorithm), .choices = "custom|fedavg|dp-fedavg|dp-fedavg-adaptive|dp-sgd|e2e|prifedsync|trusted-curator|naive-e2e", .dflt = "custom",
     .help = "a preset: expands into the settings below (keys you set win); trusted-curator and naive-e2e: the thesis's baselines (its Algorithms 7 and 8; docs/privacy.md)"},
    {"fl", "rounds", FL_KEY_INT, F(fl.rounds), .lo = 1, .hi = 100000000, .dflt = "10",
     .help = "communication rounds"},
    {"fl", "sampling", FL_KEY_CHOICE, F(fl.sampling), .choices = "poisson|fixed|all|cross-device", .dflt = "all",
     .help = "client sampling per round; cross-device: shuffled disjoint cohorts of client_rate x clients, each client in exactly `participations` rounds (PrivateFL Table 11; no sampling amplification)"},
    {"fl", "client_rate", FL_KEY_DOUBLE, F(fl.client_rate), .lo = 0, .hi = 1, .dflt = "0.1",
     .help = "Poisson client sampling probability; cross-device: the cohort's share of the clients",
     WHEN(rate_sampling, "it applies to sampling = poisson or cross-device")},
    {"fl", "participations", FL_KEY_INT, F(fl.participations), .lo = 1, .hi = 1000000, .dflt = "1",
     .help = "cross-device: the rounds each client takes part in (rounds = participations / client_rate)",
     WHEN(cross_device_sampling, "it applies to sampling = cross-device")},
    {"fl", "clients_per_round", FL_KEY_INT, F(fl.clients_per_round), .lo = 1, .hi = 1000000, .dflt = "10",
     .help = "clients per round (sampling = fixed)",
     WHEN(fixed_sampling, "it applies to sampling = fixed")},
    {"fl", "local_epochs", FL_KEY_INT, F(fl.local_epochs), .lo = 0, .hi = 100000, .dflt = "1",
     .help = "local epochs per round (when local_steps = 0)",
     WHEN(epochs_count, "local_steps > 0 takes precedence")},
    {"fl", "local_steps", FL_KEY_INT, F(fl.local_steps), .lo = 0, .hi = 100000000, .dflt = "0",
     .help = "local steps per round (0 = use local_epochs)"},
    {"fl", "batch", FL_KEY_INT, F(fl.batch), .lo = 1, .hi = 1000000, .dflt = "32",
     .help = "local batch size"},
    {"fl", "lr", FL_KEY_DOUBLE, F(fl.lr), .lo = 0, .hi = 1e6, .dflt = "0.05",
     .help = "local learning rate"},
    {"fl", "optimizer", FL_KEY_CHOICE, F(fl.optimizer), .choices = "sgd|adam|adamw", .dflt = "sgd",
     .help = "local optimizer"},
    {"fl", "momentum", FL_KEY_DOUBLE, F(fl.momentum), .lo = 0, .hi = 1, .dflt = "0",
     .help = "SGD momentum",
     WHEN(sgd_optimizer, "it applies to optimizer = sgd (Adam has its own moments)")},
    {"fl", "weight_decay", FL_KEY_DOUBLE, F(fl.weight_decay), .lo = 0, .hi = 1e3, .dflt = "0",
     .help = "weight decay"},
    {"fl", "schedule", FL_KEY_CHOICE, F(fl.schedule), .choices = "constant|step|exp", .dflt = "constant",
     .help = "learning-rate schedule over rounds"},
    {"fl", "lr_gamma", FL_KEY_DOUBLE, F(fl.lr_gamma), .lo = 0, .hi = 1e3, .dflt = "1",
     .help = "schedule factor",
     WHEN(varying_lr, "it applies to schedule = step or exp")},
    {"fl", "lr_step", FL_KEY_INT, F(fl.lr_step), .lo = 1, .hi = 100000000, .dflt = "1",
     .help = "rounds between steps (schedule = step)",
     WHEN(step_lr, "it applies to schedule = step")},
    {"fl", "eta", FL_KEY_DOUBLE, F(fl.eta), .lo = 0, .hi = 10, .dflt = "1",
     .help = "server mixing rate"},
    {"fl", "client_rate_schedule", FL_KEY_SCHEDULE, F(fl.client_rate_schedule), .lo = 0, .hi = 1, .lo_open = 1, .dflt = "",
     .help = "ROUND:P, ... client_rate from each round on",
     WHEN(poisson_sampling, "it applies to sampling = poisson")},
    {"fl", "clients_per_round_schedule", FL_KEY_SCHEDULE, F(fl.clients_per_round_schedule), .lo = 1, .hi = 1000000, .whole = 1, .dflt = "",
     .help = "ROUND:M, ... clients_per_round from each round on",
     WHEN(fixed_sampling, "it applies to sampling = fixed")},
    {"fl", "weighting", FL_KEY_CHOICE, F(fl.weighting), .choices = "size|uniform", .dflt = "size",
     .help = "FedAvg weights: client size or uniform"},
    {"fl", "client_state", FL_KEY_CHOICE, F(fl.client_state), .choices = "reset|keep", .dflt = "reset",
     .help = "local optimizer state (momentum, Adam moments and step count): fresh each round, or kept per client across its rounds"},
    {"fl", "client_state_max_mb", FL_KEY_INT, F(fl.client_state_max_mb), .lo = 1, .hi = 1 << 30, .dflt = "8192",
     .help = "per-client state (kept optimizer state, helper models) held in memory; above it, clients a round does not train are paged out to their files in the run folder"},
    {"fl", "personalization", FL_KEY_CHOICE, F(fl.personalization), .choices = "none|helper", .dflt = "none",
     .help = "helper: each client keeps and uses its own helper model (1 - helper_alpha) w_i + helper_alpha w_global (PriFedSync)"},
    {"fl", "helper_alpha", FL_KEY_DOUBLE, F(fl.helper_alpha), .lo = 0, .hi = 1, .dflt = "0.1",
     .help = "personalization = helper: weight of the global model in a client's helper model",
     WHEN(helper_models, "it applies to personalization = helper")},
    {"fl", "personal", FL_KEY_LAYERS, F(fl.personal), .dflt = "",
     .help = "parameters that stay with each client and are never sent, clipped, noised or aggregated: a comma list of "
             "norm (every GroupNorm layer: FedGN / FedBN), head (the last layer with parameters: PP-SGD's personal "
             "head), or 0-based layer positions in model.arch; empty: none (the input transform is always personal)"},
    {"fl", "scaffold", FL_KEY_CHOICE, F(fl.scaffold), .choices = "no|yes", .dflt = "no",
     .help = "SCAFFOLD's control variates (option II; DP-SCAFFOLD with record_dp, Noble et al. 2022): each local step "
             "corrected by c - c_i, c_i updated from the client's own sent update; plain SGD, not with client_dp"},
    {"fl", "target_accuracy", FL_KEY_DOUBLE, F(fl.target_accuracy), .lo = 0, .hi = 1, .dflt = "0.9",
     .help = "summary.json reports the first evaluated round whose mean accuracy reaches this"},
    {"record_dp", "enabled", FL_KEY_CHOICE, F(record_dp.enabled), .choices = "no|yes", .dflt = "no",
     .help = "DP-SGD inside every client"},
    {"record_dp", "clip", FL_KEY_DOUBLE, F(record_dp.clip), .lo = 1e-12, .hi = INFINITY, .dflt = "1",
     .help = "per-example L2 clipping norm C"},
    {"record_dp", "clip_decay", FL_KEY_DOUBLE, F(record_dp.clip_decay), .lo = 0, .hi = 1, .dflt = "0",
     .help = "the thesis's clipping-threshold decay (Algorithm 6): round t clips to max(clip (1 - clip_decay)^(t-1), "
             "clip_min); a public schedule, so the noise std follows z C_t and epsilon is unchanged (must be < 1)"},
    {"record_dp", "clip_min", FL_KEY_DOUBLE, F(record_dp.clip_min), .lo = 0, .hi = INFINITY, .dflt = "0",
     .help = "clip_decay: the floor of the decayed clip (0: none)",
     WHEN(clip_decays, "it applies to clip_decay > 0")},
    {"record_dp", "noise", FL_KEY_DOUBLE, F(record_dp.noise), .lo = 0, .hi = 1e6, .dflt = "0",
     .help = "noise multiplier z (std / sensitivity); 0 = calibrate from target_epsilon"},
    {"record_dp", "target_epsilon", FL_KEY_DOUBLE, F(record_dp.target_epsilon), .lo = 0, .hi = 1e6, .dflt = "0",
     .help = "record-level epsilon target (0 = none)"},
    {"record_dp", "delta", FL_KEY_DOUBLE, F(record_dp.delta), .lo = 1e-300, .hi = 0.999999, .dflt = "1e-5",
     .help = "record-level delta"},
    {"record_dp", "sampler", FL_KEY_CHOICE, F(record_dp.sampler), .choices = "poisson|fixed", .dflt = "poisson",
     .help = "batch sampler (poisson: add-remove; fixed: replace-one)"},
    {"record_dp", "accountant", FL_KEY_CHOICE, F(record_dp.accountant), .choices = "rdp|pld", .dflt = "rdp",
     .help = "record-level accountant"},
    {"record_dp", "adjacency", FL_KEY_CHOICE, F(record_dp.adjacency), .choices = "auto|add-remove|replace-one", .dflt = "auto",
     .help = "record adjacency (must match the sampler)"},
    {"record_dp", "per_layer", FL_KEY_CHOICE, F(record_dp.per_layer), .choices = "no|yes", .dflt = "no",
     .help = "clip each layer to C*sqrt(share) instead of the whole gradient"},
    {"record_dp", "secure_mode", FL_KEY_CHOICE, F(record_dp.secure_mode), .choices = "no|yes", .dflt = "no",
     .help = "exact discrete-Gaussian noise on a grid (RDP accountant only)"},
    {"record_dp", "e2e", FL_KEY_CHOICE, F(record_dp.e2e), .choices = "no|yes", .dflt = "no",
     .help = "also report the client-level guarantee implied by the same noise"},
    {"record_dp", "budgets", FL_KEY_CHOICE, F(record_dp.budgets), .choices = "none|threelevels|mixgauss|pareto|file|class", .dflt = "none",
     .help = "rPDP-FL: a privacy budget per record (non-uniform Poisson sampling; noise calibrated to budget_max)"},
    {"record_dp", "budget_file", FL_KEY_TEXT, F(record_dp.budget_file), .dflt = "",
     .help = "budgets = file: one epsilon per training record in the dataset's order, or record_id,epsilon rows",
     WHEN(budgets_from_file, "it applies to budgets = file")},
    {"record_dp", "class_budgets", FL_KEY_LIST, F(record_dp.class_budgets), .lo = 0, .hi = INFINITY, .lo_open = 1, .dflt = "",
     .help = "budgets = class: E0,E1,... one epsilon per class",
     WHEN(budgets_per_class, "it applies to budgets = class")},
    {"record_dp", "budget_min", FL_KEY_DOUBLE, F(record_dp.budget_min), .lo = 1e-6, .hi = 1e6, .dflt = "0.1",
     .help = "generated budgets are clipped to [budget_min, budget_max]",
     WHEN(record_budgets, "it applies to record_dp.budgets")},
    {"record_dp", "budget_max", FL_KEY_DOUBLE, F(record_dp.budget_max), .lo = 1e-6, .hi = 1e6, .dflt = "10",
     .help = "the largest budget: the noise makes a record sampled with p = 1 meet it",
     WHEN(record_budgets, "it applies to record_dp.budgets")},
    {"record_dp", "budget_shuffle", FL_KEY_CHOICE, F(record_dp.budget_shuffle), .choices = "no|yes", .dflt = "yes",
     .help = "threelevels: shuffled over records (yes) or the published record order (no)",
     WHEN(three_level_budgets, "it applies to budgets = threelevels")},
    {"record_dp", "budget_policy", FL_KEY_CHOICE, F(record_dp.budget_policy), .choices = "rpdp|minimum|dropout|filter", .dflt = "rpdp",
     .help = "rpdp: a rate per budget; minimum: everyone at the smallest budget; dropout: below the mean dropped, the rest at the mean; filter: every record in every step, clipped to what its budget has left (Feldman-Zrnic individual RDP filter)",
     WHEN(record_budgets, "it applies to record_dp.budgets")},
    {"record_dp", "filter_order", FL_KEY_DOUBLE, F(record_dp.filter_order), .lo = 0, .hi = 1e6, .dflt = "0",
     .help = "budget_policy = filter: the RDP order alpha of the filter (0 = 1 + 2 ln(1/delta) / smallest budget)",
     WHEN(budget_filter, "it applies to budget_policy = filter")},
    {"record_dp", "budget_rounds", FL_KEY_INT, F(record_dp.budget_rounds), .lo = 0, .hi = 100000000, .dflt = "0",
     .help = "rounds the per-record rates are planned for (0 = fl.rounds); later rounds opt records out"},
    {"record_dp", "two_stage_bound", FL_KEY_CHOICE, F(record_dp.two_stage_bound), .choices = "published|pld", .dflt = "published",
     .help = "rounds with client rate lambda: the paper's RDP bound (joint convexity) or the PLD of the two-stage round (tightest); both for participation that is visible, as it is in dpfl",
     WHEN(record_budgets, "it applies to record_dp.budgets")},
    {"client_dp", "enabled", FL_KEY_CHOICE, F(client_dp.enabled), .choices = "no|yes", .dflt = "no",
     .help = "server clips and noises client updates (client-level DP)"},
    {"client_dp", "clip", FL_KEY_DOUBLE, F(client_dp.clip), .lo = 1e-12, .hi = 1e12, .dflt = "1",
     .help = "L2 bound S on each client update (initial S for adaptive)"},
    {"client_dp", "clip_strategy", FL_KEY_CHOICE, F(client_dp.clip_strategy), .choices = "fixed|per-step|adaptive|median", .dflt = "fixed",
     .help = "how S is chosen (median is NOT differentially private)"},
    {"client_dp", "noise", FL_KEY_DOUBLE, F(client_dp.noise), .lo = 0, .hi = 1e6, .dflt = "0",
     .help = "noise multiplier z (std / S on the sum); 0 = calibrate from target_epsilon"},
    {"client_dp", "target_epsilon", FL_KEY_DOUBLE, F(client_dp.target_epsilon), .lo = 0, .hi = 1e6, .dflt = "0",
     .help = "client-level epsilon target (0 = none)"},
    {"client_dp", "delta", FL_KEY_DOUBLE, F(client_dp.delta), .lo = 1e-300, .hi = 0.999999, .dflt = "1e-5",
     .help = "client-level delta"},
    {"client_dp", "accountant", FL_KEY_CHOICE, F(client_dp.accountant), .choices = "rdp|pld", .dflt = "rdp",
     .help = "client-level accountant"},
    {"client_dp", "target_quantile", FL_KEY_DOUBLE, F(client_dp.target_quantile), .lo = 0, .hi = 1, .dflt = "0.5",
     .help = "adaptive clipping: target quantile of update norms",
     WHEN(adaptive_clipping, "it applies to clip_strategy = adaptive")},
    {"client_dp", "clip_lr", FL_KEY_DOUBLE, F(client_dp.clip_lr), .lo = 0, .hi = 100, .dflt = "0.2",
     .help = "adaptive clipping: geometric learning rate",
     WHEN(adaptive_clipping, "it applies to clip_strategy = adaptive")},
    {"client_dp", "quantile_noise", FL_KEY_DOUBLE, F(client_dp.quantile_noise), .lo = 0, .hi = 1e9, .dflt = "0",
     .help = "adaptive clipping: noise std on the unclipped count (0 = expected clients / 20)",
     WHEN(adaptive_clipping, "it applies to clip_strategy = adaptive")},
    {"client_dp", "dropout", FL_KEY_DOUBLE, F(client_dp.dropout), .lo = 0, .hi = 1, .dflt = "0",
     .help = "probability that a sampled client drops out (noise is not reduced)"},
    {"client_dp", "noise_schedule", FL_KEY_SCHEDULE, F(client_dp.noise_schedule), .lo = 0, .hi = 1e6, .lo_open = 1, .dflt = "",
     .help = "ROUND:Z, ... noise from each round on"},
    {"client_dp", "per_layer", FL_KEY_CHOICE, F(client_dp.per_layer), .choices = "no|yes", .dflt = "no",
     .help = "clip each layer to S*sqrt(share) instead of the whole update"},
    {"client_dp", "mechanism", FL_KEY_CHOICE, F(client_dp.mechanism), .choices = "gaussian|ddp", .dflt = "gaussian",
     .help = "gaussian: the server adds the noise (trusted server); ddp: distributed DP, every client adds Skellam noise to its clipped, rotated, rounded update and the server learns only the secure-aggregation sum"},
    {"client_dp", "ddp_bits", FL_KEY_INT, F(client_dp.ddp_bits), .lo = 0, .hi = 32, .dflt = "0",
     .help = "ddp: the secure sum is taken modulo 2^bits (0 = the smallest with overflow probability <= 1e-9 per round)",
     WHEN(distributed_dp, "it applies to mechanism = ddp")},
    {"client_dp", "ddp_inflation", FL_KEY_DOUBLE, F(client_dp.ddp_inflation), .lo = 1e-6, .hi = 1, .dflt = "0.01",
     .help = "ddp: the integer grid is fine enough that rounding adds at most this share to the L2 sensitivity",
     WHEN(distributed_dp, "it applies to mechanism = ddp")},
    {"client_dp", "ddp_tolerated_dropout", FL_KEY_DOUBLE, F(client_dp.ddp_tolerated_dropout), .lo = 0, .hi = 0.49, .dflt = "0.1",
     .help = "ddp: secure aggregation threshold t = ceil((1 - f) n) of a round of n clients; each adds 1/t of the noise, and a round with fewer than t survivors releases nothing",
     WHEN(distributed_dp, "it applies to mechanism = ddp")},
    {"client_dp", "ddp_secagg", FL_KEY_CHOICE, F(client_dp.ddp_secagg), .choices = "no|yes", .dflt = "yes",
     .help = "ddp: run secure aggregation (pairwise masks, Shamir shares, dropout recovery) in process; no adds the wrapped vectors directly (the same sum, faster)",
     WHEN(distributed_dp, "it applies to mechanism = ddp")},
    {"run", "seed", FL_KEY_SEED, F(run.seed), .dflt = "",
     .help = "integer: reproducible mode (not for deployment); empty: OS entropy"},
    {"run", "allow_large_delta", FL_KEY_CHOICE, F(run.allow_large_delta), .choices = "no|yes", .dflt = "no",
     .help = "accept delta >= 1/n records (1/K clients): such a delta allows releasing a whole record"},
    {"run", "threads", FL_KEY_INT, F(run.threads), .lo = 1, .hi = 256, .dflt = "2",
     .help = "worker threads"},
    {"run", "eval_every", FL_KEY_INT, F(run.eval_every), .lo = 1, .hi = 100000000, .dflt = "1",
     .help = "evaluate every N rounds (and at the last)"},
    {"run", "emd", FL_KEY_CHOICE, F(run.emd), .choices = "auto|no|yes", .dflt = "auto",
     .help = "PrivateFL's EMD between the clients' training losses at evaluated rounds (diagnostics.jsonl, the "
             "report's plot); auto: with model.transform"},
};
#undef WHEN
#undef F
_Static_assert(sizeof fl_config_keys / sizeof fl_config_keys[0] == FL_CONFIG_NKEYS, "one row per key");
_Static_assert(FL_CONFIG_NKEYS <= sizeof(((dpfl_config *)0)->user_set), "dpfl_config.user_set has a flag per key");

/* ------------------------------------------------------------------------------------------ presets */
const char *const fl_config_presets[FL_CONFIG_NPRESETS][9] = {
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
    /* the thesis's trusted curator (its Algorithm 7): plain local training, m = C K clients without replacement, each
     * update clipped to a constant S and the sum noised by the server, which sees every raw update */
    {"record_dp.enabled=no", "client_dp.enabled=yes", "fl.sampling=fixed", "client_dp.clip_strategy=fixed",
     "client_dp.mechanism=gaussian", NULL},
    /* the thesis's naive end-to-end DP (its Algorithm 8): DP-SGD in every client and the trusted curator's noise on
     * top, each accounted on its own */
    {"record_dp.enabled=yes", "record_dp.sampler=poisson", "client_dp.enabled=yes", "fl.sampling=fixed",
     "client_dp.clip_strategy=fixed", "client_dp.mechanism=gaussian", NULL},
};


const char *dpfl_config_preset_scope(const dpfl_config *c, int record, int client)
{
    const int central = client && c->client_dp.mechanism == DPFL_CLIENT_MECH_GAUSSIAN;
    if (c->fl.algorithm == DPFL_ALGO_TRUSTED_CURATOR && central && !record)
        return "trusted curator (the thesis's Algorithm 7): the client-level epsilon covers everyone who sees the "
               "released models, NOT the server, which sees each client's raw update; no record-level guarantee "
               "(the thesis's \"No Guarantees\")";
    if (c->fl.algorithm == DPFL_ALGO_NAIVE_E2E && central && record)
        return "naive end-to-end DP (the thesis's Algorithm 8): the record-level epsilon holds against everyone, the "
               "server included (each client's own DP-SGD noise); the client-level epsilon, from the server's added "
               "noise, against observers of the released models";
    return NULL;
}
