"""J&W audits (§4): batched permutation and adversarial code equal naive per-instance references, the adversary
never reports an invalid adversary as valid, sharding does not change results, tables/figures/heatmaps/CLI."""

import json
import re

import numpy as np
import pandas as pd
import pytest
import torch
from test_importance_jw import VARIANTS, small_batch, small_model

from attnaudit import AttnauditError
from attnaudit.auditing import instance_seed
from attnaudit.cli import main
from attnaudit.importance._stage import score
from attnaudit.io import gather_chunks
from attnaudit.jain_wallace import correlation, reference, rng
from attnaudit.jain_wallace.adversarial import (
    epsilon_max_jsd,
    find_adversaries,
    objective_gradient,
    relaxed_objective,
    softmax_backward,
)
from attnaudit.jain_wallace.common import batch_seeds
from attnaudit.jain_wallace.options import DEFAULTS, resolve
from attnaudit.jain_wallace.permutation import permutation_deltas, permute
from attnaudit.jain_wallace.run import run_audit
from attnaudit.masks import content_mask
from attnaudit.metrics import LN2, jsd, tvd
from attnaudit.models import masked_softmax

MARKERS = (2, 3)
FAST = {"adversarial": {"steps": 25}, "permutation": {"n_permutations": 20}}


def test_counter_rng_is_per_instance_and_width_free():
    seeds = torch.tensor([5, 9])
    wide = rng.uniform(seeds, 4, 30, rng.STREAM_PERMUTATION)
    narrow = rng.uniform(seeds[1:], 4, 12, rng.STREAM_PERMUTATION)
    torch.testing.assert_close(wide[1, :, :12], narrow[0])
    assert not torch.equal(wide[0], wide[1])
    assert wide.min() > 0 and wide.max() < 1
    assert not torch.equal(rng.uniform(seeds, 4, 30, rng.STREAM_ADVERSARY_U1), wide)


def test_permute_moves_only_permutable_weights():
    _, batch = small_batch()
    alpha = torch.rand(batch.tokens.shape).masked_fill(~batch.mask, 0)
    permutable = content_mask(batch, MARKERS)
    out = permute(alpha, permutable, batch_seeds(0, batch.ids), 50)
    fixed = ~permutable
    assert torch.equal(
        out[:, :, :][fixed[:, None, :].expand_as(out)],
        alpha[:, None, :].expand_as(out)[fixed[:, None, :].expand_as(out)],
    )
    for b in range(len(batch.ids)):
        values = alpha[b][permutable[b]].sort().values
        for p in range(50):
            torch.testing.assert_close(out[b, p][permutable[b]].sort().values, values)
    assert (out[0] != alpha[0]).any()  # something moved


@pytest.mark.parametrize("encoder,attention", VARIANTS)
def test_batched_permutation_equals_per_instance(encoder, attention):
    model = small_model(encoder, attention)
    seqs, batch = small_batch(3)
    permutable = content_mask(batch, MARKERS)
    _, deltas = permutation_deltas(model, batch, batch_seeds(7, batch.ids), 30, permutable)
    for i, seq in enumerate(seqs):
        naive = reference.permutation_deltas(
            model, seq, permutable[i, : len(seq)].numpy(), instance_seed(7, batch.ids[i]), 30
        )
        np.testing.assert_allclose(deltas[i].numpy(), naive, atol=1e-6)


@pytest.mark.parametrize("encoder", ["lstm", "cnn", "average"])
def test_batched_adversary_equals_each_instance_alone(encoder):
    model = small_model(encoder, "additive", num_classes=2)
    seqs, batch = small_batch(4)
    with torch.no_grad():
        out = model(batch)
    options = dict(k=4, epsilon=0.01, lam=500.0, steps=60, lr=0.05, amsgrad=True, init_scale=3.0)
    adv = find_adversaries(
        model, out.hidden, out.query, out.attention, out.probs, batch.mask, batch_seeds(1, batch.ids), **options
    )
    for i, seq in enumerate(seqs):
        alone = reference.adversaries(model, seq, np.ones(len(seq), bool), instance_seed(1, batch.ids[i]), **options)
        np.testing.assert_allclose(adv.attention[i, :, : len(seq)].numpy(), alone["attention"], atol=1e-5)
        np.testing.assert_allclose(adv.tvd[i].numpy(), alone["tvd"], atol=1e-5)
        np.testing.assert_allclose(adv.jsd[i].numpy(), alone["jsd"], atol=1e-5)
        assert adv.attention[i, :, len(seq) :].abs().sum() == 0  # padding never receives attention


