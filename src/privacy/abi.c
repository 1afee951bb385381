/* Sizes and field offsets of the public structs, for bindings (dpfl/abi.h). */
#include "dpfl/abi.h"
#include "dpfl/privacy.h"

#include <stddef.h>
#include <string.h>

const char *dpfl_version(void)
{
    return DPFL_VERSION;
}

typedef struct {
    const char *type, *field;
    size_t value;
} abi_entry;

#define SIZE(T) {#T, NULL, sizeof(T)}
#define FIELD(T, f) {#T, #f, offsetof(T, f)}
#define EVENT_FIELD(codec, ctype, name, key, kinds) FIELD(dpfl_event, name),

/* The enums the event declares as fields are stored as int (the binding and the checkpoint codec rely on it). */
_Static_assert(sizeof(dpfl_event_kind) == sizeof(int) && sizeof(dpfl_adjacency) == sizeof(int) &&
                   sizeof(dpfl_two_stage_bound) == sizeof(int),
               "event enums must be int-sized");

static const abi_entry table[] = {
    SIZE(dpfl_status), SIZE(dpfl_event_kind), SIZE(dpfl_adjacency), SIZE(dpfl_two_stage_bound),
    SIZE(dpfl_conversion), SIZE(dpfl_accountant),
    SIZE(dpfl_error), FIELD(dpfl_error, msg),
    SIZE(dpfl_event), DPFL_EVENT_ALL_FIELDS(EVENT_FIELD)
    SIZE(dpfl_account_opts), FIELD(dpfl_account_opts, conversion), FIELD(dpfl_account_opts, orders),
    FIELD(dpfl_account_opts, norders), FIELD(dpfl_account_opts, pld_bins),
    SIZE(dpfl_guarantee), FIELD(dpfl_guarantee, epsilon), FIELD(dpfl_guarantee, delta), FIELD(dpfl_guarantee, order),
    FIELD(dpfl_guarantee, mu), FIELD(dpfl_guarantee, asymptotic), FIELD(dpfl_guarantee, answered),
    FIELD(dpfl_guarantee, fallback), FIELD(dpfl_guarantee, epsilon_lower),
    SIZE(dpfl_calibrate_opts), FIELD(dpfl_calibrate_opts, accountant), FIELD(dpfl_calibrate_opts, opts),
    FIELD(dpfl_calibrate_opts, tol),
    SIZE(dpfl_fdp_params), FIELD(dpfl_fdp_params, clients), FIELD(dpfl_fdp_params, p), FIELD(dpfl_fdp_params, z),
    FIELD(dpfl_fdp_params, batch), FIELD(dpfl_fdp_params, n), FIELD(dpfl_fdp_params, local_steps),
    FIELD(dpfl_fdp_params, rounds), FIELD(dpfl_fdp_params, copies),
    SIZE(dpfl_fdp_result), FIELD(dpfl_fdp_result, mu_weak), FIELD(dpfl_fdp_result, mu_strong),
    FIELD(dpfl_fdp_result, eps_weak_clt), FIELD(dpfl_fdp_result, eps_strong_clt), FIELD(dpfl_fdp_result, eps_exact),
    FIELD(dpfl_fdp_result, order_exact),
    SIZE(dpfl_rpdp_params), FIELD(dpfl_rpdp_params, z), FIELD(dpfl_rpdp_params, lambda),
    FIELD(dpfl_rpdp_params, inner), FIELD(dpfl_rpdp_params, rounds), FIELD(dpfl_rpdp_params, delta),
    FIELD(dpfl_rpdp_params, bound), FIELD(dpfl_rpdp_params, use_pld), FIELD(dpfl_rpdp_params, orders),
    FIELD(dpfl_rpdp_params, norders),
    SIZE(dpfl_scf_fit), FIELD(dpfl_scf_fit, a), FIELD(dpfl_scf_fit, b), FIELD(dpfl_scf_fit, c),
    FIELD(dpfl_scf_fit, r2), FIELD(dpfl_scf_fit, eps_min), FIELD(dpfl_scf_fit, eps_max), FIELD(dpfl_scf_fit, p_min),
    FIELD(dpfl_scf_fit, npoints),
    SIZE(dpfl_e2e_params), FIELD(dpfl_e2e_params, z), FIELD(dpfl_e2e_params, batch), FIELD(dpfl_e2e_params, n),
    FIELD(dpfl_e2e_params, local_steps), FIELD(dpfl_e2e_params, client_rate), FIELD(dpfl_e2e_params, rounds),
    FIELD(dpfl_e2e_params, server_z), FIELD(dpfl_e2e_params, client_adjacency), FIELD(dpfl_e2e_params, delta),
    SIZE(dpfl_e2e_result), FIELD(dpfl_e2e_result, record_epsilon), FIELD(dpfl_e2e_result, record_order),
    FIELD(dpfl_e2e_result, client_epsilon), FIELD(dpfl_e2e_result, client_order),
    FIELD(dpfl_e2e_result, client_noise), FIELD(dpfl_e2e_result, client_mu),
};

long dpfl_abi_layout(const char *type, const char *field)
{
    if (!type) return -1;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const abi_entry *e = &table[i];
        if (strcmp(e->type, type)) continue;
        if (field ? e->field && !strcmp(e->field, field) : !e->field) return (long)e->value;
    }
    return -1;
}

/* "name:codec:ctype,..." in struct order, from the schema (dpfl/privacy.h DPFL_EVENT_ALL_FIELDS) */
#define EVENT_SCHEMA(codec, ctype, name, key, kinds) #name ":" #codec ":" #ctype ","
static const char event_schema[] = DPFL_EVENT_ALL_FIELDS(EVENT_SCHEMA);

const char *dpfl_abi_fields(const char *type)
{
    return type && !strcmp(type, "dpfl_event") ? event_schema : NULL;
}
