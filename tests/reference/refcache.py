"""Reference values computed once: a memo of the brute-force references (events_ref.py, twostage_ref.py) that the
differential tests ask for, kept in tests/reference/cache.json.

The references are deterministic functions of their arguments, of the reference code and of numpy/scipy.  So an
entry is keyed by the exact arguments (repr of floats: round-trips) and the whole file by a digest of every
tests/reference/*.py file plus the numpy and scipy versions.  When the digest differs (the reference code changed,
or another numpy/scipy) no entry is used: every value is computed again, as without a cache, and the test prints
that the cache is stale.  The cache is written only on request:
    DPFL_REFERENCE_REFRESH=1 python3 -m pytest -q python/tests/test_reference_events.py \
        python/tests/test_reference_twostage.py
(with DPFL_LIB / DPFL_CLI set as tests/python.sh sets them).  A cached value is trusted only as far as the spot
check goes: check_sample() recomputes a rotating sample of entries and the tests fail on any difference.

This only stores numbers the reference computed; the tests' cases, the library calls and the comparisons are the
same with or without it (Knuth's memo functions: D. Michie, "Memo functions and machine learning", Nature 1968).
"""

import hashlib
import json
import math
import os

HERE = os.path.dirname(os.path.abspath(__file__))
PATH = os.environ.get("DPFL_REFERENCE_CACHE") or os.path.join(HERE, "cache.json")


def digest():
    """sha256 of the reference code and the numeric libraries' versions."""
    import numpy
    import scipy
    h = hashlib.sha256()
    for name in sorted(os.listdir(HERE)):
        if name.endswith(".py"):
            with open(os.path.join(HERE, name), "rb") as f:
                h.update(name.encode() + b"\0" + f.read() + b"\0")
    h.update(("numpy %s scipy %s" % (numpy.__version__, scipy.__version__)).encode())
    return h.hexdigest()


class Memo:
    """One section (a test file's references) of the cache file."""

    def __init__(self, section, path=PATH):
        self.section, self.path, self.digest = section, path, digest()
        self.entries, self.hits, self.misses, self.stale, self.thunks = {}, 0, 0, False, {}
        try:
            with open(path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            data = {}
        if data.get("digest") == self.digest:
            self.entries = dict(data.get("sections", {}).get(section, {}))
        elif data:
            self.stale = True

    def get(self, key, compute):
        """The cached value of key (a string), else compute() (a JSON-able value), remembered."""
        if key in self.entries:
            self.hits += 1
            self.thunks[key] = compute
            return self.entries[key]
        self.misses += 1
        value = compute()
        self.entries[key] = value
        return value

    def save_if_asked(self):
        """Writes this section back when DPFL_REFERENCE_REFRESH=1 (other sections kept if the digest matches)."""
        if os.environ.get("DPFL_REFERENCE_REFRESH") != "1":
            return False
        try:
            with open(self.path) as f:
                data = json.load(f)
        except (OSError, ValueError):
            data = {}
        if data.get("digest") != self.digest:
            data = {"digest": self.digest, "sections": {}}
        data["sections"][self.section] = dict(sorted(self.entries.items()))
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(data, f, indent=0, sort_keys=True)
            f.write("\n")
        os.replace(tmp, self.path)
        return True

    def describe(self):
        if self.stale:
            return ("reference cache %s: stale (reference code or numpy/scipy changed): all %d values computed; "
                    "DPFL_REFERENCE_REFRESH=1 rewrites it" % (os.path.basename(self.path), self.misses))
        return "reference cache %s [%s]: %d values cached, %d computed" % (os.path.basename(self.path), self.section,
                                                                            self.hits, self.misses)

    def check_sample(self, count, seed):
        """Recomputes `count` of the values served from the cache in this run (chosen by seed) and returns the keys
        whose value differs: a cache that is not what the reference computes fails the tests that use it."""
        keys = sorted(self.thunks)
        if not keys:
            return []
        step = max(1, len(keys) // count)
        return [k for k in keys[seed % step::step][:count] if not same(self.thunks[k](), self.entries[k])]


def same(a, b):
    """Equality of JSON values, with NaN equal to NaN (floats compared exactly)."""
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return a == b
