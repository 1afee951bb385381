#!/usr/bin/python3
"""Independent cross-check of PriFedSync's first rounds (issue 11): the loop of the paper's published code
(github.com/enosair/federated-fdp, code/main.py, sync.py, data.py) re-written in plain PyTorch, because Opacus is not
packaged in Debian.  Per-example gradients by functorch (vmap over grad), clipped to C, Gaussian noise of std
noise * C on their sum, divided by the batch (Opacus 0.x with loss reduction "mean"); a persistent Adam per client;
each round every selected client trains one pass of K = ceil(600 / B) uniform batches of B drawn without
replacement, then global = mean of the selected local models and each selected local model moves to
(1 - alpha) local + alpha global.  Reported per round: the mean over clients of the freshly trained local model's
accuracy on its own test set (200 examples drawn with replacement from the test examples of its labels), which
is what the paper's tables report.

usage: /usr/bin/python3 bench/prifedsync_reference.py [ROUNDS] [NOISE] [P] [SEED] [TRAIN]
  NOISE is Opacus's noise_multiplier (the paper's sigma = NOISE / 2: replace-one sensitivity 2C); default 2.0.
  TRAIN (default 100): only the first TRAIN selected clients train and report -- with ROUNDS = 1 a quick check of
  the local phase alone (about 0.1-0.2 s per step here: 38 steps per client).
Compare with: ./build/dpfl train examples/prifedsync_mnist.ini (its diagnostics.jsonl local_accuracy_mean).
Not a benchmark of speed: it uses torch.normal (not a CSPRNG) and is slow on purpose-simple code."""
import gzip
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from functorch import grad, make_functional, vmap

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 4
NOISE = float(sys.argv[2]) if len(sys.argv) > 2 else 2.0
P_SYNC = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
SEED = int(sys.argv[4]) if len(sys.argv) > 4 else 1
TRAIN = int(sys.argv[5]) if len(sys.argv) > 5 else 100
CLIENTS, SHARDS, B, CLIP, LR, ALPHA, NTEST = 100, 400, 16, 1.0, 1e-3, 0.1, 200


def idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    nd = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(nd)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * nd).reshape(dims)


def load(root):
    tr_x = idx(os.path.join(root, "train-images-idx3-ubyte")).astype(np.float32) / 255.0
    tr_y = idx(os.path.join(root, "train-labels-idx1-ubyte")).astype(np.int64)
    te_x = idx(os.path.join(root, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0
    te_y = idx(os.path.join(root, "t10k-labels-idx1-ubyte")).astype(np.int64)
    norm = lambda x: (x - 0.1307) / 0.3081
    return norm(tr_x), tr_y, norm(te_x), te_y


class MnistCNN(nn.Module):  # code/nets.py of the reference; dropout masks passed in (vmap cannot draw them)
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x, m1=None, m2=None):
        x = F.relu(self.conv1(x.reshape(len(x), 1, 28, 28)))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        if m1 is not None:
            x = x * m1  # Dropout2d(0.25): whole channels
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        if m2 is not None:
            x = x * m2  # dropout 0.5
        return F.log_softmax(self.fc2(x), dim=1)


def main():
    torch.manual_seed(SEED)
    rng = np.random.default_rng(SEED)
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    root = os.environ.get("DPFL_MNIST", "data/cache/mnist")
    tr_x, tr_y, te_x, te_y = load(root)
    order = np.argsort(tr_y, kind="stable")
    tr_x, tr_y = tr_x[order], tr_y[order]
    shards = rng.permutation(SHARDS)
    size = len(tr_y) // SHARDS
    parts, tests = [], []
    for c in range(CLIENTS):
        ind = np.concatenate([np.arange(s * size, (s + 1) * size) for s in shards[4 * c:4 * c + 4]])
        parts.append((torch.from_numpy(tr_x[ind]), torch.from_numpy(tr_y[ind])))
        pool = np.where(np.isin(te_y, np.unique(tr_y[ind])))[0]
        t = pool[rng.integers(0, len(pool), NTEST)]
        tests.append((torch.from_numpy(te_x[t]), torch.from_numpy(te_y[t])))
    net = MnistCNN()
    fmodel, params0 = make_functional(net)
    glob = [p.detach().clone() for p in params0]
    local = [[p.clone() for p in glob] for _ in range(CLIENTS)]
    opt_state = [None] * CLIENTS  # Adam m, v, t per client (persistent, as the reference's optimizers)

    def loss1(params, x, y, m1, m2):
        return F.nll_loss(fmodel(params, x.unsqueeze(0), m1.unsqueeze(0), m2.unsqueeze(0)), y.unsqueeze(0))

    per_example = vmap(grad(loss1), in_dims=(None, 0, 0, 0, 0))
    steps = int(np.ceil(600 / B))
    for r in range(1, ROUNDS + 1):
        t0 = time.time()
        sel = np.where(rng.uniform(size=CLIENTS) <= P_SYNC)[0]
        while sel.size == 0:
            sel = np.where(rng.uniform(size=CLIENTS) <= P_SYNC)[0]
        accs = []
        sel = sel[:TRAIN]
        for c in sel:
            w = local[c]
            x, y = parts[c]
            if opt_state[c] is None:
                opt_state[c] = ([torch.zeros_like(p) for p in w], [torch.zeros_like(p) for p in w], 0)
            m, v, t = opt_state[c]
            for _ in range(steps):
                b = torch.randperm(len(y))[:B]
                m1 = (torch.rand(B, 64, 1, 1) >= 0.25).float() / 0.75
                m2 = (torch.rand(B, 128) >= 0.5).float() / 0.5
                g = per_example(w, x[b], y[b], m1, m2)
                norms = torch.sqrt(sum((gi.reshape(B, -1) ** 2).sum(1) for gi in g))
                factor = (CLIP / (norms + 1e-6)).clamp(max=1.0)
                t += 1
                new = []
                for p, gi, mi, vi in zip(w, g, m, v):
                    s = torch.einsum("b,b...->...", factor, gi)
                    s = (s + torch.normal(0.0, NOISE * CLIP, size=s.shape)) / B
                    mi.mul_(0.9).add_(s, alpha=0.1)
                    vi.mul_(0.999).addcmul_(s, s, value=0.001)
                    mh, vh = mi / (1 - 0.9 ** t), vi / (1 - 0.999 ** t)
                    new.append(p - LR * mh / (vh.sqrt() + 1e-8))
                w = new
            opt_state[c] = (m, v, t)
            local[c] = w
            with torch.no_grad():
                tx, ty = tests[c]
                pred = fmodel(w, tx).argmax(1)  # no masks: evaluation mode
            accs.append(float((pred == ty).float().mean()))
        mean = [sum(local[c][i] for c in sel) / len(sel) for i in range(len(glob))]
        glob = mean
        for c in sel:
            local[c] = [(1 - ALPHA) * lp + ALPHA * gp for lp, gp in zip(local[c], glob)]
        print(f"round {r}: local accuracy mean {np.mean(accs):.4f} (std {np.std(accs):.4f}) over {len(sel)} "
              f"clients, {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
