/* dpfl privacy: accountants that turn privacy *events* into guarantees.  Pure math in double precision; no
 * model is ever seen here.
 *
 * Units.  z (noise multiplier) = standard deviation of the Gaussian noise divided by the L2 sensitivity of what
 * it is added to, under the event's adjacency (for a clipped sum under replace-one the sensitivity is 2C).
 * q = sampling probability of one record (or client) per step; T (count) = number of repetitions; delta as
 * usual; epsilon in nats.  Every result is an UPPER bound on the true epsilon (or delta) of the mechanism the
 * events describe: where a computation must round, it rounds towards more privacy loss.
 *
 * Accountants.  RDP (Renyi DP, Mironov 2017; Poisson-subsampled Gaussian of Mironov-Talwar-Zhang 2019, fixed-size
 * sampling without replacement of Wang-Balle-Kasiviswanathan 2019), PLD (privacy loss distributions, discretized
 * with the pessimistic "connect-the-dots" pair and composed by FFT), GDP (Gaussian DP; exact for plain Gaussian
 * events, the central-limit value for sampled ones is asymptotic and NOT a bound).  An event list describes one
 * training run for one unit (record or client); a DPFL_EV_NOT_PRIVATE event makes every accountant answer
 * DPFL_ENOTPRIVATE instead of a number. */
#ifndef DPFL_PRIVACY_H
#define DPFL_PRIVACY_H

#include "dpfl/core.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* ---------------------------------------------------------------- events */
typedef enum { DPFL_ACC_RDP = 0, DPFL_ACC_PLD, DPFL_ACC_GDP } dpfl_accountant;

/* What an accountant does with an event kind.  Every entry point that takes events reads this, from the table
 * below, before it computes anything (dpfl_event_support); a kind it does not support is refused with one line
 * naming the kind and the accountant, never answered by another method unless the table says so. */
typedef enum {
    DPFL_SUPPORT_NONE = 0,  /* refused (DPFL_EINVAL) */
    DPFL_SUPPORT_BOUND,     /* answered by an upper bound (parameter ranges the accountant does not cover are refused
                               with their own line, e.g. GDP's two-stage only alone and at record rate 1) */
    DPFL_SUPPORT_RDP_FLOOR, /* PLD only: dpfl has no PLD of the kind, so dpfl_account_epsilon / _delta answer RDP's
                               bound and say so (answered = rdp, fallback = why); dpfl_pld_* refuse it */
    DPFL_SUPPORT_CLT        /* GDP only: exact when nothing is sampled (q = 1, batch = n), otherwise the central-limit
                               value, flagged asymptotic: not a bound */
} dpfl_support;

/* The event kinds as data, one row each: X(enum, JSON name, RDP, PLD, GDP, LEAF, ADJ, POISSON, DP_ACCOUNTING).
 *   RDP, PLD, GDP: which accountant answers the kind, the support written without its DPFL_SUPPORT_ prefix.
 *   LEAF: for a noise distribution released unsampled, its node in the event tree (event_tree.c), else 0.  Its
 *     body holds the kind's own fields (DPFL_EVENT_FIELDS less kind, adjacency, count and a combinator's q, lambda,
 *     n, batch, inner, bound), the noise multiplier z last; describe, check and JSON follow the same fields.
 *   ADJ: the adjacency its constructor and its leaf take unless told otherwise (without the DPFL_ADJ_ prefix).
 *   POISSON: the kind a poisson_sampled node makes of the leaf: another kind (a Gaussian becomes DPFL_EV_POISSON),
 *     the kind itself when it carries the rate in q (1: unsampled), or DPFL_EV_NONE: refused.
 *   DP_ACCOUNTING: Google dp_accounting's class of the leaf, taking z ("GaussianDpEvent"), or 0: summary.json then
 *     writes no dp_accounting expression for it.
 * The enum, the JSON's kind names, every accountant's check, the tree's leaves and dp_accounting's expressions are
 * generated from this list; docs/privacy.md prints it.  A new noise distribution is a row here (appended: the enum's
 * values are in checkpoints), its RDP (rdp.c; PLD optional) and its sampler (mech/noise.c): dpfl_event_noise builds
 * its event, the tree, the JSON, describe and check take it from the row.  A not-private event is refused by every
 * accountant as DPFL_ENOTPRIVATE before the table is read. */
