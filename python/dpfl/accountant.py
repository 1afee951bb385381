"""The accountants of libdpfl (include/dpfl/privacy.h) from Python.

Every function here calls the C function of the same name without the `dpfl_` prefix and returns what it
returns; nothing is computed in Python.  A C function that fails (a dpfl_status other than DPFL_OK) raises a
DpflError whose message is the library's dpfl_error text.  Functions that have no error channel in C (they answer
NaN or a meaningless number outside their domain: dpfl_rdp_sgm, the GDP conversions, ...) have the domain their
header documents checked here first, and raise DpflValueError outside it.

Units as in C: z = noise standard deviation / L2 sensitivity under the event's adjacency, q = sampling rate per
step, epsilon in nats; every epsilon or delta is an upper bound, except GDP values marked asymptotic.
"""

import collections
import ctypes
import enum
import numbers
import operator

from . import _lib
from ._lib import lib

Event = _lib.Event  # the ctypes struct dpfl_event, with the methods below

RPDP_P_FLOOR = 1e-6  # DPFL_RPDP_P_FLOOR


# ---------------------------------------------------------------------------------------------- errors
class DpflError(Exception):
    """A libdpfl call failed.  `status` is the dpfl_status code, `status_name` its name, and str(e) / `message`
    the library's dpfl_error message."""

    def __init__(self, status, message):
        super().__init__(message)
        self.status = int(status)
        self.status_name = lib.dpfl_status_name(self.status).decode()
        self.message = message


class DpflValueError(DpflError, ValueError):
    """DPFL_EINVAL: a bad argument."""


class NotPrivateError(DpflError):
    """DPFL_ENOTPRIVATE: a guarantee was asked of a non-private mechanism."""


class DpflNumericalError(DpflError, ArithmeticError):
    """DPFL_ENUM: a numerical failure (no root, overflow)."""


class DpflMemoryError(DpflError, MemoryError):
    """DPFL_ENOMEM."""


class DpflIOError(DpflError, OSError):
    """DPFL_EIO / DPFL_EFORMAT: a file could not be read, or is malformed."""


OK, EINVAL, EIO, EFORMAT, ENOMEM, ENOTPRIVATE, ENUM = range(7)
_EXC = {EINVAL: DpflValueError, EIO: DpflIOError, EFORMAT: DpflIOError, ENOMEM: DpflMemoryError,
        ENOTPRIVATE: NotPrivateError, ENUM: DpflNumericalError}


def _raise_if(status, err):
    if status != OK:
        raise _EXC.get(status, DpflError)(status, err.msg.decode("utf-8", "replace"))


def _invalid(fmt, *args):
    return DpflValueError(EINVAL, fmt % args)


# ---------------------------------------------------------------------------------------------- enums
class EventKind(enum.IntEnum):
    GAUSSIAN = 0
    POISSON = 1
    FIXED = 2
    TWO_STAGE = 3
    NOT_PRIVATE = 4
    SKELLAM = 5
    RDP_FILTER = 6  # rPDP-FL's Renyi filter: cap at every order <= alpha (RDP only)


class Adjacency(enum.IntEnum):
    ADD_REMOVE = 0
    REPLACE_ONE = 1
    ZERO_OUT = 2


class TwoStageBound(enum.IntEnum):
    """The two-stage round's RDP bound: only rPDP-FL's (joint convexity) holds for visible participation; the
    Zhu-Wang option was removed (it assumed a client that sits a round out looks like one that took part)."""
    RPDP = 0


class Conversion(enum.IntEnum):
    TIGHT = 0
    CLASSIC = 1


class AccountantKind(enum.IntEnum):
    RDP = 0
    PLD = 1
    GDP = 2


# the CLI's spellings
_NAMES = {
    Adjacency: {"add-remove": 0, "replace-one": 1, "zero-out": 2},
    TwoStageBound: {"rpdp": 0},
    Conversion: {"tight": 0, "classic": 1},
    AccountantKind: {"rdp": 0, "pld": 1, "gdp": 2},
}


def _enum(cls, v, what):
    """An enum member from a member, its int, or its CLI spelling ("add-remove", "rdp", ...)."""
    if isinstance(v, str):
        names = _NAMES[cls]
        key = v.lower()
        if key in names:
            return cls(names[key])
        if v.upper().replace("-", "_") in cls.__members__:
            return cls[v.upper().replace("-", "_")]
        raise _invalid("%s: '%s' is not one of %s", what, v, ", ".join(names))
    try:
        return cls(operator.index(v))
    except (ValueError, TypeError):
        raise _invalid("%s: %r is not one of %s", what, v, ", ".join(_NAMES[cls])) from None


