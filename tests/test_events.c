/* Events as one schema: the JSON codec of a run's events (every kind round-trips, every malformed input is refused
 * with a line naming it), the recomputation from it, the layout the binding reads, and the step count and noise
 * std that only the mechanism computes. */
#include "testutil.h"
#include "dpfl/abi.h"
#include "dpfl/mech.h"
#include "dpfl/privacy.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static dpfl_event every_kind(int i)
{
    switch (i) {
    case 0: return dpfl_event_gaussian(1.3, 7);
    case 1: return dpfl_event_poisson(0.0123456789, 1.1, 100000);
    case 2: return dpfl_event_fixed(1000, 37, 0.9, 55);
    case 3: return dpfl_event_two_stage(0.3, 0.05, 1.7, 12, 40, DPFL_BOUND_RPDP);
    case 4: return dpfl_event_skellam(0.25, 5000.5, 120.25, 9.0e6, 9);
    case 5: return dpfl_event_rdp_filter(43.928923687539125, 4.9502281556452727, 1);
    case 6: return dpfl_event_noise(DPFL_EV_DISCRETE_GAUSSIAN, 2.5, 11);
    default: return dpfl_event_not_private(0);
    }
}

static dpfl_run_event run_of(dpfl_event *ev, size_t n, dpfl_accountant acc)
{
    dpfl_run_event r;
    memset(&r, 0, sizeof r);
    strcpy(r.unit, "record");
    r.accountant = acc;
    r.delta = 1e-5;
    r.epsilon = NAN;
    r.held_by = 3;
    r.events = ev;
    r.nevents = n;
    return r;
}

/* every field the schema lists survives JSON exactly, for every kind */
static void json_roundtrip_every_kind(void **state)
{
    (void)state;
    dpfl_event ev[DPFL_EV_NKINDS];
    for (int i = 0; i < DPFL_EV_NKINDS; i++) ev[i] = every_kind(i);
    ev[0].adjacency = DPFL_ADJ_REPLACE_ONE;
    dpfl_run_event r = run_of(ev, DPFL_EV_NKINDS, DPFL_ACC_PLD), back;
    r.orders = DPFL_ORDERS_RPDP;
    r.epsilon = 1.25;
    char *text;
    dpfl_error err;
    assert_int_equal(dpfl_run_event_json(&r, &text, &err), DPFL_OK);
    assert_int_equal(dpfl_run_event_parse(text, "t", &back, &err), DPFL_OK);
    assert_int_equal(back.nevents, DPFL_EV_NKINDS);
    assert_int_equal(back.accountant, DPFL_ACC_PLD);
    assert_int_equal(back.orders, DPFL_ORDERS_RPDP);
    assert_int_equal(back.held_by, 3);
    assert_true(back.epsilon == 1.25 && back.delta == 1e-5);
#define SAME_FIELD(codec, ctype, name, key, kinds) assert_true(back.events[i].name == ev[i].name);
    for (size_t i = 0; i < DPFL_EV_NKINDS; i++) {
        DPFL_EVENT_ALL_FIELDS(SAME_FIELD)
    }
    assert_non_null(strstr(text, "{\"kind\":\"rdp-filter\",\"adjacency\":\"add-remove\",\"count\":1,"
                                 "\"alpha\":43.928923687539125,\"cap\":4.9502281556452727}"));
    /* dp_accounting's expression where it has the classes */
    assert_non_null(strstr(text, "\"dp_accounting\":\"SelfComposedDpEvent(PoissonSampledDpEvent(0.0123456789, "
                                 "GaussianDpEvent(1.1000000000000001)), 100000)\""));
    assert_non_null(strstr(text, "SampledWithoutReplacementDpEvent(1000, 37, GaussianDpEvent(0.90000000000000002))"));
    free(text);
    dpfl_run_event_free(&back);
}

static void expect_refused(const char *json, const char *msg)
{
    dpfl_run_event r;
    dpfl_error err;
    dpfl_status st = dpfl_run_event_parse(json, "f.json", &r, &err);
    if (st == DPFL_OK || !strstr(err.msg, msg)) print_error("%s -> %s\n", json, st ? err.msg : "accepted");
    assert_int_not_equal(st, DPFL_OK);
    assert_non_null(strstr(err.msg, msg));
    assert_null(r.events);
}

