"""Metric properties: TVD ∈ [0, 1], JSD ∈ [0, ln 2] in nats, both symmetric and 0 on equal inputs."""

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy.stats import kendalltau

from attnaudit.jain_wallace.adversarial import relaxed_objective
from attnaudit.metrics import LN2, jsd, kendall_tau, kendall_tau_rows, tvd

weights = arrays(np.float64, st.integers(1, 12), elements=st.floats(0, 1e3, allow_nan=False))


def _distributions(a, b):
    n = min(len(a), len(b))
    a, b = a[:n] + 1e-12, b[:n] + 1e-12  # hypothesis may draw all-zero rows
    return torch.tensor(a / a.sum()), torch.tensor(b / b.sum())


@settings(max_examples=200, deadline=None)
@given(weights, weights)
def test_tvd_bounded_and_symmetric(a, b):
    p, q = _distributions(a, b)
    d = float(tvd(p, q))
    assert 0.0 <= d <= 1.0 + 1e-12
    assert d == pytest.approx(float(tvd(q, p)), abs=1e-12)
    assert float(tvd(p, p)) == 0.0


@settings(max_examples=200, deadline=None)
@given(weights, weights)
def test_jsd_bounded_symmetric_zero_on_equal(a, b):
    p, q = _distributions(a, b)
    d = float(jsd(p, q))
    assert 0.0 <= d <= LN2
    assert d == pytest.approx(float(jsd(q, p)), abs=1e-9)
    assert float(jsd(p, p)) == pytest.approx(0.0, abs=1e-9)


def test_jsd_in_nats_reaches_ln2_on_disjoint_supports():
    p, q = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 0.5, 0.5])
    assert float(jsd(p, q)) == pytest.approx(math.log(2), abs=1e-6)
    assert float(tvd(p, q)) == pytest.approx(1.0)


@settings(max_examples=50, deadline=None)
@given(weights, weights)
def test_adversary_objective_uses_the_same_jsd(a, b):
    """With k = 1 and λ = 0 the relaxed objective of Eq. 1–2 is JSD(α, α̂) itself."""
    p, q = _distributions(a, b)
    value = relaxed_objective(
        p[None, None, :], q[None, :], torch.ones(1, 1, 2) / 2, torch.ones(1, 2) / 2, epsilon=0.01, lam=0.0
    )
    assert float(value[0]) == pytest.approx(float(jsd(p, q)), abs=1e-8)


def test_adversary_objective_weighs_each_pair_as_eq_2_prints_it():
    """J&W Eq. 2: f = Σ_i JSD(α⁽ⁱ⁾, α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α⁽ⁱ⁾, α⁽ʲ⁾), each unordered pair once."""
    k, generator = 4, torch.Generator().manual_seed(3)
    alpha = torch.softmax(torch.randn(1, k, 7, generator=generator, dtype=torch.float64), dim=-1)
    alpha_hat = torch.softmax(torch.randn(1, 7, generator=generator, dtype=torch.float64), dim=-1)
    probs = torch.full((1, k, 2), 0.5, dtype=torch.float64)
    value = relaxed_objective(alpha, alpha_hat, probs, probs[:, 0], epsilon=0.01, lam=0.0)
    to_hat = sum(float(jsd(alpha[0, i], alpha_hat[0])) for i in range(k))
    pairs = sum(float(jsd(alpha[0, i], alpha[0, j])) for i in range(k) for j in range(i + 1, k))
    assert float(value[0]) == pytest.approx(to_hat + pairs / (k * (k - 1)), rel=1e-12)


def test_kendall_tau_is_scipy_tau_b_with_p_value():
    a, b = np.array([1.0, 2, 2, 3, 5]), np.array([2.0, 1, 3, 3, 4])
    expected = kendalltau(a, b, variant="b")
    assert kendall_tau(a, b) == pytest.approx((expected.statistic, expected.pvalue))
    assert all(np.isnan(kendall_tau(np.ones(4), a[:4])))
    assert all(np.isnan(kendall_tau(a[:1], b[:1])))


def test_kendall_tau_of_many_rankings_is_kendall_tau_of_each():
    """One SciPy call per length gives each pair's τ-b and p-value exactly as a call of its own: ties (SciPy's
    asymptotic p), no ties (its exact p up to 33 items), a constant ranking, a NaN score, fewer than two items,
    float32 scores."""
    rng = np.random.default_rng(1)
    a, b = [], []
    for n in [0, 1, 2, 3, 3, 5, 8, 8, 8, 20, 33, 34, 60, 60, 300]:
        x = rng.normal(size=n)
        a.append(x)
        b.append(x + rng.normal(size=n))
        a.append(rng.integers(0, 3, size=n).astype(np.float32))  # ties
        b.append(rng.integers(0, 3, size=n).astype(np.float32))
    a += [np.ones(6), np.array([0.1, np.nan, 0.3, 0.2])]
    b += [rng.normal(size=6), np.array([0.3, 0.2, 0.1, 0.4])]
    tau, p = kendall_tau_rows(a, b)
    each = np.array([kendall_tau(x, y) for x, y in zip(a, b)])
    assert np.array_equal(tau, each[:, 0], equal_nan=True) and np.array_equal(p, each[:, 1], equal_nan=True)
    assert np.isfinite(tau).sum() > len(a) // 2  # most pairs have a τ: the comparison is not of NaNs alone


def test_kendall_tau_of_float32_scores_is_computed_in_float64():
    """Importance scores are float32; SciPy >= 1.18 would return τ and p in float32 for them (τ rounded to ~1e-8, a
    p-value below ~1e-38 flushed to 0). Read as float64, the same scores give the same τ and p on every SciPy."""
    rng = np.random.default_rng(0)
    a = rng.normal(size=300).astype(np.float32)
    b = (a + 0.1 * rng.normal(size=300)).astype(np.float32)
    tau, p = kendall_tau(a, b)
    assert (tau, p) == kendall_tau(a.astype(np.float64), b.astype(np.float64))
    assert 0 < p < 1e-38  # a float32 p-value would be 0 here
    c = rng.integers(0, 4, size=11).astype(np.float32)  # ties
    d = rng.integers(0, 4, size=11).astype(np.float32)
    assert kendall_tau(c, d)[0] == kendalltau(c.astype(np.float64), d.astype(np.float64), variant="b").statistic