@pytest.mark.parametrize("epsilon", [0.0, 0.05, 1.0])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_closed_form_objective_gradient_equals_autograd(epsilon, k):
    """The adversary's hand-written gradient (linear decoder) is autograd's on the relaxed Eq. 1–2, masks included."""
    generator = torch.Generator().manual_seed(k)
    batch, width, classes = 4, 9, 3
    logits = torch.randn(batch, width, classes, generator=generator, dtype=torch.float64)
    mask = torch.ones(batch, 1, width, dtype=torch.bool)
    mask[0, 0, 7:] = False
    mask[1, 0, 0] = False
    theta = (3 * torch.randn(batch, k, width, generator=generator, dtype=torch.float64)).requires_grad_(True)
    alpha_hat = masked_softmax(torch.randn(batch, width, generator=generator, dtype=torch.float64), mask[:, 0])
    probs_hat = torch.softmax(torch.randn(batch, classes, generator=generator, dtype=torch.float64), dim=-1)
    alpha = masked_softmax(theta, mask)
    objective = relaxed_objective(alpha, alpha_hat, torch.softmax(alpha @ logits, -1), probs_hat, epsilon, 500.0)
    (expected,) = torch.autograd.grad(objective.sum(), theta)
    with torch.no_grad():
        closed = softmax_backward(alpha, objective_gradient(alpha, alpha_hat, logits, probs_hat, epsilon, 500.0))
    torch.testing.assert_close(closed, expected, atol=1e-10, rtol=1e-8)


def _check_validity(model, batch, adv, epsilon):
    """Every adversary reported valid has TVD ≤ ε, recomputed from its attention through the decoder."""
    with torch.no_grad():
        out = model(batch)
        probs = torch.softmax(model.decode(out.hidden, adv.attention, out.query), dim=-1)
        recomputed = tvd(probs, out.probs[:, None, :])
    assert torch.all(adv.tvd[adv.valid].double() <= epsilon)
    assert torch.all(recomputed[adv.valid] <= epsilon + 1e-6)
    assert torch.all(adv.valid == (adv.tvd.double() <= epsilon))
    assert torch.all((adv.jsd >= 0) & (adv.jsd <= LN2))


@pytest.mark.parametrize("epsilon", [1e-6, 0.01, 0.05])
def test_adversary_never_reports_an_invalid_adversary(planted_dataset, planted_model_dir, epsilon):
    from attnaudit.auditing import iterate_chunk, load_audit_inputs

    inputs = load_audit_inputs(planted_dataset / "dataset", planted_model_dir, "test")
    _, batch = next(iterate_chunk(inputs, 32))
    with torch.no_grad():
        out = inputs.model(batch)
    adv = find_adversaries(
        inputs.model,
        out.hidden,
        out.query,
        out.attention,
        out.probs,
        batch.mask,
        batch_seeds(0, batch.ids),
        k=3,
        epsilon=epsilon,
        steps=40,
    )
    _check_validity(inputs.model, batch, adv, epsilon)
    best = epsilon_max_jsd(adv)
    expected = torch.where(adv.valid, adv.jsd, torch.zeros_like(adv.jsd)).max(dim=1).values
    torch.testing.assert_close(best, expected)
    assert torch.all(best[~adv.valid.any(dim=1)] == 0)
    assert torch.all(epsilon_max_jsd(adv, "nan")[~adv.valid.any(dim=1)].isnan())
    if epsilon == 0.05:
        assert adv.valid.float().mean() > 0.5  # the search does find adversaries


