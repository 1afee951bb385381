/* Model specs, shapes, the flat parameter layout and initialisation.
 *
 * Every architecture is a comma-separated layer list ("net:" spec); the named models are fixed lists, so one
 * parser checks every shape.  Layer tokens:
 *   conv<OC>[k<k>][s<stride>][p<pad>][nb]   Conv2d (defaults k3 s1 p0; nb = no bias)
 *   pool<k>[s<stride>][p<pad>]              MaxPool2d (stride defaults to k; pad <= k/2, -infinity padding)
 *   fc<OC>[nb]                              Linear (a Flatten is inserted before it after spatial layers)
 *   relu | tanh | sigmoid | flatten | drop<p>
 *   gn<G> | ln                              GroupNorm with G groups (Wu & He 2018) | LayerNorm (= gn1); per
 *                                           example, gamma and beta per channel (per feature on a flat input)
 *   avgpool<k>[s<stride>] | gap             average pooling | global average pooling (to C x 1 x 1)
 *   (LAYERS)+ | (LAYERS)+p | (LAYERS)+pg<G> | block<C>[s][g][*n]    residual blocks (see close_block below)
 * BatchNorm (bn, batchnorm) is refused with the reason (it breaks per-example clipping).
 *   affine[<a><b>]                          PrivateFL's input transform x -> a (.) x + b, first layer only; a and b
 *                                           each n (none), c (one per channel) or p (one per pixel and channel);
 *                                           plain "affine" is "affinecp" (the paper's); identity at init
 *   mse                                     the last item: train on the mean squared error (nn.h DPFL_LOSS_MSE)
 * A spec "transform:SPEC" puts "affine" in front of SPEC's layers (see dpfl_model_create); "mse:SPEC" puts
 * "mse" after them.
 * Each parameterised layer owns one slice of the flat vector: weights (PyTorch order, (OC, C) or
 * (OC, C, k, k)) then bias. */
#include "layers.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAYERS 256
/* what an error ends with: a bad layer token gets the layers (the table's, bad_token), an unknown name the models */
#define VALID_MODELS                                                                                           \
    "valid models: logreg, mlp:IN-H1-...-OUT[:nobias], cnn-mnist, cnn-mcmahan, cnn-small, cnn-tf-cifar, "     \
    "resnet20-gn, resnet18-gn, privatefl-dnn, privatefl-purchase, net:LAYER,LAYER,...; prefixes transform:, " \
    "transform-<a><b>:, mse:; see docs/models.md"

typedef dpfl_nn_builder builder;
#define push dpfl_nn_build_push
#define read_int dpfl_nn_read_int
#define bad_token dpfl_nn_build_bad

dpfl_layer *dpfl_nn_build_push(builder *bd, dpfl_layer_kind kind)
{
    dpfl_model *m = bd->m;
    if (m->nlayers >= MAX_LAYERS) return NULL;
    dpfl_layer *L = &m->layers[m->nlayers++];
    memset(L, 0, sizeof *L);
    L->kind = kind;
    L->in_c = bd->c, L->in_h = bd->h, L->in_w = bd->w;
    L->out_c = bd->c, L->out_h = bd->h, L->out_w = bd->w;
    L->param_off = m->nparam;
    return L;
}

long dpfl_nn_read_int(const char **p)
{
    if (!isdigit((unsigned char)**p)) return -1;
    char *end;
    long v = strtol(*p, &end, 10);
    *p = end;
    return v > 1 << 24 ? -1 : v;
}

dpfl_status dpfl_nn_build_bad(builder *bd, const char *tok, const char *why)
{
    char layers[512];
    dpfl_nn_layer_syntax(layers, sizeof layers);
    return dpfl_fail(bd->err, DPFL_EINVAL,
                     "bad layer '%s' in model spec (%s): %s; valid layers: %s, mse (the squared-error loss); affine "
                     "only first, mse only last; residual blocks (LAYERS)+, (LAYERS)+p, (LAYERS)+pg<G>, block<C>[s][g][*n]; see "
                     "docs/models.md",
                     tok, bd->spec, why, layers);
}

