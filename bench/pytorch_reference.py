#!/usr/bin/env python3
"""Same-machine reference for `make bench`: PyTorch training throughput for the models bench_nn measures.

Optional (PyTorch is not a dpfl dependency): `apt-get install python3-torch libopenblas0-openmp
libtcmalloc-minimal4` (Debian 12: PyTorch 1.13, the build the issues' reference figures name), then
  bench/compare_pytorch.sh BUILD [N]     (alternating runs; or DPFL_BENCH_PYTORCH=1 make bench)
which run  python3 bench/pytorch_reference.py [SECONDS] [DPFL_RESULTS or -] [OUT_JSON]  as a PyTorch user runs it
(bench/torch_env.sh): on the OpenMP build of OpenBLAS (LD_LIBRARY_PATH, this process only; dpfl keeps its own),
on every core (torch.set_num_threads(len(os.sched_getaffinity(0))), no OpenBLAS thread limit), with tcmalloc preloaded.  An
earlier version of this file held OpenBLAS to one thread on its pthread build, which halved PyTorch here: its
figures are withdrawn.  The BLAS library PyTorch actually loaded, and OPENBLAS_CORETYPE, are printed and saved with
the results (compare_pytorch.sh runs this file under every core type the CPU can run).  A nonprivate row is one
SGD step per batch (forward, cross-entropy, backward, update) on random data of the model's input shape, warm-up
first, best of DPFL_BENCH_WINDOWS (3) timed windows of SECONDS each (at least one step).
Opacus is not packaged in Debian; its two modes are written here in plain PyTorch, as this file's implementation,
not Opacus itself.  Both record each parameterised layer's input a and output gradient g with forward and
backward hooks.  Hooks mode (Opacus's default): every per-example gradient materialized (Linear g a^T; Conv2d from
the unfolded input; GroupNorm sum over positions of g * xhat and of g), clipped to C, summed.  Ghost clipping
(Opacus's fastest mode): the per-example norms without the per-example gradients where it can -- Linear
|a|^2 |g|^2 (+ |g|^2), Conv2d sum_{t,t'} (g_t . g_t')(a_t . a_t') over the T output positions when T^2 is below
the weight's size, else materialized, GroupNorm materialized (2C numbers) -- then a second backward pass of the
loss reweighted by min(1, C / norm) gives the clipped sum.  Then Gaussian noise (z = 1, C = 1, torch.normal: not
a CSPRNG) and the SGD step, as bench_nn's dpsgd rows.  The `dpsgd` row is ghost clipping for the MLP and hooks
for the CNNs; the CIFAR models also have a `dpsgd-ghost` row.  Both modes were checked against one-example
backward passes (squared norms equal to 3e-7 relative).
The models match dpfl's specs (src/nn/model.c); their parameter counts are printed and, given a bench_nn results
file with nparam, asserted equal: mlp:784-512-256-10; cnn-mnist (conv 3x3 32, ReLU, conv 3x3 64, ReLU,
maxpool 2, dropout 0.25, fc 128, ReLU, dropout 0.5, fc 10); cnn-tf-cifar (valid 3x3 convs 32, 64, 64 with ReLU,
2x2 max pools after the first two, fc 64, ReLU, fc 10: 122,570 parameters); resnet20-gn (bias-free conv 3x3 16,
GroupNorm(16), ReLU, then 3 x 3 basic blocks of 16, 32, 64 channels with GroupNorm(min(32, C)), the first of the
32 and 64 stages of stride 2 with a bias-free 1x1 projection + GroupNorm shortcut, global average pooling, fc 10:
272,474 parameters).  DPFL_BENCH_MODELS=a,b selects models.  With a dpfl results file (bench/results.json) it
also prints dpfl / PyTorch for every row both have."""
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


def cnn_tf_cifar():
    """dpfl's cnn-tf-cifar: conv32k3,relu,pool2,conv64k3,relu,pool2,conv64k3,relu,flatten,fc64,relu,fc10 (valid
    convolutions with bias, 2x2 max pools of stride 2: 32 -> 30 -> 15 -> 13 -> 6 -> 4, so fc64 reads 64 x 4 x 4)"""
    return nn.Sequential(nn.Conv2d(3, 32, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Conv2d(64, 64, 3), nn.ReLU(), nn.Flatten(), nn.Linear(1024, 64),
                         nn.ReLU(), nn.Linear(64, 10))


class BasicBlock(nn.Module):
    """dpfl's block<C>[s<s>]: (conv<C>k3s<s>p1nb,gn<G>,relu,conv<C>k3p1nb,gn<G>)+[pg<G>],relu with G = min(32, C);
    the shortcut is a bias-free 1x1 convolution of stride s then GroupNorm(G) where the shape changes"""

    def __init__(self, cin, c, stride):
        super().__init__()
        g = min(32, c)
        self.conv1 = nn.Conv2d(cin, c, 3, stride, 1, bias=False)
        self.gn1 = nn.GroupNorm(g, c)
        self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
        self.gn2 = nn.GroupNorm(g, c)
        self.short = None
        if stride != 1 or cin != c:
            self.short = nn.Sequential(nn.Conv2d(cin, c, 1, stride, 0, bias=False), nn.GroupNorm(g, c))

    def forward(self, x):
        out = self.gn2(self.conv2(F.relu(self.gn1(self.conv1(x)))))
        return F.relu(out + (self.short(x) if self.short is not None else x))


def resnet20_gn():
    """dpfl's resnet20-gn: conv16k3p1nb,gn16,relu,block16*3,block32s2*3,block64s2*3,gap,fc10"""
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.GroupNorm(16, 16), nn.ReLU()]
    cin = 16
    for c, s in ((16, 1), (32, 2), (64, 2)):
        for i in range(3):
            layers.append(BasicBlock(cin, c, s if i == 0 else 1))
            cin = c
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


