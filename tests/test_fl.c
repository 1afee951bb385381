#include "testutil.h"
#include "fixtures.h"
#include "dpfl/run.h"

#include <dirent.h>
#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ config */
static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void config_loads_and_overrides(void **state)
{
    (void)state;
    const char *path = "/tmp/dpfl_test_cfg.ini";
    write_file(path, "[data]\ndataset = synthetic\nclients = 7\n\n[fl]\nrounds = 3\nsampling = poisson\n"
                     "client_rate = 0.5\nlr = 0.2\n");
    dpfl_config c;
    dpfl_config_defaults(&c);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_OK);
    assert_string_equal(c.data.dataset, "synthetic");
    assert_int_equal(c.data.clients, 7);
    assert_close(c.fl.client_rate, 0.5, 0);
    assert_int_equal(dpfl_config_set(&c, "fl.rounds=11", &err), DPFL_OK);
    assert_int_equal(c.fl.rounds, 11);
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
    /* the resolved INI reloads to the same config */
    char *ini = dpfl_config_to_ini(&c);
    write_file(path, ini);
    free(ini);
    dpfl_config d;
    dpfl_config_defaults(&d);
    assert_int_equal(dpfl_config_load(&d, path, &err), DPFL_OK);
    assert_memory_equal(&c, &d, offsetof(dpfl_config, user_set)); /* the settings, not who set them */
    unlink(path);
}

/* Choices are parsed once into enums: every value of every choice key maps to its enum, names itself back
 * (dpfl_config_choice, config.ini) and reloads to the same struct. */
static void config_choices_are_typed_and_round_trip(void **state)
{
    (void)state;
    struct { const char *key, *value; int want; } cases[] = {
        {"fl.sampling", "poisson", DPFL_SAMPLE_POISSON}, {"fl.sampling", "fixed", DPFL_SAMPLE_FIXED},
        {"fl.sampling", "all", DPFL_SAMPLE_ALL},
        {"data.partition", "shards", DPFL_PART_SHARDS}, {"data.partition", "classes", DPFL_PART_CLASSES},
        {"fl.optimizer", "adamw", DPFL_OPT_ADAMW}, {"fl.schedule", "exp", DPFL_SCHED_EXP},
        {"fl.weighting", "uniform", DPFL_WEIGHT_UNIFORM}, {"fl.client_state", "keep", DPFL_STATE_KEEP},
        {"record_dp.sampler", "fixed", DPFL_BATCH_FIXED}, {"record_dp.accountant", "pld", DPFL_ACC_PLD},
        {"record_dp.adjacency", "replace-one", DPFL_RADJ_REPLACE_ONE},
        {"client_dp.clip_strategy", "per-step", DPFL_CLIP_PER_STEP},
        {"client_dp.clip_strategy", "median", DPFL_CLIP_MEDIAN}, {"client_dp.accountant", "pld", DPFL_ACC_PLD},
        {"record_dp.enabled", "yes", 1}, {"client_dp.per_layer", "yes", 1}, {"run.allow_large_delta", "no", 0},
        {"client_dp.mechanism", "ddp", DPFL_CLIENT_MECH_DDP}, {"client_dp.mechanism", "gaussian", DPFL_CLIENT_MECH_GAUSSIAN},
        {"record_dp.two_stage_bound", "pld", DPFL_TWO_STAGE_PLD}, {"model.transform", "tanh", DPFL_TRANSFORM_TANH},
        {"data.header", "no", DPFL_HEADER_NO}, {"data.missing", "drop", DPFL_MISSING_DROP},
    };
    const char *path = "/tmp/dpfl_test_cfg_choices.ini";
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dpfl_config c, d;
        dpfl_config_defaults(&c);
        fixture_set(&c, cases[i].key, cases[i].value);
        int got = !strcmp(cases[i].key, "fl.sampling")               ? (int)c.fl.sampling
                  : !strcmp(cases[i].key, "data.partition")          ? (int)c.data.partition
                  : !strcmp(cases[i].key, "fl.optimizer")            ? (int)c.fl.optimizer
                  : !strcmp(cases[i].key, "fl.schedule")             ? (int)c.fl.schedule
                  : !strcmp(cases[i].key, "fl.weighting")            ? (int)c.fl.weighting
                  : !strcmp(cases[i].key, "fl.client_state")         ? (int)c.fl.client_state
                  : !strcmp(cases[i].key, "record_dp.sampler")       ? (int)c.record_dp.sampler
                  : !strcmp(cases[i].key, "record_dp.accountant")    ? (int)c.record_dp.accountant
                  : !strcmp(cases[i].key, "record_dp.adjacency")     ? (int)c.record_dp.adjacency
                  : !strcmp(cases[i].key, "client_dp.clip_strategy") ? (int)c.client_dp.clip_strategy
                  : !strcmp(cases[i].key, "client_dp.accountant")    ? (int)c.client_dp.accountant
                  : !strcmp(cases[i].key, "record_dp.enabled")       ? c.record_dp.enabled
                  : !strcmp(cases[i].key, "client_dp.per_layer")     ? c.client_dp.per_layer
                  : !strcmp(cases[i].key, "client_dp.mechanism")     ? (int)c.client_dp.mechanism
                  : !strcmp(cases[i].key, "record_dp.two_stage_bound") ? (int)c.record_dp.two_stage_bound
                  : !strcmp(cases[i].key, "model.transform")         ? (int)c.model.transform
                  : !strcmp(cases[i].key, "data.header")             ? (int)c.data.header
                  : !strcmp(cases[i].key, "data.missing")            ? (int)c.data.missing
                                                                     : c.run.allow_large_delta;
        assert_int_equal(got, cases[i].want);
        assert_string_equal(dpfl_config_choice(&c, cases[i].key), cases[i].value);
        char *ini = dpfl_config_to_ini(&c);
        char line[128];
        snprintf(line, sizeof line, "%s = %s\n", strchr(cases[i].key, '.') + 1, cases[i].value);
        assert_non_null(strstr(ini, line));
        write_file(path, ini);
        free(ini);
        dpfl_config_defaults(&d);
        dpfl_error err;
        assert_int_equal(dpfl_config_load(&d, path, &err), DPFL_OK);
        assert_memory_equal(&c, &d, offsetof(dpfl_config, user_set)); /* the settings, not who set them */
    }
    unlink(path);
}

/* The seed, the schedules and the number lists are typed when they are read: the struct holds the numbers, and
 * config.ini holds one canonical text of them that reads back to the same struct. */
