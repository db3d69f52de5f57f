"""Jain & Wallace (2019), "Attention is not Explanation": the §4 audits as a pipeline stage.

- correlation (§4.1, Alg. 1, Table 2, Fig. 2, App. C): Kendall τ-b between attention, gradient and LOO;
- permutation (§4.2.1, Alg. 2, Fig. 3): output change when α̂ is shuffled with h fixed;
- adversarial (§4.2.2, Eq. 1–2, Alg. 3, Figs. 4–5): maximally different attention within ε of the output;
- tables, figures and adversarial heatmaps (Fig. 1, App. E).

``python -m attnaudit jain-wallace {audit,gather,tables,figures,heatmaps} ...``; the Snakemake rules in
``rules/jain_wallace.smk`` call exactly these. Options: :mod:`attnaudit.jain_wallace.options`.
"""

from __future__ import annotations

from attnaudit.io import add_batch_arguments, add_gather_command  # pandas only: a gather job needs no torch
from attnaudit.io import json_arg as _json


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("jain-wallace", aliases=["jw"], help="Jain & Wallace (2019) audits, tables, figures")
    sub = p.add_subparsers(dest="jw_command", required=True)

    c = sub.add_parser("correlation", help="Kendall τ between importance methods per instance (reads their scores)")
    c.add_argument("--importance", nargs="+", required=True, help="gathered importance parquets, one per method")
    c.add_argument("--dataset-dir", required=True)
    c.add_argument("--split", default="test")
    c.add_argument("--options", default="{}", help="JSON: the jain_wallace config block")
    c.add_argument("--out", required=True)
    c.set_defaults(
        func=lambda a: _run(
            "correlation", "run", a.importance, a.dataset_dir, a.out, split=a.split, options=_json(a.options)
        )
    )

    a = sub.add_parser("audit", help="one model-probing audit on one instance chunk → per-instance parquet")
    a.add_argument("audit", choices=["permutation", "adversarial"])
    a.add_argument("--dataset-dir", required=True)
    a.add_argument("--model-dir", required=True)
    a.add_argument("--out", required=True)
    a.add_argument("--chunk", type=int, default=0)
    a.add_argument("--n-chunks", type=int, default=1)
    a.add_argument("--split", default="test")
    add_batch_arguments(a)
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--options", default="{}", help="JSON: the jain_wallace config block")
    a.add_argument("--threads", type=int, default=1)
    a.set_defaults(func=_audit)

    add_gather_command(sub)

    t = sub.add_parser("tables", help="summary tables (results/tables/jain_wallace)")
    t.add_argument(
        "--runs",
        required=True,
        help="JSON list of {dataset, model, corpus, variant fields, correlation, permutation, adversarial (paths)}",
    )
    t.add_argument("--out-dir", required=True)
    t.add_argument("--options", default="{}")
    t.set_defaults(
        func=lambda args: _run("tables", "write_tables", _json(args.runs), args.out_dir, _json(args.options))
    )

    f = sub.add_parser("figures", help="figures of one dataset")
    f.add_argument("--dataset", required=True)
    f.add_argument("--models", nargs="+", required=True)
    for audit in ("correlation", "permutation", "adversarial"):
        f.add_argument(f"--{audit}", nargs="+", required=True, help=f"jw_{audit}.parquet per model, in --models order")
    f.add_argument("--variants", default="{}", help="JSON: model → its sheet fields (encoder, attention, …)")
    f.add_argument("--out-dir", required=True)
    f.add_argument("--manifest", help="the corpus manifest.json (class names for the legends)")
    f.set_defaults(
        func=lambda args: _run(
            "figures",
            "write_figures",
            args.dataset,
            args.models,
            {"correlation": args.correlation, "permutation": args.permutation, "adversarial": args.adversarial},
            args.out_dir,
            _json(args.variants),
            args.manifest,
        )
    )

    h = sub.add_parser("heatmaps", help="adversarial heatmaps of one model (HTML)")
    h.add_argument("--dataset", required=True)
    h.add_argument("--model", required=True)
    h.add_argument("--adversarial", required=True, help="gathered jw_adversarial.parquet")
    h.add_argument("--dataset-dir", required=True)
    h.add_argument("--out", required=True)
    h.add_argument("--options", default="{}")
    h.add_argument("--seed", type=int, default=0)
    h.add_argument("--manifest", help="the corpus manifest.json (class names)")
    h.set_defaults(func=_heatmaps)


def _run(module: str, name: str, *args, **kwargs):
    import importlib

    return getattr(importlib.import_module(f"attnaudit.jain_wallace.{module}"), name)(*args, **kwargs)


def _audit(args) -> None:
    _run(
        "run",
        "run_audit",
        args.audit,
        args.dataset_dir,
        args.model_dir,
        args.out,
        chunk=args.chunk,
        n_chunks=args.n_chunks,
        split=args.split,
        batch_size=args.batch_size,
        max_tokens=args.max_batch_tokens,
        seed=args.seed,
        options=_json(args.options),
        threads=args.threads,
    )


def _heatmaps(args) -> None:
    from attnaudit.jain_wallace.options import resolve, validity_epsilon

    opts = resolve(_json(args.options))
    _run(
        "heatmaps",
        "write_heatmaps",
        args.dataset,
        args.model,
        args.adversarial,
        args.dataset_dir,
        args.out,
        n=opts["heatmaps"]["n_per_model"],
        how=opts["heatmaps"]["select"],
        epsilon=validity_epsilon(opts["adversarial"]),
        seed=args.seed,
        manifest=args.manifest,
    )