def test_valid_epsilon_moves_the_validity_threshold_not_the_search(planted_dataset, planted_model_dir):
    """``valid_epsilon`` (J&W's code: search within 0.01, Figs. 4–5 from the adversaries within 0.05) changes which
    adversaries count, never the adversaries the search finds."""
    from attnaudit.auditing import iterate_chunk, load_audit_inputs

    inputs = load_audit_inputs(planted_dataset / "dataset", planted_model_dir, "test")
    _, batch = next(iterate_chunk(inputs, 32))
    with torch.no_grad():
        out = inputs.model(batch)
    args = (inputs.model, out.hidden, out.query, out.attention, out.probs, batch.mask, batch_seeds(0, batch.ids))
    strict = find_adversaries(*args, k=3, epsilon=0.001, steps=40)
    loose = find_adversaries(*args, k=3, epsilon=0.001, steps=40, valid_epsilon=0.05)
    for field in ("attention", "probs", "tvd", "jsd"):
        torch.testing.assert_close(getattr(loose, field), getattr(strict, field), rtol=0, atol=0)
    assert torch.equal(strict.valid, strict.tvd.double() <= 0.001)
    assert torch.equal(loose.valid, loose.tvd.double() <= 0.05)
    assert loose.valid.sum() > strict.valid.sum()  # the looser threshold counts adversaries the strict one does not
    assert (epsilon_max_jsd(loose) >= epsilon_max_jsd(strict)).all()


# -- the audit runner: sharding, outputs ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted_audits(planted_dataset, planted_model_dir, tmp_path_factory):
    """Each audit on the planted test split, once in 1 chunk and once in 3 chunks (gathered); the correlation audit
    from the importance stage's scores, themselves computed in 1 and in 3 chunks."""
    out = tmp_path_factory.mktemp("jw_audits")
    dataset = planted_dataset / "dataset"
    frames = {}
    correlation_frames = []
    for n_chunks, name in ((1, "one"), (3, "three")):
        paths = []
        for method in ("attention", "gradient", "loo"):
            parts = [out / name / "importance" / method / f"chunk-{c}-of-{n_chunks}.parquet" for c in range(n_chunks)]
            for c, part in enumerate(parts):
                score(
                    str(dataset),
                    str(planted_model_dir),
                    part,
                    method,
                    {},
                    batch_size=16,
                    chunk=c,
                    n_chunks=n_chunks,
                    seed=3,
                )
            paths.append(out / name / "importance" / f"{method}.parquet")
            gather_chunks(parts, paths[-1])
        correlation_frames.append(
            correlation.run(paths, str(dataset), out / name / "jw_correlation.parquet", options=FAST)
        )
    frames["correlation"] = tuple(correlation_frames)
    for audit in ("permutation", "adversarial"):
        whole = run_audit(
            audit,
            planted_dataset / "dataset",
            planted_model_dir,
            out / "one" / f"jw_{audit}.parquet",
            batch_size=16,
            seed=3,
            options=FAST,
            progress=False,
        )
        parts = [out / "three" / audit / f"chunk-{c}-of-3.parquet" for c in range(3)]
        for c, part in enumerate(parts):
            run_audit(
                audit,
                planted_dataset / "dataset",
                planted_model_dir,
                part,
                chunk=c,
                n_chunks=3,
                batch_size=16,
                seed=3,
                options=FAST,
                progress=False,
            )
        frames[audit] = (whole, gather_chunks(parts, out / "three" / f"jw_{audit}.parquet"))
    return out, frames


@pytest.mark.parametrize("audit", ["correlation", "permutation", "adversarial"])
def test_sharded_output_identical_to_one_chunk(planted_audits, audit):
    _, frames = planted_audits
    whole, sharded = frames[audit]
    assert len(whole) == 120 and whole["row"].tolist() == list(range(120))
    pd.testing.assert_frame_equal(whole, sharded)


def test_audit_columns(planted_audits):
    _, frames = planted_audits
    corr, perm, adv = (frames[a][0] for a in ("correlation", "permutation", "adversarial"))
    for pair in ("attention_gradient", "attention_loo", "gradient_loo"):
        assert corr[f"tau_{pair}"].between(-1, 1).all() and corr[f"p_{pair}"].between(0, 1).all()
    assert (corr["n_positions"] == corr["n_tokens"] - 2).all()  # <s>, </s> left out of the rankings
    assert perm["delta_median"].between(0, 1).all() and (perm["deltas"].map(len) == 20).all()
    assert (perm["delta_q05"] <= perm["delta_median"]).all() and (perm["delta_median"] <= perm["delta_q95"]).all()
    assert adv["eps_max_jsd"].between(0, LN2).all()
    for _, r in adv.iterrows():
        valid, tvds = np.asarray(r["adversary_valid"]), np.asarray(r["adversary_tvd"])
        assert (tvds[valid] <= 0.01).all() and r["n_valid"] == valid.sum()
        if r["n_valid"]:
            assert r["best_tvd"] <= 0.01 and len(r["adversarial_attention"]) == r["n_tokens"]
            assert r["eps_max_jsd"] == pytest.approx(np.max(np.asarray(r["adversary_jsd"])[valid]))
            assert float(jsd(torch.tensor(r["attention"]), torch.tensor(r["adversarial_attention"]))) == pytest.approx(
                r["eps_max_jsd"], abs=1e-5
            )