#define HEAD "{\"unit\":\"record\",\"accountant\":\"rdp\",\"orders\":\"default\",\"delta\":1e-5,\"held_by\":1,"
static void json_refuses_malformed(void **state)
{
    (void)state;
    expect_refused("[1]", "f.json: not a JSON object");
    expect_refused("{", "f.json: not valid JSON");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"poisson\",\"adjacency\":\"add-remove\",\"z\":1,\"count\":3}]}",
                   "f.json: event 0 (poisson) has no \"q\"");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"laplace\",\"count\":3}]}", "event 0 has no known \"kind\"");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"gaussian\",\"adjacency\":\"swap\",\"z\":1,\"count\":3}]}",
                   "\"adjacency\" is not a known name");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"gaussian\",\"adjacency\":\"add-remove\",\"z\":-1,\"count\":3}]}",
                   "event 0: noise multiplier z (-1)");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"gaussian\",\"adjacency\":\"add-remove\",\"z\":1,\"count\":2.5}]}",
                   "\"count\" is not an integer");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"poisson\",\"adjacency\":\"add-remove\",\"z\":1,\"q\":1.5,"
                        "\"count\":3}]}",
                   "sampling rate q (1.5)");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"fixed\",\"adjacency\":\"add-remove\",\"z\":1,\"q\":0.1,\"n\":10,"
                        "\"batch\":1,\"count\":3}]}",
                   "replace-one adjacency only");
    expect_refused("{\"unit\":\"record\",\"accountant\":\"moments\",\"orders\":\"default\",\"delta\":1e-5,"
                   "\"held_by\":1,\"composed\":[]}",
                   "\"accountant\" is not rdp, pld or gdp");
    expect_refused("{\"unit\":\"record\",\"accountant\":\"rdp\",\"orders\":\"default\",\"delta\":1,\"held_by\":1,"
                   "\"composed\":[]}",
                   "\"delta\" must be a number in (0, 1)");
    expect_refused(HEAD "\"composed\":{}}", "no \"composed\" array");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"rdp-filter\",\"adjacency\":\"add-remove\",\"alpha\":8,"
                        "\"count\":1}]}",
                   "event 0 (rdp-filter) has no \"cap\"");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"rdp-filter\",\"adjacency\":\"add-remove\",\"alpha\":1,"
                        "\"cap\":2,\"count\":1}]}",
                   "filter order alpha (1)");
    expect_refused(HEAD "\"composed\":[{\"kind\":\"rdp-filter\",\"adjacency\":\"replace-one\",\"alpha\":8,"
                        "\"cap\":2,\"count\":1}]}",
                   "add-remove adjacency");
}


/* ---------------------------------------------------------------- the tree form (dp_accounting's DpEvent algebra) */
static dpfl_run_event parse_ok(const char *json)
{
    dpfl_run_event r;
    dpfl_error err;
    dpfl_status st = dpfl_run_event_parse(json, "t.json", &r, &err);
    if (st) print_error("%s -> %s\n", json, err.msg);
    assert_int_equal(st, DPFL_OK);
    return r;
}

/* every kind written as a tree and read back alone is the same composition, with and without a held_by node */
static void tree_roundtrip_every_kind(void **state)
{
    (void)state;
    dpfl_event ev[DPFL_EV_NKINDS];
    for (int i = 0; i < DPFL_EV_NKINDS; i++) ev[i] = every_kind(i);
    ev[1].adjacency = DPFL_ADJ_ZERO_OUT; /* a leaf's own adjacency, not its combinator's, survives */
    for (int held = 1; held <= 3; held += 2) {
        for (int i = 0; i < DPFL_EV_NKINDS; i++) ev[i].count = every_kind(i).count * held;
        dpfl_run_event r = run_of(ev, DPFL_EV_NKINDS, DPFL_ACC_RDP);
        r.held_by = held;
        char *text;
        dpfl_error err;
        assert_int_equal(dpfl_run_event_json(&r, &text, &err), DPFL_OK);
        assert_true((strstr(text, "\"held_by\":{\"clients\":3") != NULL) == (held == 3));
        char *tree = strstr(text, "\"tree\":"); /* keep the head and the tree only */
        char *head = strstr(text, "\"composed\":[");
        assert_non_null(tree);
        assert_non_null(head);
        memmove(head, tree, strlen(tree) + 1);
        dpfl_run_event back = parse_ok(text);
        assert_int_equal(back.nevents, DPFL_EV_NKINDS);
        for (size_t i = 0; i < DPFL_EV_NKINDS; i++) {
            DPFL_EVENT_ALL_FIELDS(SAME_FIELD)
        }
        free(text);
        dpfl_run_event_free(&back);
    }
}

#define TREE_HEAD "{\"unit\":\"client\",\"accountant\":\"rdp\",\"orders\":\"default\",\"delta\":1e-5,\"tree\":"

/* a noise distribution's event comes from its row of DPFL_EVENT_KINDS: dpfl_event_noise builds it with the row's
 * adjacency, its leaf (named by the row) reads back as it, and its Poisson kind is the row's; a kind with no leaf
 * gives an event that check refuses */
