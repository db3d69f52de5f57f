"""T&Š stage (fragility §4.1, MI §3.4, per-token probability §5 Eq. 9, tables, figures, summary): the batched code
equals naive per-instance loops, MI equals scikit-learn on independently computed cluster labels, corner cases
are recorded, tables/figures/summary are written from crafted run records, and the CLI runs end to end."""

import json
import math
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from sklearn.cluster import MiniBatchKMeans
from sklearn.metrics import f1_score, mutual_info_score
from system_packages import apt_install, unavailable

from attnaudit.auditing import instance_seed, iterate_chunk, load_audit_inputs
from attnaudit.cli import main
from attnaudit.data import SPECIALS, collate
from attnaudit.jain_wallace import reference
from attnaudit.masks import marker_ids
from attnaudit.models import uniform_over
from attnaudit.plotting import plain_text
from attnaudit.tutek_snajder import paper
from attnaudit.tutek_snajder.figures import choose_instances, write_figures
from attnaudit.tutek_snajder.fragility import fragility_logits, run_fragility
from attnaudit.tutek_snajder.mutual_information import (
    gather,
    keep_mask,
    mutual_information,
    run_mutual_information,
    select_words,
    token_counts,
)
from attnaudit.tutek_snajder.options import DEFAULTS, resolve
from attnaudit.tutek_snajder.runs import parse_runs
from attnaudit.tutek_snajder.summary import aopc_ranks, write_summary
from attnaudit.tutek_snajder.tables import fragility_frame, write_tables
from attnaudit.tutek_snajder.token_probability import run_token_probability


@pytest.fixture(scope="module")
def lstm_model_dir(planted_dataset, tmp_path_factory):
    """A tiny BiLSTM (2 × 8 = 16 = embedding dim, so e_t and h_t have the same size) trained for one epoch."""
    from attnaudit import train

    out = tmp_path_factory.mktemp("ts-lstm") / "lstm-additive-base-s0"
    train.run(
        str(planted_dataset / "dataset"),
        str(planted_dataset / "embeddings" / "matrix.npy"),
        str(out),
        {"encoder": "lstm", "attention": "additive", "lstm_hidden": 8, "epochs": 1},
        threads=1,
    )
    return out


@pytest.fixture(params=["average", "lstm"])
def model_dir(request, planted_model_dir, lstm_model_dir):
    return planted_model_dir if request.param == "average" else lstm_model_dir


def _one(seq):
    return collate([np.asarray(seq, dtype=np.int64)], labels=[0], ids=["x"])


# ------------------------------------------------------------------------------------------- fragility
def test_uniform_is_exactly_uniform_over_non_marker_tokens():
    seqs = [np.array([2, 7, 8, 9, 3]), np.array([2, 5, 3]), np.array([2, 3])]
    batch = collate(seqs)
    from attnaudit.masks import content_mask

    alpha = uniform_over(content_mask(batch, (2, 3)))
    assert torch.equal(alpha[0], torch.tensor([0, 1 / 3, 1 / 3, 1 / 3, 0]))
    assert torch.equal(alpha[1], torch.tensor([0, 1, 0, 0, 0.0]))
    assert torch.equal(alpha[2], torch.tensor([0.5, 0.5, 0, 0, 0]))  # only markers: uniform over its real tokens
    torch.testing.assert_close(alpha.sum(dim=1), torch.ones(3))


def _naive_fragility(model, inputs, seed, n):
    """Per instance and per permutation, ``model(batch, attention=α)`` one at a time."""
    markers = set(marker_ids(inputs.vocab))
    logits = {}
    for seq, instance in zip(inputs.encoded.sequences, inputs.encoded.ids):
        one = _one(seq)
        with torch.no_grad():
            out = model(one)
            words = np.array([t not in markers for t in seq])
            words = words if words.any() else np.ones(len(seq), bool)
            uniform = torch.from_numpy(words / words.sum()).float()[None]
            rows = [model(one, attention=uniform).logits[0]]
            alpha = out.attention[0].numpy()
            positions = np.flatnonzero(words)
            keys = reference.permutation_keys(instance_seed(seed, instance), n, len(seq))
            for p in range(n):
                permuted = alpha.copy()
                permuted[positions] = alpha[positions[np.argsort(keys[p, positions], kind="stable")]]
                rows.append(model(one, attention=torch.from_numpy(permuted)[None]).logits[0])
        logits[instance] = (out.logits[0], torch.stack(rows))
    return logits


