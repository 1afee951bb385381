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

/* ------------------------------------------------------------------------------------------ configuration */
typedef struct {
    /* [data] */
    char dataset[32];   /* mnist | fashion-mnist | heart | synthetic */
    char partition[16]; /* iid | shards | dirichlet | classes | natural */
    int32_t clients;
    int32_t shards;
    double beta;
    int32_t classes_per_client;
    int32_t samples_per_client;
    int32_t test_per_client;
    char data_dir[256];
    /* [model] */
    char arch[128];
    /* [fl] */
    int32_t rounds;
    char sampling[16]; /* poisson | fixed | all */
    double client_rate;
    int32_t clients_per_round;
    int32_t local_epochs; /* used when local_steps == 0 */
    int32_t local_steps;
    int32_t batch;
    double lr;
    char optimizer[16]; /* sgd | adam | adamw */
    double momentum;
    double weight_decay;
    char schedule[16]; /* constant | step | exp, in rounds */
    double lr_gamma;
    int32_t lr_step;
    double eta;         /* server mixing rate: w <- (1 - eta) w + eta * mean(local) */
    char weighting[16]; /* size | uniform */
    /* [run] */
    char seed[24]; /* "" = OS entropy (deployment); a number = reproducible mode, not for deployment */
    int32_t threads;
    int32_t eval_every;
} dpfl_config;

void dpfl_config_defaults(dpfl_config *c);
/* Load an INI file over the defaults. Unknown sections or keys and bad values fail naming file:line, the key
 * and the valid choices or range. */
dpfl_status dpfl_config_load(dpfl_config *c, const char *path, dpfl_error *err);
/* Apply one "section.key=value" override (same validation). */
dpfl_status dpfl_config_set(dpfl_config *c, const char *assignment, dpfl_error *err);
/* Cross-key checks (e.g. clients_per_round <= clients, batch >= 1). */
dpfl_status dpfl_config_validate(const dpfl_config *c, dpfl_error *err);
/* The resolved config as INI text (every key), malloc'd. */
char *dpfl_config_to_ini(const dpfl_config *c);
/* One line per key with its range or choices, for --help. */
void dpfl_config_print_keys(FILE *f);

/* ------------------------------------------------------------------------------------------ round loop */
typedef struct {
    int32_t round;
    int32_t clients;  /* clients that took part */
    int64_t examples; /* examples processed in local training */
    double train_loss;
    double test_accuracy, test_loss; /* NAN when not evaluated this round */
    double client_acc_mean, client_acc_std; /* per-client test sets; NAN when the partition has none */
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
/* Global model on the global test set, and per-client test sets when the partition has them. */
void dpfl_sim_evaluate(dpfl_sim *s, dpfl_round_metrics *m);

/* ------------------------------------------------------------------------------------------ run driver */
typedef struct {
    const char *out_dir; /* created if absent */
    int quiet;           /* no progress line */
} dpfl_run_options;

/* Everything `dpfl train` does after parsing: load data, partition, train, write the run directory. */
dpfl_status dpfl_run(const dpfl_config *cfg, const dpfl_run_options *opt, dpfl_error *err);

#endif
