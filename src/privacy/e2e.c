/* End-to-end record + client level guarantees of one DP-SGD-in-clients run (the end-to-end DP thesis, section 3.3).
 *
 * Record level: inside a client each local step samples records with q = B/n (Poisson) and adds noise
 * sigma*C to the clipped sum; a client takes part in a round with probability client_rate.  A client that sits a
 * round out releases nothing, visibly, so a round is ((1 - rate) N + rate P, (1 - rate) N + rate Q) with N distinct
 * from P and Q: the two-stage event, accounted by joint convexity (rPDP-FL's bound, RDP) and by the PLD of that
 * mixture (the point mass of the rounds sat out, composed exactly); the smaller of the two valid bounds is reported.
 * (Zhu-Wang 2019's bound, used here before, assumes N = Q: it under-reported up to 6x.)
 * Client level: the noise on the averaged gradient has std sigma*C/B and one client's averaged clipped gradient
 * has norm <= C, so one step is a Gaussian mechanism with multiplier sigma/B (zero-out; sigma/(2B) for
 * replace-one).  k adaptive steps compose exactly to mu_local = sqrt(k) B / sigma (GDP).  The noise is the
 * client's own, so whether it took part is visible in the aggregate (and in the published participant count):
 * "not sampled" is not "sampled with zeroed data", and the add-remove amplification of Poisson sampling does not
 * hold.  The neighbouring relation is Poisson sampling with replacement by a special client that takes part but
 * contributes only its noise; the rounds are accounted exactly for that relation (dpfl_gdp_visible_epsilon:
 * J ~ Bin(R, rate) participations, mu_local sqrt(J)-GDP given J).
 * Server noise: the server clips each update to S and adds std z2 S to the sum.  That is noise on the same
 * release, so by post-processing it can only help: a round is dominated both by mu_local and by the server's own
 * Gaussian, mu_server = 2 / z2 (the special client still sends a clipped update: the two differ by up to 2S), and
 * mu_round = min(mu_local, mu_server).  (Adding the variances would need the k local steps to be one
 * non-adaptive release; they are not.)  The thesis's sigma/sqrt(k) omits the 1/B and overstates the client-level
 * noise B-fold. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <math.h>

double dpfl_e2e_client_mu(double z, int64_t batch, int64_t local_steps, dpfl_adjacency adjacency, double server_z)
{
    double zstep = z / (double)batch;
    if (adjacency == DPFL_ADJ_REPLACE_ONE) zstep *= 0.5;
    double mu = sqrt((double)local_steps) / zstep;
    if (server_z > 0 && 2.0 / server_z < mu) mu = 2.0 / server_z;
    return mu;
}

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
    dpfl_event rec = dpfl_event_two_stage(pp->client_rate, q, pp->z, pp->local_steps, pp->rounds, DPFL_BOUND_RPDP);
    dpfl_guarantee g, pg;
    dpfl_status s = dpfl_account_epsilon(&rec, 1, pp->delta, DPFL_ACC_RDP, NULL, &g, err);
    if (!s) s = dpfl_account_epsilon(&rec, 1, pp->delta, DPFL_ACC_PLD, NULL, &pg, err);
    if (s) return s;
    int pld = pg.epsilon < g.epsilon;
    out->record_epsilon = pld ? pg.epsilon : g.epsilon;
    out->record_order = pld ? 0 : g.order; /* 0: the PLD answered */
    double mu = dpfl_e2e_client_mu(pp->z, pp->batch, pp->local_steps, pp->client_adjacency, pp->server_z);
    out->client_mu = mu;
    out->client_noise = 1.0 / mu;
    out->client_epsilon = dpfl_gdp_visible_epsilon(mu, pp->client_rate, pp->rounds, pp->delta);
    out->client_order = 0;
    return DPFL_OK;
}
