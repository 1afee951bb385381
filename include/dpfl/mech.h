/* dpfl mech: the privacy mechanisms, as units on flat buffers that take plain numbers (never the config) and say
 * what they did as the dpfl_event an accountant composes.  Sampling, clipping and noise live here and nowhere
 * else; the training loop (fl/) calls them, the ledger is handed their events.  Every formula for a sampling rate,
 * a sensitivity, a noise std or a denominator exists once, in these files.
 *
 *   sampler.c  batch samplers (Poisson, fixed without replacement) and client samplers (Poisson, fixed, all,
 *              dropout)
 *   dpsgd.c    one DP-SGD step's mechanism: sampler, clip C, noise z -> sensitivity, noise std, denominator, event
 *   clip.c     update clipping (flat, per layer), the median (NOT private), adaptive clipping's noisy quantile
 *   filter.c   the individual Renyi filter's per-record bound, loss and noise plan (rPDP-FL, budget_policy = filter)
 *   rpdp.c     rPDP-FL's per-record sampling round (client design, local steps, noise) -> each level's event
 *   e2e.c      record-level noise read at the client level (e2e): the rounds' designs, the steps -> the event
 *   noise.c    Gaussian noise (floating point, ChaCha20), exact discrete Gaussian noise on a grid and on counts
 *   round.c    one client-level round's mechanism: client sampling, clip S, noise z -> denominator, std, event
 *   ddp.c      distributed DP (include/dpfl/ddp.h): plan, each client's Skellam share, encode/decode, event */
#ifndef DPFL_MECH_H
#define DPFL_MECH_H

#include "dpfl/core.h"
#include "dpfl/nn.h"
#include "dpfl/privacy.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

/* ---------------------------------------------------------------- samplers */
/* Each record of idx[0..n) independently with probability q, in order, into out; returns the count. */
int32_t dpfl_mech_poisson_batch(dpfl_rng *r, const int32_t *idx, int32_t n, double q, int32_t *out);
/* B distinct records of idx[0..n) uniformly without replacement (partial Fisher-Yates) into out[0..B); out must
 * hold n entries (it is the shuffle's scratch). Returns B. */
/* Non-uniform Poisson batch (rPDP-FL): record idx[i] is in with probability p[idx[i]] (p indexed by record). */
int32_t dpfl_mech_poisson_batch_rates(dpfl_rng *r, const int32_t *idx, int32_t n, const double *p, int32_t *out);
int32_t dpfl_mech_fixed_batch(dpfl_rng *r, const int32_t *idx, int32_t n, int32_t B, int32_t *out);

/* CROSS_DEVICE: shuffled disjoint cohorts (PrivateFL's cross-device setting, its Table 11): a uniformly random
 * permutation of the K clients cut into E = K / m cohorts of m = rate K, one cohort a round, the permutation drawn
 * anew every E rounds (a "pass"), so that every client takes part exactly once per pass. */
typedef enum { DPFL_SAMPLE_POISSON = 0, DPFL_SAMPLE_FIXED, DPFL_SAMPLE_ALL, DPFL_SAMPLE_CROSS_DEVICE } dpfl_client_sampling;
/* Clients of round: all K; each with probability rate; or m of K without replacement.  out (K entries) gets
 * them in ascending order; returns how many.  (Cross-device needs the round: dpfl_mech_sample_clients_ran.) */
int32_t dpfl_mech_sample_clients(dpfl_rng *r, dpfl_client_sampling kind, int32_t K, double rate, int32_t m,
                                 int32_t *out);
/* A round's client sampling design, the part of the round's event the sampler carries out: what
 * dpfl_mech_sample_clients_ran draws from, and what the round's event charges. */
typedef struct {
    dpfl_client_sampling kind;
    int32_t K;    /* clients */
    double rate;  /* Poisson: each client's probability; cross-device: the cohort's share m / K */
    int32_t m;    /* fixed: clients per round; cross-device: the cohort, rate K rounded (argument m ignored) */
    double q;     /* the sampling rate the event charges: rate, m / K, or 1 (every client; cross-device: no
                     amplification by sampling is valid for cohorts, so none is charged) */
    double denom; /* the clients the design expects (the noisy sum's divisor): rate K, m, or K; cross-device m */
} dpfl_mech_clients;
dpfl_mech_clients dpfl_mech_clients_make(dpfl_client_sampling kind, int32_t K, double rate, int32_t m);
/* The clients drawn for round `round` (1-based) into out (K entries, ascending), returning how many and the design
 * it drew from (the event part it carried out) in *ran.  r must be the stream dpfl_mech_clients_stream names for
 * the round: cross-device rounds of one pass draw the same permutation from it and take their own cohort. */