#define DPFL_EVENT_KINDS(X)                                                                                         \
    /* Gaussian mechanism on every record (no sampling) */                                                          \
    X(DPFL_EV_GAUSSIAN, "gaussian", BOUND, BOUND, BOUND, "gaussian", ADD_REMOVE, DPFL_EV_POISSON, "GaussianDpEvent") \
    /* each record included independently with probability q, then Gaussian(z) */                                   \
    X(DPFL_EV_POISSON, "poisson", BOUND, BOUND, CLT, 0, ADD_REMOVE, DPFL_EV_NONE, 0)                                \
    /* batch of exactly `batch` of `n` drawn without replacement, then Gaussian(z) */                               \
    X(DPFL_EV_FIXED, "fixed", BOUND, RDP_FLOOR, CLT, 0, REPLACE_ONE, DPFL_EV_NONE, 0)                               \
    /* rPDP-FL round: client takes part w.p. lambda, then `inner` Poisson(q) steps */                               \
    X(DPFL_EV_TWO_STAGE, "two-stage", BOUND, BOUND, BOUND, 0, ADD_REMOVE, DPFL_EV_NONE, 0)                          \
    /* a release with no guarantee (e.g. median-norm clipping) */                                                   \
    X(DPFL_EV_NOT_PRIVATE, "not-private", NONE, NONE, NONE, 0, ADD_REMOVE, DPFL_EV_NONE, 0)                         \
    /* distributed DP: a client takes part w.p. q, its integer vector (L2 <= d2, L1 <= d1) is summed with Skellam    \
     * noise of total variance (z d2)^2 (Agarwal-Kairouz-Liu) */                                                     \
    X(DPFL_EV_SKELLAM, "skellam", BOUND, RDP_FLOOR, NONE, "skellam", ZERO_OUT, DPFL_EV_SKELLAM, 0)                  \
    /* an individual Renyi filter's guarantee (Feldman-Zrnic 2021): the record's losses at order alpha, composed     \
     * adaptively, never pass cap, so the run is (alpha, cap)-RDP for it (add-remove) -- and, the Renyi divergence  \
     * being nondecreasing in the order, (alpha', cap)-RDP at every alpha' <= alpha.  An RDP statement only */       \
    X(DPFL_EV_RDP_FILTER, "rdp-filter", BOUND, NONE, NONE, 0, ADD_REMOVE, DPFL_EV_NONE, 0)                         \
    /* exact discrete Gaussian noise N_Z(0, sigma^2) on each coordinate of an integer-valued query whose neighbours  \
     * differ by an integer vector of L2 norm <= Delta, unsampled; z = sigma / Delta.  (alpha, alpha / (2 z^2))-RDP  \
     * at every alpha > 1, the continuous Gaussian's (Canonne-Kamath-Steinke 2020: 1/(2 z^2)-concentrated DP) */    \
    X(DPFL_EV_DISCRETE_GAUSSIAN, "discrete-gaussian", BOUND, RDP_FLOOR, NONE, "discrete_gaussian", ADD_REMOVE,     \
      DPFL_EV_NONE, 0)

#define DPFL_EVENT_KIND_ENUM(e, name, rdp, pld, gdp, leaf, adj, poisson, dpacc) e,
typedef enum { DPFL_EVENT_KINDS(DPFL_EVENT_KIND_ENUM) } dpfl_event_kind;
#define DPFL_EV_NONE (-1) /* the table's POISSON column: no such kind */
#define DPFL_EVENT_KIND_ONE(e, name, rdp, pld, gdp, leaf, adj, poisson, dpacc) +1
enum { DPFL_EV_NKINDS = 0 DPFL_EVENT_KINDS(DPFL_EVENT_KIND_ONE) };

/* The table's cell for (kind, accountant); DPFL_SUPPORT_NONE for a value outside either enum. */
dpfl_support dpfl_event_support(dpfl_event_kind kind, dpfl_accountant acc);
/* "gaussian", "poisson", ... (the JSON's names); "?" outside the enum. */
const char *dpfl_event_kind_name(dpfl_event_kind kind);

typedef enum {
    DPFL_ADJ_ADD_REMOVE = 0, /* add or remove one unit */
    DPFL_ADJ_REPLACE_ONE,    /* replace one unit by another */
    DPFL_ADJ_ZERO_OUT        /* replace one unit's contribution by zero; accounted as add/remove */
} dpfl_adjacency;

/* The RDP bound of a two-stage round.  A client that sits a round out leaves its records untouched and the observer
 * sees that it did not take part, so a round is the pair ((1-lambda) N + lambda P, (1-lambda) N + lambda Q) with N
 * (no release) distinct from P and Q: participation is visible.  The only bound dpfl applies is joint convexity,
 * rPDP-FL's Theorem 1.  (Zhu-Wang 2019 Thm 6, offered before, assumes that a non-sampled round outputs what the
 * neighbour's would -- N = Q -- which none of dpfl's rounds satisfy: it under-reported up to 6x and was removed.) */
typedef enum {
    DPFL_BOUND_RPDP = 0 /* published two-stage bound of rPDP-FL (Theorem 1): joint convexity, linear in lambda */
} dpfl_two_stage_bound;

