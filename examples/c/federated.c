/* A federated run driven from C (include/dpfl/fl.h): the caller's arrays become a dataset
 * (dpfl_dataset_from_arrays), the settings are given as "section.key=value" strings (the keys of `dpfl train
 * --help`; no INI file), and the program runs the rounds itself, calling a function of its own after each one.
 *
 *   cc -std=c11 federated.c $(pkg-config --cflags --libs dpfl) -o federated
 *   ./federated [BUDGET]             (record-level epsilon budget at delta 1e-5; default: none)
 *
 * 5 clients hold 400 records each of three Gaussian blobs in 10 dimensions; every round each client takes 10
 * DP-SGD steps (Poisson batches of expected size 32, clip 1, noise multiplier 1.2) from the global model and the
 * server averages the updates.  Before a round is trained, its privacy cost is charged to a copy of the ledger:
 * a round that would take epsilon past BUDGET is never trained (what `dpfl train` does with a target_epsilon).
 * After each round on_round() gets the round's metrics and the record-level epsilon so far; returning non-zero
 * from it would stop the run. */
#include <dpfl/fl.h>

#include <stdio.h>
#include <stdlib.h>

enum { DIM = 10, CLASSES = 3, NTRAIN = 2000, NTEST = 1000 };

static const char *const settings[] = {
    "data.clients=5",       "model.arch=mlp:10-32-3", "fl.rounds=10",          "fl.sampling=all",
    "fl.local_steps=10",    "fl.batch=32",            "fl.lr=0.5",             "record_dp.enabled=yes",
    "record_dp.clip=1",     "record_dp.noise=1.2",    "record_dp.delta=1e-5",  "run.threads=2",
};

/* x in the shortest "%g" form that reads back as the same double (0.1, not 0.10000000000000001) */
static const char *shortest(double x, char *buf, size_t cap)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, cap, "%.*g", prec, x);
        if (strtod(buf, NULL) == x) break;
    }
    return buf;
}

/* The per-round function: here it prints; a program could log, checkpoint or stop (non-zero). */
static int on_round(void *ctx, const dpfl_round_metrics *m, const dpfl_record_report *rec)
{
    (void)ctx;
    char q[32];
    printf("round %d: clients %d, test accuracy %.4f, record-level epsilon %.12g (worst client %d: q %s, "
           "%lld steps)\n",
           m->round, m->clients, m->test_accuracy, rec->epsilon, rec->worst_client,
           shortest(rec->worst_q, q, sizeof q), (long long)rec->worst_steps);
    return 0;
}

typedef int (*round_fn)(void *ctx, const dpfl_round_metrics *m, const dpfl_record_report *rec);

/* Rounds 1..rounds of sim, each checked against budget (<= 0: none) before it trains. */
static dpfl_status run_rounds(dpfl_sim *sim, const dpfl_partition *part, int32_t rounds, double budget,
                              round_fn fn, void *ctx, dpfl_error *err)
{
    dpfl_ledger trial;
    dpfl_status st = dpfl_ledger_init(&trial, part->clients, err);
    dpfl_server *sv = dpfl_sim_server(sim); /* the server's side: its ledger and what a round charges */
    const dpfl_record_accounting ra = dpfl_record_dp_accounting(dpfl_sim_record_dp(sim)); /* what the clients run */
    for (int32_t r = 1; !st && r <= rounds; r++) {
        dpfl_record_report next, now;
        dpfl_sim_sample(sim, r, NULL); /* who takes part in round r */
        if ((st = dpfl_ledger_copy(&trial, dpfl_server_ledger(sv), err)) ||
            (st = dpfl_server_charge(sv, &trial, err)) ||
            (st = dpfl_ledger_record_epsilon(&trial, part, &ra, &next, NULL, err)))
            break;
        if (budget > 0 && next.epsilon > budget) {
            printf("stopped before round %d: its epsilon would be %.6g > budget %g\n", r, next.epsilon, budget);
            break;
        }
        dpfl_round_metrics m;
        if ((st = dpfl_sim_train(sim, r, &m, err))) break; /* trains round r and charges the sim's own ledger */
        dpfl_sim_evaluate(sim, &m);
        if ((st = dpfl_sim_epsilon(sim, &now, NULL, NULL, err))) break;
        if (fn(ctx, &m, &now)) break;
    }
    dpfl_ledger_free(&trial);
    return st;
}

