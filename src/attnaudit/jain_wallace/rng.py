"""Counter-based random numbers: a value is a pure function of (instance seed, stream, sample, position).

The permutation and adversarial audits draw per-instance randomness from :func:`attnaudit.auditing.instance_seed`
(randomness is per instance, never per batch or chunk). Hashing the counter instead of seeding one
generator per instance keeps the batched code free of per-instance loops, makes the numbers independent of the
padded width of a batch, and lets the naive reference draw exactly the same numbers for one instance alone.
The mixer is the 32-bit integer hash of Wang/Mueller (two multiply–xorshift rounds), done in int64 arithmetic.
"""

from __future__ import annotations

import math

import torch

_M32 = 0xFFFFFFFF
_MULT = 0x45D9F3B
_POSITION_BITS = 16  # counter = sample · 2^16 + position: positions < 65,536, samples < 65,536

STREAM_PERMUTATION = 1
STREAM_ADVERSARY_U1 = 2
STREAM_ADVERSARY_U2 = 3


def _mix32(x: torch.Tensor) -> torch.Tensor:
    x = (((x >> 16) ^ x) * _MULT) & _M32
    x = (((x >> 16) ^ x) * _MULT) & _M32
    return (x >> 16) ^ x


def uniform(seeds: torch.Tensor, samples: int, width: int, stream: int) -> torch.Tensor:
    """``[B, samples, width]`` float64 uniforms in (0, 1); entry (b, s, t) depends only on (seeds[b], stream, s, t)."""
    if samples >= 1 << 16 or width >= 1 << _POSITION_BITS:
        raise ValueError(f"counter RNG supports < 65,536 samples and positions, got {samples} × {width}")
    seeds = torch.as_tensor(seeds, dtype=torch.int64).cpu()
    key = _mix32((_mix32(seeds & _M32) ^ _mix32(torch.tensor(stream * 0x9E3779B9 & _M32))) & _M32)
    counter = (torch.arange(samples)[:, None] << _POSITION_BITS) + torch.arange(width)[None, :]
    x = _mix32((key[:, None, None] ^ _mix32(counter)[None]) & _M32)
    x = _mix32((x + key[:, None, None]) & _M32)
    return (x.double() + 0.5) / 2.0**32


def normal(seeds: torch.Tensor, samples: int, width: int, streams: tuple[int, int]) -> torch.Tensor:
    """``[B, samples, width]`` float64 standard normals (Box–Muller on two uniform streams)."""
    u1 = uniform(seeds, samples, width, streams[0])
    u2 = uniform(seeds, samples, width, streams[1])
    return torch.sqrt(-2.0 * torch.log(u1)) * torch.cos(2.0 * math.pi * u2)
