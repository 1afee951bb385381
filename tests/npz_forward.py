"""Reads a `dpfl export` archive with numpy alone and runs the model on MNIST's test set (tests/model.sh).

usage: npz_forward.py MODEL.npz MNIST_DIR
Checks that numpy.load reads every array with the shape its name implies, rebuilds the forward pass from the spec
(dpfl_spec: mlp:... or net:conv<OC>[k][s][p],relu,pool<k>,fc<OC>; inputs x / 255, data.normalize = none), and prints
"accuracy A loss L examples N" for tests/model.sh to compare with `dpfl eval`.
"""
import gzip
import re
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


def layers(spec, c, h, w):
    """dpfl's layer list of spec on c x h x w input (as src/nn/model.c builds it): (kind, args) per layer index."""
    if spec.startswith("mlp:"):
        sizes = [int(s) for s in spec[4:].split("-")]
        toks = []
        for i, s in enumerate(sizes[1:]):
            toks += ["fc%d" % s] + (["relu"] if i + 2 < len(sizes) else [])
    elif spec.startswith("net:"):
        toks = spec[4:].split(",")
    else:
        raise SystemExit("npz_forward.py: spec %r not handled by this test" % spec)
    out, spatial = [], True
    for t in toks:
        m = re.fullmatch(r"conv(\d+)(?:k(\d+))?(?:s(\d+))?(?:p(\d+))?", t)
        if m:
            k, s, p = int(m.group(2) or 3), int(m.group(3) or 1), int(m.group(4) or 0)
            out.append(("conv", k, s, p))
            continue
        m = re.fullmatch(r"pool(\d+)(?:s(\d+))?", t)
        if m:
            out.append(("pool", int(m.group(1)), int(m.group(2) or m.group(1))))
            continue
        if t.startswith("fc"):
            if spatial and (c * h > 1 or any(L[0] in ("conv", "pool") for L in out)):
                out.append(("flatten",))
            spatial = False
            out.append(("fc",))
            continue
        if t == "relu":
            out.append(("relu",))
            continue
        raise SystemExit("npz_forward.py: layer %r not handled by this test" % t)
    return out


def conv(x, wt, b, s, p):
    n, c, h, w = x.shape
    oc, _, k, _ = wt.shape
    x = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s][:, :, :oh, :ow]
    return np.einsum("nchwij,ocij->nohw", win, wt, optimize=True) + b[None, :, None, None]


def main():
    npz, mnist = sys.argv[1], sys.argv[2]
    z = np.load(npz)  # no allow_pickle: every member is a plain array
    spec = str(z["dpfl_spec"])
    c, h, w = (int(v) for v in z["dpfl_input_shape"])
    classes = int(z["dpfl_classes"])
    net = layers(spec, c, h, w)
    x = idx(mnist + "/t10k-images-idx3-ubyte").astype(np.float32).reshape(-1, c, h, w) / np.float32(255)
    y = idx(mnist + "/t10k-labels-idx1-ubyte").astype(np.int64)
    names = set(k for k in z.files if not k.startswith("dpfl_"))
    for i, L in enumerate(net):
        if L[0] in ("conv", "fc"):
            wt, b = z["%d.weight" % i], z["%d.bias" % i]
            assert wt.dtype == np.float32 and b.dtype == np.float32, (i, wt.dtype, b.dtype)
            assert b.shape == (wt.shape[0],), (i, b.shape, wt.shape)
            if L[0] == "conv":
                assert wt.ndim == 4 and wt.shape[1] == x.shape[1] and wt.shape[2:] == (L[1], L[1]), (i, wt.shape, x.shape)
                x = conv(x, wt, b, L[2], L[3])
            else:
                assert wt.shape == (wt.shape[0], x.shape[1]), (i, wt.shape, x.shape)
                x = x @ wt.T + b
            names -= {"%d.weight" % i, "%d.bias" % i}
        elif L[0] == "relu":
            x = np.maximum(x, 0)
        elif L[0] == "pool":
            k, s = L[1], L[2]
            win = np.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(2, 3))[:, :, ::s, ::s]
            x = win.max(axis=(4, 5))
        elif L[0] == "flatten":
            x = x.reshape(x.shape[0], -1)
    assert not names, "arrays the model does not use: %s" % sorted(names)
    assert x.shape == (len(y), classes), x.shape
    logits = x.astype(np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    loss = float(np.mean(np.log(np.exp(logits).sum(axis=1)) - logits[np.arange(len(y)), y]))
    acc = float(np.mean(logits.argmax(axis=1) == y))
    print("accuracy %.6f loss %.6f examples %d" % (acc, loss, len(y)))


main()