static void noise_kinds_from_the_table(void **state)
{
    (void)state;
    int leaves = 0;
    for (int k = 0; k < DPFL_EV_NKINDS; k++) {
        dpfl_event e = dpfl_event_noise((dpfl_event_kind)k, 1.5, 3);
        dpfl_error err;
        if (k != DPFL_EV_GAUSSIAN && k != DPFL_EV_SKELLAM && k != DPFL_EV_DISCRETE_GAUSSIAN) {
            assert_int_equal(dpfl_event_check(&e, &err), DPFL_EINVAL);
            assert_non_null(strstr(err.msg, "unknown event kind"));
            continue;
        }
        leaves++;
        assert_int_equal(e.kind, k);
        assert_true(e.z == 1.5 && e.count == 3 && e.q == 1.0);
        assert_int_equal(e.adjacency, k == DPFL_EV_SKELLAM ? DPFL_ADJ_ZERO_OUT : DPFL_ADJ_ADD_REMOVE);
        if (k == DPFL_EV_SKELLAM) e.d1 = e.d2 = 2.0;
        assert_int_equal(dpfl_event_check(&e, &err), DPFL_OK);
    }
    assert_int_equal(leaves, 3);
    /* the constructors are the table's */
    dpfl_event g = dpfl_event_gaussian(0.7, 4), n = dpfl_event_noise(DPFL_EV_GAUSSIAN, 0.7, 4);
#define SAME_GN(codec, ctype, name, key, kinds) assert_true(g.name == n.name);
    DPFL_EVENT_ALL_FIELDS(SAME_GN)
    /* the leaves a sampling node takes and the unknown node's list are the table's */
    dpfl_run_event r;
    dpfl_error err;
    assert_int_equal(dpfl_run_event_parse(TREE_HEAD "{\"laplace\":{}}}", "t", &r, &err), DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "unknown node \"laplace\" (gaussian, skellam, discrete_gaussian, not_private, "));
    assert_int_equal(dpfl_run_event_parse(TREE_HEAD "{\"poisson_sampled\":{\"q\":0.5,\"event\":{\"not_private\":{}}}}}",
                                          "t", &r, &err),
                     DPFL_EFORMAT);
    assert_non_null(strstr(err.msg, "a sampling node takes a gaussian or skellam leaf"));
    /* the generic description and check of a noise kind (the Gaussian's) */
    char d[128];
    dpfl_event_describe(&g, d, sizeof d);
    assert_string_equal(d, "gaussian(z=0.7) x 4 [add-remove]");
    g.z = NAN;
    assert_int_equal(dpfl_event_check(&g, &err), DPFL_EINVAL);
    /* the discrete Gaussian, a row and its RDP: its leaf (any adjacency), its description, no Poisson form, no
     * dp_accounting class; RDP answers it as the Gaussian's bound, PLD with RDP's floor, GDP refuses it */
    r = parse_ok(TREE_HEAD "{\"self_composed\":{\"count\":5,\"event\":{\"discrete_gaussian\":{\"z\":2,"
                           "\"adjacency\":\"replace-one\"}}}}}");
    assert_int_equal(r.nevents, 1);
    assert_int_equal(r.events[0].kind, DPFL_EV_DISCRETE_GAUSSIAN);
    assert_true(r.events[0].z == 2 && r.events[0].count == 5 && r.events[0].adjacency == DPFL_ADJ_REPLACE_ONE);
    dpfl_event_describe(&r.events[0], d, sizeof d);
    assert_string_equal(d, "discrete-gaussian(z=2) x 5 [replace-one]");
    dpfl_guarantee gd, gc;
    dpfl_event c = dpfl_event_gaussian(2, 5);
    assert_int_equal(dpfl_account_epsilon(r.events, 1, 1e-5, DPFL_ACC_RDP, NULL, &gd, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&c, 1, 1e-5, DPFL_ACC_RDP, NULL, &gc, &err), DPFL_OK);
    assert_true(gd.epsilon == gc.epsilon);
    assert_int_equal(dpfl_account_epsilon(r.events, 1, 1e-5, DPFL_ACC_PLD, NULL, &gd, &err), DPFL_OK);
    assert_true(gd.answered == DPFL_ACC_RDP && gd.epsilon == gc.epsilon);
    assert_int_equal(dpfl_account_epsilon(r.events, 1, 1e-5, DPFL_ACC_GDP, NULL, &gd, &err), DPFL_EINVAL);
    dpfl_run_event_free(&r);
    expect_refused(TREE_HEAD "{\"poisson_sampled\":{\"q\":0.5,\"event\":{\"discrete_gaussian\":{\"z\":2}}}}}",
                   "tree.poisson_sampled.event: \"discrete_gaussian\" here: a sampling node takes a gaussian or skellam "
                   "leaf");
    dpfl_event one = dpfl_event_noise(DPFL_EV_DISCRETE_GAUSSIAN, 1.25, 3);
    dpfl_run_event w = run_of(&one, 1, DPFL_ACC_RDP);
    w.held_by = 1;
    char *text;
    assert_int_equal(dpfl_run_event_json(&w, &text, &err), DPFL_OK);
    assert_non_null(strstr(text, "{\"kind\":\"discrete-gaussian\",\"adjacency\":\"add-remove\",\"z\":1.25,\"count\":3}"));
    assert_non_null(strstr(text, "{\"self_composed\":{\"count\":3,\"event\":{\"discrete_gaussian\":{\"z\":1.25}}}}"));
    free(text);
}
/* hand-written trees normalize to the flat events an accountant takes: counts multiply through self_composed and
 * held_by (a record in c clients), compose by concatenation, sampling wraps one leaf */
