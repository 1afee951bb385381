/* Internals of the run driver shared by its files: the checkpoint (model + ledger + per-client optimizer state +
 * the round's metrics line, one atomic file) and the client-level accounting of a run's rounds. */
#ifndef DPFL_FL_RUN_INTERNAL_H
#define DPFL_FL_RUN_INTERNAL_H
#include "dpfl/fl.h"

typedef struct {
    double record_z, client_z, wall, S;
    int64_t examples;
} run_state;

/* sim (may be NULL: none) supplies the per-client optimizer states of fl.client_state = keep. */
dpfl_status fl_checkpoint_save(const char *dir, const float *params, size_t nparam, const dpfl_ledger *l,
                               const run_state *rs, const dpfl_sim *sim, const char *line, dpfl_error *err);
/* *line (malloc'd) gets the last released round's metrics line; sim gets the saved client states back. */
dpfl_status fl_checkpoint_load(const char *dir, float *params, size_t nparam, dpfl_ledger *l, run_state *rs,
                               dpfl_sim *sim, char **line, dpfl_error *err);
/* Keep only metrics lines of rounds <= rounds; restore the last round's line from the checkpoint if missing. */
dpfl_status fl_metrics_truncate(const char *path, int32_t rounds, const char *last_line, dpfl_error *err);

dpfl_event fl_client_round_event(const dpfl_config *cfg, int32_t K, double z, int32_t round);
double fl_client_rate_accounted(const dpfl_config *cfg, int32_t K, int32_t round);
dpfl_status fl_client_epsilon(const dpfl_config *cfg, const dpfl_ledger *l, double *eps, int *private,
                              dpfl_error *err);
dpfl_status fl_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, const dpfl_ledger *l,
                                  double z, double server_z, double *eps, double *client_noise, dpfl_error *err);
#endif