def test_fragility_batched_equals_naive_loop(planted_dataset, model_dir, tmp_path):
    dataset_dir, seed, n = planted_dataset / "dataset", 5, 6
    inputs = load_audit_inputs(dataset_dir, model_dir, "test")
    naive = _naive_fragility(inputs.model, inputs, seed, n)
    from attnaudit.jain_wallace.common import batch_seeds

    for _, batch in iterate_chunk(inputs, 16):
        trained, modified = fragility_logits(
            inputs.model, batch, marker_ids(inputs.vocab), batch_seeds(seed, batch.ids), n
        )
        for i, instance in enumerate(batch.ids):
            torch.testing.assert_close(trained[i], naive[instance][0], atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(modified[i], naive[instance][1], atol=1e-5, rtol=1e-5)

    result = run_fragility(
        dataset_dir, model_dir, tmp_path / "f.json", n_permutations=n, seed=seed, batch_size=16, progress=False
    )
    labels = inputs.encoded.labels
    predicted = np.stack([naive[i][1].argmax(-1).numpy() for i in inputs.encoded.ids])  # [N, 1 + P]
    trained = np.array([int(naive[i][0].argmax()) for i in inputs.encoded.ids])
    macro = lambda y: f1_score(labels, y, average="macro")  # noqa: E731
    positive = lambda y: f1_score(labels, y, pos_label=1)  # noqa: E731
    assert result["trained"]["macro_f1"] == pytest.approx(macro(trained))
    assert result["uniform"]["macro_f1"] == pytest.approx(macro(predicted[:, 0]))
    assert result["uniform"]["positive_f1"] == pytest.approx(positive(predicted[:, 0]))
    np.testing.assert_allclose(result["permutation"]["macro_f1"], [macro(predicted[:, p]) for p in range(1, n + 1)])
    per_p = np.array([positive(predicted[:, p]) for p in range(1, n + 1)])
    d = result["delta"]
    assert d["uniform_positive_f1"] == pytest.approx(100 * (positive(predicted[:, 0]) - positive(trained)))
    assert d["permutation_positive_f1_mean"] == pytest.approx(100 * (per_p.mean() - positive(trained)))
    assert d["permutation_positive_f1_std"] == pytest.approx(100 * per_p.std(ddof=1))
    assert result["n"] == len(labels) and result["n_permutations"] == n
    assert json.loads((tmp_path / "f.json").read_text()) == json.loads(json.dumps(result))


def test_fragility_is_reproducible_and_batch_free(planted_dataset, planted_model_dir, tmp_path):
    args = (planted_dataset / "dataset", planted_model_dir)
    a = run_fragility(*args, tmp_path / "a.json", n_permutations=8, seed=1, batch_size=7, progress=False)
    b = run_fragility(*args, tmp_path / "b.json", n_permutations=8, seed=1, batch_size=64, progress=False)
    assert a["permutation"] == b["permutation"] and a["uniform"] == b["uniform"]


# ------------------------------------------------------------------------------------------- token probability
def test_token_probabilities_follow_eq9(planted_dataset, model_dir, tmp_path):
    dataset_dir = planted_dataset / "dataset"
    frame = run_token_probability(dataset_dir, model_dir, tmp_path / "t.parquet", batch_size=16, progress=False)
    assert frame.equals(pd.read_parquet(tmp_path / "t.parquet"))
    inputs = load_audit_inputs(dataset_dir, model_dir, "test")
    model, markers = inputs.model, set(marker_ids(inputs.vocab))
    assert frame["id"].tolist() == inputs.encoded.ids
    for row, seq in zip(frame.itertuples(), inputs.encoded.sequences):
        with torch.no_grad():
            out = model(_one(seq))
            predicted = int(out.logits[0].argmax())
            by_hand = [float(torch.softmax(model.decoder(out.hidden[0, t]), -1)[predicted]) for t in range(len(seq))]
            # Eq. 9: the logits are the attention-weighted sum of per-token logits, for any distribution
            per_token = model.token_logits(out.hidden, out.query)
            torch.testing.assert_close(torch.einsum("bt,btc->bc", out.attention, per_token), out.logits)
            alpha = torch.softmax(torch.randn(1, len(seq)), dim=-1)
            torch.testing.assert_close(
                torch.einsum("bt,btc->bc", alpha, per_token), model.decode(out.hidden, alpha, out.query)
            )
        assert row.predicted == predicted and row.correct == (predicted == row.label)
        assert row.n_tokens == len(seq)
        np.testing.assert_allclose(row.token_probs, by_hand, atol=1e-6)
        words = [p for p, t in zip(by_hand, seq) if t not in markers]
        assert row.mean_token_prob == pytest.approx(np.mean(words), abs=1e-6)
        assert row.prediction_prob == pytest.approx(float(out.probs[0, predicted]), abs=1e-6)


# ------------------------------------------------------------------------------------------- mutual information
def _train_token_counts(dataset_dir):
    examples = pd.read_parquet(dataset_dir / "examples.parquet")
    vocab = json.loads((dataset_dir / "vocab.json").read_text())
    counts = Counter(t for toks in examples.loc[examples["split"] == "train", "tokens"] for t in toks if t in vocab)
    for special in SPECIALS:
        counts.pop(special, None)
    return counts


def test_word_sets(planted_dataset, lstm_model_dir):
    dataset_dir = planted_dataset / "dataset"
    counts = _train_token_counts(dataset_dir)
    inputs = load_audit_inputs(dataset_dir, lstm_model_dir, "train")
    excluded = [inputs.vocab[s] for s in SPECIALS]
    words, available = select_words(token_counts(inputs), excluded, 20, 0.75, seed=0)
    itos = {i: t for t, i in inputs.vocab.items()}
    assert available == len(counts)
    mf_counts = sorted((counts[itos[i]] for i in words["MF"]), reverse=True)
    assert mf_counts == sorted(counts.values(), reverse=True)[:20]  # tie-robust: the top-20 counts
    assert len(set(words["RS"].tolist())) == 20 and all(itos[i] in counts for i in words["RS"])
    again, _ = select_words(token_counts(inputs), excluded, 20, 0.75, seed=0)
    other, _ = select_words(token_counts(inputs), excluded, 20, 0.75, seed=1)
    assert np.array_equal(again["RS"], words["RS"]) and not np.array_equal(other["RS"], words["RS"])
    small, available = select_words(token_counts(inputs), excluded, 10**6, 0.75, seed=0)
    assert len(small["MF"]) == len(small["RS"]) == available == len(counts)


def test_gather_streams_every_occurrence_or_a_subsample(planted_dataset, lstm_model_dir):
    inputs = load_audit_inputs(planted_dataset / "dataset", lstm_model_dir, "train")
    counts = token_counts(inputs)
    words = np.argsort(-counts)[4:9]
    words = words[~np.isin(words, [inputs.vocab[s] for s in SPECIALS])]
    total = int(counts[words].sum())
    e, h, ids = gather(inputs, words, keep_mask(total, 10**9, 0), 32, progress=False)
    assert len(e) == total and e.dtype == np.float32 and h.shape == (total, inputs.model.hidden_dim)
    # naive: every occurrence, one instance at a time
    naive_e, naive_h = [], []
    for seq in inputs.encoded.sequences:
        with torch.no_grad():
            out = inputs.model(_one(seq))
        chosen = np.isin(seq, words)
        naive_e.append(out.embedded[0].numpy()[chosen])
        naive_h.append(out.hidden[0].numpy()[chosen])
    rows = lambda a: a[np.lexsort(a.T[::-1])]  # noqa: E731
    np.testing.assert_allclose(rows(np.concatenate(naive_h)), rows(h), atol=1e-5)
    np.testing.assert_allclose(rows(np.concatenate(naive_e)), rows(e), atol=1e-6)
    assert Counter(ids.tolist()) == {int(w): int(counts[w]) for w in words}
    keep = keep_mask(total, 50, 3)
    sub_e, sub_h, _ = gather(inputs, words, keep, 32, progress=False)
    np.testing.assert_array_equal(sub_h, h[keep])
    np.testing.assert_array_equal(sub_e, e[keep])


def test_mi_equals_sklearn_on_independent_labels():
    rng = np.random.default_rng(0)
    e = rng.normal(size=(300, 6)).astype(np.float32)
    h = (e @ rng.normal(size=(6, 9)) + 0.3 * rng.normal(size=(300, 9))).astype(np.float32)
    result = mutual_information(e, h, k=7, kmeans_batch=64, seed=2, n_init=2)
    labels = [MiniBatchKMeans(7, batch_size=64, random_state=2, n_init=2).fit_predict(x) for x in (e, h)]
    assert result["mi"] == pytest.approx(mutual_info_score(*labels))
    joint = pd.crosstab(*labels).to_numpy() / len(e)  # MI in nats from the contingency table
    outer = joint.sum(1, keepdims=True) @ joint.sum(0, keepdims=True)
    assert result["mi"] == pytest.approx(np.sum(joint[joint > 0] * np.log(joint[joint > 0] / outer[joint > 0])))
    assert 0 < result["mi"] <= result["ln_k"] + 1e-9 and result["ln_k"] == pytest.approx(math.log(7))
    assert not result["k_reduced"]
    few = mutual_information(e[:4], h[:4], k=7, kmeans_batch=64, seed=2, n_init=1)
    assert few["k_used"] == 4 and few["k_reduced"] and few["mi"] <= math.log(4) + 1e-9
    assert mutual_information(e[:0], h[:0], k=7, kmeans_batch=64, seed=2, n_init=1)["mi"] is None


def test_mutual_information_run(planted_dataset, model_dir, tmp_path):
    dataset_dir = planted_dataset / "dataset"
    opts = dict(n_words=12, k=6, kmeans_batch=32, max_points=400, seed=0, n_init=1, batch_size=32, progress=False)
    result = run_mutual_information(dataset_dir, model_dir, tmp_path / "mi.json", **opts)
    assert json.loads((tmp_path / "mi.json").read_text())["samples"]["MF"]["mi"] == result["samples"]["MF"]["mi"]
    inputs = load_audit_inputs(dataset_dir, model_dir, "train")
    assert result["dimensions_differ"] == (inputs.model.cfg.embedding_dim != inputs.model.hidden_dim)
    counts = _train_token_counts(dataset_dir)
    for index, name in enumerate(("MF", "RS")):
        sample = result["samples"][name]
        assert len(sample["words"]) == sample["n_words"] == 12
        total = sum(counts[w] for w in sample["words"])
        assert sample["n_occurrences"] == total and sample["n_points"] == min(total, 400)
        assert sample["subsampled"] == (total > 400)
        # the MI is mutual_info_score of MiniBatchKMeans labels of exactly the gathered points
        ids = np.array([inputs.vocab[w] for w in sample["words"]])
        e, h, _ = gather(inputs, ids, keep_mask(total, 400, index), 32, progress=False)
        labels = [MiniBatchKMeans(6, batch_size=32, random_state=0, n_init=1).fit_predict(x) for x in (e, h)]
        assert sample["mi"] == pytest.approx(mutual_info_score(*labels))
        assert sample["mi"] <= math.log(sample["k_used"]) + 1e-9


def test_mutual_information_corner_cases(planted_dataset, lstm_model_dir, tmp_path):
    counts = _train_token_counts(planted_dataset / "dataset")
    result = run_mutual_information(
        planted_dataset / "dataset",
        lstm_model_dir,
        tmp_path / "mi.json",
        n_words=10**6,
        k=50,
        kmeans_batch=32,
        max_points=20,
        n_init=1,
        progress=False,
    )
    assert result["n_words_reduced"] and result["n_words_available"] == len(counts)
    for sample in result["samples"].values():
        assert sample["n_words"] == len(counts) and sample["subsampled"]
        assert sample["n_points"] == 20 and sample["k_used"] == 20 and sample["k_reduced"]
        assert sample["ln_k"] == pytest.approx(math.log(20)) and sample["mi"] <= sample["ln_k"] + 1e-9


# ------------------------------------------------------------------------------------------- tables, figures
def _fragility_json(path, tr, un, pm, seed=0):
    """A fragility result with the given positive-class F1s (fractions) and per-permutation F1s."""
    pm = list(pm)
    result = {
        "n": 100,
        "n_permutations": len(pm),
        "trained": {"macro_f1": tr, "positive_f1": tr, "accuracy": tr},
        "uniform": {"macro_f1": un, "positive_f1": un, "accuracy": un},
        "permutation": {"positive_f1": pm, "positive_f1_mean": float(np.mean(pm))},
        "delta": {
            "uniform_positive_f1": 100 * (un - tr),
            "uniform_macro_f1": 100 * (un - tr),
            "permutation_positive_f1_mean": 100 * (np.mean(pm) - tr),
            "permutation_macro_f1_mean": 100 * (np.mean(pm) - tr),
        },
    }
    path.write_text(json.dumps(result))
    return str(path)


def _mi_json(path, mf, rs, k=1000, differ=False):
    samples = {name: {"mi": v, "k_used": k, "n_words": 1000, "n_points": 5000} for name, v in (("MF", mf), ("RS", rs))}
    path.write_text(json.dumps({"k_requested": 1000, "dimensions_differ": differ, "samples": samples}))
    return str(path)


def _token_parquet(path, ids, probs, correct, predicted=None, n_tokens=4):
    n = len(ids)
    frame = pd.DataFrame(
        {
            "id": ids,
            "row": np.arange(n),
            "label": np.ones(n, dtype=int),
            "predicted": np.ones(n, dtype=int) if predicted is None else predicted,
            "correct": correct,
            "n_tokens": np.full(n, n_tokens),
            "prediction_prob": np.full(n, 0.9),
            "token_probs": [np.linspace(0.2, p, n_tokens) for p in probs],
            "mean_token_prob": probs,
        }
    )
    frame.to_parquet(path)
    return str(path)


@pytest.fixture
def crafted_runs(tmp_path, planted_dataset):
    """SST-keyed runs: tying and MLM more fragile than base (holds), base MI above the others (fails), base
    per-token probability above tying and MLM (holds); 3-layer base and tying for Table 6; concat MI."""
    examples = pd.read_parquet(planted_dataset / "dataset" / "examples.parquet")
    test = examples[examples["split"] == "test"]
    ids = test["id"].tolist()[:6]
    lengths = [len(t) for t in test["tokens"].tolist()[:6]]
    # (Tr., Un. drop, Pm. F1s)
    fragile = {"base": (0.80, 0.05, [0.78, 0.76]), "tying": (0.70, 0.2, [0.50, 0.52]), "mlm": (0.72, 0.1, [0.6, 0.62])}
    mi = {"base": (3.0, 3.1), "tying": (2.0, 2.2), "mlm": (2.5, 2.4), "concat": (6.0, 6.0)}
    token = {"base": 0.8, "tying": 0.6, "mlm": 0.7, "concat": 0.75}
    runs = []
    for regulariser in ("base", "concat", "tying", "mlm"):
        for seed in (0, 1):
            stem = f"{regulariser}-{seed}"
            tr, drop, pm = fragile.get(regulariser, (0.8, 0.01, [0.79, 0.79]))
            shift = 0.01 * seed
            probs = np.full(6, token[regulariser] + shift)
            probs[0] = 0.99  # an incorrect instance the table must ignore
            frame_path = tmp_path / f"{stem}.parquet"
            frame = _token_parquet(frame_path, ids, probs, [False] + [True] * 5)
            # give every token-probability row its real length so words can be drawn
            table = pd.read_parquet(frame)
            table["n_tokens"] = lengths
            table["token_probs"] = [np.linspace(0.3, p, n) for p, n in zip(probs, lengths)]
            table.to_parquet(frame_path)
            runs.append(
                {
                    "dataset": "sst",
                    "corpus": "sst",
                    "model": f"lstm-additive-{regulariser}-s{seed}",
                    "regulariser": regulariser,
                    "attention": "additive",
                    "layers": 1,
                    "seed": seed,
                    "fragility": _fragility_json(tmp_path / f"{stem}.json", tr, tr - drop - shift, pm),
                    "mutual_information": _mi_json(
                        tmp_path / f"{stem}-mi.json", *mi[regulariser], differ=regulariser == "concat"
                    ),
                    "token_probability": frame,
                    "dataset_dir": str(planted_dataset / "dataset"),
                }
            )
    for regulariser, (tr, un, pm) in {"base": (0.8, 0.79, [0.79]), "tying": (0.8, 0.6, [0.5])}.items():
        runs.append(
            {
                "dataset": "sst",
                "corpus": "sst",
                "model": f"lstm3-additive-{regulariser}-s0",
                "regulariser": regulariser,
                "attention": "additive",
                "layers": 3,
                "seed": 0,
                "fragility": _fragility_json(tmp_path / f"{regulariser}-3.json", tr, un, pm),
                "mutual_information": None,
                "token_probability": str(tmp_path / "missing.parquet"),
            }
        )
    return runs


def test_tables_from_crafted_runs(crafted_runs, tmp_path):
    (tmp_path / "runs.json").write_text(json.dumps(crafted_runs))
    tables = write_tables(f"@{tmp_path / 'runs.json'}", tmp_path / "tables")
    for name in ("table1_fragility", "table2_mutual_information", "table3_token_probability", "table6_layers"):
        assert (tmp_path / "tables" / f"{name}.csv").exists() and (tmp_path / "tables" / f"{name}.md").exists()

    t1 = tables["table1_fragility"].set_index("regulariser")
    base = [
        json.loads(Path(r["fragility"]).read_text())
        for r in crafted_runs
        if r["regulariser"] == "base" and r["layers"] == 1
    ]
    assert t1.loc["base", "n_seeds"] == 2
    assert t1.loc["base", "un_mean"] == pytest.approx(np.mean([b["delta"]["uniform_positive_f1"] for b in base]))
    assert t1.loc["base", "un_std"] == pytest.approx(np.std([b["delta"]["uniform_positive_f1"] for b in base], ddof=1))
    assert t1.loc["base", "tr_mean"] == pytest.approx(100 * base[0]["trained"]["positive_f1"])
    assert t1.loc["tying", "ts_pm"] == paper.TABLE1["sst"]["additive"]["tying"][2]
    assert t1.loc["tying", "direction_pm"] == True  # noqa: E712

    t2 = tables["table2_mutual_information"].set_index("regulariser")
    assert "excluded (dimensions differ)" in t2.loc["concat", "note"] and t2.loc["concat", "excluded"]
    assert t2.loc["base", "ln_k"] == pytest.approx(math.log(1000)) and t2.loc["base", "k_used"] == 1000
    assert t2.loc["tying", "direction_mf"] == False  # noqa: E712
    assert t2.loc["tying", "ts_direction_mf"] == True  # noqa: E712

    t3 = tables["table3_token_probability"].set_index("regulariser")
    expected = [pd.read_parquet(r["token_probability"]) for r in crafted_runs if r["model"] == "lstm-additive-mlm-s0"]
    assert t3.loc["mlm", "token_prob_mean"] > 0
    first = expected[0][expected[0]["correct"]]["mean_token_prob"].mean()
    seeds = [
        pd.read_parquet(r["token_probability"]).query("correct")["mean_token_prob"].mean()
        for r in crafted_runs
        if r["regulariser"] == "mlm" and r["layers"] == 1
    ]
    assert first in seeds and t3.loc["mlm", "token_prob_mean"] == pytest.approx(np.mean(seeds))
    assert t3.loc["base", "ts_token_prob"] == paper.TABLE3["sst"]["additive"]["base"]

    t6 = tables["table6_layers"]
    assert set(t6["layers"]) == {1, 3} and "residual" not in set(t6["regulariser"])
    ts3 = t6[(t6["layers"] == 3) & (t6["regulariser"] == "tying")].iloc[0]
    assert ts3["ts_un"] == paper.TABLE6["sst"][3]["tying"][1]

    directions = pd.read_csv(tmp_path / "tables" / "directions.csv")
    claims = directions.groupby("claim")["ours_holds"].agg(lambda s: set(s.dropna()))
    assert claims["fragility"] == {True} and claims["mutual_information"] == {False}
    assert claims["token_probability"] == {True}
    md = (tmp_path / "tables" / "directions.md").read_text()
    assert "ours: does not hold (0 of 4)" in md  # base MI above tying and MLM, MF and RS
    assert "ours: holds (4 of 4)" in md  # fragility: tying and MLM × Un., Pm.
    assert "excluded (dimensions differ)" in (tmp_path / "tables" / "table2_mutual_information.md").read_text()


def test_tables_pool_seeds_within_a_variant_only(crafted_runs, tmp_path):
    """Two tying variants (δ differ) are two rows, each over its own seeds — never one row whose ± is the spread
    over δ — and each is compared with base on its own (T&Š report one δ per dataset)."""
    tying30 = {**next(r for r in crafted_runs if r["model"] == "lstm-additive-tying-s0"), "model": "tying30-s0"}
    tying30["fragility"] = _fragility_json(tmp_path / "tying30.json", 0.8, 0.8, [0.8])  # no drop at all
    tables = write_tables([*crafted_runs, tying30], tmp_path / "tables")
    t1 = tables["table1_fragility"].set_index("variant")
    assert t1.loc["lstm-additive-tying", "n_seeds"] == 2 and t1.loc["tying30", "n_seeds"] == 1
    assert np.isnan(t1.loc["tying30", "un_std"]) and t1.loc["tying30", "un_mean"] == pytest.approx(0)
    assert t1.loc["tying30", "direction_un"] == False  # noqa: E712 — its own comparison with base
    assert t1.loc["lstm-additive-tying", "direction_un"] == True  # noqa: E712
    assert (
        "| sst | additive | tying | tying30 | 1 | 80.0 | 0.0 | 0.0 |"
        in (tmp_path / "tables" / "table1_fragility.md").read_text()
    )
    # fragility: ours over three variants × Un./Pm.; T&Š's tying comparison counted once, not once per δ
    assert "ours: mixed (4 of 6); T&Š: holds (4 of 4)" in (tmp_path / "tables" / "directions.md").read_text()


def test_a_dataset_without_a_positive_class_is_scored_by_macro_f1(tmp_path):
    """Three classes have no positive-class F1: those rows use macro-F1 and say so, instead of blank cells."""
    path = Path(_fragility_json(tmp_path / "three.json", 0.6, 0.5, [0.4]))
    result = json.loads(path.read_text())
    for part in ("trained", "uniform"):
        result[part]["positive_f1"] = None
    result["delta"]["uniform_positive_f1"] = result["delta"]["permutation_positive_f1_mean"] = None
    path.write_text(json.dumps(result))
    runs = [{"dataset": "ag3", "model": "lstm-additive-base-s0", "fragility": str(path)}]
    tables = write_tables(runs, tmp_path / "out")
    row = tables["table1_fragility"].iloc[0]
    assert row["f1"] == "macro" and row["tr_mean"] == pytest.approx(60) and row["un_mean"] == pytest.approx(-10)
    assert "| 60.0 (macro F1) | -10.0 | -20.0 |" in (tmp_path / "out" / "table1_fragility.md").read_text()


def test_tables_survive_missing_inputs(tmp_path):
    runs = [{"dataset": "x", "model": "lstm-dot-base-s0", "fragility": str(tmp_path / "nope.json")}]
    tables = write_tables(json.dumps(runs), tmp_path / "out")
    assert tables["table1_fragility"].empty and (tmp_path / "out" / "table6_layers.md").exists()
    assert "n/a" in (tmp_path / "out" / "directions.md").read_text()


def test_figures_from_crafted_runs(crafted_runs, tmp_path):
    imitations = []
    for teacher, regulariser in (("lstm-additive-base-s0", "base"), ("lstm-additive-mlm-s0", "mlm")):
        for lam in (0.0, 0.5, 1.0):
            record = {
                "dataset": "sst",
                "student": f"adv-{lam}",
                "teacher": teacher,
                "lambda": lam,
                "split": "test",
                "n": 10,
                "jsd_mean": 0.1 + lam / 4,
                "jsd_median": 0.1,
                "tvd_mean": 0.02 + lam / 20 + (regulariser == "mlm") * 0.05,
                "tvd_median": 0.02,
                "student_macro_f1": 0.8,
                "teacher_macro_f1": 0.8,
                "student_pos_f1": 0.8,
                "teacher_pos_f1": 0.8,
            }
            path = tmp_path / f"imit-{regulariser}-{lam}.json"
            path.write_text(json.dumps(record))
            imitations.append(str(path))
    outs = [tmp_path / f"{name}.png" for name in ("fragility", "tokens", "adversary")]
    write_figures(crafted_runs, *outs, imitations=imitations + [str(tmp_path / "gone.json")], n_examples=2)
    assert all(p.stat().st_size > 1000 for p in outs)
    # nothing to draw: every figure still written, saying so
    empty = [tmp_path / f"empty-{i}.png" for i in range(3)]
    write_figures([{"dataset": "x", "model": "m"}], *empty)
    assert all(p.exists() for p in empty)


def test_token_probability_figure_draws_dollar_tokens_literally(crafted_runs, tmp_path):
    """A token with ``$…$`` (spaCy keeps ``x$\\foo$y`` as one) is a tick label drawn as it is: it stopped Fig. 2
    with mathtext's "Unknown symbol: \\foo", and ``a$b$c`` was drawn as maths."""
    examples = pd.read_parquet(Path(crafted_runs[0]["dataset_dir"]) / "examples.parquet")
    examples["tokens"] = [[("x$\\foo$y", "a$b$c")[i % 2] for i in range(len(t))] for t in examples["tokens"]]
    (tmp_path / "dollar").mkdir()
    examples.to_parquet(tmp_path / "dollar" / "examples.parquet")
    runs = [{**r, "dataset_dir": str(tmp_path / "dollar")} for r in crafted_runs if r.get("dataset_dir")]
    outs = [tmp_path / f"{name}.png" for name in ("fragility", "tokens", "adversary")]
    write_figures(runs, *outs, n_examples=2)
    assert outs[1].stat().st_size > 1000
    fig = Figure()
    renderer = FigureCanvasAgg(fig).get_renderer()
    literal = fig.text(0, 0, "a$b$c", parse_math=False).get_window_extent(renderer)
    assert fig.text(0, 0, plain_text("a$b$c")).get_window_extent(renderer).width == literal.width


FIGURE_IN_A_NEW_PROCESS = """
import json, sys
import matplotlib.pyplot as plt
from attnaudit.tutek_snajder.figures import token_probability_figure
if sys.argv[3] == "dejavu-only":
    plt.rcParams["font.family"] = ["DejaVu Sans"]
token_probability_figure(json.loads(open(sys.argv[1]).read()), sys.argv[2], n_examples=2)
"""


def test_token_probability_figure_draws_chinese_tokens_in_an_installed_font(crafted_runs, tmp_path):
    """Chinese tokens (``tokenise.language: zh``) are tick labels of Fig. 2: DejaVu Sans has no glyph of them and drew
    empty boxes; an installed CJK font now draws them (matplotlib's font fallback, :data:`plotting.FALLBACK_FONTS`).
    In new processes with a new font cache (a font installed after matplotlib's cache was built is not in it); the
    control, DejaVu Sans alone, warns of the missing glyphs the check looks for."""
    fallback = [sys.executable, "-c", "from attnaudit.plotting import font_families; assert font_families()[1:]"]

    def cjk_font_found() -> bool:  # by a new process with a new font cache
        cache = tempfile.mkdtemp(dir=tmp_path)
        return subprocess.run(fallback, env=dict(os.environ, MPLCONFIGDIR=cache)).returncode == 0

    reason = apt_install(["fonts-wqy-microhei"], cjk_font_found)
    if reason:
        unavailable(reason)
    examples = pd.read_parquet(Path(crafted_runs[0]["dataset_dir"]) / "examples.parquet")
    examples["tokens"] = [[("这", "部", "电", "影")[i % 4] for i in range(len(t))] for t in examples["tokens"]]
    (tmp_path / "zh").mkdir()
    examples.to_parquet(tmp_path / "zh" / "examples.parquet")
    runs = [{**r, "dataset_dir": str(tmp_path / "zh")} for r in crafted_runs if r.get("dataset_dir")]
    (tmp_path / "runs.json").write_text(json.dumps(runs))
    env = dict(os.environ, MPLCONFIGDIR=tempfile.mkdtemp(dir=tmp_path))
    said = {}
    for fonts in ("installed", "dejavu-only"):
        out = tmp_path / f"{fonts}.png"
        cli = [sys.executable, "-c", FIGURE_IN_A_NEW_PROCESS, str(tmp_path / "runs.json"), str(out), fonts]
        said[fonts] = subprocess.run(cli, env=env, capture_output=True, text=True, check=True).stderr
        assert out.stat().st_size > 1000
    assert "missing from font" in said["dejavu-only"] and "missing from font" not in said["installed"], said


def test_token_probability_figure_names_the_classes(crafted_runs, tmp_path, monkeypatch):
    """Fig. 2's panel titles name the true and predicted class by the corpus's label names, as J&W's figures do,
    where there is a manifest; by index where there is none."""
    import attnaudit.tutek_snajder.figures as figures

    titles = {}

    def keep_titles(fig, out):
        titles[Path(out).stem] = [ax.get_title() for ax in fig.axes if ax.get_title()]

    monkeypatch.setattr(figures, "save_figure", keep_titles)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"label_names": ["negative", "positive"]}), encoding="utf-8")
    outs = [tmp_path / f"{name}.png" for name in ("fragility", "tokens", "adversary")]
    write_figures(crafted_runs, *outs, n_examples=2, manifest=str(manifest))
    named = titles["tokens"]
    write_figures(crafted_runs, *outs, n_examples=2)
    assert len(named) == 2 and all(
        re.search(r"label (negative|positive), predicted (negative|positive)$", t) for t in named
    )
    assert all(re.search(r"label [01], predicted [01]$", t) for t in titles["tokens"])