int32_t dpfl_mech_sample_clients_ran(dpfl_rng *r, dpfl_client_sampling kind, int32_t K, double rate, int32_t m,
                                     int32_t round, int32_t *out, dpfl_mech_clients *ran);
/* The counter of the round's client-sampling stream: the round itself, or (cross-device) the first round of its
 * pass, so that every round of a pass sees the pass's permutation. */
int64_t dpfl_mech_clients_stream(const dpfl_mech_clients *d, int32_t round);
/* Cross-device: the rounds of one pass, K / m (1 for the other designs). */
int32_t dpfl_mech_clients_pass(const dpfl_mech_clients *d);
/* Whether round `round`'s client-level release is charged to the ledger: every round, but cross-device only the
 * first round of each pass, charged then for the whole pass -- after round t no client has entered more than
 * ceil(t / E) releases, each an unsampled Gaussian (dpfl_ledger_charge_round). */
int dpfl_mech_clients_charged(const dpfl_mech_clients *d, int32_t round);
/* The most client-level releases one client's data enters in rounds 1..rounds (what calibration and the ledger
 * compose): rounds, or (cross-device) ceil(rounds / E) -- the participations fl.participations counts. */
int64_t dpfl_mech_clients_releases(const dpfl_mech_clients *d, int32_t rounds);
/* The largest cohort rounds at rates up to max_rate can draw, to a modulus's safety: Poisson, the mean + 7 sd
 * (at most K); fixed and all, K. */
int32_t dpfl_mech_clients_max_cohort(dpfl_client_sampling kind, int32_t K, double max_rate);

/* ---------------------------------------------------------------- one DP-SGD step (record level) */
typedef struct {
    int poisson;      /* 1: Poisson batches (add-remove), 0: fixed batches without replacement (replace-one) */
    int32_t n, batch; /* the client's records; its batch B_k = min(B, n) */
    double q;         /* B_k / n */
    double clip;      /* C */
    double z;         /* noise multiplier relative to the sensitivity below */
    double sens;      /* L2 sensitivity of the clipped sum: C (add-remove) or 2C (replace-one) */
    double noise_std; /* z * sens (0 when z = 0, whatever C) */
    double denom;     /* the clipped sum is divided by q n (Poisson: the expected batch) or B_k */
} dpfl_mech_dpsgd;

dpfl_mech_dpsgd dpfl_mech_dpsgd_make(int poisson, int32_t n, int32_t batch, double clip, double z);
/* DP-SGD steps a client of n records takes in one round: local_steps when > 0, else local_epochs passes of
 * ceil(n / batch) batches; 0 for a client with no records.  The ledger, calibration and the e2e bound all count
 * steps with this. */
int64_t dpfl_mech_local_steps(int64_t n, int32_t batch, int32_t local_steps, int32_t local_epochs);
/* The DP-SGD steps a record is charged when each of the `copies` clients holding it (n records each) takes part in
 * every one of `rounds` rounds: copies x rounds x dpfl_mech_local_steps -- what calibration plans for. */
int64_t dpfl_mech_record_steps(int64_t n, int32_t batch, int32_t local_steps, int32_t local_epochs, int32_t rounds,
                               int32_t copies);
/* The event of `steps` such steps over this client's records. */
dpfl_event dpfl_mech_dpsgd_event(const dpfl_mech_dpsgd *d, int64_t steps);

/* ---------------------------------------------------------------- clipping */
/* Clip u to L2 norm S; with layer_off/layer_len (nlayers > 0) clip each layer to S sqrt(len / P) instead, so
 * the whole stays within S.  Returns the norm before clipping. */
double dpfl_mech_clip_update(float *u, size_t P, double S, const size_t *layer_off, const size_t *layer_len,
                             int32_t nlayers);
/* The median of norms[0..n) (sorted in place): Geyer's clip.  NOT differentially private: its event is
 * dpfl_event_not_private. */
double dpfl_mech_median(double *norms, int32_t n);
/* Adaptive clipping (Andrew et al. 2021): the update sum gets multiplier z_Delta and the centred count of
 * unclipped updates (sensitivity 1/2) noise sigma_b, so that together they are one Gaussian mechanism with
 * multiplier z: z_Delta = (z^-2 - (2 sigma_b)^-2)^(-1/2).  Returns DPFL_EINVAL (message names the quantity)
 * when 2 sigma_b <= z leaves nothing for the sum. */
dpfl_status dpfl_mech_adaptive_split(double z, double sigma_b, double *z_delta, dpfl_error *err);
/* The pair's multiplier from the two noises actually used: (z_Delta^-2 + (2 sigma_b)^-2)^(-1/2). */
double dpfl_mech_adaptive_release_z(double z_delta, double sigma_b);
/* The released estimate of the unclipped share: each of `replied` participants adds b_i - 1/2 (b_i = 1 if its
 * norm was <= S), Gaussian noise sigma_b is added, the sum is divided by the design's denominator and 1/2 added
 * back. */
