"""Model ids name their variant — ``{encoder}-{attention}-{regulariser}-s{seed}``, e.g. ``lstm-additive-base-s0``
(GUIDE §2) — so the grid is plain Snakemake wildcards and a changed variant reruns only its own branch."""

from __future__ import annotations

import re

from attnaudit import AttnauditError

_MODEL_ID = re.compile(r"^(?P<encoder>[a-z]+)-(?P<attention>[a-z]+)-(?P<regulariser>[a-z]+)-s(?P<seed>\d+)$")


def format_model_id(encoder: str, attention: str, regulariser: str, seed: int) -> str:
    return f"{encoder}-{attention}-{regulariser}-s{seed}"


def parse_model_id(model_id: str) -> dict:
    match = _MODEL_ID.match(model_id)
    if not match:
        raise AttnauditError(
            f"model id {model_id!r} is not of the form encoder-attention-regulariser-s<seed>, "
            "e.g. lstm-additive-base-s0"
        )
    parts = match.groupdict()
    return {**parts, "seed": int(parts["seed"])}
