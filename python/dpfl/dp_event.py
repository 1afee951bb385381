"""Privacy events as Google dp_accounting writes them (its DpEvent classes), and accountants as Opacus users call
them, over libdpfl.  Python only builds the tree: the library normalizes it (dpfl_event_tree_parse, the nodes of
docs/privacy.md "The tree"), refuses a shape it cannot account (a sampled composition, say) with the node's path,
and computes every number.

    import dpfl
    step = dpfl.PoissonSampled(0.01, dpfl.Gaussian(1.1))          # dp_accounting: PoissonSampledDpEvent(...)
    run = dpfl.SelfComposed(step, 10_000)                          # SelfComposedDpEvent(step, 10_000)
    run.epsilon(1e-5, "pld").epsilon

    acc = dpfl.RdpAccountant()                                     # dp_accounting: RdpAccountant()
    acc.compose(step, 10_000).get_epsilon(1e-5)

    acc = dpfl.Accountant("rdp")                                   # Opacus: RDPAccountant()
    acc.step(noise_multiplier=1.1, sample_rate=0.01)
    acc.get_epsilon(delta=1e-5)

    dpfl.get_noise_multiplier(target_epsilon=3, target_delta=1e-5, sample_rate=0.01, epochs=10)   # Opacus's
"""

import ctypes
import json
import math

from . import _lib
from ._lib import lib
from .accountant import (EINVAL, DpflIOError, DpflValueError, Event, _libc_free, _raise_if, account_delta,
                         account_epsilon, calibrate_noise, event_poisson)


class DpEvent:
    """A node of the event tree; `tree()` is its JSON form (a dict with one key, its kind)."""

    def tree(self):
        raise NotImplementedError

    def events(self):
        """The flat composition the accountants take (a list of dpfl.Event), normalized by the library."""
        return tree_events(self.tree())

    def epsilon(self, delta, accountant="rdp", **opts):
        """epsilon at delta (dpfl.account_epsilon of the normalized events): a Guarantee."""
        return account_epsilon(self.events(), delta, accountant, **opts)

    def delta(self, epsilon, accountant="rdp", **opts):
        return account_delta(self.events(), epsilon, accountant, **opts)

    def __eq__(self, other):
        return isinstance(other, DpEvent) and self.tree() == other.tree()

    __hash__ = None

    def __repr__(self):
        return "dpfl.%s(%s)" % (type(self).__name__, json.dumps(self.tree()))


def _bound(g, what):
    """The number of a Guarantee, refused when it is an asymptotic (CLT) value: these conveniences return a bare
    float, which would drop the label (account_epsilon's Guarantee keeps it)."""
    if g.asymptotic:
        raise DpflValueError(EINVAL, "%s: the %s accountant's answer here is asymptotic (CLT), not a bound; use "
                                     "rdp or pld, or dpfl.account_epsilon for the labelled value" % (what, g.answered))
    return g


def tree_events(tree):
    """The flat composition of a tree given as a dict (or a DpEvent), normalized by dpfl_event_tree_parse."""
    if isinstance(tree, DpEvent):
        tree = tree.tree()
    ev, n, err = ctypes.POINTER(Event)(), _lib.c_size(), _lib.Error()
    st = lib.dpfl_event_tree_parse(json.dumps(tree).encode(), b"event", ctypes.byref(ev), ctypes.byref(n),
                                   ctypes.byref(err))
    try:
        _raise_if(st, err)
    except DpflIOError as e:  # a tree built here that the library refuses is a bad argument, not a bad file
        raise DpflValueError(EINVAL, e.message) from None
    try:
        return [Event.from_buffer_copy(ev[i]) for i in range(n.value)]
    finally:
        _libc_free(ev)


def _leaf(kind, body, adjacency):
    if adjacency is not None:
        body["adjacency"] = adjacency
    return {kind: body}


def _node(event):
    if not isinstance(event, DpEvent):
        raise TypeError("expected a dpfl.DpEvent (Gaussian, PoissonSampled, ...), got %s" % type(event).__name__)
    return event.tree()


class Gaussian(DpEvent):
    """The Gaussian mechanism: noise std noise_multiplier x the sensitivity (GaussianDpEvent)."""

    def __init__(self, noise_multiplier, adjacency=None):
        self.noise_multiplier, self.adjacency = float(noise_multiplier), adjacency

    def tree(self):
        return _leaf("gaussian", {"z": self.noise_multiplier}, self.adjacency)


class Skellam(DpEvent):
    """A Skellam-noised integer sum (distributed DP): a unit moves it by L1 <= l1, L2 <= l2 grid units, noise std
    noise_multiplier x l2; zero-out."""

    def __init__(self, l1, l2, noise_multiplier):
        self.l1, self.l2, self.noise_multiplier = float(l1), float(l2), float(noise_multiplier)

    def tree(self):
        return {"skellam": {"l1": self.l1, "l2": self.l2, "z": self.noise_multiplier}}


class NonPrivate(DpEvent):
    """A release with no guarantee (NonPrivateDpEvent): every accountant raises NotPrivateError."""

    def tree(self):
        return {"not_private": {}}


class RdpFilter(DpEvent):
    """An individual Renyi filter's statement: (alpha, cap)-RDP; RDP answers it, PLD and GDP refuse it."""

    def __init__(self, alpha, cap):
        self.alpha, self.cap = float(alpha), float(cap)

    def tree(self):
        return {"rdp_filter": {"alpha": self.alpha, "cap": self.cap}}