def tables_md(tmp_path, name):
    return (tmp_path / "tables" / f"{name}.md").read_text()


def test_figures_colour_each_predicted_class_of_a_few_and_pool_many():
    """J&W colour the predicted classes: a corpus of at most five classes gets each its name and a colour of its own,
    the same in every panel (by class index, not by the classes a panel happens to show); a corpus of more (a
    30-topic user corpus, bAbI's answer words) is one group, which recycled colours and a legend of dozens could
    not show."""
    from attnaudit.plotting import CLASS_COLOURS, class_groups

    names = ["entailment", "neutral", "contra$diction"]
    groups, palette = class_groups(pd.Series([2, 0, 2]), names)
    assert groups.tolist() == [r"contra\$diction", "entailment", r"contra\$diction"]
    assert palette == {"entailment": CLASS_COLOURS[0], r"contra\$diction": CLASS_COLOURS[2]}
    assert class_groups(pd.Series([1, 3]), [])[1] == {"1": CLASS_COLOURS[1], "3": CLASS_COLOURS[3]}
    topics = [f"topic_{i:02d}" for i in range(30)]
    groups, palette = class_groups(pd.Series([1, 21, 8]), topics)
    assert set(groups) == set(palette) == {"any of the 30 classes"} and len(groups) == 3
    assert len(class_groups(pd.Series(range(6)), [])[1]) == 1  # no names: the classes predicted


