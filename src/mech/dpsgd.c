/* One DP-SGD step of one client, as a mechanism: Poisson batches (each record with q = B_k / n, add-remove,
 * sensitivity C, divided by the expected batch q n) or fixed batches (B_k of n without replacement, replace-one,
 * sensitivity 2C, divided by B_k); noise std z * sensitivity on the clipped sum.  The training loop draws this
 * noise and the ledger charges this event: both read the same struct. */
#include "dpfl/mech.h"

dpfl_mech_dpsgd dpfl_mech_dpsgd_make(int poisson, int32_t n, int32_t batch, double clip, double z)
{
    dpfl_mech_dpsgd d;
    d.poisson = poisson != 0;
    d.n = n;
    d.batch = batch < n ? batch : n;
    d.q = n > 0 ? (double)d.batch / (double)n : 0.0;
    d.clip = clip;
    d.z = z;
    d.sens = (d.poisson ? 1.0 : 2.0) * clip;
    d.noise_std = z > 0 ? z * d.sens : 0.0;
    d.denom = d.poisson ? d.q * (double)n : (double)d.batch;
    return d;
}

dpfl_event dpfl_mech_dpsgd_event(const dpfl_mech_dpsgd *d, int64_t steps)
{
    if (d->poisson) return dpfl_event_poisson(d->q, d->z, steps);
    return dpfl_event_fixed(d->n, d->batch, d->z, steps);
}

int64_t dpfl_mech_record_steps(int64_t n, int32_t batch, int32_t local_steps, int32_t local_epochs, int32_t rounds,
                               int32_t copies)
{
    return (int64_t)copies * rounds * dpfl_mech_local_steps(n, batch, local_steps, local_epochs);
}

int64_t dpfl_mech_local_steps(int64_t n, int32_t batch, int32_t local_steps, int32_t local_epochs)
{
    if (n <= 0) return 0;
    if (local_steps > 0) return local_steps;
    return (int64_t)local_epochs * ((n + batch - 1) / batch);
}