static void config_values_are_typed_once(void **state)
{
    (void)state;
    dpfl_config c, d;
    dpfl_config_defaults(&c);
    assert_false(c.run.seed.given);
    assert_int_equal(c.fl.client_rate_schedule.n, 0);
    assert_int_equal(c.data.feature_mean.n, 0);
    fixture_set(&c, "run.seed", "18446744073709551615");
    assert_true(c.run.seed.given && c.run.seed.value == UINT64_MAX);
    fixture_set(&c, "fl.client_rate_schedule", "1:0.20,3: 0.6 , 7:1");
    assert_int_equal(c.fl.client_rate_schedule.n, 3);
    assert_int_equal(c.fl.client_rate_schedule.round[1], 3);
    assert_close(c.fl.client_rate_schedule.value[1], 0.6, 0);
    assert_close(dpfl_round_client_rate(&c, 5), 0.6, 0);
    assert_close(dpfl_round_client_rate(&c, 7), 1.0, 0);
    fixture_set(&c, "data.feature_mean", "55,0.5 , -130, 1e-3");
    assert_int_equal(c.data.feature_mean.n, 4);
    assert_close(c.data.feature_mean.v[2], -130, 0);
    fixture_set(&c, "record_dp.class_budgets", "0.1, 2");
    assert_close(c.record_dp.class_budgets.v[0], 0.1, 0);
    /* fl.personal: its items, read once (src/fl/personal.c resolves them against the model) */
    fixture_set(&c, "fl.personal", "norm, head,,007");
    assert_int_equal(c.fl.personal.n, 3);
    assert_int_equal(c.fl.personal.item[0].kind, DPFL_PERSONAL_NORM);
    assert_int_equal(c.fl.personal.item[1].kind, DPFL_PERSONAL_HEAD);
    assert_int_equal(c.fl.personal.item[2].kind, DPFL_PERSONAL_POSITION);
    assert_int_equal(c.fl.personal.item[2].position, 7);
    /* run.emd: a named choice */
    assert_int_equal(c.run.emd, DPFL_EMD_AUTO);
    fixture_set(&c, "run.emd", "yes");
    assert_int_equal(c.run.emd, DPFL_EMD_YES);
    assert_string_equal(dpfl_config_choice(&c, "run.emd"), "yes");
    char *ini = dpfl_config_to_ini(&c);
    assert_non_null(ini);
    assert_non_null(strstr(ini, "\nseed = 18446744073709551615\n"));
    assert_non_null(strstr(ini, "\nclient_rate_schedule = 1:0.2, 3:0.6, 7:1\n"));
    assert_non_null(strstr(ini, "\nfeature_mean = 55, 0.5, -130, 0.001\n"));
    assert_non_null(strstr(ini, "\nclass_budgets = 0.1, 2\n"));
    assert_non_null(strstr(ini, "\nnoise_schedule = \n"));
    assert_non_null(strstr(ini, "\npersonal = norm,head,7\n"));
    assert_non_null(strstr(ini, "\nemd = yes\n"));
    const char *path = "/tmp/dpfl_test_cfg_typed.ini";
    write_file(path, ini);
    free(ini);
    dpfl_config_defaults(&d);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&d, path, &err), DPFL_OK);
    assert_memory_equal(&c, &d, offsetof(dpfl_config, user_set));
    /* an empty value is "none": OS entropy, no schedule */
    fixture_set(&c, "run.seed", "");
    fixture_set(&c, "fl.client_rate_schedule", "");
    assert_false(c.run.seed.given);
    assert_int_equal(c.fl.client_rate_schedule.n, 0);
    assert_close(dpfl_round_client_rate(&c, 5), c.fl.client_rate, 0);
    /* a list past the old 198-character line (150 values) round-trips through config.ini; past
     * DPFL_NUMBER_LIST_MAX values it is refused when read */
    char a[8200] = "data.feature_mean=";
    for (int i = 0; i < 150; i++) strcat(a, "1.25,");
    strcat(a, "0.1");
    assert_int_equal(dpfl_config_set(&c, a, &err), DPFL_OK);
    assert_int_equal(c.data.feature_mean.n, 151);
    char *ini2 = dpfl_config_to_ini(&c);
    assert_non_null(ini2);
    write_file(path, ini2);
    free(ini2);
    dpfl_config_defaults(&d);
    assert_int_equal(dpfl_config_load(&d, path, &err), DPFL_OK);
    assert_int_equal(d.data.feature_mean.n, 151);
    assert_true(d.data.feature_mean.v[150] == 0.1);
    strcpy(a, "data.feature_mean=");
    for (int i = 0; i <= DPFL_NUMBER_LIST_MAX; i++) strcat(a, "1,");
    strcat(a, "1");
    assert_int_equal(dpfl_config_set(&c, a, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.feature_mean (--set): more than 1024 values"));
    /* fl.personal: at most 63 characters (its items fit DPFL_PERSONAL_MAX), a bad item named */
    strcpy(a, "fl.personal=0");
    for (int i = 1; i < DPFL_PERSONAL_MAX; i++) strcat(a, ",0");
    assert_int_equal(strlen(a + strlen("fl.personal=")), DPFL_PERSONAL_TEXT_MAX);
    assert_int_equal(dpfl_config_set(&c, a, &err), DPFL_OK);
    assert_int_equal(c.fl.personal.n, DPFL_PERSONAL_MAX);
    strcat(a, ",");
    assert_int_equal(dpfl_config_set(&c, a, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "fl.personal (--set): value is too long (max 63 characters)"));
    assert_int_equal(dpfl_config_set(&c, "fl.personal=norm,1234567", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "fl.personal (--set): '1234567' is not norm, head or a layer position"));
    assert_int_equal(dpfl_config_set(&c, "fl.personal= head", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "starts or ends with a blank"));
    assert_int_equal(c.fl.personal.n, DPFL_PERSONAL_MAX); /* bad values are not stored */
    unlink(path);
}

/* data.dataset is typed when it is read (issue 33): its kind -- each named dataset the position of its name among
 * the key's choices, or own files / arrays -- and a list's entries as written; join --data replaces entry k. */
static void dataset_is_typed_once(void **state)
{
    (void)state;
    static dpfl_config c; /* big: not on the stack */
    dpfl_config_defaults(&c);
    assert_int_equal(c.data.kind, DPFL_DATASET_MNIST);
    dpfl_error err;
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
    /* written into the struct by hand, the text's kind (heart: its warning) and files would be stale: refused */
    strcpy(c.data.dataset, "heart");
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.dataset: 'heart' was written into the config without dpfl_config_set"));
    strcpy(c.data.dataset, "csv:a.csv");
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    fixture_set(&c, "data.dataset", "heart");
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_OK);
    const char *named[] = {"mnist", "fashion-mnist", "heart", "synthetic", "cifar10", "cifar100", "emnist-balanced",
                           "emnist-byclass", "emnist-bymerge", "emnist-digits", "emnist-letters", "emnist-mnist"};
    for (int i = 0; i < (int)(sizeof named / sizeof named[0]); i++) {
        fixture_set(&c, "data.dataset", named[i]);
        assert_int_equal(c.data.kind, (dpfl_dataset_kind)i);
        assert_int_equal(c.data.files.n, 0);
        assert_false(dpfl_config_own_data(&c));
    }
    assert_int_equal(DPFL_DATASET_EMNIST_MNIST + 1, DPFL_DATASET_CSV);
    fixture_set(&c, "data.dataset", "memory:x");
    assert_int_equal(c.data.kind, DPFL_DATASET_MEMORY);
    assert_true(dpfl_config_own_data(&c));
    fixture_set(&c, "data.dataset", "npy:x.npy,y.npy");
    assert_int_equal(c.data.kind, DPFL_DATASET_NPY);
    fixture_set(&c, "data.dataset", "idx:site-*");
    assert_int_equal(c.data.kind, DPFL_DATASET_IDX);
    assert_true(c.data.files.patterns);
    fixture_set(&c, "data.dataset", "csv:a.csv, b.csv,,c.csv,");
    assert_int_equal(c.data.kind, DPFL_DATASET_CSV);
    assert_false(c.data.files.patterns);
    assert_int_equal(c.data.files.n, 4); /* the empty entry counts; nothing after the last comma */
    assert_memory_equal(c.data.files.entry, "a.csv\0 b.csv\0\0c.csv\0", 22);
    assert_int_equal(dpfl_config_replace_dataset_file(&c, 1, "/x/mine.csv", "join", &err), DPFL_OK);
    assert_string_equal(c.data.dataset, "csv:a.csv,/x/mine.csv,,c.csv");
    assert_int_equal(c.data.files.n, 4);
    assert_string_equal(c.data.files.entry + 6, "/x/mine.csv");
    assert_int_equal(dpfl_config_replace_dataset_file(&c, 4, "d.csv", "join", &err), DPFL_EINVAL);
    assert_string_equal(err.msg, "join: --client 4, but data.dataset lists 4 files");
    fixture_set(&c, "data.dataset", "csv:");
    assert_int_equal(c.data.files.n, 0);
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.dataset: 'csv:' names no file"));
    /* a bad value leaves the kind as it was */
    assert_int_equal(dpfl_config_set(&c, "data.dataset=mnist2", &err), DPFL_EINVAL);
    assert_int_equal(c.data.kind, DPFL_DATASET_CSV);
    assert_string_equal(c.data.dataset, "csv:");
}

