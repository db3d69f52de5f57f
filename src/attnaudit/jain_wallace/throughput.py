"""``python -m attnaudit throughput jw`` (alias ``bench``): what each J&W audit and a training epoch cost per
instance, at 1 and 2 threads, against Jain & Wallace's own code.

For every thread count, each audit runs over the whole audited split exactly as its pipeline job does (the batch
plan of :mod:`attnaudit.auditing`, the encoder pass included) and a training epoch over the train split (the
model's own hyper-parameters from its ``metrics.json``, a fresh model from the embedding matrix). Printed per
line: CPU seconds (``time.process_time``: robust to a busy machine) and wall seconds, per-instance CPU
milliseconds and the ratio *J&W code ÷ attnaudit* per instance against :data:`JW_CODE` — figures measured once
with J&W's code and kept here as constants, not re-measured. ``jw_code_ratio_job`` adds the fixed cost each
pipeline job pays once (interpreter and imports, measured in a child process, plus loading the model and
instances), because the J&W figures are whole processes; ``jw_code_ratio`` compares the audit's own work.

The J&W-code constants were measured on one machine, and the same code runs at different speeds on machines of
the same class (J&W's leave-one-out took 19.6 CPU s on one, 8.9 on another). So the bench also prints ratios
against J&W's code measured again side by side with this code (``jw_rerun_ratio``, ``jw_rerun_ratio_job``:
:data:`JW_CODE_RERUNS`, the machine nearest to this one in matrix-product speed), the audit's own work against
their experiment call and a whole job against their whole process. It also prints this machine's speed at the two
kernels an exact BiLSTM leave-one-out is made of (:func:`machine_speed`) and leave-one-out's arithmetic floor at
that speed (:func:`loo_floor`): how far the measured time is from what no implementation of the exact computation
can beat here.

``--naive-limit N`` also times the naive per-instance references of :mod:`attnaudit.jain_wallace.reference` on
N instances: a regression check of the batching, not the comparison a user makes.
"""

from __future__ import annotations

import json
import logging
import resource
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

from attnaudit import AttnauditError
from attnaudit.auditing import instance_seed, iterate_chunk, load_audit_inputs
from attnaudit.data import collate
from attnaudit.importance import get_method
from attnaudit.io import load_npy
from attnaudit.jain_wallace import reference
from attnaudit.jain_wallace.common import Context
from attnaudit.jain_wallace.options import resolve
from attnaudit.jain_wallace.run import AUDITS as PROBES
from attnaudit.jain_wallace.run import audit_batch_size, audit_token_budget
from attnaudit.masks import content_mask, marker_ids
from attnaudit.models import activations, deletions
from attnaudit.models.attention import AdditiveAttention
from attnaudit.throughput import resolve_dirs

log = logging.getLogger(__name__)
AUDITS = ("gradient", "loo", "permutation", "adversarial")
JW_INSTANCES = {"test": 1725, "train": 6355}  # SST test and train after the length filter of J&W's code

#: Jain & Wallace's code (successar/AttentionExplanation @ 425a89a, compatibility shims only) on SST with the
#: BiLSTM + additive attention, seed 0, 1 thread, whole processes including start-up; medians of three alternating
#: runs, CPU seconds (issue #13 of this project, measured on this machine class). Permutation: 100 permutations;
#: adversarial: k = 5, 500 steps.
JW_CODE = {
    "instances": JW_INSTANCES,
    "cpu_seconds": {
        "gradient": 9.2,
        "loo": 21.2,
        "permutation": 14.3,
        "adversarial": 68.2,
        "all_four": 113.0,
        "training_epoch": 22.3,
    },
}


COLUMNS = (*AUDITS, "all_four", "training_epoch")


def jw_code_rerun(machine: str, vendor: str, gmacs: float, cpu_seconds: tuple, process_cpu_seconds: tuple) -> dict:
    """One side-by-side measurement of J&W's code; the seconds in the order of ``COLUMNS``."""
    return {
        "machine": machine,
        "vendor": vendor,
        "gmacs": gmacs,
        "instances": JW_INSTANCES,
        "cpu_seconds": dict(zip(COLUMNS, cpu_seconds, strict=True)),
        "process_cpu_seconds": dict(zip(COLUMNS, process_cpu_seconds, strict=True)),
    }


