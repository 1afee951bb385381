/* Cross-key checks of a parsed configuration (dpfl_config_validate): each key is typed and in its range when it is
 * read (config.c); what is checked here are the combinations -- a sampler and its adjacency, a noise or a target,
 * distributed DP's constraints, rPDP-FL's budgets, schedules against data.clients, own data's constants. */
#include "config_internal.h"

#include <math.h>
#include <string.h>

/* rPDP-FL (record_dp.budgets != none): what the two-stage accounting and the non-uniform sampler need. */
static dpfl_status validate_budgets(const dpfl_config *c, dpfl_error *err)
{
    const dpfl_record_dp_config *r = &c->record_dp;
    if (r->noise != 0.0 || r->target_epsilon != 0.0)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.noise: with budgets the noise is calibrated (a record sampled "
                                           "with p = 1 meets budget_max); remove noise and target_epsilon");
    if (r->sampler != DPFL_BATCH_POISSON)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.sampler: budgets need sampler = poisson (each record with its "
                                           "own probability p_i)");
    if (r->accountant != DPFL_ACC_RDP)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.accountant: budgets are accounted with rdp (the two-stage bound "
                                           "of client and record sampling)");
    if (r->secure_mode || r->e2e || r->per_layer)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.%s: not available with budgets",
                         r->secure_mode ? "secure_mode" : r->e2e ? "e2e" : "per_layer");
    if (c->fl.local_steps <= 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.local_steps: budgets need a fixed number of local steps per round "
                                           "(the two-stage bound's tau); set local_steps > 0");
    if (c->fl.sampling == DPFL_SAMPLE_FIXED || c->fl.client_rate_schedule.n)
        return dpfl_fail(err, DPFL_EINVAL, "fl.sampling: budgets are accounted for Poisson client sampling at one "
                                           "rate (sampling = poisson or all, no client_rate_schedule)");
    if (!(r->budget_min < r->budget_max))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.budget_min: %g must be below budget_max (%g)", r->budget_min,
                         r->budget_max);
    if (r->budgets == DPFL_BUDGETS_FILE && !r->budget_file[0])
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.budget_file: budgets = file needs a file");
    if (r->budgets == DPFL_BUDGETS_CLASS && !r->class_budgets.n)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.class_budgets: budgets = class needs E0,E1,... (one per class)");
    if (r->budget_policy == DPFL_POLICY_FILTER && r->filter_order != 0.0 && !(r->filter_order > 1.0))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.filter_order: %g must be above 1 (or 0 for auto)",
                         r->filter_order);
    if (r->budget_policy == DPFL_POLICY_FILTER && r->two_stage_bound != DPFL_TWO_STAGE_PUBLISHED)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.two_stage_bound: budget_policy = filter charges each step's "
                                           "individual Renyi loss, not a two-stage bound; remove two_stage_bound");
    return DPFL_OK;
}

/* Clipping-threshold decay: a finite schedule below 1 that the filter's per-record bounds do not contradict. */
static dpfl_status validate_clip_decay(const dpfl_record_dp_config *r, dpfl_error *err)
{
    if (!(r->clip_decay > 0.0)) return DPFL_OK;
    if (!(r->clip_decay < 1.0))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip_decay: %g leaves no clip after round 1 (must be < 1)",
                         r->clip_decay);
    if (isinf(r->clip))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip_decay: needs a finite clip to decay from");
    if (r->clip_min > r->clip)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip_min: %g is above the starting clip %g (the decay would "
                                           "never act)", r->clip_min, r->clip);
    if (r->budgets != DPFL_BUDGETS_NONE && r->budget_policy == DPFL_POLICY_FILTER)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip_decay: not available with budget_policy = filter (its "
                                           "per-record bounds are planned against one clip)");
    return DPFL_OK;
}

/* fl.personal (read into its layers with the key; resolved against the model when the simulation starts) */
static dpfl_status validate_personal(const dpfl_config *c, dpfl_error *err)
{
    if (c->fl.personal.n && c->fl.personalization == DPFL_PERSONAL_HELPER)
        return dpfl_fail(err, DPFL_EINVAL, "fl.personal: not available with personalization = helper (a helper model "
                                           "mixes every parameter with the global model)");
    return DPFL_OK;
}