/* The event's fields, written once.  Everything that handles an event field by field is generated from this list:
 * the struct below, the ledger's merge test, the checkpoint codec, the ABI table the Python binding builds its
 * struct from, and the JSON of summary.json / `dpfl account --event`.  A new field is one line here (one of a kind
 * that a ledger holds changes the checkpoint format; one of a report-only kind goes to DPFL_EVENT_REPORT_FIELDS).
 *   X(codec, ctype, name, json_key, kinds)   codec: DPFL_EVT_ENUM (an int-sized enum), DPFL_EVT_F64, DPFL_EVT_I64;
 *   kinds: the DPFL_EVK_* mask of kinds that use the field (only those read or write it in JSON). */
#define DPFL_EVK(k) (1u << (k))
#define DPFL_EVK_SAMPLED (DPFL_EVK(DPFL_EV_POISSON) | DPFL_EVK(DPFL_EV_FIXED) | DPFL_EVK(DPFL_EV_TWO_STAGE) | \
                          DPFL_EVK(DPFL_EV_SKELLAM))
#define DPFL_EVK_NOISY (DPFL_EVK_SAMPLED | DPFL_EVK(DPFL_EV_GAUSSIAN) | DPFL_EVK(DPFL_EV_DISCRETE_GAUSSIAN))
#define DPFL_EVK_ADJACENT (DPFL_EVK_NOISY | DPFL_EVK(DPFL_EV_RDP_FILTER))
#define DPFL_EVK_ALL (~0u)
/* z: noise multiplier; q: POISSON / SKELLAM rate, FIXED batch / n, TWO_STAGE per-step record rate; lambda:
 * TWO_STAGE client participation per round; n, batch: FIXED; inner: TWO_STAGE local steps per round (tau); count:
 * how many times the event happens (self-composition); d1, d2: SKELLAM L1 and L2 sensitivities in grid units
 * (z = sqrt(variance) / d2). */
#define DPFL_EVENT_FIELDS(X)                                                                                        \
    X(DPFL_EVT_ENUM, dpfl_event_kind, kind, "kind", DPFL_EVK_ALL)                                                   \
    X(DPFL_EVT_ENUM, dpfl_adjacency, adjacency, "adjacency", DPFL_EVK_ADJACENT)                                     \
    X(DPFL_EVT_F64, double, z, "z", DPFL_EVK_NOISY)                                                                 \
    X(DPFL_EVT_F64, double, q, "q", DPFL_EVK_SAMPLED)                                                               \
    X(DPFL_EVT_F64, double, lambda, "lambda", DPFL_EVK(DPFL_EV_TWO_STAGE))                                          \
    X(DPFL_EVT_I64, int64_t, n, "n", DPFL_EVK(DPFL_EV_FIXED))                                                       \
    X(DPFL_EVT_I64, int64_t, batch, "batch", DPFL_EVK(DPFL_EV_FIXED))                                               \
    X(DPFL_EVT_I64, int64_t, inner, "inner", DPFL_EVK(DPFL_EV_TWO_STAGE))                                           \
    X(DPFL_EVT_ENUM, dpfl_two_stage_bound, bound, "bound", DPFL_EVK(DPFL_EV_TWO_STAGE))                             \
    X(DPFL_EVT_I64, int64_t, count, "count", DPFL_EVK_ALL)                                                          \
    X(DPFL_EVT_F64, double, d1, "l1", DPFL_EVK(DPFL_EV_SKELLAM))                                                    \
    X(DPFL_EVT_F64, double, d2, "l2", DPFL_EVK(DPFL_EV_SKELLAM))

/* Fields of the kinds that only reports carry (summary.json, `dpfl account --event`), never a ledger or a checkpoint:
 * the checkpoint codec (format 7) and the ledger's merge test read DPFL_EVENT_FIELDS only, so these follow them in
 * the struct and everything else -- the ABI table, the binding, the JSON -- takes DPFL_EVENT_ALL_FIELDS.  (A checkpoint
 * holding such a kind would read alpha = 0 and be refused by dpfl_event_check.)  alpha: the filter's RDP order;
 * cap: the Renyi budget its losses at alpha never pass. */
#define DPFL_EVENT_REPORT_FIELDS(X)                                                                                 \
    X(DPFL_EVT_F64, double, alpha, "alpha", DPFL_EVK(DPFL_EV_RDP_FILTER))                                           \
    X(DPFL_EVT_F64, double, cap, "cap", DPFL_EVK(DPFL_EV_RDP_FILTER))
#define DPFL_EVENT_ALL_FIELDS(X) DPFL_EVENT_FIELDS(X) DPFL_EVENT_REPORT_FIELDS(X)

#define DPFL_EVENT_DECLARE(codec, ctype, name, key, kinds) ctype name;

typedef struct {
    DPFL_EVENT_ALL_FIELDS(DPFL_EVENT_DECLARE)
} dpfl_event;

