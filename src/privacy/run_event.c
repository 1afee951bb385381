/* A run's epsilon recomputed from its event (dpfl_run_event): the accountant and the orders the run used, on the
 * composition it recorded.  Nothing here knows which mode produced the event. */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <string.h>

dpfl_status dpfl_run_event_epsilon(const dpfl_run_event *r, dpfl_guarantee *g, dpfl_error *err)
{
    dpfl_account_opts o;
    memset(&o, 0, sizeof o);
    if (r->orders == DPFL_ORDERS_INTEGER) o.orders = dpfl_rdp_default_orders(&o.norders);
    if (r->orders == DPFL_ORDERS_RPDP) o.orders = dpfl_rpdp_orders(&o.norders);
    if (r->nevents == 0) {
        memset(g, 0, sizeof *g);
        g->delta = r->delta;
        g->answered = r->accountant;
        return DPFL_OK;
    }
    return dpfl_account_epsilon(r->events, r->nevents, r->delta, r->accountant, &o, g, err);
}
