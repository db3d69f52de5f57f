"""Mutual information between input embeddings and hidden states (T&Š §3.4, §4.2, Table 2; after Voita et al.
2019).

Two word sets from the *train* split: MF, the ``n_words`` most frequent tokens, and RS, ``n_words`` tokens
sampled without replacement from the unigram distribution raised to 3/4 (§3.4, fn. 6); ``<pad>``, ``<unk>``,
``<s>``, ``</s>`` are never words. For each set, every occurrence of its words in the train split gives a point
(e_t = ``out.embedded``, h_t = ``out.hidden``); at most ``max_points`` of them are kept, a seeded subsample
chosen before the encoder runs, so the gathering streams batch by batch into preallocated float32 arrays and
never holds more than the kept points (1M points of 300 + 300 dims: 2.4 GB; the two sets one after the other).
Each space is discretised separately with ``MiniBatchKMeans(k, batch_size=kmeans_batch)`` — so a model whose
hidden size differs from the embedding size (concat) is measurable; T&Š exclude it and so do our tables — and
MI = ``sklearn.metrics.mutual_info_score(cluster(e), cluster(h))`` in nats, ≤ ln k.

Corner cases are recorded in the JSON, never fatal: fewer distinct train words than ``n_words`` (both sets are
then every word there is), fewer points than k (k is reduced to the number of points), no points at all (MI
null). The e space has at most ``n_words`` distinct points (one embedding per word), so k-means may find fewer
than k distinct clusters there; the number found is recorded.

MiniBatchKMeans batch size: T&Š use 100 (also scikit-learn's default in 2020). Measured (roughly: a shared 2-core
machine, one thread) on 100k synthetic points (1,000 Zipf-distributed 300-d word vectors; h = tanh of a mix of
word and context), k = 1000, n_init 3, two seeds: per space pair, batch 100 took about 6–8 s (e) + 10 s (h),
batch 1024 about 6 + 8–10 s, batch 4096 about 19 + 24 s — no speed-up worth having — while the MI moved from
4.27–4.29 nats (batch 100) to 3.91–3.93 (1024 and 4096), far beyond 0.05: larger batches leave more of the
k clusters of the e space empty (about 510–540 vs 300 distinct clusters found among 1,000 distinct points).
So the default stays 100, the paper's value.
"""

from __future__ import annotations

import logging
import math
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from scipy.stats import entropy
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics import mutual_info_score
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from attnaudit.auditing import AuditInputs, batch_plan, iterate_chunk, load_audit_inputs
from attnaudit.data import SPECIALS
from attnaudit.io import write_json

log = logging.getLogger(__name__)

SAMPLES = ("MF", "RS")


def token_counts(inputs: AuditInputs) -> np.ndarray:
    """Occurrences of every vocabulary id in the audited split (the train split here)."""
    sequences = inputs.encoded.sequences
    flat = np.concatenate(sequences) if sequences else np.zeros(0, dtype=np.int64)
    return np.bincount(flat, minlength=len(inputs.vocab))


def select_words(
    counts: np.ndarray, excluded: list[int], n_words: int, power: float, seed: int
) -> tuple[dict[str, np.ndarray], int]:
    """``({"MF": ids, "RS": ids}, n_available)``: the ``n_words`` most frequent ids (ties by id) and a sample
    without replacement from counts^power, among ids that occur and are not ``excluded``."""
    counts = counts.astype(np.float64).copy()
    counts[[i for i in excluded if 0 <= i < len(counts)]] = 0
    available = np.flatnonzero(counts > 0)
    n = min(n_words, len(available))
    order = available[np.argsort(-counts[available], kind="stable")]
    weights = counts[available] ** power
    rs = (
        np.random.default_rng(seed).choice(available, size=n, replace=False, p=weights / weights.sum())
        if n
        else available[:0]
    )
    return {"MF": np.sort(order[:n]), "RS": np.sort(rs)}, len(available)


def keep_mask(total: int, max_points: int, seed: int) -> np.ndarray:
    """Which of ``total`` occurrences (in the fixed gathering order) are kept: all, or a seeded subsample."""
    keep = np.zeros(total, dtype=bool)
    if total <= max_points:
        keep[:] = True
    else:
        keep[np.random.default_rng(seed).choice(total, size=max_points, replace=False)] = True
    return keep