/* The caller's data: example i of class i % 3 is N(mean of its class, I), class means 1.5 apart per axis. */
static void make_data(dpfl_rng *r, float *x, int32_t *y, int n)
{
    for (int i = 0; i < n; i++) {
        y[i] = i % CLASSES;
        for (int j = 0; j < DIM; j++)
            x[i * DIM + j] = (float)(dpfl_rng_gaussian(r) + (j % CLASSES == y[i] ? 1.5 : 0.0));
    }
}

int main(int argc, char **argv)
{
    const double budget = argc > 1 ? atof(argv[1]) : 0.0;
    static float xtr[NTRAIN * DIM], xte[NTEST * DIM];
    static int32_t ytr[NTRAIN], yte[NTEST];
    dpfl_error err;
    dpfl_rng data_rng, root, prng, irng;
    dpfl_dataset train = {0}, test = {0};
    dpfl_partition part = {0};
    dpfl_model model = {0};
    dpfl_sim *sim = NULL;
    float *global = NULL;
    int rc = 1;
    dpfl_rng_init_seed(&data_rng, 11); /* the data only */
    make_data(&data_rng, xtr, ytr, NTRAIN);
    make_data(&data_rng, xte, yte, NTEST);
    if (dpfl_dataset_from_arrays(xtr, ytr, NTRAIN, 1, 1, DIM, CLASSES, &train, &err) ||
        dpfl_dataset_from_arrays(xte, yte, NTEST, 1, 1, DIM, CLASSES, &test, &err))
        goto out;

    dpfl_config cfg;
    dpfl_config_defaults(&cfg);
    for (size_t i = 0; i < sizeof settings / sizeof *settings; i++)
        if (dpfl_config_set(&cfg, settings[i], &err)) goto out;
    if (dpfl_config_validate(&cfg, &err)) goto out;

    /* Noise and sampling from OS entropy (deployment); streams for the partition and the initial model. */
    if (dpfl_rng_init_os(&root, &err)) goto out;
    dpfl_rng_derive(&root, &prng, 0, 0, 1);
    dpfl_rng_derive(&root, &irng, 0, 0, 2);
    const dpfl_partition_spec spec = {.kind = DPFL_PART_IID, .clients = cfg.data.clients};
    if (dpfl_partition_make(&train, &test, &spec, &prng, &part, &err)) goto out;
    if (dpfl_model_create(cfg.model.arch, train.c, train.h, train.w, train.classes, &model, &err)) goto out;
    if (!(global = dpfl_alloc(model.nparam * sizeof *global, &err))) goto out;
    dpfl_model_init(&model, global, &irng);
    if (dpfl_sim_create(&cfg, &model, &train, &test, &part, &root, global, &sim, &err)) goto out;
    if (run_rounds(sim, &part, cfg.fl.rounds, budget, on_round, NULL, &err)) goto out;
    char z[32];
    printf("record-level DP-SGD: noise multiplier %s, clip %g, delta %g\n", shortest(cfg.record_dp.noise, z, sizeof z),
           cfg.record_dp.clip, cfg.record_dp.delta);
    rc = 0;
out:
    if (rc) fprintf(stderr, "federated: %s\n", err.msg);
    dpfl_sim_free(sim);
    dpfl_free(global);
    dpfl_model_free(&model);
    dpfl_partition_free(&part);
    dpfl_dataset_free(&train);
    dpfl_dataset_free(&test);
    return rc;
}