/* The command line wins over the file (issue 37 item 1): --set record_dp.enabled=no drops the file's record_dp keys
 * with a note (a baseline without DP from the same file), --set fl.local_steps drops the file's local_epochs,
 * --unset puts a key back to its default; two --set that conflict are still refused, saying so. */
static void command_line_wins_over_the_file(void **state)
{
    (void)state;
    const char *path = "/tmp/dpfl_test_cfg_wins.ini";
    write_file(path, "[data]\ndataset = heart\n\n[fl]\nlocal_epochs = 2\nsampling = poisson\nclient_rate = 0.5\n\n"
                     "[record_dp]\nenabled = yes\nclip = 0.5\ntarget_epsilon = 2\ndelta = 1e-3\n");
    dpfl_config c;
    dpfl_error err;
    char note[512];
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_OK);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_OK);
    assert_int_equal(dpfl_config_set_noted(&c, "record_dp.enabled=no", note, sizeof note, &err), DPFL_OK);
    assert_non_null(strstr(note, "record_dp.clip, record_dp.target_epsilon, record_dp.delta no longer apply"));
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_OK);
    assert_true(c.record_dp.clip == 1.0 && c.record_dp.target_epsilon == 0); /* back to the defaults */
    assert_int_equal(dpfl_config_set_noted(&c, "fl.local_steps=20", note, sizeof note, &err), DPFL_OK);
    assert_non_null(strstr(note, "the config's fl.local_epochs no longer applies and is dropped"));
    assert_int_equal(dpfl_config_set_noted(&c, "fl.sampling=all", note, sizeof note, &err), DPFL_OK);
    assert_non_null(strstr(note, "fl.client_rate"));
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_OK);
    assert_int_equal(c.fl.local_steps, 20);
    /* a key switched off again by the command line itself is refused, naming the command line */
    assert_int_equal(dpfl_config_set(&c, "fl.local_epochs=3", &err), DPFL_OK);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "fl.local_epochs (--set) would be ignored: local_steps > 0 takes precedence"));
    /* --unset: back to the default, no longer the user's; a whole section; the escape named in the errors */
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_OK);
    assert_int_equal(dpfl_config_set(&c, "record_dp.clip=", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "use --unset record_dp.clip"));
    assert_int_equal(dpfl_config_set(&c, "fl.local_steps=20", &err), DPFL_OK);
    assert_int_equal(dpfl_config_unset(&c, "record_dp", &err), DPFL_OK);
    assert_false(c.record_dp.enabled);
    assert_true(c.record_dp.delta == 1e-5);
    assert_int_equal(dpfl_config_unset(&c, "fl.client_rate", &err), DPFL_OK);
    assert_true(c.fl.client_rate == 0.1);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_OK);
    assert_int_equal(dpfl_config_unset(&c, "fl.algorithm", &err), DPFL_EINVAL);
    assert_int_equal(dpfl_config_unset(&c, "fl.nokey", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "unknown key fl.nokey (--unset)"));
    /* the file alone with the conflict: the error names the way out */
    write_file(path, "[fl]\nlocal_epochs = 2\nlocal_steps = 5\n");
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_OK);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "--unset fl.local_epochs"));
    unlink(path);
}

/* Issue 37 item 7: a key given twice names both lines; "[data" without "]" at its own line; a too-large integer is
 * "out of range"; item 9: config.ini holds the shortest text of each number that reads back to the same double. */
static void config_strictness_and_shortest_numbers(void **state)
{
    (void)state;
    const char *path = "/tmp/dpfl_test_cfg_strict.ini";
    dpfl_config c;
    dpfl_error err;
    write_file(path, "[data]\nclients = 4\n\n[fl]\nrounds = 3\n\n[data]\nclients = 5\n");
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.clients (/tmp/dpfl_test_cfg_strict.ini:8): set twice, first at line 2"));
    write_file(path, "[data]\nclients = 4\n\n[fl\nrounds = 3\n");
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "dpfl_test_cfg_strict.ini:4): '[fl' has no closing ']'"));
    write_file(path, "[fl]\nrounds = 99999999999999999999\n");
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "99999999999999999999 is out of range [1, 100000000]"));
    assert_int_equal(dpfl_config_set(&c, "fl.lr=1e999", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "1e999 is out of range"));
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.lr", "0.1");
    fixture_set(&c, "record_dp.delta", "1e-05");
    fixture_set(&c, "fl.momentum", "0.30000000000000004"); /* 0.1 + 0.2: needs all 17 digits */
    char *ini = dpfl_config_to_ini(&c);
    assert_non_null(ini);
    assert_non_null(strstr(ini, "\nlr = 0.1\n"));
    assert_non_null(strstr(ini, "\ndelta = 1e-05\n"));
    assert_non_null(strstr(ini, "\nmomentum = 0.30000000000000004\n"));
    write_file(path, ini);
    free(ini);
    dpfl_config d;
    dpfl_config_defaults(&d);
    assert_int_equal(dpfl_config_load(&d, path, &err), DPFL_OK);
    assert_memory_equal(&c, &d, offsetof(dpfl_config, user_set));
    unlink(path);
}

