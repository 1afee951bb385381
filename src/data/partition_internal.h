/* Shared between the partition files. */
#ifndef DPFL_PARTITION_INTERNAL_H
#define DPFL_PARTITION_INTERNAL_H
#include "internal.h"

/* Indices of d grouped by label: class c is idx[off[c] .. off[c+1]), shuffled within the class when rng. */
dpfl_status dpfl__by_class(const dpfl_dataset *d, dpfl_rng *rng, int32_t **off, int32_t **idx, dpfl_error *err);
/* offset (zeroed, clients + 1) and index (total) arrays. */
dpfl_status dpfl__part_alloc(dpfl_partition *p, int32_t clients, int64_t total, dpfl_error *err);

/* The recipes; the spec has been validated against train. */
dpfl_status dpfl__partition_split(const dpfl_dataset *train, const dpfl_partition_spec *sp, dpfl_rng *rng,
                                  dpfl_partition *p, dpfl_error *err);
/* DIRICHLET_CLIENT (partition_client_mix.c): the training sets and, when test is given and sp->test_per_client > 0,
 * the per-client test sets. */
dpfl_status dpfl__partition_client_mix(const dpfl_dataset *train, const dpfl_dataset *test,
                                       const dpfl_partition_spec *sp, dpfl_rng *rng, dpfl_partition *p, dpfl_error *err);
dpfl_status dpfl__partition_replicate(const dpfl_dataset *train, const dpfl_partition_spec *sp, dpfl_rng *rng,
                                      dpfl_partition *p, dpfl_error *err);
#endif
