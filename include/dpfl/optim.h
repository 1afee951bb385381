/* dpfl optim: first-order optimizers on flat float vectors, and learning-rate schedules.
 *
 * The optimizer sees only a gradient vector; whether it is a plain mean gradient or DP-SGD's noisy clipped
 * average is the caller's business (noisy Adam = Adam on the noisy gradient, PriFedSync).  Weight decay is L2
 * (added to the gradient) for SGD and Adam, decoupled for AdamW. */
#ifndef DPFL_OPTIM_H
#define DPFL_OPTIM_H

#include "dpfl/core.h"

#pragma GCC visibility push(default) /* exported by libdpfl.so (dpfl/core.h) */

typedef enum { DPFL_OPT_SGD, DPFL_OPT_ADAM, DPFL_OPT_ADAMW } dpfl_opt_kind;
typedef enum { DPFL_SCHED_CONSTANT, DPFL_SCHED_STEP, DPFL_SCHED_EXP } dpfl_sched_kind;

typedef struct {
    dpfl_opt_kind kind;
    double lr;
    double momentum;     /* SGD */
    double weight_decay;
    double beta1, beta2, eps; /* Adam */
    dpfl_sched_kind sched;
    double gamma;        /* STEP: lr *= gamma every step_size units; EXP: lr *= gamma each unit */
    int32_t step_size;
} dpfl_optim_config;

/* Defaults: SGD lr 0.01, no momentum, Adam betas (0.9, 0.999), eps 1e-8, constant schedule. */
void dpfl_optim_defaults(dpfl_optim_config *cfg);
/* Names for configs and errors: "sgd", "adam", "adamw"; "constant", "step", "exp". */
dpfl_status dpfl_optim_parse_kind(const char *s, dpfl_opt_kind *out, dpfl_error *err);
dpfl_status dpfl_optim_parse_sched(const char *s, dpfl_sched_kind *out, dpfl_error *err);

/* Learning rate after `unit` schedule units (rounds in federated training). */
double dpfl_optim_lr(const dpfl_optim_config *cfg, int64_t unit);

typedef struct {
    dpfl_optim_config cfg;
    size_t n;
    float *m, *v; /* momentum / Adam moments (NULL when unused) */
    int64_t t;    /* steps taken (Adam bias correction) */
} dpfl_optim;

dpfl_status dpfl_optim_init(dpfl_optim *o, const dpfl_optim_config *cfg, size_t n, dpfl_error *err);
/* Forget the state (moments, step count): a fresh optimizer for the next local training. */
void dpfl_optim_reset(dpfl_optim *o);
void dpfl_optim_free(dpfl_optim *o);
/* 1 when a step is exactly params -= lr * grad (SGD without momentum or weight decay): a caller may then fuse the
 * update into the backward pass (dpfl_nn_sgd_step, dpfl_nn_clipped_grad_sum_axpy) and count the step with
 * dpfl_optim_count. */
int dpfl_optim_plain_sgd(const dpfl_optim *o);
/* Counts a step taken outside dpfl_optim_step (the fused path). */
void dpfl_optim_count(dpfl_optim *o);
/* params -= step(grad) at learning rate lr. grad is not modified. */
void dpfl_optim_step(dpfl_optim *o, float *params, const float *grad, double lr);

#pragma GCC visibility pop

#endif
