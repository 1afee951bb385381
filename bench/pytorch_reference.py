#!/usr/bin/env python3
"""Same-machine reference for `make bench`: PyTorch training throughput for the models bench_nn measures.

Optional (PyTorch is not a dpfl dependency): `apt-get install python3-torch libopenblas0-openmp
libtcmalloc-minimal4` (Debian 12: PyTorch 1.13, the build the issues' reference figures name), then
  bench/compare_pytorch.sh BUILD [N]     (alternating runs; or DPFL_BENCH_PYTORCH=1 make bench)
which run  python3 bench/pytorch_reference.py [SECONDS] [DPFL_RESULTS or -] [OUT_JSON]  as a PyTorch user runs it
(bench/torch_env.sh): on the OpenMP build of OpenBLAS (LD_LIBRARY_PATH, this process only; dpfl keeps its own),
on every core (torch.set_num_threads(os.cpu_count()), no OpenBLAS thread limit), with tcmalloc preloaded.  An
earlier version of this file held OpenBLAS to one thread on its pthread build, which halved PyTorch here: its
figures are withdrawn.  The BLAS library PyTorch actually loaded is printed and saved with the results.  A
nonprivate row is one SGD step per batch (forward, cross-entropy, backward, update) on random MNIST-shaped data,
warm-up first, best of three timed windows.
Opacus is not packaged in Debian.  For the MLP the `dpsgd` row runs the algorithm of Opacus's fastest mode, ghost
clipping, written here in plain PyTorch: forward and backward hooks record each Linear layer's input a_i and output
gradient g_i, the per-example norm is sqrt(sum over layers of |a_i|^2 |g_i|^2 + |g_i|^2) without materializing a
per-example gradient, and a second backward pass of the loss reweighted by min(1, C / norm) gives the clipped sum;
then Gaussian noise (z = 1, C = 1, torch.normal: not a CSPRNG) and the SGD step, as bench_nn's dpsgd rows.  It is
this file's implementation, not Opacus itself.  For cnn-mnist the `dpsgd` row is Opacus's default mode instead,
per-example gradients materialized from hooked inputs (unfolded for convolutions) and output gradients (ghost
norms of a convolution need T x T Gram matrices per example), then clipping, the clipped sum, noise and the step.
The models match dpfl's specs: mlp:784-512-256-10 and cnn-mnist (conv 3x3 32, ReLU, conv 3x3 64, ReLU,
maxpool 2, dropout 0.25, fc 128, ReLU, dropout 0.5, fc 10).  With a dpfl results file (bench/results.json) it also
prints dpfl / PyTorch for every row both have."""
import json
import os
import sys
import time

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                         nn.Linear(256, 10))


def cnn_mnist():
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Dropout(0.25), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(), nn.Dropout(0.5),
                         nn.Linear(128, 10))


def nonprivate_step(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    return step


def ghost_dpsgd_step(model, clip=1.0, z=1.0, lr=0.01):
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    acts, grads = {}, {}
    for m in linears:
        m.register_forward_hook(lambda mod, inp, out: acts.__setitem__(mod, inp[0].detach()))
        m.register_full_backward_hook(lambda mod, gin, gout: grads.__setitem__(mod, gout[0].detach()))
    params = [p for p in model.parameters()]

    def step(xb, yb):
        for p in params:
            p.grad = None
        losses = F.cross_entropy(model(xb), yb, reduction="none")
        losses.sum().backward(retain_graph=True)
        sq = torch.zeros(xb.shape[0])
        for m in linears:
            g2 = grads[m].pow(2).sum(dim=1)
            sq += acts[m].pow(2).sum(dim=1) * g2 + (g2 if m.bias is not None else 0)
        scale = (clip / (sq.sqrt() + 1e-6)).clamp(max=1.0)
        for p in params:
            p.grad = None
        (losses * scale).sum().backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad + torch.normal(0.0, z * clip, size=p.shape), alpha=lr / xb.shape[0])
    return step


