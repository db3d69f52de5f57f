"""``python -m attnaudit throughput jw``: each J&W audit's batched code vs its naive per-instance reference
(:mod:`attnaudit.jain_wallace.reference`) on one model's audited split, in the same process.

Prints one line per audit, ``<audit> batched=<inst/s> naive=<inst/s> ratio=<x>``, each audit including its
encoder pass. Permutation and adversarial audits run the encoder once per instance and then work on h fixed, so
a second line ``<audit>_given_h`` times only that part (model outputs computed beforehand, off the clock).
``--naive-limit N`` times the naive code on a seeded sample of N instances (throughput stays comparable).
Wall times go to the log.
"""

from __future__ import annotations

import json
import logging
import time

import numpy as np
import torch

from attnaudit.auditing import instance_seed, iterate_chunk, load_audit_inputs
from attnaudit.data import collate
from attnaudit.importance import get_method
from attnaudit.jain_wallace import reference
from attnaudit.jain_wallace.adversarial import find_adversaries
from attnaudit.jain_wallace.common import batch_seeds
from attnaudit.jain_wallace.options import resolve
from attnaudit.jain_wallace.permutation import deltas_given_h
from attnaudit.masks import content_mask, marker_ids
from attnaudit.throughput import resolve_dirs

log = logging.getLogger(__name__)
AUDITS = ("gradient", "loo", "permutation", "adversarial")


def _adversary_options(opts: dict) -> dict:
    adv = opts["adversarial"]
    return dict(
        k=adv["k"],
        epsilon=adv["epsilon"],
        lam=adv["lambda"],
        steps=adv["steps"],
        lr=adv["lr"],
        amsgrad=adv["amsgrad"],
        init_scale=adv["init_scale"],
    )


def _exclude(audit: str, opts: dict) -> bool:
    return opts[audit]["exclude_markers"]


def _batched(audit, model, batches, outputs, markers, opts, seed):
    """``outputs``: model outputs per batch (given h), or None to run the encoder pass as part of the audit."""
    for index, (_, batch) in enumerate(batches):
        if audit in ("gradient", "loo"):
            get_method(audit).attribute(model, batch)
            continue
        if outputs is None:
            with torch.no_grad():
                out = model(batch)
        else:
            out = outputs[index]
        support = content_mask(batch, markers, _exclude(audit, opts))
        seeds = batch_seeds(seed, batch.ids)
        if audit == "permutation":
            deltas_given_h(model, out, seeds, opts["permutation"]["n_permutations"], support)
        else:
            find_adversaries(
                model, out.hidden, out.query, out.attention, out.probs, support, seeds, **_adversary_options(opts)
            )


def _naive(audit, model, sequences, ids, outputs, markers, opts, seed):
    for index, (tokens, instance) in enumerate(zip(sequences, ids)):
        if audit == "gradient":
            reference.gradient(model, tokens)
        elif audit == "loo":
            reference.loo(model, tokens)
        else:
            support = content_mask(collate([tokens]), markers, _exclude(audit, opts))[0].numpy()
            out = None if outputs is None else outputs[index]
            if audit == "permutation":
                reference.permutation_deltas(
                    model,
                    tokens,
                    support,
                    instance_seed(seed, instance),
                    opts["permutation"]["n_permutations"],
                    out=out,
                )
            else:
                reference.adversaries(
                    model, tokens, support, instance_seed(seed, instance), out=out, **_adversary_options(opts)
                )


def _timed(fn, *args) -> float:
    started = time.perf_counter()
    fn(*args)
    return time.perf_counter() - started


def run(args) -> dict:
    torch.set_num_threads(max(1, args.threads))
    dataset_dir, model_dir = resolve_dirs(args)
    raw = json.loads(args.options or "{}")
    opts = resolve(raw.get("jain_wallace", raw))
    inputs = load_audit_inputs(dataset_dir, model_dir, args.split)
    model, enc, seed = inputs.model, inputs.encoded, 0
    markers = marker_ids(inputs.vocab)
    batches = list(iterate_chunk(inputs, args.batch_size))
    n = len(enc)
    sample = np.arange(n)
    if args.naive_limit and args.naive_limit < n:
        sample = np.sort(np.random.default_rng(0).choice(n, size=args.naive_limit, replace=False))
    sequences, ids = [enc.sequences[i] for i in sample], [enc.ids[i] for i in sample]
    log.info(
        "bench jw: %s on %s (%s split, %d instances; naive on %d), %d threads",
        model_dir,
        dataset_dir,
        args.split,
        n,
        len(sample),
        torch.get_num_threads(),
    )
    with torch.no_grad():
        batch_outputs = [model(batch) for _, batch in batches]
        single_outputs = [model(collate([tokens])) for tokens in sequences]
    warm = {**opts, "adversarial": {**opts["adversarial"], "steps": 3}}
    results = {}
    for audit in args.audits or AUDITS:
        _batched(audit, model, batches[:1], None, markers, warm, seed)  # first-call allocations off the clock
        _naive(audit, model, sequences[:1], ids[:1], None, markers, warm, seed)
        runs = [(audit, None, None)]
        if audit in ("permutation", "adversarial"):
            runs.append((f"{audit}_given_h", batch_outputs, single_outputs))
        for label, b_out, s_out in runs:
            batched_s = _timed(_batched, audit, model, batches, b_out, markers, opts, seed)
            naive_s = _timed(_naive, audit, model, sequences, ids, s_out, markers, opts, seed)
            batched, naive = n / batched_s, len(sample) / naive_s
            results[label] = {
                "batched": batched,
                "naive": naive,
                "ratio": batched / naive,
                "batched_seconds": batched_s,
                "naive_seconds": naive_s,
            }
            log.info(
                "%s: batched %.2f s for %d instances, naive %.2f s for %d", label, batched_s, n, naive_s, len(sample)
            )
            print(f"{label} batched={batched:.1f} naive={naive:.1f} ratio={batched / naive:.1f}", flush=True)
    return results