def test_figure_instances_are_shared_correct_and_short():
    a = pd.DataFrame(
        {"id": list("abcde"), "row": range(5), "n_tokens": [5, 50, 5, 5, 5], "predicted": 1, "correct": True}
    )
    b = a.assign(correct=[True, True, False, True, True])
    ids, _ = choose_instances({"base": a, "tying": b}, 2, 30)
    assert ids == ["a", "d"]  # b too long, c wrong for tying


def test_summary_from_crafted_outputs(tmp_path):
    rng = np.random.default_rng(0)
    runs = []
    for regulariser in ("base", "tying"):
        for seed in (0, 1):
            stem = tmp_path / f"{regulariser}{seed}"
            pd.DataFrame({"tau_attention_loo": rng.uniform(-1, 1, 20)}).to_parquet(f"{stem}-c.parquet")
            pd.DataFrame({"eps_max_jsd": rng.uniform(0, 0.69, 20)}).to_parquet(f"{stem}-a.parquet")
            rows = [
                {
                    "id": f"i{i}",
                    "row": i,
                    "method": method,
                    "ranking": ranking,
                    "variant": variant,
                    "fraction": fraction,
                    "comprehensiveness": rng.uniform() + (method == "loo") - (method == "random"),
                    "sufficiency": 0.0,
                }
                for i in range(8)
                for method in ("attention", "loo", "random", "gradient")
                for ranking in ("signed", "abs")
                for variant in ("deletion", "unk")
                for fraction in (0.1, 0.2, 0.5)
            ]
            pd.DataFrame(rows).to_parquet(f"{stem}-f.parquet")
            runs.append(
                {
                    "dataset": "sst",
                    "model": f"lstm-additive-{regulariser}-s{seed}",
                    "regulariser": regulariser,
                    "jw_correlation": f"{stem}-c.parquet",
                    "jw_adversarial": f"{stem}-a.parquet",
                    "saliency_faithfulness": f"{stem}-f.parquet" if seed == 0 else None,
                }
            )
    table = write_summary(runs, tmp_path / "s.csv", tmp_path / "s.md").set_index("regulariser")
    taus = [pd.read_parquet(r["jw_correlation"])["tau_attention_loo"].mean() for r in runs if "tying" in r["model"]]
    assert table.loc["tying", "tau_attention_loo"] == pytest.approx(np.mean(taus))
    assert table.loc["tying", "attention_aopc_rank_n"] == 1 and table.loc["base", "n_runs"] == 2
    # the rank, independently: mean over fractions per instance, then instances, signed ranking, deletion
    frame = pd.read_parquet(runs[0]["saliency_faithfulness"]).query("ranking == 'signed' and variant == 'deletion'")
    aopc = frame.pivot_table(index="id", columns="method", values="comprehensiveness").mean()
    expected = 1 + int((aopc > aopc["attention"]).sum())
    assert table.loc["base", "attention_aopc_rank"] == expected
    assert aopc_ranks(frame).iloc[0]["method"] == "loo"
    assert "AOPC" in (tmp_path / "s.md").read_text()


