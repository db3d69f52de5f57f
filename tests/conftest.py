"""Shared fixtures: a small planted dataset taken through the real corpus → tokenise → embeddings stages, and one
local Snakemake run of tests/config.yaml for the whole session (the end-to-end tests and the Slurm comparison)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from forked_snakemake import run_snakemake
from opened_files import strace_prefix
from system_packages import unavailable

from attnaudit.data import collate
from attnaudit.models import AttentionClassifier, ModelConfig, activations

REPO = Path(__file__).resolve().parents[1]
#: every config file the project ships: the default study, the test pipeline's, the experiment files
SHIPPED_CONFIGS = sorted([REPO / "config.yaml", REPO / "tests" / "config.yaml", *(REPO / "configs").glob("*.yaml")])

# -- tiny models and batches (the one set every unit test uses) ---------------------------------------------------
ENCODERS = ("lstm", "cnn", "average")
VOCAB = 40  # ids 0..3 are <pad>, <unk>, <s>, </s> as in attnaudit.specials
MARKERS = [2, 3]


def tiny_model(
    encoder: str,
    attention: str = "additive",
    seed: int = 0,
    num_classes: int = 2,
    *,
    randomise: bool = True,
    zero_bias: bool = False,
    **fields,
) -> AttentionClassifier:
    """A small model of any variant in eval mode; ``fields`` override the small ModelConfig (lstm_layers,
    hidden_mode, sizes, ...). ``randomise`` redraws the embeddings from N(0, 1) and the biases from N(0, 0.3²)
    (or zeroes them), so that scores are not dominated by PyTorch's near-zero initialisation."""
    torch.manual_seed(seed)
    sizes = {
        "vocab_size": VOCAB,
        "embedding_dim": 8,
        "lstm_hidden": 5,
        "cnn_filters": 3,
        "cnn_kernels": (1, 3),
        "average_hidden": 7,
        "mlp_hidden": 6,
        "marker_ids": tuple(MARKERS),
    }
    cfg = ModelConfig(num_classes=num_classes, encoder=encoder, attention=attention, **{**sizes, **fields})
    model = AttentionClassifier(cfg)
    if randomise:
        with torch.no_grad():
            model.embedding.weight.normal_(0, 1.0)
            model.embedding.weight[cfg.pad_index].zero_()
            for name, param in model.named_parameters():
                if "bias" in name:
                    param.zero_() if zero_bias else param.normal_(0, 0.3)
    return model.eval()


def tiny_batch(lengths=(5, 9, 3, 7), seed: int = 0, markers: bool = True, guide: bool = False):
    """Sequences of the given lengths (markers included), right-padded, with ids (and a random guide
    distribution per instance, for guided-attention models)."""
    rng = np.random.default_rng(seed)
    sequences = []
    for length in lengths:
        body = rng.integers(4, VOCAB, size=length - 2 if markers else length)
        sequences.append(np.concatenate([[2], body, [3]]) if markers else body)
    labels = rng.integers(0, 2, size=len(lengths))
    guides = [rng.dirichlet(np.ones(len(s))).astype(np.float32) for s in sequences] if guide else None
    return collate(sequences, labels, [f"doc-{seed}-{i}" for i in range(len(lengths))], guides=guides)


#: The workflow's arguments to Snakemake, and its whole command line (for a process the test starts itself).
WORKFLOW = ["--snakefile", str(REPO / "Snakefile")]
SNAKEMAKE = [sys.executable, "-m", "snakemake", *WORKFLOW]


def mirror_dir() -> Path | None:
    """The local corpus mirror: env ATTNAUDIT_MIRROR, else ../shared/corpora beside the checkout."""
    candidates = [os.environ.get("ATTNAUDIT_MIRROR"), REPO.parent / "shared" / "corpora"]
    for candidate in candidates:
        if candidate and Path(candidate).is_dir():
            return Path(candidate).resolve()
    return None


def required_mirror() -> Path:
    """The mirror for an end-to-end run; without one, the run's tests skip, except under CI, which places it
    beside the checkout: there a missing mirror is a failure, never a silent skip."""
    mirror = mirror_dir()
    if mirror is None:
        unavailable("no corpus mirror (set ATTNAUDIT_MIRROR or place shared/corpora beside the checkout)")
    return mirror


#: Session fixtures that must exist once: the local pipeline run (~12 min) and the Slurm cluster (one slurmctld).
#: Every test using one goes to the same xdist worker (``pytest -n 2``, ``--dist loadgroup`` in pyproject.toml),
#: which pytest-xdist starts first (the largest group first); the other worker starts with the four-class run
#: (test_multiclass.py), and both then take the unit tests one at a time.
ONE_WORKER_FIXTURES = {"local_pipeline", "slurm_cluster"}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the xdist_group marks
def pytest_collection_modifyitems(items):
    """Unit tests first, end-to-end and Slurm tests last: under plain ``pytest`` a broken unit fails fast (with
    ``-n``, pytest-xdist starts the groups first). Tests that use a one-per-session fixture share one xdist group."""
    for item in items:
        if ONE_WORKER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.xdist_group("session-pipelines"))
    slow = {"e2e", "slurm"}
    items.sort(key=lambda item: any(item.get_closest_marker(m) for m in slow))


