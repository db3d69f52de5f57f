"""The model sheet: every model a dataset trains, from config, in the spirit of the Snakemake workflows' sample sheets.

``datasets.<name>.models`` maps a *variant* name to free fields (encoder, attention, regulariser, objective,
teacher, any training hyper-parameter) and ``seeds``; each seed is one model, ``<variant>-s<seed>``. Jain &
Wallace's grid stays one short block, ``datasets.<name>.grid``: a generator of sheet entries named
``{encoder}-{attention}-base``. This module is the one place that expands the sheet, makes and parses model ids,
and checks what the JSON schema cannot: names, field combinations, teachers that exist, and no cycles.

A *teacher* is another model of the same dataset a variant learns from: ``guide`` (W&P §3.4, attention read from
the guide's saved attention, training and testing) or ``teacher`` (W&P §4, the ``imitate`` objective). It is
named by model id (``lstm-additive-base-s0``: that model for every seed) or by variant (``lstm-additive-base``:
the teacher's model with the student's seed). Teachers are always of the same dataset, hence the same splits.
"""

from __future__ import annotations

import json
import re
from itertools import product

from attnaudit import AttnauditError, ConfigKeyError
from attnaudit.io import without_defaults

VARIANT_NAME = r"[a-z0-9][a-z0-9_.]*(?:-[a-z0-9_.]+)*"
MODEL_ID = re.compile(rf"^(?P<variant>{VARIANT_NAME})-s(?P<seed>\d+)$")
#: the Snakemake wildcard constraint of ``{model}`` (rules/common.smk uses it; same language as MODEL_ID)
MODEL_WILDCARD = r"[a-z0-9][a-z0-9_.-]*-s\d+"

REGULARISERS = ("base", "concat", "residual", "tying", "mlm")
OBJECTIVES = ("classify", "imitate")
#: the imitate objective's attention divergences (attnaudit.objectives.imitate.DIVERGENCES, which needs torch)
DIVERGENCES = ("kl", "jsd")
GRID_DEFAULTS = {"encoders": ["lstm", "cnn", "average"], "attentions": ["additive", "dot"], "seeds": [0]}
#: what a variant is unless its fields say otherwise (J&W's BiLSTM with additive attention, classification)
VARIANT_DEFAULTS = {"encoder": "lstm", "attention": "additive", "regulariser": "base", "objective": "classify"}
#: what a regulariser brings unless the variant's fields say otherwise: T&Š §3.1 tie the MLM decoder to the input
#: embedding matrix "and keep them frozen during training", so an mlm variant trains with fixed embeddings
REGULARISER_DEFAULTS = {"mlm": {"freeze_embeddings": True}}
#: every training field and its default: J&W's Appendix A, and what the other papers' variants leave unchanged
TRAINING_DEFAULTS = {
    **VARIANT_DEFAULTS,  # regulariser: T&Š §3.1's concat, residual, tying, mlm; objective: W&P §4's imitate
    "seed": 0,
    "clip": None,  # max gradient norm (T&Š: 5)
    "lstm_layers": 1,
    "mlp_hidden": 128,
    "epochs": 8,
    "batch_size": 32,
    "lr": 1e-3,
    "weight_decay": 1e-5,
    "amsgrad": False,  # J&W App. A.1: PyTorch's default Adam; J&W's and W&P's classification code: AMSGrad
    "attention_weight_decay": None,  # None: weight_decay, on all parameters (App. A.1); their code: 0
    "selection": "best",  # best dev epoch (by selection_metric) or "last"
    "selection_metric": "macro_f1",
    "class_weighting": False,
    "dropout": 0.0,
    "lstm_hidden": 128,
    "cnn_kernels": [1, 3, 5, 7],
    "cnn_filters": 64,
    "average_hidden": 256,
    "eval_batch_size": 256,
    "patience": None,  # epochs without a better dev score before stopping (selection: best); None: all epochs
    "freeze_embeddings": False,
    "attend_to_markers": False,  # α is 0 on <s>, </s> (J&W's and W&P's code mask them)
    "max_batch_tokens": 16384,  # padded tokens per batch at most: a long document cannot blow up memory
}
#: training fields every model's job parameters carry even where the config leaves them out, so that a study trained
#: before such a default existed (or changed) retrains: J&W's Appendix A optimisation and selection (which the
#: default config writes out), and attend_to_markers (earlier releases' attention weighed <s>, </s>)
EXPLICIT_DEFAULTS = {
    key: TRAINING_DEFAULTS[key]
    for key in ("epochs", "batch_size", "lr", "weight_decay", "selection", "selection_metric", "attend_to_markers")
}
#: fields that choose an epoch of a training run or name its model, not how it trains (if no ``patience`` stops it)
SELECTION_FIELDS = ("variant", "selection", "selection_metric", "patience")
#: training fields that only one encoder reads; a QA/NLI model also reads decoder_hidden (if unset, half its encoder's
#: output size)
ENCODER_FIELDS = {
    "lstm": ("lstm_hidden", "lstm_layers"),
    "cnn": ("cnn_kernels", "cnn_filters"),
    "average": ("average_hidden",),
    "mlp": ("mlp_hidden",),
}
QA_FIELDS = ("decoder_hidden",)
#: training fields only attention with parameters reads (uniform and guided attention learn none)
LEARNED_ATTENTION_FIELDS = ("attention_weight_decay",)
UNLEARNED_ATTENTION = ("uniform", "guided")
#: regularisers that compare or add h_t and e_t, so 2·lstm_hidden (the encoder output) must equal the embedding
SAME_SIZE = ("residual", "tying", "mlm")


