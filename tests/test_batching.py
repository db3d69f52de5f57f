"""The audits' batch plan: length-sorted batches bounded by instances and padded tokens, dealt out to chunks that
cost about the same, and results independent of both (the plan is global and computations are per instance)."""

import numpy as np
import pandas as pd
import pytest

from attnaudit import AttnauditError
from attnaudit.auditing import batch_plan, chunk_of
from attnaudit.data import Encoded
from attnaudit.importance._stage import score
from attnaudit.io import gather_chunks
from attnaudit.saliency import faithfulness


def encoded(lengths) -> Encoded:
    return Encoded(
        [f"x{i}" for i in range(len(lengths))],
        [np.ones(n, dtype=np.int64) for n in lengths],
        np.zeros(len(lengths), dtype=np.int64),
    )


def batch_widths(enc: Encoded, plan: list[np.ndarray]) -> np.ndarray:
    """The longest row of each batch (its padded width)."""
    lengths = np.array([len(s) for s in enc.sequences])
    return np.array([max(1, int(lengths[rows].max())) for rows in plan])


def batch_tokens(enc: Encoded, plan: list[np.ndarray]) -> np.ndarray:
    """Padded token positions of each batch (rows × longest row)."""
    return np.array([len(rows) for rows in plan]) * batch_widths(enc, plan)


LENGTHS = np.random.default_rng(0).integers(3, 400, size=500).tolist() + [20_000]


@pytest.mark.parametrize("max_tokens", [None, 4096, 800])
def test_plan_covers_every_instance_once_within_its_bounds(max_tokens):
    enc = encoded(LENGTHS)
    plan = batch_plan(enc, 64, max_tokens)
    rows = np.concatenate(plan)
    assert sorted(rows.tolist()) == list(range(len(LENGTHS)))
    lengths = np.array(LENGTHS)
    assert all(np.all(np.diff(lengths[batch]) >= 0) for batch in plan)  # sorted by length
    assert all(len(batch) <= 64 for batch in plan)
    if max_tokens:
        sizes = batch_tokens(enc, plan)
        assert all(size <= max_tokens or len(batch) == 1 for size, batch in zip(sizes, plan))
        assert plan[-1].tolist() == [len(LENGTHS) - 1]  # the 20,000-token document is a batch of its own


@pytest.mark.parametrize("n_chunks", [1, 2, 3, 8])
def test_chunks_partition_the_plan_and_cost_about_the_same_for_linear_and_quadratic_audits(n_chunks):
    """Every batch goes to exactly one chunk, in plan order within it, and no chunk exceeds its share by more than
    one batch, whether an audit's cost grows with the tokens (gradient) or with tokens × length (leave-one-out):
    runs of batches cut at equal token counts would leave the long documents, and a quadratic audit's slowest
    shard, to the last chunk."""
    enc = encoded(LENGTHS[:-1])  # the 20,000-token document would be a chunk's whole quadratic cost by itself
    plan = batch_plan(enc, 64, 4096)
    chunks = [chunk_of(plan, c, n_chunks) for c in range(n_chunks)]
    order = {id(batch): i for i, batch in enumerate(plan)}
    dealt = [[order[id(batch)] for batch in chunk] for chunk in chunks]
    assert sorted(i for chunk in dealt for i in chunk) == list(range(len(plan)))
    assert all(chunk == sorted(chunk) for chunk in dealt)
    tokens = batch_tokens(enc, plan)
    for cost in (tokens, tokens * batch_widths(enc, plan)):  # linear; quadratic in length
        loads = [sum(cost[i] for i in chunk) for chunk in dealt]
        assert max(loads) <= cost.sum() / n_chunks + cost.max()
    with pytest.raises(AttnauditError, match="outside 0..7"):
        chunk_of(plan, 8, 8)


def test_token_budget_per_device():
    import torch

    from attnaudit.auditing import token_budget

    budget = {"cpu": 4096, "cuda": 65536}
    assert token_budget(budget, torch.device("cpu")) == 4096
    assert token_budget(budget, torch.device("cuda")) == 65536  # a GPU takes much larger batches
    assert token_budget(1000, torch.device("cuda")) == 1000 and token_budget(None, torch.device("cpu")) is None


def test_a_chunk_without_batches_writes_an_empty_part_and_the_gather_is_unchanged(
    planted_dataset, planted_model_dir, tmp_path
):
    """A small test split can have fewer batches than the config's chunks (a user corpus of 60 documents: 12 test
    documents, one batch, two chunks): the empty chunk's job must write an empty part, not fail."""
    dataset, model = str(planted_dataset / "dataset"), str(planted_model_dir)
    fast = {"methods": ["attention"], "fractions": (0.1,), "variants": ("deletion",), "rankings": ("signed",)}
    gathered = {}
    for n_chunks in (1, 2):  # the 120 planted test documents are one batch of 256
        parts = [tmp_path / f"{n_chunks}" / f"attention-{c}.parquet" for c in range(n_chunks)]
        for c, part in enumerate(parts):
            score(dataset, model, part, "attention", {}, batch_size=256, chunk=c, n_chunks=n_chunks)
        attention = gather_chunks(parts, tmp_path / f"{n_chunks}" / "attention.parquet")
        parts = [tmp_path / f"{n_chunks}" / f"faithfulness-{c}.parquet" for c in range(n_chunks)]
        for c, part in enumerate(parts):
            scores = [str(tmp_path / f"{n_chunks}" / "attention.parquet")]
            faithfulness.run(dataset, model, scores, part, batch_size=256, chunk=c, n_chunks=n_chunks, **fast)
        faithful = gather_chunks(parts, tmp_path / f"{n_chunks}" / "faithfulness.parquet")
        gathered[n_chunks] = (attention.drop(columns="seconds"), faithful)
    sizes = sorted(len(pd.read_parquet(tmp_path / "2" / f"attention-{c}.parquet")) for c in (0, 1))
    assert sizes == [0, 120]  # one chunk holds the batch, the other none
    assert len(gathered[1][0]) == 120 and len(gathered[1][1]) == 120
    for one, two in zip(gathered[1], gathered[2], strict=True):
        pd.testing.assert_frame_equal(one, two)


def test_gathering_chunks_of_different_plans_fails_and_names_the_parts(planted_dataset, planted_model_dir, tmp_path):
    """Chunk parts written under different plans (a chunk job rerun after an upgrade or a config change, its
    siblings kept) overlap or leave instances out; the gather must refuse them rather than drop or duplicate
    instances. Parts of one plan gather to all 120 planted test instances."""
    dataset, model = str(planted_dataset / "dataset"), str(planted_model_dir)
    parts = {}
    for n_chunks in (2, 3):  # 120 test documents in batches of 16: eight batches dealt to the chunks
        parts[n_chunks] = [tmp_path / f"{n_chunks}" / f"attention-{c}.parquet" for c in range(n_chunks)]
        for c, part in enumerate(parts[n_chunks]):
            score(dataset, model, part, "attention", {}, batch_size=16, chunk=c, n_chunks=n_chunks)
    assert len(gather_chunks(parts[3], tmp_path / "whole.parquet")) == 120
    mixed = [parts[3][0], parts[2][1], parts[3][2]]
    with pytest.raises(AttnauditError, match=r"instance row \d+ is in both .*attention-\d\.parquet and"):
        gather_chunks(mixed, tmp_path / "mixed.parquet")
    with pytest.raises(AttnauditError, match=r"no chunk of .* holds instance row \d+"):
        gather_chunks(parts[3][:2], tmp_path / "missing.parquet")
    assert not (tmp_path / "mixed.parquet").exists() and not (tmp_path / "missing.parquet").exists()
