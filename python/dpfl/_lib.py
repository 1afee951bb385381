"""Loading libdpfl.so and declaring its C types for ctypes.

The library is looked for, in order (dpfl.library_path() says which file was loaded, library_source() why):
  1. the path in the environment variable DPFL_LIB (only there, when it is set);
  2. an installed package (`make install` wrote _install.py beside it): the library of the same installation,
     found relative to the package (so a DESTDIR staging tree or a moved prefix works), then in the LIBDIR
     make install was given;
  3. build/libdpfl.so of the checkout this package sits in (python/dpfl/../../build/libdpfl.so);
  4. the system's libdpfl.so, through ctypes.util.find_library("dpfl") (e.g. after `pip install ./python`).
Only which library file is loaded depends on the environment; nothing in it changes what the library computes.

The structs below repeat include/dpfl/core.h and include/dpfl/privacy.h, except the event, whose fields the library
describes itself (dpfl_abi_fields).  At load, every size and every field
offset declared here is checked against the library's own (dpfl_abi_layout, include/dpfl/abi.h): a library built
from other headers is refused rather than read wrongly.
"""

import ctypes
import keyword
import os

c_double = ctypes.c_double
c_int = ctypes.c_int  # C enums: 4 bytes, values 0..6
c_i64 = ctypes.c_int64
c_size = ctypes.c_size_t
c_char_p = ctypes.c_char_p
P = ctypes.POINTER


class Error(ctypes.Structure):
    _fields_ = [("msg", ctypes.c_char * 512)]


class Event(ctypes.Structure):
    """dpfl_event.  Its fields are not repeated here: load() declares them from the library's own schema
    (dpfl_abi_fields("dpfl_event"), generated from DPFL_EVENT_FIELDS in dpfl/privacy.h); a C field named like a
    Python keyword gets a trailing underscore (`lambda` -> `lambda_`)."""


EVENT_CODECS = {"DPFL_EVT_ENUM": c_int, "DPFL_EVT_F64": c_double, "DPFL_EVT_I64": c_i64}
EVENT_ENUMS = {}  # C field name -> its C enum type name, from the schema (accountant.py maps them to IntEnums)


def schema_fields(schema):
    """[(python name, ctypes type, C type)] from "name:codec:ctype,..." (dpfl_abi_fields)."""
    out = []
    for item in schema.split(","):
        if not item:
            continue
        name, codec, ctype = item.split(":")
        if codec not in EVENT_CODECS:
            raise ImportError("dpfl: the library's event schema has a field %s of unknown codec %s" % (name, codec))
        out.append((name + "_" if keyword.iskeyword(name) else name, EVENT_CODECS[codec], ctype))
    return out


class AccountOpts(ctypes.Structure):
    _fields_ = [("conversion", c_int), ("orders", P(c_double)), ("norders", c_size), ("pld_bins", c_size)]


class Guarantee(ctypes.Structure):
    _fields_ = [
        ("epsilon", c_double),
        ("delta", c_double),
        ("order", c_double),
        ("mu", c_double),
        ("asymptotic", c_int),
        ("answered", c_int),
        ("fallback", ctypes.c_char * 160),
        ("epsilon_lower", c_double),
    ]


class CalibrateOpts(ctypes.Structure):
    _fields_ = [("accountant", c_int), ("opts", AccountOpts), ("tol", c_double)]


class FdpParams(ctypes.Structure):
    _fields_ = [
        ("clients", c_i64),
        ("p", c_double),
        ("z", c_double),
        ("batch", c_i64),
        ("n", c_i64),
        ("local_steps", c_i64),
        ("rounds", c_i64),
        ("copies", c_i64),
    ]


class FdpResult(ctypes.Structure):
    _fields_ = [
        ("mu_weak", c_double),
        ("mu_strong", c_double),
        ("eps_weak_clt", c_double),
        ("eps_strong_clt", c_double),
        ("eps_exact", c_double),
        ("order_exact", c_double),
    ]


class RpdpParams(ctypes.Structure):
    _fields_ = [
        ("z", c_double),
        ("lambda_", c_double),  # `lambda` in C
        ("inner", c_i64),
        ("rounds", c_i64),
        ("delta", c_double),
        ("bound", c_int),
        ("use_pld", c_int),
        ("orders", P(c_double)),
        ("norders", c_size),
    ]


class ScfFit(ctypes.Structure):
    _fields_ = [
        ("a", c_double),
        ("b", c_double),
        ("c", c_double),
        ("r2", c_double),
        ("eps_min", c_double),
        ("eps_max", c_double),
        ("p_min", c_double),
        ("npoints", c_size),
    ]


class E2eParams(ctypes.Structure):
    _fields_ = [
        ("z", c_double),
        ("batch", c_i64),
        ("n", c_i64),
        ("local_steps", c_i64),
        ("client_rate", c_double),
        ("rounds", c_i64),
        ("server_z", c_double),
        ("client_adjacency", c_int),
        ("delta", c_double),
    ]


