/* The individual Renyi filter (Feldman and Zrnic 2021), per record: a record whose contribution to a sum noised
 * with std sigma has L2 norm r loses alpha r^2 / (2 sigma^2) at order alpha.  Before a step each record is clipped
 * to the norm what it has left allows; after it, the loss of its actual contribution (its clipped norm, padded by
 * FILTER_PAD against float rounding in the norm) is charged.  The bound is shrunk by FILTER_PAD^2, so the charge
 * never exceeds what was left. */
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