double dpfl_mech_adaptive_quantile(dpfl_rng *r, int32_t replied, int32_t unclipped, double sigma_b, double denom);
/* The pair as one release (what its event is): the count noise sigma_b (sigma_b <= 0: the default, the design's
 * expected clients / 20), z_Delta of the update sum from dpfl_mech_adaptive_split, and z the multiplier of the
 * whole release recomputed from the two noises drawn (dpfl_mech_adaptive_release_z). */
typedef struct {
    double sigma_b, z_delta, z;
    int default_sigma; /* sigma_b was the default */
} dpfl_mech_adaptive;
dpfl_status dpfl_mech_adaptive_make(double z, double sigma_b, const dpfl_mech_clients *design, dpfl_mech_adaptive *out,
                                    dpfl_error *err);

/* ---------------------------------------------------------------- individual Renyi filter (record level) */
/* Feldman and Zrnic 2021 (filter.c): the largest norm a record with `left` of its Renyi budget at order alpha may
 * contribute to a sum noised with std sigma (0 when nothing is left; shrunk against float rounding), and the loss
 * at order alpha of its contribution of norm `norm` clipped to min(radius, clip) (padded the same way): never more
 * than was left. */
double dpfl_mech_filter_radius(double left, double sigma, double alpha);
double dpfl_mech_filter_loss(double norm, double radius, double clip, double sigma, double alpha);

/* ---------------------------------------------------------------- rPDP-FL: per-record sampling rounds */
/* One rPDP-FL round as the simulation runs it (Liu et al., rPDP-FL, Theorem 1): the client sampler's design
 * (lambda = clients.q: the rate it charges, 1 when every client takes part), then `steps` local DP-SGD steps on
 * each sampled client, each a Poisson batch with record i in at its own rate p_i, noise z C on the clipped sum.
 * What dpfl_record_dp_design returns; a record's event and the accountant's parameters are built from it alone. */
typedef struct {
    dpfl_mech_clients clients; /* the client sampler's design */
    int64_t steps;             /* tau: local steps of a participating client (the most any client takes) */
    double z;                  /* noise multiplier on each step's clipped sum */
} dpfl_mech_rpdp;
dpfl_mech_rpdp dpfl_mech_rpdp_of(const dpfl_mech_clients *clients, int64_t steps, double z);
/* The two-stage accountant's parameters of `rounds` such rounds (published bound, RDP; use_pld and orders left
 * 0 / NULL for the caller). */
dpfl_rpdp_params dpfl_mech_rpdp_params(const dpfl_mech_rpdp *m, int64_t rounds, double delta);
/* The event of a record at rate p charged `rounds` rounds: two-stage(lambda, p, z, steps) x rounds (a record at
 * p = 0 is never sampled: nothing charged). */
dpfl_event dpfl_mech_rpdp_event(const dpfl_mech_rpdp *m, double p, int64_t rounds);
/* The divisor of a client's noisy clipped sum: its expected batch sum_i p_i over its records idx[0..n) at the plan's
 * rates level_p[level[idx[i]]] (level < 0: never sampled) -- a constant of the run, as Opacus divides by the
 * expected batch size (opt-outs and the filter do not change it). */
double dpfl_mech_rpdp_denom(const double *level_p, const int32_t *level, const int32_t *idx, int32_t n);
/* budget_policy = filter (filter.c): z such that a record sampled at every step (p = 1) whose clipped gradient has
 * norm C at each of the T = rounds x m->steps local steps of `rounds` of m's rounds spends exactly `budget` at order
 * alpha: T alpha / (2 z^2) = budget. */
double dpfl_mech_filter_noise(const dpfl_mech_rpdp *m, int64_t rounds, double alpha, double budget);

/* ---------------------------------------------------------------- e2e: record-level noise at the client level */
/* End-to-end client-level DP (the thesis's section 3.3; privacy/e2e.c has the bound): each local step's clipped
 * sum is projected onto the ball of radius B C (fl/client.c), so a whole client moves it by at most B C against
 * noise of std z sens; a round of s steps (the most any client takes) is a Gaussian of mu = sqrt(s) B C /
 * (z sens), multiplier halved under replace-one (fixed-size client sampling), server noise z_s only helping (mu <=
 * 2 / z_s).  The noise is the client's own, so participation is visible: the rounds are one two-stage event at the
 * largest rate any round's client design charges (a larger rate only adds loss). */