#: J&W's code measured again, side by side with attnaudit, on three machines of the class (1 thread; medians of
#: three alternating runs). Files of successar/AttentionExplanation from the commits listed in ``docs/performance.md``
#: with four compatibility edits (no algorithm, hyper-parameter or batch size changed); random 300-d embeddings in
#: place of fastText (offline). ``cpu_seconds``: their experiment call alone (``Evaluator.<x>_experiment``;
#: ``model.train`` for the epoch); ``process_cpu_seconds``: the whole process (start-up, loading, their evaluation
#: pass, the experiment; all four: the sum of four processes). ``vendor`` (the CPU's ``vendor_id``) and ``gmacs``
#: (this bench's single-thread matrix-product speed there): how :func:`nearest_rerun` picks the rerun to compare with.
JW_CODE_RERUNS = (
    jw_code_rerun(
        "a slow machine of the class (2026-11-23; sigmoid 0.90 ns per element)",
        "GenuineIntel",
        40.0,  # the bench's machine line read 36–45 GMAC/s
        (3.40, 19.61, 14.31, 111.81, 149.13, 24.77),
        (14.04, 30.15, 25.16, 122.74, 192.09, 34.79),
    ),
    jw_code_rerun(
        "an AVX-512 Xeon (2026-11-24; sigmoid 0.34–0.37 ns per element)",
        "GenuineIntel",
        88.0,  # the bench's machine line read 83–94 GMAC/s
        (2.08, 8.85, 5.87, 63.60, 80.40, 16.04),
        (6.95, 13.57, 10.57, 68.30, 99.39, 20.41),
    ),
    jw_code_rerun(
        "an AMD EPYC (2026-11-26; sigmoid 0.43 ns, MKL's tanh 2.5 ns per element)",
        "AuthenticAMD",
        49.4,  # the bench's machine line read 49.2–49.6 GMAC/s
        (2.11, 12.70, 7.81, 51.42, 74.04, 14.50),
        (7.62, 18.16, 12.98, 56.72, 95.49, 18.91),
    ),
)


def nearest_rerun(gmacs: float, vendor: str | None) -> dict:
    """The J&W-code rerun to compare with on this machine: among the reruns on a CPU of the same ``vendor`` (if
    any — PyTorch's MKL maths takes a different path off Intel CPUs, :mod:`attnaudit.models.activations`), the one
    whose matrix-product speed is nearest (by ratio) to ``gmacs``."""
    same_vendor = [rerun for rerun in JW_CODE_RERUNS if rerun["vendor"] == vendor]
    return min(same_vendor or JW_CODE_RERUNS, key=lambda rerun: abs(np.log(rerun["gmacs"] / gmacs)))


def _cpu_wall(fn, *args) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    fn(*args)
    return time.process_time() - cpu, time.perf_counter() - wall


def startup_cpu_seconds() -> float:
    """CPU seconds of a fresh interpreter importing what an audit job imports (children's rusage)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    code = "import attnaudit.auditing, attnaudit.importance, attnaudit.jain_wallace.run"
    subprocess.run([sys.executable, "-c", code], check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def machine_speed(hidden: int, width: int, rows: int = 1024, seconds: float = 0.5) -> dict:
    """Single-thread speed of this machine at a float32 matrix product ``[rows, hidden] × [hidden, width]``
    (``gmacs``: 10⁹ multiply-adds per second, best of repeated runs over about ``seconds``) and at the sigmoid and
    tanh (``sigmoid_ns``, ``tanh_ns``: nanoseconds per element of a ``[rows, width]`` tensor, best of the same; tanh
    by the route the deletions take on this CPU, ``tanh_route``, :mod:`attnaudit.models.activations`)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    left, right = torch.randn(rows, hidden), torch.randn(hidden, width)
    product, activated = torch.empty(rows, width), torch.empty(rows, width)

    def best(fn) -> float:
        fn()
        times, started = [], time.perf_counter()
        while time.perf_counter() - started < seconds or len(times) < 5:
            tick = time.perf_counter()
            fn()
            times.append(time.perf_counter() - tick)
        return min(times)

    try:
        mm = best(lambda: torch.mm(left, right, out=product))
        sigmoid = best(lambda: torch.sigmoid(product, out=activated))
        tanh = best(lambda: activations.tanh(product))
    finally:
        torch.set_num_threads(threads)
    per_element = 1e9 / (rows * width)  # nanoseconds per element
    return {
        "gmacs": rows * hidden * width / mm / 1e9,
        "sigmoid_ns": sigmoid * per_element,
        "tanh_ns": tanh * per_element,
        "tanh_route": activations.tanh_route(),
    }