/* `dpfl train` stops on a bad value before anything runs: exit status non-zero, one line on stderr naming the key;
 * --help shows each key's default from the key table. */
static void train_refuses_bad_values_on_one_line(void **state)
{
    (void)state;
    const char *b = getenv("BUILD");
    static const char *const bad[][2] = {
        {"run.seed=abc", "run.seed (--set): 'abc' is not a non-negative integer"},
        {"fl.client_rate_schedule=1:0.5,2:2", "fl.client_rate_schedule (--set): the value of round 2 (2)"},
        {"client_dp.mechanism=smpc", "client_dp.mechanism (--set): 'smpc' is not one of gaussian|ddp"},
    };
    char out[64];
    snprintf(out, sizeof out, "/tmp/dpfl_test_badvalue.%ld", (long)getpid());
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "e=$(%s/dpfl train examples/demo.ini --set '%s' --out %s 2>&1 >/dev/null); rc=$?; "
                                  "[ $rc -ne 0 ] && [ \"$(printf '%%s\\n' \"$e\" | wc -l)\" -eq 1 ] && "
                                  "printf '%%s' \"$e\" | grep -qF \"%s\" && [ ! -e %s ]",
                 b ? b : "build", bad[i][0], out, bad[i][1], out);
        if (system(cmd) != 0) {
            print_error("not refused on one line naming the key: %s\n", cmd);
            fail();
        }
    }
    dpfl_config c;
    dpfl_config_defaults(&c);
    assert_close(c.fl.lr, 0.05, 0);
    assert_int_equal(c.data.clients, 10);
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s/dpfl train --help > %s.help && grep -qE '^    lr .*; default 0.05$' %s.help && "
                              "grep -qE '^    clients .*; default 10$' %s.help && "
                              "grep -qE '^    seed .*; default \"\"$' %s.help; r=$?; rm -f %s.help; exit $r",
             b ? b : "build", out, out, out, out, out);
    assert_int_equal(system(cmd), 0);
}

/* A config path that is not a regular file is an error (a directory trained the built-in defaults); an unknown
 * section lists every valid section (record_dp and client_dp were missing). */
static void config_path_and_section_errors_are_exact(void **state)
{
    (void)state;
    dpfl_config c;
    dpfl_config_defaults(&c);
    dpfl_error err;
    assert_int_equal(dpfl_config_load(&c, "/tmp", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "directory"));
    assert_int_equal(dpfl_config_set(&c, "dp.noise=1", &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data, model, fl, record_dp, client_dp, run"));
}

/* A new run never shares a folder with another run's files: a non-empty folder is refused (naming --force and
 * --resume); with force the previous run's files are removed before anything is written -- and only once the data,
 * model and noise are set up: a config that fails its set-up leaves the previous run as it was (nothing lost). */
static void run_folder_is_never_reused_silently(void **state)
{
    (void)state;
    const char *dir = "/tmp/dpfl_test_runfolder";
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runfolder && mkdir -p /tmp/dpfl_test_runfolder && "
                            "echo old > /tmp/dpfl_test_runfolder/summary.json && "
                            "echo old > /tmp/dpfl_test_runfolder/model.bin"), 0);
    dpfl_config c;
    dpfl_config_defaults(&c);
    fixture_set(&c, "data.dataset", "synthetic");
    strcpy(c.model.arch, "mlp:20-8-10");
    c.data.clients = 4;
    c.fl.rounds = 1;
    c.fl.local_steps = 1;
    c.run.eval_every = 1;
    dpfl_error err;
    dpfl_run_options o = {.out_dir = dir, .quiet = 1};
    assert_int_equal(dpfl_run(&c, &o, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "--force"));
    assert_int_not_equal(access("/tmp/dpfl_test_runfolder/config.ini", F_OK), 0); /* nothing written */
    /* force, with a config that fails its set-up: the old run is untouched, nothing new is written */
    o.force = 1;
    strcpy(c.model.arch, "no-such-model");
    assert_int_not_equal(dpfl_run(&c, &o, &err), DPFL_OK);
    assert_int_equal(system("grep -q old /tmp/dpfl_test_runfolder/summary.json && "
                            "grep -q old /tmp/dpfl_test_runfolder/model.bin && "
                            "test ! -e /tmp/dpfl_test_runfolder/config.ini"), 0);
    strcpy(c.model.arch, "mlp:20-8-10");
    assert_int_equal(system("echo old > /tmp/dpfl_test_runfolder/summary.json"), 0);
    assert_int_equal(dpfl_run(&c, &o, &err), DPFL_OK);
    assert_int_equal(system("grep -q test_accuracy /tmp/dpfl_test_runfolder/summary.json"), 0);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_runfolder"), 0);
}

/* A key the run would silently ignore is an error naming it: above all [record_dp] / [client_dp] keys while the
 * section is off (`--set record_dp.noise=1.1` trained without any privacy and said nothing). */
static void ignored_keys_are_errors(void **state)
{
    (void)state;
    struct { const char *sets[3]; const char *want; } cases[] = {
        {{"record_dp.noise=1.1", "record_dp.clip=1.0", NULL}, "is set but record_dp.enabled = no: this run would NOT be differentially private"},
        {{"client_dp.clip=2", NULL, NULL}, "client_dp.clip is set but client_dp.enabled = no"},
        {{"fl.client_rate=0.2", NULL, NULL}, "fl.client_rate (--set) would be ignored"},
        {{"fl.sampling=poisson", "fl.clients_per_round=5", NULL}, "fl.clients_per_round"},
        {{"client_dp.enabled=yes", "client_dp.quantile_noise=3", NULL}, "client_dp.quantile_noise"},
        {{"data.beta=0.3", NULL, NULL}, "data.beta"},
        {{"fl.optimizer=adam", "fl.momentum=0.9", NULL}, "fl.momentum"},
        {{"fl.lr_step=3", NULL, NULL}, "fl.lr_step"},
        {{"fl.local_steps=5", "fl.local_epochs=2", NULL}, "fl.local_epochs"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dpfl_config c;
        dpfl_config_defaults(&c);
        dpfl_error err;
        for (int j = 0; j < 3 && cases[i].sets[j]; j++) assert_int_equal(dpfl_config_set(&c, cases[i].sets[j], &err), DPFL_OK);
        assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_EINVAL);
        if (!strstr(err.msg, cases[i].want)) {
            print_error("case %zu: '%s' does not say '%s'\n", i, err.msg, cases[i].want);
            fail();
        }
    }
    /* the same keys where they apply are fine */
    dpfl_config c;
    dpfl_config_defaults(&c);
    dpfl_error err;
    const char *ok[] = {"record_dp.enabled=yes", "record_dp.noise=1.1", "fl.sampling=poisson", "fl.client_rate=0.2",
                        "client_dp.enabled=yes", "client_dp.clip_strategy=adaptive", "client_dp.quantile_noise=3"};
    for (size_t j = 0; j < sizeof ok / sizeof ok[0]; j++) assert_int_equal(dpfl_config_set(&c, ok[j], &err), DPFL_OK);
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_OK);
    /* and the command line fails before training */
    const char *b = getenv("BUILD");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "%s/dpfl train examples/demo.ini --set record_dp.noise=1.1 --set record_dp.clip=1.0 "
                              "--out /tmp/dpfl_test_ignored 2>&1 | grep -q 'record_dp.clip is set but record_dp.enabled = no'",
             b ? b : "build");
    assert_int_equal(system(cmd), 0);
    assert_int_not_equal(access("/tmp/dpfl_test_ignored/metrics.jsonl", F_OK), 0);
    assert_int_equal(system("rm -rf /tmp/dpfl_test_ignored"), 0);
}

