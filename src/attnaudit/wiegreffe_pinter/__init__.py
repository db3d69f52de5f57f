"""Wiegreffe & Pinter (2019), "Attention is not not Explanation": the §3–4 analyses as a pipeline stage.

- uniform (§3.2, Table 2): base vs uniform-attention F1 over seeds, beside the paper;
- seed-variance, seed-figures, seed-table (§3.3, Fig. 3): attention JSD of other random seeds to the base model,
  against J&W's ε-max adversary in J&W Fig. 8's plane;
- diagnostic (§3.4): the diagnostic MLP under each attention guide, and whether the paper's ordering holds;
- imitation, adversary (§4): the consistently adversarial students per λ against those baselines.

``python -m attnaudit wiegreffe-pinter <command> ...`` (alias ``wp``); each command reads the files it is given and
writes its outputs atomically. Options: :mod:`attnaudit.wiegreffe_pinter.options`.
"""

from __future__ import annotations

from attnaudit.io import json_arg as _json


def _run(module: str, name: str, *args, **kwargs):
    import importlib

    return getattr(importlib.import_module(f"attnaudit.wiegreffe_pinter.{module}"), name)(*args, **kwargs)


def add_cli(subparsers) -> None:
    p = subparsers.add_parser("wiegreffe-pinter", aliases=["wp"], help="Wiegreffe & Pinter (2019) audits")
    sub = p.add_subparsers(dest="wp_command", required=True)

    u = sub.add_parser("uniform", help="§3.2 Table 2: base vs uniform attention F1")
    u.add_argument("--runs", required=True, help="JSON list (or @file) of {dataset, model, role, seed, metrics}")
    u.add_argument("--out-csv", required=True)
    u.add_argument("--out-md", required=True)
    u.add_argument("--options", default="{}", help="JSON: the wiegreffe_pinter config block")
    u.set_defaults(func=lambda a: _run("tables", "write_uniform", _json(a.runs), a.out_csv, a.out_md, _json(a.options)))

    s = sub.add_parser("seed-variance", help="§3.3: per-instance JSD/TVD of seed models to the base model")
    s.add_argument("--base-predictions", required=True)
    s.add_argument("--seed-predictions", nargs="+", required=True)
    s.add_argument("--dataset-dir", required=True)
    s.add_argument("--adversarial", required=True, help="the base model's gathered jw_adversarial.parquet")
    s.add_argument("--split", default="test")
    s.add_argument("--out", required=True)
    s.add_argument("--options", default="{}")
    s.set_defaults(
        func=lambda a: _run(
            "seeds",
            "write_seed_variance",
            a.out,
            a.base_predictions,
            a.seed_predictions,
            a.dataset_dir,
            a.adversarial,
            split=a.split,
            options=_json(a.options),
        )
    )

    f = sub.add_parser("seed-figures", help="§3.3 Fig. 3: violins (seeds | J&W adversary) and scatter")
    f.add_argument("--seed-variance", required=True)
    f.add_argument("--out-violin", required=True)
    f.add_argument("--out-scatter", required=True)
    f.add_argument("--title", required=True)
    f.add_argument("--options", default="{}")
    f.add_argument("--manifest", help="the corpus manifest: class names for the legends")
    f.set_defaults(
        func=lambda a: _run(
            "figures",
            "seed_figures",
            a.seed_variance,
            a.out_violin,
            a.out_scatter,
            a.title,
            _json(a.options),
            a.manifest,
        )
    )

    t = sub.add_parser("seed-table", help="§3.3: seed variance vs J&W adversary per dataset")
    t.add_argument("--inputs", required=True, help="JSON list (or @file) of {dataset, model, seed_variance, n_seeds}")
    t.add_argument("--out-csv", required=True)
    t.add_argument("--out-md", required=True)
    t.set_defaults(func=lambda a: _run("tables", "write_seed_table", _json(a.inputs), a.out_csv, a.out_md))

    i = sub.add_parser("imitation", help="§4: JSD/TVD/F1 of a consistently adversarial student vs its teacher")
    i.add_argument("--student-predictions", required=True)
    i.add_argument("--teacher-predictions", required=True)
    i.add_argument("--dataset-dir", required=True)
    i.add_argument("--split", default="test")
    i.add_argument("--lambda", dest="lam", type=float, required=True)
    i.add_argument("--student", required=True, help="student model id")
    i.add_argument("--teacher", required=True, help="teacher model id")
    i.add_argument("--dataset", required=True)
    i.add_argument("--out", required=True)
    i.set_defaults(
        func=lambda a: _run(
            "imitation",
            "write_imitation",
            a.out,
            a.student_predictions,
            a.teacher_predictions,
            a.dataset_dir,
            split=a.split,
            lam=a.lam,
            student=a.student,
            teacher=a.teacher,
            dataset=a.dataset,
        )
    )

    d = sub.add_parser("diagnostic", help="§3.4: diagnostic MLP F1 per guide")
    d.add_argument(
        "--runs", required=True, help="JSON list (or @file) of {dataset, corpus, model, guide, seed, metrics}"
    )
    d.add_argument("--out-csv", required=True)
    d.add_argument("--out-md", required=True)
    d.set_defaults(func=lambda a: _run("tables", "write_diagnostic", _json(a.runs), a.out_csv, a.out_md))

    v = sub.add_parser("adversary", help="§4 figure: students per λ vs seed variance and J&W's adversary")
    v.add_argument("--imitations", nargs="+", required=True, help="imitation JSONs of one dataset and teacher")
    v.add_argument("--seed-variance", help="seed-variance parquet (optional reference point)")
    v.add_argument("--adversarial", help="J&W jw_adversarial.parquet of the teacher (optional reference point)")
    v.add_argument("--out-csv", required=True)
    v.add_argument("--out-png", required=True)
    v.add_argument("--title")
    v.set_defaults(
        func=lambda a: _run(
            "adversary",
            "write_adversary",
            a.imitations,
            a.out_csv,
            a.out_png,
            seed_variance=a.seed_variance,
            adversarial=a.adversarial,
            title=a.title,
        )
    )
