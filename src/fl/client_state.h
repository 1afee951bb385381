/* The clients' own state in the simulation, split by concern (PriFedSync, Zheng et al., Algorithm 1: each client's
 * helper model h(i), kept across the rounds it sits out; fl.client_state = keep: its optimizer state; PrivateFL,
 * Yang et al. 2023, and fl.personal: its own parameters; SCAFFOLD, Karimireddy et al. 2020: its control variate):
 *   fl_personal_slices  which slices of the parameter vector are each client's own (personal.c)
 *   fl_state_layout     what one client's state block holds, where, and what a new block starts with
 *                       (state_layout.c)
 *   fl_state_store      every client's block: the table, the blocks in memory (a cache under
 *                       fl.client_state_max_mb) and, through fl_state_files, their files (clients.c)
 *   fl_state_files      the blocks' files in the run folder (client_store.c)
 *   fl_scaffold         SCAFFOLD's server state c and the round's sum that moves it (scaffold.c)
 * A function takes the parts it reads. */
#ifndef DPFL_FL_CLIENT_STATE_H
#define DPFL_FL_CLIENT_STATE_H
#include "dpfl/fl.h"
#include "dpfl/transport.h"
#include "core/exact_sum.h"

#include <stdatomic.h>

/* The personal parameters (model.transform's input transform, fl.personal's layers): each client's own values of
 * npr slices of the parameter vector (ascending, disjoint), npers floats in all; never sent (zero in its update),
 * never aggregated: the global model's slices stay at pinit. */
typedef struct {
    size_t npers;
    int32_t npr;
    size_t *pr_off, *pr_len;
    float *pinit;       /* the slices' initial values (the transform's identity, the other layers' initialization) */
} fl_personal_slices;

/* The slices fl.personal names (and the input transform's), with their initial values from global; one line
 * naming the token or the reason when they are not valid. */
dpfl_status fl_personal_init(fl_personal_slices *ps, const dpfl_config *cfg, const dpfl_model *m,
                             const float *global, dpfl_error *err);
void fl_personal_free(fl_personal_slices *ps);
/* personal values vals (npers floats) into their slices of the P-vector model, and back */
void fl_personal_load(const fl_personal_slices *ps, const float *vals, float *model);
void fl_personal_store(const fl_personal_slices *ps, const float *model, float *vals);
/* the personal slices of v set to zero (an update), or to their initial values (the global model) */
void fl_personal_zero(const fl_personal_slices *ps, float *v);
void fl_personal_reset(const fl_personal_slices *ps, float *model);

/* What one client's state block holds (fl.client_state = keep and/or fl.personalization = helper and/or personal
 * parameters and/or fl.scaffold), in this order: its helper model (P floats), its optimizer's vectors (state_vecs
 * x P), its control variate c_i (P floats), its personal parameters (npers floats); and what a new block starts
 * with: w0, zero, zero, pinit. */
typedef struct {
    int keep;           /* some per-client state exists (any of the four; optimizer state may take no floats) */
    int keep_opt;       /* fl.client_state = keep: the optimizer state is the client's own */
    int state_vecs;     /* optimizer vectors of P floats per client: 0 (plain SGD or reset), 1 (momentum), 2 (Adam) */
    int helper;         /* fl.personalization = helper */
    int scaffold;       /* fl.scaffold */
    size_t nparam;      /* P */
    fl_personal_slices pers;
    float alpha;        /* helper_alpha: the helper sync's weight on the global model */
    float *w0;          /* helper: the initial model, every client's helper until its first sync */
} fl_state_layout;

/* The layout of the config and model (its block under fl.client_state_max_mb: one line naming the parts when one
 * block is over the cap); w0 = global (Algorithm 1: h_i <- w0). */
dpfl_status fl_layout_init(fl_state_layout *L, const dpfl_config *cfg, const dpfl_model *model,
                           const dpfl_optim_config *opt, const float *global, dpfl_error *err);
