"""Bastings & Filippova (2020) saliency audit: is attention a better explanation than input saliency?

B&F (a position paper) argue that when the goal is "which input tokens mattered for this prediction" and the
user is a model developer, faithfulness is the criterion and input saliency methods (§3: gradient §3.1 Eq. 2–4,
LRP §3.2, occlusion/omission §3.3 Eq. 5) address it head-on while attention does not (§4). This stage measures
that on the trained classifiers:

1. the importance stage (``rules/importance.smk``) scores every method once per model, timed (cost);
2. ``agreement`` — Kendall τ-b and top-k overlap between every pair of methods (B&F §4);
3. ``faithfulness`` — ERASER comprehensiveness / sufficiency / AOPC by deletion and by replacement, against a
   random ranking (B&F §3.3, §6);
4. ``planted`` — precision@k of the planted tokens, the ground truth of the synthetic corpus;
5. ``tables`` / ``figures`` — the CSVs and plots of ``results/{tables,figures}/bastings_filippova/``.

Faithfulness runs per instance chunk (:mod:`attnaudit.auditing`) and ``gather`` concatenates the chunks.
"""

from __future__ import annotations

from attnaudit.io import add_batch_arguments, add_gather_command  # pandas only: a gather job needs no torch
from attnaudit.io import json_arg as _json

DEFAULT_METHODS = [
    "attention",
    "gradient",
    "loo",
    "saliency_l2",
    "grad_x_input",
    "integrated_gradients",
    "occlusion",
    "omission",
    "lrp",
    "random",
]
DEFAULTS = {
    "methods": DEFAULT_METHODS,
    "rankings": ["signed", "abs"],
    "topk": 3,
    "fractions": [0.01, 0.05, 0.1, 0.2, 0.5],
    "variants": ["deletion", "unk"],
    "planted_k": [1],
}


def _agreement(a):
    from attnaudit.saliency import agreement

    opts = {**DEFAULTS, **_json(a.options)}
    agreement.run(
        a.dataset_dir,
        a.importance,
        a.out,
        split=a.split,
        methods=opts.get("methods"),
        k=opts["topk"],
        rankings=tuple(opts["rankings"]),
    )


def _faithfulness(a):
    from attnaudit.saliency import faithfulness

    opts = {**DEFAULTS, **_json(a.options)}
    faithfulness.run(
        a.dataset_dir,
        a.model_dir,
        a.importance,
        a.out,
        split=a.split,
        batch_size=a.batch_size,
        max_tokens=a.max_batch_tokens,
        chunk=a.chunk,
        n_chunks=a.n_chunks,
        methods=opts.get("methods"),
        fractions=tuple(opts["fractions"]),
        variants=tuple(opts["variants"]),
        rankings=tuple(opts["rankings"]),
        threads=a.threads,
    )


def _tables(a):
    from attnaudit.saliency import report

    report.run_tables(_json(a.runs), a.out_dir)


def _planted(a):
    from attnaudit.saliency import planted

    opts = {**DEFAULTS, **_json(a.options)}
    planted.run(_json(a.runs), a.out, split=a.split, ks=tuple(opts["planted_k"]), rankings=tuple(opts["rankings"]))


def _figures(a):
    from attnaudit.saliency import report

    report.run_figures(a.agreement, a.faithfulness, a.heatmap, a.curves, a.ranking, a.title)


def add_cli(subparsers) -> None:
    parser = subparsers.add_parser("saliency", help="Bastings & Filippova (2020) saliency and faithfulness audit")
    sub = parser.add_subparsers(dest="action", required=True)

    def chunked(p, model=True):
        p.add_argument("--dataset-dir", required=True)
        if model:
            p.add_argument("--model-dir", required=True)
        p.add_argument("--split", default="test")
        add_batch_arguments(p)
        p.add_argument("--chunk", type=int, default=0, help="0-based chunk index")
        p.add_argument("--n-chunks", type=int, default=1)
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--out", required=True)

    p = sub.add_parser("agreement", help="τ-b and top-k overlap between methods, per instance of one model")
    p.add_argument("--dataset-dir", required=True)
    p.add_argument("--importance", nargs="+", required=True, help="gathered importance parquets, one per method")
    p.add_argument("--split", default="test")
    p.add_argument("--options", default="{}", help="JSON: topk, rankings, methods")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_agreement)

    p = sub.add_parser("faithfulness", help="ERASER comprehensiveness/sufficiency for one instance chunk")
    chunked(p)
    p.add_argument("--importance", nargs="+", required=True, help="gathered importance parquets, one per method")
    p.add_argument("--options", default="{}", help="JSON: fractions, variants, rankings, methods")
    p.set_defaults(func=_faithfulness)

    add_gather_command(sub)

    p = sub.add_parser("tables", help="agreement/faithfulness/cost/ig_convergence CSVs over dataset × model")
    p.add_argument("--runs", required=True, help="JSON [{dataset, model, agreement, faithfulness, importance}]")
    p.add_argument("--out-dir", required=True)
    p.set_defaults(func=_tables)

    p = sub.add_parser("planted", help="precision@k of the planted tokens")
    p.add_argument("--runs", required=True, help="JSON [{dataset, dataset_dir, model, scores: [paths]}, ...]")
    p.add_argument("--split", default="test")
    p.add_argument("--options", default="{}", help="JSON: planted_k, rankings")
    p.add_argument("--out", required=True)
    p.set_defaults(func=_planted)

    p = sub.add_parser("figures", help="agreement heatmap and faithfulness curves of one model")
    p.add_argument("--agreement", required=True)
    p.add_argument("--faithfulness", required=True)
    p.add_argument("--heatmap", required=True)
    p.add_argument("--curves", required=True)
    p.add_argument("--ranking", default="signed")
    p.add_argument("--title", default="")
    p.set_defaults(func=_figures)