def test_summary_pm_delta_f1_is_in_the_f1_of_table_1(tmp_path):
    """The summary's Pm. ΔF1 column says "F1 of Table 1": it follows ``tutek_snajder.tables.f1`` as Table 1 does
    (positive-class F1 of a binary task by default, macro-F1 with ``f1: macro``)."""
    fragility = tmp_path / "fragility.json"
    deltas = {"permutation_positive_f1_mean": -1.3, "permutation_macro_f1_mean": -0.4}
    deltas |= {"uniform_positive_f1": -0.2, "uniform_macro_f1": -0.1}
    result = {"trained": {"positive_f1": 0.81, "macro_f1": 0.8}, "delta": deltas, "n": 20, "n_permutations": 4}
    fragility.write_text(json.dumps(result))
    run = {"dataset": "sst", "model": "lstm-additive-base-s0", "regulariser": "base", "fragility": str(fragility)}
    for f1, expected in (("positive", -1.3), ("macro", -0.4)):
        table = write_summary([run], tmp_path / "s.csv", tmp_path / "s.md", f1=f1)
        assert table["pm_delta_f1"].tolist() == [expected], f1
        assert fragility_frame(parse_runs([run]), f1)["pm"].tolist() == [expected], f1


def test_options_defaults_and_rejections():
    assert resolve({})["mutual_information"]["kmeans_batch"] == DEFAULTS["mutual_information"]["kmeans_batch"]
    with pytest.raises(Exception, match="unknown option"):
        resolve({"fragility": {"n_perms": 3}})


