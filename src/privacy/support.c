/* Which accountant answers which event kind: the table of dpfl/privacy.h (DPFL_EVENT_KINDS) as data, and the one
 * check every entry point that takes events runs before computing anything.  A kind an accountant does not support
 * is refused with one line naming the kind, the event and the accountant -- never answered by another method
 * unless the table says so (PLD's RDP floor). */
#include "dpfl/privacy.h"
#include "privacy_internal.h"

#include <stdio.h>
#include <string.h>

#define SUPPORT_ROW(e, name, rdp, pld, gdp, leaf, adj, poisson, dpacc) [e] = {DPFL_SUPPORT_##rdp, DPFL_SUPPORT_##pld, DPFL_SUPPORT_##gdp},
static const dpfl_support table[DPFL_EV_NKINDS][3] = {DPFL_EVENT_KINDS(SUPPORT_ROW)};

#define KIND_NAME(e, name, rdp, pld, gdp, leaf, adj, poisson, dpacc) [e] = name,
static const char *const names[DPFL_EV_NKINDS] = {DPFL_EVENT_KINDS(KIND_NAME)};

#define KIND_ROW(e, name, rdp, pld, gdp, leaf, adj, poisson, dpacc) [e] = {leaf, DPFL_ADJ_##adj, poisson, dpacc},
static const dpfl_event_kind_row rows[DPFL_EV_NKINDS] = {DPFL_EVENT_KINDS(KIND_ROW)};

dpfl_support dpfl_event_support(dpfl_event_kind kind, dpfl_accountant acc)
{
    if ((unsigned)kind >= (unsigned)DPFL_EV_NKINDS || (unsigned)acc > (unsigned)DPFL_ACC_GDP) return DPFL_SUPPORT_NONE;
    return table[kind][acc];
}

const char *dpfl_event_kind_name(dpfl_event_kind kind)
{
    return (unsigned)kind < (unsigned)DPFL_EV_NKINDS ? names[kind] : "?";
}

const dpfl_event_kind_row *dpfl_event_kind_row_of(dpfl_event_kind kind)
{
    return (unsigned)kind < (unsigned)DPFL_EV_NKINDS ? &rows[kind] : NULL;
}

int dpfl_event_leaf_kind(const char *node)
{
    for (int k = 0; node && k < DPFL_EV_NKINDS; k++)
        if (rows[k].leaf && !strcmp(rows[k].leaf, node)) return k;
    return DPFL_EV_NONE;
}

int dpfl_event_noise_kind(dpfl_event_kind kind)
{
    if ((unsigned)kind >= (unsigned)DPFL_EV_NKINDS) return DPFL_EV_NONE;
    if (rows[kind].leaf) return (int)kind;
    for (int k = 0; k < DPFL_EV_NKINDS; k++)
        if (rows[k].leaf && rows[k].poisson == (int)kind) return k;
    return DPFL_EV_NONE;
}

/* the accountants that do answer the kind with a bound, for the error's advice */
static const char *instead(dpfl_event_kind kind, dpfl_accountant refused)
{
    int rdp = refused != DPFL_ACC_RDP && dpfl_event_support(kind, DPFL_ACC_RDP) == DPFL_SUPPORT_BOUND;
    int pld = refused != DPFL_ACC_PLD && dpfl_event_support(kind, DPFL_ACC_PLD) == DPFL_SUPPORT_BOUND;
    return rdp && pld ? "; use rdp or pld" : rdp ? "; use rdp" : pld ? "; use pld" : "";
}

dpfl_status dpfl_events_supported(const dpfl_event *ev, size_t nev, dpfl_accountant acc, int pld_itself,
                                  dpfl_error *err)
{
    for (size_t i = 0; i < nev; i++) {
        if (ev[i].count == 0) continue; /* an event that did not happen needs no accountant */
        dpfl_support s = dpfl_event_support(ev[i].kind, acc);
        if (s == DPFL_SUPPORT_NONE || (pld_itself && s == DPFL_SUPPORT_RDP_FLOOR)) {
            char d[200];
            dpfl_event_describe(&ev[i], d, sizeof d);
            return dpfl_fail(err, DPFL_EINVAL, "%s accountant does not support %s events (event %zu: %s)%s",
                             dpfl_accountant_name(acc), dpfl_event_kind_name(ev[i].kind), i, d,
                             instead(ev[i].kind, acc));
        }
    }
    return DPFL_OK;
}
