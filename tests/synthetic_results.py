"""A synthetic results tree for the explorer (examples, predictions, importance, J&W adversarial, a card) of any
size, used by tests/test_cards.py and tests/test_explorer_browser.py, and as a script to time the explorer on
IMDB-sized outputs:

    python tests/synthetic_results.py OUT_DIR --instances 4000 --tokens 250
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import pandas as pd

METHODS = ["gradient", "loo", "integrated_gradients", "occlusion"]


def make_results(
    root: Path,
    n_instances: int = 30,
    n_tokens: int = 12,
    *,
    seed: int = 0,
    special: str | None = None,
    first_tokens: list[str] | None = None,
    methods=METHODS,
    queries: bool = False,
):
    """Write ``root/results/...`` for one dataset ``synth`` and one model ``m-s0``; returns the explorer model entry.
    ``special``: a token placed in the first instance (e.g. a ``<script>`` to check escaping); ``first_tokens``: the
    first instance's tokens between its markers; ``queries``: a QA/NLI
    dataset, whose examples carry ``query_tokens`` (``<s> q<i> w… </s>``)."""
    rng = np.random.default_rng(seed)
    res = root / "results"
    lengths = rng.integers(max(3, n_tokens // 2), n_tokens + 1, size=n_instances)
    vocab = np.array([f"w{i}" for i in range(500)])
    tokens = [["<s>", *vocab[rng.integers(0, 500, size=n - 2)], "</s>"] for n in lengths]
    if first_tokens:
        tokens[0], lengths[0] = ["<s>", *first_tokens, "</s>"], len(first_tokens) + 2
    if special:
        tokens[0][1] = special
    ids = [f"synth-test-{i:05d}" for i in range(n_instances)]
    labels = rng.integers(0, 2, size=n_instances)
    (res / "datasets/synth").mkdir(parents=True, exist_ok=True)
    examples = pd.DataFrame({"id": ids, "split": "test", "label": labels, "tokens": tokens})
    if queries:
        examples["query_tokens"] = [
            ["<s>", f"q{i}", *vocab[rng.integers(0, 500, size=3)], "</s>"] for i in range(n_instances)
        ]
    examples.to_parquet(res / "datasets/synth/examples.parquet")
    attention = [rng.dirichlet(np.ones(n)).astype(np.float32) for n in lengths]
    p1 = rng.uniform(size=n_instances)
    model_dir = res / "models/synth/m-s0"
    model_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "id": ids,
            "split": "test",
            "label": labels,
            "predicted": (p1 > 0.5).astype(int),
            "probs": [np.array([1 - p, p], dtype=np.float32) for p in p1],
            "attention": attention,
        }
    ).to_parquet(model_dir / "predictions.parquet")
    (model_dir / "metrics.json").write_text(json.dumps({"test": {"accuracy": 0.5, "macro_f1": 0.5, "n": n_instances}}))
    (res / "corpora/synth").mkdir(parents=True, exist_ok=True)
    (res / "corpora/synth/manifest.json").write_text(json.dumps({"label_names": ["neg<b>", "pos"]}))
    sources = []
    imp = res / "importance/synth/m-s0"
    imp.mkdir(parents=True, exist_ok=True)
    for method in ["attention", *methods]:
        scores = attention if method == "attention" else [rng.normal(size=n).astype(np.float32) for n in lengths]
        pd.DataFrame({"id": ids, "row": range(n_instances), "scores": scores}).to_parquet(imp / f"{method}.parquet")
        if method != "attention":
            sources.append({"path": str(imp / f"{method}.parquet"), "overlays": {method: "scores"}, "values": {}})
    adv = res / "audits/synth/m-s0/jw_adversarial.parquet"
    adv.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(
        {
            "id": ids,
            "eps_max_jsd": rng.uniform(0, 0.69, size=n_instances),
            "best_tvd": rng.uniform(0, 0.01, size=n_instances),
            "adversarial_attention": [rng.dirichlet(np.ones(n) * 0.3) for n in lengths],
        }
    ).to_parquet(adv)
    sources.append(
        {
            "path": str(adv),
            "overlays": {"adversarial attention": "adversarial_attention"},
            "values": {"ε-max JSD": "eps_max_jsd", "Δŷ adversary (TVD)": "best_tvd"},
        }
    )
    return {
        "dataset": "synth",
        "model": "m-s0",
        "card": str(res / "cards/synth/m-s0.json"),  # absent: the explorer must list it as missing
        "predictions": str(model_dir / "predictions.parquet"),
        "examples": str(res / "datasets/synth/examples.parquet"),
        "manifest": str(res / "corpora/synth/manifest.json"),
        "sources": sources,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--instances", type=int, default=4000)
    parser.add_argument("--tokens", type=int, default=250)
    parser.add_argument("--page-size", type=int, default=50)
    parser.add_argument("--methods", type=int, default=len(METHODS), help="saliency methods besides attention")
    args = parser.parse_args()
    from attnaudit.explorer.build import build_site

    t0 = time.perf_counter()
    methods = [*METHODS, *(f"method{i}" for i in range(max(0, args.methods - len(METHODS))))][: args.methods]
    entry = make_results(args.out, args.instances, args.tokens, methods=methods)
    t1 = time.perf_counter()
    build_site([entry], args.out / "results/explorer", options={"page_size": args.page_size})
    t2 = time.perf_counter()
    size = sum(p.stat().st_size for p in (args.out / "results/explorer").rglob("*") if p.is_file())
    print(f"generated {t1 - t0:.1f} s, explorer built {t2 - t1:.1f} s, {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()


def read_js(path: Path):
    """The object an explorer data file assigns (``...data["key"]=OBJ;``)."""
    text = path.read_text(encoding="utf-8")
    return json.loads(text[text.index("]=") + 2 : text.rindex(";")])
