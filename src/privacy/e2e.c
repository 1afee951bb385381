/* End-to-end record + client level guarantees of one DP-SGD-in-clients run (REFERENCES.md section 8).
 *
 * Record level: inside a client each local step samples records with q = B/n (Poisson) and adds noise
 * sigma*C to the clipped sum; a client takes part in a round with probability client_rate.  Accounted as the
 * two-stage event (rPDP-FL bound, tightened with Zhu-Wang).
 * Client level: the noise on the averaged gradient has std sigma*C/B and one client's averaged clipped gradient
 * has norm <= C, so one step is a Gaussian mechanism with multiplier sigma/B (zero-out; sigma/(2B) for
 * replace-one).  k adaptive steps compose exactly to mu_round = sqrt(k) B / sigma (GDP); extra server noise with
 * multiplier z2 on the update is composed in as if released separately (mu^2 adds; an upper bound).  Rounds are
 * a Poisson-sampled Gaussian with z = 1/mu_round at rate client_rate.  The thesis's sigma/sqrt(k) omits the
 * 1/B and overstates the client-level noise B-fold. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <math.h>

dpfl_status dpfl_e2e(const dpfl_e2e_params *pp, dpfl_e2e_result *out, dpfl_error *err)
{
    if (!(pp->z > 0) || isinf(pp->z)) return dpfl_fail(err, DPFL_EINVAL, "noise (%g) must be > 0", pp->z);
    if (pp->batch <= 0 || pp->n <= 0 || pp->batch > pp->n)
        return dpfl_fail(err, DPFL_EINVAL, "need 0 < batch (%lld) <= n (%lld)", (long long)pp->batch,
                         (long long)pp->n);
    if (pp->local_steps <= 0 || pp->rounds <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "local steps and rounds must be > 0");
    if (!(pp->client_rate > 0 && pp->client_rate <= 1))
        return dpfl_fail(err, DPFL_EINVAL, "client rate (%g) must be in (0, 1]", pp->client_rate);
    if (!(pp->server_z >= 0) || isinf(pp->server_z))
        return dpfl_fail(err, DPFL_EINVAL, "server noise (%g) must be finite and >= 0", pp->server_z);
    if (!(pp->delta > 0 && pp->delta < 1))
        return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", pp->delta);
    double q = (double)pp->batch / (double)pp->n;
    dpfl_event rec = dpfl_event_two_stage(pp->client_rate, q, pp->z, pp->local_steps, pp->rounds,
                                          DPFL_BOUND_ZHU_WANG);
    dpfl_guarantee g;
    dpfl_status s = dpfl_account_epsilon(&rec, 1, pp->delta, DPFL_ACC_RDP, NULL, &g, err);
    if (s) return s;
    out->record_epsilon = g.epsilon;
    out->record_order = g.order;
    double zstep = pp->z / (double)pp->batch;
    if (pp->client_adjacency == DPFL_ADJ_REPLACE_ONE) zstep *= 0.5;
    double mu2 = (double)pp->local_steps / (zstep * zstep);
    if (pp->server_z > 0) mu2 += 1.0 / (pp->server_z * pp->server_z);
    out->client_mu = sqrt(mu2);
    out->client_noise = 1.0 / out->client_mu;
    dpfl_event cl = dpfl_event_poisson(pp->client_rate, out->client_noise, pp->rounds);
    if (pp->client_adjacency == DPFL_ADJ_REPLACE_ONE) cl.adjacency = DPFL_ADJ_REPLACE_ONE;
    s = dpfl_account_epsilon(&cl, 1, pp->delta, DPFL_ACC_RDP, NULL, &g, err);
    if (s) return s;
    out->client_epsilon = g.epsilon;
    out->client_order = g.order;
    return DPFL_OK;
}