void fl_layout_free(fl_state_layout *L);
size_t fl_layout_floats(const fl_state_layout *L);
/* the parts of a block (NULL: no block, or the layout has no such part) */
float *fl_layout_optimizer(const fl_state_layout *L, float *block);
float *fl_layout_variate(const fl_state_layout *L, float *block);
float *fl_layout_personal(const fl_state_layout *L, float *block);
/* a new block's values into a zeroed block: the helper model w0 and the personal slices' initial values (its
 * optimizer state and variate stay zero, as a reset optimizer's) */
void fl_layout_fresh(const fl_state_layout *L, float *block);

/* one row of the store's table: client k's block and what is known of it */
typedef struct {
    float *state; /* the client's block in memory (NULL: it never trained, or it is paged out to its state file) */
    int64_t t;    /* local steps taken over all the client's rounds (the optimizer's t with client_state = keep) */
    double local_acc; /* helper models: accuracy of its latest freshly trained model on its test split (NAN: none
                         since this process started; not checkpointed, a diagnostic) */
    /* its state files (client_store.c): the newest one's generation and CRC, and the generation the latest
     * durable checkpoint refers to (0: none) */
    int32_t gen, ref_gen;
    uint32_t crc;
    int32_t last_use;  /* the round that last needed the block in memory (fl_store_begin_round's) */
    uint8_t dirty;     /* the block in memory is newer than file gen */
    uint8_t eval_ok;   /* helper models: eval_loss, eval_acc are its own model's (w0 before it first trains) on its
                          test split, still current */
    double eval_loss, eval_acc;
} client_opt;

/* The blocks' files (client_store.c): FOLDER/client<k>.g<gen>.bin, one per client and generation. */
typedef struct {
    char *dir;          /* the folder (NULL: none: blocks stay in memory, up to the cap) */
    size_t floats;      /* of a block (the store's) */
    int32_t count;      /* clients */
    atomic_int read_failed; /* an evaluation could not read a state file: read_err says why (the run stops) */
    dpfl_error read_err;
    int64_t written, read; /* files, since this process started (tests, docs) */
} fl_state_files;

/* The files of rows[ks[0..n)] as generation gen, durable (renamed, folder fsync'd) on return, their rows' gen, CRC
 * and dirty updated; read: client k's current generation (its row) into state, checked against its name, t and
 * CRC; prune: every file in the folder that no checkpoint reference of rows names, and a clear error if a named one
 * is missing. */
void fl_files_path(const fl_state_files *F, int32_t k, int32_t gen, char *path, size_t len);
dpfl_status fl_files_write(fl_state_files *F, client_opt *rows, const int32_t *ks, int32_t n, int32_t gen,
                           dpfl_error *err);
dpfl_status fl_files_read(const fl_state_files *F, const client_opt *row, int32_t k, float *state, dpfl_error *err);
void fl_files_remove(const fl_state_files *F, int32_t k, int32_t gen);
dpfl_status fl_files_prune(const fl_state_files *F, const client_opt *rows, dpfl_error *err);

/* Every client's block (clients.c): one row per client, its block allocated the first time it trains.  The blocks
 * in memory are a cache under fl.client_state_max_mb: above it, blocks of clients the current round does not train
 * are paged out to their files (least recently used first) and read back, bit for bit, when the client is next
 * sampled. */
typedef struct {
    client_opt *cstate; /* one row per client (NULL: no per-client state, fl_state_layout.keep = 0) */
    int32_t count;      /* clients */
    size_t floats;      /* of a block (fl_layout_floats; 0: rows without blocks) */
    size_t cap;         /* bytes the blocks in memory may take */
    int32_t resident;   /* blocks in memory */
    int32_t stamp;      /* the round being prepared (last_use of the blocks it needs) */
    float *scratch;     /* a paged-out block read for fl_store_peek */
    int64_t evictions;  /* blocks paged out since this process started (tests, docs) */
    fl_state_files files;
} fl_state_store;

/* the table of count rows (keep: else none) of blocks of floats floats, cap_mb MiB of them in memory */
dpfl_status fl_store_init(fl_state_store *S, int keep, int32_t count, size_t floats, int cap_mb, dpfl_error *err);
void fl_store_free(fl_state_store *S);
/* The round being prepared: fl_store_alloc marks the blocks it needs with it, and may page out only blocks not
 * needed since an earlier round. */
