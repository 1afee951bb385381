"""ctypes declarations of the run driver (include/dpfl/run.h, dpfl/data.h): dpfl_run and its options, the per-round
callback's struct, dpfl_dataset, and the heap config of src/run/binding.c.

As _lib does for the accountants' structs, every size and field offset declared here is checked at import against
the library's own (dpfl_run_abi_layout): a library built from other headers is refused rather than read wrongly.
"""

import ctypes

from . import _lib
from ._lib import lib

c_int = ctypes.c_int
c_i32 = ctypes.c_int32
c_double = ctypes.c_double
P = ctypes.POINTER


class Dataset(ctypes.Structure):
    _fields_ = [
        ("n", c_i32), ("c", c_i32), ("h", c_i32), ("w", c_i32), ("dim", c_i32), ("classes", c_i32),
        ("x", P(ctypes.c_float)), ("y", P(c_i32)), ("groups", c_i32), ("group", P(c_i32)),
        ("absent", P(ctypes.c_uint8)),
    ]


class RunRound(ctypes.Structure):
    _fields_ = [
        ("round", c_i32), ("rounds", c_i32), ("participants", c_i32), ("train_loss", c_double),
        ("test_accuracy", c_double), ("test_loss", c_double), ("record_epsilon", c_double),
        ("client_epsilon", c_double), ("wall_seconds", c_double), ("metrics_line", ctypes.c_char_p),
    ]


ROUND_FN = ctypes.CFUNCTYPE(c_int, ctypes.c_void_p, P(RunRound))


class RunOptions(ctypes.Structure):
    _fields_ = [
        ("out_dir", ctypes.c_char_p), ("quiet", c_int), ("resume", c_int), ("force", c_int),
        ("on_round", ROUND_FN), ("on_round_ctx", ctypes.c_void_p), ("train", P(Dataset)), ("test", P(Dataset)),
        ("stop", P(c_int)),  # volatile sig_atomic_t * (an int on Linux); the binding stops through on_round
    ]


STRUCTS = [(Dataset, "dpfl_dataset"), (RunRound, "dpfl_run_round"), (RunOptions, "dpfl_run_options")]


def layout_mismatches(query, structs=STRUCTS):
    """Every difference between these declarations and query(type, field) (dpfl_run_abi_layout); [] if none."""
    bad = []
    for cls, cname in structs:
        size = query(cname.encode(), None)
        if size != ctypes.sizeof(cls):
            bad.append("%s: %d bytes in the library, %d declared" % (cname, size, ctypes.sizeof(cls)))
        for name, _ in cls._fields_:
            off = query(cname.encode(), name.encode())
            if off != getattr(cls, name).offset:
                bad.append("%s.%s: offset %d in the library, %d declared" % (cname, name, off,
                                                                            getattr(cls, name).offset))
    return bad


def _declare():
    if not hasattr(lib, "dpfl_run_abi_layout"):
        raise ImportError("dpfl: %s has no dpfl_run_abi_layout: too old for dpfl.train (rebuild it)" % _lib.path)
    PErr = P(_lib.Error)
    sigs = {
        "dpfl_run_abi_layout": (ctypes.c_long, [ctypes.c_char_p, ctypes.c_char_p]),
        "dpfl_config_create": (c_int, [ctypes.c_char_p, P(ctypes.c_void_p), PErr]),
        "dpfl_config_destroy": (None, [ctypes.c_void_p]),
        "dpfl_config_set_noted": (c_int, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t, PErr]),
        "dpfl_config_unset": (c_int, [ctypes.c_void_p, ctypes.c_char_p, PErr]),
        "dpfl_config_infer_clients": (c_int, [ctypes.c_void_p, P(c_int), PErr]),
        "dpfl_config_to_ini": (ctypes.c_void_p, [ctypes.c_void_p]),
        "dpfl_text_free": (None, [ctypes.c_void_p]),
        "dpfl_run": (c_int, [ctypes.c_void_p, P(RunOptions), PErr]),
        "dpfl_model_file_export_npz": (c_int, [ctypes.c_char_p, ctypes.c_char_p, PErr]),
        "dpfl_dataset_load": (c_int, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_uint64, P(Dataset), P(Dataset),
                                      PErr]),
        "dpfl_dataset_free": (None, [P(Dataset)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    bad = layout_mismatches(lib.dpfl_run_abi_layout)
    if bad:
        raise ImportError("dpfl: %s (version %s) was built from other headers than this binding: %s"
                          % (_lib.path, lib.dpfl_version().decode(), "; ".join(bad)))


_declare()
