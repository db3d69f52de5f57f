"""``python -m attnaudit job-costs``: Snakemake benchmark files summed per rule, and per dataset × model."""

from __future__ import annotations

from attnaudit.job_costs import per_model, summarise

HEADER = "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"


def bench(root, path, seconds, cpu, rss=100.0):
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(HEADER + f"{seconds}\t0:00:01\t{rss}\t0\t0\t0\t0\t0\t0\t{cpu}\n")


def test_per_rule_and_per_model_sums(tmp_path):
    bench(tmp_path, "train/sst/lstm-s0.tsv", 10, 8, rss=900)
    bench(tmp_path, "importance/sst/lstm-s0/loo-0-of-2.tsv", 4, 3)
    bench(tmp_path, "importance/sst/lstm-s0/loo-1-of-2.tsv", 5, 4)
    bench(tmp_path, "importance/sst/cnn-s0/loo-0-of-1.tsv", 2, 1)
    bench(tmp_path, "tokenise/sst.tsv", 7, 6)  # not a model's job
    rules = summarise(tmp_path)
    assert rules.loc["importance", "jobs"] == 3 and rules.loc["importance", "cpu_seconds_sum"] == 8
    assert rules.loc["TOTAL", "cpu_seconds_sum"] == 22 and rules.loc["TOTAL", "peak_rss_mb"] == 900
    models = per_model(tmp_path)
    assert models.loc[("sst", "lstm-s0"), "importance"] == 7 and models.loc[("sst", "lstm-s0"), "train"] == 8
    assert models.loc[("sst", "lstm-s0"), "cpu_seconds_sum"] == 15 and models.loc[("sst", "cnn-s0"), "train"] == 0
    assert list(models.index.get_level_values("model")) == ["cnn-s0", "lstm-s0"]


def test_a_wrong_folder_or_an_unreadable_file_is_named(tmp_path):
    """A typo in the folder used to print 0 jobs; an empty or header-only file a pandas traceback."""
    import pytest

    from attnaudit import AttnauditError

    with pytest.raises(AttnauditError, match="benchmark: not a folder"):
        summarise(tmp_path / "benchmark")
    for broken in ("", HEADER):
        (tmp_path / "train").mkdir(exist_ok=True)
        (tmp_path / "train" / "x.tsv").write_text(broken)
        with pytest.raises(AttnauditError, match=r"x.tsv: not a Snakemake benchmark file with rows"):
            summarise(tmp_path)