# ---------------------------------------------------------------------------------------------- argument helpers
def _int(name, v):
    try:
        v = operator.index(v)
    except TypeError:
        raise _invalid("%s (%r) must be an integer", name, v) from None
    if not -(1 << 63) <= v < (1 << 63):
        raise _invalid("%s (%d) does not fit in 64 bits", name, v)
    return v


def _size(name, v):
    v = _int(name, v)
    if v < 0:
        raise _invalid("%s (%d) must be >= 0", name, v)
    return v


def _float(v):
    return float(v)  # TypeError / ValueError for what is not a number, as float() gives


def _doubles(name, values):
    vals = [float(x) for x in values]
    return (ctypes.c_double * len(vals))(*vals), len(vals)


def _events(events):
    """(array, n) from one Event, a Composition or an iterable of Events."""
    if isinstance(events, Event):
        events = [events]
    elif isinstance(events, Composition):
        events = events.events
    evs = list(events)
    for e in evs:
        if not isinstance(e, Event):
            raise TypeError("expected dpfl.Event, got %s" % type(e).__name__)
    arr = (Event * len(evs))()
    for i, e in enumerate(evs):
        arr[i] = e
    return arr, len(evs)


def _require(cond, fmt, *args):
    if not cond:
        raise _invalid(fmt, *args)


def _unit(name, v):
    v = _float(v)
    _require(0 <= v <= 1, "%s (%g) must be in [0, 1]", name, v)
    return v


def _delta(v, name="delta"):
    v = _float(v)
    _require(0 < v < 1, "%s (%g) must be in (0, 1)", name, v)
    return v


def _nonneg(name, v):
    v = _float(v)
    _require(v >= 0, "%s (%g) must be >= 0", name, v)
    return v


def _order(v):
    v = _float(v)
    _require(v > 1, "RDP order %g must be > 1", v)
    return v


# ---------------------------------------------------------------------------------------------- events
def _event_repr(self):
    return "dpfl.Event(%s)" % self.describe()


def _event_describe(self):
    """One line, e.g. "poisson(q=0.01, z=1.1) x 1000 [add-remove]" (dpfl_event_describe)."""
    buf = ctypes.create_string_buffer(256)
    lib.dpfl_event_describe(ctypes.byref(self), buf, len(buf))
    return buf.value.decode()


def _event_check(self):
    """Raises DpflValueError unless the fields are in range (dpfl_event_check)."""
    err = _lib.Error()
    _raise_if(lib.dpfl_event_check(ctypes.byref(self), ctypes.byref(err)), err)
    return self


def _event_replace(self, **fields):
    """A copy with the given fields changed, e.g. ev.replace(count=10, adjacency="replace-one")."""
    e = Event.from_buffer_copy(self)
    for k, v in fields.items():
        if k == "lambda":
            k = "lambda_"
        if k not in _EVENT_FIELDS:
            raise TypeError("dpfl.Event has no field %r" % k)
        t = _EVENT_TYPES[k]
        if k == "kind":
            v = EventKind(operator.index(v))
        elif t in _ENUM_CLASSES:
            v = _enum(_ENUM_CLASSES[t], v, k)
        elif t is ctypes.c_int64:
            v = _int(k, v)
        else:
            v = _float(v)
        setattr(e, k, v)
    return e


def _event_fields(self):
    return tuple(getattr(self, f) for f in _EVENT_FIELDS)


def _event_eq(self, other):
    if not isinstance(other, Event):
        return NotImplemented
    return _event_fields(self) == _event_fields(other)


_EVENT_FIELDS = [f[0] for f in Event._fields_]
# each field's type, from the library's schema: its IntEnum for an enum field, else its ctypes type
_ENUM_CLASSES = {"dpfl_adjacency": Adjacency, "dpfl_two_stage_bound": TwoStageBound, "dpfl_event_kind": EventKind}
_EVENT_TYPES = {f[0]: _lib.EVENT_ENUMS.get(f[0], f[1]) for f in Event._fields_}
Event.__repr__ = _event_repr
Event.__eq__ = _event_eq
Event.__hash__ = None
Event.describe = _event_describe
Event.check = _event_check
Event.replace = _event_replace


def event_gaussian(z, count=1):
    """Gaussian mechanism on every unit (no sampling), `count` times (dpfl_event_gaussian)."""
    return lib.dpfl_event_gaussian(_float(z), _int("count", count))


def event_poisson(q, z, count=1):
    """Each unit included independently with probability q, then Gaussian(z); add-remove (dpfl_event_poisson)."""
    return lib.dpfl_event_poisson(_float(q), _float(z), _int("count", count))


def event_fixed(n, batch, z, count=1):
    """A batch of exactly `batch` of `n` without replacement, then Gaussian(z); replace-one (dpfl_event_fixed)."""
    return lib.dpfl_event_fixed(_int("n", n), _int("batch", batch), _float(z), _int("count", count))


