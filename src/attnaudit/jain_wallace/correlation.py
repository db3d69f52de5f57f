"""Correlation audit (J&W §4.1, Algorithm 1, Table 2, Fig. 2, App. C Figs. 6–8).

Per instance: the scores of every importance method in ``correlation.methods`` (registry objects, computed
batched) and Kendall τ-b with its two-sided p-value (``scipy.stats.kendalltau``, variant "b", which corrects for
ties) for every pair of methods, over the real positions without the sentence markers (``exclude_markers``,
as J&W's code never scores <s>, </s>). Signed scores are ranked by absolute value when ``absolute`` (the J&W
gradient is already an absolute value; LOO TVDs and attention are non-negative).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

from attnaudit.importance import get_method
from attnaudit.jain_wallace.common import Context, instance_columns, ragged
from attnaudit.masks import content_mask
from attnaudit.metrics import kendall_tau


def method_pairs(methods: list[str]) -> list[tuple[str, str]]:
    return list(itertools.combinations(methods, 2))


def pair_name(a: str, b: str) -> str:
    """Table spelling of a pair, e.g. ``attention~gradient``."""
    return f"{a}~{b}"


def _method(name: str, options: dict):
    return get_method(name, max_tokens=options["loo_max_tokens"]) if name == "loo" else get_method(name)


def correlation_batch(model, batch, ctx: Context) -> dict:
    options = ctx.options["correlation"]
    methods = list(options["methods"])
    with torch.no_grad():
        probs = model(batch).probs
    scores = {}
    for name in methods:
        method = _method(name, options)
        values = method.attribute(model, batch).detach().double().cpu()
        scores[name] = values.abs() if (method.signed and options["absolute"]) else values
    content = content_mask(batch, ctx.markers, options["exclude_markers"]).cpu().numpy()
    columns = instance_columns(batch, probs)
    columns["n_positions"] = content.sum(axis=1)
    for name in methods:
        columns[name] = ragged(scores[name], batch.lengths)
    arrays = {name: values.numpy() for name, values in scores.items()}
    for a, b in method_pairs(methods):
        # scipy's τ-b is one call per instance; the scores themselves were computed batched above
        results = [kendall_tau(arrays[a][i][content[i]], arrays[b][i][content[i]]) for i in range(len(batch.ids))]
        columns[f"tau_{a}_{b}"] = np.array([r[0] for r in results])
        columns[f"p_{a}_{b}"] = np.array([r[1] for r in results])
    return columns