static void tree_normalizes(void **state)
{
    (void)state;
    dpfl_run_event r = parse_ok(
        TREE_HEAD "{\"held_by\":{\"clients\":2,\"event\":{\"composed\":["
                  "{\"self_composed\":{\"count\":5,\"event\":{\"composed\":["
                  "{\"poisson_sampled\":{\"q\":0.01,\"event\":{\"gaussian\":{\"z\":1.1}}}},"
                  "{\"sampled_without_replacement\":{\"n\":100,\"batch\":10,\"event\":{\"gaussian\":{\"z\":0.7}}}}]}}},"
                  "{\"two_stage\":{\"lambda\":0.5,\"inner\":4,\"event\":{\"poisson_sampled\":{\"q\":0.1,"
                  "\"event\":{\"gaussian\":{\"z\":2}}}}}},"
                  "{\"poisson_sampled\":{\"q\":0.03,\"event\":{\"skellam\":{\"l1\":900,\"l2\":30,\"z\":3}}}},"
                  "{\"gaussian\":{\"z\":9,\"adjacency\":\"replace-one\"}}]}}}}");
    assert_int_equal(r.nevents, 5);
    assert_int_equal(r.held_by, 1);
    const dpfl_event *e = r.events;
    assert_true(e[0].kind == DPFL_EV_POISSON && e[0].q == 0.01 && e[0].z == 1.1 && e[0].count == 10 &&
                e[0].adjacency == DPFL_ADJ_ADD_REMOVE);
    assert_true(e[1].kind == DPFL_EV_FIXED && e[1].n == 100 && e[1].batch == 10 && e[1].z == 0.7 &&
                e[1].count == 10 && e[1].adjacency == DPFL_ADJ_REPLACE_ONE);
    assert_true(e[2].kind == DPFL_EV_TWO_STAGE && e[2].lambda == 0.5 && e[2].q == 0.1 && e[2].inner == 4 &&
                e[2].z == 2 && e[2].count == 2);
    assert_true(e[3].kind == DPFL_EV_SKELLAM && e[3].q == 0.03 && e[3].d1 == 900 && e[3].d2 == 30 &&
                e[3].z == 3 && e[3].count == 2 && e[3].adjacency == DPFL_ADJ_ZERO_OUT);
    assert_true(e[4].kind == DPFL_EV_GAUSSIAN && e[4].z == 9 && e[4].adjacency == DPFL_ADJ_REPLACE_ONE &&
                e[4].count == 2);
    dpfl_run_event_free(&r);
    /* a record held by 2 clients, T steps each, is the epsilon of 2T steps */
    r = parse_ok(TREE_HEAD "{\"held_by\":{\"clients\":2,\"event\":{\"self_composed\":{\"count\":1000,\"event\":"
                           "{\"poisson_sampled\":{\"q\":0.01,\"event\":{\"gaussian\":{\"z\":1.1}}}}}}}}}");
    dpfl_event flat = dpfl_event_poisson(0.01, 1.1, 2000);
    dpfl_guarantee a, b;
    dpfl_error err;
    assert_int_equal(dpfl_run_event_epsilon(&r, &a, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&flat, 1, 1e-5, DPFL_ACC_RDP, NULL, &b, &err), DPFL_OK);
    assert_true(a.epsilon == b.epsilon);
    dpfl_run_event_free(&r);
    /* a mechanism repeated zero times happens zero times; an empty composition has no events */
    r = parse_ok(TREE_HEAD "{\"self_composed\":{\"count\":0,\"event\":{\"gaussian\":{\"z\":1}}}}}");
    assert_true(r.nevents == 1 && r.events[0].count == 0);
    dpfl_run_event_free(&r);
    r = parse_ok(TREE_HEAD "{\"composed\":[]}}");
    assert_int_equal(r.nevents, 0);
    assert_int_equal(dpfl_run_event_epsilon(&r, &a, &err), DPFL_OK);
    assert_true(a.epsilon == 0.0);
    dpfl_run_event_free(&r);
}