def event_two_stage(lambda_, q, z, inner, count=1, bound="rpdp"):
    """rPDP-FL round: the client takes part w.p. lambda_, then `inner` Poisson(q) steps (dpfl_event_two_stage)."""
    return lib.dpfl_event_two_stage(_float(lambda_), _float(q), _float(z), _int("inner", inner),
                                    _int("count", count), _enum(TwoStageBound, bound, "bound"))


def event_not_private(count=1):
    """A release with no guarantee: every accountant then raises NotPrivateError (dpfl_event_not_private)."""
    return lib.dpfl_event_not_private(_int("count", count))


def event_skellam(q, d1, d2, mu, count=1):
    """Distributed DP round: Skellam noise of total variance mu on a sum whose client moves it by L1 <= d1, L2 <= d2
    (grid units), the client in the round w.p. q; zero-out adjacency (dpfl_event_skellam)."""
    return lib.dpfl_event_skellam(_float(q), _float(d1), _float(d2), _float(mu), _int("count", count))


def adjacency_name(a):
    return lib.dpfl_adjacency_name(_enum(Adjacency, a, "adjacency")).decode()


def accountant_name(a):
    return lib.dpfl_accountant_name(_enum(AccountantKind, a, "accountant")).decode()


# ---------------------------------------------------------------------------------------------- RDP
def rdp_default_orders():
    """The default orders (dpfl_rdp_default_orders): integers 2 .. 64, then 72 .. 4096."""
    n = ctypes.c_size_t()
    p = lib.dpfl_rdp_default_orders(ctypes.byref(n))
    return tuple(p[i] for i in range(n.value))


def rdp_sgm(q, z, alpha):
    """Per-step RDP at order alpha of the Poisson-subsampled Gaussian, add-remove (dpfl_rdp_sgm)."""
    return lib.dpfl_rdp_sgm(_unit("sampling rate q", q), _nonneg("noise multiplier z", z), _order(alpha))


def rdp_fixed(n, batch, z, alpha):
    """Per-step RDP (replace-one) of `batch` of `n` without replacement then Gaussian(z) (dpfl_rdp_fixed)."""
    n, batch = _int("n", n), _int("batch", batch)
    _require(0 < batch <= n, "fixed-size sampling needs 0 < batch (%d) <= n (%d)", batch, n)
    return lib.dpfl_rdp_fixed(n, batch, _nonneg("noise multiplier z", z), _order(alpha))


def rdp_two_stage(lambda_, q, z, inner, bound, alpha):
    """RDP of one two-stage round (dpfl_rdp_two_stage)."""
    inner = _int("inner", inner)
    _require(inner > 0, "local steps per round (%d) must be > 0", inner)
    return lib.dpfl_rdp_two_stage(_unit("client rate lambda", lambda_), _unit("record rate p", q),
                                  _nonneg("noise multiplier z", z), inner, _enum(TwoStageBound, bound, "bound"),
                                  _order(alpha))


def rdp_compose(events, orders=None):
    """Total RDP of the composed events at each order (default: rdp_default_orders()) (dpfl_rdp_compose)."""
    if orders is None:
        orders = rdp_default_orders()
    arr, n = _events(events)
    o, no = _doubles("orders", orders)
    out = (ctypes.c_double * no)()
    err = _lib.Error()
    _raise_if(lib.dpfl_rdp_compose(arr, n, o, no, out, ctypes.byref(err)), err)
    return list(out)


def _curve(orders, rdp):
    o, no = _doubles("orders", orders)
    r, nr = _doubles("rdp", rdp)
    _require(no == nr, "orders (%d) and rdp (%d) differ in length", no, nr)
    for a in o:
        _order(a)
    return o, r, no


def rdp_to_epsilon(orders, rdp, delta, conversion="tight"):
    """(epsilon, optimal order) of an RDP curve at delta, minimised over the orders (dpfl_rdp_to_epsilon)."""
    o, r, n = _curve(orders, rdp)
    best = ctypes.c_double()
    e = lib.dpfl_rdp_to_epsilon(o, r, n, _delta(delta), _enum(Conversion, conversion, "conversion"),
                                ctypes.byref(best))
    return e, best.value


def rdp_to_delta(orders, rdp, epsilon, conversion="tight"):
    """(delta, optimal order) of an RDP curve at epsilon (dpfl_rdp_to_delta)."""
    o, r, n = _curve(orders, rdp)
    best = ctypes.c_double()
    d = lib.dpfl_rdp_to_delta(o, r, n, _nonneg("epsilon", epsilon), _enum(Conversion, conversion, "conversion"),
                              ctypes.byref(best))
    return d, best.value