# name -> (constructor, input shape, batches, DP-SGD modes); "dpsgd" is the mode dpfl's bench_nn also has
MODELS = (
    ("mlp:784-512-256-10", mlp, (1, 28, 28), (16, 64), {"dpsgd": "ghost"}),
    ("cnn-mnist", cnn_mnist, (1, 28, 28), (16, 64), {"dpsgd": "hooks"}),
    ("cnn-tf-cifar", cnn_tf_cifar, (3, 32, 32), (64,), {"dpsgd": "hooks", "dpsgd-ghost": "ghost"}),
    ("resnet20-gn", resnet20_gn, (3, 32, 32), (64,), {"dpsgd": "hooks", "dpsgd-ghost": "ghost"}),
)


def nonprivate_step(model):
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def step(xb, yb):
        opt.zero_grad(set_to_none=True)
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
    return step


def hook_layers(model):
    """The layers with parameters, each recording its input and output gradient as Opacus's hooks do."""
    layers = [m for m in model.modules() if isinstance(m, (nn.Linear, nn.Conv2d, nn.GroupNorm))]
    acts, grads = {}, {}
    for m in layers:
        m.register_forward_hook(lambda mod, inp, out: acts.__setitem__(mod, inp[0].detach()))
        m.register_full_backward_hook(lambda mod, gin, gout: grads.__setitem__(mod, gout[0].detach()))
    return layers, acts, grads


def unfold(m, a):
    return F.unfold(a, m.kernel_size, padding=m.padding, stride=m.stride)  # (b, C k k, T)


def per_example(m, a, g):
    """(weight, bias or None) gradients of every example, materialized as Opacus's hooks mode does"""
    b = a.shape[0]
    if isinstance(m, nn.Linear):
        return torch.einsum("bo,bi->boi", g, a), (g if m.bias is not None else None)
    if isinstance(m, nn.GroupNorm):
        xhat = F.group_norm(a, m.num_groups, eps=m.eps)
        return (xhat * g).flatten(2).sum(2), g.flatten(2).sum(2)
    g = g.reshape(b, g.shape[1], -1)
    w = torch.einsum("bot,bkt->bok", g, unfold(m, a)).reshape((b,) + m.weight.shape)
    return w, (g.sum(dim=2) if m.bias is not None else None)


def ghost_norm2(m, a, g):
    """An example's squared gradient norm for the layer without its per-example gradient where Opacus's ghost
    clipping avoids it: Linear |a|^2 |g|^2 (+ |g|^2), Conv2d sum_{t,t'} (g_t . g_t')(a_t . a_t') over the T output
    positions when T^2 is below the weight's size, else materialized; GroupNorm's 2C numbers materialized."""
    b = a.shape[0]
    if isinstance(m, nn.Linear):
        g2 = g.pow(2).sum(1)
        return a.pow(2).sum(1) * g2 + (g2 if m.bias is not None else 0)
    if isinstance(m, nn.Conv2d):
        gt = g.reshape(b, g.shape[1], -1)
        T = gt.shape[2]
        if T * T < m.weight.numel():
            cols = unfold(m, a)
            s = (torch.bmm(gt.transpose(1, 2), gt) * torch.bmm(cols.transpose(1, 2), cols)).sum((1, 2))
            return s + (gt.sum(2).pow(2).sum(1) if m.bias is not None else 0)
    w, bias = per_example(m, a, g)
    return w.pow(2).flatten(1).sum(1) + (bias.pow(2).sum(1) if bias is not None else 0)


def ghost_dpsgd_step(model, clip=1.0, z=1.0, lr=0.01):
    """Opacus's fastest mode, ghost clipping: per-example norms from the hooked inputs and output gradients, then a
    second backward pass of the loss reweighted by min(1, C / norm) gives the clipped sum; noise; the step."""
    layers, acts, grads = hook_layers(model)
    params = [p for p in model.parameters()]

    def step(xb, yb):
        for p in params:
            p.grad = None
        losses = F.cross_entropy(model(xb), yb, reduction="none")
        losses.sum().backward(retain_graph=True)
        with torch.no_grad():
            sq = sum(ghost_norm2(m, acts[m], grads[m]) for m in layers)
            scale = (clip / (sq.sqrt() + 1e-6)).clamp(max=1.0)
        for p in params:
            p.grad = None
        (losses * scale).sum().backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad + torch.normal(0.0, z * clip, size=p.shape), alpha=lr / xb.shape[0])
    return step