/* Every example in examples/ loads, validates and sets no key it would ignore; the paper reproductions that take
 * tens of minutes run here as 1-2 round smoke versions of the same files (the full runs are in README). */
static void examples_are_valid_and_run_as_smoke_versions(void **state)
{
    (void)state;
    DIR *d = opendir("examples");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 4, ".ini")) continue;
        char path[512];
        snprintf(path, sizeof path, "examples/%s", e->d_name);
        dpfl_config c;
        dpfl_error err;
        dpfl_config_defaults(&c);
        if (dpfl_config_load(&c, path, &err) || dpfl_config_validate(&c, &err) || dpfl_config_check_ignored(&c, &err)) {
            print_error("%s: %s\n", path, err.msg);
            fail();
        }
        n++;
    }
    closedir(d);
    assert_true(n >= 14);
    const char *b = getenv("BUILD");
    /* each with what its summary.json must hold */
    static const char *const smoke[][2] = {
        {"examples/prifedsync_mnist.ini --set fl.rounds=2 --set data.clients=8 --set fl.local_steps=2 "
         "--set run.eval_every=1", "\"personal_accuracy_mean\""},
        {"examples/rpdp_heart.ini --set fl.rounds=2", "\"over_budget\":[[:space:]]*0,"},
        {"examples/rpdp_mnist.ini --set fl.rounds=1 --set fl.local_steps=2", "\"record_budgets\""},
    };
    char out[64]; /* this process's own folder: suites of other checkouts may run at the same time */
    snprintf(out, sizeof out, "/tmp/dpfl_test_example.%ld", (long)getpid());
    for (size_t i = 0; i < sizeof smoke / sizeof smoke[0]; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "%s/dpfl train %s --out %s --force --quiet 2>/dev/null && "
                                  "grep -qE '\"private\":[[:space:]]*true' %s/summary.json && "
                                  "grep -qE '%s' %s/summary.json",
                 b ? b : "build", smoke[i][0], out, out, smoke[i][1], out);
        if (system(cmd) != 0) {
            print_error("smoke run failed: %s\n", cmd);
            fail();
        }
    }
    char rm[96];
    snprintf(rm, sizeof rm, "rm -rf %s", out);
    assert_int_equal(system(rm), 0);
}

/* fl.algorithm presets expand into ordinary settings; keys the user set (before or after) win; a run's own
 * config.ini (every key listed) reloads to the same settings and is not flagged for ignored keys. */
static void algorithm_presets_expand_into_settings(void **state)
{
    (void)state;
    dpfl_config c;
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.algorithm", "dp-fedavg");
    assert_true(c.client_dp.enabled && !c.record_dp.enabled);
    assert_int_equal(c.fl.sampling, DPFL_SAMPLE_POISSON);
    assert_int_equal(c.client_dp.clip_strategy, DPFL_CLIP_FIXED);
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.sampling", "fixed"); /* set before: wins */
    fixture_set(&c, "fl.algorithm", "dp-fedavg-adaptive");
    assert_int_equal(c.fl.sampling, DPFL_SAMPLE_FIXED);
    assert_int_equal(c.client_dp.clip_strategy, DPFL_CLIP_ADAPTIVE);
    fixture_set(&c, "client_dp.clip_strategy", "per-step"); /* set after: wins */
    assert_int_equal(c.client_dp.clip_strategy, DPFL_CLIP_PER_STEP);
    dpfl_config_defaults(&c);
    fixture_set(&c, "fl.algorithm", "prifedsync");
    assert_true(c.record_dp.enabled && c.record_dp.sampler == DPFL_BATCH_FIXED);
    assert_int_equal(c.fl.client_state, DPFL_STATE_KEEP);
    assert_int_equal(c.fl.optimizer, DPFL_OPT_ADAM);
    dpfl_error err;
    assert_int_equal(dpfl_config_check_ignored(&c, &err), DPFL_OK); /* the preset's keys are not the user's */
    char *ini = dpfl_config_to_ini(&c);
    write_file("/tmp/dpfl_test_preset.ini", ini);
    free(ini);
    dpfl_config d;
    dpfl_config_defaults(&d);
    assert_int_equal(dpfl_config_load(&d, "/tmp/dpfl_test_preset.ini", &err), DPFL_OK);
    assert_memory_equal(&c, &d, offsetof(dpfl_config, user_set));
    assert_int_equal(dpfl_config_check_ignored(&d, &err), DPFL_OK);
    unlink("/tmp/dpfl_test_preset.ini");
}