# ------------------------------------------------------------------------------------------- CLI
def test_cli_end_to_end(planted_dataset, planted_model_dir, tmp_path):
    data, model = str(planted_dataset / "dataset"), str(planted_model_dir)
    common = ["--dataset-dir", data, "--model-dir", model, "--batch-size", "32", "--threads", "1"]
    assert (
        main(["ts", "fragility", *common, "--n-permutations", "4", "--seed", "2", "--out", f"{tmp_path}/f.json"]) == 0
    )
    mi_args = ["--n-words", "8", "--k", "4", "--kmeans-batch", "16", "--max-points", "200", "--n-init", "1"]
    assert main(["tutek-snajder", "mutual-information", *common, *mi_args, "--out", f"{tmp_path}/mi.json"]) == 0
    assert main(["ts", "token-probability", *common, "--split", "test", "--out", f"{tmp_path}/t.parquet"]) == 0
    run = {
        "dataset": "planted",
        "corpus": "planted",
        "model": "average-additive-base-s0",
        "regulariser": "base",
        "attention": "additive",
        "layers": 1,
        "seed": 0,
        "fragility": f"{tmp_path}/f.json",
        "mutual_information": f"{tmp_path}/mi.json",
        "token_probability": f"{tmp_path}/t.parquet",
        "dataset_dir": data,
    }
    (tmp_path / "runs.json").write_text(json.dumps([run]))
    runs = f"@{tmp_path}/runs.json"
    assert main(["ts", "tables", "--runs", runs, "--out-dir", f"{tmp_path}/tables"]) == 0
    figures = ["--out-fragility", f"{tmp_path}/a.png", "--out-token-probability", f"{tmp_path}/b.png"]
    assert main(["ts", "figures", "--runs", runs, *figures, "--out-adversary", f"{tmp_path}/c.png"]) == 0
    assert (
        main(["ts", "summary", "--runs", runs, "--out-csv", f"{tmp_path}/s.csv", "--out-md", f"{tmp_path}/s.md"]) == 0
    )
    fragility = json.loads((tmp_path / "f.json").read_text())
    assert fragility["n_permutations"] == 4 and len(fragility["permutation"]["macro_f1"]) == 4
    table = pd.read_csv(tmp_path / "tables" / "table1_fragility.csv")
    assert table.loc[0, "un_mean"] == pytest.approx(fragility["delta"]["uniform_positive_f1"], rel=1e-5)  # %.6g
    mi_table = pd.read_csv(tmp_path / "tables" / "table2_mutual_information.csv")
    assert not mi_table.loc[0, "excluded"] and "hidden size" in mi_table.loc[0, "note"]  # average: 16 → 256
    assert json.loads((tmp_path / "mi.json").read_text())["samples"]["RS"]["k_used"] == 4
    assert len(pd.read_parquet(tmp_path / "t.parquet")) == fragility["n"]
    assert all((tmp_path / p).exists() for p in ("a.png", "b.png", "c.png", "s.csv", "s.md"))
    assert main(["ts", "tables", "--runs", "[not json", "--out-dir", f"{tmp_path}/x"]) == 2