/* a shape with no flat form is refused with its path, never approximated */
static void tree_refusals(void **state)
{
    (void)state;
    const char *g = "{\"gaussian\":{\"z\":1}}";
    char buf[1024];
    snprintf(buf, sizeof buf, TREE_HEAD "{\"composed\":[%s,{\"poisson_sampled\":{\"q\":0.1,\"event\":{\"composed\":[%s]}}}]}}", g, g);
    expect_refused(buf, "f.json: tree.composed[1].poisson_sampled.event: \"composed\" here: a sampling node takes "
                        "a gaussian or skellam leaf");
    snprintf(buf, sizeof buf, TREE_HEAD "{\"poisson_sampled\":{\"q\":0.1,\"event\":{\"poisson_sampled\":{\"q\":0.1,"
                              "\"event\":%s}}}}}", g);
    expect_refused(buf, "tree.poisson_sampled.event: \"poisson_sampled\" here");
    expect_refused(TREE_HEAD "{\"laplace\":{\"b\":1}}}", "tree: unknown node \"laplace\"");
    snprintf(buf, sizeof buf, TREE_HEAD "{\"gaussian\":{\"z\":1},\"composed\":[]}}");
    expect_refused(buf, "tree: a node is an object with one key, its kind");
    snprintf(buf, sizeof buf, TREE_HEAD "{\"self_composed\":{\"count\":-1,\"event\":%s}}}", g);
    expect_refused(buf, "tree: \"count\" must be an integer >= 0");
    snprintf(buf, sizeof buf, TREE_HEAD "{\"held_by\":{\"clients\":0,\"event\":%s}}}", g);
    expect_refused(buf, "tree: \"clients\" must be an integer >= 1");
    snprintf(buf, sizeof buf, TREE_HEAD "{\"two_stage\":{\"lambda\":0.5,\"inner\":3,\"event\":%s}}}", g);
    expect_refused(buf, "tree.two_stage.event: a two-stage round takes a poisson_sampled gaussian");
    expect_refused(TREE_HEAD "{\"sampled_without_replacement\":{\"n\":10,\"batch\":2,\"event\":"
                             "{\"skellam\":{\"l1\":1,\"l2\":1,\"z\":1}}}}}",
                   "sampling without replacement takes a gaussian leaf");
    expect_refused(TREE_HEAD "{\"gaussian\":{\"z\":1,\"adjacency\":\"swap\"}}}", "\"adjacency\" is add-remove");
    expect_refused(TREE_HEAD "{\"poisson_sampled\":{\"q\":1.5,\"event\":{\"gaussian\":{\"z\":1}}}}}",
                   "tree: sampling rate q (1.5)");
    expect_refused(TREE_HEAD "{\"gaussian\":{}}}", "tree: \"z\" must be a number");
    snprintf(buf, sizeof buf, TREE_HEAD "{\"self_composed\":{\"count\":4000000000000000,\"event\":"
                              "{\"self_composed\":{\"count\":4000000000000000,\"event\":%s}}}}}", g);
    expect_refused(buf, "the count overflows");
}

/* the recomputation is the accountant on the events, with the orders the run used */
static void recompute_matches_accountant(void **state)
{
    (void)state;
    dpfl_event ev[2] = {dpfl_event_poisson(0.01, 1.1, 2000), dpfl_event_gaussian(30, 3)};
    dpfl_guarantee a, b;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(ev, 2, 1e-5, DPFL_ACC_RDP, NULL, &a, &err), DPFL_OK);
    dpfl_run_event r = run_of(ev, 2, DPFL_ACC_RDP);
    assert_int_equal(dpfl_run_event_epsilon(&r, &b, &err), DPFL_OK);
    assert_true(a.epsilon == b.epsilon);
    /* integer orders only: never below the refined value, and equal to the accountant given those orders */
    r.orders = DPFL_ORDERS_INTEGER;
    assert_int_equal(dpfl_run_event_epsilon(&r, &b, &err), DPFL_OK);
    assert_true(b.epsilon >= a.epsilon);
    dpfl_account_opts o = {0};
    o.orders = dpfl_rdp_default_orders(&o.norders);
    assert_int_equal(dpfl_account_epsilon(ev, 2, 1e-5, DPFL_ACC_RDP, &o, &a, &err), DPFL_OK);
    assert_true(a.epsilon == b.epsilon);
    /* not private: refused, not a number */
    dpfl_event np = dpfl_event_not_private(1);
    r = run_of(&np, 1, DPFL_ACC_RDP);
    assert_int_equal(dpfl_run_event_epsilon(&r, &b, &err), DPFL_ENOTPRIVATE);
}

/* A two-stage event at record rate 1 is visible participation in Gaussian releases: GDP answers it exactly (the
 * binomial mixture), and the RDP and PLD answers of the same event are upper bounds, so never below it. */
static void two_stage_visible_gaussian(void **state)
{
    (void)state;
    const double mu = 0.8, lambda = 0.1;
    const int64_t T = 200;
    dpfl_event e = dpfl_event_two_stage(lambda, 1.0, 1.0 / mu, 1, T, DPFL_BOUND_RPDP);
    dpfl_guarantee g, r, p;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_GDP, NULL, &g, &err), DPFL_OK);
    assert_close(g.epsilon, dpfl_gdp_visible_epsilon(mu, lambda, T, 1e-5), 1e-9);
    assert_false(g.asymptotic);
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_RDP, NULL, &r, &err), DPFL_OK);
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_PLD, NULL, &p, &err), DPFL_OK);
    assert_true(r.epsilon >= g.epsilon && p.epsilon >= g.epsilon * (1 - 1e-9));
    /* hidden participation (Poisson) would be smaller: the event kind matters */
    dpfl_event h = dpfl_event_poisson(lambda, 1.0 / mu, T);
    assert_int_equal(dpfl_account_epsilon(&h, 1, 1e-5, DPFL_ACC_RDP, NULL, &r, &err), DPFL_OK);
    assert_true(r.epsilon < g.epsilon);
    /* inner steps compose inside a participation: mu sqrt(inner) */
    e.inner = 4;
    assert_int_equal(dpfl_account_epsilon(&e, 1, 1e-5, DPFL_ACC_GDP, NULL, &g, &err), DPFL_OK);
    assert_close(g.epsilon, dpfl_gdp_visible_epsilon(2 * mu, lambda, T, 1e-5), 1e-9);
}