/* The unsampled event of a noise distribution (a kind whose DPFL_EVENT_KINDS row has a LEAF): its table adjacency,
 * noise multiplier z, q = 1; a kind without a leaf gives an event of no known kind, which dpfl_event_check refuses. */
dpfl_event dpfl_event_noise(dpfl_event_kind kind, double z, int64_t count);
dpfl_event dpfl_event_gaussian(double z, int64_t count);
dpfl_event dpfl_event_poisson(double q, double z, int64_t count);
/* Fixed-size sampling without replacement: replace-one adjacency (Wang-Balle-Kasiviswanathan). */
dpfl_event dpfl_event_fixed(int64_t n, int64_t batch, double z, int64_t count);
dpfl_event dpfl_event_two_stage(double lambda, double q, double z, int64_t inner, int64_t count,
                                dpfl_two_stage_bound bound);
dpfl_event dpfl_event_not_private(int64_t count);
/* Distributed DP round (zero-out adjacency: the client takes part in both worlds, its update replaced by zero):
 * Skellam noise of total variance mu on a sum whose one client moves it by L2 <= d2, L1 <= d1 (grid units); the
 * client is in the round with probability q (1 = known to be).  z = sqrt(mu) / d2. */
dpfl_event dpfl_event_skellam(double q, double d1, double d2, double mu, int64_t count);
/* An individual Renyi filter at order alpha > 1 whose losses never pass cap >= 0 (add-remove): (alpha', cap)-RDP at
 * every order alpha' <= alpha, nothing above.  Only the RDP accountant answers it (its orders then include alpha). */
dpfl_event dpfl_event_rdp_filter(double alpha, double cap, int64_t count);
/* DPFL_OK if the fields are in range (q, lambda in [0,1], z >= 0, count >= 0, 0 < batch <= n ...). */
dpfl_status dpfl_event_check(const dpfl_event *e, dpfl_error *err);
/* One line, e.g. "poisson(q=0.01, z=1.1) x 1000 [add-remove]". */
void dpfl_event_describe(const dpfl_event *e, char *buf, size_t len);
const char *dpfl_adjacency_name(dpfl_adjacency a);

/* ---------------------------------------------------------------- RDP */
typedef enum { DPFL_CONV_TIGHT = 0, DPFL_CONV_CLASSIC } dpfl_conversion;

/* The default orders: integers 2 .. 64, then 72 .. 4096.  dpfl_account_epsilon/delta with default orders then
 * refine over real orders around the best one (golden section, fractional-order formula). */
const double *dpfl_rdp_default_orders(size_t *n);

/* Per-step RDP of the Poisson-subsampled Gaussian (add/remove), any order alpha > 1.  Integer orders: log-sum-exp
 * of the binomial expansion; fractional: the Mironov-Talwar-Zhang two-series formula.  q = 0 -> 0; q = 1 ->
 * alpha/(2 z^2); z = 0 -> +inf. */
double dpfl_rdp_sgm(double q, double z, double alpha);
/* Per-step RDP (replace-one) of sampling `batch` of `n` without replacement then Gaussian(z), z relative to the
 * replace-one sensitivity: WBK Thm 9 with their Gaussian-specific moment bound (the j-th term is the min of
 * 4 x the forward difference of e^{(k-1) k / (2 z^2)} and the generic 2 e^{(j-1) j / (2 z^2)}), capped by the plain
 * Gaussian alpha / (2 z^2) (exactly that when batch == n).  Non-integer orders: the chord of (alpha - 1) eps
 * between the neighbouring integer orders (the true cumulant is convex). */
double dpfl_rdp_fixed(int64_t n, int64_t batch, double z, double alpha);
/* RDP of one round of a two-stage event (both bounds documented at dpfl_two_stage_bound). */
double dpfl_rdp_two_stage(double lambda, double q, double z, int64_t inner, dpfl_two_stage_bound bound,
                          double alpha);
/* rdp[i] = total RDP at orders[i] of the composed events. */
dpfl_status dpfl_rdp_compose(const dpfl_event *ev, size_t nev, const double *orders, size_t norders, double *rdp,
                             dpfl_error *err);
/* Conversions (Balle et al. 2020; Canonne, Kamath, Steinke 2020), minimised over the orders; *order gets the optimal order (may be NULL).
 * epsilon is clamped at 0, delta at 1. */
double dpfl_rdp_to_epsilon(const double *orders, const double *rdp, size_t n, double delta, dpfl_conversion conv,
                           double *order);
double dpfl_rdp_to_delta(const double *orders, const double *rdp, size_t n, double epsilon, dpfl_conversion conv,
                         double *order);

/* ---------------------------------------------------------------- Skellam mechanism (distributed DP; skellam.c) */
/* RDP at integer order alpha of a sum released with Skellam noise of total variance mu, for neighbours differing
 * by an integer vector of L1 norm <= d1 and L2 norm <= d2 (Agarwal, Kairouz, Liu 2021, Corollary 3.6). */
