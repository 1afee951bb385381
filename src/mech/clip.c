/* Clipping of client updates: flat or per layer; Geyer's median (not private); adaptive clipping's split of the
 * noise between the update sum and its noisy quantile estimate (Andrew, Thakkar, McMahan, Ramaswamy 2021). */
#include "dpfl/mech.h"

#include <math.h>
#include <stdlib.h>

double dpfl_mech_clip_update(float *u, size_t P, double S, const size_t *layer_off, const size_t *layer_len,
                             int32_t nlayers)
{
    double norm = dpfl_vec_norm2(u, P);
    if (nlayers <= 0) {
        dpfl_vec_clip(u, P, S);
        return norm;
    }
    for (int32_t l = 0; l < nlayers; l++)
        if (layer_len[l]) dpfl_vec_clip(u + layer_off[l], layer_len[l], S * sqrt((double)layer_len[l] / (double)P));
    return norm;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dpfl_mech_median(double *norms, int32_t n)
{
    if (n <= 0) return NAN;
    qsort(norms, (size_t)n, sizeof *norms, cmp_double);
    return n % 2 ? norms[n / 2] : 0.5 * (norms[n / 2 - 1] + norms[n / 2]);
}

dpfl_status dpfl_mech_adaptive_split(double z, double sigma_b, double *z_delta, dpfl_error *err)
{
    double inv = 1.0 / (z * z) - 1.0 / (4.0 * sigma_b * sigma_b);
    if (!(z > 0) || !(sigma_b > 0) || !(inv > 0) || !isfinite(1.0 / sqrt(inv)))
        return dpfl_fail(err, DPFL_EINVAL,
                         "the count noise sigma_b = %g must exceed noise / 2 = %g, or nothing is left for the update "
                         "sum (z_Delta = (z^-2 - (2 sigma_b)^-2)^-1/2)",
                         sigma_b, z / 2.0);
    *z_delta = 1.0 / sqrt(inv);
    return DPFL_OK;
}

double dpfl_mech_adaptive_release_z(double z_delta, double sigma_b)
{
    return 1.0 / sqrt(1.0 / (z_delta * z_delta) + 1.0 / (4.0 * sigma_b * sigma_b));
}

double dpfl_mech_adaptive_quantile(dpfl_rng *r, int32_t replied, int32_t unclipped, double sigma_b, double denom)
{
    /* centred bits b_i - 1/2: adding or removing a participant moves the sum by 1/2, the sensitivity z_Delta
     * assumes (a raw count would move by 1) */
    double centred = (double)unclipped - 0.5 * replied + sigma_b * dpfl_rng_gaussian(r);
    return centred / denom + 0.5;
}

dpfl_status dpfl_mech_adaptive_make(double z, double sigma_b, const dpfl_mech_clients *design, dpfl_mech_adaptive *out,
                                    dpfl_error *err)
{
    out->default_sigma = !(sigma_b > 0);
    out->sigma_b = out->default_sigma ? design->denom / 20.0 : sigma_b;
    dpfl_status st = dpfl_mech_adaptive_split(z, out->sigma_b, &out->z_delta, err);
    out->z = st ? NAN : dpfl_mech_adaptive_release_z(out->z_delta, out->sigma_b);
    return st;
}