def loo_floor(model, batches) -> dict | None:
    """The arithmetic an exact deletion leave-one-out of a one-layer BiLSTM cannot avoid
    (:mod:`attnaudit.models.deletions`): each deletion of an instance of length L recomputes L − 1 states (the
    forward ones after the gap, the backward ones before it), each a hidden-to-hidden product (H × 4H) and the
    readout of the new half (H × (k + C): attention pre-activation and per-token logits), with sigmoids over 3H
    gates and tanh over the cell input, the H cell units and, for additive attention, the k attention units.
    ``rows`` counts (deletion × step) states over real tokens, Σ L(L − 1) (the deletions compute no padded state);
    ``seconds`` is their cost at :func:`machine_speed`. None for other models."""
    if not batches or not deletions.supports(model, batches[0]):
        return None
    hidden = model.encoder.rnn.hidden_size
    weight, _, _ = deletions.attention_readout(model.attention, None)
    linear, _, _ = model.linear_readout(None)
    readout = weight.shape[0] + linear.shape[0]
    tanh_units = 2 * hidden + (weight.shape[0] if isinstance(model.attention, AdditiveAttention) else 0)
    lengths = [batch.lengths.to(torch.int64) for batch in batches]
    rows = sum(int((n * (n - 1)).sum()) for n in lengths)
    speed = machine_speed(hidden, 4 * hidden + readout)
    macs = rows * hidden * (4 * hidden + readout)
    activations = rows * (3 * hidden * speed["sigmoid_ns"] + tanh_units * speed["tanh_ns"]) * 1e-9
    seconds = macs / (speed["gmacs"] * 1e9) + activations
    return {"rows": rows, "macs": macs, "seconds": seconds, **speed}


def audit_runner(audit: str, model, batches, ctx: Context):
    """The per-batch work of one audit's pipeline job, over all batches."""
    if audit in ("gradient", "loo"):
        method = get_method(audit)
        return lambda: [method.attribute(model, batch) for _, batch in batches]
    per_batch = PROBES[audit]
    return lambda: [per_batch(model, batch, ctx) for _, batch in batches]


def training_epoch_runner(dataset_dir: Path, model_dir: Path, embeddings: Path):
    """One training epoch of the model's variant from scratch (its ``metrics.json`` spec), as ``train`` runs it."""
    from attnaudit.data import encode_split, load_examples
    from attnaudit.io import read_json
    from attnaudit.masks import marker_ids as markers_of
    from attnaudit.objectives import TrainingContext, terms_for
    from attnaudit.specials import SPECIALS
    from attnaudit.train.training import adam, build_model, epoch_losses, full_spec

    spec = full_spec(read_json(model_dir / "metrics.json")["model"])
    examples, vocab = load_examples(dataset_dir)
    train = encode_split(examples, vocab, "train")
    classes = int(examples["label"].max()) + 1
    model = build_model(spec, vocab, classes, torch.from_numpy(load_npy(embeddings)))
    context = TrainingContext(classes, len(vocab), markers_of(vocab), model.cfg.pad_index, len(SPECIALS), None, 0)
    terms, optimizer = terms_for(spec, context), adam(model, spec)
    device = torch.device("cpu")
    run = lambda: epoch_losses(model, train, terms, spec["batch_size"], device, optimizer=optimizer, seed=0)
    return run, len(train)


