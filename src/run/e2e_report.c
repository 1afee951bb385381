/* End-to-end DP's client-level guarantee of a run (the end-to-end DP thesis, section 3.3; docs/privacy.md,
 * "End-to-end DP"): the record-level noise seen at the client level, per round the better of it and the server's
 * Gaussian (privacy/e2e.c: mu_round = min(mu_local, 2 / z_server)).  The server's noise may only be used where it
 * is a Gaussian release with a sensitivity bound, at the smallest multiplier of any round released:
 *   - median clipping has no sensitivity bound (not private): no server noise;
 *   - distributed DP's release is a Skellam sum, whose exact Gaussian-DP equivalence is not established: none;
 *   - a client noise schedule (refused with e2e by the config today): the smallest multiplier of the rounds
 *     released. */
#include "run_internal.h"

#include <math.h>

double fl_e2e_server_z(const dpfl_config *cfg, const run_acct *a)
{
    if (!cfg->client_dp.enabled || !a->g.cprivate || /* median clipping */
        cfg->client_dp.mechanism != DPFL_CLIENT_MECH_GAUSSIAN)
        return 0.0;
    double z = INFINITY;
    for (int32_t r = 1; r <= (a->ledger.rounds > 0 ? a->ledger.rounds : 1); r++) {
        const double zr = dpfl_round_client_noise(cfg, r, a->rs.client_z);
        if (zr < z) z = zr;
    }
    return z > 0 && isfinite(z) ? z : 0.0;
}

dpfl_status fl_run_e2e_client_epsilon(const dpfl_config *cfg, const dpfl_partition *part, const run_acct *a,
                                      double *eps, double *client_noise, dpfl_event *ev, dpfl_error *err)
{
    return fl_e2e_client_epsilon(cfg, part, a->ledger.rounds, a->rs.record_z, fl_e2e_server_z(cfg, a), eps,
                                 client_noise, ev, err);
}
