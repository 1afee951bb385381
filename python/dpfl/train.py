"""Training from Python: the run driver of libdpfl (dpfl_run, include/dpfl/run.h) -- what `dpfl train` runs -- with
the config as a dict or an INI file, the data as NumPy arrays, and a callback after every round.

    run = dpfl.train({"data": {"partition": "natural"}, "fl": {"rounds": 20}, "record_dp": {"enabled": True, ...}},
                     data=dpfl.arrays(X, y, client_ids=ids), out="runs/x", on_round=print)
    run.history[-1]["epsilon"], run.epsilon(), run.model["0.weight"]
    dpfl.load_run("runs/x").summary

Nothing is computed here: the config goes through the library's own parser and checks (dpfl_config_set, as the
command line's --set), the data through the library's checks (dpfl_dataset_from_caller), and the run is the
library's.  The arrays' checks below only name the Python array and index in the message before the library sees
them.  McMahan et al. 2017 (FedAvg) / Abadi et al. 2016 (DP-SGD): what the run driver trains; docs/python.md.
"""

import configparser
import ctypes
import json
import math
import numbers
import os
import signal
import sys
import tempfile
import threading

from . import _run_lib as R
from ._lib import Error, lib
from .accountant import DpflValueError, EINVAL, _raise_if

__all__ = ["Arrays", "Run", "arrays", "train", "load_run", "load_dataset", "RESUMABLE_KEYS"]

# the keys a resumed run may change (as `dpfl train --resume ... --set`): everything else is the run's config.ini
RESUMABLE_KEYS = ("fl.rounds", "run.threads", "run.eval_every")


def _np():
    try:
        import numpy
    except ImportError:
        raise ImportError("dpfl.train, dpfl.arrays and Run.model need NumPy (apt-get install python3-numpy)") from None
    return numpy


def _bad(fmt, *args):
    return DpflValueError(EINVAL, fmt % args)


# ---------------------------------------------------------------------------------------------- arrays
def _first_bad(np, mask):
    """The index (a tuple) of the first True in mask."""
    return tuple(int(i) for i in np.argwhere(mask)[0])


def _index_text(ix):
    return "[%s]" % ", ".join(str(i) for i in ix)


def _features(np, X, name):
    """X as a C-contiguous float32 array (X itself when it is one) and its (c, h, w)."""
    a = np.asarray(X)
    if a.dtype.kind not in "fiub":
        raise _bad("%s: dtype %s is not a number type (float32 is used as is; floats, integers and bool convert)",
                   name, a.dtype)
    if a.ndim < 2:
        raise _bad("%s: shape %s; give one row per example: (N, features), (N, H, W) or (N, C, H, W)", name, a.shape)
    if a.shape[0] < 1:
        raise _bad("%s: no examples (shape %s)", name, a.shape)
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a)
        if bad.any():
            ix = _first_bad(np, bad)
            raise _bad("%s%s = %r: features must be finite (example %d)", name, _index_text(ix), float(a[ix]), ix[0])
    x = np.ascontiguousarray(a, dtype=np.float32)
    if a.dtype.kind == "f" and a.dtype != np.float32:  # float64 values beyond float32's range become inf
        bad = ~np.isfinite(x)
        if bad.any():
            ix = _first_bad(np, bad)
            raise _bad("%s%s = %r does not fit in float32", name, _index_text(ix), float(a[ix]))
    s = x.shape
    if x.ndim == 2:
        shape = (1, 1, s[1])
    elif x.ndim == 3:
        shape = (1, s[1], s[2])
    elif x.ndim == 4:
        shape = (s[1], s[2], s[3])
    else:
        shape = (1, 1, int(np.prod(s[1:])))
    if min(shape) < 1:
        raise _bad("%s: shape %s has an empty dimension", name, s)
    if s[0] > 2**31 - 1 or int(np.prod(shape)) > 2**31 - 1:
        raise _bad("%s: shape %s is too large", name, s)
    return x, shape


