/* Privacy accounting from C with libdpfl (include/dpfl/privacy.h): describe what a training run did as events,
 * compose them, get epsilon from the RDP and PLD accountants, and calibrate the noise for a target epsilon.
 *
 *   cc -std=c11 accountant.c $(pkg-config --cflags --libs dpfl) -o accountant
 *   ./accountant [Q NOISE STEPS DELTA TARGET_EPSILON]     (defaults: 0.01 1.1 1000 1e-5 3)
 *
 * The run: STEPS steps of DP-SGD, each record in a step's batch independently with probability Q (Poisson
 * sampling, add-remove adjacency), Gaussian noise of NOISE x the clipping norm on the clipped sum.  Every number
 * printed is an upper bound on the true epsilon (docs/privacy.md).  Exit status 1 on an error. */
#include <dpfl/privacy.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(const char *what, const dpfl_error *err)
{
    fprintf(stderr, "accountant: %s: %s\n", what, err->msg);
    return 1;
}

int main(int argc, char **argv)
{
    double q = 0.01, z = 1.1, delta = 1e-5, target = 3.0;
    long long steps = 1000;
    if (argc != 1 && argc != 6) {
        fprintf(stderr, "usage: %s [Q NOISE STEPS DELTA TARGET_EPSILON]\n", argv[0]);
        return 2;
    }
    if (argc == 6) {
        q = atof(argv[1]);
        z = atof(argv[2]);
        steps = atoll(argv[3]);
        delta = atof(argv[4]);
        target = atof(argv[5]);
    }
    dpfl_error err;
    dpfl_guarantee g;

    /* One event: STEPS Poisson-sampled Gaussian steps.  dpfl_event_check rejects values out of range. */
    dpfl_event run = dpfl_event_poisson(q, z, steps);
    if (dpfl_event_check(&run, &err)) return fail("event", &err);
    char text[160];
    dpfl_event_describe(&run, text, sizeof text);
    printf("event: %s\n", text);

    if (dpfl_account_epsilon(&run, 1, delta, DPFL_ACC_RDP, NULL, &g, &err)) return fail("rdp", &err);
    printf("rdp epsilon: %.12g (delta %g, order %.4g)\n", g.epsilon, delta, g.order);
    const double eps_rdp = g.epsilon;

    /* PLD is the tightest; where its discretization cannot hold it answers with RDP's number and says so. */
    if (dpfl_account_epsilon(&run, 1, delta, DPFL_ACC_PLD, NULL, &g, &err)) return fail("pld", &err);
    printf("pld epsilon: %.12g (answered by %s%s%s)\n", g.epsilon, dpfl_accountant_name(g.answered),
           g.fallback[0] ? ": " : "", g.fallback);

    /* Composition: the same run followed by a second phase (half as many steps at twice the rate and more noise).
     * Any list of events composes; the total can only be larger than either part. */
    dpfl_event phases[2] = {run, dpfl_event_poisson(q * 2 < 1 ? q * 2 : 1, z * 1.5, steps / 2 > 0 ? steps / 2 : 1)};
    if (dpfl_account_epsilon(phases, 2, delta, DPFL_ACC_RDP, NULL, &g, &err)) return fail("composition", &err);
    dpfl_event_describe(&phases[1], text, sizeof text);
    printf("then: %s\n", text);
    printf("composed rdp epsilon: %.12g\n", g.epsilon);
    if (!(g.epsilon >= eps_rdp)) {
        fprintf(stderr, "accountant: composition lowered epsilon (%g < %g)\n", g.epsilon, eps_rdp);
        return 1;
    }

    /* Calibration: the smallest noise multiplier whose STEPS steps at rate Q stay within TARGET_EPSILON (the
     * answer is on the safe side of the bisection), checked by accounting it again. */
    double zc;
    if (dpfl_calibrate_noise(&run, 1, target, delta, NULL, &zc, &err)) return fail("calibration", &err);
    run.z = zc;
    if (dpfl_account_epsilon(&run, 1, delta, DPFL_ACC_RDP, NULL, &g, &err)) return fail("rdp", &err);
    printf("calibrated noise: %.12g for target epsilon %g\n", zc, target);
    printf("calibrated rdp epsilon: %.12g\n", g.epsilon);
    if (!(g.epsilon <= target)) {
        fprintf(stderr, "accountant: calibrated noise overshoots (%g > %g)\n", g.epsilon, target);
        return 1;
    }
    return 0;
}
