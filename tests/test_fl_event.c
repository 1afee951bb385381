/* dpfl_server_client_event: the client-level event one round of a simulation's aggregation mode releases at a noise
 * multiplier z (what calibration searches over), for every mode, against the event the run driver builds from the
 * config today (accounting/client_accounting.c, and run.c's distributed DP plan) and against what the simulation's
 * own ledger is charged when it runs the round at that noise. */
#include "testutil.h"
#include "fixtures.h"
#include "dpfl/fl.h"
#include "dpfl/privacy.h"
#include "dpfl/mech.h"
#include "accounting/accounting.h"

#include <stdlib.h>

typedef fl_fixture fixture;

/* every field, bit for bit */
#define EV_FIELD_SAME(codec, ctype, name, key, kinds) same = same && memcmp(&a->name, &b->name, sizeof a->name) == 0;
static int event_same(const dpfl_event *a, const dpfl_event *b)
{
    int same = 1;
    DPFL_EVENT_ALL_FIELDS(EV_FIELD_SAME)
    return same;
}

static void fixture_make(fixture *f)
{
    static const int32_t sizes[] = {30, 30, 30, 30, 30, 30, 30, 30, 30, 30};
    fl_fixture_make(f, "mlp:10-8-3", sizes, 10);
    f->cfg.run.threads = 2;
    f->cfg.fl.local_steps = 1;
    f->cfg.fl.batch = 10;
    f->cfg.fl.rounds = 4;
    f->cfg.client_dp.enabled = 1;
    f->cfg.client_dp.clip = 1.0;
    f->cfg.client_dp.noise = 1.3;
}

static dpfl_sim *sim_make(fixture *f, float **global)
{
    dpfl_rng root;
    dpfl_rng_init_seed(&root, 7);
    *global = malloc(f->model.nparam * sizeof(float));
    dpfl_model_init(&f->model, *global, &root);
    dpfl_sim *sim;
    dpfl_error err;
    assert_int_equal(dpfl_sim_create(&f->cfg, &f->model, &f->train, &f->test, &f->part, &root, *global, &sim, &err),
                     DPFL_OK);
    return sim;
}

/* The event rebuilt independently from the configuration (the round mechanism of mech/round.c at the configured
 * sampling design; median clipping: not private), or for distributed DP the plan at z with the run's stand-in bits
 * and cohort and the accounted rate: what the simulation's own event must equal. */
static dpfl_event config_event(const dpfl_config *cfg, int32_t K, double z, int32_t round)
{
    if (cfg->client_dp.clip_strategy == DPFL_CLIP_MEDIAN) return dpfl_event_not_private(1);
    dpfl_client_sampling k = cfg->fl.sampling == DPFL_SAMPLE_POISSON ? DPFL_SAMPLE_POISSON
                             : cfg->fl.sampling == DPFL_SAMPLE_FIXED ? DPFL_SAMPLE_FIXED
                                                                     : DPFL_SAMPLE_ALL;
    dpfl_mech_round r = dpfl_mech_round_make(k, K, dpfl_round_client_rate(cfg, round),
                                             dpfl_round_clients_per_round(cfg, round), cfg->client_dp.clip, z);
    return dpfl_mech_round_event(&r);
}

static dpfl_event run_event(const fixture *f, int32_t round, double z)
{
    const dpfl_config *cfg = &f->cfg;
    if (cfg->client_dp.mechanism != DPFL_CLIENT_MECH_DDP) return config_event(cfg, f->part.clients, z, round);
    dpfl_ddp_plan p;
    dpfl_error err;
    assert_int_equal(dpfl_ddp_plan_make(f->model.nparam, cfg->client_dp.clip, z, cfg->client_dp.ddp_inflation, 32, 2,
                                        cfg->client_dp.ddp_tolerated_dropout, &p, &err),
                     DPFL_OK);
    return dpfl_ddp_event(&p, fl_client_rate_accounted(cfg, f->part.clients, round));
}

/* For rounds 1-3 and two multipliers: the simulation's event equals the run's; the noise in force is untouched;
 * after dpfl_server_set_noise(z) and the round, the ledger's charge equals the event asked for before. */