def fields_read(spec: dict, qa: bool = False) -> dict:
    """``spec`` without the training fields its model does not read (another encoder's sizes, the QA decoder's
    width in a classifier, the attention's weight decay where attention learns nothing), so setting
    ``train.average_hidden`` reruns the average models only."""
    specific = {field for fields in ENCODER_FIELDS.values() for field in fields}
    specific |= {*QA_FIELDS, *LEARNED_ATTENTION_FIELDS}
    read = {*ENCODER_FIELDS.get(spec["encoder"], ()), *(QA_FIELDS if qa else ())}
    if spec.get("attention") not in UNLEARNED_ATTENTION:
        read |= set(LEARNED_ATTENTION_FIELDS)
    return {key: value for key, value in spec.items() if key not in specific - read}


def without_restated_defaults(spec: dict) -> dict:
    """``spec`` without the fields that only restate their default (``train: {dropout: 0.0}``, ``lstm_layers: 1``),
    so that writing a default out changes no job's parameters and retrains nothing. What names the model (its
    variant fields, seed, class weighting), its regulariser's defaults and :data:`EXPLICIT_DEFAULTS` stay."""
    kept = {"variant", "seed", "class_weighting", *VARIANT_DEFAULTS, *EXPLICIT_DEFAULTS}
    kept |= REGULARISER_DEFAULTS.get(spec.get("regulariser"), {}).keys()
    return without_defaults(spec, TRAINING_DEFAULTS, kept)


def format_model_id(variant: str, seed: int) -> str:
    return f"{variant}-s{seed}"


def parse_model_id(model_id: str) -> dict:
    """``{"variant", "seed"}`` of a model id such as ``lstm-additive-tying20-s0``."""
    match = MODEL_ID.match(model_id)
    if not match:
        raise AttnauditError(f"model id {model_id!r} is not of the form <variant>-s<seed>, e.g. lstm-additive-base-s0")
    return {"variant": match["variant"], "seed": int(match["seed"])}


def grid_variants(grid: dict | list, at: tuple = ("grid",)) -> dict[str, dict]:
    """J&W's grid (config key ``at``) as sheet entries: each block is the product of its lists, blocks united in
    order; a variant in several blocks collects their seeds."""
    variants: dict[str, dict] = {}
    blocks = [((*at, i), block) for i, block in enumerate(grid)] if isinstance(grid, list) else [(at, grid)]
    for block_key, block in blocks:
        block = {**GRID_DEFAULTS, **block}
        for regulariser in block.get("regularisers", ["base"]):
            if regulariser != "base":
                raise ConfigKeyError(
                    (*block_key, "regularisers"),
                    f"{regulariser!r} — the grid generates J&W's base models only; put regularised variants under "
                    "models: (the model sheet)",
                )
        for encoder, attention in product(block["encoders"], block["attentions"]):
            entry = variants.setdefault(
                f"{encoder}-{attention}-base", {"encoder": encoder, "attention": attention, "seeds": []}
            )
            entry["seeds"] += [s for s in block["seeds"] if s not in entry["seeds"]]
    return variants


