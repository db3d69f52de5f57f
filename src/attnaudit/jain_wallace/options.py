"""Options of the Jain & Wallace (2019) audits: the defaults here mirror the ``jain_wallace:`` block of
``schemas/config.schema.yaml`` (the schema documents every key), so the CLI runs without Snakemake too."""

from __future__ import annotations

from attnaudit import AttnauditError
from attnaudit.io import resolve_options

DEFAULTS: dict = {
    "correlation": {
        # importance methods compared pairwise (J&W §4.1: attention, gradient, LOO; any registered method works)
        "methods": ["attention", "gradient", "loo"],
        "absolute": True,  # |score| for methods whose scores carry a sign before ranking
        "exclude_markers": True,  # leave <s>, </s> out of the rankings (J&W's code never scores them)
        "significance": 0.05,  # p-value threshold of "Sig. Frac." (J&W Table 2)
    },
    "permutation": {
        "n_permutations": 100,  # J&W Alg. 2
        "exclude_markers": True,  # permute over real non-marker positions; <s>, </s> keep their weight
        "small_change": 0.05,  # tables report the fraction of instances with median Δŷ below this
        "batch_size": None,  # instances per batch; null: audits.batch_size
    },
    "adversarial": {
        "k": 5,  # adversarial distributions per instance (J&W Eq. 1)
        "epsilon": 0.01,  # TVD budget, 0.01 for classification (J&W §4.2.2)
        # Δŷ an adversary may keep and count as valid in ε-max JSD (Alg. 3); null: epsilon, the paper's one ε.
        # J&W's code searches within epsilon and draws Figs. 4–5 from the adversaries within 0.05
        "valid_epsilon": None,
        "lambda": 500.0,  # penalty weight on max(0, TVD − ε) (J&W fn. 7)
        "steps": 500,  # Adam steps (J&W's code)
        "lr": 0.01,  # Adam learning rate (J&W's code)
        "amsgrad": True,  # J&W's code uses Adam with amsgrad
        "init_scale": 3.0,  # initial logits: N(0, init_scale²) over the support (J&W's code: uniform + 3·N(0,1))
        "exclude_markers": True,  # adversaries never attend to <s>, </s> (J&W's code masks them out of attention)
        "high_jsd": 0.5,  # tables report the fraction of instances with ε-max JSD above this
        "no_valid": "zero",  # ε-max JSD when no adversary meets the budget: zero (Alg. 3's indicator) or nan
        "batch_size": None,  # instances per batch; null: audits.batch_size
        # padded token positions per batch, per device; null: audits.max_batch_tokens. The search runs its 500
        # steps per batch, so fewer, larger batches save per-step overhead; it holds ~100 floats per position
        # (θ, Adam's three moments, the pairwise mixtures), so 4× the shared budget (docs/performance.md)
        "max_batch_tokens": {"cpu": 16384, "cuda": 262144},
    },
    "heatmaps": {
        "n_per_model": 5,  # instances shown per model
        "select": "max_jsd",  # max_jsd: highest ε-max JSD; random: a seeded sample of instances with an adversary
    },
}


def validity_epsilon(adversarial: dict) -> float:
    """The Δŷ below which an adversary is valid (Alg. 3's indicator): ``valid_epsilon``, else the search's ε."""
    valid = adversarial.get("valid_epsilon")
    return adversarial["epsilon"] if valid is None else valid


def resolve(options: dict | None) -> dict:
    """Defaults overridden by ``options`` (one level deep per audit); unknown keys are rejected by name."""
    merged = resolve_options("jain_wallace", DEFAULTS, options)
    if merged["adversarial"]["no_valid"] not in ("zero", "nan"):
        raise AttnauditError("jain_wallace.adversarial.no_valid must be 'zero' or 'nan'")
    if merged["adversarial"]["k"] < 1 or merged["permutation"]["n_permutations"] < 1:
        raise AttnauditError("jain_wallace: adversarial.k and permutation.n_permutations must be ≥ 1")
    return merged
