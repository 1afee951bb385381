/* The individual Renyi filter (Feldman and Zrnic 2021), per record: a record whose contribution to a sum noised
 * with std sigma has L2 norm r loses alpha r^2 / (2 sigma^2) at order alpha.  Before a step each record is clipped
 * to the norm what it has left allows; after it, the loss of its actual contribution (its clipped norm, padded by
 * FILTER_PAD against float rounding in the norm) is charged.  The bound is shrunk by FILTER_PAD^2, so the charge
 * never exceeds what was left.  The noise plan (dpfl_mech_filter_noise) spends a budget_max record's budget exactly
 * over the planned rounds of the mechanism's local steps. */
#include "dpfl/mech.h"

#include <math.h>

#define FILTER_PAD (1.0 + 1e-5)

double dpfl_mech_filter_radius(double left, double sigma, double alpha)
{
    return left > 0 ? sqrt(2.0 * sigma * sigma * left / alpha) / (FILTER_PAD * FILTER_PAD) : 0.0;
}

double dpfl_mech_filter_loss(double norm, double radius, double clip, double sigma, double alpha)
{
    const double used = fmin(fmin(norm, radius), clip) * FILTER_PAD;
    return alpha * used * used / (2.0 * sigma * sigma);
}

double dpfl_mech_filter_noise(const dpfl_mech_rpdp *m, int64_t rounds, double alpha, double budget)
{
    const double T = (double)rounds * (double)m->steps; /* every local step of every round, at norm C */
    return sqrt(T * alpha / (2.0 * budget));
}