def test_tables_figures_heatmaps(planted_audits, planted_dataset, tmp_path):
    from attnaudit.jain_wallace.figures import FIGURES, write_figures
    from attnaudit.jain_wallace.heatmaps import write_heatmaps
    from attnaudit.jain_wallace.tables import JW_MEASURES, JW_TABLE2, write_tables

    out, _ = planted_audits
    root = tmp_path / "audits"
    # lstm150-additive-base shares encoder, attention and regulariser with lstm-additive-base: not one of its seeds
    models = ("average-additive-base-s0", "lstm-additive-base-s0", "lstm-additive-base-s1", "lstm150-additive-base-s0")
    runs, manifest = [], tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"label_names": ["neg", "pos"]}))  # the corpus's class names
    metrics = tmp_path / "metrics.json"
    metrics.write_text(json.dumps({"test": {"accuracy": 0.7, "macro_f1": 0.69, "per_class_f1": [0.6, 0.78], "n": 9}}))
    for model in models:  # the same audits under three names
        (root / "planted" / model).mkdir(parents=True)
        encoder, attention, _, seed = model.split("-")
        encoder = encoder.removesuffix("150")
        run = {
            "dataset": "planted",
            "model": model,
            "corpus": "sst",
            "selection": "best",
            "encoder": encoder,
            "attention": attention,
            "regulariser": "base",
            "seed": int(seed[1:]),
            "variant": model.rsplit("-", 1)[0],
            "manifest": manifest,
            "metrics": metrics,
        }
        for audit in ("correlation", "permutation", "adversarial"):
            run[audit] = root / "planted" / model / f"jw_{audit}.parquet"
            run[audit].write_bytes((out / "one" / f"jw_{audit}.parquet").read_bytes())
        runs.append(run)
    tables = write_tables(runs, tmp_path / "tables", FAST)
    corr = pd.read_csv(tmp_path / "tables" / "correlation.csv")
    assert {"dataset", "model", "predicted_class", "pair", "tau_mean", "tau_std", "significant_fraction", "n"} <= set(
        corr
    )
    assert set(corr["pair"]) == {"attention~gradient", "attention~loo", "gradient~loo"}
    assert (corr["label"] == corr["predicted_class"].map({0: "neg", 1: "pos"})).all()
    assert corr.groupby(["model", "pair"])["n"].sum().eq(120).all()
    perm = pd.read_csv(tmp_path / "tables" / "permutation.csv")
    assert {"delta_median_q50", "small_change_fraction"} <= set(perm)
    adv = pd.read_csv(tmp_path / "tables" / "adversarial.csv")
    assert {"eps_max_jsd_mean", "high_jsd_fraction"} <= set(adv)
    t1 = tables["table1"]  # J&W Table 1: SST is scored by the positive class's F1, next to their 0.81
    assert t1["ours"].tolist() == [0.78] * len(models) and set(t1["metric"]) == {"positive-class F1"}
    assert t1["jw_bilstm"].tolist() == [0.81] * len(models) and "| positive-class F1 | 0.780 |" in tables_md(
        tmp_path, "table1"
    )
    t2 = tables["table2"]
    assert set(t2["measure"]) == {"tau_g", "tau_loo"} and t2["jw_mean"].notna().all()
    correlation = tables["correlation"]
    for _, r in t2.iterrows():  # each row joins our τ for its model and pair to J&W's cell for its corpus and class
        index = next(i for i, (m, e, _) in enumerate(JW_MEASURES) if (m, e) == (r["measure"], r["encoder"]))
        assert r["jw_mean"] == JW_TABLE2[r["corpus"]][r["predicted_class"]][index][0]
        ours = correlation[
            (correlation["model"] == r["model"])
            & (correlation["pair"] == JW_MEASURES[index][2])
            & (correlation["predicted_class"] == r["predicted_class"])
        ]
        assert r["ours_mean"] == pytest.approx(ours["tau_mean"].item())
    assert "| planted | tau_g |" in (tmp_path / "tables" / "table2.md").read_text()
    seeds = tables["seeds"].set_index(["variant", "measure", "predicted_class"])
    lstm_g = seeds.loc[("lstm-additive-base", "tau_g", 0)]
    assert lstm_g["n_seeds"] == 2 and lstm_g["seeds"] == "0 1" and lstm_g["tau_std_over_seeds"] == 0.0
    assert seeds.loc[("lstm150-additive-base", "tau_g", 0)]["n_seeds"] == 1  # its own row, not a third seed
    in_table2 = t2.groupby(["encoder", "measure", "predicted_class"])["jw_mean"].first()
    assert lstm_g["jw_mean"] == in_table2.loc[("lstm", "tau_g", 0)]
    assert seeds.loc[("average-additive-base", "tau_g", 0)]["jw_mean"] == in_table2.loc[("average", "tau_g", 0)]
    assert np.isnan(seeds.loc[("average-additive-base", "tau_loo", 0)]["jw_mean"])  # J&W: τ_loo for the BiLSTM only
    assert "| planted | best | lstm-additive-base | tau_g | neg |" in (tmp_path / "tables" / "seeds.md").read_text()

    shown = ["average-additive-base-s0", "lstm-additive-base-s0"]
    paths = write_figures(
        "planted",
        shown,
        {
            a: [root / "planted" / m / f"jw_{a}.parquet" for m in shown]
            for a in ("correlation", "permutation", "adversarial")
        },
        tmp_path / "figures",
        {m: {"encoder": m.split("-")[0], "attention": "additive"} for m in shown},
        manifest,
    )
    assert [p.stem for p in paths] == list(FIGURES) and all(p.stat().st_size > 1000 for p in paths)

    page = tmp_path / "heatmaps.html"
    write_heatmaps(
        "planted",
        "average-additive-base-s0",
        root / "planted" / "average-additive-base-s0" / "jw_adversarial.parquet",
        planted_dataset / "dataset",
        page,
        n=3,
        manifest=manifest,
    )
    text = page.read_text()
    assert len(re.findall(r"label <bdi>(neg|pos)</bdi>, predicted <bdi>(neg|pos)</bdi>;", text)) == 3
    assert "<script" not in text.lower() and "http" not in text and text.count("class='instance'") == 3
    assert "Δŷ" in text


