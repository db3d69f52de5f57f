"""tanh for the hand-written recurrences (deletion leave-one-out, input gradients), by whichever route is fast on
this CPU.

PyTorch's x86 wheels compute float32 ``torch.tanh`` with MKL's vector maths (``vsTanh``). On Intel CPUs that is
the cheapest activation there is (0.28–0.31 ns per element, less than the sigmoid's 0.34–0.46), but MKL takes a
generic path on other vendors' CPUs: 2.5 ns per element on an AMD EPYC (Zen 4), six times its sigmoid (0.42 ns)
and three times tanh(x) = 2σ(2x) − 1 computed in four passes (~0.95 ns; ``docs/performance.md``, *tanh off
Intel CPUs*). The route is fixed once per process by the CPU's vendor and PyTorch's MKL build — never by a
timing, so one machine always computes the same numbers: ``native`` (``torch.tanh``) on Intel CPUs, on CPUs of
other architectures (no MKL) and wherever the vendor cannot be read, ``sigmoid`` on other x86 CPUs with an MKL
build; tensors on a GPU always take ``torch.tanh``. ``ATTNAUDIT_TANH=native|sigmoid`` overrides the choice
(benchmarks; every job's log names it).

The two routes agree to float32 rounding in absolute terms (2σ(2x) − 1 loses relative precision only where
|tanh x| is below ~10⁻⁷, far below anything an LSTM state or an attention score resolves).
"""

from __future__ import annotations

import os
import platform
from functools import cache
from pathlib import Path

import torch

ROUTES = ("native", "sigmoid")
OVERRIDE = "ATTNAUDIT_TANH"


def cpu_vendor() -> str | None:
    """The ``vendor_id`` of /proc/cpuinfo (``GenuineIntel``, ``AuthenticAMD``, …); None where it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def route_for(machine: str, vendor: str | None, mkl: bool, override: str | None = None) -> str:
    """The tanh route for a CPU architecture (``platform.machine()``), vendor and PyTorch build (module docstring);
    ``override``: the value of ``ATTNAUDIT_TANH``."""
    if override:
        if override not in ROUTES:
            raise ValueError(f"{OVERRIDE}={override!r}: expected one of {', '.join(ROUTES)}")
        return override
    x86 = machine.lower() in ("x86_64", "amd64")
    return "sigmoid" if x86 and mkl and vendor not in (None, "GenuineIntel") else "native"


@cache
def tanh_route() -> str:
    """``native`` or ``sigmoid`` on this machine, decided once per process."""
    return route_for(platform.machine(), cpu_vendor(), torch.backends.mkl.is_available(), os.environ.get(OVERRIDE))


def by_sigmoid(x: torch.Tensor) -> bool:
    """Whether tanh of ``x`` goes through the sigmoid: a CPU tensor on a machine whose route is ``sigmoid`` (a GPU
    has its own tanh kernel)."""
    return x.device.type == "cpu" and tanh_route() == "sigmoid"


def tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) as a new tensor, by :func:`tanh_route`."""
    return torch.mul(x, 2.0).sigmoid_().mul_(2.0).sub_(1.0) if by_sigmoid(x) else torch.tanh(x)


def tanh_(x: torch.Tensor) -> torch.Tensor:
    """tanh(x) in place, by :func:`tanh_route`."""
    return x.mul_(2.0).sigmoid_().mul_(2.0).sub_(1.0) if by_sigmoid(x) else x.tanh_()