static void config_rejects_bad_input(void **state)
{
    (void)state;
    const char *path = "/tmp/dpfl_test_cfg_bad.ini";
    dpfl_config c;
    dpfl_error err;
    struct {
        const char *text, *needle;
    } cases[] = {
        {"[fl]\nclient_rate = 1.5\n", "fl.client_rate"},
        {"[fl]\nbatch = 0\n", "out of range"},
        {"[fl]\nsampling = sometimes\n", "poisson|fixed|all"},
        {"[fl]\nrounds = ten\n", "not an integer"},
        {"[fl]\nlearning_rate = 0.1\n", "valid keys in [fl]"},
        {"[training]\nlr = 0.1\n", "unknown section"},
        {"[data]\nclients = 2\n\n[fl]\nlr = x\n", ":5"},
        {"[fl]\nclient_state = sometimes\n", "reset|keep"},
        {"[fl]\nclient_state = Keep\n", "fl.client_state"},
        {"[fl]\nclient_state_max_mb = 0\n", "out of range"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path, cases[i].text);
        dpfl_config_defaults(&c);
        assert_int_not_equal(dpfl_config_load(&c, path, &err), DPFL_OK);
        if (!strstr(err.msg, cases[i].needle)) {
            print_error("case %zu: message '%s' lacks '%s'\n", i, err.msg, cases[i].needle);
            fail();
        }
        assert_non_null(strstr(err.msg, path));
    }
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_set(&c, "fl.batch", &err), DPFL_EINVAL);
    assert_int_equal(dpfl_config_set(&c, "data.clients=3", &err), DPFL_OK);
    assert_int_equal(dpfl_config_set(&c, "fl.sampling=fixed", &err), DPFL_OK);
    assert_int_equal(dpfl_config_set(&c, "fl.clients_per_round=5", &err), DPFL_OK);
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "clients_per_round"));
    dpfl_config_defaults(&c);
    assert_int_equal(dpfl_config_set(&c, "data.dataset=heart", &err), DPFL_OK);
    assert_int_equal(dpfl_config_set(&c, "data.normalize=standard", &err), DPFL_OK);
    assert_int_equal(dpfl_config_validate(&c, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "data.normalize"));
    /* every key is typed when it is read: a bad seed, schedule, list or choice fails there, on one line naming the
     * key, the file and line, and why (validate never sees it) */
    struct {
        const char *text, *key, *why;
    } typed[] = {
        {"[run]\nseed = -4\n", "run.seed", "'-4' is not a non-negative integer"},
        {"[run]\nseed = 18446744073709551616\n", "run.seed", "is not a non-negative integer below 2^64"},
        {"[run]\nseed = 12abc\n", "run.seed", "'12abc' is not a non-negative integer"},
        {"[fl]\nclient_rate_schedule = 1:0.5, 3:1.5\n", "fl.client_rate_schedule",
         "the value of round 3 (1.5) is not a number in (0, 1]"},
        {"[fl]\nclient_rate_schedule = 2:0.5\n", "fl.client_rate_schedule", "the first entry must be round 1"},
        {"[fl]\nclients_per_round_schedule = 1:2.5\n", "fl.clients_per_round_schedule",
         "the value of round 1 (2.5) is not an integer in [1, 1000000]"},
        {"[client_dp]\nnoise_schedule = 1:x\n", "client_dp.noise_schedule", "bad value in '1:x'"},
        {"[client_dp]\nmechanism = smpc\n", "client_dp.mechanism", "'smpc' is not one of gaussian|ddp"},
        {"[data]\nheader = maybe\n", "data.header", "'maybe' is not one of auto|yes|no"},
        {"[model]\ntransform_shape = nn\n", "model.transform_shape", "'nn' is not one of nc|np|cn|cc|cp|pn|pc|pp"},
        {"[record_dp]\ntwo_stage_bound = zhu-wang\n", "record_dp.two_stage_bound", "'zhu-wang' was removed"},
        {"[data]\nfeature_std = 1, 0\n", "data.feature_std", "value 2 (0) is not a number in (0, inf)"},
        {"[data]\nsource_rows = 30, 2.5\n", "data.source_rows", "value 2 (2.5) is not an integer in [1, 2147483647]"},
        {"[record_dp]\nclass_budgets = 1, x\n", "record_dp.class_budgets", "value 2 is not a number ('x')"},
    };
    for (size_t i = 0; i < sizeof typed / sizeof typed[0]; i++) {
        write_file(path, typed[i].text);
        dpfl_config_defaults(&c);
        dpfl_config before = c;
        assert_int_equal(dpfl_config_load(&c, path, &err), DPFL_EINVAL);
        char want[512];
        snprintf(want, sizeof want, "%s (%s:2): ", typed[i].key, path);
        if (strncmp(err.msg, want, strlen(want)) || !strstr(err.msg, typed[i].why) || strchr(err.msg, '\n')) {
            print_error("case %zu: message '%s' is not one line '%s...%s'\n", i, err.msg, want, typed[i].why);
            fail();
        }
        assert_memory_equal(&c, &before, offsetof(dpfl_config, user_set)); /* the bad value was not stored */
    }
    assert_int_equal(dpfl_config_load(&c, "/nonexistent/x.ini", &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent/x.ini"));
    unlink(path);
}

/* ------------------------------------------------------------------------------------------ simulation */
typedef struct {
    dpfl_dataset train, test;
    dpfl_model model;
    dpfl_config cfg;
} fixture;

static void fixture_make(fixture *f, int32_t n)
{
    dpfl_error err;
    fixture_split_synthetic(n, 200, 20, 3, 11, &f->train, &f->test);
    assert_int_equal(dpfl_model_create("mlp:20-16-3", 1, 1, 20, 3, &f->model, &err), DPFL_OK);
    dpfl_config_defaults(&f->cfg);
    fixture_set(&f->cfg, "data.dataset", "synthetic");
    f->cfg.run.threads = 1;
}

static void fixture_free(fixture *f)
{
    dpfl_model_free(&f->model);
    dpfl_dataset_free(&f->train);
    dpfl_dataset_free(&f->test);
}

static double max_rel_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs((double)b[i]) + 1e-3);
        if (d > m) m = d;
    }
    return m;
}

/* FedAvg over clients of unequal size, each taking one full-batch step, weighted by size, eta = 1, equals one
 * step of centralized gradient descent on the union: the weighting and the update algebra are right. */
static void fedavg_full_batch_equals_centralized_gd(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 300);
    int32_t sizes[3] = {50, 100, 150};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    f.cfg.data.clients = 3;
    f.cfg.fl.sampling = DPFL_SAMPLE_ALL;
    f.cfg.fl.local_steps = 1;
    f.cfg.fl.batch = 300;
    f.cfg.fl.lr = 0.3;
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 3);
    size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g), *c = malloc(P * sizeof *c), *grad = malloc(P * sizeof *grad);
    dpfl_model_init(&f.model, g, &root);
    memcpy(c, g, P * sizeof *c);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&f.model, 300, &err);
    for (int r = 1; r <= 3; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        assert_int_equal(m.clients, 3);
        assert_int_equal(m.examples, 300);
        dpfl_nn_grad(&f.model, c, ws, f.train.x, f.train.y, 300, NULL, grad, NULL);
        dpfl_vec_axpy(c, -0.3f, grad, P);
    }
    assert_true(max_rel_diff(g, c, P) < 1e-4);
    dpfl_nn_ws_free(ws);
    dpfl_sim_free(sim);
    dpfl_partition_free(&part);
    free(g);
    free(c);
    free(grad);
    fixture_free(&f);
}

/* One client, several epochs of mini-batch SGD, eta = 1: the global model after one round equals what the
 * client trained, and the loss goes down. */
static void one_client_training_learns(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 300);
    int32_t sizes[1] = {300};
    dpfl_partition part = fixture_contiguous(sizes, 1);
    f.cfg.data.clients = 1;
    f.cfg.fl.local_epochs = 5;
    f.cfg.fl.batch = 16;
    f.cfg.fl.lr = 0.1;
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 4);
    float *g = malloc(f.model.nparam * sizeof *g);
    dpfl_model_init(&f.model, g, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    dpfl_round_metrics m0, m;
    dpfl_sim_evaluate(sim, &m0);
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    assert_int_equal(m.examples, 5 * 300);
    dpfl_sim_evaluate(sim, &m);
    assert_true(m.test_loss < m0.test_loss);
    assert_true(m.test_accuracy > 0.8);
    dpfl_sim_free(sim);
    dpfl_partition_free(&part);
    free(g);
    fixture_free(&f);
}

static void run_rounds(fixture *f, const dpfl_partition *part, int threads, float *out)
{
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 99);
    dpfl_model_init(&f->model, out, &root);
    f->cfg.run.threads = threads;
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, part, &root, out, &sim, &err), DPFL_OK);
    for (int r = 1; r <= 3; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
    }
    dpfl_sim_free(sim);
}