def naive_runner(audit, model, sequences, ids, markers, opts, seed):
    """The naive per-instance reference of one audit (regression check of the batching)."""

    def run():
        for tokens, instance in zip(sequences, ids):
            if audit in ("gradient", "loo"):
                getattr(reference, audit)(model, tokens)
                continue
            support = content_mask(collate([tokens]), markers, opts[audit]["exclude_markers"])[0].numpy()
            if audit == "permutation":
                n = opts["permutation"]["n_permutations"]
                reference.permutation_deltas(model, tokens, support, instance_seed(seed, instance), n)
            else:
                adv = opts["adversarial"]
                options = {k: adv[k] for k in ("k", "epsilon", "steps", "lr", "amsgrad", "init_scale")}
                reference.adversaries(
                    model, tokens, support, instance_seed(seed, instance), lam=adv["lambda"], **options
                )

    return run


def ratio_to_jw(
    name: str, cpu: float, n: int, split: str = "test", reference: dict = JW_CODE, column: str = "cpu_seconds"
) -> float:
    """J&W code's CPU seconds per instance ÷ ours (> 1: faster than J&W's code), against ``reference[column]``."""
    theirs = reference[column][name] / reference["instances"][split]
    return theirs / max(cpu / n, 1e-12)


def check_arguments(args, embeddings: Path) -> None:
    """What the bench cannot run, named before any timing (an unknown audit was a KeyError, 0 threads a torch
    error, a missing embeddings file silently dropped the training epoch)."""
    unknown = [audit for audit in args.audits or () if audit not in AUDITS]
    if unknown:
        raise AttnauditError(f"throughput --audits: {unknown[0]!r} is not one of {', '.join(AUDITS)}")
    if any(threads < 1 for threads in args.threads):
        raise AttnauditError(f"throughput --threads: {args.threads} must be positive thread counts")
    if args.epoch and not embeddings.is_file():
        raise AttnauditError(f"throughput --epoch: {embeddings} is not a file; give --embeddings")