def hooks_dpsgd_step(model, clip=1.0, z=1.0, lr=0.01):
    """Opacus's default mode: every per-example gradient materialized, clipped, summed; noise; the step."""
    layers, acts, grads = hook_layers(model)
    params = [p for p in model.parameters()]

    def step(xb, yb):
        for p in params:
            p.grad = None
        F.cross_entropy(model(xb), yb, reduction="sum").backward()
        with torch.no_grad():
            ps = [per_example(m, acts[m], grads[m]) for m in layers]
            sq = sum(w.pow(2).flatten(1).sum(1) + (bias.pow(2).sum(1) if bias is not None else 0) for w, bias in ps)
            scale = (clip / (sq.sqrt() + 1e-6)).clamp(max=1.0)
            for m, (w, bias) in zip(layers, ps):
                for p, gs in ((m.weight, w), (m.bias, bias)):
                    if gs is None:
                        continue
                    s = torch.einsum("b,b...->...", scale, gs) + torch.normal(0.0, z * clip, size=p.shape)
                    p.sub_(s, alpha=lr / xb.shape[0])
    return step


def nparams(model):
    return sum(p.numel() for p in model.parameters())


def throughput(make, shape, batch, seconds, dp=None):
    torch.manual_seed(1)
    model = make()
    x = torch.rand((2048,) + shape)
    y = torch.randint(0, 10, (2048,))
    run = {"ghost": ghost_dpsgd_step, "hooks": hooks_dpsgd_step}[dp](model) if dp else nonprivate_step(model)
    it = 0

    def step():
        nonlocal it
        off = (it * batch) % (2048 - batch)
        it += 1
        run(x[off:off + batch], y[off:off + batch])

    for _ in range(2):  # warm-up
        step()
    best = 0.0
    for _ in range(int(os.environ.get("DPFL_BENCH_WINDOWS", "3"))):  # best of the windows
        n, t0 = 0, time.perf_counter()
        while n < 1 or time.perf_counter() - t0 < seconds:
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
    dpfl, dpfl_nparam = {}, {}
    if len(sys.argv) > 2 and sys.argv[2] != "-":
        with open(sys.argv[2]) as f:
            for r in json.load(f):
                if "model" in r:
                    dpfl[(r["model"], r["batch"], r["mode"])] = r["examples_per_second"]
                    if "nparam" in r:
                        dpfl_nparam[r["model"]] = r["nparam"]
    only = os.environ.get("DPFL_BENCH_MODELS")  # comma-separated subset
    coretype = os.environ.get("OPENBLAS_CORETYPE", "")
    rows = []
    torch.set_num_threads(len(os.sched_getaffinity(0)))
    blas = loaded_blas()
    print(f"PyTorch {torch.__version__}, {torch.get_num_threads()} threads (same-machine reference), BLAS: "
          f"{', '.join(blas) or 'none mapped'}, OPENBLAS_CORETYPE={coretype or '(unset)'}")
    if not any("openmp" in b for b in blas):
        print("warning: not the OpenMP OpenBLAS: this reference is slower than PyTorch users see", file=sys.stderr)
    for name, make, shape, _, _ in MODELS:
        if only and name not in only.split(","):
            continue
        n = nparams(make())
        ours = dpfl_nparam.get(name)
        print(f"{name}: PyTorch {n} parameters, dpfl {ours if ours is not None else '(not given)'}")
        assert ours is None or ours == n, f"{name}: the PyTorch model has {n} parameters, dpfl's {ours}"
    print(f"{'model':<20} {'batch':>6} {'mode':<11} {'examples/s':>12} {'dpfl/PyTorch':>13}")
    for name, make, shape, batches, dpmodes in MODELS:
        if only and name not in only.split(","):
            continue
        for batch in batches:
            for mode, dp in (("nonprivate", None),) + tuple(dpmodes.items()):
                eps = throughput(make, shape, batch, seconds, dp)
                ours = dpfl.get((name, batch, mode if mode == "nonprivate" else "dpsgd"))
                ratio = f"{ours / eps:13.2f}" if ours else f"{'-':>13}"
                print(f"{name:<20} {batch:>6} {mode:<11} {eps:>12.0f} {ratio}", flush=True)
                rows.append({"model": name, "batch": batch, "mode": mode, "dp": dp or "", "nparam": nparams(make()),
                             "examples_per_second": round(eps, 1), "torch": torch.__version__,
                             "threads": torch.get_num_threads(), "blas": blas, "coretype": coretype})
    if len(sys.argv) > 3:
        with open(sys.argv[3], "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