/* 8 clients of unequal size on 400 examples, Poisson sampling at rate 0.6, batches of 8, eta 0.8 */
static dpfl_partition eight_poisson_clients(fixture *f)
{
    fixture_make(f, 400);
    int32_t sizes[8] = {30, 70, 50, 50, 40, 60, 45, 55};
    f->cfg.data.clients = 8;
    f->cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f->cfg.fl.client_rate = 0.6;
    f->cfg.fl.batch = 8;
    f->cfg.fl.eta = 0.8;
    return fixture_contiguous(sizes, 8);
}

/* run_rounds on 1, 2 and 3 threads gives the same bits; a keeps the result */
static void assert_same_for_1_2_3_threads(fixture *f, const dpfl_partition *part, float *a, float *b, float *c)
{
    run_rounds(f, part, 1, a);
    run_rounds(f, part, 2, b);
    run_rounds(f, part, 3, c);
    assert_memory_equal(a, b, f->model.nparam * sizeof *a);
    assert_memory_equal(a, c, f->model.nparam * sizeof *a);
}

/* Bit-identical results for 1, 2 and 3 threads, with Poisson client sampling and mini-batches. */
static void deterministic_across_thread_counts(void **state)
{
    (void)state;
    fixture f;
    dpfl_partition part = eight_poisson_clients(&f);
    f.cfg.fl.local_epochs = 2;
    size_t P = f.model.nparam;
    float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b), *c = malloc(P * sizeof *c);
    assert_same_for_1_2_3_threads(&f, &part, a, b, c);
    dpfl_partition_free(&part);
    free(a);
    free(b);
    free(c);
    fixture_free(&f);
}

/* fl.client_state = keep with Adam: a client's second participation continues from the moments and step
 * count it left behind, and a client that sits a round out keeps its state untouched.  Checked against a
 * hand-run of dpfl_optim_step with one optimizer per client (never reset), on full-batch steps; with reset the
 * same hand-run resets before every participation. */
static void run_adam_rounds(fixture *f, const dpfl_partition *part, const char *mode, int rounds, float *sim_out,
                            float *hand_out)
{
    const int32_t K = part->clients;
    const size_t P = f->model.nparam;
    fixture_set(&f->cfg, "fl.client_state", mode);
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 17);
    dpfl_model_init(&f->model, sim_out, &root);
    memcpy(hand_out, sim_out, P * sizeof(float));
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, part, &root, sim_out, &sim, &err),
                     DPFL_OK);
    dpfl_optim_config oc;
    dpfl_optim_defaults(&oc);
    oc.kind = DPFL_OPT_ADAM;
    oc.lr = f->cfg.fl.lr;
    dpfl_optim opt[8];
    for (int32_t k = 0; k < K; k++) assert_int_equal(dpfl_optim_init(&opt[k], &oc, P, &err), DPFL_OK);
    dpfl_nn_ws *ws = dpfl_nn_ws_create(&f->model, f->cfg.fl.batch, &err);
    float *local = malloc(P * sizeof *local), *grad = malloc(P * sizeof *grad), *acc = malloc(P * sizeof *acc);
    int64_t steps_of[8] = {0};
    const int keep = !strcmp(mode, "keep");
    for (int r = 1; r <= rounds; r++) {
        const int32_t *sampled;
        int32_t m = dpfl_sim_sample(sim, r, &sampled);
        dpfl_round_metrics met;
        assert_int_equal(dpfl_sim_train(sim, r, &met, &err), DPFL_OK);
        memset(acc, 0, P * sizeof *acc);
        for (int32_t i = 0; i < m; i++) {
            int32_t k = sampled[i], off = part->offset[k], n = part->offset[k + 1] - off;
            if (!keep) dpfl_optim_reset(&opt[k]);
            memcpy(local, hand_out, P * sizeof *local);
            for (int32_t t = 0; t < f->cfg.fl.local_steps; t++) {
                dpfl_nn_grad(&f->model, local, ws, f->train.x + (size_t)off * (size_t)f->train.dim, f->train.y + off,
                             n, NULL, grad, NULL);
                dpfl_optim_step(&opt[k], local, grad, f->cfg.fl.lr);
            }
            for (size_t j = 0; j < P; j++) acc[j] += (local[j] - hand_out[j]) / (float)m;
            steps_of[k] += f->cfg.fl.local_steps;
        }
        dpfl_vec_axpy(hand_out, 1.0f, acc, P);
        /* state exists exactly for the clients that have trained (lazily), with their total step count */
        for (int32_t k = 0; k < K; k++) {
            const float *st;
            int64_t t = dpfl_clients_state(dpfl_sim_clients(sim), k, &st);
            assert_int_equal(t, keep ? steps_of[k] : 0);
            assert_true((st != NULL) == (keep && steps_of[k] > 0));
            if (st) assert_true(max_rel_diff(st, opt[k].m, P) < 1e-3 && max_rel_diff(st + P, opt[k].v, P) < 1e-3);
        }
    }
    for (int32_t k = 0; k < K; k++) dpfl_optim_free(&opt[k]);
    dpfl_nn_ws_free(ws);
    dpfl_sim_free(sim);
    free(local);
    free(grad);
    free(acc);
}

static void keep_continues_each_clients_adam_state(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 300);
    int32_t sizes[3] = {40, 60, 50};
    dpfl_partition part = fixture_contiguous(sizes, 3);
    f.cfg.data.clients = 3;
    f.cfg.fl.sampling = DPFL_SAMPLE_FIXED;
    f.cfg.fl.clients_per_round = 2; /* every round one client sits out */
    f.cfg.fl.weighting = DPFL_WEIGHT_UNIFORM;
    f.cfg.fl.optimizer = DPFL_OPT_ADAM;
    f.cfg.fl.local_steps = 3;
    f.cfg.fl.batch = 64; /* >= every client: full-batch steps, so the hand-run sees the same gradients */
    f.cfg.fl.lr = 0.01;
    f.cfg.run.threads = 2;
    const size_t P = f.model.nparam;
    float *keep = malloc(P * sizeof *keep), *keep_hand = malloc(P * sizeof *keep_hand);
    float *reset = malloc(P * sizeof *reset), *reset_hand = malloc(P * sizeof *reset_hand);
    /* one round: nothing to carry over yet, so keep is reset bit for bit */
    run_adam_rounds(&f, &part, "keep", 1, keep, keep_hand);
    run_adam_rounds(&f, &part, "reset", 1, reset, reset_hand);
    assert_memory_equal(keep, reset, P * sizeof *keep);
    run_adam_rounds(&f, &part, "keep", 6, keep, keep_hand);
    run_adam_rounds(&f, &part, "reset", 6, reset, reset_hand);
    assert_true(max_rel_diff(keep, keep_hand, P) < 1e-4);
    assert_true(max_rel_diff(reset, reset_hand, P) < 1e-4);
    assert_true(max_rel_diff(keep, reset, P) > 1e-2); /* the carried moments matter */
    free(keep);
    free(keep_hand);
    free(reset);
    free(reset_hand);
    dpfl_partition_free(&part);
    fixture_free(&f);
}