static dpfl_status add_flatten(builder *bd)
{
    dpfl_layer *L = push(bd, DPFL_LAYER_FLATTEN);
    if (!L) return dpfl_fail(bd->err, DPFL_EINVAL, "model spec (%s): more than %d layers", bd->spec, MAX_LAYERS);
    bd->w = bd->c * bd->h * bd->w, bd->c = 1, bd->h = 1, bd->cnhw = 0;
    L->out_c = 1, L->out_h = 1, L->out_w = bd->w;
    return DPFL_OK;
}

/* conv<OC>... and pool<k>...: a convolution or a max pooling */
dpfl_status dpfl_nn_parse_conv_pool(builder *bd, const char *tok)
{
    const char *p = tok;
    dpfl_layer *L;
    int conv = tok[0] == 'c';
    p += 4;
    long oc = 0, k, s = -1, pad = 0, nb = 0;
    if (conv) {
        oc = read_int(&p);
        k = 3;
        if (*p == 'k') p++, k = read_int(&p);
    } else {
        k = read_int(&p);
    }
    if (*p == 's') p++, s = read_int(&p);
    if (*p == 'p') p++, pad = read_int(&p);
    if (conv && !strcmp(p, "nb")) p += 2, nb = 1;
    if (*p || (conv && oc < 1) || k < 1 || s == 0 || s < -1 || pad < 0)
        return bad_token(bd, tok, "expected conv<OC>[k<k>][s<s>][p<p>][nb] or pool<k>[s<s>][p<p>]");
    if (!conv && 2 * pad > k) return bad_token(bd, tok, "a pool's padding must be at most half its kernel");
    if (s == -1) s = conv ? 1 : k;
    if (bd->h * bd->w == 1 && !bd->cnhw && bd->m->nlayers > 0)
        return bad_token(bd, tok, "spatial layer after a flat one");
    long oh = (bd->h + 2 * pad - k) / s + 1, ow = (bd->w + 2 * pad - k) / s + 1;
    if (bd->h + 2 * pad < k || bd->w + 2 * pad < k || oh < 1 || ow < 1)
        return bad_token(bd, tok, "kernel larger than its input");
    if (pad >= k) return bad_token(bd, tok, "padding must be smaller than the kernel");
    L = push(bd, conv ? DPFL_LAYER_CONV2D : DPFL_LAYER_MAXPOOL2D);
    if (!L) return bad_token(bd, tok, "too many layers");
    L->k = (int32_t)k, L->stride = (int32_t)s, L->pad = (int32_t)pad;
    L->out_h = (int32_t)oh, L->out_w = (int32_t)ow;
    if (conv) {
        L->out_c = (int32_t)oc;
        L->bias = !nb;
        L->nparam = (size_t)oc * bd->c * k * k + (nb ? 0 : (size_t)oc);
        bd->cnhw = 1;
    }
    bd->c = L->out_c, bd->h = L->out_h, bd->w = L->out_w;
    return DPFL_OK;
}

/* fc<OC>[nb]: a linear layer (after a flatten where the input is not flat) */
dpfl_status dpfl_nn_parse_fc(builder *bd, const char *tok)
{
    const char *p = tok;
    dpfl_layer *L;
    p += 2;
    long oc = read_int(&p), nb = 0;
    if (!strcmp(p, "nb")) p += 2, nb = 1;
    if (*p || oc < 1) return bad_token(bd, tok, "expected fc<OC>[nb]");
    if (bd->cnhw || bd->c * bd->h > 1) {
        dpfl_status st = add_flatten(bd);
        if (st) return st;
    }
    L = push(bd, DPFL_LAYER_LINEAR);
    if (!L) return bad_token(bd, tok, "too many layers");
    L->bias = !nb;
    L->out_c = 1, L->out_h = 1, L->out_w = (int32_t)oc;
    L->nparam = (size_t)oc * bd->w + (nb ? 0 : (size_t)oc);
    bd->w = (int)oc;
    return DPFL_OK;
}