/* ---------------------------------------------------------------- which accountant answers which kind */
/* One refusal: DPFL_EINVAL, one line naming the accountant and the kind, and saying why (`why`: "does not support"
 * for a kind the table refuses). */
static void refused(dpfl_status st, const dpfl_error *err, const char *acc, const char *kind, const char *why)
{
    if (st != DPFL_EINVAL || !strstr(err->msg, acc) || !strstr(err->msg, kind) || !strstr(err->msg, why) ||
        strchr(err->msg, '\n'))
        print_error("%s / %s: status %d, \"%s\"\n", acc, kind, (int)st, st ? err->msg : "answered");
    assert_int_equal(st, DPFL_EINVAL);
    assert_non_null(strstr(err->msg, acc));
    assert_non_null(strstr(err->msg, kind));
    assert_non_null(strstr(err->msg, why));
    assert_null(strchr(err->msg, '\n'));
}

#define UNSUPPORTED "accountant does not support"

/* account_epsilon and account_delta both refuse */
static void account_refuses_why(const dpfl_event *ev, size_t n, dpfl_accountant acc, const char *kind,
                                const char *why)
{
    dpfl_guarantee g;
    dpfl_error err;
    refused(dpfl_account_epsilon(ev, n, 1e-5, acc, NULL, &g, &err), &err, dpfl_accountant_name(acc), kind, why);
    refused(dpfl_account_delta(ev, n, 1.0, acc, NULL, &g, &err), &err, dpfl_accountant_name(acc), kind, why);
}

static void account_refuses(const dpfl_event *ev, size_t n, dpfl_accountant acc, const char *kind)
{
    account_refuses_why(ev, n, acc, kind, UNSUPPORTED);
}

/* the PLD computation itself (dpfl_pld_*) refuses */
static void pld_refuses(const dpfl_event *ev, size_t n, const char *kind)
{
    double v, lo;
    dpfl_error err;
    refused(dpfl_pld_epsilon(ev, n, 1e-5, 0, &v, &err), &err, "pld", kind, UNSUPPORTED);
    refused(dpfl_pld_delta(ev, n, 1.0, 0, &v, &err), &err, "pld", kind, UNSUPPORTED);
    refused(dpfl_pld_epsilon_bounds(ev, n, 1e-5, 0, &v, &lo, &err), &err, "pld", kind, UNSUPPORTED);
}

/* GDP has no Skellam; GDP's two-stage only alone at record rate 1; GDP has no CLT for replace-one Poisson */
static void gdp_refusals(void **state)
{
    (void)state;
    dpfl_event sk = dpfl_event_skellam(0.5, 4, 2, 100, 3);
    account_refuses(&sk, 1, DPFL_ACC_GDP, "skellam");
    dpfl_event mix[2] = {dpfl_event_gaussian(3, 2), dpfl_event_skellam(1.0, 4, 2, 100, 1)};
    account_refuses(mix, 2, DPFL_ACC_GDP, "skellam"); /* in a list, too */
    dpfl_event ts = dpfl_event_two_stage(0.3, 0.05, 1.2, 4, 10, DPFL_BOUND_RPDP);
    account_refuses_why(&ts, 1, DPFL_ACC_GDP, "two-stage", "only alone and at record rate 1");
    dpfl_event pair[2] = {dpfl_event_two_stage(0.3, 1.0, 1.2, 4, 10, DPFL_BOUND_RPDP), dpfl_event_gaussian(3, 1)};
    account_refuses_why(pair, 2, DPFL_ACC_GDP, "two-stage", "only alone"); /* rate 1 but not alone */
    dpfl_event po = dpfl_event_poisson(0.1, 1.0, 10);
    po.adjacency = DPFL_ADJ_REPLACE_ONE;
    account_refuses_why(&po, 1, DPFL_ACC_GDP, "poisson", "replace-one");
    /* an event that never happened needs no accountant */
    sk.count = 0;
    dpfl_event with0[2] = {dpfl_event_gaussian(3, 2), sk};
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(with0, 2, 1e-5, DPFL_ACC_GDP, NULL, &g, &err), DPFL_OK);
    assert_close(g.mu, sqrt(2.0) / 3, 1e-12);
}

/* PLD itself has no fixed-size batches, no Skellam and no replace-one Poisson; the PLD accountant answers them
 * with RDP's bound and says so */