def test_cli_runs_an_audit_chunk(planted_dataset, planted_model_dir, tmp_path):
    out = tmp_path / "chunk.parquet"
    code = main(
        [
            "jain-wallace",
            "audit",
            "permutation",
            "--dataset-dir",
            str(planted_dataset / "dataset"),
            "--model-dir",
            str(planted_model_dir),
            "--out",
            str(out),
            "--chunk",
            "1",
            "--n-chunks",
            "2",
            "--batch-size",
            "16",
            "--options",
            json.dumps(FAST),
        ]
    )
    assert code == 0 and 0 < len(pd.read_parquet(out)) < 120


def test_options_reject_unknown_keys_and_match_schema():
    import yaml

    with pytest.raises(AttnauditError, match="adversarial.steps_"):
        resolve({"adversarial": {"steps_": 3}})
    from conftest import REPO

    schema = yaml.safe_load((REPO / "schemas" / "config.schema.yaml").read_text())
    block = schema["properties"]["jain_wallace"]["properties"]
    for section, values in DEFAULTS.items():
        assert set(block[section]["properties"]) == set(values), section
        for key, value in values.items():
            assert block[section]["properties"][key]["default"] == value, f"{section}.{key}"


def test_bench_compares_with_a_rerun_on_the_same_vendor_first():
    """The J&W-code rerun a bench compares with: same CPU vendor before nearer matrix-product speed (MKL's maths
    take another path off Intel CPUs); nearest speed among all reruns where no rerun has this vendor."""
    from attnaudit.jain_wallace.throughput import JW_CODE_RERUNS, nearest_rerun

    for rerun in JW_CODE_RERUNS:
        assert nearest_rerun(rerun["gmacs"], rerun["vendor"]) is rerun
    vendors = {rerun["vendor"] for rerun in JW_CODE_RERUNS}
    assert len(vendors) > 1
    for vendor in vendors:
        others = [rerun for rerun in JW_CODE_RERUNS if rerun["vendor"] != vendor]
        for other in others:  # another vendor's speed still picks a rerun of this vendor
            assert nearest_rerun(other["gmacs"], vendor)["vendor"] == vendor
    slowest, fastest = min(JW_CODE_RERUNS, key=lambda r: r["gmacs"]), max(JW_CODE_RERUNS, key=lambda r: r["gmacs"])
    assert nearest_rerun(slowest["gmacs"] / 2, "UnknownVendor") is slowest
    assert nearest_rerun(fastest["gmacs"] * 2, None) is fastest


def test_bench_prints_one_line_per_audit(planted_dataset, planted_model_dir, capsys):
    """Smoke test of ``python -m attnaudit throughput jw`` (not timed: numbers depend on the machine): one line per
    audit and thread count with the ratio to J&W's code, then the naive references."""
    import re

    code = main(
        [
            "bench",
            "jw",
            "--dataset-dir",
            str(planted_dataset / "dataset"),
            "--model-dir",
            str(planted_model_dir),
            "--threads",
            "1",
            "2",
            "--naive-limit",
            "4",
            "--options",
            json.dumps(FAST),
        ]
    )
    lines = capsys.readouterr().out.strip().splitlines()
    assert code == 0 and lines[0].startswith("fixed cost per job:")
    assert lines[1].startswith("jw_rerun_ratio: against J&W's code run on ")
    assert lines[2].startswith("note: the J&W ratios compare with their SST BiLSTM") and "on dataset" in lines[2]
    lines = lines[:2] + lines[3:]
    names = ("gradient", "loo", "permutation", "adversarial", "all_four")
    assert [line.split()[:2] for line in lines[2:12]] == [[a, f"threads={t}"] for t in (1, 2) for a in names]
    number = r"[\d.]+"
    ratios = rf"jw_code_ratio={number} jw_code_ratio_job={number} jw_rerun_ratio={number} jw_rerun_ratio_job={number}"
    fields = rf"cpu={number}s wall={number}s per_instance={number}ms {ratios}"
    assert all(re.fullmatch(rf"\w+ threads=\d {fields}", line) for line in lines[2:12])
    assert [line.split()[0] for line in lines[-4:]] == ["gradient", "loo", "permutation", "adversarial"]
    assert all(
        re.fullmatch(rf"\w+ naive_per_instance={number}ms batched_speedup={number}", line) for line in lines[-4:]
    )


