"""dpfl: the privacy accountants of libdpfl (RDP, PLD, Gaussian/f-DP, rPDP-FL SCF) through ctypes.

    import dpfl
    ev = dpfl.event_poisson(q=0.01, z=1.1, count=100_000)
    dpfl.account_epsilon(ev, delta=1e-5, accountant="pld").epsilon
    dpfl.calibrate_noise(dpfl.event_poisson(0.01, 1.0, 10_000), target_epsilon=3, delta=1e-5)

Events may also be written as Google dp_accounting writes them, and accounted as Opacus users do (dpfl.dp_event):

    dpfl.SelfComposed(dpfl.PoissonSampled(0.01, dpfl.Gaussian(1.1)), 10_000).epsilon(1e-5).epsilon
    dpfl.get_noise_multiplier(target_epsilon=3, target_delta=1e-5, sample_rate=0.01, epochs=10)

The library is build/libdpfl.so of this checkout, or the file named by DPFL_LIB, or the system's libdpfl.so
(dpfl._lib).  Each function mirrors the C function of include/dpfl/privacy.h of the same name; errors raise
DpflError (DpflValueError for bad arguments) carrying the library's message.
"""

from ._lib import path as library_path
from .accountant import *  # noqa: F401,F403
from .accountant import __all__ as _all
from .dp_event import *  # noqa: F401,F403
from .dp_event import __all__ as _all_events

__all__ = ["library_path"] + _all + _all_events
