/* Helpers shared by the data module's files; not part of the public interface. */
#ifndef DPFL_DATA_INTERNAL_H
#define DPFL_DATA_INTERNAL_H
#include "dpfl/data.h"

/* Allocate x (n*dim floats), y (n labels) and, when groups > 0, group (n ids); shape fields set, rest zero. */
dpfl_status dpfl__dataset_alloc(dpfl_dataset *d, int32_t n, int32_t c, int32_t h, int32_t w, int32_t groups,
                                const char *what, dpfl_error *err);

/* A numeric table read from a comma-separated file: rows x cols doubles, NaN where the value is missing
 * (empty, "?", "NA", "NaN" or "null", any case).  Every row must have cols columns; anything else that is not a
 * number is an error naming the line and column.  line[r] is the 1-based line number of row r (for messages).
 * has_header: 1 the first non-blank line names the columns, 0 there is none, -1 (auto) it is a header when one
 * of its fields is neither a number nor a missing value.  names[c] (NULL without a header) are its fields. */
typedef struct {
    int32_t rows, cols;
    double *v;     /* rows * cols */
    int32_t *line; /* rows */
    char **names;  /* cols header fields (trimmed), or NULL */
} dpfl__table;

dpfl_status dpfl__table_read(const char *path, int has_header, dpfl__table *t, dpfl_error *err);
void dpfl__table_free(dpfl__table *t);

/* Where a dataset's folder `sub` may be (paths.c): data_dir/sub alone when data_dir is given; else for a
 * downloaded dataset (shipped = 0) the cache folder's sub, for one that ships with dpfl (shipped = 1) $DPFL_DATA/sub
 * when DPFL_DATA is set; then the installed data folder's sub.  dirs gets *n (at most 2) folders, first choice
 * first.  dpfl__data_list joins them with ", " for messages. */
#define DPFL__PATH_MAX 4096
dpfl_status dpfl__data_candidates(int shipped, const char *sub, const char *data_dir, char (*dirs)[DPFL__PATH_MAX],
                                  int *n, dpfl_error *err);
void dpfl__data_list(char (*dirs)[DPFL__PATH_MAX], int n, char *out, size_t len);

/* files.c: train and test from all, test_fraction frac of each source (group) held out by a shuffle keyed by seed
 * and the source's position first + g (data.test_fraction); groups carry over.  Also for a run's arrays (arrays.c). */
dpfl_status dpfl__split_sources(const dpfl_dataset *all, double frac, uint64_t seed, int32_t first, dpfl_dataset *train,
                                dpfl_dataset *test, const char *what, dpfl_error *err);
/* Largest-remainder apportionment of total into k parts proportional to w[0..k) (w >= 0, sum > 0). */
void dpfl__apportion(int64_t total, const double *w, int32_t k, int64_t *out);
/* npy.c: the part of an "npy:" spec after the prefix; test filled (*has_test = 1) from an .npz's x_test/y_test. */
dpfl_status dpfl__npy_read(const char *spec, dpfl_dataset *all, dpfl_dataset *test, int *has_test, dpfl_error *err);
/* md5.c: the MD5 of data as 32 lowercase hex digits (download checks against published MD5 sums only). */
void dpfl__md5_hex(const void *data, size_t len, char out[33]);
/* fetch.c: the CIFAR files of a gzipped tar archive (the official cifar-10-binary.tar.gz or cifar-100-binary.tar.gz,
 * held in raw[0, len)) checked against md5 (32 hex digits) and written atomically into dest/<the archive's folder>/. */
dpfl_status dpfl__cifar_unpack(int hundred, const char *what, const char *raw, size_t len, const char *md5,
                               const char *dest, dpfl_error *err);
#endif