double dpfl_skellam_rdp(int alpha, double d1, double d2, double mu);
/* The L1 bound of an integer vector of L2 norm <= d2 in dim dimensions: min(d2^2, sqrt(dim) d2). */
double dpfl_skellam_l1_bound(double d2, size_t dim);
/* epsilon at delta of `rounds` such releases, each including a given client with probability q (1: always),
 * participation visible: the smaller of per-round joint convexity composed by RDP and the binomial mixture below. */
dpfl_status dpfl_skellam_epsilon(double d1, double d2, double mu, double q, int64_t rounds, double delta,
                                 double *eps, dpfl_error *err);
/* Sampled distributed DP, participation visible (skellam_visible.c): delta(eps) <= sum_j P(J = j) delta_j(eps),
 * J the number of rounds the client takes part in, delta_j the conversion (conv) of j x the Skellam RDP minimised
 * over integer orders 2..4096.  Every event must be DPFL_EV_SKELLAM (EINVAL otherwise); rates may differ (J is
 * bounded by the rounds at q = 1 plus Bin(rest, largest q < 1)) and so may the sensitivities and noise (the largest
 * RDP at each order).  dpfl_account_epsilon / _delta (rdp, and pld's fallback to it) answer the smaller of this and
 * the RDP composition when dpfl_skellam_mixture_applies (every counted event Skellam, one with 0 < q < 1) and the
 * default orders are used; the guarantee's order is 0 when the mixture answers. */
int dpfl_skellam_mixture_applies(const dpfl_event *ev, size_t nev);
dpfl_status dpfl_skellam_mixture_delta(const dpfl_event *ev, size_t nev, double epsilon, dpfl_conversion conv,
                                       double *delta, dpfl_error *err);
dpfl_status dpfl_skellam_mixture_epsilon(const dpfl_event *ev, size_t nev, double delta, dpfl_conversion conv,
                                         double *eps, dpfl_error *err);
/* The accountant's hook: if dpfl_skellam_mixture_applies, *value (an RDP epsilon at delta = x, or with want_delta a
 * delta at epsilon = x) becomes the mixture's bound where that is smaller, and *order 0. */
void dpfl_skellam_mixture_tighten(const dpfl_event *ev, size_t nev, double x, int want_delta, dpfl_conversion conv,
                                  double *value, double *order);

/* ---------------------------------------------------------------- accountants (one entry point) */
const char *dpfl_accountant_name(dpfl_accountant a);

typedef struct {
    dpfl_conversion conversion; /* RDP only; default tight */
    const double *orders;       /* RDP only; NULL = default orders, refined around the best one */
    size_t norders;
    size_t pld_bins;            /* PLD only; 0 = default (2^17) */
} dpfl_account_opts;

typedef struct {
    double epsilon;
    double delta;
    double order;      /* RDP: optimal order; otherwise 0 */
    double mu;         /* GDP: mu; otherwise 0 */
    int asymptotic;    /* 1 if the number is a CLT limit and not an upper bound */
    dpfl_accountant answered; /* the accountant whose number this is (RDP when PLD fell back or RDP was smaller) */
    char fallback[160];       /* why PLD did not answer, or "" */
    double epsilon_lower;     /* PLD answered an epsilon: the optimistic discretization's epsilon, a lower bound on
                               * the true epsilon of the same events (the truth lies in [epsilon_lower, epsilon]);
                               * 0 = not computed (RDP or GDP answered, or a delta was asked) */
} dpfl_guarantee;

/* epsilon at the given delta (the result's delta = delta). opts may be NULL.  PLD never answers below the truth:
 * where its discretization cannot hold (a grid too coarse for one step, mass lost by the T-th power, delta below its
 * own slack) or the events are not Gaussian / Poisson add-remove, the RDP bound is returned instead, and a valid PLD
 * number is replaced by RDP's when that is smaller (both are upper bounds); out->answered and out->fallback say so. */
dpfl_status dpfl_account_epsilon(const dpfl_event *ev, size_t nev, double delta, dpfl_accountant acc,
                                 const dpfl_account_opts *opts, dpfl_guarantee *out, dpfl_error *err);
/* delta at the given epsilon. */
dpfl_status dpfl_account_delta(const dpfl_event *ev, size_t nev, double epsilon, dpfl_accountant acc,
                               const dpfl_account_opts *opts, dpfl_guarantee *out, dpfl_error *err);

/* ---------------------------------------------------------------- PLD */
/* Remove and add directions of every event are composed separately; the answer is the larger.  Supports
 * GAUSSIAN and POISSON events (add/remove or zero-out) and plain Gaussians under replace-one; other kinds give
 * DPFL_EINVAL (use RDP).  bins = FFT length (0 = default 2^17). */
