"""Build the explorer site: ``index.html`` + vendored ``assets/`` + ``data/``.

Data files are JavaScript that assigns into ``window.ATTNAUDIT.data`` (``fetch()`` of local files fails under
``file://``; script tags do not), loaded on demand by the page: ``data/index.js`` (every model with its card),
``data/<dataset>/<model>/list.js`` (one row per test instance: class, correctness, Δŷ, ε-max JSD, τ, ...), and
``page-NNNNN.js`` (tokens and per-token scores of ``page_size`` instances, and which tokens the text writes
without a space before them: Chinese, Japanese, ...), so an IMDB-sized run never loads more than one page of tokens
at a time. Per-token scores are rounded to ``digits`` significant digits. All text is data, rendered by the page
with ``textContent`` (never parsed as HTML).
"""

from __future__ import annotations

import json
import logging
import math
import shutil
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from attnaudit.io import merged_options, read_columns, read_json, read_parquet
from attnaudit.specials import without_markers
from attnaudit.writing_systems import join_tokens, joined_indices

log = logging.getLogger(__name__)

DEFAULTS = {"page_size": 50, "digits": 4}
ATTENTION = "attention"


def js_assign(key: str, obj) -> str:
    """A data file: ``window.ATTNAUDIT.data[key] = obj``."""
    text = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f"(window.ATTNAUDIT=window.ATTNAUDIT||{{data:{{}}}}).data[{json.dumps(key)}]={text};\n"


#: 10^i as doubles, exact up to 10^22 (5^22 < 2^53): the scales :func:`rounded` multiplies and divides by
EXACT_POWERS_OF_TEN = np.array([float(10**i) for i in range(23)])


def rounded(values, digits: int) -> list:
    """Floats rounded to ``digits`` (1–8) significant digits, exactly as ``float("%.{digits}g" % x)`` gives them
    (NaN/inf → None), as JSON-ready Python floats.

    Vectorised: with k = digits − 1 − ⌊log10|x|⌋, r = round(x·10^k) is the decimal's digits, and r / 10^k (or
    r · 10^−k) is the double nearest the decimal (both operands exact, the division correctly rounded). Where
    x·10^k lies within its rounding error of a tie between two integers, or 10^|k| is not exact, printf itself
    formats the value. A ⌊log10⌋ off by one (x within a few ulps of a power of ten) gives r = 10^digits or
    10^(digits−1), and so that power of ten, which is what printf writes too."""
    x = np.asarray(values, dtype=float).ravel()
    out = x.copy()  # ±0 stay as they are, as printf writes them
    finite = np.isfinite(x)
    nonzero = np.flatnonzero(finite & (x != 0))
    v = x[nonzero]
    k = digits - 1 - np.floor(np.log10(np.abs(v))).astype(np.int64)
    exact = np.abs(k) < len(EXACT_POWERS_OF_TEN)
    scale = EXACT_POWERS_OF_TEN[np.where(exact, np.abs(k), 0)]
    up = k >= 0
    scaled = np.where(up, v * scale, v / scale)
    r = np.rint(scaled)
    tie_distance = np.abs(np.abs(scaled - np.floor(scaled)) - 0.5)
    with np.errstate(over="ignore"):  # the spacing of the largest doubles (left to printf: 10^|k| is not exact)
        rounding_error = 4 * np.spacing(np.abs(scaled))
    certain = exact & (tie_distance > rounding_error)
    out[nonzero] = np.where(up, r / scale, r * scale)
    spec = f".{digits}g"
    for i in nonzero[~certain]:
        out[i] = float(format(x[i], spec))
    return [v if f else None for v, f in zip(out.tolist(), finite.tolist())]


def _column_values(frame: pd.DataFrame, column: str, digits: int) -> list:
    return rounded(frame[column].to_numpy(dtype=float), digits)