typedef struct {
    double noise_std;  /* the DP-SGD step's noise std z sens (dpfl_mech_dpsgd) */
    int32_t batch;     /* B */
    double server_z;   /* client-level noise multiplier of the server (0: none) */
    int64_t steps;     /* the most local steps of any client (dpfl_mech_e2e_client) */
    double q;          /* the largest rate of the rounds' designs (dpfl_mech_e2e_round) */
    int replace_one;   /* a round's design was fixed-size (replace-one adjacency) */
} dpfl_mech_e2e;
dpfl_mech_e2e dpfl_mech_e2e_make(const dpfl_mech_dpsgd *step, int32_t batch, double server_z);
/* A client that takes `steps` local steps per round. */
void dpfl_mech_e2e_client(dpfl_mech_e2e *e, int64_t steps);
/* A round drawn from this client sampling design. */
void dpfl_mech_e2e_round(dpfl_mech_e2e *e, const dpfl_mech_clients *design);
/* mu of one participation (steps taken as 1 when no client has any). */
double dpfl_mech_e2e_mu(const dpfl_mech_e2e *e);
/* The client-level event of `rounds` rounds: two-stage(q, 1, 1 / mu, 1) x rounds, zero-out or replace-one. */
dpfl_event dpfl_mech_e2e_event(const dpfl_mech_e2e *e, int64_t rounds);

/* ---------------------------------------------------------------- noise */
/* v[i] = (v[i] + N(0, (z sens)^2)) * scale, chunked (bit-identical for any thread count); z = 0 adds nothing
 * (no 0 * inf). */
void dpfl_mech_gaussian(dpfl_rng *r, float *v, size_t P, double z, double sens, float scale, int threads);
/* The same, bit for bit, on the threads of the workspace that has just computed the step (dpfl_nn_ws_add_gaussian). */
void dpfl_mech_gaussian_ws(dpfl_nn_ws *ws, dpfl_rng *r, float *v, size_t P, double z, double sens, float scale);
/* Secure mode: round v to the grid g = sens / (1000 sqrt(P)) and add exact discrete Gaussian noise of std
 * z (sens/g + sqrt(P)) grid units (neighbouring rounded sums differ by at most that many / z), then scale. */
void dpfl_mech_discrete_gaussian(dpfl_rng *r, float *v, size_t P, double z, double sens, float scale);
/* The std in the vector's own units of the noise dpfl_mech_discrete_gaussian adds: z (sens + sqrt(P) g) with the
 * grid step g = sens / (1000 sqrt(P)), i.e. z sens 1.001. */
double dpfl_mech_discrete_std(size_t P, double z, double sens);
/* sigma^2 in grid units that dpfl_mech_discrete_gaussian uses, and whether the exact sampler covers it. */
double dpfl_mech_discrete_sigma2(size_t P, double z);
int dpfl_mech_discrete_in_range(size_t P, double z);
/* An integer-valued query (counts, a histogram) whose neighbours differ by an integer vector of L2 norm <= sens,
 * released with exact discrete Gaussian noise: v[i] += N_Z(0, s2) for i < n, s2 = (z sens)^2 rounded up to an
 * integer (never less noise than z claims).  *ev: its event, dpfl_event_noise(DPFL_EV_DISCRETE_GAUSSIAN, z, 1).
 * DPFL_EINVAL, v untouched, unless z and sens are finite and >= 0 and s2 is within the exact sampler's 2^62. */
dpfl_status dpfl_mech_discrete_gaussian_counts(dpfl_rng *r, int64_t *v, size_t n, double z, double sens, dpfl_event *ev,
                                               dpfl_error *err);

/* ---------------------------------------------------------------- one client-level round */
typedef struct {
    dpfl_client_sampling sampling;
    int32_t K;        /* clients */
    double rate;      /* Poisson rate */
    int32_t m;        /* fixed: clients per round */
    double clip;      /* S */
    double z;         /* multiplier of the whole release (the noise is z S on the sum under add-remove) */
    double denom;     /* the noisy sum is divided by the design's number of clients: rate K, m or K */
} dpfl_mech_round;

dpfl_mech_round dpfl_mech_round_make(dpfl_client_sampling sampling, int32_t K, double rate, int32_t m, double clip,
                                     double z);
/* The round's event: poisson(rate, z) (add-remove), fixed(K, m, z/2) (replace-one: replacing a client moves the
 * sum by 2S), gaussian(z) (every client), cross-device gaussian(z/2): one unsampled Gaussian release of the
 * client's update under replace-one (no amplification; the ledger charges it once per pass). */
dpfl_event dpfl_mech_round_event(const dpfl_mech_round *r);
/* The std of the noise on the released average: z clip / denom. */
double dpfl_mech_round_std(const dpfl_mech_round *r);
/* The sampling rate the round's event charges: rate, m / K or 1. */
double dpfl_mech_round_rate(const dpfl_mech_round *r);
/* The round's mechanism at the design the client sampler ran (dpfl_mech_sample_clients_ran). */
dpfl_mech_round dpfl_mech_round_of(const dpfl_mech_clients *design, double clip, double z);

#pragma GCC visibility pop

#endif
