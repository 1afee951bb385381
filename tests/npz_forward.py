"""Reads a `dpfl export` archive with numpy alone and runs the model on a test set (tests/model.sh).

usage: npz_forward.py MODEL.npz DATA_DIR
DATA_DIR holds MNIST's t10k-images-idx3-ubyte and t10k-labels-idx1-ubyte, or CIFAR-10's test_batch.bin (binary
version: a label byte, then the red, green and blue 32 x 32 planes); inputs are pixels / 255, then standardized as the
archive's dpfl_input_mean / dpfl_input_std say when it has them.
Checks that numpy.load reads every array with the shape its layer implies, runs the model from the archive's graph
alone (dpfl_layers: one row per layer, columns named by dpfl_layer_columns, kinds by dpfl_layer_kinds -- residual
blocks, GroupNorm and average pooling included; no spec parsing), and prints "accuracy A loss L examples N" for
tests/model.sh to compare with `dpfl eval`.
"""
import gzip
import os
import sys

import numpy as np


def idx(path):
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    ndim = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(shape)


def test_set(folder):
    """(x as uint8 (N, ...), labels) of the test set in folder: CIFAR-10 binary or MNIST IDX"""
    cifar = os.path.join(folder, "test_batch.bin")
    if os.path.exists(cifar):
        rec = np.fromfile(cifar, dtype=np.uint8).reshape(-1, 1 + 3072)
        return rec[:, 1:].reshape(-1, 3, 32, 32), rec[:, 0].astype(np.int64)
    return idx(folder + "/t10k-images-idx3-ubyte"), idx(folder + "/t10k-labels-idx1-ubyte").astype(np.int64)


def conv(x, wt, b, s, p):
    n, c, h, w = x.shape
    oc, _, k, _ = wt.shape
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s][:, :, :oh, :ow]
    out = np.einsum("nchwij,ocij->nohw", win, wt, optimize=True)
    return out + b[None, :, None, None] if b is not None else out


def pool(x, k, s, p, oh, ow, reduce, fill):
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s][:, :, :oh, :ow]
    return reduce(win, axis=(4, 5))


def group_norm(x, groups, gamma, beta):
    """per example: each group of C / groups channels standardized (biased variance, eps 1e-5), then gamma, beta"""
    n, c = x.shape[:2]
    g = x.astype(np.float64).reshape(n, groups, -1)
    g = (g - g.mean(axis=2, keepdims=True)) / np.sqrt(g.var(axis=2, keepdims=True) + 1e-5)
    g = g.reshape(x.shape).astype(np.float32)
    return g * gamma.reshape((1, c) + (1,) * (x.ndim - 2)) + beta.reshape((1, c) + (1,) * (x.ndim - 2))


def main():
    npz, folder = sys.argv[1], sys.argv[2]
    z = np.load(npz)  # no allow_pickle: every member is a plain array
    c, h, w = (int(v) for v in z["dpfl_input_shape"])
    classes = int(z["dpfl_classes"])
    cols = str(z["dpfl_layer_columns"]).split(",")
    kinds = str(z["dpfl_layer_kinds"]).split(",")
    table = z["dpfl_layers"]
    assert table.dtype == np.int32 and table.shape == (table.shape[0], len(cols)), (table.dtype, table.shape)
    net = [dict(zip(cols, (int(v) for v in row)), kind=kinds[row[0]]) for row in table]
    images, y = test_set(folder)
    x = images.astype(np.float32).reshape(-1, c, h, w) / np.float32(255)
    if "dpfl_input_mean" in z.files:  # the standardization in training: one pair, per channel or per value
        mean, std = z["dpfl_input_mean"], z["dpfl_input_std"]
        assert mean.dtype == std.dtype == np.float64 and mean.shape == std.shape, (mean.dtype, mean.shape, std.shape)
        n = mean.shape[0]
        shape = (1, 1, 1, 1) if n == 1 else (1, c, 1, 1) if n == c else (1, c, h, w)
        assert n in (1, c, c * h * w), n
        x = ((x.astype(np.float64) - mean.reshape(shape)) / std.reshape(shape)).astype(np.float32)
    names = set(k for k in z.files if not k.startswith("dpfl_"))

    def param(name, shape):
        a = z[name]
        assert a.dtype == np.float32 and a.shape == shape, (name, a.dtype, a.shape, shape)
        names.discard(name)
        return a

    inputs, outputs = [], []
    for i, L in enumerate(net):
        if L["from"] and L["kind"] != "add":  # a projection shortcut reads the residual block's input
            x = inputs[L["from"] - 1]
        inputs.append(x)
        kind, oshape = L["kind"], (L["out_c"], L["out_h"], L["out_w"])
        if kind == "conv2d":
            wt = param("%d.weight" % i, (L["out_c"], L["in_c"], L["k"], L["k"]))
            b = param("%d.bias" % i, (L["out_c"],)) if L["bias"] else None
            x = conv(x, wt, b, L["stride"], L["pad"])
        elif kind == "linear":
            x = x.reshape(x.shape[0], -1)
            wt = param("%d.weight" % i, (L["out_w"], x.shape[1]))
            x = x @ wt.T
            if L["bias"]:
                x = x + param("%d.bias" % i, (L["out_w"],))
        elif kind == "maxpool2d":
            x = pool(x, L["k"], L["stride"], L["pad"], L["out_h"], L["out_w"], np.max, -np.inf)
        elif kind == "avgpool2d":
            x = x.mean(axis=(2, 3), keepdims=True) if L["k"] == 0 else \
                pool(x, L["k"], L["stride"], 0, L["out_h"], L["out_w"], np.mean, 0)
        elif kind == "groupnorm":
            x = group_norm(x, L["groups"], param("%d.weight" % i, (L["in_c"],)), param("%d.bias" % i, (L["in_c"],)))
        elif kind == "add":
            main_out = outputs[i - 1 - L["shortcut"]]
            x = main_out + (x if L["shortcut"] else inputs[L["from"] - 1])
        elif kind == "relu":
            x = np.maximum(x, 0)
        elif kind == "tanh":
            x = np.tanh(x)
        elif kind == "sigmoid":
            x = 1 / (1 + np.exp(-x))
        elif kind == "flatten":
            x = x.reshape(x.shape[0], -1)
        elif kind == "affine":  # a (.) x + b: a, b of shape (C,) (per channel) or (C, H, W) (per pixel), or absent
            for what, mode in (("scale", L["k"]), ("shift", L["pad"])):
                if mode:
                    shape = (L["in_c"],) if mode == 1 else (L["in_c"], L["in_h"], L["in_w"])
                    a = param("%d.%s" % (i, what), shape).reshape((1,) + shape + (1, 1)[:3 - len(shape)])
                    x = x * a if what == "scale" else x + a
        elif kind != "dropout":
            raise SystemExit("npz_forward.py: layer kind %r not handled by this test" % kind)
        assert x[0].size == L["out_c"] * L["out_h"] * L["out_w"], (i, kind, x.shape, oshape)
        outputs.append(x)
    assert not names, "arrays the model does not use: %s" % sorted(names)
    assert x.shape == (len(y), classes), x.shape
    logits = x.astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    loss = float(np.mean(np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(len(y)), y]))
    acc = float(np.mean(logits.argmax(axis=1) == y))
    print("accuracy %.6f loss %.6f examples %d" % (acc, loss, len(y)))


main()