def hooks_dpsgd_step(model, clip=1.0, z=1.0, lr=0.01):
    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d))]
    acts, grads = {}, {}
    for m in layers:
        m.register_forward_hook(lambda mod, inp, out: acts.__setitem__(mod, inp[0].detach()))
        m.register_full_backward_hook(lambda mod, gin, gout: grads.__setitem__(mod, gout[0].detach()))
    params = [p for p in model.parameters()]

    def per_example(m):
        """(weight, bias) gradients of every example, materialized as Opacus's hooks do"""
        a, g = acts[m], grads[m]
        b = a.shape[0]
        if isinstance(m, nn.Linear):
            return torch.einsum("bo,bi->boi", g, a), g
        cols = F.unfold(a, m.kernel_size, padding=m.padding, stride=m.stride)  # (b, C k k, T)
        g = g.reshape(b, g.shape[1], -1)
        return torch.einsum("bot,bkt->bok", g, cols).reshape((b,) + m.weight.shape), g.sum(dim=2)

    def step(xb, yb):
        for p in params:
            p.grad = None
        F.cross_entropy(model(xb), yb, reduction="sum").backward()
        with torch.no_grad():
            ps = [per_example(m) for m in layers]
            sq = sum(w.pow(2).flatten(1).sum(1) + bias.pow(2).sum(1) for w, bias in ps)
            scale = (clip / (sq.sqrt() + 1e-6)).clamp(max=1.0)
            for m, (w, bias) in zip(layers, ps):
                for p, gs in ((m.weight, w), (m.bias, bias)):
                    s = torch.einsum("b,b...->...", scale, gs) + torch.normal(0.0, z * clip, size=p.shape)
                    p.sub_(s, alpha=lr / xb.shape[0])
    return step


def throughput(make, batch, seconds, dp=False):
    torch.manual_seed(1)
    model = make()
    x = torch.rand(2048, 1, 28, 28)
    y = torch.randint(0, 10, (2048,))
    run = (ghost_dpsgd_step(model) if make is mlp else hooks_dpsgd_step(model)) if dp else nonprivate_step(model)
    it = 0

    def step():
        nonlocal it
        off = (it * batch) % (2048 - batch)
        it += 1
        run(x[off:off + batch], y[off:off + batch])

    for _ in range(5):
        step()
    best = 0.0
    for _ in range(3):
        n, t0 = 0, time.perf_counter()
        while n < 5 or time.perf_counter() - t0 < seconds:
            step()
            n += 1
        best = max(best, n * batch / (time.perf_counter() - t0))
    return best


def loaded_blas():
    """The BLAS shared objects this process mapped (after torch has run a GEMM)."""
    torch.mm(torch.rand(64, 64), torch.rand(64, 64))
    with open("/proc/self/maps") as f:
        libs = {line.split()[-1] for line in f if "blas" in line.split()[-1].lower()}
    return sorted(libs)


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    dpfl = {}
    if len(sys.argv) > 2 and sys.argv[2] != "-":
        with open(sys.argv[2]) as f:
            for r in json.load(f):
                if "model" in r:
                    dpfl[(r["model"], r["batch"], r["mode"])] = r["examples_per_second"]
    rows = []
    torch.set_num_threads(os.cpu_count())
    blas = loaded_blas()
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads (same-machine reference), BLAS: "
          f"{', '.join(blas) or 'none mapped'}")
    if not any("openmp" in b for b in blas):
        print("warning: not the OpenMP OpenBLAS: this reference is slower than PyTorch users see", file=sys.stderr)
    print(f"{'model':<20} {'batch':>6} {'mode':<11} {'examples/s':>12} {'dpfl/PyTorch':>13}")
    for name, make in (("mlp:784-512-256-10", mlp), ("cnn-mnist", cnn_mnist)):
        for batch in (16, 64):
            for mode in ("nonprivate", "dpsgd"):
                eps = throughput(make, batch, seconds, mode == "dpsgd")
                ours = dpfl.get((name, batch, mode))
                ratio = f"{ours / eps:13.2f}" if ours else f"{'-':>13}"
                print(f"{name:<20} {batch:>6} {mode:<11} {eps:>12.0f} {ratio}", flush=True)
                rows.append({"model": name, "batch": batch, "mode": mode, "examples_per_second": round(eps, 1),
                             "torch": torch.__version__, "threads": torch.get_num_threads(), "blas": blas})
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