/* Cross-device cohorts (PrivateFL Table 11): whole cohorts that partition the clients, rounds that give every
 * client exactly `participations` rounds, and only mechanisms whose releases the ledger can charge once per pass
 * (one unsampled Gaussian of one multiplier for all the pass's rounds). */
static dpfl_status validate_cross_device(const dpfl_config *c, dpfl_error *err)
{
    if (c->fl.sampling != DPFL_SAMPLE_CROSS_DEVICE) return DPFL_OK;
    const int32_t K = c->data.clients;
    const double mk = c->fl.client_rate * K;
    const int32_t m = (int32_t)llround(mk);
    if (m < 1 || fabs(mk - m) > 1e-9 * fmax(1.0, mk) || K % m != 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_rate: %g x %d clients = %g is not a whole cohort that divides "
                                           "data.clients (cross-device cuts the clients into cohorts of that size)",
                         c->fl.client_rate, K, mk);
    const int64_t want = (int64_t)c->fl.participations * (K / m);
    if (c->fl.rounds != want)
        return dpfl_fail(err, DPFL_EINVAL, "fl.rounds: %d, but cross-device sampling with %d participations and %d "
                                           "cohorts per pass needs rounds = %lld (each client in exactly %d)",
                         c->fl.rounds, c->fl.participations, K / m, (long long)want, c->fl.participations);
    const char *why = c->client_dp.enabled && c->client_dp.mechanism == DPFL_CLIENT_MECH_DDP
                          ? "client_dp.mechanism = ddp (the Skellam accountant's client sampling is Poisson)"
                      : c->client_dp.enabled && c->client_dp.clip_strategy == DPFL_CLIP_ADAPTIVE
                          ? "client_dp.clip_strategy = adaptive (its quantile releases are charged round by round)"
                      : c->client_dp.enabled && c->client_dp.noise_schedule.n
                          ? "client_dp.noise_schedule (one pass is charged at one multiplier)"
                      : c->record_dp.enabled && c->record_dp.e2e
                          ? "record_dp.e2e (its bound is for clients sampled independently each round)"
                      : c->record_dp.enabled && c->record_dp.budgets != DPFL_BUDGETS_NONE
                          ? "record_dp.budgets (rPDP-FL's two-stage bound is for Poisson client sampling)"
                          : NULL;
    if (why) return dpfl_fail(err, DPFL_EINVAL, "fl.sampling = cross-device: not available with %s", why);
    return DPFL_OK;
}

/* SCAFFOLD's control variates (src/fl/scaffold.c): where the client's variate is post-processing of what it
 * releases (record-level DP-SGD, or no DP) and the correction is a plain SGD step. */
static dpfl_status validate_scaffold(const dpfl_config *c, dpfl_error *err)
{
    if (!c->fl.scaffold) return DPFL_OK;
    const char *why =
        c->client_dp.enabled ? "client_dp (the server's control variate would be formed from the clients' unclipped, "
                               "un-noised updates and steer every later round: no client-level bound covers it; "
                               "DP-SCAFFOLD is record-level DP)"
        : c->fl.optimizer != DPFL_OPT_SGD || c->fl.momentum != 0.0
            ? "fl.optimizer other than plain sgd (the correction c - c_i is added to each plain SGD step)"
        : c->fl.personalization == DPFL_PERSONAL_HELPER ? "personalization = helper (training starts from a helper "
                                                          "model, not the global one the variate is measured from)"
        : c->record_dp.enabled && c->record_dp.e2e ? "record_dp.e2e (its client-level bound is not analysed with "
                                                     "control variates)"
                                                   : NULL;
    return why ? dpfl_fail(err, DPFL_EINVAL, "fl.scaffold: not available with %s", why) : DPFL_OK;
}

