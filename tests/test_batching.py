"""The audits' batch plan: length-sorted batches bounded by instances and padded tokens, chunks balanced by tokens,
and results independent of both (the plan is global and computations are per instance)."""

import numpy as np
import pandas as pd
import pytest

from attnaudit.auditing import batch_plan, batch_tokens, chunk_of
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
def test_chunks_split_the_plan_and_balance_tokens(n_chunks):
    enc = encoded(LENGTHS)
    plan = batch_plan(enc, 64, 4096)
    weights = batch_tokens(enc, plan)
    chunks = [chunk_of(plan, c, n_chunks, weights) for c in range(n_chunks)]
    assert [b.tolist() for chunk in chunks for b in chunk] == [b.tolist() for b in plan]  # contiguous, in order
    loads = [int(batch_tokens(enc, chunk).sum()) if chunk else 0 for chunk in chunks]
    ideal = weights.sum() / n_chunks
    assert max(loads) <= ideal + weights.max()  # no chunk exceeds its share by more than one batch
    by_count = [chunk_of(plan, c, n_chunks) for c in range(n_chunks)]
    if n_chunks > 1:  # cutting by batch count would leave the longest texts to the last chunk
        assert max(loads) <= max(int(batch_tokens(enc, c).sum()) for c in by_count if c)


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
    assert len(pd.read_parquet(tmp_path / "2" / "attention-0.parquet")) == 0  # the chunk without a batch
    assert len(gathered[1][0]) == 120 and len(gathered[1][1]) == 120
    for one, two in zip(gathered[1], gathered[2], strict=True):
        pd.testing.assert_frame_equal(one, two)