# ---------------------------------------------------------------------------------------------- accountants
# The result types are named tuples (light to import: a whole-process call is mostly start-up).
class Guarantee(collections.namedtuple("Guarantee",
                                        "epsilon delta order mu asymptotic answered fallback epsilon_lower")):
    """dpfl_guarantee.  `order`: RDP's optimal order (else 0); `mu`: GDP's mu (else 0); `answered` names the
    accountant whose number this is ("rdp" when PLD fell back to RDP or RDP's bound was smaller; `fallback` says
    why, else "").  `asymptotic`: a CLT limit, NOT an upper bound.  `epsilon_lower`: where PLD answered an epsilon,
    its optimistic discretization's epsilon, a lower bound (the true epsilon lies in [epsilon_lower, epsilon]);
    0 when not computed (RDP or GDP answered, or a delta was asked)."""
    __slots__ = ()


def _account_opts(conversion, orders, pld_bins):
    keep = None
    opts = _lib.AccountOpts(_enum(Conversion, conversion, "conversion"), None, 0, _size("pld_bins", pld_bins))
    if orders is not None:
        keep, n = _doubles("orders", orders)
        opts.orders = ctypes.cast(keep, ctypes.POINTER(ctypes.c_double))
        opts.norders = n
    return opts, keep  # keep: the orders array must outlive the call


def _guarantee(g):
    return Guarantee(g.epsilon, g.delta, g.order, g.mu, bool(g.asymptotic),
                     lib.dpfl_accountant_name(g.answered).decode(), g.fallback.decode("utf-8", "replace"),
                     g.epsilon_lower)


def account_epsilon(events, delta, accountant="rdp", *, conversion="tight", orders=None, pld_bins=0):
    """epsilon at delta of the composed events (dpfl_account_epsilon).  accountant: "rdp", "pld" or "gdp";
    orders (RDP): None = the default orders refined around the best one; pld_bins: 0 = 2^17."""
    arr, n = _events(events)
    opts, keep = _account_opts(conversion, orders, pld_bins)
    g, err = _lib.Guarantee(), _lib.Error()
    s = lib.dpfl_account_epsilon(arr, n, _float(delta), _enum(AccountantKind, accountant, "accountant"),
                                 ctypes.byref(opts), ctypes.byref(g), ctypes.byref(err))
    del keep
    _raise_if(s, err)
    return _guarantee(g)


def account_delta(events, epsilon, accountant="rdp", *, conversion="tight", orders=None, pld_bins=0):
    """delta at epsilon of the composed events (dpfl_account_delta)."""
    arr, n = _events(events)
    opts, keep = _account_opts(conversion, orders, pld_bins)
    g, err = _lib.Guarantee(), _lib.Error()
    s = lib.dpfl_account_delta(arr, n, _float(epsilon), _enum(AccountantKind, accountant, "accountant"),
                               ctypes.byref(opts), ctypes.byref(g), ctypes.byref(err))
    del keep
    _raise_if(s, err)
    return _guarantee(g)


class Composition:
    """A list of events accounted together: compose events as they happen, then ask for epsilon or delta.

        c = dpfl.Composition()
        c.compose(dpfl.event_poisson(q=0.01, z=1.1, count=1000))
        c.compose(dpfl.event_gaussian(z=5.0))
        c.epsilon(1e-5, "pld").epsilon
    """

    def __init__(self, events=()):
        self.events = []
        for e in events:
            self.compose(e)

    def compose(self, event, count=None):
        """Append an event (its count replaced by `count` when given); checks it; returns self."""
        if not isinstance(event, Event):
            raise TypeError("expected dpfl.Event, got %s" % type(event).__name__)
        e = event.replace(count=count) if count is not None else Event.from_buffer_copy(event)
        self.events.append(e.check())
        return self

    def epsilon(self, delta, accountant="rdp", **opts):
        return account_epsilon(self.events, delta, accountant, **opts)

    def delta(self, epsilon, accountant="rdp", **opts):
        return account_delta(self.events, epsilon, accountant, **opts)

    def rdp(self, orders=None):
        return rdp_compose(self.events, orders)

    def __len__(self):
        return len(self.events)

    def __repr__(self):
        return "dpfl.Composition([%s])" % ", ".join(e.describe() for e in self.events)


# ---------------------------------------------------------------------------------------------- PLD
def pld_epsilon(events, delta, bins=0):
    """PLD epsilon at delta, no RDP fallback (dpfl_pld_epsilon): Gaussian and Poisson events only."""
    arr, n = _events(events)
    out, err = ctypes.c_double(), _lib.Error()
    _raise_if(lib.dpfl_pld_epsilon(arr, n, _float(delta), _size("bins", bins), ctypes.byref(out),
                                   ctypes.byref(err)), err)
    return out.value