class E2eResult(ctypes.Structure):
    _fields_ = [
        ("record_epsilon", c_double),
        ("record_order", c_double),
        ("client_epsilon", c_double),
        ("client_order", c_double),
        ("client_noise", c_double),
        ("client_mu", c_double),
    ]


# (ctypes struct, C type name); a Python field `x_` is C's `x` (a Python keyword)
STRUCTS = [
    (Error, "dpfl_error"),
    (Event, "dpfl_event"),
    (AccountOpts, "dpfl_account_opts"),
    (Guarantee, "dpfl_guarantee"),
    (CalibrateOpts, "dpfl_calibrate_opts"),
    (FdpParams, "dpfl_fdp_params"),
    (FdpResult, "dpfl_fdp_result"),
    (RpdpParams, "dpfl_rpdp_params"),
    (ScfFit, "dpfl_scf_fit"),
    (E2eParams, "dpfl_e2e_params"),
    (E2eResult, "dpfl_e2e_result"),
]
ENUMS = ["dpfl_status", "dpfl_event_kind", "dpfl_adjacency", "dpfl_two_stage_bound", "dpfl_conversion",
         "dpfl_accountant"]


def layout_mismatches(lib, structs=STRUCTS, enums=ENUMS):
    """Every difference between the ctypes declarations and the library's layout, as text; [] when they agree.
    A C field the library does not list, or a struct it does not know, is reported too."""
    bad = []
    q = lib.dpfl_abi_layout
    for name in enums:
        size = q(name.encode(), None)
        if size != ctypes.sizeof(c_int):
            bad.append("%s: %d bytes in the library, %d declared" % (name, size, ctypes.sizeof(c_int)))
    for cls, cname in structs:
        size = q(cname.encode(), None)
        if size != ctypes.sizeof(cls):
            bad.append("%s: %d bytes in the library, %d declared" % (cname, size, ctypes.sizeof(cls)))
        for field in cls._fields_:
            pyname = field[0]
            cfield = pyname[:-1] if pyname.endswith("_") else pyname
            off = q(cname.encode(), cfield.encode())
            want = getattr(cls, pyname).offset
            if off != want:
                bad.append("%s.%s: offset %d in the library, %d declared" % (cname, cfield, off, want))
    return bad