/* relu, tanh, sigmoid */
dpfl_status dpfl_nn_parse_activation(builder *bd, const char *tok)
{
    dpfl_layer *L;
    L = push(bd, tok[0] == 'r' ? DPFL_LAYER_RELU : tok[0] == 't' ? DPFL_LAYER_TANH : DPFL_LAYER_SIGMOID);
    if (!L) return bad_token(bd, tok, "too many layers");
    return DPFL_OK;
}

/* affine[<a><b>]: PrivateFL's input transform, the first layer only */
dpfl_status dpfl_nn_parse_affine(builder *bd, const char *tok)
{
    dpfl_layer *L;
    const char *m = tok[6] ? tok + 6 : "cp";
    int code[2];
    for (int i = 0; i < 2; i++)
        code[i] = m[i] == 'n' ? DPFL_AFFINE_NONE : m[i] == 'c' ? DPFL_AFFINE_CHANNEL : m[i] == 'p' ? DPFL_AFFINE_PIXEL : -1;
    if (strlen(m) != 2 || code[0] < 0 || code[1] < 0 || (code[0] == 0 && code[1] == 0))
        return bad_token(bd, tok, "expected affine[<a><b>], a and b each n, c or p, not both n");
    if (bd->m->nlayers > 0) return bad_token(bd, tok, "the input transform must be the first layer");
    L = push(bd, DPFL_LAYER_AFFINE);
    if (!L) return bad_token(bd, tok, "too many layers");
    L->k = code[0], L->pad = code[1];
    const size_t per[3] = {0, (size_t)bd->c, (size_t)bd->c * bd->h * bd->w};
    L->nparam = per[code[0]] + per[code[1]];
    return DPFL_OK;
}

/* avgpool<k>[s<s>] and gap: average pooling, global over the plane */
dpfl_status dpfl_nn_parse_avgpool(builder *bd, const char *tok)
{
    const char *p = tok;
    dpfl_layer *L;
    long k = 0, s = -1;
    if (tok[0] == 'a') {
        p += 7;
        k = read_int(&p);
        if (*p == 's') p++, s = read_int(&p);
        if (*p || k < 1 || s == 0 || s < -1) return bad_token(bd, tok, "expected avgpool<k>[s<s>] or gap");
        if (s == -1) s = k;
    }
    if (bd->h * bd->w == 1 && !bd->cnhw && bd->m->nlayers > 0)
        return bad_token(bd, tok, "spatial layer after a flat one");
    if (k > bd->h || k > bd->w) return bad_token(bd, tok, "kernel larger than its input");
    L = push(bd, DPFL_LAYER_AVGPOOL2D);
    if (!L) return bad_token(bd, tok, "too many layers");
    L->k = (int32_t)k, L->stride = (int32_t)(k ? s : 1);
    L->out_h = k ? (int32_t)((bd->h - k) / s + 1) : 1, L->out_w = k ? (int32_t)((bd->w - k) / s + 1) : 1;
    bd->h = L->out_h, bd->w = L->out_w;
    return DPFL_OK;
}

/* drop<p>: dropout */
dpfl_status dpfl_nn_parse_dropout(builder *bd, const char *tok)
{
    dpfl_layer *L;
    char *end;
    double d = strtod(tok + 4, &end);
    if (end == tok + 4 || *end || !(d >= 0.0 && d < 1.0)) return bad_token(bd, tok, "expected drop<p>, 0 <= p < 1");
    L = push(bd, DPFL_LAYER_DROPOUT);
    if (!L) return bad_token(bd, tok, "too many layers");
    L->drop = (float)d;
    return DPFL_OK;
}

dpfl_status dpfl_nn_parse_flatten(builder *bd, const char *tok)
{
    (void)tok;
    return add_flatten(bd);
}