def pld_delta(events, epsilon, bins=0):
    """PLD delta at epsilon, no RDP fallback (dpfl_pld_delta)."""
    arr, n = _events(events)
    out, err = ctypes.c_double(), _lib.Error()
    _raise_if(lib.dpfl_pld_delta(arr, n, _float(epsilon), _size("bins", bins), ctypes.byref(out),
                                 ctypes.byref(err)), err)
    return out.value


def pld_sgm_delta_exact(q, z, epsilon):
    """Exact hockey-stick divergence of one Poisson-subsampled Gaussian step (dpfl_pld_sgm_delta_exact)."""
    z = _float(z)
    _require(z > 0, "noise multiplier z (%g) must be > 0", z)
    return lib.dpfl_pld_sgm_delta_exact(_unit("sampling rate q", q), z, _nonneg("epsilon", epsilon))


# ---------------------------------------------------------------------------------------------- Gaussian DP, f-DP
def gdp_delta(mu, epsilon):
    """delta(epsilon) of mu-GDP (dpfl_gdp_delta)."""
    return lib.dpfl_gdp_delta(_nonneg("mu", mu), _nonneg("epsilon", epsilon))


def gdp_epsilon(mu, delta):
    """Smallest epsilon >= 0 with delta(epsilon) <= delta under mu-GDP (dpfl_gdp_epsilon)."""
    return lib.dpfl_gdp_epsilon(_nonneg("mu", mu), _delta(delta))


def gdp_mu(epsilon, delta):
    """Largest mu whose delta(epsilon) <= delta (dpfl_gdp_mu)."""
    return lib.dpfl_gdp_mu(_nonneg("epsilon", epsilon), _delta(delta))


def gdp_tradeoff(mu, a):
    """Tradeoff function G_mu(a) = Phi(Phi^-1(1 - a) - mu) (dpfl_gdp_tradeoff)."""
    return lib.dpfl_gdp_tradeoff(_nonneg("mu", mu), _unit("type I error a", a))


def gdp_visible_delta(mu, q, T, epsilon):
    """delta(epsilon) of T rounds each taken part in w.p. q, participation visible (dpfl_gdp_visible_delta)."""
    return lib.dpfl_gdp_visible_delta(_nonneg("mu", mu), _unit("rate q", q), _size("T", T),
                                      _nonneg("epsilon", epsilon))


def gdp_visible_epsilon(mu, q, T, delta):
    """Smallest epsilon with gdp_visible_delta <= delta (dpfl_gdp_visible_epsilon)."""
    return lib.dpfl_gdp_visible_epsilon(_nonneg("mu", mu), _unit("rate q", q), _size("T", T), _delta(delta))


def gdp_clt_poisson(q, z, T):
    """CLT mu of T Poisson(q) steps (Bu-Dong-Long-Su): ASYMPTOTIC, not a bound (dpfl_gdp_clt_poisson)."""
    return lib.dpfl_gdp_clt_poisson(_unit("sampling rate q", q), _nonneg("noise multiplier z", z),
                                    _nonneg("T", T))


def gdp_clt_fixed(B, n, z, T):
    """CLT mu of T batches of B of n without replacement (Dong-Roth-Su): ASYMPTOTIC (dpfl_gdp_clt_fixed)."""
    B, n = _float(B), _float(n)
    _require(0 < B <= n, "fixed-size sampling needs 0 < batch (%g) <= n (%g)", B, n)
    return lib.dpfl_gdp_clt_fixed(B, n, _nonneg("noise multiplier z", z), _nonneg("T", T))


def tradeoff_from_profile(eps, delta, a):
    """f(a) of the tradeoff curve of the (eps[i], delta[i]) pairs (dpfl_tradeoff_from_profile)."""
    e, ne = _doubles("eps", eps)
    d, nd = _doubles("delta", delta)
    _require(ne == nd, "eps (%d) and delta (%d) differ in length", ne, nd)
    return lib.dpfl_tradeoff_from_profile(e, d, ne, _unit("type I error a", a))


# ---------------------------------------------------------------------------------------------- calibration
def _calibrate_opts(accountant, conversion, orders, pld_bins, tol):
    opts, keep = _account_opts(conversion, orders, pld_bins)
    return _lib.CalibrateOpts(_enum(AccountantKind, accountant, "accountant"), opts, _float(tol)), keep


def calibrate_noise(events, target_epsilon, delta, accountant="rdp", *, conversion="tight", orders=None,
                    pld_bins=0, tol=0.0):
    """Smallest z (on the safe side) with epsilon(delta) <= target when every event's z is replaced by it
    (dpfl_calibrate_noise).  tol: relative bracket width, 0 = 1e-6 (RDP) or 1e-4 (PLD)."""
    arr, n = _events(events)
    co, keep = _calibrate_opts(accountant, conversion, orders, pld_bins, tol)
    out, err = ctypes.c_double(), _lib.Error()
    s = lib.dpfl_calibrate_noise(arr, n, _float(target_epsilon), _float(delta), ctypes.byref(co),
                                 ctypes.byref(out), ctypes.byref(err))
    del keep
    _raise_if(s, err)
    return out.value