@pytest.fixture(scope="session", autouse=True)
def _single_thread():
    torch.set_num_threads(1)


@pytest.fixture(params=activations.ROUTES)
def tanh_route(request, monkeypatch):
    """Run a test under each tanh route of the hand-written recurrences (the ``ATTNAUDIT_TANH`` override, with the
    per-process choice forgotten before and after): both must give the same numbers on any CPU."""
    monkeypatch.setenv(activations.OVERRIDE, request.param)
    activations.tanh_route.cache_clear()
    yield request.param
    activations.tanh_route.cache_clear()


@pytest.fixture(scope="session")
def planted_dataset(tmp_path_factory) -> Path:
    """results/datasets/planted + embeddings for ~600 planted documents (built with the real stages)."""
    from attnaudit import corpora, embeddings, tokenise

    root = tmp_path_factory.mktemp("planted")
    documents = root / "corpora" / "documents.parquet"
    corpora.run(
        "planted",
        out=documents,
        manifest=root / "corpora" / "manifest.json",
        raw_dir=root / "raw",
        options={"n_examples": 600},
        seed=0,
    )
    tokenise.run(str(documents), str(root / "dataset"), {"min_count": 1}, seed=0)
    embeddings.run(str(root / "dataset"), str(root / "embeddings"), {"dim": 16, "epochs": 2}, seed=0)
    return root


@pytest.fixture(scope="session")
def planted_model_dir(planted_dataset) -> Path:
    """A trained average-encoder model on the planted dataset (a few seconds)."""
    from attnaudit import train

    out = planted_dataset / "models" / "average-additive-base-s0"
    train.run(
        str(planted_dataset / "dataset"),
        str(planted_dataset / "embeddings" / "matrix.npy"),
        str(out),
        {"encoder": "average", "attention": "additive", "epochs": 6},
        threads=1,
    )
    return out


def last_epoch_pair_config() -> dict:
    """A small planted experiment whose average-encoder model has a ``selection: last`` twin: one training run,
    two models (rules/train.smk)."""
    return {
        "datasets": {
            "planted": {
                "corpus": "planted",
                "embeddings": {"dim": 16, "epochs": 2},
                "grid": {"encoders": ["average"], "attentions": ["additive"]},
                "models": {"average-additive-last": {"encoder": "average", "selection": "last"}},
                "train": {"epochs": 3},
            }
        },
        "corpora": {"options": {"planted": {"n_examples": 400}}},
    }


def snakemake(
    workdir: Path,
    *args: str,
    config: Path,
    check: bool = True,
    timeout: int = 1800,
    env: dict | None = None,
    prefix: list[str] | None = None,
):
    """``snakemake --directory workdir --configfile config --replace-workflow-config *args`` with the mirror, in
    this process's environment or ``env``, after ``prefix`` (e.g. strace); without a prefix, forked from a process
    that has imported Snakemake (tests/forked_snakemake.py)."""
    arguments = [*WORKFLOW, "--directory", str(workdir), "--configfile", str(config), "--replace-workflow-config"]
    arguments += args
    env = {**(os.environ if env is None else env)}
    if mirror_dir() is not None:
        env["ATTNAUDIT_MIRROR"] = str(mirror_dir())
    if prefix:
        command = [*prefix, sys.executable, "-m", "snakemake", *arguments]
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=env)
    else:
        proc = run_snakemake(arguments, env=env, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(arguments)} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


@pytest.fixture(scope="session")
def local_pipeline(tmp_path_factory) -> Path:
    """The working directory of ``snakemake --profile profiles/gpu --resources gpu=2 --cores 2`` on
    tests/config.yaml, run once.

    ``--resources gpu=2``, as the profile documents for two jobs per GPU: on this CPU-only
    machine the code falls back to the CPU, and the profile's own gpu=1 would run the 112 train, importance and
    adversarial jobs one at a time on one of the two cores. Tests must not change this directory; copy it first
    (see test_pipeline.py).
    """
    required_mirror()
    workdir = tmp_path_factory.mktemp("local-pipeline")
    (workdir / "log.txt").write_text(
        snakemake(
            workdir,
            *("--profile", str(REPO / "profiles" / "gpu"), "--resources", "gpu=2", "--cores", "2"),
            config=REPO / "tests" / "config.yaml",
            prefix=strace_prefix(pipeline_trace(workdir)),  # which files each job opens: test_pipeline.py
        ).stderr
    )
    return workdir


def pipeline_trace(workdir: Path) -> Path:
    """Where the local pipeline's strace goes: beside its directory, which stays the run's alone."""
    return workdir.parent / "strace.txt"