/* the spec tokens of the built-in kinds */
int dpfl_nn_match_conv(const char *tok) { return !strncmp(tok, "conv", 4); }
int dpfl_nn_match_pool(const char *tok) { return !strncmp(tok, "pool", 4); }
int dpfl_nn_match_fc(const char *tok) { return !strncmp(tok, "fc", 2); }
int dpfl_nn_match_flatten(const char *tok) { return !strcmp(tok, "flatten"); }
int dpfl_nn_match_relu(const char *tok) { return !strcmp(tok, "relu"); }
int dpfl_nn_match_tanh(const char *tok) { return !strcmp(tok, "tanh"); }
int dpfl_nn_match_sigmoid(const char *tok) { return !strcmp(tok, "sigmoid"); }
int dpfl_nn_match_affine(const char *tok) { return !strncmp(tok, "affine", 6); }
int dpfl_nn_match_avgpool(const char *tok) { return !strncmp(tok, "avgpool", 7) || !strcmp(tok, "gap"); }
int dpfl_nn_match_dropout(const char *tok) { return !strncmp(tok, "drop", 4); }

/* A layer token: the kind whose row in the layer table reads it (their tokens do not overlap) parses it. */
static dpfl_status add_token(builder *bd, const char *tok)
{
    if (!strncmp(tok, "bn", 2) || !strncmp(tok, "batchnorm", 9))
        return bad_token(bd, tok, "BatchNorm is not supported: it normalizes with statistics of the whole batch, so "
                                  "an example's gradient depends on the other examples and per-example clipping no "
                                  "longer bounds its influence (DP-SGD's guarantee fails); use gn<G> (GroupNorm, "
                                  "per example) or ln (LayerNorm) instead");
    for (int k = 0; k < dpfl_nn_layer_kind_count(); k++) {
        const dpfl_layer_ops *ops = dpfl_nn_layer_ops((dpfl_layer_kind)k);
        if (!ops->match || !ops->match(tok)) continue;
        dpfl_status st = ops->parse(bd, tok);
        if (st) return st;
        bd->m->nparam += bd->m->layers[bd->m->nlayers - 1].nparam;
        return DPFL_OK;
    }
    return bad_token(bd, tok, "unknown layer");
}

/* ------------------------------------------------------------------------------------------ residual blocks
 *   (LAYER,...,LAYER)+          the block's output plus its input (identity shortcut: same shape)
 *   (LAYER,...,LAYER)+p         plus a 1x1 convolution of its input (with bias), strided to the output's size
 *   (LAYER,...,LAYER)+pg<G>     plus a 1x1 convolution without bias, then GroupNorm with G groups
 *   block<C>[s<s>][g<G>][*<n>]  n ResNet basic blocks (He et al. 2016, fig. 2 with GroupNorm):
 *                               (conv<C>k3s<s>p1nb,gn<G>,relu,conv<C>k3p1nb,gn<G>)+[pg<G>],relu -- the
 *                               projection where the shape changes; s (default 1) only in the first block;
 *                               G defaults to min(32, C), as Opacus's BatchNorm -> GroupNorm replacement */
static dpfl_status open_block(builder *bd, const char *tok)
{
    if (bd->bstart >= 0) return bad_token(bd, tok, "residual blocks cannot be nested");
    bd->bstart = bd->m->nlayers;
    bd->bc = bd->c, bd->bh = bd->h, bd->bw = bd->w, bd->bcnhw = bd->cnhw;
    return DPFL_OK;
}