def calibrate_steps(events, target_epsilon, delta, accountant="rdp", *, conversion="tight", orders=None,
                    pld_bins=0, tol=0.0):
    """Largest count T (every event's count replaced) with epsilon <= target; 0 if T = 1 overshoots
    (dpfl_calibrate_steps)."""
    arr, n = _events(events)
    co, keep = _calibrate_opts(accountant, conversion, orders, pld_bins, tol)
    out, err = ctypes.c_int64(), _lib.Error()
    s = lib.dpfl_calibrate_steps(arr, n, _float(target_epsilon), _float(delta), ctypes.byref(co),
                                 ctypes.byref(out), ctypes.byref(err))
    del keep
    _raise_if(s, err)
    return out.value


def calibrate_rate(events, target_epsilon, delta, accountant="rdp", *, conversion="tight", orders=None,
                   pld_bins=0, tol=0.0):
    """Largest sampling rate q (Poisson and two-stage events' q replaced) with epsilon <= target
    (dpfl_calibrate_rate)."""
    arr, n = _events(events)
    co, keep = _calibrate_opts(accountant, conversion, orders, pld_bins, tol)
    out, err = ctypes.c_double(), _lib.Error()
    s = lib.dpfl_calibrate_rate(arr, n, _float(target_epsilon), _float(delta), ctypes.byref(co),
                                ctypes.byref(out), ctypes.byref(err))
    del keep
    _raise_if(s, err)
    return out.value


# ---------------------------------------------------------------------------------------------- PriFedSync f-DP
class FdpResult(collections.namedtuple("FdpResult",
                                       "mu_weak mu_strong eps_weak_clt eps_strong_clt eps_exact order_exact")):
    """dpfl_fdp_result: mu_weak / mu_strong and their conversions are CLT values (ASYMPTOTIC); eps_exact is an
    RDP upper bound keeping the sync probability, at order order_exact."""
    __slots__ = ()


def fdp_prifedsync(clients, p, z, batch, n, local_steps, rounds, delta, copies=1):
    """PriFedSync weak/strong federated GDP (CLT) and an exact RDP bound (dpfl_fdp_prifedsync); copies: the clients
    holding the record, whose releases compose."""
    pp = _lib.FdpParams(_int("clients", clients), _float(p), _float(z), _int("batch", batch), _int("n", n),
                        _int("local_steps", local_steps), _int("rounds", rounds), _int("copies", copies))
    r, err = _lib.FdpResult(), _lib.Error()
    _raise_if(lib.dpfl_fdp_prifedsync(ctypes.byref(pp), _float(delta), ctypes.byref(r), ctypes.byref(err)), err)
    return FdpResult(r.mu_weak, r.mu_strong, r.eps_weak_clt, r.eps_strong_clt, r.eps_exact, r.order_exact)


# ---------------------------------------------------------------------------------------------- rPDP-FL, SCF
class RpdpParams(collections.namedtuple("RpdpParams", "z lambda_ inner rounds delta bound use_pld orders",
                                        defaults=("rpdp", False, None))):
    """dpfl_rpdp_params: two-stage sampling (client rate lambda_, `inner` local steps, `rounds` rounds).
    bound: "rpdp" (the only valid one); use_pld: PLD of the round composed over the rounds (RDP as its floor);
    orders None: integer orders 2..994 with bound "rpdp" (the paper's), the default orders otherwise."""
    __slots__ = ()

    def _c(self):
        c = _lib.RpdpParams(_float(self.z), _float(self.lambda_), _int("inner", self.inner),
                            _int("rounds", self.rounds), _float(self.delta), _enum(TwoStageBound, self.bound, "bound"),
                            1 if self.use_pld else 0, None, 0)
        keep = None
        if self.orders is not None:
            keep, n = _doubles("orders", self.orders)
            for a in keep:
                _order(a)
            c.orders = ctypes.cast(keep, ctypes.POINTER(ctypes.c_double))
            c.norders = n
        return c, keep


class ScfFit(collections.namedtuple("ScfFit", "a b c r2 eps_min eps_max p_min npoints")):
    """dpfl_scf_fit: eps(p) = exp(a p + b) + c fitted to the simulated eps*(p); eps_min / eps_max are
    eps*(p_min) and eps*(1) on the grid."""
    __slots__ = ()

    def _c(self):
        return _lib.ScfFit(self.a, self.b, self.c, self.r2, self.eps_min, self.eps_max, self.p_min,
                           _size("npoints", self.npoints))