def _declare(lib):
    """argtypes / restype of every function the binding calls."""
    d, i64, st = c_double, c_i64, c_int
    E, PE, PErr = Event, P(Event), P(Error)
    PD = P(c_double)
    sigs = {
        "dpfl_version": (c_char_p, []),
        "dpfl_abi_layout": (ctypes.c_long, [c_char_p, c_char_p]),
        "dpfl_status_name": (c_char_p, [st]),
        "dpfl_event_gaussian": (E, [d, i64]),
        "dpfl_event_poisson": (E, [d, d, i64]),
        "dpfl_event_fixed": (E, [i64, i64, d, i64]),
        "dpfl_event_two_stage": (E, [d, d, d, i64, i64, c_int]),
        "dpfl_event_not_private": (E, [i64]),
        "dpfl_event_skellam": (E, [d, d, d, d, i64]),
        "dpfl_event_check": (st, [PE, PErr]),
        "dpfl_event_tree_parse": (st, [c_char_p, c_char_p, P(PE), P(c_size), PErr]),
        "dpfl_event_describe": (None, [PE, ctypes.c_char_p, c_size]),
        "dpfl_adjacency_name": (c_char_p, [c_int]),
        "dpfl_accountant_name": (c_char_p, [c_int]),
        "dpfl_rdp_default_orders": (PD, [P(c_size)]),
        "dpfl_rdp_sgm": (d, [d, d, d]),
        "dpfl_rdp_fixed": (d, [i64, i64, d, d]),
        "dpfl_rdp_two_stage": (d, [d, d, d, i64, c_int, d]),
        "dpfl_rdp_compose": (st, [PE, c_size, PD, c_size, PD, PErr]),
        "dpfl_rdp_to_epsilon": (d, [PD, PD, c_size, d, c_int, PD]),
        "dpfl_rdp_to_delta": (d, [PD, PD, c_size, d, c_int, PD]),
        "dpfl_skellam_rdp": (d, [c_int, d, d, d]),
        "dpfl_skellam_l1_bound": (d, [d, c_size]),
        "dpfl_skellam_epsilon": (st, [d, d, d, d, i64, d, PD, PErr]),
        "dpfl_account_epsilon": (st, [PE, c_size, d, c_int, P(AccountOpts), P(Guarantee), PErr]),
        "dpfl_account_delta": (st, [PE, c_size, d, c_int, P(AccountOpts), P(Guarantee), PErr]),
        "dpfl_pld_epsilon": (st, [PE, c_size, d, c_size, PD, PErr]),
        "dpfl_pld_delta": (st, [PE, c_size, d, c_size, PD, PErr]),
        "dpfl_pld_sgm_delta_exact": (d, [d, d, d]),
        "dpfl_gdp_delta": (d, [d, d]),
        "dpfl_gdp_epsilon": (d, [d, d]),
        "dpfl_gdp_mu": (d, [d, d]),
        "dpfl_gdp_tradeoff": (d, [d, d]),
        "dpfl_gdp_visible_delta": (d, [d, d, i64, d]),
        "dpfl_gdp_visible_epsilon": (d, [d, d, i64, d]),
        "dpfl_gdp_clt_poisson": (d, [d, d, d]),
        "dpfl_gdp_clt_fixed": (d, [d, d, d, d]),
        "dpfl_tradeoff_from_profile": (d, [PD, PD, c_size, d]),
        "dpfl_calibrate_noise": (st, [PE, c_size, d, d, P(CalibrateOpts), PD, PErr]),
        "dpfl_calibrate_steps": (st, [PE, c_size, d, d, P(CalibrateOpts), P(i64), PErr]),
        "dpfl_calibrate_rate": (st, [PE, c_size, d, d, P(CalibrateOpts), PD, PErr]),
        "dpfl_fdp_prifedsync": (st, [P(FdpParams), d, P(FdpResult), PErr]),
        "dpfl_rpdp_epsilon": (st, [P(RpdpParams), d, PD, PErr]),
        "dpfl_rpdp_rate_for_budget": (st, [P(RpdpParams), d, PD, PErr]),
        "dpfl_scf_fit_curve": (st, [P(RpdpParams), P(ScfFit), PErr]),
        "dpfl_scf_rate": (d, [P(ScfFit), d]),
        "dpfl_rpdp_safe_rate": (st, [P(RpdpParams), P(ScfFit), d, d, d, d, PD, PErr]),
        "dpfl_rpdp_calibrate_noise": (st, [P(RpdpParams), d, d, PD, PErr]),
        "dpfl_budgets_read": (st, [c_char_p, P(PD), P(c_size), PErr]),
        "dpfl_budgets_read_records": (st, [c_char_p, c_size, PD, PErr]),
        "dpfl_e2e": (st, [P(E2eParams), P(E2eResult), PErr]),
        "dpfl_e2e_client_mu": (d, [d, i64, i64, c_int, d]),
        "dpfl_stop_rule_rounds": (st, [PD, PD, d, d, i64, d, d, P(i64), PErr]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


def _candidates():
    env = os.environ.get("DPFL_LIB")
    if env:
        return [(env, "DPFL_LIB")]
    here = os.path.dirname(os.path.abspath(__file__))
    out = []
    try:
        from . import _install  # only in an installed copy (make install)
    except ImportError:
        _install = None
    if _install is not None:
        rel = os.path.normpath(os.path.join(here, _install.LIBDIR_FROM_PACKAGE, _install.SONAME))
        out.append((rel, "the installation this package belongs to"))
        out.append((os.path.join(_install.LIBDIR, _install.SONAME), "the installed LIBDIR"))
    local = os.path.normpath(os.path.join(here, "..", "..", "build", "libdpfl.so"))
    out.append((local, "the checkout's build/"))
    out = [(p, w) for p, w in out if os.path.exists(p)]
    if out:
        return out[:1]
    import ctypes.util  # slow to import, and find_library runs ldconfig: only when nothing else is there

    found = ctypes.util.find_library("dpfl")
    return [(found, "the system (find_library)")] if found else []


def load():
    """(CDLL, path) of the first library found (module docstring); ImportError naming what was tried."""
    cands = _candidates()
    if not cands:
        raise ImportError("dpfl: libdpfl.so not found: set DPFL_LIB to its path, build it with `make` in the "
                          "checkout (build/libdpfl.so), or `make install` (the library and this package)")
    path, where = cands[0]
    try:
        lib = ctypes.CDLL(path)
    except OSError as e:
        raise ImportError("dpfl: cannot load %s (from %s): %s" % (path, where, e)) from None
    if not hasattr(lib, "dpfl_abi_layout"):
        raise ImportError("dpfl: %s (from %s) has no dpfl_abi_layout: not a libdpfl this binding can check "
                          "(too old?)" % (path, where))
    if not hasattr(lib, "dpfl_abi_fields"):
        raise ImportError("dpfl: %s (from %s) has no dpfl_abi_fields: too old for this binding" % (path, where))
    lib.dpfl_abi_fields.restype = c_char_p
    lib.dpfl_abi_fields.argtypes = [c_char_p]
    fields = schema_fields((lib.dpfl_abi_fields(b"dpfl_event") or b"").decode())
    if not fields:
        raise ImportError("dpfl: %s (from %s) describes no dpfl_event fields" % (path, where))
    Event._fields_ = [(n, t) for n, t, _ in fields]
    EVENT_ENUMS.update({n: c for n, t, c in fields if t is c_int})
    _declare(lib)
    bad = layout_mismatches(lib)
    if bad:
        raise ImportError("dpfl: %s (from %s, version %s) was built from other headers than this binding: %s"
                          % (path, where, lib.dpfl_version().decode(), "; ".join(bad)))
    return lib, path, where


lib, path, source = load()