static dpfl_status close_block(builder *bd, const char *tok, const char *tail)
{
    dpfl_model *m = bd->m;
    if (bd->bstart < 0) return bad_token(bd, tok, "')' without a '(' opening the residual block");
    if (m->nlayers == bd->bstart) return bad_token(bd, tok, "empty residual block");
    const int mc = bd->c, mh = bd->h, mw = bd->w, mcnhw = bd->cnhw, start = bd->bstart;
    long g = 0, proj = 0, bias = 0;
    const char *p = tail;
    if (*p++ != '+') return bad_token(bd, tok, "a residual block ends with )+, )+p or )+pg<G>");
    if (*p == 'p') {
        p++, proj = 1, bias = 1;
        if (*p == 'g') p++, bias = 0, g = read_int(&p);
        if (*p || g < 0 || (!bias && g < 1)) return bad_token(bd, tok, "a residual block ends with )+, )+p or )+pg<G>");
    } else if (*p) {
        return bad_token(bd, tok, "a residual block ends with )+, )+p or )+pg<G>");
    }
    bd->bstart = -1;
    int nshort = 0;
    if (!proj) {
        if (mc != bd->bc || mh != bd->bh || mw != bd->bw)
            return bad_token(bd, tok, "an identity shortcut needs the block's output shape to equal its input's; "
                                      "end the block with )+p or )+pg<G> for a 1x1 projection");
    } else {
        if (!bd->bcnhw && bd->bh * bd->bw == 1 && start > 0)
            return bad_token(bd, tok, "a projection shortcut needs a spatial block input");
        long s = 1;
        while (s <= bd->bh && ((bd->bh - 1) / s + 1 != mh || (bd->bw - 1) / s + 1 != mw)) s++;
        if (s > bd->bh || mh * mw == 0) return bad_token(bd, tok, "no 1x1 projection stride maps the block's input to its output");
        bd->c = bd->bc, bd->h = bd->bh, bd->w = bd->bw, bd->cnhw = bd->bcnhw;
        dpfl_layer *L = push(bd, DPFL_LAYER_CONV2D);
        if (!L) return bad_token(bd, tok, "too many layers");
        L->k = 1, L->stride = (int32_t)s, L->pad = 0, L->bias = (int32_t)bias;
        L->out_c = mc, L->out_h = mh, L->out_w = mw;
        L->nparam = (size_t)mc * bd->bc + (bias ? (size_t)mc : 0);
        L->from = start + 1;
        m->nparam += L->nparam;
        bd->c = mc, bd->h = mh, bd->w = mw, bd->cnhw = 1;
        nshort = 1;
        if (g) {
            char gt[32];
            snprintf(gt, sizeof gt, "gn%ld", g);
            dpfl_status st = add_token(bd, gt);
            if (st) return st;
            nshort = 2;
        }
    }
    dpfl_layer *A = push(bd, DPFL_LAYER_ADD);
    if (!A) return bad_token(bd, tok, "too many layers");
    A->from = start + 1, A->shortcut = nshort;
    bd->c = mc, bd->h = mh, bd->w = mw, bd->cnhw = mcnhw;
    A->in_c = A->out_c = mc, A->in_h = A->out_h = mh, A->in_w = A->out_w = mw;
    return DPFL_OK;
}

static dpfl_status add_item(builder *bd, const char *item);

static dpfl_status add_blocks(builder *bd, const char *tok)
{
    const char *p = tok + 5;
    long c = read_int(&p), s = 1, g = 0, n = 1;
    if (*p == 's') p++, s = read_int(&p);
    if (*p == 'g') p++, g = read_int(&p);
    if (*p == '*') p++, n = read_int(&p);
    if (*p || c < 1 || s < 1 || g < 0 || n < 1 || n > 64)
        return bad_token(bd, tok, "expected block<C>[s<stride>][g<groups>][*<count>]");
    if (!g) g = c < 32 ? c : 32;
    for (long i = 0; i < n; i++) {
        char items[8][64]; /* room for two longs in any item: -Wformat-truncation at every -O level */
        long st = i ? 1 : s;
        int proj = st != 1 || c != bd->c;
        snprintf(items[0], sizeof items[0], "(conv%ldk3s%ldp1nb", c, st);
        snprintf(items[1], sizeof items[1], "gn%ld", g);
        snprintf(items[2], sizeof items[2], "relu");
        snprintf(items[3], sizeof items[3], "conv%ldk3p1nb", c);
        if (proj) snprintf(items[4], sizeof items[4], "gn%ld)+pg%ld", g, g);
        else snprintf(items[4], sizeof items[4], "gn%ld)+", g);
        snprintf(items[5], sizeof items[5], "relu");
        for (int j = 0; j < 6; j++) {
            dpfl_status e = add_item(bd, items[j]);
            if (e) return e;
        }
    }
    return DPFL_OK;
}

/* One comma-separated item of a layer list: a layer token, optionally opening a block with '(' or closing it
 * with ')+...', or a block<...> macro. */
