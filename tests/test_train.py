import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import last_epoch_pair_config, snakemake

from attnaudit import AttnauditError
from attnaudit.models import load_model
from attnaudit.train import classification_metrics, read_off_final_epoch, run, train_model
from attnaudit.train.training import adam, build_model, full_spec


def test_planted_model_learns_the_markers(planted_model_dir):
    metrics = json.loads((planted_model_dir / "metrics.json").read_text())
    assert metrics["test"]["accuracy"] > 0.9
    for key in ("accuracy", "macro_f1", "per_class_f1", "roc_auc"):
        assert key in metrics["dev"] and key in metrics["test"]
    prov = metrics["provenance"]
    assert (
        prov["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
        and prov["seed"] == 0
        and prov["torch"] == torch.__version__
    )
    predictions = pd.read_parquet(planted_model_dir / "predictions.parquet")
    assert set(predictions["split"]) == {"train", "dev", "test"}
    row = predictions.iloc[0]
    assert np.isclose(np.sum(row["probs"]), 1.0) and np.isclose(np.sum(row["attention"]), 1.0, atol=1e-5)


def test_training_is_deterministic(planted_dataset):
    spec = {"encoder": "lstm", "attention": "dot", "epochs": 2, "lstm_hidden": 8, "seed": 3}
    args = (str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"), spec)
    model_a, metrics_a, pred_a = train_model(*args, progress=False)
    model_b, metrics_b, pred_b = train_model(*args, progress=False)
    assert metrics_a["history"] == metrics_b["history"]
    for (name, a), b in zip(model_a.state_dict().items(), model_b.state_dict().values()):
        assert torch.equal(a, b), name
    other = train_model(*args[:2], {**spec, "seed": 4}, progress=False)[1]
    assert other["history"] != metrics_a["history"]


def test_nan_loss_names_epoch_and_batch(planted_dataset, tmp_path):
    matrix = np.load(planted_dataset / "embeddings" / "matrix.npy")
    matrix[4:] = np.nan
    np.save(tmp_path / "nan.npy", matrix)
    with pytest.raises(AttnauditError, match=r"epoch 0, batch 0"):
        run(
            str(planted_dataset / "dataset"),
            str(tmp_path / "nan.npy"),
            str(tmp_path / "out"),
            {"encoder": "average", "epochs": 1},
            threads=1,
        )
    assert not (tmp_path / "out" / "model.pt").exists()


def test_an_undefined_selection_score_stops_after_the_first_epoch(planted_dataset, tmp_path):
    """A dev split without every class has no ROC-AUC: no epoch could be selected on it, so training says so after
    its first epoch (it used to end every epoch and then fail to load a model it never kept)."""
    import shutil

    dataset = tmp_path / "dataset"
    shutil.copytree(planted_dataset / "dataset", dataset)
    examples = pd.read_parquet(dataset / "examples.parquet")
    examples[(examples["split"] != "dev") | (examples["label"] == 0)].to_parquet(dataset / "examples.parquet")
    spec = {"encoder": "average", "epochs": 5, "selection_metric": "roc_auc"}
    with pytest.raises(AttnauditError, match=r"dev roc_auc is undefined \(NaN\) after epoch 0; the dev split has 1 of"):
        train_model(str(dataset), str(planted_dataset / "embeddings" / "matrix.npy"), spec, progress=False)


def test_metrics_match_sklearn_definitions():
    labels = np.array([0, 0, 1, 1, 1])
    probs = np.array([[0.9, 0.1], [0.4, 0.6], [0.2, 0.8], [0.3, 0.7], [0.6, 0.4]])
    m = classification_metrics(labels, probs)
    assert m["accuracy"] == pytest.approx(0.6)
    assert m["per_class_f1"] == pytest.approx([0.5, 2 / 3])
    assert m["roc_auc"] == pytest.approx(5 / 6)


def test_patience_stops_when_dev_stops_improving(planted_dataset):
    """``patience``: training ends once the dev score has not improved for that many epochs; the selected epoch is
    the best one seen, as without patience."""
    spec = {"encoder": "average", "attention": "additive", "epochs": 30, "seed": 0, "selection_metric": "accuracy"}
    args = (str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"))
    full = train_model(*args, spec, progress=False)[1]
    stopped = train_model(*args, {**spec, "patience": 2}, progress=False)[1]
    best = stopped["selected_epoch"]
    assert len(stopped["history"]) == best + 3 < 30
    assert stopped["history"] == full["history"][: best + 3]
    scores = [record["dev_accuracy"] for record in full["history"]]
    assert scores[best] == max(scores[: best + 3])


def test_frozen_embeddings_stay_as_given(planted_dataset):
    matrix = np.load(planted_dataset / "embeddings" / "matrix.npy")
    args = (str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"))
    spec = {"encoder": "average", "attention": "additive", "epochs": 2}
    frozen = train_model(*args, {**spec, "freeze_embeddings": True}, progress=False)[0]
    trained = train_model(*args, spec, progress=False)[0]
    expected = torch.from_numpy(matrix).float()
    expected[frozen.cfg.pad_index] = 0
    assert torch.equal(frozen.embedding.weight.detach(), expected)
    assert not torch.equal(trained.embedding.weight.detach(), expected)


def test_the_optimiser_is_the_papers_unless_a_model_asks_for_the_authors_codes(planted_dataset):
    """J&W App. A.1: PyTorch's default Adam, weight decay on every parameter. ``amsgrad: true`` and
    ``attention_weight_decay: 0`` give J&W's and W&P's code's optimiser: AMSGrad, and no decay on the attention's
    parameters (additive and dot alike) while the embeddings, encoder and decoder keep theirs; each trains
    another model."""
    args = (str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy"))
    vocab = json.loads((planted_dataset / "dataset" / "vocab.json").read_text())
    matrix = torch.from_numpy(np.load(planted_dataset / "embeddings" / "matrix.npy"))
    code = {"amsgrad": True, "attention_weight_decay": 0.0}
    for attention in ("additive", "dot"):
        spec = full_spec({"encoder": "lstm", "attention": attention, "lstm_hidden": 8})
        model = build_model(spec, vocab, 2, matrix)
        (paper,) = adam(model, spec).param_groups
        assert not paper["amsgrad"] and paper["weight_decay"] == spec["weight_decay"] > 0
        assert len(paper["params"]) == len(list(model.parameters()))
        group_of = {id(p): group for group in adam(model, {**spec, **code}).param_groups for p in group["params"]}
        for name, parameter in model.named_parameters():
            group = group_of[id(parameter)]
            expected = 0.0 if name.startswith("attention.") else spec["weight_decay"]
            assert group["amsgrad"] and group["weight_decay"] == expected, name
        assert any(name.startswith("attention.") for name, _ in model.named_parameters())
    spec = {"encoder": "lstm", "attention": "additive", "epochs": 2, "lstm_hidden": 8}
    changes = [{}, *({key: value} for key, value in code.items())]  # the paper's, then each field alone
    histories = [train_model(*args, {**spec, **change}, progress=False)[1]["history"] for change in changes]
    assert histories[0] != histories[1] and histories[0] != histories[2]


def test_long_documents_are_batched_within_the_token_budget():
    """A batch holding a long document is cut into pieces of at most ``max_tokens`` padded tokens; batches of a
    corpus without long documents stay as they were."""
    from attnaudit.data import Encoded, iterate_batches

    lengths = [5] * 40 + [2000] + [7] * 20
    data = Encoded(
        [str(i) for i in range(len(lengths))],
        [np.ones(n, dtype=np.int64) for n in lengths],
        np.zeros(len(lengths), dtype=np.int64),
    )
    budgeted = list(iterate_batches(data, 32, shuffle=True, seed=1, max_tokens=1000))
    plain = list(iterate_batches(data, 32, shuffle=True, seed=1))
    assert sorted(np.concatenate([rows for rows, _ in budgeted]).tolist()) == list(range(len(lengths)))
    assert all(b.tokens.numel() <= 1000 or len(rows) == 1 for rows, b in budgeted)
    assert max(b.tokens.numel() for _, b in plain) > 2000 * 10
    unchanged = list(iterate_batches(data, 32, shuffle=True, seed=1, max_tokens=10**9))
    assert all(np.array_equal(a, b) for (a, _), (b, _) in zip(unchanged, plain))


@pytest.mark.parametrize("encoder", ["lstm", "mlp-guided"])
def test_a_last_epoch_model_read_off_a_best_epoch_run_is_the_model_trained_with_selection_last(
    planted_dataset, planted_model_dir, tmp_path, encoder
):
    """One run, two selection rules: the final epoch saved by a ``selection: best`` run, read off as the
    ``selection: last`` model, equals that model trained on its own (weights, predictions, metrics)."""
    dataset_dir, matrix = str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy")
    spec = {"encoder": "lstm", "attention": "additive", "epochs": 3, "lstm_hidden": 8, "lr": 0.01, "seed": 2}
    guide = None
    if encoder == "mlp-guided":  # the guide's attention travels with the saved epoch
        spec = {"encoder": "mlp", "attention": "guided", "epochs": 3, "lr": 0.01, "seed": 2}
        guide = str(planted_model_dir / "predictions.parquet")
    final_epoch = str(tmp_path / "final_epoch.pt")
    best = {**spec, "variant": "run-best", "selection": "best"}
    last = {**spec, "variant": "run-last", "selection": "last"}
    best_model, best_metrics, _ = train_model(
        dataset_dir, matrix, best, progress=False, guide_predictions=guide, final_epoch=final_epoch
    )
    trained, trained_metrics, trained_predictions = train_model(
        dataset_dir, matrix, last, progress=False, guide_predictions=guide
    )
    read, read_metrics, read_predictions = read_off_final_epoch(dataset_dir, final_epoch, last)

    for (name, a), b in zip(trained.state_dict().items(), read.state_dict().values(), strict=True):
        assert torch.equal(a, b), name
    pd.testing.assert_frame_equal(trained_predictions, read_predictions)
    for key in ("history", "selected_epoch", "dev", "test", "model"):
        assert trained_metrics[key] == read_metrics[key], key
    assert read_metrics["final_epoch_of"] == "run-best-s2" and read_metrics["selected_epoch"] == 2
    assert best_metrics["history"] == read_metrics["history"]
    # the run's best epoch is another one: the file holds the final epoch, not the selected model
    assert best_metrics["selected_epoch"] != 2
    assert not all(torch.equal(a, b) for a, b in zip(best_model.state_dict().values(), read.state_dict().values()))

    with pytest.raises(AttnauditError, match="differ in lr"):
        read_off_final_epoch(dataset_dir, final_epoch, {**last, "lr": 0.002})
    with pytest.raises(AttnauditError, match="selection 'best'"):
        read_off_final_epoch(dataset_dir, final_epoch, best)
    # a run saved before a training field existed (the optimiser's) trained with its default: still this model's
    payload = torch.load(final_epoch, weights_only=False)
    for field in ("amsgrad", "attention_weight_decay"):
        del payload["spec"][field]
    torch.save(payload, final_epoch)
    older = read_off_final_epoch(dataset_dir, final_epoch, last)[0]
    assert all(torch.equal(a, b) for a, b in zip(read.state_dict().values(), older.state_dict().values()))
    with pytest.raises(AttnauditError, match="differ in amsgrad"):
        read_off_final_epoch(dataset_dir, final_epoch, {**last, "amsgrad": True})


def test_a_run_stopped_early_is_not_read_off_as_a_last_epoch_model(planted_dataset, tmp_path):
    dataset_dir, matrix = str(planted_dataset / "dataset"), str(planted_dataset / "embeddings" / "matrix.npy")
    spec = {"encoder": "average", "epochs": 4, "seed": 0, "variant": "stopped"}
    final_epoch = str(tmp_path / "final_epoch.pt")
    # selected on a dev score that never improves (the number of dev instances): patience 1 stops after epoch 1
    metrics = train_model(
        dataset_dir, matrix, {**spec, "patience": 1, "selection_metric": "n"}, progress=False, final_epoch=final_epoch
    )[1]
    assert len(metrics["history"]) == 2
    with pytest.raises(AttnauditError, match="2 of 4 epochs"):
        read_off_final_epoch(dataset_dir, final_epoch, {**spec, "selection": "last"})


def test_the_workflow_trains_one_run_for_a_best_and_a_last_epoch_model(tmp_path):
    """Through Snakemake: the best-epoch model's job keeps its final epoch, the last-epoch model's job reads it off
    (no training: its log says so), and a second run has nothing to do."""
    config = tmp_path / "config.yaml"
    config.write_text(yaml.safe_dump(last_epoch_pair_config()))
    models = tmp_path / "results/models/planted"
    targets = [f"results/models/planted/average-additive-{v}-s0/metrics.json" for v in ("base", "last")]
    snakemake(tmp_path, "--cores", "2", *targets, config=config)
    best = json.loads((models / "average-additive-base-s0/metrics.json").read_text())
    last = json.loads((models / "average-additive-last-s0/metrics.json").read_text())
    assert last["history"] == best["history"] and last["selected_epoch"] == 2
    assert last["final_epoch_of"] == "average-additive-base-s0" and last["model"]["selection"] == "last"
    final = torch.load(models / "average-additive-base-s0/final_epoch.pt", weights_only=False)
    read = load_model(models / "average-additive-last-s0/model.pt")
    for name, value in read.state_dict().items():
        assert torch.equal(value, final["state_dict"][name]), name
    log = (tmp_path / "logs/read_off_final_epoch/planted/average-additive-last-s0.log").read_text()
    assert "epoch 0" not in log
    assert "Nothing to be done" in snakemake(tmp_path, "-n", *targets, config=config).stdout
