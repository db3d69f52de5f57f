"""The tanh routes of the hand-written recurrences (:mod:`attnaudit.models.activations`): both compute tanh, and
the route follows the CPU vendor and PyTorch build, or the override, never a timing."""

import pytest
import torch

from attnaudit.models import activations


def test_both_routes_compute_tanh(tanh_route):
    assert activations.tanh_route() == tanh_route
    x = torch.cat([torch.linspace(-30, 30, 20001), torch.tensor([0.0, 1e-9, -1e-9, float("inf"), -float("inf")])])
    expected = torch.tanh(x.double())
    got = activations.tanh(x)
    torch.testing.assert_close(got.double(), expected, atol=2e-7, rtol=0)
    in_place = x.clone()
    assert activations.tanh_(in_place) is in_place
    torch.testing.assert_close(in_place, got, atol=0, rtol=0)


@pytest.mark.parametrize(
    "machine,vendor,mkl,route",
    [
        ("x86_64", "GenuineIntel", True, "native"),  # MKL's vsTanh is Intel's fast path
        ("x86_64", "AuthenticAMD", True, "sigmoid"),  # MKL's generic path: 2.5 ns vs ~1 ns per element
        ("AMD64", "HygonGenuine", True, "sigmoid"),
        ("x86_64", "AuthenticAMD", False, "native"),  # no MKL: PyTorch's own vectorised tanh
        ("aarch64", None, False, "native"),
        ("x86_64", None, True, "native"),  # vendor unknown: PyTorch's default
    ],
)
def test_route_follows_the_cpu_vendor_and_build(machine, vendor, mkl, route):
    assert activations.route_for(machine, vendor, mkl) == route
    assert activations.route_for(machine, vendor, mkl, override="native") == "native"


def test_a_bad_override_names_the_variable_and_the_choices():
    with pytest.raises(ValueError, match="ATTNAUDIT_TANH='fast'.*native, sigmoid"):
        activations.route_for("x86_64", "GenuineIntel", True, override="fast")