static dpfl_status add_item(builder *bd, const char *item)
{
    char t[64];
    if (bd->m->loss == DPFL_LOSS_MSE) return bad_token(bd, item, "the loss (mse) must be the last item");
    if (!strcmp(item, "mse")) {
        if (bd->bstart >= 0) return bad_token(bd, item, "the loss (mse) cannot be inside a residual block");
        bd->m->loss = DPFL_LOSS_MSE;
        return DPFL_OK;
    }
    if (strlen(item) >= sizeof t) return bad_token(bd, item, "token too long");
    snprintf(t, sizeof t, "%s", item);
    char *body = t, *close = strchr(t, ')');
    dpfl_status st;
    if (*body == '(') {
        if ((st = open_block(bd, item))) return st;
        body++;
    }
    if (close) *close = '\0';
    if (!strncmp(body, "block", 5)) {
        if (body != t || close) return bad_token(bd, item, "block<C> is a whole residual block: no parentheses");
        return add_blocks(bd, body);
    }
    if (*body && (st = add_token(bd, body))) return st;
    if (!*body && !close) return bad_token(bd, item, "empty layer");
    return close ? close_block(bd, item, close + 1) : DPFL_OK;
}

/* Expands a model name into its layer list. */
static dpfl_status expand(const char *spec, int in_dim, int classes, char *out, size_t cap, dpfl_error *err);

/* "transform:SPEC" or "transform-<a><b>[-<fn>]:SPEC": the input transform (then sigmoid, tanh or relu of it, the
 * ablation of PrivateFL's Table 1), then SPEC's layers */
static dpfl_status expand_transform(const char *spec, int in_dim, int classes, char *out, size_t cap, dpfl_error *err)
{
    const char *mode = spec[9] == '-' ? spec + 10 : "cp", *rest = strchr(spec, ':');
    const char *fn = "";
    if (rest && spec[9] == '-' && rest - mode > 3 && mode[2] == '-') {
        fn = mode[3] == 's' ? ",sigmoid" : mode[3] == 't' ? ",tanh" : ",relu";
        if (strncmp(mode + 3, fn + 1, (size_t)(rest - mode - 3)) || (size_t)(rest - mode - 3) != strlen(fn + 1)) fn = NULL;
    } else if (rest && spec[9] == '-' && rest - mode != 2) {
        fn = NULL;
    }
    if (!rest || !fn)
        return dpfl_fail(err, DPFL_EINVAL, "bad transform prefix in model spec (%s): expected transform:SPEC or "
                                           "transform-<a><b>[-sigmoid|-tanh|-relu]:SPEC", spec);
    int len = snprintf(out, cap, "affine%.2s%s,", mode, fn);
    if (len < 0 || (size_t)len >= cap) return dpfl_fail(err, DPFL_EINVAL, "model spec too long (%s)", spec);
    return expand(rest + 1, in_dim, classes, out + len, cap - (size_t)len, err);
}

/* "mlp:IN-H1-...-OUT[:nobias]": fully connected layers with ReLUs between them */
static dpfl_status expand_mlp(const char *spec, int in_dim, char *out, size_t cap, dpfl_error *err)
{
    const char *p = spec + 4;
    const char *suffix = strchr(p, ':');
    int nobias = 0;
    if (suffix) {
        if (strcmp(suffix, ":nobias"))
            return dpfl_fail(err, DPFL_EINVAL, "bad mlp suffix '%s' in model spec (%s): only :nobias", suffix,
                             spec);
        nobias = 1;
    }
    long sizes[MAX_LAYERS];
    int n = 0;
    for (;;) {
        long v = read_int(&p);
        if (v < 1 || n == MAX_LAYERS)
            return dpfl_fail(err, DPFL_EINVAL, "bad mlp sizes in model spec (%s): expected mlp:IN-H1-...-OUT", spec);
        sizes[n++] = v;
        if (*p == '-') {
            p++;
            continue;
        }
        if (*p && *p != ':')
            return dpfl_fail(err, DPFL_EINVAL, "bad mlp sizes in model spec (%s): expected mlp:IN-H1-...-OUT", spec);
        break;
    }
    if (n < 2) return dpfl_fail(err, DPFL_EINVAL, "mlp needs at least input and output sizes (%s)", spec);
    if (sizes[0] != in_dim)
        return dpfl_fail(err, DPFL_EINVAL, "mlp input size %ld does not match the data (%s): inputs have %d features",
                         sizes[0], spec, in_dim);
    size_t len = 0;
    out[0] = 0;
    for (int i = 1; i < n && len < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, "%sfc%ld%s", i > 1 ? ",relu," : "", sizes[i],
                                nobias ? "nb" : "");
    if (len >= cap) return dpfl_fail(err, DPFL_EINVAL, "model spec too long (%s)", spec);
    return DPFL_OK;
}