def sheet(dataset: str, entry: dict) -> dict[str, dict]:
    """Every model of one dataset: ``{model_id: fields}`` with ``variant``, ``seed`` and the variant's fields
    (teachers resolved to model ids), grid entries first, then the sheet's in config order. Checked."""
    where = ("datasets", dataset)
    variants = grid_variants(entry.get("grid", {}), (*where, "grid"))
    for name, fields in (entry.get("models") or {}).items():
        if name in variants:
            raise ConfigKeyError((*where, "models", name), "the grid already generates this variant; rename it")
        variants[name] = dict(fields)
    models: dict[str, dict] = {}
    for name, fields in variants.items():
        key = (*where, "models", name)
        if not re.fullmatch(VARIANT_NAME, name) or re.search(r"-s\d+$", name):
            raise ConfigKeyError(
                key,
                "a variant name is lower-case letters, digits, '_' and '.', in parts joined by '-', and does not "
                "end in -s<digits> (the seed suffix), e.g. lstm-additive-tying20",
            )
        seeds = fields.get("seeds", [0])
        if not seeds:
            raise ConfigKeyError((*key, "seeds"), "give at least one seed")
        own = {k: v for k, v in fields.items() if k != "seeds"}
        spec = {**VARIANT_DEFAULTS, **REGULARISER_DEFAULTS.get(own.get("regulariser"), {}), **own}
        check_fields(key, spec, entry)
        for seed in seeds:
            models[format_model_id(name, seed)] = {**spec, "variant": name, "seed": int(seed)}
    for spec in models.values():
        for role in ("guide", "teacher"):
            if spec.get(role):
                spec[role] = resolve_teacher(
                    (*where, "models", spec["variant"], role), spec[role], spec["seed"], models
                )
    check_acyclic(where, models)
    return models


def check_fields(key: tuple, spec: dict, dataset_entry: dict) -> None:
    """What the schema cannot say of the variant at config ``key``: combinations of fields, checked before anything
    trains."""
    regulariser = spec.get("regulariser", "base")
    objective = spec.get("objective", "classify")
    attention = spec.get("attention", "additive")
    encoder = spec.get("encoder", "lstm")
    if regulariser not in REGULARISERS:
        raise ConfigKeyError((*key, "regulariser"), f"{regulariser!r} is not one of {', '.join(REGULARISERS)}")
    if objective not in OBJECTIVES:
        raise ConfigKeyError((*key, "objective"), f"{objective!r} is not one of {', '.join(OBJECTIVES)}")
    for field, applies in (
        ("delta", regulariser == "tying"),
        ("eta", regulariser == "mlm"),
        ("mlm_probability", regulariser == "mlm"),
        ("lambda", objective == "imitate"),
        ("divergence", objective == "imitate"),
    ):
        if field in spec:
            value = spec[field]
            if not applies:
                raise ConfigKeyError(
                    (*key, field),
                    f"set, but it does not apply to this variant (regulariser {regulariser}, objective {objective})",
                )
            if field == "divergence":
                if value not in DIVERGENCES:
                    raise ConfigKeyError(
                        (*key, field),
                        f"{value!r} is not one of {', '.join(DIVERGENCES)} (kl: W&P's code; jsd: T&Š Eq. 6)",
                    )
            elif isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ConfigKeyError((*key, field), f"expected a non-negative number, got {value!r}")
    if attention == "guided" and not spec.get("guide"):
        raise ConfigKeyError(
            (*key, "guide"),
            "guided attention reads another model's attention; name that model (e.g. guide: lstm-additive-base-s0)",
        )
    if spec.get("guide") and attention != "guided":
        raise ConfigKeyError((*key, "guide"), f"set, but attention is {attention!r}; use attention: guided")
    if objective == "imitate" and not spec.get("teacher"):
        raise ConfigKeyError((*key, "teacher"), "the imitate objective (W&P §4) needs the model to imitate")
    if spec.get("teacher") and objective != "imitate":
        raise ConfigKeyError((*key, "teacher"), f"set, but objective is {objective!r}; use objective: imitate")
    if objective == "imitate" and attention in UNLEARNED_ATTENTION:
        raise ConfigKeyError(
            (*key, "attention"),
            f"{attention} attention learns nothing, so the imitate objective (W&P §4) cannot move it away from the "
            "teacher's: the divergence from α_teacher is a constant and lambda does nothing; use a learned "
            "attention (additive or dot)",
        )
    if regulariser in ("concat", *SAME_SIZE) and encoder != "lstm":
        raise ConfigKeyError(
            (*key, "regulariser"), f"{regulariser} is defined for the BiLSTM encoder (T&Š §3.1), not {encoder}"
        )
    if regulariser in SAME_SIZE:
        dim = (dataset_entry.get("embeddings") or {}).get("dim", 300)
        hidden = spec.get("lstm_hidden", (dataset_entry.get("train") or {}).get("lstm_hidden", 128))
        if 2 * hidden != dim:  # pretrained vectors too: the dry run checks that the file has embeddings.dim
            raise ConfigKeyError(
                (*key, "lstm_hidden"),
                f"{regulariser} compares h_t with the {dim}-d embedding e_t, so the BiLSTM needs lstm_hidden: "
                f"{dim // 2} per direction (2 × {dim // 2} = {dim}), not {hidden} (T&Š §3.1)",
            )


