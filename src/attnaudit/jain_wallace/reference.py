"""Naive per-instance reference implementations of the J&W audits, written as plainly as possible.

Each function takes ONE instance (a 1-D array of token ids) and loops the way the paper's algorithms read:
one forward per deleted token (Alg. 1), one decoder call per permutation (Alg. 2), one optimisation per
instance (Alg. 3). The tests check that the batched code in this package gives the same numbers, and
``python -m attnaudit throughput jw`` times one against the other. Randomness comes from the same counter-based
generator keyed by the instance seed, so permutations and adversary initialisations are identical.
"""

from __future__ import annotations

import numpy as np
import torch

from attnaudit.data import collate
from attnaudit.jain_wallace import rng
from attnaudit.metrics import jsd, tvd
from attnaudit.models import masked_softmax


def _one(tokens: np.ndarray):
    return collate([np.asarray(tokens, dtype=np.int64)], labels=[0], ids=["x"])


def _device(model):
    return next(model.parameters()).device


@torch.no_grad()
def attention(model, tokens: np.ndarray) -> np.ndarray:
    return model(_one(tokens).to(_device(model))).attention[0].cpu().numpy()


def gradient(model, tokens: np.ndarray) -> np.ndarray:
    """|∂ŷ_c/∂e_t · e_t| for the predicted class c, attention detached (J&W Alg. 1, App. B)."""
    batch = _one(tokens).to(_device(model))
    embedded = model.embed(batch).detach().requires_grad_(True)
    out = model(batch, embedded=embedded, detach_attention=True)
    c = int(out.logits[0].argmax())
    out.probs[0, c].backward()
    return (embedded.grad[0] * embedded[0]).sum(dim=-1).abs().detach().cpu().numpy()


@torch.no_grad()
def loo(model, tokens: np.ndarray) -> np.ndarray:
    """TVD(ŷ(x₋t), ŷ(x)) for every position t, one forward per deletion."""
    device = _device(model)
    original = model(_one(tokens).to(device)).probs[0]
    scores = np.zeros(len(tokens))
    for t in range(len(tokens)):
        shorter = np.delete(tokens, t)
        if len(shorter) == 0:
            scores[t] = np.nan
            continue
        scores[t] = float(tvd(model(_one(shorter).to(device)).probs[0], original))
    return scores


def permutation_keys(seed: int, n: int, width: int) -> np.ndarray:
    return rng.uniform(torch.tensor([seed]), n, width, rng.STREAM_PERMUTATION)[0].numpy()


@torch.no_grad()
def permutation_deltas(model, tokens: np.ndarray, permutable: np.ndarray, seed: int, n: int, out=None) -> np.ndarray:
    """Alg. 2 for one instance: n permutations of α̂ over ``permutable`` positions, one decode each
    (``out``: the instance's model output, if already computed)."""
    device = _device(model)
    out = model(_one(tokens).to(device)) if out is None else out
    alpha = out.attention[0].cpu().numpy()
    positions = np.flatnonzero(permutable)
    keys = permutation_keys(seed, n, len(tokens))
    deltas = np.zeros(n)
    for p in range(n):
        shuffled = positions[np.argsort(keys[p, positions], kind="stable")]
        alpha_p = alpha.copy()
        alpha_p[positions] = alpha[shuffled]
        logits = model.decode(out.hidden, torch.from_numpy(alpha_p)[None].to(device), out.query)
        deltas[p] = float(tvd(torch.softmax(logits, dim=-1)[0], out.probs[0]))
    return deltas


def _jsd_plain(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """JSD in nats over the last dimension, straight from the definition ½KL(p‖m) + ½KL(q‖m)."""
    m = 0.5 * (p + q)
    tiny = torch.finfo(p.dtype).tiny
    kl_p = (p * (torch.log(p.clamp_min(tiny)) - torch.log(m.clamp_min(tiny)))).sum(-1)
    kl_q = (q * (torch.log(q.clamp_min(tiny)) - torch.log(m.clamp_min(tiny)))).sum(-1)
    return 0.5 * (kl_p + kl_q)


def adversaries(
    model,
    tokens: np.ndarray,
    support: np.ndarray,
    seed: int,
    *,
    k=5,
    epsilon=0.01,
    lam=500.0,
    steps=500,
    lr=0.01,
    amsgrad=True,
    init_scale=3.0,
    out=None,
) -> dict:
    """Alg. 3 for one instance alone: k adversarial distributions by Adam on the relaxed Eq. 1–2
    (``out``: the instance's model output, if already computed)."""
    device = _device(model)
    if out is None:
        with torch.no_grad():
            out = model(_one(tokens).to(device))
    hidden, alpha_hat, y_hat = out.hidden, out.attention[0], out.probs[0]
    mask = torch.from_numpy(np.asarray(support, dtype=bool)).to(device)[None, :].expand(k, -1)
    init = (
        init_scale
        * rng.normal(torch.tensor([seed]), k, len(tokens), (rng.STREAM_ADVERSARY_U1, rng.STREAM_ADVERSARY_U2))[0]
    )
    theta = init.to(hidden).requires_grad_(True)
    optimiser = torch.optim.Adam([theta], lr=lr, amsgrad=amsgrad)
    params = [p for p in model.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        for _ in range(steps):
            alpha = masked_softmax(theta, mask)  # [k, T]
            y = torch.softmax(model.decode(hidden, alpha[None], out.query)[0], dim=-1)  # [k, C]
            to_hat = _jsd_plain(alpha, alpha_hat[None, :]).sum()
            # Eq. 2's Σ_{i<j}: the k × k matrix holds each unordered pair twice (and a zero diagonal)
            between = _jsd_plain(alpha[:, None, :], alpha[None, :, :]).sum() / (2 * k * (k - 1)) if k > 1 else 0.0
            penalty = torch.relu(tvd(y, y_hat[None, :]) - epsilon).sum()
            loss = -(to_hat + between - lam * penalty)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
    finally:
        for p in params:
            p.requires_grad_(True)
    with torch.no_grad():
        alpha = masked_softmax(theta, mask)
        y = torch.softmax(model.decode(hidden, alpha[None], out.query)[0], dim=-1)
        delta = tvd(y, y_hat[None, :]).double()
        divergence = jsd(alpha, alpha_hat[None, :]).double()
    valid = (delta <= epsilon).numpy()
    jsds = divergence.cpu().numpy()
    return {
        "attention": alpha.cpu().numpy(),
        "tvd": delta.cpu().numpy(),
        "jsd": jsds,
        "valid": valid,
        "eps_max_jsd": float(np.max(np.where(valid, jsds, 0.0))),
    }