static dpfl_status expand(const char *spec, int in_dim, int classes, char *out, size_t cap, dpfl_error *err)
{
    if (!strncmp(spec, "transform", 9) && (spec[9] == ':' || spec[9] == '-'))
        return expand_transform(spec, in_dim, classes, out, cap, err);
    if (!strncmp(spec, "mse:", 4)) { /* SPEC's layers, then the loss item */
        dpfl_status st = expand(spec + 4, in_dim, classes, out, cap, err);
        size_t len = strlen(out);
        if (!st && len + 5 > cap) st = dpfl_fail(err, DPFL_EINVAL, "model spec too long (%s)", spec);
        if (!st) memcpy(out + len, ",mse", 5);
        return st;
    }
    if (!strcmp(spec, "logreg")) {
        snprintf(out, cap, "fc%d", classes == 2 ? 1 : classes);
    } else if (!strcmp(spec, "cnn-mnist")) {
        snprintf(out, cap, "conv32k3,relu,conv64k3,relu,pool2,drop0.25,flatten,fc128,relu,drop0.5,fc%d", classes);
    } else if (!strcmp(spec, "cnn-mcmahan")) {
        snprintf(out, cap, "conv32k5p2,relu,pool2,conv64k5p2,relu,pool2,flatten,fc512,relu,fc%d", classes);
    } else if (!strcmp(spec, "cnn-tf-cifar")) {
        snprintf(out, cap, "conv32k3,relu,pool2,conv64k3,relu,pool2,conv64k3,relu,flatten,fc64,relu,fc%d", classes);
    } else if (!strcmp(spec, "resnet20-gn")) {
        snprintf(out, cap, "conv16k3p1nb,gn16,relu,block16*3,block32s2*3,block64s2*3,gap,fc%d", classes);
    } else if (!strcmp(spec, "resnet18-gn")) {
        /* torchvision's resnet18 (He et al. 2016, table 1: 7x7/2 stem, 3x3/2 max pool, 2 basic blocks per stage),
         * as rPDP-FL trains it on CIFAR-10 (11,181,642 parameters for 10 classes); GroupNorm replaces BatchNorm
         * with the same per-channel scale and shift, so the count is unchanged */
        snprintf(out, cap, "conv64k7s2p3nb,gn32,relu,pool3s2p1,block64*2,block128s2*2,block256s2*2,block512s2*2,gap,"
                           "fc%d", classes);
    } else if (!strcmp(spec, "privatefl-dnn")) { /* PrivateFL's mnist_fully_connected (MNIST, FMNIST, EMNIST) */
        snprintf(out, cap, "fc600nb,relu,fc100nb,relu,fc%dnb", classes);
    } else if (!strcmp(spec, "privatefl-purchase")) { /* PrivateFL's purchase_fully_connected */
        snprintf(out, cap, "fc512nb,tanh,fc256nb,tanh,fc128nb,tanh,fc%dnb", classes);
    } else if (!strcmp(spec, "cnn-small")) {
        snprintf(out, cap, "conv16k8s2p3,tanh,pool2s1,conv32k4s2,tanh,pool2s1,flatten,fc32,tanh,fc%d", classes);
    } else if (!strncmp(spec, "net:", 4)) {
        snprintf(out, cap, "%s", spec + 4);
    } else if (!strncmp(spec, "mlp:", 4)) {
        return expand_mlp(spec, in_dim, out, cap, err);
    } else {
        return dpfl_fail(err, DPFL_EINVAL, "unknown model '%s': " VALID_MODELS, spec);
    }
    return DPFL_OK;
}