/* keep with Adam: bit-identical for 1, 2 and 3 threads (Poisson client sampling, mini-batches, SGD momentum and
 * Adam); and the state that keep carries changes the result. */
static void keep_is_deterministic_across_thread_counts(void **state)
{
    (void)state;
    fixture f;
    dpfl_partition part = eight_poisson_clients(&f);
    f.cfg.fl.local_epochs = 1;
    f.cfg.fl.lr = 0.01;
    f.cfg.fl.client_state = DPFL_STATE_KEEP;
    size_t P = f.model.nparam;
    float *a = malloc(P * sizeof *a), *b = malloc(P * sizeof *b), *c = malloc(P * sizeof *c);
    const char *opts[2] = {"adam", "sgd"};
    for (int o = 0; o < 2; o++) {
        fixture_set(&f.cfg, "fl.optimizer", opts[o]);
        f.cfg.fl.momentum = o == 1 ? 0.9 : 0.0;
        f.cfg.fl.client_state = DPFL_STATE_KEEP;
        assert_same_for_1_2_3_threads(&f, &part, a, b, c);
        f.cfg.fl.client_state = DPFL_STATE_RESET;
        run_rounds(&f, &part, 2, b);
        assert_memory_not_equal(a, b, P * sizeof *a);
    }
    dpfl_partition_free(&part);
    free(a);
    free(b);
    free(c);
    fixture_free(&f);
}

/* fl.client_state_max_mb limits the state kept in memory: any number of clients may keep state; a round whose
 * sampled clients' blocks cannot fit together (here a simulation without a folder to page to) fails in one line
 * naming the cap, and one client's state over the cap is refused up front. */
static void keep_refuses_state_over_the_cap(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 400);
    dpfl_model big;
    dpfl_error err;
    assert_int_equal(dpfl_model_create("mlp:20-1000-3", 1, 1, 20, 3, &big, &err), DPFL_OK); /* 24,003 parameters */
    int32_t sizes[8] = {50, 50, 50, 50, 50, 50, 50, 50};
    dpfl_partition part = fixture_contiguous(sizes, 8);
    f.cfg.data.clients = 8;
    f.cfg.fl.optimizer = DPFL_OPT_ADAM;
    f.cfg.fl.client_state = DPFL_STATE_KEEP;
    f.cfg.fl.sampling = DPFL_SAMPLE_ALL;
    f.cfg.fl.client_state_max_mb = 1; /* 8 clients x 2 x 24,003 floats = 1.47 MiB: 5 blocks fit */
    float *g = calloc(big.nparam, sizeof *g);
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 1);
    dpfl_sim *sim = NULL;
    assert_int_equal(dpfl_sim_create(&f.cfg, &big, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    dpfl_round_metrics m;
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "fl.client_state_max_mb"));
    /* the round's own clients are never paged out to make room: the sixth block does not fit beside the five */
    assert_non_null(strstr(err.msg, "does not fit: 5 clients of round 1"));
    assert_null(strchr(err.msg, '\n'));
    dpfl_sim_free(sim);
    f.cfg.fl.client_state_max_mb = 2;
    assert_int_equal(dpfl_sim_create(&f.cfg, &big, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    assert_int_equal(dpfl_sim_round(sim, 1, &m, &err), DPFL_OK);
    dpfl_sim_free(sim);
    /* SGD without momentum keeps no vectors: any number of clients fits */
    f.cfg.fl.optimizer = DPFL_OPT_SGD;
    f.cfg.fl.client_state_max_mb = 1;
    assert_int_equal(dpfl_sim_create(&f.cfg, &big, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    assert_int_equal(dpfl_clients_state_floats(dpfl_sim_clients(sim)), 0);
    dpfl_sim_free(sim);
    free(g);
    dpfl_model_free(&big);
    dpfl_partition_free(&part);
    fixture_free(&f);
}

/* Poisson sampling selects about p*K clients; an empty round leaves the model unchanged; fixed picks exactly m. */
static void client_sampling(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f, 400);
    int32_t sizes[40];
    for (int i = 0; i < 40; i++) sizes[i] = 10;
    dpfl_partition part = fixture_contiguous(sizes, 40);
    f.cfg.data.clients = 40;
    f.cfg.fl.local_steps = 1;
    f.cfg.fl.batch = 10;
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.25;
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 5);
    size_t P = f.model.nparam;
    float *g = malloc(P * sizeof *g), *before = malloc(P * sizeof *before);
    dpfl_model_init(&f.model, g, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    long total = 0;
    int empty_seen = 0;
    for (int r = 1; r <= 200; r++) {
        dpfl_round_metrics m;
        memcpy(before, g, P * sizeof *g);
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        total += m.clients;
        if (m.clients == 0) {
            empty_seen = 1;
            assert_memory_equal(before, g, P * sizeof *g);
        }
    }
    (void)empty_seen;
    assert_true(fabs(total / 200.0 - 10.0) < 1.0); /* mean 10, sd of the mean ~0.19 */
    dpfl_sim_free(sim);
    f.cfg.fl.sampling = DPFL_SAMPLE_FIXED;
    f.cfg.fl.clients_per_round = 7;
    assert_int_equal(dpfl_sim_create(&f.cfg, &f.model, &f.train, &f.test, &part, &root, g, &sim, &err), DPFL_OK);
    for (int r = 1; r <= 5; r++) {
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_round(sim, r, &m, &err), DPFL_OK);
        assert_int_equal(m.clients, 7);
        assert_int_equal(m.examples, 70);
    }
    dpfl_sim_free(sim);
    dpfl_partition_free(&part);
    free(g);
    free(before);
    fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(config_loads_and_overrides),
        cmocka_unit_test(config_choices_are_typed_and_round_trip),
        cmocka_unit_test(config_path_and_section_errors_are_exact),
        cmocka_unit_test(ignored_keys_are_errors),
        cmocka_unit_test(command_line_wins_over_the_file),
        cmocka_unit_test(config_strictness_and_shortest_numbers),
        cmocka_unit_test(config_values_are_typed_once),
        cmocka_unit_test(dataset_is_typed_once),
        cmocka_unit_test(train_refuses_bad_values_on_one_line),
        cmocka_unit_test(algorithm_presets_expand_into_settings),
        cmocka_unit_test(examples_are_valid_and_run_as_smoke_versions),
        cmocka_unit_test(run_folder_is_never_reused_silently),
        cmocka_unit_test(config_rejects_bad_input),
        cmocka_unit_test(fedavg_full_batch_equals_centralized_gd),
        cmocka_unit_test(one_client_training_learns),
        cmocka_unit_test(deterministic_across_thread_counts),
        cmocka_unit_test(client_sampling),
        cmocka_unit_test(keep_continues_each_clients_adam_state),
        cmocka_unit_test(keep_is_deterministic_across_thread_counts),
        cmocka_unit_test(keep_refuses_state_over_the_cap),
    };
    return cmocka_run_group_tests_name("fl", tests, NULL, NULL);
}