def resolve_teacher(key: tuple, name: str, seed: int, models: dict[str, dict]) -> str:
    """A teacher named by model id, or by variant (then with the student's seed); it must be in the sheet."""
    candidate = name if MODEL_ID.match(name) and name in models else format_model_id(name, seed)
    if candidate not in models:
        known = sorted({spec["variant"] for spec in models.values()})
        raise ConfigKeyError(
            key, f"{name!r} names no model of this dataset (seed {seed}); variants: {', '.join(known)}"
        )
    return candidate


def teachers_of(spec: dict) -> list[str]:
    return [spec[role] for role in ("guide", "teacher") if spec.get(role)]


def check_acyclic(where: tuple, models: dict[str, dict]) -> None:
    state: dict[str, int] = {}  # 1 = on the path, 2 = done

    def visit(model_id: str, path: list[str]) -> None:
        if state.get(model_id) == 2:
            return
        if state.get(model_id) == 1:
            cycle = path[path.index(model_id) :] + [model_id]
            raise ConfigKeyError((*where, "models"), f"teachers form a cycle: {' → '.join(cycle)}")
        state[model_id] = 1
        for teacher in teachers_of(models[model_id]):
            visit(teacher, [*path, model_id])
        state[model_id] = 2

    for model_id in models:
        visit(model_id, [])


def final_epoch_sources(specs: dict[str, dict]) -> dict[str, str]:
    """``{model: run}``: every ``selection: last`` model whose training run is another model's — the same training
    fields (``specs``: model id → every hyper-parameter) but for :data:`SELECTION_FIELDS`, that model selected by
    ``best`` over all its epochs (no ``patience``). Training is deterministic and choosing an epoch draws no random
    numbers, so that run's final epoch is this model: its job saves it and this model is read off it instead of
    being trained again (J&W Table 2's τ under the best-epoch and the last-epoch rule from one run each)."""

    def run_of(spec: dict) -> str:
        return json.dumps({k: v for k, v in spec.items() if k not in SELECTION_FIELDS}, sort_keys=True)

    runs: dict[str, str] = {}
    for model, spec in specs.items():
        if spec.get("selection", "best") == "best" and not spec.get("patience"):
            runs.setdefault(run_of(spec), model)
    return {
        model: runs[run_of(spec)]
        for model, spec in specs.items()
        if spec.get("selection") == "last" and run_of(spec) in runs
    }
