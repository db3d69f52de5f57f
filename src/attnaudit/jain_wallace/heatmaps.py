"""Adversarial heatmaps (J&W Fig. 1, Appendix E): for chosen instances, the text with the original attention α̂
and the adversarial attention (the valid adversary with the largest JSD) as background colour, with Δŷ.

One self-contained HTML page per model: inline CSS only, no scripts. Colour intensity is each weight divided by
the largest weight of that row (hover a token for its exact weight).
"""

from __future__ import annotations

import html
import logging
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit.io import read_columns, read_parquet, write_text
from attnaudit.labels import class_name, label_names
from attnaudit.specials import without_markers
from attnaudit.writing_systems import join_tokens, spaces_before

log = logging.getLogger(__name__)

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; max-width: 60em; color: #222; }
h1 { font-size: 1.3em; } h2 { font-size: 1em; margin-bottom: 0.3em; }
.instance { border-top: 1px solid #ccc; padding: 0.8em 0; }
.row { margin: 0.3em 0; line-height: 1.9; }
.label { display: inline-block; width: 7.5em; font-weight: 600; font-size: 0.85em; }
.tok { padding: 0.1em 0.15em; border-radius: 3px; unicode-bidi: isolate; overflow-wrap: anywhere; }
.orig .tok { background: rgba(215, 48, 39, var(--w)); }
.adv .tok { background: rgba(69, 117, 180, var(--w)); }
.meta { font-size: 0.85em; color: #555; }
.query bdi { font-style: italic; }
"""


def select_instances(adversarial: pd.DataFrame, n: int, how: str = "max_jsd", seed: int = 0) -> pd.DataFrame:
    """Instances with at least one valid adversary: the ``n`` with the highest ε-max JSD, or a seeded sample."""
    candidates = adversarial[adversarial["n_valid"] > 0]
    if how == "random":
        return candidates.sample(n=min(n, len(candidates)), random_state=seed) if len(candidates) else candidates
    return candidates.sort_values(["eps_max_jsd", "row"], ascending=[False, True], kind="stable").head(n)


def _tokens_html(tokens, weights) -> str:
    """One span per token, a space between two but where the text writes them together (Chinese, Japanese, ...:
    :func:`attnaudit.writing_systems.written_together`)."""
    weights = np.asarray(weights, dtype=float)
    top = weights.max() if len(weights) and weights.max() > 0 else 1.0
    return "".join(
        f'{space}<span class="tok" style="--w:{w / top:.3f}" title="{w:.4f}">{html.escape(str(t))}</span>'
        for space, t, w in zip(spaces_before(tokens), tokens, weights)
    )


def _isolated(text) -> str:
    """User text (ids, class names) escaped and bidi-isolated: a right-to-left character in it cannot reorder the
    text around it."""
    return f"<bdi>{html.escape(str(text))}</bdi>"


def render(
    dataset: str,
    model: str,
    chosen: pd.DataFrame,
    tokens_by_id: dict,
    epsilon: float,
    names: list[str] = (),
    queries_by_id: dict | None = None,
) -> str:
    """``queries_by_id``: of a QA/NLI dataset, each instance's question or hypothesis, shown above its passage."""
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>J&amp;W adversarial heatmaps: "
        f"{html.escape(dataset)} / {html.escape(model)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Adversarial attention heatmaps — {_isolated(dataset)} / {_isolated(model)}</h1>",
        "<p class='meta'>Jain &amp; Wallace (2019) Fig. 1 / Appendix E. Red: the model's attention α̂. Blue: "
        f"an adversarial attention found by Eq. 1–2 whose output differs by Δŷ = TVD ≤ ε = {epsilon}. "
        "Intensity is relative to the row's largest weight; hover a token for its weight.</p>",
    ]
    if chosen.empty:
        parts.append("<p>No instance has a valid adversary.</p>")
    for _, r in chosen.iterrows():
        tokens = tokens_by_id[r["id"]]
        query = (queries_by_id or {}).get(r["id"])
        query_row = (
            ""
            if query is None
            else f"<div class='row query'><span class='label'>Query</span>{_isolated(join_tokens(query))}</div>"
        )
        parts.append(
            f"<div class='instance'><h2>{_isolated(r['id'])}</h2>"
            f"<div class='meta'>label {_isolated(class_name(list(names), r['label']))}, predicted "
            f"{_isolated(class_name(list(names), r['predicted_class']))}; ε-max JSD "
            f"{r['eps_max_jsd']:.3f} nats; max α̂ {r['max_attention']:.3f}; valid adversaries {r['n_valid']}</div>"
            + query_row
            + f"<div class='row orig'><span class='label'>Original</span>{_tokens_html(tokens, r['attention'])}</div>"
            f"<div class='row adv'><span class='label'>Adversarial</span>"
            f"{_tokens_html(tokens, r['adversarial_attention'])} <b>Δŷ: {r['best_tvd']:.3f}</b></div></div>"
        )
    parts.append("</body></html>\n")
    return "\n".join(parts)


def write_heatmaps(
    dataset: str,
    model: str,
    adversarial_path: str | Path,
    dataset_dir: str | Path,
    out: str | Path,
    *,
    n: int = 5,
    how: str = "max_jsd",
    epsilon: float = 0.01,
    seed: int = 0,
    manifest: str | Path | None = None,
) -> None:
    """``manifest``: the corpus manifest, whose ``label_names`` name the true and predicted classes."""
    adversarial = read_parquet(adversarial_path)
    chosen = select_instances(adversarial, n, how, seed)
    examples = read_columns(Path(dataset_dir) / "examples.parquet", ["id", "tokens"], optional=("query_tokens",))
    examples = examples[examples["id"].isin(set(chosen["id"]))]
    tokens_by_id = {i: list(t) for i, t in zip(examples["id"], examples["tokens"])}
    queries_by_id = None  # QA/NLI (J&W §3): the question or hypothesis
    if "query_tokens" in examples:
        queries_by_id = {i: without_markers(q) for i, q in zip(examples["id"], examples["query_tokens"])}
    page = render(dataset, model, chosen, tokens_by_id, epsilon, label_names(manifest), queries_by_id)
    write_text(out, page)
    log.info("heatmaps of %d instances → %s", len(chosen), out)
