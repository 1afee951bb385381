/* PriFedSync federated f-DP (PriFedSync, Section 3): the paper's CLT values and RDP upper bounds.
 *
 * Local training of client j: K steps per round on fixed batches of B of n drawn without replacement
 * (replace-one adjacency, noise z relative to the replace-one sensitivity 2C), R rounds.
 *
 * The CLT values are the paper's Theorem 2: mu_max (weak) and sqrt(m - 1) mu_max (strong), asymptotic.
 *
 * The non-asymptotic bound.  Whatever anyone observes -- one client's helper models (weak), all other clients'
 * (strong), the server's view -- is a post-processing of the sequence of j's releases: in each round j syncs with
 * probability p, independently of its records, and then releases K DP-SGD steps; otherwise its records are not
 * touched.  Per round the pair of output distributions is ((1-p) R + p P, (1-p) R + p Q), so by joint convexity
 *     e^{(a-1) eps_round(a)} <= 1 - p + p e^{(a-1) K eps_WBK(a)}
 * (Renyi divergence of a mixture with a common component), composed over R rounds.
 *
 * The paper's Theorem 1 uses p^2 for the weak notion (j's round counts only when i and j both sync).  That is not
 * a bound for Algorithm 1: the global model carries j's round-r model into every later round, so client i sees a
 * function of it at its next sync even if it did not sync in round r.  dpfl reports the p bound for every
 * observer, and never the p^2 value.  The bound assumes clients train only in rounds they sync (Algorithm 1).
 *
 * A record held by c clients (replicated or overlapping partitions) is released by each of them: per round the
 * pair is a mixture over which of the c holders sync, and e^{(a-1) eps_round(a)} <= E[e^{(a-1) S K eps_WBK(a)}] with
 * S the number of holders that sync.  That expectation is at most (1 - p + p e^{(a-1) K eps_WBK(a)})^c when the
 * holders sync independently (Poisson) or without replacement (a fixed-size cohort: negatively associated
 * indicators), and p = 1 gives it exactly: the round's RDP is c times one copy's.  The CLT values take c K R steps. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <math.h>
#include <stdlib.h>

static double exact_eps(const dpfl_fdp_params *pp, double lambda, double delta, double *order)
{
    size_t no;
    const double *ord = dpfl_rdp_default_orders(&no);
    double *r = malloc(no * sizeof *r);
    DPFL_ASSERT(r);
    for (size_t i = 0; i < no; i++) {
        double a = ord[i];
        double base = (double)pp->local_steps * dpfl_rdp_fixed(pp->n, pp->batch, pp->z, a);
        double round;
        if (lambda >= 1) {
            round = base;
        } else {
            double x = (a - 1) * base;
            double lr = log(lambda) + dpfl_log_expm1(x > 0 ? x : 1e-300);
            round = (lr > 30 ? lr + log1p(exp(-lr)) : log1p(exp(lr))) / (a - 1);
        }
        r[i] = (double)pp->copies * (double)pp->rounds * round;
    }
    double e = dpfl_rdp_to_epsilon(ord, r, no, delta, DPFL_CONV_TIGHT, order);
    free(r);
    return e;
}

dpfl_status dpfl_fdp_prifedsync(const dpfl_fdp_params *pp, double delta, dpfl_fdp_result *out, dpfl_error *err)
{
    if (pp->clients < 1) return dpfl_fail(err, DPFL_EINVAL, "clients (%lld) must be >= 1", (long long)pp->clients);
    if (!(pp->p >= 0 && pp->p <= 1)) return dpfl_fail(err, DPFL_EINVAL, "p (%g) must be in [0, 1]", pp->p);
    if (!(pp->z > 0) || isinf(pp->z)) return dpfl_fail(err, DPFL_EINVAL, "noise (%g) must be > 0", pp->z);
    if (pp->batch <= 0 || pp->n <= 0 || pp->batch > pp->n)
        return dpfl_fail(err, DPFL_EINVAL, "need 0 < batch (%lld) <= n (%lld)", (long long)pp->batch,
                         (long long)pp->n);
    if (pp->local_steps <= 0 || pp->rounds <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "local steps and rounds must be > 0");
    if (pp->copies < 1) return dpfl_fail(err, DPFL_EINVAL, "copies (%lld) must be >= 1", (long long)pp->copies);
    if (!(delta > 0 && delta < 1)) return dpfl_fail(err, DPFL_EINVAL, "delta (%g) must be in (0, 1)", delta);
    double T = (double)pp->copies * (double)pp->local_steps * (double)pp->rounds; /* the record's steps, all copies */
    out->mu_weak = dpfl_gdp_clt_fixed((double)pp->batch, (double)pp->n, pp->z, T);
    out->mu_strong = sqrt((double)(pp->clients > 1 ? pp->clients - 1 : 1)) * out->mu_weak;
    out->eps_weak_clt = dpfl_gdp_epsilon(out->mu_weak, delta);
    out->eps_strong_clt = dpfl_gdp_epsilon(out->mu_strong, delta);
    out->eps_exact = exact_eps(pp, pp->p, delta, &out->order_exact);
    return DPFL_OK;
}
