"""Tutek & Šnajder (2020), "Staying True to Your Word: (How) Can Attention Become Explanation?": the stage's
audits of trained (base and regularised) models, tables, figures and a cross-audit summary.

- fragility (§4.1, Table 1): test F1 with the trained, a uniform and randomly permuted attention;
- mutual-information (§3.4, §4.2, Table 2): MI between clustered input embeddings and hidden states;
- token-probability (§5, Eq. 9, Table 3, Fig. 2): the prediction if all attention were on one token;
- tables (Tables 1, 2, 3, 6 beside the paper's numbers, with computed "directions"), figures (ΔF1 bars,
  Fig. 2, Fig. 1), summary (the J&W and B&F audits of the same models, per regulariser).

``python -m attnaudit tutek-snajder {fragility,mutual-information,token-probability,tables,figures,summary}``
(alias ``ts``); each takes explicit paths and writes atomically. Options: :mod:`attnaudit.tutek_snajder.options`.
"""

from __future__ import annotations

import importlib

from attnaudit.tutek_snajder.options import DEFAULTS

RUNS_HELP = "JSON list of run records, inline or @file (see attnaudit.tutek_snajder.runs)"


def _run(module: str, name: str, *args, **kwargs):
    return getattr(importlib.import_module(f"attnaudit.tutek_snajder.{module}"), name)(*args, **kwargs)


def _model_args(p, split: bool = True) -> None:
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--model-dir", required=True)
    if split:
        p.add_argument("--split", default="test")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", required=True)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("tutek-snajder", aliases=["ts"], help="Tutek & Šnajder (2020) audits, tables, figures")
    sub = p.add_subparsers(dest="ts_command", required=True)

    f = sub.add_parser("fragility", help="§4.1 / Table 1: F1 with trained, uniform, permuted attention → JSON")
    _model_args(f)
    f.add_argument("--n-permutations", type=int, default=DEFAULTS["fragility"]["n_permutations"])
    f.add_argument("--seed", type=int, default=0)
    f.set_defaults(
        func=lambda a: _run(
            "fragility",
            "run_fragility",
            a.dataset_dir,
            a.model_dir,
            a.out,
            split=a.split,
            n_permutations=a.n_permutations,
            seed=a.seed,
            batch_size=a.batch_size,
            threads=a.threads,
        )
    )

    mi_defaults = DEFAULTS["mutual_information"]
    m = sub.add_parser("mutual-information", help="§3.4 / Table 2: MI of clustered e_t and h_t (train) → JSON")
    _model_args(m, split=False)
    m.add_argument("--n-words", type=int, default=mi_defaults["n_words"])
    m.add_argument("--k", type=int, default=mi_defaults["k"])
    m.add_argument("--kmeans-batch", type=int, default=mi_defaults["kmeans_batch"])
    m.add_argument("--max-points", type=int, default=mi_defaults["max_points"])
    m.add_argument("--n-init", type=int, default=mi_defaults["n_init"])
    m.add_argument("--unigram-power", type=float, default=mi_defaults["unigram_power"])
    m.add_argument("--seed", type=int, default=0)
    m.set_defaults(
        func=lambda a: _run(
            "mutual_information",
            "run_mutual_information",
            a.dataset_dir,
            a.model_dir,
            a.out,
            n_words=a.n_words,
            k=a.k,
            kmeans_batch=a.kmeans_batch,
            max_points=a.max_points,
            seed=a.seed,
            threads=a.threads,
            batch_size=a.batch_size,
            n_init=a.n_init,
            unigram_power=a.unigram_power,
        )
    )

    t = sub.add_parser("token-probability", help="§5, Eq. 9 / Table 3: per-token probabilities → parquet")
    _model_args(t)
    t.set_defaults(
        func=lambda a: _run(
            "token_probability",
            "run_token_probability",
            a.dataset_dir,
            a.model_dir,
            a.out,
            split=a.split,
            batch_size=a.batch_size,
            threads=a.threads,
        )
    )

    tables = sub.add_parser("tables", help="Tables 1, 2, 3, 6 and directions (CSV + markdown)")
    tables.add_argument("--runs", required=True, help=RUNS_HELP)
    tables.add_argument("--out-dir", required=True)
    tables.add_argument("--f1", choices=["positive", "macro"], default=DEFAULTS["tables"]["f1"])
    tables.set_defaults(func=lambda a: _run("tables", "write_tables", a.runs, a.out_dir, {"tables": {"f1": a.f1}}))

    fig_defaults = DEFAULTS["figures"]
    g = sub.add_parser("figures", help="ΔF1 bars, per-token probability (Fig. 2), adversaries (Fig. 1)")
    g.add_argument("--runs", required=True, help=RUNS_HELP)
    g.add_argument("--out-fragility", required=True)
    g.add_argument("--out-token-probability", required=True)
    g.add_argument("--out-adversary", required=True)
    g.add_argument("--imitations", nargs="*", default=[], help="imitation/adversary JSON files of the W&P stage")
    g.add_argument("--n-examples", type=int, default=fig_defaults["n_examples"])
    g.add_argument("--max-tokens", type=int, default=fig_defaults["max_tokens"])
    g.add_argument("--dataset", default=None, help="dataset of Fig. 2 (default: the first of the runs)")
    g.add_argument("--f1", choices=["positive", "macro"], default=DEFAULTS["tables"]["f1"])
    g.add_argument("--manifest", default=None, help="the corpus manifest, whose label_names name Fig. 2's classes")
    g.set_defaults(
        func=lambda a: _run(
            "figures",
            "write_figures",
            a.runs,
            a.out_fragility,
            a.out_token_probability,
            a.out_adversary,
            imitations=a.imitations,
            n_examples=a.n_examples,
            max_tokens=a.max_tokens,
            dataset=a.dataset,
            f1=a.f1,
            manifest=a.manifest,
        )
    )

    s = sub.add_parser("summary", help="J&W and B&F audits of the same models, per regulariser × attention")
    s.add_argument("--runs", required=True, help=RUNS_HELP)
    s.add_argument("--out-csv", required=True)
    s.add_argument("--out-md", required=True)
    s.add_argument("--f1", choices=["positive", "macro"], default=DEFAULTS["tables"]["f1"], help="Table 1's F1")
    s.set_defaults(func=lambda a: _run("summary", "write_summary", a.runs, a.out_csv, a.out_md, f1=a.f1))