/* data.clients against the sampler, and some local work per round */
static dpfl_status validate_fl(const dpfl_config *c, dpfl_error *err)
{
    if ((c->fl.sampling == DPFL_SAMPLE_FIXED) && c->fl.clients_per_round > c->data.clients)
        return dpfl_fail(err, DPFL_EINVAL, "fl.clients_per_round: %d is more than data.clients (%d)",
                         c->fl.clients_per_round, c->data.clients);
    if ((c->fl.sampling == DPFL_SAMPLE_POISSON) && c->fl.client_rate <= 0.0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.client_rate: must be > 0 with sampling = poisson");
    if (c->fl.local_steps == 0 && c->fl.local_epochs == 0)
        return dpfl_fail(err, DPFL_EINVAL, "fl.local_steps: one of local_steps and local_epochs must be > 0");
    dpfl_status st = validate_cross_device(c, err);
    return st ? st : validate_scaffold(c, err);
}

/* record_dp (when enabled): the adjacency its sampler is analysed under, a noise or a target, a finite clip */
static dpfl_status validate_record_dp(const dpfl_config *c, dpfl_error *err)
{
    const dpfl_record_adjacency want =
        c->record_dp.sampler == DPFL_BATCH_POISSON ? DPFL_RADJ_ADD_REMOVE : DPFL_RADJ_REPLACE_ONE;
    if (c->record_dp.adjacency != DPFL_RADJ_AUTO && c->record_dp.adjacency != want)
        return dpfl_fail(err, DPFL_EINVAL,
                         "record_dp.adjacency: %s does not match sampler = %s (which is analysed under %s)",
                         dpfl_config_choice(c, "record_dp.adjacency"), dpfl_config_choice(c, "record_dp.sampler"),
                         want == DPFL_RADJ_ADD_REMOVE ? "add-remove" : "replace-one");
    if (c->record_dp.budgets != DPFL_BUDGETS_NONE) {
        dpfl_status bs = validate_budgets(c, err);
        if (bs) return bs;
    } else if (c->record_dp.noise == 0.0 && c->record_dp.target_epsilon == 0.0)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.noise: set noise > 0 or target_epsilon > 0");
    if (isinf(c->record_dp.clip) && c->record_dp.noise > 0.0)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip: inf gives no sensitivity bound; use a finite clip");
    if (c->record_dp.secure_mode && (c->record_dp.accountant == DPFL_ACC_PLD))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.accountant: secure_mode is accounted with rdp (integer "
                                           "orders bound the discrete Gaussian); pld is for the continuous one");
    if (isinf(c->record_dp.clip) && c->record_dp.secure_mode)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip: secure_mode needs a finite clip");
    if (isinf(c->record_dp.clip) && c->record_dp.target_epsilon > 0.0)
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.clip: inf is incompatible with target_epsilon");
    return validate_clip_decay(&c->record_dp, err);
}

/* client_dp: a noise or a target, distributed DP's constraints, adaptive clipping's quantile noise */
static dpfl_status validate_client_dp(const dpfl_config *c, dpfl_error *err)
{
    if (c->client_dp.enabled && (c->client_dp.clip_strategy != DPFL_CLIP_MEDIAN)) {
        if (c->client_dp.noise == 0.0 && c->client_dp.target_epsilon == 0.0)
            return dpfl_fail(err, DPFL_EINVAL, "client_dp.noise: set noise > 0 or target_epsilon > 0");
    }
    if (c->client_dp.enabled && c->client_dp.mechanism == DPFL_CLIENT_MECH_DDP) {
        const char *why = c->client_dp.clip_strategy != DPFL_CLIP_FIXED ? "client_dp.clip_strategy must be fixed (each "
                                                                          "client clips its own update to S)"
                          : c->client_dp.per_layer ? "client_dp.per_layer must be no (one L2 bound for the rotation)"
                          : c->fl.sampling == DPFL_SAMPLE_FIXED ? "fl.sampling must be poisson or all (the Skellam "
                                                                  "accountant's client sampling is Poisson)"
                          : c->client_dp.noise_schedule.n ? "client_dp.noise_schedule is not supported (one noise "
                                                             "level for the run)"
                          : c->client_dp.ddp_bits != 0 && c->client_dp.ddp_bits < 8 ? "client_dp.ddp_bits must be 0 or "
                                                                                      "in [8, 32]"
                                                                                    : NULL;
        if (why) return dpfl_fail(err, DPFL_EINVAL, "client_dp.mechanism = ddp: %s", why);
    }
    if (c->client_dp.enabled && (c->client_dp.clip_strategy == DPFL_CLIP_ADAPTIVE) && c->client_dp.quantile_noise > 0 &&
        c->client_dp.noise > 0 && 2.0 * c->client_dp.quantile_noise <= c->client_dp.noise)
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.quantile_noise: must exceed noise / 2 (%g) so that the update "
                                           "and the quantile noise together are one Gaussian with multiplier z",
                         c->client_dp.noise / 2.0);
    return DPFL_OK;
}

