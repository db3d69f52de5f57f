"""Adversarial attention audit (J&W §4.2.2, Eq. 1–2, Algorithm 3, Figs. 4–5).

For each instance, k distributions α⁽¹⁾…α⁽ᵏ⁾ maximise (Eq. 2)

    f = Σ_i JSD(α⁽ⁱ⁾, α̂) + 1/(k(k−1)) Σ_{i<j} JSD(α⁽ⁱ⁾, α⁽ʲ⁾)

(each unordered pair weighs 1/(k(k−1)) as Eq. 2 prints it; J&W's code, ``cross_jsd.sum(0).mean()``, gives it
2/k²) subject to TVD(ŷ(α⁽ⁱ⁾), ŷ) ≤ ε (Eq. 1), through the relaxed objective f − λ Σ_i max(0, TVD_i − ε) with λ = 500
per adversary (J&W's code; the paper's footnote writes λ/k) maximised by Adam (amsgrad, as J&W's code) over
masked attention logits θ, α⁽ⁱ⁾ = softmax(θ⁽ⁱ⁾) on the support: the real positions without the sentence
markers (``exclude_markers``, default, as J&W's code masks <s>, </s> out of attention; otherwise a BiLSTM adversary
can park all its mass on the <s> state, which summarises the sentence). JSD is against the full α̂.
θ starts at N(0, init_scale²) noise (J&W: log-uniform + 3·N(0, 1); the constant is irrelevant under softmax),
drawn from ``instance_seed(seed, id)``. The decoder sees h fixed (Alg. 3).

All instances and all k adversaries of a batch are one ``[B, k, T]`` parameter and one decoder call per step; the
summed loss gives each instance exactly the gradient it would get alone and Adam is element-wise, so the batched
search equals per-instance searches (tested against :mod:`attnaudit.jain_wallace.reference`).

Afterwards (Alg. 3) each adversary's Δŷ = TVD(ŷ⁽ⁱ⁾, ŷ) and JSD(α⁽ⁱ⁾, α̂) are recomputed from the final α⁽ⁱ⁾; an
adversary is *valid* only if that Δŷ ≤ ε, and ε-max JSD = max over valid adversaries of their JSD. The paper uses
one ε for both (§4.2.2; Fig. 4: "|ŷadv − ŷ| < ε"); J&W's code searches within 0.01 (classification) or 0.005 (QA,
its L1 budget 0.01) and draws Figs. 4–5 from the adversaries within 0.05 (``plot_multi_adversarial``):
``valid_epsilon`` sets the validity threshold apart from the search's. When none is
valid it is 0 (Alg. 3's indicator) or NaN (``no_valid: nan``); ``n_valid`` tells these cases apart.
JSD is in nats (≤ ln 2).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import numpy as np
import torch

from attnaudit.adam import Adam
from attnaudit.jain_wallace import rng
from attnaudit.jain_wallace.common import Context, batch_seeds, instance_columns, ragged
from attnaudit.masks import content_mask
from attnaudit.metrics import jsd, tvd
from attnaudit.models import masked_softmax


@dataclass
class Adversaries:
    attention: torch.Tensor  # [B, k, T]
    probs: torch.Tensor  # [B, k, C]
    tvd: torch.Tensor  # [B, k]  Δŷ⁽ⁱ⁾ = TVD(ŷ⁽ⁱ⁾, ŷ)
    jsd: torch.Tensor  # [B, k]  JSD(α⁽ⁱ⁾, α̂)
    valid: torch.Tensor  # [B, k]  Δŷ⁽ⁱ⁾ ≤ ε (or the validity threshold, valid_epsilon)


@contextlib.contextmanager
def frozen(model):
    """Model parameters out of the graph while the adversary optimises (J&W's code sets requires_grad=False)."""
    flags = [p.requires_grad for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, flag in zip(model.parameters(), flags):
            p.requires_grad_(flag)


def initial_logits(seeds: torch.Tensor, k: int, width: int, scale: float) -> torch.Tensor:
    """``[B, k, width]`` N(0, scale²) starting logits from each instance's seed."""
    return scale * rng.normal(seeds, k, width, (rng.STREAM_ADVERSARY_U1, rng.STREAM_ADVERSARY_U2))


def xlogx(x: torch.Tensor) -> torch.Tensor:
    """x·ln x with 0·ln 0 = 0 and a finite gradient at 0 (so an underflowed weight cannot produce NaN)."""
    return x * torch.log(x.clamp_min(torch.finfo(x.dtype).tiny))


def relaxed_objective(alpha, alpha_hat, probs, probs_hat, epsilon: float, lam: float) -> torch.Tensor:
    """Per-instance relaxed Eq. 1–2, to maximise: alpha [B, k, T], alpha_hat [B, T], probs [B, k, C].

    JSD(p, q) = ½Σ p ln p + ½Σ q ln q − Σ m ln m with m = (p + q)/2 (nats), so the entropies of the k adversaries
    are computed once and the cross term visits each unordered pair (i < j) once, as Eq. 2 sums them."""
    k = alpha.shape[1]
    first, second = torch.triu_indices(k, k, offset=1, device=alpha.device)
    plogp = xlogx(alpha).sum(dim=-1)  # [B, k]
    plogp_hat = xlogx(alpha_hat).sum(dim=-1)  # [B]
    mixtures = 0.5 * torch.cat([alpha + alpha_hat[:, None, :], alpha[:, first] + alpha[:, second]], dim=1)
    mlogm = xlogx(mixtures).sum(dim=-1)  # [B, k + k(k−1)/2]
    divergence = (0.5 * (plogp + plogp_hat[:, None]) - mlogm[:, :k]).sum(dim=1)
    if k > 1:
        cross = 0.5 * (plogp[:, first] + plogp[:, second]) - mlogm[:, k:]
        divergence = divergence + cross.sum(dim=1) / (k * (k - 1))
    violation = torch.relu(tvd(probs, probs_hat[:, None, :]) - epsilon).sum(dim=1)
    return divergence - lam * violation


def log_clamped(x: torch.Tensor) -> torch.Tensor:
    return torch.log(x.clamp_min(torch.finfo(x.dtype).tiny))


def objective_gradient(alpha, alpha_hat, token_logits, probs_hat, epsilon: float, lam: float) -> torch.Tensor:
    """∂f/∂α ``[B, k, T]`` of the relaxed Eq. 1–2 (:func:`relaxed_objective`) for a linear decoder, in closed form.

    With m = (p + q)/2, ∂JSD(p, q)/∂p = ½(ln p − ln m), and the cross term weighs each unordered pair 1/(k(k−1)).
    The penalty goes through ŷ⁽ⁱ⁾ = softmax(α⁽ⁱ⁾L) with the per-token logits L (T&Š Eq. 9): ∂TVD/∂ŷ =
    ½ sign(ŷ⁽ⁱ⁾ − ŷ) where TVD > ε, the softmax Jacobian ŷ ⊙ (g − ⟨ŷ, g⟩), then Lᵀ. Written by hand because
    autograd's per-operation overhead dominates at these sizes (a test compares it with autograd on
    :func:`relaxed_objective`)."""
    k = alpha.shape[1]
    log_alpha = log_clamped(alpha)
    gradient = 0.5 * (log_alpha - log_clamped(0.5 * (alpha + alpha_hat[:, None, :])))
    if k > 1:
        pairs = pair_means(k, alpha.dtype, alpha.device)  # [P, k]: row (i, j) averages adversaries i and j
        between = log_clamped(torch.matmul(pairs, alpha))  # [B, P, T], ln m_ij per unordered pair
        summed = torch.matmul(2.0 * pairs.t(), between)  # Σ_{j≠i} ln m_ij: each pair to both of its adversaries
        gradient = gradient + ((k - 1) * log_alpha - summed) / (2 * k * (k - 1))
    probs = torch.softmax(torch.bmm(alpha, token_logits), dim=-1)  # [B, k, C]
    difference = probs - probs_hat[:, None, :]
    violated = 0.5 * difference.abs().sum(dim=-1, keepdim=True) > epsilon
    g_probs = torch.sign(difference).mul_(0.5 * violated)
    g_logits = probs * (g_probs - (probs * g_probs).sum(dim=-1, keepdim=True))
    return gradient - lam * torch.bmm(g_logits, token_logits.transpose(1, 2))


def pair_means(k: int, dtype, device) -> torch.Tensor:
    """``[k(k−1)/2, k]``: ½ at the two adversaries of each unordered pair (i < j), 0 elsewhere."""
    first, second = torch.triu_indices(k, k, offset=1, device=device)
    pairs = torch.zeros(len(first), k, dtype=dtype, device=device)
    rows = torch.arange(len(first), device=device)
    pairs[rows, first] = 0.5
    pairs[rows, second] = 0.5
    return pairs


def softmax_backward(alpha: torch.Tensor, gradient: torch.Tensor) -> torch.Tensor:
    """∂/∂θ of a function of α = softmax(θ) given its gradient in α: α ⊙ (g − ⟨α, g⟩)."""
    return alpha * (gradient - (alpha * gradient).sum(dim=-1, keepdim=True))


def find_adversaries(
    model,
    hidden,
    query,
    alpha_hat,
    probs_hat,
    support,
    seeds,
    *,
    k=5,
    epsilon=0.01,
    lam=500.0,
    steps=500,
    lr=0.01,
    amsgrad=True,
    init_scale=3.0,
    valid_epsilon=None,
) -> Adversaries:
    """Algorithm 3 for a batch: optimise ``[B, k, T]`` logits with Adam, then score the final distributions (valid:
    Δŷ ≤ ``valid_epsilon``, or ``epsilon`` when None)."""
    hidden, alpha_hat, probs_hat = hidden.detach(), alpha_hat.detach(), probs_hat.detach()
    mask = support[:, None, :]
    theta = initial_logits(seeds, k, support.shape[1], init_scale).to(hidden)
    theta.requires_grad_(True)
    if getattr(model, "linear_decoder", False):  # closed-form gradient on the per-token logits
        optimiser = Adam([theta], lr=lr, amsgrad=amsgrad, fused=True)  # one kernel per step
        with torch.no_grad():
            token_logits = model.token_logits(hidden, query)  # [B, T, C]
            outside = torch.zeros_like(theta[:, :1]).masked_fill_(~mask, float("-inf"))  # softmax on the support
            for _ in range(steps):
                alpha = torch.softmax(theta + outside, dim=-1)
                ascent = objective_gradient(alpha, alpha_hat, token_logits, probs_hat, epsilon, lam)
                theta.grad = -softmax_backward(alpha, ascent)
                optimiser.step()
    else:
        optimiser = Adam([theta], lr=lr, amsgrad=amsgrad)
        with frozen(model), torch.enable_grad():
            for _ in range(steps):
                alpha = masked_softmax(theta, mask)
                probs = torch.softmax(model.decode(hidden, alpha, query), dim=-1)
                loss = -relaxed_objective(alpha, alpha_hat, probs, probs_hat, epsilon, lam).sum()
                optimiser.zero_grad()
                loss.backward()
                optimiser.step()
    with torch.no_grad():
        alpha = masked_softmax(theta.detach(), mask)
        probs = torch.softmax(model.decode(hidden, alpha, query), dim=-1)
        delta = tvd(probs, probs_hat[:, None, :])
        divergence = jsd(alpha, alpha_hat[:, None, :])
    valid = delta.double() <= (epsilon if valid_epsilon is None else valid_epsilon)  # what is stored is what is checked
    return Adversaries(alpha, probs, delta, divergence, valid)


def epsilon_max_jsd(adv: Adversaries, no_valid: str = "zero") -> torch.Tensor:
    """[B]: max_i 1[Δŷ⁽ⁱ⁾ ≤ ε]·JSD⁽ⁱ⁾ (Alg. 3); instances with no valid adversary get 0 or NaN."""
    best = torch.where(adv.valid, adv.jsd, torch.zeros_like(adv.jsd)).max(dim=1).values
    if no_valid == "nan":
        best = best.masked_fill(~adv.valid.any(dim=1), float("nan"))
    return best


def adversarial_batch(model, batch, ctx: Context) -> dict:
    options = ctx.options["adversarial"]
    with torch.no_grad():
        out = model(batch)
    support = content_mask(batch, ctx.markers, options["exclude_markers"])
    adv = find_adversaries(
        model,
        out.hidden,
        out.query,
        out.attention,
        out.probs,
        support,
        batch_seeds(ctx.seed, batch.ids),
        k=options["k"],
        epsilon=options["epsilon"],
        lam=options["lambda"],
        steps=options["steps"],
        lr=options["lr"],
        amsgrad=options["amsgrad"],
        init_scale=options["init_scale"],
        valid_epsilon=options["valid_epsilon"],
    )
    eps_max = epsilon_max_jsd(adv, options["no_valid"])
    # the adversary shown in heatmaps: the valid one with the largest JSD (index −1 when none is valid)
    best = torch.where(adv.valid, adv.jsd, torch.full_like(adv.jsd, -1.0)).argmax(dim=1)
    has_valid = adv.valid.any(dim=1)
    rows = torch.arange(len(best), device=best.device)
    columns = instance_columns(batch, out.probs)
    columns.update(
        {
            "n_support": support.sum(dim=1).cpu().numpy(),
            "max_attention": out.attention.max(dim=1).values.double().cpu().numpy(),
            "eps_max_jsd": eps_max.double().cpu().numpy(),
            "n_valid": adv.valid.sum(dim=1).cpu().numpy(),
            "adversary_jsd": list(adv.jsd.double().cpu().numpy()),
            "adversary_tvd": list(adv.tvd.double().cpu().numpy()),
            "adversary_valid": list(adv.valid.cpu().numpy()),
            "best_adversary": torch.where(has_valid, best, torch.full_like(best, -1)).cpu().numpy(),
            "best_tvd": torch.where(has_valid, adv.tvd[rows, best], torch.nan).double().cpu().numpy(),
            "attention": ragged(out.attention, batch.lengths),
            "adversarial_attention": ragged(adv.attention[rows, best], batch.lengths),
        }
    )
    columns["adversarial_attention"] = [
        a if v else np.zeros(0, np.float32) for a, v in zip(columns["adversarial_attention"], has_valid.tolist())
    ]
    return columns