dpfl_status dpfl_pld_epsilon(const dpfl_event *ev, size_t nev, double delta, size_t bins, double *eps,
                             dpfl_error *err);
dpfl_status dpfl_pld_delta(const dpfl_event *ev, size_t nev, double epsilon, size_t bins, double *delta,
                           dpfl_error *err);
/* Both ends of the discretization's bracket: *upper as dpfl_pld_epsilon (pessimistic: connect-the-dots), *lower from
 * the optimistic discretization (output cells, losses moved down) of the same composition, so lower <= the true
 * epsilon <= upper.  lower may be NULL (not computed).  Same for delta at epsilon. */
dpfl_status dpfl_pld_epsilon_bounds(const dpfl_event *ev, size_t nev, double delta, size_t bins, double *upper,
                                    double *lower, dpfl_error *err);
dpfl_status dpfl_pld_delta_bounds(const dpfl_event *ev, size_t nev, double epsilon, size_t bins, double *upper,
                                  double *lower, dpfl_error *err);
/* Hockey-stick divergence of one Poisson-subsampled Gaussian step, exact (closed form): max of both directions.*/
double dpfl_pld_sgm_delta_exact(double q, double z, double epsilon);

/* ---------------------------------------------------------------- Gaussian DP and f-DP */
/* mu-GDP -> delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2). */
double dpfl_gdp_delta(double mu, double epsilon);
/* smallest eps >= 0 with delta(eps) <= delta. */
double dpfl_gdp_epsilon(double mu, double delta);
/* largest mu with delta(eps) <= delta (inverse of the above in mu). */
double dpfl_gdp_mu(double epsilon, double delta);
/* tradeoff function G_mu(a) = Phi(Phi^{-1}(1 - a) - mu). */
double dpfl_gdp_tradeoff(double mu, double a);
/* T rounds, each taken part in with probability q (participation visible: Poisson sampling with replacement by
 * a special unit), each participation mu-GDP: exact delta(eps) = sum_j Bin(j; T, q) delta_mu_sqrt(j)(eps), an
 * upper bound to a relative 1e-9; and the smallest eps with delta(eps) <= delta. */
double dpfl_gdp_visible_delta(double mu, double q, int64_t T, double epsilon);
double dpfl_gdp_visible_epsilon(double mu, double q, int64_t T, double delta);
/* CLT mu (asymptotic, not a bound): Poisson rate q, T steps (Bu-Dong-Long-Su). */
double dpfl_gdp_clt_poisson(double q, double z, double T);
/* CLT mu (asymptotic): uniform batches of B from n without replacement, T steps (Dong-Roth-Su). */
double dpfl_gdp_clt_fixed(double B, double n, double z, double T);
/* Tradeoff curve from a delta(eps) curve: f(a) = sup_eps max{0, 1 - d - e^eps a, e^-eps (1 - d - a)}, over the
 * ne given pairs.  Returns f at a. */
double dpfl_tradeoff_from_profile(const double *eps, const double *delta, size_t ne, double a);

/* ---------------------------------------------------------------- a run's event (event_json.c, run_event.c) */
/* The composition a run turned into one of its epsilons: summary.json's "events" holds one per unit (the worst
 * record, the clients), `dpfl account --event` recomputes the epsilon from it, and the DpEvent expression written
 * beside each event lets Google dp_accounting do the same (docs/privacy.md maps the kinds). */
typedef enum {
    DPFL_ORDERS_DEFAULT = 0, /* dpfl_rdp_default_orders, refined around the best */
    DPFL_ORDERS_INTEGER,     /* dpfl_rdp_default_orders as they are (secure mode: integer orders only) */
    DPFL_ORDERS_RPDP         /* the integers 2 .. 994 (rPDP-FL's published accountant) */
} dpfl_orders_set;

typedef struct {
    char unit[16];              /* "record", "client", ... */
    dpfl_accountant accountant; /* the accountant the run asked (PLD may have answered with RDP's smaller value) */
    dpfl_orders_set orders;
    double delta;
    double epsilon;             /* what the run reported from this composition; NAN when not given */
    int64_t held_by;            /* clients that hold the unit's data (a replicated record), 1 otherwise; the events'
                                   counts are already summed over all of them */
    dpfl_event *events;         /* composed; each a self-composition of its count */
    size_t nevents;
} dpfl_run_event;

/* One JSON object (malloc'd text; free()). */
dpfl_status dpfl_run_event_json(const dpfl_run_event *r, char **json, dpfl_error *err);
/* The inverse; every error names `what` (e.g. the file) and the event.  r->events is malloc'd. */
dpfl_status dpfl_run_event_parse(const char *json, const char *what, dpfl_run_event *r, dpfl_error *err);
void dpfl_run_event_free(dpfl_run_event *r);
/* An event tree (JSON; the nodes of docs/privacy.md "The tree": Google dp_accounting's DpEvent algebra of
 * sampled leaves, self_composed, composed and held_by) normalized to the flat composition the accountants take;
 * *ev is malloc'd (free()), never NULL on success.  A shape with no flat form is refused; errors name `what` and the
 * node's path. */