@torch.no_grad()
def gather(
    inputs: AuditInputs, words: np.ndarray, keep: np.ndarray, batch_size: int, progress: bool = True, desc: str = ""
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(E [n, d], H [n, m], word ids [n])`` float32 for the kept occurrences of ``words``, in the order of the
    batch plan then row-major positions; ``keep`` has one entry per occurrence in that order."""
    model = inputs.model
    n_kept = int(keep.sum())
    e = h = None  # allocated once the first output gives the sizes of the two spaces
    ids = np.empty(n_kept, dtype=np.int64)
    word_tensor = torch.as_tensor(words, dtype=torch.int64, device=inputs.device)
    seen = cursor = 0
    n_batches = len(batch_plan(inputs.encoded, batch_size))
    for _, batch in tqdm(
        iterate_chunk(inputs, batch_size), total=n_batches, desc=desc, disable=not progress, mininterval=5
    ):
        selected = torch.isin(batch.tokens, word_tensor) & batch.mask
        count = int(selected.sum())
        kept = keep[seen : seen + count]
        seen += count
        if not kept.any():
            continue
        out = model(batch)
        if e is None:
            e = np.empty((n_kept, out.embedded.shape[-1]), dtype=np.float32)
            h = np.empty((n_kept, out.hidden.shape[-1]), dtype=np.float32)
        chosen = torch.as_tensor(kept, device=inputs.device)
        size = int(kept.sum())
        e[cursor : cursor + size] = out.embedded[selected][chosen].float().cpu().numpy()
        h[cursor : cursor + size] = out.hidden[selected][chosen].float().cpu().numpy()
        ids[cursor : cursor + size] = batch.tokens[selected][chosen].cpu().numpy()
        cursor += size
    if seen != len(keep) or cursor != n_kept:
        raise RuntimeError(f"gathered {cursor} of {n_kept} points from {seen} of {len(keep)} occurrences")
    if e is None:  # no points: empty arrays of the model's sizes
        e = np.empty((0, model.cfg.embedding_dim), dtype=np.float32)
        h = np.empty((0, model.hidden_dim), dtype=np.float32)
    return e, h, ids


def discretise(points: np.ndarray, k: int, kmeans_batch: int, seed: int, n_init: int) -> tuple[np.ndarray, list]:
    """Cluster labels from MiniBatchKMeans, and the warnings it raised (e.g. fewer distinct clusters than k)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        labels = MiniBatchKMeans(n_clusters=k, batch_size=kmeans_batch, random_state=seed, n_init=n_init).fit_predict(
            points
        )
    return labels, sorted({str(w.message) for w in caught})


def mutual_information(e: np.ndarray, h: np.ndarray, k: int, kmeans_batch: int, seed: int, n_init: int) -> dict:
    """MI (nats) between the cluster ids of e and of h, with k reduced to the number of points if needed."""
    n = len(e)
    if n == 0:
        return {"n_points": 0, "k_used": 0, "k_reduced": k > 0, "ln_k": None, "mi": None, "note": "no points"}
    k_used = min(k, n)
    started = time.time()
    labels_e, warnings_e = discretise(e, k_used, kmeans_batch, seed, n_init)
    labels_h, warnings_h = discretise(h, k_used, kmeans_batch, seed, n_init)
    mi = float(mutual_info_score(labels_e, labels_h))
    return {
        "n_points": n,
        "k_used": k_used,
        "k_reduced": k_used < k,
        "ln_k": math.log(k_used),
        "mi": mi,
        "entropy_embedded": float(entropy(np.bincount(labels_e))),
        "entropy_hidden": float(entropy(np.bincount(labels_h))),
        "clusters_found_embedded": int(np.unique(labels_e).size),
        "clusters_found_hidden": int(np.unique(labels_h).size),
        "kmeans_seconds": round(time.time() - started, 2),
        "warnings": sorted(set(warnings_e) | set(warnings_h)),
    }


def run_mutual_information(
    dataset_dir: str | Path,
    model_dir: str | Path,
    out: str | Path,
    *,
    n_words: int = 1000,
    k: int = 1000,
    kmeans_batch: int = 100,
    max_points: int = 1_000_000,
    seed: int = 0,
    threads: int = 1,
    batch_size: int = 64,
    n_init: int = 3,
    unigram_power: float = 0.75,
    progress: bool = True,
) -> dict:
    torch.set_num_threads(max(1, threads))
    started = time.time()
    inputs = load_audit_inputs(dataset_dir, model_dir, "train")
    counts = token_counts(inputs)
    excluded = [inputs.vocab[s] for s in SPECIALS if s in inputs.vocab]
    word_sets, n_available = select_words(counts, excluded, n_words, unigram_power, seed)
    itos = {i: token for token, i in inputs.vocab.items()}
    result: dict = {
        "paper": "Tutek & Šnajder (2020), §3.4, §4.2, Table 2",
        "dataset_dir": str(dataset_dir),
        "model_dir": str(model_dir),
        "split": "train",
        "n_words_requested": n_words,
        "n_words_available": n_available,
        "n_words_reduced": n_available < n_words,
        "unigram_power": unigram_power,
        "k_requested": k,
        "kmeans_batch": kmeans_batch,
        "n_init": n_init,
        "max_points": max_points,
        "seed": seed,
        "units": "nats (natural log; MI ≤ ln k_used)",
        "samples": {},
    }
    for index, name in enumerate(SAMPLES):
        words = word_sets[name]
        total = int(counts[words].sum())
        keep = keep_mask(total, max_points, seed * 1_000_003 + index)
        with threadpool_limits(max(1, threads)):
            e, h, ids = gather(inputs, words, keep, batch_size, progress, desc=f"gather {name}")
            sample = mutual_information(e, h, k, kmeans_batch, seed, n_init)
        result.update(embedding_dim=e.shape[1], hidden_dim=h.shape[1], dimensions_differ=e.shape[1] != h.shape[1])
        del e, h
        sample.update(
            words=[itos.get(int(i), str(i)) for i in words],
            n_words=len(words),
            n_words_in_points=int(np.unique(ids).size),
            n_occurrences=total,
            subsampled=total > max_points,
        )
        result["samples"][name] = sample
        log.info(
            "MI %s of %s: %s nats (k %d, %d points of %d occurrences, %d words)",
            name,
            model_dir,
            "–" if sample["mi"] is None else f"{sample['mi']:.3f}",
            sample["k_used"],
            sample["n_points"],
            total,
            len(words),
        )
    result["seconds"] = round(time.time() - started, 2)
    write_json(out, result)
    return result