static void pld_refusals_and_rdp_floor(void **state)
{
    (void)state;
    dpfl_event fx = dpfl_event_fixed(1000, 10, 1.1, 50), sk = dpfl_event_skellam(0.5, 4, 2, 100, 3);
    dpfl_event po = dpfl_event_poisson(0.1, 1.0, 10);
    po.adjacency = DPFL_ADJ_REPLACE_ONE;
    pld_refuses(&fx, 1, "fixed");
    pld_refuses(&sk, 1, "skellam");
    {
        double v;
        dpfl_error err;
        refused(dpfl_pld_epsilon(&po, 1, 1e-5, 0, &v, &err), &err, "pld", "poisson", "replace-one");
    }
    dpfl_event mix[2] = {dpfl_event_poisson(0.01, 1.0, 100), dpfl_event_fixed(100, 10, 2.0, 3)};
    pld_refuses(mix, 2, "fixed");
    const dpfl_event *floor_of[] = {&fx, &sk, &po};
    const char *why[] = {"fixed", "skellam", "replace-one"};
    for (int i = 0; i < 3; i++) {
        dpfl_guarantee p, r;
        dpfl_error err;
        assert_int_equal(dpfl_account_epsilon(floor_of[i], 1, 1e-5, DPFL_ACC_PLD, NULL, &p, &err), DPFL_OK);
        assert_int_equal(dpfl_account_epsilon(floor_of[i], 1, 1e-5, DPFL_ACC_RDP, NULL, &r, &err), DPFL_OK);
        assert_int_equal(p.answered, DPFL_ACC_RDP);
        assert_non_null(strstr(p.fallback, why[i]));
        assert_true(p.epsilon == r.epsilon && p.epsilon_lower == 0);
        assert_int_equal(dpfl_account_delta(floor_of[i], 1, 1.0, DPFL_ACC_PLD, NULL, &p, &err), DPFL_OK);
        assert_int_equal(dpfl_account_delta(floor_of[i], 1, 1.0, DPFL_ACC_RDP, NULL, &r, &err), DPFL_OK);
        assert_true(p.answered == DPFL_ACC_RDP && p.delta == r.delta);
    }
}

/* The filter's guarantee is an RDP statement: (alpha', cap) at every order alpha' <= alpha, nothing above.  RDP
 * answers it -- at alpha itself when the conversion cost falls with the order up to there, as it does for
 * alpha < 1/delta -- and composes it with other events at the orders below alpha; PLD and GDP refuse it. */