@pytest.mark.parametrize(
    "args,expected",
    [
        (["--audits", "gradiant"], "throughput --audits: 'gradiant' is not one of gradient, loo"),
        (["--threads", "0"], "throughput --threads: [0] must be positive thread counts"),
        (["--epoch", "--embeddings", "nowhere.npy"], "throughput --epoch: nowhere.npy is not a file"),
    ],
)
def test_bench_names_what_it_cannot_run(planted_dataset, planted_model_dir, capsys, args, expected):
    dirs = ["--dataset-dir", str(planted_dataset / "dataset"), "--model-dir", str(planted_model_dir)]
    assert main(["bench", "jw", *dirs, *args]) == 2
    assert expected in capsys.readouterr().err


def test_bench_resolves_dataset_and_model_names(tmp_path):
    from argparse import Namespace

    from attnaudit.throughput import resolve_dirs

    args = Namespace(
        dataset_dir=None, model_dir=None, dataset="sst", model="lstm-additive-base-s0", results=str(tmp_path)
    )
    assert resolve_dirs(args) == (tmp_path / "datasets" / "sst", tmp_path / "models" / "sst" / "lstm-additive-base-s0")
    with pytest.raises(AttnauditError, match="--dataset-dir"):
        resolve_dirs(Namespace(dataset_dir=None, model_dir=None, dataset=None, model=None, results="results"))


def test_the_adversarial_search_batches_by_its_own_token_budget(planted_dataset):
    """The adversarial search runs its steps once per batch and holds little per token position, so its jobs (and
    the bench) batch by ``jain_wallace.adversarial.max_batch_tokens``, larger than the shared budget the other
    audits use; null falls back to the shared budget."""
    from attnaudit.auditing import batch_plan, token_budget
    from attnaudit.data import encode_split, load_examples
    from attnaudit.jain_wallace.run import audit_token_budget

    examples, vocab = load_examples(planted_dataset / "dataset")
    encoded = encode_split(examples, vocab, "test")
    shared, cpu = {"cpu": 64, "cuda": 1024}, torch.device("cpu")

    def n_batches(audit, options):
        return len(batch_plan(encoded, 256, token_budget(audit_token_budget(audit, options, shared), cpu)))

    assert n_batches("adversarial", resolve({})) < n_batches("permutation", resolve({}))
    fallback = resolve({"adversarial": {"max_batch_tokens": None}})
    assert n_batches("adversarial", fallback) == n_batches("permutation", fallback)


def test_a_seed_whose_class_has_no_defined_tau_is_a_dash_not_nan():
    """A predicted class whose only test instances have no τ (one token, a constant ranking) has no mean τ for that
    seed: the seeds table says so with a dash, as every other table, not "nan"."""
    from attnaudit.jain_wallace.tables import seeds_markdown, seeds_table, with_labels

    key = {"dataset": "d", "selection": "best", "variant": "cnn-dot-base", "encoder": "cnn", "attention": "dot"}
    key |= {"regulariser": "base", "pair": "attention~gradient"}
    rows = [
        key | {"seed": seed, "predicted_class": c, "tau_mean": tau}
        for seed, c, tau in ((0, 0, 0.25), (1, 0, 0.35), (0, 1, np.nan), (1, 1, 0.5))
    ]
    frame = with_labels(seeds_table(pd.DataFrame(rows), {}), {"d": ["neg", "pos"]})
    assert frame["per_seed"].tolist() == ["0.250 0.350", "– 0.500"]
    text = seeds_markdown(frame)
    assert "nan" not in text.lower() and "| – 0.500 (s 0 1) | – ± – |" in text


def test_a_class_name_is_literal_text_in_the_markdown_tables():
    """Class names come from the user's corpus: HTML, a pipe or a newline in one stays inside its cell."""
    from attnaudit.jain_wallace.tables import seeds_markdown

    label = "<img src=x onerror=alert(1)>|a\nb"
    row = {"dataset": "d", "selection": "best", "variant": "v", "measure": "tau_g", "label": label}
    row |= {"per_seed": "0.1", "seeds": "0", "tau_mean_over_seeds": 0.1, "tau_std_over_seeds": np.nan}
    text = seeds_markdown(pd.DataFrame([row | {"jw_mean": np.nan, "ours_minus_jw": np.nan}]))
    line = text.splitlines()[-1]
    assert "<img" not in text and "&lt;img" in line and "\\|a b" in line
    assert line.count(" | ") == text.splitlines()[-3].count(" | ")  # as many cells as the header