def _labels(np, y, n, name, xname):
    a = np.asarray(y)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != 1:
        raise _bad("%s: shape %s; give one label per example: (N,) or (N, 1)", name, np.asarray(y).shape)
    if a.shape[0] != n:
        raise _bad("%s has %d labels and %s %d examples", name, a.shape[0], xname, n)
    if a.dtype.kind == "f":
        bad = ~np.isfinite(a) | (a != np.floor(a))
        if bad.any():
            i = int(np.argmax(bad))
            raise _bad("%s[%d] = %r: labels are whole numbers 0, 1, ..., classes - 1", name, i, float(a[i]))
    elif a.dtype.kind not in "iub":
        raise _bad("%s: dtype %s; labels are integers 0, 1, ..., classes - 1", name, a.dtype)
    bad = (a < 0) | (a > 2**31 - 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise _bad("%s[%d] = %s: labels are 0, 1, ..., classes - 1", name, i, a[i])
    return np.ascontiguousarray(a, dtype=np.int32)


class Arrays:
    """Data for dpfl.train from NumPy arrays (dpfl.arrays builds it).  x, y, group, x_test, y_test: the arrays the
    library reads (x is the caller's X itself when X is float32 and C-contiguous: `shared` says so), client_keys the
    client each group id stands for (sorted distinct client_ids), name the run's data.dataset after "memory:"."""

    def __init__(self, x, y, shape, group, client_keys, x_test, y_test, name, shared):
        self.x, self.y, self.shape, self.group, self.client_keys = x, y, shape, group, client_keys
        self.x_test, self.y_test, self.name, self.shared = x_test, y_test, name, shared

    def __repr__(self):
        return "dpfl.Arrays(%s: %d examples of %s%s, %s; X %s)" % (
            self.name, self.x.shape[0], "x".join(map(str, self.shape)),
            ", %d clients" % len(self.client_keys) if self.client_keys is not None else "",
            "%d test examples" % self.x_test.shape[0] if self.x_test is not None else "test set held out",
            "shared, not copied" if self.shared else "copied to float32")

    def _struct(self, x, y, group=None, groups=0):
        P = ctypes.POINTER
        d = R.Dataset()
        d.n = x.shape[0]
        d.c, d.h, d.w = self.shape
        d.x = x.ctypes.data_as(P(ctypes.c_float))
        d.y = y.ctypes.data_as(P(ctypes.c_int32))
        if group is not None:
            d.groups = groups
            d.group = group.ctypes.data_as(P(ctypes.c_int32))
        return d

    def structs(self):
        """(train, test) dpfl_dataset structs over the arrays (test None: held out by data.test_fraction)."""
        g = len(self.client_keys) if self.client_keys is not None else 0
        train = self._struct(self.x, self.y, self.group, g)
        test = self._struct(self.x_test, self.y_test) if self.x_test is not None else None
        return train, test


def arrays(X, y, client_ids=None, X_test=None, y_test=None, name="arrays"):
    """The data of a run as NumPy arrays: X (N, features), (N, H, W) or (N, C, H, W) (any real dtype; float32
    C-contiguous is passed to the library without a copy), y (N,) integer labels 0..classes-1, client_ids (N,)
    optional: each example's client (any sortable values; client k is the k-th smallest id), which
    data.partition = natural splits by.  X_test, y_test: the test set; without them data.test_fraction of each
    client's examples is held out, as for csv: files.  Bad values raise DpflValueError naming the array and index.
    The arrays must stay unchanged until the run ends."""
    np = _np()
    x, shape = _features(np, X, "X")
    yy = _labels(np, y, x.shape[0], "y", "X")
    shared = x is X or (isinstance(X, np.ndarray) and np.shares_memory(x, X))
    group = keys = None
    if client_ids is not None:
        ids = np.asarray(client_ids)
        if ids.ndim != 1 or ids.shape[0] != x.shape[0]:
            raise _bad("client_ids: shape %s; give one client id per example (%d)", ids.shape, x.shape[0])
        if ids.dtype.kind == "f" and not np.isfinite(ids).all():
            i = int(np.argmax(~np.isfinite(ids)))
            raise _bad("client_ids[%d] = %r is not a client id", i, float(ids[i]))
        keys, inv = np.unique(ids, return_inverse=True)
        group = np.ascontiguousarray(inv, dtype=np.int32)
    xt = yt = None
    if (X_test is None) != (y_test is None):
        raise _bad("give both X_test and y_test, or neither (then data.test_fraction is held out)")
    if X_test is not None:
        xt, tshape = _features(np, X_test, "X_test")
        if tshape != shape:
            raise _bad("X_test's examples are %s, X's %s", "x".join(map(str, tshape)), "x".join(map(str, shape)))
        yt = _labels(np, y_test, xt.shape[0], "y_test", "X_test")
    if not name or any(ch.isspace() for ch in str(name)):
        raise _bad("name: %r must be a non-empty word (the run's data.dataset is memory:NAME)", name)
    return Arrays(x, yy, shape, group, keys, xt, yt, str(name), shared)


def load_dataset(name, data_dir=None, seed=0):
    """A dataset the library knows ("mnist", "heart", a csv:/idx:/npy: spec, ...), as dpfl train loads it for
    data.dataset = name (no normalization): (X, y, X_test, y_test) NumPy arrays, X shaped (N, C, H, W) for images
    and (N, features) for tables."""
    np = _np()
    tr, te, err = R.Dataset(), R.Dataset(), Error()
    st = lib.dpfl_dataset_load(str(name).encode(), data_dir.encode() if data_dir else None, int(seed),
                               ctypes.byref(tr), ctypes.byref(te), ctypes.byref(err))
    _raise_if(st, err)
    out = []
    try:
        for d in (tr, te):
            shape = (d.n, d.c, d.h, d.w) if d.h > 1 else (d.n, d.c * d.w)
            x = np.ctypeslib.as_array(d.x, shape=(d.n * d.dim,)).copy().reshape(shape) if d.n else \
                np.zeros((0,) + shape[1:], np.float32)
            y = np.ctypeslib.as_array(d.y, shape=(d.n,)).copy() if d.n else np.zeros(0, np.int32)
            out += [x, y]
    finally:
        lib.dpfl_dataset_free(ctypes.byref(tr))
        lib.dpfl_dataset_free(ctypes.byref(te))
    return tuple(out)


# ---------------------------------------------------------------------------------------------- config
def _value_text(key, v):
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        return repr(float(v))
    if isinstance(v, str):
        return v
    if isinstance(v, (list, tuple)):
        return ",".join(_value_text(key, e) for e in v)
    raise _bad("%s: %r is not a config value (give a string, number, bool or a list of them)", key, v)


def _assignments(d):
    """[(section.key, text)] from {"section": {"key": value}} and/or {"section.key": value}, in order."""
    out = []
    for k, v in d.items():
        if isinstance(v, dict):
            for k2, v2 in v.items():
                out.append(("%s.%s" % (k, k2), _value_text("%s.%s" % (k, k2), v2)))
        elif isinstance(k, str) and "." in k:
            out.append((k, _value_text(k, v)))
        else:
            raise _bad("config: %r: give sections as dicts ({\"fl\": {\"rounds\": 20}}) or keys as \"fl.rounds\"", k)
    return out


class _Config:
    """A dpfl_config on the library's heap (dpfl_config_create), released with the object."""

    def __init__(self, ini_path=None):
        err, p = Error(), ctypes.c_void_p()
        self.ptr = None
        _raise_if(lib.dpfl_config_create(os.fsencode(ini_path) if ini_path is not None else None, ctypes.byref(p),
                                         ctypes.byref(err)), err)
        self.ptr = p.value
        self.notes = []

    def set(self, key, text):
        err, note = Error(), ctypes.create_string_buffer(1024)
        _raise_if(lib.dpfl_config_set_noted(self.ptr, ("%s=%s" % (key, text)).encode(), note, len(note),
                                            ctypes.byref(err)), err)
        if note.value:
            self.notes.append(note.value.decode())

    def unset(self, key):
        err = Error()
        _raise_if(lib.dpfl_config_unset(self.ptr, key.encode(), ctypes.byref(err)), err)

    def infer_clients(self):
        err, inferred = Error(), ctypes.c_int(0)
        _raise_if(lib.dpfl_config_infer_clients(self.ptr, ctypes.byref(inferred), ctypes.byref(err)), err)

    def ini(self):
        p = lib.dpfl_config_to_ini(self.ptr)
        if not p:
            raise MemoryError("dpfl_config_to_ini")
        try:
            return ctypes.string_at(p).decode()
        finally:
            lib.dpfl_text_free(p)

    def __del__(self):
        if getattr(self, "ptr", None):
            lib.dpfl_config_destroy(self.ptr)
            self.ptr = None


def _ini_value(ini, key):
    """The value of section.key in INI text (dpfl_config_to_ini writes every key)."""
    cp = configparser.ConfigParser(interpolation=None, strict=False)
    cp.read_string(ini)
    sec, k = key.split(".", 1)
    return cp.get(sec, k, fallback=None)


def _build_config(config, overrides, data, out, resume):
    if resume:
        run_ini = os.path.join(out, "config.ini")
        if not os.path.isfile(run_ini):
            raise _bad("resume: %s is not a run folder (no config.ini, which a run writes when it starts)", out)
        cfg = _Config(run_ini)
        keep = cfg.ini()
        sets = []
        if isinstance(config, dict):
            sets += _assignments(config)
        elif config is not None:
            raise _bad("resume: the run keeps its own config.ini; give config=None or a dict (of which only %s may "
                       "differ from the run's)", ", ".join(RESUMABLE_KEYS))
        sets += _assignments(overrides or {})
        for key, text in sets:
            if key in RESUMABLE_KEYS:
                cfg.set(key, text)
                continue
            probe = _Config(run_ini)  # the same value as the run's, or refused as the command line refuses it
            probe.set(key, text)
            if probe.ini() != keep:
                raise _bad("%s=%s: a resumed run keeps its config (%s says %s = %s); only %s may change", key, text,
                           run_ini, key, _ini_value(keep, key), ", ".join(RESUMABLE_KEYS))
        return cfg
    if isinstance(config, dict):
        cfg = _Config()
        sets = _assignments(config)
    elif isinstance(config, (str, bytes, os.PathLike)):
        cfg = _Config(config)
        sets = []
    else:
        raise _bad("config: give an INI file's path or a dict of sections, not %s", type(config).__name__)
    sets += _assignments(overrides or {})
    for key, text in sets:
        cfg.set(key, text)
    if data is not None:  # the arrays replace the config's dataset (and its separate test files)
        cfg.set("data.dataset", "memory:" + data.name)
        if _ini_value(cfg.ini(), "data.test"):
            cfg.unset("data.test")
    cfg.infer_clients()
    return cfg


# ---------------------------------------------------------------------------------------------- runs
def _num(v):
    return None if v is None or (isinstance(v, float) and math.isnan(v)) else v


def _jsonl(path):
    out = []
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    out.append(json.loads(line))
    return out


class Run:
    """A run folder as plain Python data (load_run, and what train returns):
      dir          the folder
      config       config.ini as {section: {key: value text}}
      metrics      metrics.jsonl: one dict per released round (what the epsilon covers)
      diagnostics  diagnostics.jsonl: one dict per round (participants, losses, clipping: covered by no epsilon)
      summary      summary.json (None while a run has not written it)
      events       summary.json's "events": per level, the composition behind each reported epsilon (its tree)
      history      per round: the metrics dict plus "participants" and "train_loss" from the diagnostics
      model        model.bin as {name: float32 array}, named like a PyTorch nn.Sequential state_dict ("0.weight")
      standardization  how the model's inputs were standardized in training, as model.bin records it: (mean, std),
                   float64 arrays of 1 value, one per channel or one per input value (feed it (x - mean) / std), or
                   None (raw inputs, or a model.bin older than the record)
    epsilon(level) is summary.json's record- or client-level epsilon."""

    def __init__(self, path):
        self.dir = os.fspath(path)
        if not os.path.isdir(self.dir):
            raise _bad("load_run: %s is not a folder", self.dir)
        ini = os.path.join(self.dir, "config.ini")
        if not os.path.isfile(ini):
            raise _bad("load_run: %s is not a run folder (no config.ini)", self.dir)
        cp = configparser.ConfigParser(interpolation=None, strict=False)
        cp.optionxform = str
        cp.read(ini)
        self.config = {s: dict(cp.items(s)) for s in cp.sections()}
        self.metrics = _jsonl(os.path.join(self.dir, "metrics.jsonl"))
        self.diagnostics = _jsonl(os.path.join(self.dir, "diagnostics.jsonl"))
        sp = os.path.join(self.dir, "summary.json")
        self.summary = None
        if os.path.exists(sp):
            with open(sp) as f:
                self.summary = json.load(f)
        self.events = (self.summary or {}).get("events")
        diag = {d.get("round"): d for d in self.diagnostics}
        self.history = []
        for m in self.metrics:
            h = dict(m)
            d = diag.get(m.get("round"), {})
            for k in ("participants", "train_loss"):
                if k in d and k not in h:
                    h[k] = d[k]
            self.history.append(h)
        self._model = None

    def __repr__(self):
        return "dpfl.Run(%r: %d rounds%s)" % (self.dir, len(self.metrics),
                                             ", epsilon %s" % self._eps_text() if self.summary else "")

    def _eps_text(self):
        try:
            return "%.4g" % self.epsilon()
        except DpflValueError:
            return "none (not private)"

    def epsilon(self, level=None):
        """summary.json's epsilon: level "record" (record-level DP, the default when it is on) or "client"."""
        s = self.summary
        if s is None:
            raise _bad("%s has no summary.json yet (the run has not finished a session)", self.dir)
        rec = self.config.get("record_dp", {}).get("enabled") == "yes"
        cli = self.config.get("client_dp", {}).get("enabled") == "yes"
        level = level or ("record" if rec else "client" if cli else None)
        if level == "record" and rec:
            return s.get("epsilon")
        if level == "client" and (cli or rec and "client_epsilon" in s):
            v = s.get("client_epsilon")
            if v is None:
                raise _bad("%s: the client level is not private: %s", self.dir, s.get("client_epsilon_reason", ""))
            return v
        if level not in (None, "record", "client"):
            raise _bad("epsilon: level %r is not record or client", level)
        raise _bad("%s: no %s-level DP in this run (record_dp and client_dp are off)", self.dir,
                   level or "record- or client")

    @property
    def model(self):
        self._read_model()
        return self._model

    @property
    def standardization(self):
        self._read_model()
        return self._standardization

    def _read_model(self):
        if self._model is None:
            np = _np()
            fd, tmp = tempfile.mkstemp(suffix=".npz")
            os.close(fd)
            try:
                err = Error()
                _raise_if(lib.dpfl_model_file_export_npz(os.fsencode(os.path.join(self.dir, "model.bin")),
                                                         os.fsencode(tmp), ctypes.byref(err)), err)
                with np.load(tmp) as z:
                    self._model = {k: z[k] for k in z.files if not k.startswith("dpfl_")}
                    self._standardization = ((z["dpfl_input_mean"], z["dpfl_input_std"])
                                             if "dpfl_input_mean" in z.files else None)
            finally:
                os.unlink(tmp)


def load_run(path):
    """The run folder at path (dpfl train's, or dpfl.train's) as a Run."""
    return Run(path)


def _round_dict(r):
    line = r.metrics_line.decode() if r.metrics_line else "{}"
    return {"round": r.round, "rounds": r.rounds, "participants": r.participants, "train_loss": _num(r.train_loss),
            "test_accuracy": _num(r.test_accuracy), "test_loss": _num(r.test_loss),
            "record_epsilon": _num(r.record_epsilon), "client_epsilon": _num(r.client_epsilon),
            "wall_seconds": r.wall_seconds, "metrics": json.loads(line)}


def train(config, data=None, out="runs/python", on_round=None, resume=False, force=False, quiet=True,
          overrides=None):
    """Run what `dpfl train` runs and return the Run folder.
      config     an INI file's path, or a dict of the same sections and keys ({"fl": {"rounds": 20}}), parsed and
                 checked by the library as the command line's --set is; with resume, None (the run's config.ini)
                 or a dict whose keys other than fl.rounds, run.threads and run.eval_every match the run's
      data       dpfl.arrays(...) (data.dataset becomes memory:NAME), or None: the config's dataset
      out        the run folder; force replaces a previous run there, resume continues it from its checkpoint
      on_round   called after each released round (its checkpoint written) with a dict: round, rounds,
                 participants, train_loss, test_accuracy, test_loss, record_epsilon, client_epsilon (None when
                 off or not evaluated), wall_seconds and metrics (the round's metrics.jsonl line); a true return
                 value stops the run there.  An exception in it (KeyboardInterrupt: Ctrl-C during training too)
                 stops the run after the round and is raised again once the run folder is complete: resume=True
                 continues it.
      quiet      no progress line on stderr
      overrides  another dict of keys, applied after config"""
    if data is not None and not isinstance(data, Arrays):
        raise _bad("data: give dpfl.arrays(X, y, ...) or None (the config's dataset), not %s", type(data).__name__)
    out = os.fspath(out)
    cfg = _build_config(config, overrides, data, out, resume)
    for note in cfg.notes:
        if not quiet:
            print("dpfl: note: %s" % note, file=sys.stderr)
    raised, interrupted = [], []

    def trampoline(_ctx, rp):
        # never let an exception cross into C: keep it, stop the run after this (already released) round
        try:
            if interrupted:
                return 1
            stop = on_round is not None and on_round(_round_dict(rp.contents))
            return 1 if stop or interrupted else 0
        except BaseException as e:  # noqa: B902 -- KeyboardInterrupt and SystemExit included, re-raised below
            raised.append(e)
            return 1

    cb = R.ROUND_FN(trampoline)
    opt = R.RunOptions()
    opt.out_dir = out.encode()
    opt.quiet = 1 if quiet else 0
    opt.resume = 1 if resume else 0
    opt.force = 1 if force else 0
    opt.on_round = cb
    keep = None
    if data is not None:
        tr, te = data.structs()
        keep = (tr, te, data)
        opt.train = ctypes.pointer(tr)
        if te is not None:
            opt.test = ctypes.pointer(te)
    err = Error()
    # Ctrl-C: Python's handler runs only when Python code does (in the trampoline, after a round): it stops the run
    # there, and KeyboardInterrupt is raised once dpfl_run has returned with the run folder complete
    old = None
    if threading.current_thread() is threading.main_thread():
        def on_sigint(_sig, _frame):
            interrupted.append(True)
        old = signal.signal(signal.SIGINT, on_sigint)
    try:
        st = lib.dpfl_run(cfg.ptr, ctypes.byref(opt), ctypes.byref(err))
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)
    del keep
    if raised:
        raise raised[0]
    if interrupted:
        raise KeyboardInterrupt("dpfl.train: interrupted after round %d; resume=True continues the run in %s"
                                % (len(_jsonl(os.path.join(out, "metrics.jsonl"))), out))
    _raise_if(st, err)
    return Run(out)