void fl_store_begin_round(fl_state_store *S, int32_t round);
/* Client k is about to train (steps local steps; none: no block): its block in memory (its file, or a new block as
 * L lays it out), marked changed. */
dpfl_status fl_store_alloc(fl_state_store *S, const fl_state_layout *L, int32_t k, int64_t steps, dpfl_error *err);
/* restore client k's block (checkpoints, deployed clients) */
dpfl_status fl_store_set(fl_state_store *S, int32_t k, int64_t t, const float *state, dpfl_error *err);
/* A checkpoint's reference: client k took t steps and its block is file generation gen with CRC crc (gen 0: no
 * floats); read when the client next needs it. */
dpfl_status fl_store_restore_ref(fl_state_store *S, int32_t k, int64_t t, int32_t gen, uint32_t crc,
                                 dpfl_error *err);
/* The files' folder (made if missing; without one, blocks are never paged out), and every file in it that no
 * checkpoint reference names removed (after a resume or for a new run). */
dpfl_status fl_store_use_dir(fl_state_store *S, const char *dir, dpfl_error *err);
/* Every block that changed since its file into a new file of generation gen (the round a checkpoint is about to
 * record), durable on return; then, once the checkpoint naming them is durable, fl_store_commit removes the
 * generations it no longer names. */
dpfl_status fl_store_flush(fl_state_store *S, int32_t gen, dpfl_error *err);
void fl_store_commit(fl_state_store *S);
/* client k's whole block (in memory, else read into a scratch block valid until the next call; NULL: none or a
 * failed read) */
const float *fl_store_peek(const fl_state_store *S, int32_t k);
/* The model client k uses with helper models: the first P floats of its block (as fl_store_peek), or w0 before its
 * first training. */
const float *fl_store_helper(const fl_state_store *S, const fl_state_layout *L, int32_t k);
/* w0 changed: the evaluations of w0 kept (clients that never trained) are no longer current */
void fl_store_w0_changed(fl_state_store *S);
/* personalization = helper, after the server step: h_k <- (1 - alpha) w~_k + alpha w_global for every client of
 * the round whose update arrived (h_k holds w~_k since its training). */
void fl_store_sync_helpers(fl_state_store *S, const fl_state_layout *L, const dpfl_client_report *results,
                           int32_t n, const float *global);

/* SCAFFOLD (scaffold.c), the server's side: c is its own state, updated as in Karimireddy et al. / Noble et al.,
 * c <- c + (1/N) sum_{i in S} dc_i with dc_i = c_i+ - c_i = -c - u_i / (K_i lr), formed from each update u_i it
 * receives (K_i: the steps the client reports, lr public).  Checkpointed; sent to client processes with the model:
 * the mean of every client's c_i when every update arrives. */
typedef struct {
    int on;             /* fl.scaffold */
    size_t nparam;      /* P */
    int32_t count;      /* N, the clients */
    float *c;           /* P floats */
    dpfl_xsum dc;       /* the exact sum over the round's arrived updates u_i of u_i / (K_i lr) */
    int32_t dcn;        /* and their number */
    float *dcmean;      /* P floats: that sum / N, at the round's end */
} fl_scaffold;

dpfl_status fl_scaffold_init(fl_scaffold *sc, int on, size_t nparam, int32_t clients, dpfl_error *err);
void fl_scaffold_free(fl_scaffold *sc);
/* begin: a round's sum starts empty; take: client i's update arrived (any order: the sum is exact); end: after the
 * release, c moves. */
void fl_scaffold_begin(fl_scaffold *sc);
dpfl_status fl_scaffold_take(fl_scaffold *sc, const float *u, int64_t steps, double lr, dpfl_error *err);
void fl_scaffold_end(fl_scaffold *sc);
/* The client's side, on P-vectors: after one local step, local -= lr (c - c_i); after the client's round (option
 * II), c_i <- c_i - c - u / (steps lr), u the update it sent. */
void fl_scaffold_correct(const float *c, const float *ci, float *local, size_t P, double lr);
void fl_scaffold_update(const float *c, float *ci, const float *u, size_t P, int64_t steps, double lr);
#endif