def _rpdp_call(fn, params, *args):
    c, keep = params._c()
    out, err = ctypes.c_double(), _lib.Error()
    s = fn(ctypes.byref(c), *args, ctypes.byref(out), ctypes.byref(err))
    del keep
    _raise_if(s, err)
    return out.value


def rpdp_epsilon(params, p):
    """epsilon*(p) of a record sampled with probability p per local step (dpfl_rpdp_epsilon)."""
    return _rpdp_call(lib.dpfl_rpdp_epsilon, params, _float(p))


def rpdp_rate_for_budget(params, eps):
    """Largest p with epsilon*(p) <= eps, by bisection (dpfl_rpdp_rate_for_budget)."""
    return _rpdp_call(lib.dpfl_rpdp_rate_for_budget, params, _float(eps))


def rpdp_calibrate_noise(params, max_eps, tol=0.01):
    """z such that a record with p = 1 reaches max_eps (dpfl_rpdp_calibrate_noise)."""
    return _rpdp_call(lib.dpfl_rpdp_calibrate_noise, params, _float(max_eps), _float(tol))


def scf_fit_curve(params):
    """Simulation-CurveFitting: eps*(p) on the standard grid, fitted (dpfl_scf_fit_curve)."""
    c, keep = params._c()
    f, err = _lib.ScfFit(), _lib.Error()
    s = lib.dpfl_scf_fit_curve(ctypes.byref(c), ctypes.byref(f), ctypes.byref(err))
    del keep
    _raise_if(s, err)
    return ScfFit(f.a, f.b, f.c, f.r2, f.eps_min, f.eps_max, f.p_min, f.npoints)


def scf_rate(fit, eps):
    """Budget -> probability through the fit: an ESTIMATE, not a guarantee (dpfl_scf_rate)."""
    if not isinstance(fit, ScfFit):
        raise TypeError("expected dpfl.ScfFit, got %s" % type(fit).__name__)
    c = fit._c()
    return lib.dpfl_scf_rate(ctypes.byref(c), _float(eps))


def rpdp_safe_rate(params, fit, eps, eps1, lo=0.0, eps_lo=0.0):
    """Largest p whose exact epsilon*(p) <= eps, to 1e-4 relative; eps1 = epsilon*(1); fit (may be None) gives
    the first guess (dpfl_rpdp_safe_rate)."""
    if fit is not None and not isinstance(fit, ScfFit):
        raise TypeError("expected dpfl.ScfFit or None, got %s" % type(fit).__name__)
    cf = fit._c() if fit is not None else None
    return _rpdp_call(lib.dpfl_rpdp_safe_rate, params, ctypes.byref(cf) if cf is not None else None,
                      _float(eps), _float(eps1), _float(lo), _float(eps_lo))


def budgets_read(path):
    """The budgets of a file (dpfl scf --budgets): one epsilon > 0 per line, '#' comments (dpfl_budgets_read)."""
    v, n, err = ctypes.POINTER(ctypes.c_double)(), ctypes.c_size_t(), _lib.Error()
    _raise_if(lib.dpfl_budgets_read(str(path).encode(), ctypes.byref(v), ctypes.byref(n), ctypes.byref(err)), err)
    try:
        return [v[i] for i in range(n.value)]
    finally:
        _libc_free(v)


def budgets_read_records(path, n):
    """A budget per training record, n records (dpfl_budgets_read_records)."""
    n = _size("n", n)
    out, err = (ctypes.c_double * n)(), _lib.Error()
    _raise_if(lib.dpfl_budgets_read_records(str(path).encode(), n, out, ctypes.byref(err)), err)
    return list(out)


_libc = ctypes.CDLL(None)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None


def _libc_free(p):
    if p:
        _libc.free(ctypes.cast(p, ctypes.c_void_p))


# ---------------------------------------------------------------------------------------------- end-to-end DP
class E2eResult(collections.namedtuple("E2eResult", "record_epsilon record_order client_epsilon client_order "
                                                   "client_noise client_mu")):
    """dpfl_e2e_result: record- and client-level guarantees of one DP-SGD-in-clients run."""
    __slots__ = ()


def e2e(z, batch, n, local_steps, client_rate, rounds, delta, server_z=0.0, client_adjacency="zero-out"):
    """Record-level and client-level epsilon of one run (dpfl_e2e)."""
    pp = _lib.E2eParams(_float(z), _int("batch", batch), _int("n", n), _int("local_steps", local_steps),
                        _float(client_rate), _int("rounds", rounds), _float(server_z),
                        _enum(Adjacency, client_adjacency, "client_adjacency"), _float(delta))
    r, err = _lib.E2eResult(), _lib.Error()
    _raise_if(lib.dpfl_e2e(ctypes.byref(pp), ctypes.byref(r), ctypes.byref(err)), err)
    return E2eResult(r.record_epsilon, r.record_order, r.client_epsilon, r.client_order, r.client_noise, r.client_mu)