dpfl_status dpfl_event_tree_parse(const char *json, const char *what, dpfl_event **ev, size_t *nev, dpfl_error *err);
/* epsilon at r->delta of r's composition, with r's accountant and orders. */
dpfl_status dpfl_run_event_epsilon(const dpfl_run_event *r, dpfl_guarantee *g, dpfl_error *err);

/* ---------------------------------------------------------------- calibration */
typedef struct {
    dpfl_accountant accountant; /* RDP or PLD (GDP: exact only for plain Gaussian events) */
    dpfl_account_opts opts;
    double tol;                 /* bisection stops when hi - lo <= tol * hi (default 1e-6) */
} dpfl_calibrate_opts;

/* Smallest z (to tolerance, on the safe side) such that the events with every z replaced by z have
 * epsilon(delta) <= target.  opts may be NULL (RDP, tight). */
dpfl_status dpfl_calibrate_noise(const dpfl_event *ev, size_t nev, double target_eps, double delta,
                                 const dpfl_calibrate_opts *opts, double *z, dpfl_error *err);
/* Largest count T (every event's count replaced by T) with epsilon <= target; 0 if even T = 1 overshoots. */
dpfl_status dpfl_calibrate_steps(const dpfl_event *ev, size_t nev, double target_eps, double delta,
                                 const dpfl_calibrate_opts *opts, int64_t *T, dpfl_error *err);
/* Largest sampling rate q (POISSON events' q replaced) with epsilon <= target. */
dpfl_status dpfl_calibrate_rate(const dpfl_event *ev, size_t nev, double target_eps, double delta,
                                const dpfl_calibrate_opts *opts, double *q, dpfl_error *err);

/* ---------------------------------------------------------------- PriFedSync federated f-DP (PriFedSync, Section 3) */
typedef struct {
    int64_t clients;   /* m */
    double p;          /* client sync probability per round */
    double z;          /* record-level noise multiplier (replace-one: noise std / 2C) */
    int64_t batch, n;  /* B_j of n_j, without replacement */
    int64_t local_steps, rounds; /* K, R */
    int64_t copies;    /* the clients holding the record (>= 1): its releases in each of them compose */
} dpfl_fdp_params;

typedef struct {
    double mu_weak;        /* paper's CLT mu_max (asymptotic) */
    double mu_strong;      /* sqrt(m-1) mu_max (asymptotic) */
    double eps_weak_clt, eps_strong_clt;   /* the above converted at delta (asymptotic) */
    double eps_exact;      /* RDP upper bound (fixed batches, WBK) keeping the client sampling p: holds against any
                              observer (one client, all others together, the server); not asymptotic */
    double order_exact;
} dpfl_fdp_result;

dpfl_status dpfl_fdp_prifedsync(const dpfl_fdp_params *pp, double delta, dpfl_fdp_result *out, dpfl_error *err);

/* ---------------------------------------------------------------- rPDP-FL per-record budgets (rPDP-FL) */
typedef struct {
    double z, lambda;
    int64_t inner, rounds;  /* tau local steps, T rounds */
    double delta;
    dpfl_two_stage_bound bound;
    int use_pld;            /* 1: PLD of the two-stage round composed over the rounds (RDP with `bound` as floor) */
    const double *orders;   /* NULL = integer orders 2..994 (the paper's) when bound is RPDP, else default */
    size_t norders;
} dpfl_rpdp_params;

/* epsilon*(p) of a record sampled with probability p per local step. */
dpfl_status dpfl_rpdp_epsilon(const dpfl_rpdp_params *pp, double p, double *eps, dpfl_error *err);
/* Exact inverse: largest p with epsilon*(p) <= eps (bisection; the BinarySearch baseline). */
dpfl_status dpfl_rpdp_rate_for_budget(const dpfl_rpdp_params *pp, double eps, double *p, dpfl_error *err);

typedef struct {
    double a, b, c, r2;      /* eps(p) = exp(a p + b) + c */
    double eps_min, eps_max; /* eps*(p_min) and eps*(1) on the grid */
    double p_min;
    size_t npoints;
} dpfl_scf_fit;