def headline(card: dict | None) -> dict:
    """The card's headline numbers, key → {label, value, digits}, for the index table."""
    if not card:
        return {}
    return {
        n["key"]: {"label": n["label"], "value": n["value"], "digits": n.get("digits", 3), "unit": n.get("unit", "")}
        for s in card.get("sections", [])
        for n in s.get("numbers", [])
        if n.get("headline")
    }


class _Examples:
    """Examples of a split, read once per dataset."""

    def __init__(self, split: str):
        self.split, self.cache = split, {}

    def __call__(self, path: str) -> pd.DataFrame:
        if path not in self.cache:
            frame = read_columns(path, ["id", "split", "label", "tokens"], optional=("query_tokens",))  # QA/NLI
            self.cache[path] = frame[frame["split"] == self.split].drop(columns="split").reset_index(drop=True)
        return self.cache[path]


def overlay_scores(rows: list, lengths: list[int], digits: int) -> tuple[list, int]:
    """One overlay's per-token scores of every instance, :func:`rounded` in one call: per instance a list, or None
    where it has none (no value; an empty list: no valid adversary) or a count unlike its tokens' (the number of
    those is returned second)."""
    arrays = [
        None if values is None or (isinstance(values, float) and math.isnan(values)) else np.asarray(values, float)
        for values in rows
    ]
    present = [a is not None and len(a) > 0 for a in arrays]
    kept = [p and len(a) == n for a, p, n in zip(arrays, present, lengths)]
    flat = rounded(np.concatenate([a for a, k in zip(arrays, kept) if k] or [np.empty(0)]), digits)
    scores, start = [], 0
    for a, k in zip(arrays, kept):
        scores.append(flat[start : start + len(a)] if k else None)
        start += len(a) if k else 0
    return scores, sum(present) - sum(kept)


