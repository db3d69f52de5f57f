"""The runtime settings of profiles/default, which Snakemake loads for every run from the repository."""

from __future__ import annotations

import copy

import yaml
from conftest import snakemake
from test_faults import user_config, write_corpus


def test_jobs_are_selected_once_per_finished_job_and_the_run_exits_at_once(tmp_path):
    """max-jobs-per-timespan: Snakemake's 1-second re-evaluation timers, one more chain per finished job, would
    re-run the job selection dozens of times while jobs wait for the one core; the profile's 10-minute span leaves
    one selection per finished job, and the Snakefile's hooks cancel the last timer (else the process would live on
    for 10 minutes after the run: the timeout below)."""
    corpus = write_corpus(tmp_path / "mine.csv", ["pos", "neg"] * 30)
    config = user_config(corpus)
    config["corpora"]["user"]["yours"] = copy.deepcopy(config["corpora"]["user"]["mine"])
    config["datasets"]["yours"] = copy.deepcopy(config["datasets"]["mine"]) | {"corpus": "yours"}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(config))
    targets = [f"results/embeddings/{name}/matrix.npy" for name in ("mine", "yours")]
    run = snakemake(tmp_path, "--cores", "1", "--verbose", *targets, config=tmp_path / "config.yaml", timeout=120)
    finished = run.stderr.count("Finished jobid")
    selections = run.stderr.count("Ready jobs:")
    assert finished == 6, run.stderr[-3000:]  # a corpora, a tokenise and an embeddings job per corpus
    assert 1 <= selections <= finished + 1, f"{selections} job selections for {finished} jobs"