/* SCF: simulate eps*(p) on the standard grid (0.001 steps to 0.1, 0.01 steps to 1) and fit. */
dpfl_status dpfl_scf_fit_curve(const dpfl_rpdp_params *pp, dpfl_scf_fit *fit, dpfl_error *err);
/* Budget -> probability through the fit (eps >= eps_max -> 1, eps <= eps_min -> 0). */
double dpfl_scf_rate(const dpfl_scf_fit *fit, double eps);
/* The safe inverse: the largest p whose exact epsilon*(p) is <= eps, to 1e-4 relative, searched above lo (a rate
 * known to be safe, with epsilon*(lo) = eps_lo <= eps; 0 and 0 for none) given eps1 = epsilon*(1); the SCF fit (may
 * be NULL) gives the first guess.  p = 1 when eps1 <= eps; 0 when no p >= DPFL_RPDP_P_FLOOR is safe. */
#define DPFL_RPDP_P_FLOOR 1e-6
dpfl_status dpfl_rpdp_safe_rate(const dpfl_rpdp_params *pp, const dpfl_scf_fit *fit, double eps, double eps1,
                                double lo, double eps_lo, double *p, dpfl_error *err);
/* A budget file (dpfl scf --budgets): one epsilon > 0 per line; blank lines and lines starting with '#' are
 * skipped.  *v (malloc'd, *n values; NULL and 0 on error) in file order; errors name the line. */
dpfl_status dpfl_budgets_read(const char *path, double **v, size_t *n, dpfl_error *err);
/* A budget per training record (record_dp.budget_file): one epsilon per line in the dataset's order, or rows
 * "record_id,epsilon" (0-based training-set indices, any order, each record exactly once, an optional header row).
 * Every error names the file and, where there is one, the line. */
dpfl_status dpfl_budgets_read_records(const char *path, size_t n, double *out, dpfl_error *err);
/* The rPDP-FL paper's privacy-preference distributions (section 7), each budget clipped to [lo, hi]:
 * THREELEVELS 70 / 20 / 10 % at 0.1 / 1 / 5 (in record order, or shuffled); MIXGAUSS the 0.7 / 0.2 / 0.1 mixture of
 * N(0.1, 0.05), N(1, 0.1), N(5, 0.5); PARETO Lomax(shape 4, scale 1) + 0.1. */
typedef enum { DPFL_PREF_THREELEVELS = 0, DPFL_PREF_MIXGAUSS, DPFL_PREF_PARETO } dpfl_pref_dist;
void dpfl_budgets_generate(dpfl_pref_dist kind, size_t n, double lo, double hi, int shuffle, dpfl_rng *r,
                           double *out);
/* Calibrate z so that a record with p = 1 reaches max_eps (bisection, z within tol, epsilon <= max_eps). */
dpfl_status dpfl_rpdp_calibrate_noise(const dpfl_rpdp_params *pp, double max_eps, double tol, double *z,
                                      dpfl_error *err);

/* ---------------------------------------------------------------- end-to-end record + client (end-to-end DP thesis, section 3.3) */
typedef struct {
    double z;               /* record-level noise multiplier sigma (std / C on the clipped per-sample sum) */
    int64_t batch, n;       /* Poisson rate q = batch / n inside the client */
    int64_t local_steps;    /* k */
    double client_rate;     /* probability a client takes part in a round */
    int64_t rounds;
    double server_z;        /* server clips updates to S and adds std server_z * S to the sum (0 = none) */
    dpfl_adjacency client_adjacency; /* ZERO_OUT (default) or REPLACE_ONE */
    double delta;
} dpfl_e2e_params;

typedef struct {
    /* record level: the smaller of the two-stage RDP bound and the two-stage PLD (both for visible participation);
     * record_order is the RDP order, or 0 when the PLD answered */
    double record_epsilon, record_order;
    double client_epsilon;  /* exact for visible participation (dpfl_gdp_visible_epsilon) */
    double client_order;    /* 0: not an RDP value */
    double client_noise;    /* effective per-round client-level noise multiplier 1 / client_mu */
    double client_mu;       /* GDP mu of one round for a participating client: min(sqrt(k) B / sigma, 2 / z2) */
} dpfl_e2e_result;

dpfl_status dpfl_e2e(const dpfl_e2e_params *pp, dpfl_e2e_result *out, dpfl_error *err);
/* mu of one round for a participating client: min(sqrt(k) / (z / B), 2 / server_z); z / (2B) for replace-one. */
double dpfl_e2e_client_mu(double z, int64_t batch, int64_t local_steps, dpfl_adjacency adjacency, double server_z);

/* ---------------------------------------------------------------- DP-FedAvg stop rule (Geyer et al. 2017) */
/* Largest number of rounds R such that the composition of the first R rounds of the schedule has
 * delta(target_eps) <= threshold (RDP, tight). Round t samples at rate q[t] with noise z[t]; if q/z are NULL the
 * constants q0/z0 are used.  max_rounds bounds the search. */
dpfl_status dpfl_stop_rule_rounds(const double *q, const double *z, double q0, double z0, int64_t max_rounds,
                                  double target_eps, double threshold, int64_t *rounds, dpfl_error *err);

#pragma GCC visibility pop

#endif