/* the schedules against data.clients, noise and e2e */
static dpfl_status validate_schedules(const dpfl_config *c, dpfl_error *err)
{
    /* the schedules' values are in range when they are read; the counts must also fit data.clients */
    const dpfl_schedule *m = &c->fl.clients_per_round_schedule;
    for (int i = 0; i < m->n; i++)
        if (m->value[i] > c->data.clients)
            return dpfl_fail(err, DPFL_EINVAL, "fl.clients_per_round_schedule: %g clients from round %d is more than "
                                               "data.clients (%d)", m->value[i], (int)m->round[i], c->data.clients);
    if (c->client_dp.noise_schedule.n && c->client_dp.noise == 0.0 && c->client_dp.enabled)
        return dpfl_fail(err, DPFL_EINVAL, "client_dp.noise_schedule: give noise too (calibration of a schedule "
                                           "is not supported); target_epsilon then acts as a stop rule");
    if (c->record_dp.e2e && (c->fl.client_rate_schedule.n || c->fl.clients_per_round_schedule.n ||
                             c->client_dp.noise_schedule.n))
        return dpfl_fail(err, DPFL_EINVAL, "record_dp.e2e: not available with client sampling or noise schedules");
    return DPFL_OK;
}

/* own data (csv:, idx:, arrays): a file, standardization constants, a partition that has sources */
static dpfl_status validate_data(const dpfl_config *c, dpfl_error *err)
{
    if (!fl_dataset_is_typed(&c->data)) /* what the kind and files say would not be what the data module reads */
        return dpfl_fail(err, DPFL_EINVAL, "data.dataset: '%.200s' was written into the config without "
                                           "dpfl_config_set, so its kind and files are not typed: set it with "
                                           "dpfl_config_set(cfg, \"data.dataset=...\")", c->data.dataset);
    const int own = dpfl_config_own_data(c); /* files or arrays */
    if (own && c->data.kind != DPFL_DATASET_MEMORY && !c->data.files.n)
        return dpfl_fail(err, DPFL_EINVAL, "data.dataset: '%s' names no file", c->data.dataset);
    if (c->data.test[0] && !dpfl_dataset_is_files(c->data.test))
        return dpfl_fail(err, DPFL_EINVAL, "data.test: '%s' is not csv:FILES or idx:FILES", c->data.test);
    if (c->data.normalize == DPFL_NORM_STANDARD && own && (!c->data.feature_mean.n || !c->data.feature_std.n))
        return dpfl_fail(err, DPFL_EINVAL, "data.normalize: standard with your own data needs data.feature_mean and "
                                           "data.feature_std (public constants; dpfl never computes them from the "
                                           "private data)");
    if (c->data.normalize == DPFL_NORM_STANDARD && !own && !dpfl_dataset_has_standardization(c->data.dataset))
        return dpfl_fail(err, DPFL_EINVAL, "data.normalize: standard is defined for mnist and fashion-mnist (heart "
                                           "is already z-scored per centre)");
    if ((c->data.partition == DPFL_PART_NATURAL) && c->data.kind != DPFL_DATASET_HEART && !own)
        return dpfl_fail(err, DPFL_EINVAL, "data.partition: natural needs a dataset with sources (heart, or csv: "
                                           "with one file per client)");
    return DPFL_OK;
}

dpfl_status dpfl_config_validate(const dpfl_config *c, dpfl_error *err)
{
    dpfl_status s = validate_fl(c, err);
    if (!s) s = c->record_dp.enabled ? validate_record_dp(c, err) : DPFL_OK;
    if (!s) s = validate_client_dp(c, err);
    if (!s) s = validate_schedules(c, err);
    if (!s) s = validate_personal(c, err);
    if (!s) s = validate_data(c, err);
    return s;
}
