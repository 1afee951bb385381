"""dpfl: libdpfl from Python -- the privacy accountants (RDP, PLD, Gaussian/f-DP, rPDP-FL SCF) and the run driver
(train from a dict or INI config and NumPy arrays, read run folders), through ctypes.

    import dpfl
    ev = dpfl.event_poisson(q=0.01, z=1.1, count=100_000)
    dpfl.account_epsilon(ev, delta=1e-5, accountant="pld").epsilon
    dpfl.calibrate_noise(dpfl.event_poisson(0.01, 1.0, 10_000), target_epsilon=3, delta=1e-5)

Events may also be written as Google dp_accounting writes them, and accounted as Opacus users do (dpfl.dp_event):

    dpfl.SelfComposed(dpfl.PoissonSampled(0.01, dpfl.Gaussian(1.1)), 10_000).epsilon(1e-5).epsilon
    dpfl.get_noise_multiplier(target_epsilon=3, target_delta=1e-5, sample_rate=0.01, epochs=10)

Training (dpfl.train, docs/python.md):

    run = dpfl.train({"fl": {"rounds": 20}}, data=dpfl.arrays(X, y, client_ids=ids), out="runs/x")
    run.history, run.epsilon(), run.model["0.weight"], dpfl.load_run("runs/x").summary

dpfl.library_path() is the libdpfl.so loaded and dpfl.library_source() where it was found (dpfl._lib: DPFL_LIB,
the installation this package belongs to, the checkout's build/, or the system's).  Each function mirrors a C
function of include/dpfl/; errors raise DpflError (DpflValueError for bad arguments) carrying the library's message.
"""

from . import _lib
from .accountant import *  # noqa: F401,F403
from .accountant import __all__ as _all
from .dp_event import *  # noqa: F401,F403
from .dp_event import __all__ as _all_events
from .train import *  # noqa: F401,F403
from .train import __all__ as _all_train


def library_path():
    """The path of the libdpfl.so this package loaded."""
    return _lib.path


def library_source():
    """Why that library: "DPFL_LIB", "the installation this package belongs to", "the checkout's build/", ..."""
    return _lib.source


__all__ = ["library_path", "library_source"] + _all + _all_events + _all_train
