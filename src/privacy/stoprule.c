/* DP-FedAvg stop rule (Geyer et al.; Geyer et al. 2017; McMahan et al. 2018) as a query: how many rounds of a schedule fit
 * before delta(target epsilon) would pass the threshold.  The crossing round is never counted. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <math.h>
#include <stdlib.h>

dpfl_status dpfl_stop_rule_rounds(const double *q, const double *z, double q0, double z0, int64_t max_rounds,
                                  double target_eps, double threshold, int64_t *rounds, dpfl_error *err)
{
    if (!(target_eps >= 0)) return dpfl_fail(err, DPFL_EINVAL, "target epsilon (%g) must be >= 0", target_eps);
    if (!(threshold > 0 && threshold < 1))
        return dpfl_fail(err, DPFL_EINVAL, "delta threshold (%g) must be in (0, 1)", threshold);
    if (max_rounds < 0) return dpfl_fail(err, DPFL_EINVAL, "max rounds must be >= 0");
    size_t no;
    const double *ord = dpfl_rdp_default_orders(&no);
    double *acc = calloc(no, sizeof *acc);
    if (!acc) return dpfl_fail(err, DPFL_ENOMEM, "out of memory (stop rule)");
    int64_t t;
    for (t = 0; t < max_rounds; t++) {
        double qt = q ? q[t] : q0, zt = z ? z[t] : z0;
        dpfl_event e = dpfl_event_poisson(qt, zt, 1);
        dpfl_status s = dpfl_event_check(&e, err);
        if (s) {
            free(acc);
            return s;
        }
        for (size_t i = 0; i < no; i++) acc[i] += dpfl_rdp_sgm(qt, zt, ord[i]);
        double d = dpfl_rdp_to_delta(ord, acc, no, target_eps, DPFL_CONV_TIGHT, NULL);
        if (d > threshold) break;
    }
    free(acc);
    *rounds = t;
    return DPFL_OK;
}