static void rdp_filter_is_rdp_only(void **state)
{
    (void)state;
    const double delta = 1e-5;
    for (double alpha = 1.5; alpha < 300; alpha *= 2.3) { /* 1.5, 3.45, ... none a default order but 2 */
        const double cap = 0.7;
        dpfl_event f = dpfl_event_rdp_filter(alpha, cap, 1);
        dpfl_guarantee g;
        dpfl_error err;
        assert_int_equal(dpfl_account_epsilon(&f, 1, delta, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
        const double want = cap + log1p(-1 / alpha) - (log(delta) + log(alpha)) / (alpha - 1);
        assert_close(g.epsilon, want, 1e-12);
        assert_true(g.epsilon >= want);
        /* twice the cap with count 2; nothing with count 0 */
        f.count = 2;
        assert_int_equal(dpfl_account_epsilon(&f, 1, delta, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
        assert_close(g.epsilon, want + cap, 1e-12);
        double orders[3] = {alpha * 0.5 + 0.5, alpha, alpha * 1.01}, rdp[3];
        assert_int_equal(dpfl_rdp_compose(&f, 1, orders, 3, rdp, &err), DPFL_OK);
        assert_true(rdp[0] == 2 * cap && rdp[1] == 2 * cap && isinf(rdp[2]));
        account_refuses(&f, 1, DPFL_ACC_PLD, "rdp-filter");
        account_refuses(&f, 1, DPFL_ACC_GDP, "rdp-filter");
        pld_refuses(&f, 1, "rdp-filter");
    }
    /* with a Gaussian: the orders up to alpha, each cap + 3 a / (2 z^2); between the best over every real order <= alpha
     * (the truth of these statements) and the best over the integer ones */
    const double alpha = 10, cap = 1, z = 2;
    dpfl_event two[2] = {dpfl_event_gaussian(z, 3), dpfl_event_rdp_filter(alpha, cap, 1)};
    dpfl_guarantee g;
    dpfl_error err;
    assert_int_equal(dpfl_account_epsilon(two, 2, delta, DPFL_ACC_RDP, NULL, &g, &err), DPFL_OK);
    double best_real = INFINITY, best_int = INFINITY;
    for (int i = 1; i <= 90000; i++) {
        const double a = 1 + i * 1e-4, e = cap + 3 * a / (2 * z * z) + log1p(-1 / a) - (log(delta) + log(a)) / (a - 1);
        best_real = fmin(best_real, e);
        if (i % 10000 == 0) best_int = fmin(best_int, e);
    }
    assert_true(g.epsilon >= best_real * (1 - 1e-9) && g.epsilon <= best_int * (1 + 1e-12));
    assert_true(g.order <= alpha);
    /* above alpha nothing is claimed: orders above it alone give no number */
    double above = 11, r;
    assert_int_equal(dpfl_rdp_compose(&two[1], 1, &above, 1, &r, &err), DPFL_OK);
    assert_true(isinf(r));
    dpfl_account_opts o = {0};
    o.orders = &above;
    o.norders = 1; /* the filter's own alpha joins the given orders */
    assert_int_equal(dpfl_account_epsilon(&two[1], 1, delta, DPFL_ACC_RDP, &o, &g, &err), DPFL_OK);
    assert_true(g.order == alpha && isfinite(g.epsilon));
}

/* every cell of the table is what the accountants do: refused where it says NONE (not-private: refused as not
 * private), answered (or at least not refused for the kind) elsewhere, by account_epsilon, account_delta and
 * calibrate_noise */
static void table_is_what_accountants_do(void **state)
{
    (void)state;
    dpfl_event one[DPFL_EV_NKINDS];
    for (int i = 0; i < DPFL_EV_NKINDS; i++) { /* every_kind lists each kind once */
        dpfl_event e = every_kind(i);
        one[e.kind] = e;
    }
    one[DPFL_EV_NOT_PRIVATE].count = 1;
    one[DPFL_EV_TWO_STAGE].q = 1.0; /* the case GDP answers */
    for (int k = 0; k < DPFL_EV_NKINDS; k++)
        for (int a = DPFL_ACC_RDP; a <= DPFL_ACC_GDP; a++) {
            dpfl_support sup = dpfl_event_support((dpfl_event_kind)k, (dpfl_accountant)a);
            const char *kind = dpfl_event_kind_name((dpfl_event_kind)k), *acc = dpfl_accountant_name(a);
            dpfl_guarantee g;
            dpfl_error err;
            dpfl_status se = dpfl_account_epsilon(&one[k], 1, 1e-5, (dpfl_accountant)a, NULL, &g, &err);
            dpfl_status sd = dpfl_account_delta(&one[k], 1, 1.0, (dpfl_accountant)a, NULL, &g, &err);
            if (k == DPFL_EV_NOT_PRIVATE) {
                assert_true(se == DPFL_ENOTPRIVATE && sd == DPFL_ENOTPRIVATE);
            } else if (sup == DPFL_SUPPORT_NONE) {
                account_refuses(&one[k], 1, (dpfl_accountant)a, kind);
            } else {
                if (se || sd) print_error("%s / %s: %s\n", acc, kind, err.msg);
                assert_true(se == DPFL_OK && sd == DPFL_OK);
            }
            assert_true(a != DPFL_ACC_PLD || sup != DPFL_SUPPORT_CLT);
            assert_true(a != DPFL_ACC_GDP || sup != DPFL_SUPPORT_RDP_FLOOR);
        }
    assert_int_equal(dpfl_event_support((dpfl_event_kind)DPFL_EV_NKINDS, DPFL_ACC_RDP), DPFL_SUPPORT_NONE);
    assert_string_equal(dpfl_event_kind_name((dpfl_event_kind)DPFL_EV_NKINDS), "?");
}

/* the binding declares dpfl_event from this string: every field, in order, at the offsets the ABI table gives */
static void schema_lists_every_field(void **state)
{
    (void)state;
    const char *s = dpfl_abi_fields("dpfl_event");
    assert_non_null(s);
    assert_null(dpfl_abi_fields("dpfl_guarantee"));
    long last = -1;
    int n = 0;
#define IN_SCHEMA(codec, ctype, name, key, kinds)                                                                 \
    {                                                                                                           \
        const char *p = strstr(s, #name ":" #codec ":" #ctype ",");                                             \
        assert_non_null(p);                                                                                     \
        assert_true(p == s || p[-1] == ',');                                                                    \
        long off = dpfl_abi_layout("dpfl_event", #name);                                                        \
        assert_true(off > last);                                                                                \
        last = off;                                                                                             \
        n++;                                                                                                    \
    }
    DPFL_EVENT_ALL_FIELDS(IN_SCHEMA)
    int commas = 0;
    for (const char *p = s; *p; p++) commas += *p == ',';
    assert_int_equal(commas, n);
}

/* the DP-SGD step count and the secure-mode noise std exist once, in mech/ */
static void mechanism_counts(void **state)
{
    (void)state;
    assert_int_equal(dpfl_mech_local_steps(0, 16, 5, 0), 0);
    assert_int_equal(dpfl_mech_local_steps(100, 16, 5, 3), 5);
    assert_int_equal(dpfl_mech_local_steps(10, 3, 0, 2), 8);   /* ceil(10 / 3) = 4 batches, twice */
    assert_int_equal(dpfl_mech_local_steps(12, 3, 0, 2), 8);
    assert_int_equal(dpfl_mech_local_steps(13, 3, 0, 1), 5);
    assert_close(dpfl_mech_discrete_std(1000, 2.0, 0.5), 2.0 * 0.5 * 1.001, 1e-12);
    assert_true(dpfl_mech_discrete_std(0, 2.0, 0.5) == 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(json_roundtrip_every_kind),   cmocka_unit_test(json_refuses_malformed),
        cmocka_unit_test(tree_roundtrip_every_kind),   cmocka_unit_test(tree_normalizes),
        cmocka_unit_test(tree_refusals),               cmocka_unit_test(noise_kinds_from_the_table),
        cmocka_unit_test(recompute_matches_accountant), cmocka_unit_test(two_stage_visible_gaussian),
        cmocka_unit_test(schema_lists_every_field),     cmocka_unit_test(mechanism_counts),
        cmocka_unit_test(gdp_refusals),                 cmocka_unit_test(pld_refusals_and_rdp_floor),
        cmocka_unit_test(table_is_what_accountants_do), cmocka_unit_test(rdp_filter_is_rdp_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