dpfl_status dpfl_model_create(const char *spec, int32_t in_c, int32_t in_h, int32_t in_w, int32_t classes,
                              dpfl_model *m, dpfl_error *err)
{
    memset(m, 0, sizeof *m);
    if (!spec || strlen(spec) >= sizeof m->spec)
        return dpfl_fail(err, DPFL_EINVAL, "model spec missing or longer than %zu characters", sizeof m->spec - 1);
    if (in_c < 1 || in_h < 1 || in_w < 1 || (int64_t)in_c * in_h * in_w > (1 << 26))
        return dpfl_fail(err, DPFL_EINVAL, "bad input shape %dx%dx%d for model (%s)", in_c, in_h, in_w, spec);
    if (classes < 2) return dpfl_fail(err, DPFL_EINVAL, "model (%s) needs at least 2 classes, got %d", spec, classes);
    char list[2048];
    dpfl_status st = expand(spec, in_c * in_h * in_w, classes, list, sizeof list, err);
    if (st) return st;
    m->layers = dpfl_calloc(MAX_LAYERS, sizeof *m->layers, err);
    if (!m->layers) return DPFL_ENOMEM;
    snprintf(m->spec, sizeof m->spec, "%s", spec);
    m->in_c = in_c, m->in_h = in_h, m->in_w = in_w, m->in_dim = in_c * in_h * in_w;
    builder bd = {m, in_c, in_h, in_w, 0, spec, err, -1, 0, 0, 0, 0};
    char *save = NULL;
    for (char *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        st = add_item(&bd, tok);
        if (st) goto fail;
    }
    if (bd.bstart >= 0) {
        st = dpfl_fail(err, DPFL_EINVAL, "model spec (%s): a residual block opened with '(' is not closed", spec);
        goto fail;
    }
    if (m->nlayers == 0) {
        st = dpfl_fail(err, DPFL_EINVAL, "model spec (%s) has no layers", spec);
        goto fail;
    }
    int out = bd.c * bd.h * bd.w;
    if (bd.cnhw || !(out == classes || (classes == 2 && out == 1))) {
        st = dpfl_fail(err, DPFL_EINVAL, "model (%s) ends with %d outputs per example: need %d logits (or 1 for 2 classes)",
                       spec, out, classes);
        goto fail;
    }
    m->out_dim = out;
    return DPFL_OK;
fail:
    dpfl_model_free(m);
    return st;
}

void dpfl_model_free(dpfl_model *m)
{
    if (!m) return;
    dpfl_free(m->layers);
    m->layers = NULL;
    m->nlayers = 0;
}

/* PyTorch's default: kaiming_uniform(a = sqrt(5)) reduces to U(+-1/sqrt(fan_in)) for weights, and the bias
 * uses the same bound. */
void dpfl_model_init(const dpfl_model *m, float *params, dpfl_rng *rng)
{
    for (int l = 0; l < m->nlayers; l++) {
        const dpfl_layer *L = &m->layers[l];
        if (!L->nparam) continue;
        const dpfl_layer_ops *ops = dpfl_nn_layer_ops(L->kind);
        if (ops->init) { /* the kind's own (affine: the identity; GroupNorm: gamma = 1, beta = 0) */
            ops->init(L, params + L->param_off, rng);
            continue;
        }
        size_t fan_in = L->kind == DPFL_LAYER_CONV2D ? (size_t)L->in_c * L->k * L->k : (size_t)L->in_w;
        double bound = 1.0 / sqrt((double)fan_in);
        float *p = params + L->param_off;
        for (size_t i = 0; i < L->nparam; i++) p[i] = (float)((2.0 * dpfl_rng_uniform(rng) - 1.0) * bound);
    }
}

void dpfl_nn_affine_init(const dpfl_layer *L, float *p, dpfl_rng *rng)
{
    (void)rng;
    dpfl_model_affine_identity(L, p);
}

void dpfl_model_affine_identity(const dpfl_layer *L, float *p)
{
    const size_t per[3] = {0, (size_t)L->in_c, (size_t)L->in_c * L->in_h * L->in_w};
    for (size_t i = 0; i < L->nparam; i++) p[i] = i < per[L->k] ? 1.0f : 0.0f;
}