def run(args) -> dict:
    dataset_dir, model_dir = resolve_dirs(args)
    embeddings = Path(args.embeddings) if args.embeddings else dataset_dir.parent.parent / "embeddings"
    embeddings = embeddings / dataset_dir.name / "matrix.npy" if embeddings.is_dir() else embeddings
    check_arguments(args, embeddings)
    raw = json.loads(args.options or "{}")
    opts = resolve(raw.get("jain_wallace", raw))
    inputs = load_audit_inputs(dataset_dir, model_dir, args.split)
    model, n, seed = inputs.model, len(inputs.encoded), 0
    plans = {  # each audit batched as its job batches it; audits with the same plan share one list
        audit: (audit_batch_size(audit, opts, args.batch_size), audit_token_budget(audit, opts, args.max_batch_tokens))
        for audit in args.audits or AUDITS
    }
    shared = {json.dumps(plan): plan for plan in plans.values()}
    built = {key: list(iterate_chunk(inputs, size, max_tokens=budget)) for key, (size, budget) in shared.items()}
    batches = {audit: built[json.dumps(plan)] for audit, plan in plans.items()}
    ctx = Context(opts, marker_ids(inputs.vocab), seed)
    load_cpu, _ = _cpu_wall(load_audit_inputs, dataset_dir, model_dir, args.split)
    fixed = startup_cpu_seconds() + load_cpu
    print(f"fixed cost per job: {fixed:.1f} cpu-s (start-up and imports, loading the model and {n} instances)")
    results: dict = {"instances": n, "fixed_cpu_seconds": fixed, "threads": {}}
    floor = loo_floor(model, [batch for _, batch in batches["loo"]]) if "loo" in batches else None
    if floor:
        results["loo_floor"] = floor
        print(
            f"machine: matrix product {floor['gmacs']:.1f} GMAC/s, sigmoid {floor['sigmoid_ns']:.2f} and tanh "
            f"({floor['tanh_route']}) {floor['tanh_ns']:.2f} ns/element (1 thread); "
            f"exact loo floor {floor['seconds']:.2f} cpu-s "
            f"({floor['rows']:,} deletion×step rows, {floor['macs'] / 1e9:.1f} GMAC)",
            flush=True,
        )
    rerun = nearest_rerun((floor or machine_speed(128, 512))["gmacs"], activations.cpu_vendor())
    results["jw_rerun_machine"] = rerun["machine"]
    print(f"jw_rerun_ratio: against J&W's code run on {rerun['machine']}", flush=True)
    if (dataset_dir.name, model.cfg.encoder, model.cfg.attention) != ("sst", "lstm", "additive"):
        print(
            "note: the J&W ratios compare with their SST BiLSTM + additive attention; this model is "
            f"{model.cfg.encoder} + {model.cfg.attention} on {dataset_dir.name}, so they compare unlike models",
            flush=True,
        )
    for threads in args.threads:
        torch.set_num_threads(threads)
        rows = {}
        for audit in args.audits or AUDITS:
            audit_runner(audit, model, batches[audit][:1], ctx)()  # first-call allocations off the clock
            cpu, wall = _cpu_wall(audit_runner(audit, model, batches[audit], ctx))
            rows[audit] = {"cpu": cpu, "wall": wall, "n": n, "name": audit, "fixed": fixed}
        if not args.audits:
            cpu = sum(r["cpu"] for r in rows.values())
            wall = sum(r["wall"] for r in rows.values())
            rows["all_four"] = {"cpu": cpu, "wall": wall, "n": n, "name": "all_four", "fixed": fixed}
        if args.epoch:
            epoch, n_train = training_epoch_runner(dataset_dir, model_dir, embeddings)
            cpu, wall = _cpu_wall(epoch)
            rows["training_epoch"] = {"cpu": cpu, "wall": wall, "n": n_train, "split": "train", "fixed": 0.0}
        for name, r in rows.items():
            split = r.get("split", "test")
            r["jw_ratio"] = ratio_to_jw(name, r["cpu"], r["n"], split)
            r["jw_ratio_job"] = ratio_to_jw(name, r["cpu"] + r["fixed"], r["n"], split)
            r["jw_rerun_ratio"] = ratio_to_jw(name, r["cpu"], r["n"], split, rerun)
            job = r["cpu"] + r["fixed"]
            r["jw_rerun_ratio_job"] = ratio_to_jw(name, job, r["n"], split, rerun, "process_cpu_seconds")
            print(
                f"{name} threads={threads} cpu={r['cpu']:.2f}s wall={r['wall']:.2f}s "
                f"per_instance={1000 * r['cpu'] / r['n']:.3f}ms jw_code_ratio={r['jw_ratio']:.1f} "
                f"jw_code_ratio_job={r['jw_ratio_job']:.1f} jw_rerun_ratio={r['jw_rerun_ratio']:.1f} "
                f"jw_rerun_ratio_job={r['jw_rerun_ratio_job']:.1f}",
                flush=True,
            )
        results["threads"][threads] = rows
    if args.naive_limit:
        sample = np.sort(np.random.default_rng(0).choice(n, size=min(args.naive_limit, n), replace=False))
        sequences, ids = [inputs.encoded.sequences[i] for i in sample], [inputs.encoded.ids[i] for i in sample]
        torch.set_num_threads(args.threads[0])
        for audit in args.audits or AUDITS:
            batched = results["threads"][args.threads[0]][audit]["cpu"] / n
            cpu, _ = _cpu_wall(naive_runner(audit, model, sequences, ids, ctx.markers, opts, seed))
            naive = cpu / len(sample)
            results.setdefault("naive", {})[audit] = naive
            print(f"{audit} naive_per_instance={1000 * naive:.3f}ms batched_speedup={naive / batched:.1f}", flush=True)
    return results
