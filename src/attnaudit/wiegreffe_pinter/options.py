"""Options of the Wiegreffe & Pinter (2019) stage: the defaults here mirror the ``wiegreffe_pinter:`` block of
``schemas/config.schema.yaml``, so the CLI runs without Snakemake too."""

from __future__ import annotations

from attnaudit import ConfigKeyError
from attnaudit.io import resolve_options

DEFAULTS: dict = {
    "uniform": {
        # Table 2 flag: the uniform model is "within the seed spread of base" when
        # |mean_uniform − mean_base| ≤ spread_k · std_base (sample std over base seeds; undetermined with < 2 seeds)
        "spread_k": 2.0,
    },
    "seeds": {
        "min_seeds": 2,  # seed-variance needs at least this many extra seeds (W&P §3.3 train eight)
        # y-bins of Fig. 3: the base model's max attention over the non-marker tokens (J&W Fig. 8's plane)
        "attention_bins": [0.0, 0.25, 0.5, 0.75, 1.0],
    },
}


def resolve(options: dict | None) -> dict:
    """Defaults overridden by ``options`` (one level deep per section); unknown keys are rejected by name."""
    merged = resolve_options("wiegreffe_pinter", DEFAULTS, options)
    bins = merged["seeds"]["attention_bins"]
    if len(bins) < 2 or any(b <= a for a, b in zip(bins[:-1], bins[1:])) or (bins[0], bins[-1]) != (0, 1):
        raise ConfigKeyError(
            ("wiegreffe_pinter", "seeds", "attention_bins"),
            f"{bins} must be increasing edges from 0 to 1 (every max attention needs a bin; e.g. "
            "[0.0, 0.25, 0.5, 0.75, 1.0])",
        )
    if merged["seeds"]["min_seeds"] < 2:
        raise ConfigKeyError(("wiegreffe_pinter", "seeds", "min_seeds"), "must be ≥ 2 (a spread needs two seeds)")
    if merged["uniform"]["spread_k"] < 0:
        raise ConfigKeyError(("wiegreffe_pinter", "uniform", "spread_k"), "must be ≥ 0")
    return merged