def build_model(entry: dict, examples: pd.DataFrame, out: Path, split: str, options: dict) -> dict:
    """Write one model's list and pages; returns its index entry (without the card)."""
    digits, page_size = options["digits"], options["page_size"]
    key = f"{entry['dataset']}/{entry['model']}"
    missing = []
    predictions = read_parquet(entry["predictions"], columns=["id", "split", "predicted", "probs", "attention"])
    predictions = predictions[predictions["split"] == split].drop(columns="split")
    frame = examples.merge(predictions, on="id", how="inner", validate="one_to_one")
    overlays = {ATTENTION: frame["attention"].to_list()}
    values = {}
    for source in entry.get("sources", []):
        path = Path(source["path"])
        if not path.exists():
            missing.append(str(path))
            continue
        columns = ["id", *source.get("overlays", {}).values(), *source.get("values", {}).values()]
        part = read_parquet(path, columns=list(dict.fromkeys(columns)))
        part = frame[["id"]].merge(part, on="id", how="left", validate="one_to_one")
        for name, column in source.get("overlays", {}).items():
            overlays[name] = part[column].to_list()
        for name, column in source.get("values", {}).items():
            values[name] = _column_values(part, column, digits)
    n = len(frame)
    token_lists = frame["tokens"].to_list()
    lengths = [len(tokens) for tokens in token_lists]
    probs = [np.asarray(p, dtype=float) for p in frame["probs"]]
    predicted = frame["predicted"].astype(int).to_numpy()
    listing = {
        "ids": frame["id"].astype(str).to_list(),
        "label": frame["label"].astype(int).to_list(),
        "predicted": predicted.tolist(),
        "prob": rounded([p[c] for p, c in zip(probs, predicted)], digits),
        "n_tokens": lengths,
        "values": values,
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "list.js").write_text(js_assign(f"list:{key}", listing), encoding="utf-8")
    queries = frame["query_tokens"].to_list() if "query_tokens" in frame else None
    shown = {}
    for name, rows in overlays.items():
        shown[name], mismatched = overlay_scores(rows, lengths, digits)
        if mismatched:
            log.warning(
                "%s: %s has a score count unlike the token count for %d instances (not shown)", key, name, mismatched
            )
    for page, start in enumerate(range(0, n, page_size)):
        instances = []
        for i in range(start, min(n, start + page_size)):
            tokens = [str(t) for t in token_lists[i]]
            scores = {name: rows[i] for name, rows in shown.items() if rows[i] is not None}
            instance = {"id": listing["ids"][i], "tokens": tokens, "scores": scores}
            joined = joined_indices(tokens)
            if joined:  # tokens the text writes together (Chinese, Japanese, ...): shown without a space
                instance["joined"] = joined
            if queries is not None:
                instance["query"] = join_tokens(without_markers(queries[i]))
            instances.append(instance)
        (out / f"page-{page:05d}.js").write_text(js_assign(f"page:{key}:{page}", instances), encoding="utf-8")
    return {
        "dataset": entry["dataset"],
        "model": entry["model"],
        "n_instances": n,
        "page_size": page_size,
        "n_pages": -(-n // page_size),
        "dir": f"data/{key}/",
        "overlays": list(overlays),
        "values": list(values),
        "missing": missing,
    }


def partial_card(entry: dict, out_json: Path) -> dict:
    """The card of a model whose card a run that stopped part way did not write: from the summaries that exist (each
    missing one named under *Missing audits*), saved as JSON, HTML and Markdown beside ``out_json``."""
    from attnaudit.cards.card import run_card

    metrics = entry.get("metrics") or "metrics.json (not given)"
    outputs = [out_json.with_suffix(ext) for ext in (".json", ".html", ".md")]
    return run_card(
        entry["dataset"], entry["model"], metrics, entry["summaries"], *outputs, manifest=entry.get("manifest")
    )


def build_site(models: list[dict], out_dir: str | Path, *, split: str = "test", options: dict | None = None) -> dict:
    """Write the whole site into ``out_dir`` (replaced). A model whose files are missing (a partial run) is listed
    with what is missing; it never stops the others. A model without its card whose entry names its summaries
    (a plan's ``summary`` template) gets a partial card from the summaries that exist, the others named missing,
    written beside the site (``cards/{dataset}/{model}.{json,html,md}``)."""
    options = merged_options("explorer", DEFAULTS, options)
    out = Path(out_dir)
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    (tmp / "assets").mkdir(parents=True)
    static = resources.files("attnaudit.explorer") / "static"
    for name in ("index.html", "explorer.js", "explorer.css"):
        target = tmp / name if name == "index.html" else tmp / "assets" / name
        target.write_text((static / name).read_text(encoding="utf-8"), encoding="utf-8")
    examples = _Examples(split)
    entries, label_names = [], {}
    for entry in models:
        d, m = entry["dataset"], entry["model"]
        card = read_json(entry["card"]) if Path(entry["card"]).exists() else None
        manifest = entry.get("manifest")
        if d not in label_names:
            label_names[d] = read_json(manifest).get("label_names") if manifest and Path(manifest).exists() else []
        partial = None
        if card is None and "summaries" in entry:
            partial = tmp / "cards" / d / f"{m}.json"
            card = partial_card(entry, partial)
        try:
            index_entry = build_model(entry, examples(entry["examples"]), tmp / "data" / d / m, split, options)
        except (FileNotFoundError, OSError) as err:
            log.warning("%s/%s: no instance data (%s)", d, m, err)
            index_entry = {"dataset": d, "model": m, "n_instances": 0, "n_pages": 0, "missing": [str(err)]}
        if card is None or partial is not None:
            instead = f" (a partial card from the summaries that exist: {partial.relative_to(tmp)})" if partial else ""
            index_entry["missing"] = [*index_entry.get("missing", []), f"audit card {entry['card']}{instead}"]
        index_entry |= {"card": card, "headline": headline(card)}
        entries.append(index_entry)
        log.info("%s/%s: %d instances, %d pages", d, m, index_entry["n_instances"], index_entry["n_pages"])
    index = {"split": split, "label_names": label_names, "models": entries}
    (tmp / "data").mkdir(exist_ok=True)
    (tmp / "data" / "index.js").write_text(js_assign("index", index), encoding="utf-8")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)
    return index
