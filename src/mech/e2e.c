/* End-to-end client-level DP from record-level noise (the thesis's section 3.3, "end-to-end DP"; the bound is
 * privacy/e2e.c's dpfl_e2e_client_mu): each local step's clipped sum is projected onto the ball of radius B C
 * (fl/client.c), so zeroing out one client moves it by at most B C while the noise has std z sens (the DP-SGD
 * step's own sensitivity, dpsgd.c).  A round of s steps -- the most any client takes -- is a Gaussian of mu =
 * sqrt(s) B C / (z sens), multiplier halved under replace-one (fixed-size client sampling), and the server's
 * client-level noise can only help.  The noise is the client's own, so participation is visible: the rounds are
 * one two-stage event at the largest rate any round's client design charges (a larger rate only adds loss), each
 * participation a Gaussian of multiplier 1 / mu. */
#include "dpfl/mech.h"

dpfl_mech_e2e dpfl_mech_e2e_make(const dpfl_mech_dpsgd *step, int32_t batch, double server_z)
{
    return (dpfl_mech_e2e){step->noise_std, batch, server_z, 0, 0.0, 0};
}

void dpfl_mech_e2e_client(dpfl_mech_e2e *e, int64_t steps)
{
    if (steps > e->steps) e->steps = steps;
}

void dpfl_mech_e2e_round(dpfl_mech_e2e *e, const dpfl_mech_clients *design)
{
    if (design->q > e->q) e->q = design->q;
    if (design->kind == DPFL_SAMPLE_FIXED) e->replace_one = 1;
}

static dpfl_adjacency adjacency(const dpfl_mech_e2e *e)
{
    return e->replace_one ? DPFL_ADJ_REPLACE_ONE : DPFL_ADJ_ZERO_OUT;
}

double dpfl_mech_e2e_mu(const dpfl_mech_e2e *e)
{
    return dpfl_e2e_client_mu(e->noise_std, e->batch, e->steps > 0 ? e->steps : 1, adjacency(e), e->server_z);
}

dpfl_event dpfl_mech_e2e_event(const dpfl_mech_e2e *e, int64_t rounds)
{
    dpfl_event ev = dpfl_event_two_stage(e->q, 1.0, 1.0 / dpfl_mech_e2e_mu(e), 1, rounds, DPFL_BOUND_RPDP);
    ev.adjacency = adjacency(e);
    return ev;
}
