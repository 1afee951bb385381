/* Where datasets are found (src/data/paths.c: DPFL_DATA, the XDG cache folder, the installed data folder, never
 * the current directory) and datasets from the caller's arrays (src/data/memory.c). */
#include "testutil.h"
#include "dpfl/data.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* The environment variables the folders depend on, saved and restored around each test. */
static const char *const vars[] = {"DPFL_DATA", "XDG_CACHE_HOME", "HOME"};
static char *saved[3];
static char tmp[] = "/tmp/dpfl-test-embed-XXXXXX";

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) saved[i] = getenv(vars[i]) ? strdup(getenv(vars[i])) : NULL;
    return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        if (saved[i]) setenv(vars[i], saved[i], 1);
        else unsetenv(vars[i]);
        free(saved[i]);
    }
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void env(const char *dpfl_data, const char *xdg, const char *home)
{
    const char *v[3] = {dpfl_data, xdg, home};
    for (int i = 0; i < 3; i++) {
        if (v[i]) setenv(vars[i], v[i], 1);
        else unsetenv(vars[i]);
    }
}

static void cache_dir_is(const char *want)
{
    char buf[4096];
    dpfl_error err;
    if (dpfl_data_cache_dir(buf, sizeof buf, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
    assert_string_equal(buf, want);
}

static void cache_folder_follows_the_environment(void **state)
{
    (void)state;
    env("/d", "/x", "/h");
    cache_dir_is("/d/cache");
    assert_string_equal(dpfl_data_root(), "/d");
    env("", "/x", "/h"); /* empty = unset */
    cache_dir_is("/x/dpfl");
    assert_null(dpfl_data_root());
    env(NULL, NULL, "/h");
    cache_dir_is("/h/.cache/dpfl");
    env(NULL, "relative/cache", "/h"); /* XDG: relative paths are ignored */
    cache_dir_is("/h/.cache/dpfl");
    env(NULL, NULL, NULL);
    char buf[64];
    dpfl_error err;
    assert_int_equal(dpfl_data_cache_dir(buf, sizeof buf, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "DPFL_DATA"));
    env(NULL, NULL, "relative-home");
    assert_int_equal(dpfl_data_cache_dir(buf, sizeof buf, &err), DPFL_EINVAL);
    env("/a/data/folder/whose/name/with/cache/appended/does/not/fit/in/sixty/four/bytes", NULL, NULL);
    assert_int_equal(dpfl_data_cache_dir(buf, sizeof buf, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "too long"));
}

static void path_of(const char *name, const char *data_dir, char *buf)
{
    dpfl_error err;
    if (dpfl_dataset_path(name, data_dir, buf, 4096, &err)) {
        print_error("%s\n", err.msg);
        fail();
    }
}

/* Missing datasets: the path is where they would be fetched, and the error lists every folder searched. */
static void missing_dataset_names_the_folders_searched(void **state)
{
    (void)state;
    char buf[4096], want[4200];
    dpfl_dataset tr, te;
    dpfl_error err;
    char xdg[64];
    snprintf(xdg, sizeof xdg, "%s/xdg", tmp);
    env(NULL, xdg, "/nonexistent-home");
    path_of("mnist", NULL, buf);
    snprintf(want, sizeof want, "%s/dpfl/mnist", xdg);
    assert_string_equal(buf, want);
    assert_int_equal(dpfl_dataset_load("mnist", NULL, 1, &tr, &te, &err), DPFL_EIO);
    snprintf(want, sizeof want, "%s/dpfl/mnist, %s/mnist", xdg, dpfl_data_install_dir());
    assert_non_null(strstr(err.msg, want));
    assert_non_null(strstr(err.msg, "dpfl data fetch"));
    /* heart ships with dpfl: without DPFL_DATA only the installed folder */
    assert_int_equal(dpfl_dataset_load("heart", NULL, 1, &tr, &te, &err), DPFL_EIO);
    snprintf(want, sizeof want, "in %s/heart-disease;", dpfl_data_install_dir());
    assert_non_null(strstr(err.msg, want));
    /* DPFL_DATA: its cache/ and heart-disease/ first; "" as data_dir means "not given" */
    env(tmp, xdg, "/nonexistent-home");
    path_of("mnist", "", buf);
    snprintf(want, sizeof want, "%s/cache/mnist", tmp);
    assert_string_equal(buf, want);
    assert_int_equal(dpfl_dataset_load("heart", NULL, 1, &tr, &te, &err), DPFL_EIO);
    snprintf(want, sizeof want, "in %s/heart-disease, %s/heart-disease;", tmp, dpfl_data_install_dir());
    assert_non_null(strstr(err.msg, want));
    /* a data_dir given: that folder alone */
    assert_int_equal(dpfl_dataset_load("mnist", "/elsewhere", 1, &tr, &te, &err), DPFL_EIO);
    assert_non_null(strstr(err.msg, "in /elsewhere/mnist;"));
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* A dataset found in DPFL_DATA is read from there, whatever the current directory holds. */
static void found_in_data_folder_not_current_directory(void **state)
{
    (void)state;
    char dir[256], file[300], cwd[4096], buf[4096];
    const char *centres[] = {"cleveland", "hungarian", "switzerland", "va"};
    /* four tiny heart-disease centres in <tmp>/data/heart-disease (14 columns, 2 rows each) */
    snprintf(dir, sizeof dir, "%s/data", tmp);
    mkdir(dir, 0755);
    snprintf(dir, sizeof dir, "%s/data/heart-disease", tmp);
    mkdir(dir, 0755);
    for (int c = 0; c < 4; c++) {
        snprintf(file, sizeof file, "%s/processed.%s.data", dir, centres[c]);
        write_file(file, "63,1,1,145,233,1,2,150,0,2.3,3,0,6,0\n67,1,4,160,286,0,2,108,1,1.5,2,3,3,2\n"
                         "41,0,2,130,204,0,2,172,0,1.4,1,0,3,0\n56,1,2,120,236,0,0,178,0,0.8,1,0,3,1\n");
    }
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(dir, sizeof dir, "%s/data", tmp);
    env(dir, NULL, "/nonexistent-home");
    assert_int_equal(chdir("/"), 0); /* the current directory has no data/ */
    path_of("heart", NULL, buf);
    snprintf(file, sizeof file, "%s/heart-disease", dir);
    assert_string_equal(buf, file);
    dpfl_dataset tr, te;
    dpfl_error err;
    dpfl_status s = dpfl_dataset_load("heart", NULL, 1, &tr, &te, &err);
    if (s) print_error("%s\n", err.msg);
    assert_int_equal(s, DPFL_OK);
    assert_int_equal(tr.n + te.n, 16);
    dpfl_dataset_free(&tr);
    dpfl_dataset_free(&te);
    /* and with DPFL_DATA unset, a data/ folder in the current directory is not used */
    assert_int_equal(chdir(tmp), 0);
    env(NULL, NULL, "/nonexistent-home");
    assert_int_equal(dpfl_dataset_load("heart", NULL, 1, &tr, &te, &err), DPFL_EIO);
    assert_null(strstr(err.msg, " data/heart-disease"));
    assert_int_equal(chdir(cwd), 0);
}

/* ------------------------------------------------------------------------------------------ from arrays */
static void from_arrays_copies_and_validates(void **state)
{
    (void)state;
    float x[6 * 4];
    int32_t y[6] = {0, 1, 2, 0, 1, 2};
    for (int i = 0; i < 24; i++) x[i] = (float)i * 0.5f;
    dpfl_dataset d;
    dpfl_error err;
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 2, 2, 3, &d, &err), DPFL_OK);
    assert_int_equal(d.n, 6);
    assert_int_equal(d.dim, 4);
    assert_int_equal(d.h, 2);
    assert_int_equal(d.classes, 3);
    assert_int_equal(d.groups, 0);
    assert_null(d.group);
    x[5] = -99.0f; /* the caller's arrays are its own: the dataset holds a copy */
    y[2] = 0;
    assert_true(d.x[5] == 2.5f);
    assert_int_equal(d.y[2], 2);
    assert_true(d.x != x);
    /* usable as any dataset: an IID partition over 3 clients covers every record once */
    dpfl_partition p;
    dpfl_partition_spec spec = {.kind = DPFL_PART_IID, .clients = 3};
    dpfl_rng r;
    dpfl_rng_init_seed(&r, 5);
    assert_int_equal(dpfl_partition_make(&d, NULL, &spec, &r, &p, &err), DPFL_OK);
    int seen[6] = {0};
    for (int k = 0; k < 3; k++)
        for (int32_t i = p.offset[k]; i < p.offset[k + 1]; i++) seen[p.index[i]]++;
    for (int i = 0; i < 6; i++) assert_int_equal(seen[i], 1);
    dpfl_partition_free(&p);
    dpfl_dataset_free(&d);

    /* every check names what is wrong; nothing is allocated on failure */
    y[2] = 3;
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 1, 4, 3, &d, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "y[2] = 3"));
    assert_null(d.x);
    y[2] = -1;
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 1, 4, 3, &d, &err), DPFL_EINVAL);
    y[2] = 2;
    x[9] = NAN;
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 1, 4, 3, &d, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "example 2, feature 1"));
    assert_null(d.x);
    x[9] = INFINITY;
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 1, 4, 3, &d, &err), DPFL_EINVAL);
    x[9] = 0.0f;
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 0, 1, 1, 4, 3, &d, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 0, 4, 3, &d, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 1, 4, 1, &d, &err), DPFL_EINVAL);
    assert_non_null(strstr(err.msg, "classes"));
    assert_int_equal(dpfl_dataset_from_arrays(NULL, y, 6, 1, 1, 4, 3, &d, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_dataset_from_arrays(x, NULL, 6, 1, 1, 4, 3, &d, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_dataset_from_arrays(x, y, 6, 1, 1, 4, 3, &d, &err), DPFL_OK); /* fixed: accepted */
    dpfl_dataset_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cache_folder_follows_the_environment),
        cmocka_unit_test(missing_dataset_names_the_folders_searched),
        cmocka_unit_test(found_in_data_folder_not_current_directory),
        cmocka_unit_test(from_arrays_copies_and_validates),
    };
    return cmocka_run_group_tests_name("data_embed", tests, setup, teardown);
}
