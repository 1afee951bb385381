"""The DpEvent-style tree and the Opacus-style conveniences: the library normalizes the tree (Python computes
nothing), so each number must equal the flat event's; shapes with no flat form are refused with their path."""
import math

import pytest

import dpfl


def step(q=0.01, z=1.1):
    return dpfl.PoissonSampled(q, dpfl.Gaussian(z))


def test_tree_equals_flat_events():
    run = dpfl.SelfComposed(step(), 1000)
    (e,) = run.events()
    assert e == dpfl.event_poisson(0.01, 1.1, 1000)
    for acc in ("rdp", "pld"):
        assert run.epsilon(1e-5, acc).epsilon == dpfl.account_epsilon(dpfl.event_poisson(0.01, 1.1, 1000), 1e-5,
                                                                      acc).epsilon


def test_counts_multiply_through_self_composed_and_held_by():
    tree = dpfl.HeldBy(3, dpfl.SelfComposed(dpfl.Composed([step(), dpfl.SampledWithoutReplacement(100, 10,
                                                                                                  dpfl.Gaussian(0.7))]),
                                            5))
    a, b = tree.events()
    assert (a.kind, a.count, a.q) == (dpfl.EventKind.POISSON, 15, 0.01)
    assert (b.kind, b.count, b.n, b.batch, b.adjacency) == (dpfl.EventKind.FIXED, 15, 100, 10,
                                                            dpfl.Adjacency.REPLACE_ONE)
    # a record held by 2 clients costs what twice its steps cost
    assert dpfl.HeldBy(2, dpfl.SelfComposed(step(), 500)).epsilon(1e-5).epsilon == \
        dpfl.SelfComposed(step(), 1000).epsilon(1e-5).epsilon


def test_two_stage_and_skellam():
    (t,) = dpfl.TwoStage(0.5, 4, step(0.1, 2.0)).events()
    assert t == dpfl.event_two_stage(0.5, 0.1, 2.0, 4)
    (s,) = dpfl.PoissonSampled(0.03, dpfl.Skellam(900, 30, 3.0)).events()
    assert (s.kind, s.q, s.d1, s.d2, s.z, s.adjacency) == (dpfl.EventKind.SKELLAM, 0.03, 900, 30, 3.0,
                                                           dpfl.Adjacency.ZERO_OUT)


def test_refusals_name_the_node():
    with pytest.raises(dpfl.DpflValueError, match=r"tree\.poisson_sampled\.event: \"composed\" here"):
        dpfl.PoissonSampled(0.1, dpfl.Composed([dpfl.Gaussian(1.0)])).events()
    with pytest.raises(dpfl.DpflValueError, match="sampling rate q"):
        step(q=1.5).events()
    with pytest.raises(TypeError):
        dpfl.SelfComposed(dpfl.event_gaussian(1.0), 3).tree()
    with pytest.raises(dpfl.NotPrivateError):
        dpfl.Composed([step(), dpfl.NonPrivate()]).epsilon(1e-5)


def test_dp_accounting_style_accountant():
    acc = dpfl.RdpAccountant().compose(step(), 1000).compose(dpfl.Gaussian(30.0))
    want = dpfl.account_epsilon([dpfl.event_poisson(0.01, 1.1, 1000), dpfl.event_gaussian(30.0)], 1e-5).epsilon
    assert acc.get_epsilon(1e-5) == want
    assert acc.get_delta(want) == pytest.approx(1e-5, rel=1e-3)
    pld = dpfl.PldAccountant().compose(step(), 1000)
    assert pld.get_epsilon(1e-5) < dpfl.RdpAccountant().compose(step(), 1000).get_epsilon(1e-5)


def test_float_conveniences_refuse_asymptotic_numbers():
    """GDP answers a sampled Gaussian with its CLT limit, labelled asymptotic in the Guarantee; a bare float would
    drop the label, so get_epsilon refuses it."""
    assert dpfl.SelfComposed(step(), 1000).epsilon(1e-5, "gdp").asymptotic
    with pytest.raises(dpfl.DpflValueError, match="asymptotic"):
        dpfl.RdpAccountant("gdp").compose(step(), 1000).get_epsilon(1e-5)
    acc = dpfl.Accountant("gdp")
    acc.step(noise_multiplier=1.1, sample_rate=0.01)
    with pytest.raises(dpfl.DpflValueError, match="asymptotic"):
        acc.get_epsilon(1e-5)
    # an exact GDP answer (no sampling) is a bound and is returned
    assert dpfl.RdpAccountant("gdp").compose(dpfl.Gaussian(2.0), 3).get_epsilon(1e-5) > 0


def test_opacus_style_accountant_and_noise():
    acc = dpfl.Accountant("rdp")
    for _ in range(300):
        acc.step(noise_multiplier=1.1, sample_rate=0.01)
    acc.step(noise_multiplier=2.0, sample_rate=0.02)
    assert acc.history == [(1.1, 0.01, 300), (2.0, 0.02, 1)] and len(acc) == 301
    assert acc.get_epsilon(1e-5) == dpfl.account_epsilon([dpfl.event_poisson(0.01, 1.1, 300),
                                                          dpfl.event_poisson(0.02, 2.0, 1)], 1e-5).epsilon
    z = dpfl.get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=0.01, epochs=5)
    assert z == dpfl.get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=0.01, steps=500)
    eps = dpfl.account_epsilon(dpfl.event_poisson(0.01, z, 500), 1e-5).epsilon
    assert eps <= 3.0 and eps > 3.0 * 0.999  # the smallest noise within the target, on the safe side
    assert dpfl.account_epsilon(dpfl.event_poisson(0.01, z * 0.99, 500), 1e-5).epsilon > 3.0
    # 7 / 0.07 is 99.99999999999999 in floating point: the 100 steps that run, not int()'s 99 (an audit: epsilon
    # 1.005 against a target of 1); a fractional count rounds up
    z7 = dpfl.get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.07, epochs=7)
    assert z7 == dpfl.get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.07, steps=100)
    assert dpfl.account_epsilon(dpfl.event_poisson(0.07, z7, 100), 1e-5).epsilon <= 1.0
    assert (dpfl.get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.3, epochs=1) ==
            dpfl.get_noise_multiplier(target_epsilon=1.0, target_delta=1e-5, sample_rate=0.3, steps=4))
    with pytest.raises(dpfl.DpflValueError, match="exactly one of epochs and steps"):
        dpfl.get_noise_multiplier(target_epsilon=3.0, target_delta=1e-5, sample_rate=0.01)
    assert math.isfinite(z)