def e2e_client_mu(z, batch, local_steps, adjacency="zero-out", server_z=0.0):
    """GDP mu of one round for a participating client (dpfl_e2e_client_mu)."""
    z, batch, k = _float(z), _int("batch", batch), _int("local_steps", local_steps)
    _require(z > 0, "noise (%g) must be > 0", z)
    _require(batch > 0 and k > 0, "batch (%d) and local steps (%d) must be > 0", batch, k)
    return lib.dpfl_e2e_client_mu(z, batch, k, _enum(Adjacency, adjacency, "adjacency"),
                                  _nonneg("server noise", server_z))


# ---------------------------------------------------------------------------------------------- Skellam
def skellam_rdp(alpha, d1, d2, mu):
    """RDP at integer order alpha of a sum with Skellam noise of variance mu (dpfl_skellam_rdp)."""
    alpha = _int("alpha", alpha)
    _require(alpha > 1, "RDP order %d must be > 1", alpha)
    mu = _float(mu)
    _require(mu > 0, "Skellam variance mu (%g) must be > 0", mu)
    return lib.dpfl_skellam_rdp(alpha, _nonneg("d1", d1), _nonneg("d2", d2), mu)


def skellam_l1_bound(d2, dim):
    """L1 bound of an integer vector of L2 norm <= d2 in dim dimensions (dpfl_skellam_l1_bound)."""
    return lib.dpfl_skellam_l1_bound(_nonneg("d2", d2), _size("dim", dim))


def skellam_epsilon(d1, d2, mu, q, rounds, delta):
    """epsilon at delta of `rounds` Skellam releases, each including a client w.p. q (dpfl_skellam_epsilon)."""
    out, err = ctypes.c_double(), _lib.Error()
    _raise_if(lib.dpfl_skellam_epsilon(_float(d1), _float(d2), _float(mu), _float(q), _int("rounds", rounds),
                                       _float(delta), ctypes.byref(out), ctypes.byref(err)), err)
    return out.value


# ---------------------------------------------------------------------------------------------- stop rule
def stop_rule_rounds(q, z, max_rounds, target_epsilon, threshold):
    """Largest R such that the first R rounds have delta(target_epsilon) <= threshold (RDP, tight); q and z are
    each a constant or a per-round schedule of at least max_rounds values (dpfl_stop_rule_rounds)."""
    max_rounds = _int("max_rounds", max_rounds)

    def sched(name, v):
        if isinstance(v, numbers.Real):
            return None, float(v)
        arr, n = _doubles(name, v)
        _require(n >= max_rounds, "%s schedule has %d values, fewer than max_rounds (%d)", name, n, max_rounds)
        return arr, 0.0

    qa, q0 = sched("q", q)
    za, z0 = sched("z", z)
    out, err = ctypes.c_int64(), _lib.Error()
    _raise_if(lib.dpfl_stop_rule_rounds(qa, za, q0, z0, max_rounds, _float(target_epsilon), _float(threshold),
                                        ctypes.byref(out), ctypes.byref(err)), err)
    return out.value


def version():
    """The library's DPFL_VERSION."""
    return lib.dpfl_version().decode()


__all__ = [
    "DpflError", "DpflValueError", "NotPrivateError", "DpflNumericalError", "DpflMemoryError", "DpflIOError",
    "EventKind", "Adjacency", "TwoStageBound", "Conversion", "AccountantKind", "RPDP_P_FLOOR",
    "Event", "event_gaussian", "event_poisson", "event_fixed", "event_two_stage", "event_not_private",
    "event_skellam",
    "adjacency_name", "accountant_name",
    "rdp_default_orders", "rdp_sgm", "rdp_fixed", "rdp_two_stage", "rdp_compose", "rdp_to_epsilon", "rdp_to_delta",
    "Guarantee", "account_epsilon", "account_delta", "Composition",
    "pld_epsilon", "pld_delta", "pld_sgm_delta_exact",
    "gdp_delta", "gdp_epsilon", "gdp_mu", "gdp_tradeoff", "gdp_visible_delta", "gdp_visible_epsilon",
    "gdp_clt_poisson", "gdp_clt_fixed", "tradeoff_from_profile",
    "calibrate_noise", "calibrate_steps", "calibrate_rate",
    "FdpResult", "fdp_prifedsync",
    "RpdpParams", "ScfFit", "rpdp_epsilon", "rpdp_rate_for_budget", "rpdp_calibrate_noise", "scf_fit_curve",
    "scf_rate", "rpdp_safe_rate", "budgets_read", "budgets_read_records",
    "E2eResult", "e2e", "e2e_client_mu",
    "skellam_rdp", "skellam_l1_bound", "skellam_epsilon",
    "stop_rule_rounds", "version",
]