static void check_mode(fixture *f, int bitwise)
{
    float *g;
    dpfl_sim *sim = sim_make(f, &g);
    dpfl_error err;
    const double zs[] = {0.9, 2.5};
    for (int32_t r = 1; r <= 3; r++) {
        for (int i = 0; i < 2; i++) {
            dpfl_event ev, want = run_event(f, r, zs[i]);
            const double before = dpfl_server_update_noise(dpfl_sim_server(sim));
            assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), r, zs[i], &ev, &err), DPFL_OK);
            assert_true(dpfl_server_update_noise(dpfl_sim_server(sim)) == before); /* asked on a copy */
            assert_int_equal(ev.kind, want.kind);
            if (bitwise) assert_true(event_same(&ev, &want));
            else assert_true(fabs(ev.z - want.z) <= 1e-12 * want.z && ev.q == want.q);
        }
        /* the round at zs[r % 2], sampled first: the charge is the event of the design the sampler ran */
        const double z = zs[r % 2];
        dpfl_event asked;
        assert_int_equal(dpfl_server_set_noise(dpfl_sim_server(sim), r, z, &err), DPFL_OK);
        dpfl_sim_sample(sim, r, NULL);
        assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), r, z, &asked, &err), DPFL_OK);
        const dpfl_event want = run_event(f, r, z);
        if (bitwise) assert_true(event_same(&asked, &want));
        else assert_true(fabs(asked.z - want.z) <= 1e-12 * want.z && asked.q == want.q);
        dpfl_round_metrics m;
        assert_int_equal(dpfl_sim_train(sim, r, &m, &err), DPFL_OK);
        const dpfl_ledger *l = dpfl_server_ledger(dpfl_sim_server(sim));
        const dpfl_event *last = &l->client_events[l->nclient_events - 1];
        if (asked.kind == DPFL_EV_NOT_PRIVATE) { /* the ledger merges them: one event counting the rounds */
            assert_true(last->kind == DPFL_EV_NOT_PRIVATE && last->count == r);
        } else { /* consecutive rounds differ in z: one event each */
            assert_int_equal(l->nclient_events, r);
            assert_true(event_same(last, &asked));
        }
    }
    dpfl_event ev;
    assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), 1, 0.0, &ev, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), 1, -1.0, &ev, &err), DPFL_EINVAL);
    dpfl_sim_free(sim);
    free(g);
}

static void mean_mode_is_not_private(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f);
    f.cfg.client_dp.enabled = 0;
    float *g;
    dpfl_sim *sim = sim_make(&f, &g);
    dpfl_event ev;
    dpfl_error err;
    assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), 1, 1.0, &ev, &err), DPFL_OK);
    assert_int_equal(ev.kind, DPFL_EV_NOT_PRIVATE);
    dpfl_sim_free(sim);
    free(g);
    fl_fixture_free(&f);
}

static void cdp_poisson_equals_the_run_event(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f);
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.4;
    check_mode(&f, 1);
    fl_fixture_free(&f);
}

static void cdp_fixed_equals_the_run_event(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f);
    f.cfg.fl.sampling = DPFL_SAMPLE_FIXED;
    f.cfg.fl.clients_per_round = 4;
    check_mode(&f, 1);
    fl_fixture_free(&f);
}

static void cdp_all_equals_the_run_event(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f);
    f.cfg.fl.sampling = DPFL_SAMPLE_ALL;
    check_mode(&f, 1);
    fl_fixture_free(&f);
}

/* Adaptive clipping: z is split with the quantile count and recombined from the two noises, equal to z up to
 * rounding (the ledger gets exactly what was asked). */
static void cdp_adaptive_equals_the_run_event_up_to_rounding(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f);
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.5;
    f.cfg.client_dp.clip_strategy = DPFL_CLIP_ADAPTIVE;
    f.cfg.client_dp.quantile_noise = 2.0;
    check_mode(&f, 0);
    /* a z the count noise leaves nothing for: refused, as dpfl_server_set_noise refuses it */
    float *g;
    dpfl_sim *sim = sim_make(&f, &g);
    dpfl_event ev;
    dpfl_error err;
    assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), 1, 5.0, &ev, &err), DPFL_EINVAL);
    assert_int_equal(dpfl_server_set_noise(dpfl_sim_server(sim), 1, 5.0, &err), DPFL_EINVAL);
    dpfl_sim_free(sim);
    free(g);
    fl_fixture_free(&f);
}

static void median_is_not_private(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f);
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.5;
    f.cfg.client_dp.clip_strategy = DPFL_CLIP_MEDIAN;
    check_mode(&f, 1);
    float *g;
    dpfl_sim *sim = sim_make(&f, &g);
    dpfl_event ev;
    dpfl_error err;
    assert_int_equal(dpfl_server_client_event(dpfl_sim_server(sim), 1, 1.0, &ev, &err), DPFL_OK);
    assert_int_equal(ev.kind, DPFL_EV_NOT_PRIVATE);
    dpfl_sim_free(sim);
    free(g);
    fl_fixture_free(&f);
}

static void ddp_equals_the_run_event(void **state)
{
    (void)state;
    fixture f;
    fixture_make(&f);
    f.cfg.fl.sampling = DPFL_SAMPLE_POISSON;
    f.cfg.fl.client_rate = 0.5;
    f.cfg.client_dp.mechanism = DPFL_CLIENT_MECH_DDP;
    f.cfg.client_dp.ddp_secagg = 0;
    check_mode(&f, 1);
    fl_fixture_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(mean_mode_is_not_private),
        cmocka_unit_test(cdp_poisson_equals_the_run_event),
        cmocka_unit_test(cdp_fixed_equals_the_run_event),
        cmocka_unit_test(cdp_all_equals_the_run_event),
        cmocka_unit_test(cdp_adaptive_equals_the_run_event_up_to_rounding),
        cmocka_unit_test(median_is_not_private),
        cmocka_unit_test(ddp_equals_the_run_event),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