class PoissonSampled(DpEvent):
    """Each unit in independently with probability sampling_probability, then `event` (PoissonSampledDpEvent)."""

    def __init__(self, sampling_probability, event):
        self.sampling_probability, self.event = float(sampling_probability), event

    def tree(self):
        return {"poisson_sampled": {"q": self.sampling_probability, "event": _node(self.event)}}


class SampledWithoutReplacement(DpEvent):
    """A batch of exactly sample_size of source_dataset_size, then `event`; replace-one
    (SampledWithoutReplacementDpEvent)."""

    def __init__(self, source_dataset_size, sample_size, event):
        self.source_dataset_size, self.sample_size, self.event = int(source_dataset_size), int(sample_size), event

    def tree(self):
        return {"sampled_without_replacement": {"n": self.source_dataset_size, "batch": self.sample_size,
                                                "event": _node(self.event)}}


class TwoStage(DpEvent):
    """rPDP-FL's round: the client takes part with probability `participation` (visibly), then `local_steps`
    Poisson-sampled steps, `event` (a PoissonSampled Gaussian).  dp_accounting has no class for it."""

    def __init__(self, participation, local_steps, event):
        self.participation, self.local_steps, self.event = float(participation), int(local_steps), event

    def tree(self):
        return {"two_stage": {"lambda": self.participation, "inner": self.local_steps, "event": _node(self.event)}}


class SelfComposed(DpEvent):
    """`event` `count` times (SelfComposedDpEvent)."""

    def __init__(self, event, count):
        self.event, self.count = event, int(count)

    def tree(self):
        return {"self_composed": {"count": self.count, "event": _node(self.event)}}


class Composed(DpEvent):
    """The events in sequence (ComposedDpEvent)."""

    def __init__(self, events):
        self.events_ = list(events)

    def tree(self):
        return {"composed": [_node(e) for e in self.events_]}


class HeldBy(DpEvent):
    """The unit's data held by `clients` clients (a record replicated across clients): `event` once per copy."""

    def __init__(self, clients, event):
        self.clients, self.event = int(clients), event

    def tree(self):
        return {"held_by": {"clients": self.clients, "event": _node(self.event)}}


class RdpAccountant:
    """dp_accounting's accountant interface: compose DpEvents, then ask.  accountant: "rdp", "pld" or "gdp"
    (named for dp_accounting's RdpAccountant; PldAccountant is this with "pld")."""

    def __init__(self, accountant="rdp", **opts):
        self.accountant, self.opts, self.ledger = accountant, opts, []

    def compose(self, event, count=1):
        _node(event)
        self.ledger.append(event if count == 1 else SelfComposed(event, count))
        return self

    def _events(self):
        return Composed(self.ledger).events()

    def get_epsilon(self, target_delta):
        g = account_epsilon(self._events(), target_delta, self.accountant, **self.opts)
        return _bound(g, "get_epsilon").epsilon

    def get_delta(self, target_epsilon):
        g = account_delta(self._events(), target_epsilon, self.accountant, **self.opts)
        return _bound(g, "get_delta").delta


class PldAccountant(RdpAccountant):
    def __init__(self, **opts):
        super().__init__("pld", **opts)


class Accountant:
    """Opacus's accountant interface (RDPAccountant / PRVAccountant): one step() per DP-SGD step with Poisson
    sampling; consecutive steps of the same noise and rate are kept as one (noise, rate, steps) entry, as Opacus
    keeps its history.  mechanism: "rdp", "pld" (Opacus's "prv" role: a numerical bound) or "gdp"."""

    def __init__(self, mechanism="rdp"):
        self.mechanism, self.history = mechanism, []

    def step(self, *, noise_multiplier, sample_rate):
        z, q = float(noise_multiplier), float(sample_rate)
        if self.history and self.history[-1][:2] == (z, q):
            self.history[-1] = (z, q, self.history[-1][2] + 1)
        else:
            self.history.append((z, q, 1))

    def get_epsilon(self, delta, **opts):
        g = account_epsilon([event_poisson(q, z, n) for z, q, n in self.history], delta, self.mechanism, **opts)
        return _bound(g, "get_epsilon").epsilon

    def __len__(self):
        return sum(n for _, _, n in self.history)


def get_noise_multiplier(*, target_epsilon, target_delta, sample_rate, epochs=None, steps=None, accountant="rdp",
                         **opts):
    """Opacus's get_noise_multiplier: the smallest noise multiplier (on the safe side) whose Poisson-sampled steps
    stay within (target_epsilon, target_delta).  With epochs, steps = epochs / sample_rate rounded up, except within
    1e-9 of a whole number (7 / 0.07 is 99.99999999999999 in floating point: 100 steps; Opacus's int() takes 99
    and its noise then overshoots the target at the 100th step)."""
    if (epochs is None) == (steps is None):
        raise DpflValueError(EINVAL, "get_noise_multiplier: give exactly one of epochs and steps")
    if steps is None:
        x = epochs / sample_rate
        steps = round(x) if abs(x - round(x)) <= 1e-9 * max(1.0, x) else math.ceil(x)
    return calibrate_noise(event_poisson(sample_rate, 1.0, steps), target_epsilon, target_delta, accountant, **opts)


__all__ = ["DpEvent", "Gaussian", "Skellam", "NonPrivate", "RdpFilter", "PoissonSampled", "SampledWithoutReplacement",
           "TwoStage", "SelfComposed", "Composed", "HeldBy", "tree_events", "RdpAccountant", "PldAccountant",
           "Accountant", "get_noise_multiplier"]
