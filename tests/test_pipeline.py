"""End-to-end: snakemake with profiles/gpu on tests/config.yaml (a real SST slice via the mirror + planted; the
session's shared run, see conftest.local_pipeline), then a no-op rerun, a one-variant change that reruns only its
branch, the report (``snakemake --report``), and lint."""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from conftest import REPO, mirror_dir, pipeline_trace, snakemake
from opened_files import Trace, job_reads, skip_without_strace, undeclared_reads
from synthetic_results import read_js

from attnaudit.job_costs import collect, read_dag, read_summary
from attnaudit.modelsheet import sheet
from attnaudit.process_usage import read_usage

pytestmark = pytest.mark.e2e


def jobs_of(dry_run_output: str) -> list[tuple[str, dict]]:
    """(rule, wildcards) of every job a dry run would execute."""
    jobs, rule = [], None
    for line in dry_run_output.splitlines():
        if m := re.match(r"^(?:local)?rule (\w+):", line.strip()):
            rule = m.group(1)
            jobs.append((rule, {}))
        elif rule and (m := re.match(r"^wildcards: (.*)$", line.strip())):
            jobs[-1][1].update(dict(kv.split("=", 1) for kv in m.group(1).split(", ")))
    return jobs


@pytest.fixture(scope="module")
def pipeline_run(local_pipeline):
    return local_pipeline, REPO / "tests" / "config.yaml"


def test_pipeline_outputs(pipeline_run):
    workdir, config = pipeline_run
    cfg = yaml.safe_load(config.read_text())
    for dataset, entry in cfg["datasets"].items():
        stats = json.loads((workdir / f"results/datasets/{dataset}/stats.json").read_text())
        assert set(stats["counts"]) == {"train", "dev", "test"}
        for model in sheet(dataset, entry):  # every model of the sheet was trained, logged and benchmarked
            model_dir = workdir / f"results/models/{dataset}/{model}"
            metrics = json.loads((model_dir / "metrics.json").read_text())
            assert {"dev", "test", "provenance"} <= set(metrics)
            # run with profiles/gpu: on a machine without CUDA the gpu=1 jobs fall back to the CPU
            assert metrics["provenance"]["device"] == ("cuda" if torch.cuda.is_available() else "cpu")
            assert (model_dir / "model.pt").exists() and (model_dir / "predictions.parquet").exists()
            assert (workdir / f"logs/train/{dataset}/{model}.log").exists()
            assert (workdir / f"benchmarks/train/{dataset}/{model}.tsv").exists()
    planted = json.loads((workdir / "results/models/planted/cnn-additive-base-s0/metrics.json").read_text())
    assert planted["test"]["accuracy"] > 0.9  # the planted markers decide the label
    sst = json.loads((workdir / "results/models/sst_small/lstm-additive-base-s0/metrics.json").read_text())
    assert sst["test"]["accuracy"] > 0.6  # a real (small) SST model, clearly above chance


def test_rerun_is_a_noop(pipeline_run):
    workdir, config = pipeline_run
    out = snakemake(workdir, "-n", config=config).stdout
    assert "Nothing to be done" in out, out[-2000:]


def test_every_job_has_a_benchmark_file_beside_its_log(pipeline_run):
    """``job-costs --dag … --slots N`` finds a job's benchmark file from its log (logs/{rule}/….log →
    benchmarks/{rule}/….tsv): every job of the run has one, and every benchmark file is one job's."""
    workdir, config = pipeline_run
    summary = snakemake(workdir, "--detailed-summary", config=config).stdout
    benchmarks = str(workdir / "benchmarks")
    dag = read_dag(io.StringIO(summary), benchmarks)
    assert sorted(job.benchmark for job in dag.values()) == sorted(collect(benchmarks)["job"])
    cli = [sys.executable, "-m", "attnaudit", "job-costs", benchmarks, "--dag", "-", "--slots", "1", "2"]
    printed = subprocess.run(cli, input=summary, capture_output=True, text=True, check=True).stdout
    assert re.search(r"^1 +[\d.]+ +[\d.]+ +[\d.]+$", printed, re.M) and "critical path: corpora: logs/" in printed


def test_every_job_logs_what_its_process_used(pipeline_run):
    """Every job's log ends with what its process used (``attnaudit.process_usage``), which ``job-costs`` reads in
    place of Snakemake's samples; a sample of the same job (its shell and process) never counts more CPU than the
    process did, and the process never lived longer than the job."""
    workdir, _ = pipeline_run
    jobs = collect(workdir / "benchmarks")
    assert not jobs["sampled"].any(), f"logs without a usage line: {jobs.loc[jobs['sampled'], 'job'].tolist()}"
    samples = collect(workdir / "benchmarks", logs=workdir / "no-logs").set_index("job")  # the benchmark files alone
    for job in jobs.itertuples():
        sampled = samples.loc[job.job]
        usage = read_usage((workdir / "logs" / job.job).with_suffix(".log"))
        assert usage["cpu_seconds"] == job.cpu_seconds and usage["peak_rss_mb"] == job.max_rss_mb
        if not np.isnan(sampled["cpu_seconds"]):  # "-": too short to sample
            assert sampled["cpu_seconds"] <= usage["cpu_seconds"] + 0.1, (job.job, sampled["cpu_seconds"], usage)
        assert usage["wall_seconds"] <= job.seconds + 0.05, (job.job, job.seconds, usage)


def test_writing_out_a_default_reruns_nothing(pipeline_run, tmp_path):
    """A config that writes out what was the default (a training field's default value, a sheet field that restates
    it, a model field no model of that encoder reads, a tokeniser, embeddings or importance option's default) plans
    nothing on the finished run: only what a model trains with is its job's parameter."""
    workdir, config = pipeline_run
    cfg = yaml.safe_load(config.read_text())
    cfg.setdefault("train", {}).update(
        {"dropout": 0.0, "clip": None, "patience": None, "max_batch_tokens": 16384, "amsgrad": False}
    )
    cfg["train"]["attention_weight_decay"] = None
    planted = cfg["datasets"]["planted"]
    planted.setdefault("train", {}).update({"lstm_layers": 1, "cnn_kernels": [1, 3, 5, 7], "freeze_embeddings": False})
    planted.setdefault("train_per_encoder", {}).update({"average": {"average_hidden": 256, "eval_batch_size": 256}})
    for dataset in cfg["datasets"].values():  # tokeniser, embeddings and importance options left out
        dataset.setdefault("tokenise", {}).update(
            {"lowercase": True, "markers": True, "min_tokens": 0, "language": "en", "segmenter": "char"}
        )
        dataset.setdefault("embeddings", {}).update({"window": 5, "min_count": 1, "pretrained": None, "binary": None})
    cfg.setdefault("importance", {}).setdefault("integrated_gradients", {})["max_elements"] = 2**25
    restated = tmp_path / "restated.yaml"
    restated.write_text(yaml.safe_dump(cfg, sort_keys=False))  # the sheet's order is the tables' row order
    out = snakemake(workdir, "-n", config=restated).stdout
    assert "Nothing to be done" in out, out[-3000:]
    planted["train"]["dropout"] = 0.1  # a value that is not the default is a parameter: the controls
    planted["tokenise"]["lowercase"] = False
    cfg["importance"]["integrated_gradients"]["n_steps"] = 6
    restated.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = snakemake(workdir, "-n", config=restated).stdout
    assert "rule train:" in out and "rule tokenise:" in out and "rule importance:" in out, out[-3000:]


def test_where_corpora_lie_and_the_methods_memory_options_rerun_nothing(pipeline_run, tmp_path):
    """Settings that change no result are resources, not parameters: another raw-file folder or mirror (files are
    checked against their sha256 either way) and an importance method's ``memory_options`` (LOO's re-encoding
    budget, IG's rows per pass, occlusion's floats per pass) plan nothing on the finished run, and the jobs that
    would run read the new values; a method option that is not a memory option reruns that method."""
    workdir, config = pipeline_run
    cfg = yaml.safe_load(config.read_text())
    cfg["corpora"].update({"raw_dir": str(tmp_path / "raw files"), "mirror": str(mirror_dir())})
    methods = cfg.setdefault("importance", {})
    methods.setdefault("loo", {})["max_tokens"] = {"cpu": 64, "cuda": 1024}
    methods["integrated_gradients"].update({"internal_batch_size": 16, "max_elements": 4096})
    methods.setdefault("occlusion", {})["max_elements"] = 4096
    moved = tmp_path / "moved.yaml"
    moved.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = snakemake(workdir, "-n", config=moved).stdout
    assert "Nothing to be done" in out, out[-3000:]
    commands = []  # what the corpus and importance jobs would run, each rule forced alone
    for rule in ("corpora", "importance"):
        printed = snakemake(workdir, "-n", "-p", "--forcerun", rule, "--until", rule, config=moved).stdout
        commands += [line for line in printed.splitlines() if "python -m attnaudit" in line]
    corpora = [c for c in commands if "attnaudit corpora" in c]
    loo = [c for c in commands if "--method loo" in c]
    assert corpora and all(f"--raw-dir '{tmp_path}/raw files/" in c for c in corpora), corpora
    assert all(f"--mirror={shlex.quote(str(mirror_dir()))}" in c for c in corpora), corpora
    assert loo and all('"max_tokens": {"cpu": 64, "cuda": 1024}' in c for c in loo), loo
    methods["loo"]["tolerance"] = 0.0  # what LOO computes: a parameter
    moved.write_text(yaml.safe_dump(cfg, sort_keys=False))
    rules = {(rule, w.get("method")) for rule, w in jobs_of(snakemake(workdir, "-n", config=moved).stdout)}
    assert ("importance", "loo") in rules and not {r for r in rules if r[0] == "importance" and r[1] != "loo"}, rules


def test_a_card_threshold_reruns_only_the_summaries_that_read_it(pipeline_run, tmp_path):
    """Each stage's card summary has as parameters only the ``cards.*`` options it reads: T&Š's fragility threshold
    plans T&Š's summaries (and the cards they feed), the bootstrap's resamples J&W's, and no other stage's; T&Š's
    table F1 is the F1 of its card's fragility check too."""
    workdir, config = pipeline_run
    summaries = {"jw_card_summary", "saliency_card_summary", "wp_card_summary", "ts_card_summary"}
    changes = (
        (("cards", "fragility_points"), 2.5, "ts_card_summary"),
        (("cards", "bootstrap_samples"), 123, "jw_card_summary"),
        (("tutek_snajder", "tables", "f1"), "macro", "ts_card_summary"),
    )
    for (*block, option), value, reread in changes:
        cfg = yaml.safe_load(config.read_text())
        entry = cfg
        for key in block:
            entry = entry.setdefault(key, {})
        entry[option] = value
        changed = tmp_path / f"{option}.yaml"
        changed.write_text(yaml.safe_dump(cfg, sort_keys=False))
        rules = {rule for rule, _ in jobs_of(snakemake(workdir, "-n", config=changed).stdout)}
        assert rules & summaries == {reread}, (option, rules)
        assert "card" in rules and not {"train", "tokenise"} & rules, (option, rules)


def test_one_variant_change_reruns_only_its_branch(pipeline_run, tmp_path):
    shared, config = pipeline_run
    workdir = tmp_path / "copy"  # the session's run stays as it is for the Slurm comparison
    shutil.copytree(shared, workdir, symlinks=True)  # copy2: modification times are kept
    cfg = yaml.safe_load(config.read_text())
    cfg["datasets"]["planted"]["train_per_encoder"] = {"cnn": {"epochs": 2}}
    changed = tmp_path / "changed.yaml"
    changed.write_text(yaml.safe_dump(cfg))
    jobs = jobs_of(snakemake(workdir, "-n", config=changed).stdout)
    rules = [rule for rule, _ in jobs]
    assert rules.count("train") == 1, jobs
    assert not {"corpora", "tokenise", "embeddings"} & set(rules), jobs
    for rule, wildcards in jobs:
        if "model" in wildcards:
            assert (wildcards["dataset"], wildcards["model"]) == ("planted", "cnn-additive-base-s0"), (rule, wildcards)
    untouched = workdir / "results/models/planted/average-additive-base-s0/model.pt"
    before = untouched.stat().st_mtime_ns
    snakemake(workdir, "--cores", "2", config=changed)
    assert untouched.stat().st_mtime_ns == before
    metrics = json.loads((workdir / "results/models/planted/cnn-additive-base-s0/metrics.json").read_text())
    assert len(metrics["history"]) == 2
    assert "Nothing to be done" in snakemake(workdir, "-n", config=changed).stdout


def test_every_card_says_what_its_model_is_for(pipeline_run):
    """An adversary's card carries its own W&P §4 numbers; a card names why each audit leaves its model out and, for
    the W&P roles summarised elsewhere, where to look."""
    workdir, _ = pipeline_run

    def card(dataset, model):
        return json.loads((workdir / f"results/cards/{dataset}/{model}.json").read_text())

    for dataset, model, teacher in (
        ("planted", "average-adv1-s0", "average-additive-base-s0"),  # a W&P adversary
        ("sst_small", "lstm25-adv1-mlm1-s0", "lstm25-additive-mlm1-s0"),  # a T&Š adversary (§4.3)
    ):
        adversary = card(dataset, model)
        imitation = json.loads((workdir / f"results/audits/{dataset}/{model}/wp_imitation.json").read_text())
        [section] = adversary["sections"]
        assert teacher in section["title"] and imitation["teacher"] == teacher
        numbers = {n["key"]: n["value"] for n in section["numbers"]}
        assert numbers["adversary_jsd_mean"] == pytest.approx(imitation["jsd_mean"])
        assert numbers["adversary_tvd_mean"] == pytest.approx(imitation["tvd_mean"])
        gap = 100 * (imitation["student_macro_f1"] - imitation["teacher_macro_f1"])
        assert numbers["adversary_delta_f1"] == pytest.approx(gap)
        assert f"imitating {teacher}" in adversary["not_run"]["Jain & Wallace (2019)"]
    assert "fig1_adversary.png" in card("sst_small", "lstm25-adv1-mlm1-s0")["not_run"]["Tutek & Šnajder (2020)"]

    base = "average-additive-base-s0's card"
    assert base in card("planted", "average-additive-base-s1")["not_run"]["Wiegreffe & Pinter (2019)"]
    uniform = card("planted", "average-uniform-s0")["not_run"]
    assert base in uniform["Wiegreffe & Pinter (2019)"] and "uniform" in uniform["Jain & Wallace (2019)"]
    guided = card("planted", "mlp-guided-base-s0")["not_run"]
    assert "diagnostic_mlp.md" in guided["Wiegreffe & Pinter (2019)"]
    assert "average-additive-base-s0's" in guided["Jain & Wallace (2019)"]
    sst = card("sst_small", "lstm-additive-base-s0")["not_run"]
    assert sst["Wiegreffe & Pinter (2019)"] == "wiegreffe_pinter.datasets leaves out sst_small"
    assert "tutek_snajder.models (lstm25-*) does not match lstm-additive-base" in sst["Tutek & Šnajder (2020)"]


def test_every_file_a_job_is_told_to_read_is_a_declared_input(pipeline_run):
    """A path a job's command names (also inside its JSON parameters, e.g. a table's ``--runs``) is an input,
    output or log of that job: a file read but not declared would be missing from the DAG, so the job could run
    before the file is written and would not rerun when it changes."""
    workdir, config = pipeline_run
    jobs = read_summary(io.StringIO(snakemake(workdir, "--detailed-summary", config=config).stdout)).values()

    def named_paths(command):
        words = shlex.split(command)
        if "--not-run" in words:  # a card's reasons name tables and figures to look at, not files it reads
            del words[words.index("--not-run") : words.index("--not-run") + 2]
        return re.findall(r"results/[^\s\"'{},:]+\.[a-z]+\b", " ".join(words))

    undeclared = {
        (job.rule, path)
        for job in jobs
        for path in named_paths(job.command)
        if path not in {*job.inputs, *job.outputs, *job.logs}
    }
    assert len(jobs) > 300 and not undeclared, sorted(undeclared)[:20]


@pytest.fixture(scope="module")
def traced_jobs(pipeline_run):
    """Each attnaudit job of the run with the files its process opened for reading (the run's strace)."""
    workdir, config = pipeline_run
    trace = pipeline_trace(workdir)
    if not trace.exists():
        skip_without_strace()
    jobs = read_summary(io.StringIO(snakemake(workdir, "--detailed-summary", config=config).stdout))
    return job_reads(trace, workdir, list(jobs.values()))


def test_every_file_a_job_opens_is_a_declared_input(pipeline_run, traced_jobs):
    """What each job of the run opened for reading (strace), against its declared inputs: none missing."""
    undeclared = undeclared_reads(traced_jobs, pipeline_run[0])
    assert len(traced_jobs) > 300 and not undeclared, sorted(undeclared)[:20]


#: rules whose jobs read scores, tables or predictions but no model: importing PyTorch (1.5–2 CPU s, about as
#: long as such a job's own work) is not theirs to pay
WITHOUT_PYTORCH = {
    "corpora",
    "importance_gather",
    "jw_gather",
    "jw_correlation",
    "jw_heatmaps",
    "jw_tables",
    "jw_figures",
    "jw_card_summary",
    "saliency_gather",
    "saliency_figures",
    "wp_uniform",
    "wp_diagnostic",
    "wp_seed_variance",
    "wp_seed_table",
    "wp_seed_figures",
    "wp_imitation",
    "wp_adversary",
    "wp_card_summary",
    "ts_summary",
    "ts_tables",
    "ts_figures",
    "ts_card_summary",
    "tables_jain_wallace",
    "tables_bastings_filippova",
    "tables_wiegreffe_pinter",
    "tables_tutek_snajder",
    "card",
    "explorer",
}


def test_jobs_that_read_no_model_do_not_import_pytorch(traced_jobs):
    ran = {job.rule for job, _ in traced_jobs}
    assert ran >= WITHOUT_PYTORCH, sorted(WITHOUT_PYTORCH - ran)  # each rule has jobs to check
    importing = {job.rule for job, reads in traced_jobs if any("/site-packages/torch/" in f for f in reads)}
    assert not importing & WITHOUT_PYTORCH, sorted(importing & WITHOUT_PYTORCH)


def test_a_process_id_used_again_is_another_process_of_the_trace(tmp_path):
    """A run starts more processes and threads than there are ids (32,768), so an id comes back: what the first
    process with an id wrote is not the second's (else one job seems to write another's files). A thread is folded
    into its process even when its first line comes before the clone that made it."""
    trace = tmp_path / "strace.txt"
    trace.write_text(
        "10  clone(child_stack=NULL, flags=SIGCHLD) = 11\n"
        '11  openat(AT_FDCWD, "a.log", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3\n'
        '11  execve("/bin/python", ["python", "-m", "attnaudit", "a"], 0x1 /* 1 vars */) = 0\n'
        '12  openat(AT_FDCWD, "in.txt", O_RDONLY) = 4\n'
        "11  clone3({flags=CLONE_VM|CLONE_THREAD, child_tid=0x1}, 88) = 12\n"
        "12  +++ exited with 0 +++\n"
        "11  +++ exited with 0 +++\n"
        "10  clone(child_stack=NULL, flags=SIGCHLD) = 11\n"
        '11  openat(AT_FDCWD, "b.log", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 3\n'
        '11  execve("/bin/python", ["python", "-m", "attnaudit", "b"], 0x1 /* 1 vars */) = 0\n'
    )
    parsed = Trace(trace)
    by_job = {argv[-1]: process for process, argv in parsed.argv.items()}
    assert {job: parsed.writes[process] for job, process in by_job.items()} == {"a": {"a.log"}, "b": {"b.log"}}
    assert parsed.reads[by_job["a"]] == {"in.txt"} and not parsed.reads[by_job["b"]]
    assert parsed.parent[by_job["a"]] == parsed.parent[by_job["b"]]


def test_every_paper_has_its_tables_and_figures(pipeline_run):
    workdir, _ = pipeline_run
    tables = workdir / "results" / "tables"
    for paper, names in {
        "jain_wallace": ["correlation.csv", "table2.md", "seeds.md"],
        "bastings_filippova": ["agreement.csv", "faithfulness.csv", "planted.csv"],
        "wiegreffe_pinter": ["table2_uniform.md", "seed_variance.md", "diagnostic_mlp.md", "adversary.csv"],
        "tutek_snajder": [
            "table1_fragility.md",
            "table2_mutual_information.md",
            "table3_token_probability.md",
            "table6_layers.md",
            "directions.md",
            "summary.md",
        ],
    }.items():
        for name in names:
            assert (tables / paper / name).stat().st_size > 0, (paper, name)
    uniform = pd.read_csv(tables / "wiegreffe_pinter" / "table2_uniform.csv")
    assert uniform["dataset"].tolist() == ["planted"] and uniform["n_base_seeds"].item() == 3
    fragility = pd.read_csv(tables / "tutek_snajder" / "table1_fragility.csv")
    assert {"base", "tying", "mlm"} <= set(fragility["regulariser"])
    figures = workdir / "results" / "figures"
    for figure in (
        "wiegreffe_pinter/planted/fig3_seed_variance.png",
        "tutek_snajder/sst_small/fig1_adversary.png",
        "tutek_snajder/sst_small/fig2_token_probability.png",
    ):
        assert (figures / figure).stat().st_size > 1000, figure
    # a guided model audits with its teacher's attention, rebuilt from model.pt alone
    guided = pd.read_parquet(workdir / "results/models/planted/mlp-guided-base-s0/predictions.parquet")
    teacher = pd.read_parquet(workdir / "results/models/planted/average-additive-base-s0/predictions.parquet")
    np.testing.assert_allclose(
        np.concatenate(guided["attention"].to_list()), np.concatenate(teacher["attention"].to_list()), atol=1e-6
    )


def report_entries(report_zip: Path) -> tuple[dict, set[str]]:
    """The results ``snakemake --report x.zip`` lists in its page (path → name, caption, data file), and the zip's
    members."""
    with zipfile.ZipFile(report_zip) as bundle:
        members = set(bundle.namelist())
        page = bundle.read("report/report.html").decode()
    listed = re.search(r'<script id="results">\s*var results = (\{.*?\});?\s*</script>', page, re.DOTALL)
    assert listed, "the report page lists no results"
    return json.loads(listed.group(1)), members


def test_the_report_bundles_every_table_figure_and_card_with_its_caption(pipeline_run, tmp_path):
    """``snakemake --report report.zip`` after the run: every combined table, every figure, each model's card page
    and the explorer are in it, each with a caption, its file and (the explorer) every file it loads."""
    workdir, config = pipeline_run
    report_zip = tmp_path / "report.zip"
    snakemake(workdir, "--report", str(report_zip), config=config)
    entries, members = report_entries(report_zip)
    results = workdir / "results"
    written = {
        *(p for p in (results / "tables").glob("*/*") if p.is_file()),
        *(p for p in (results / "figures").rglob("*") if p.is_file()),
        *(results / "cards").rglob("*.html"),
        results / "explorer" / "index.html",
    }
    assert set(entries) == {str(p.relative_to(workdir)) for p in written}
    for path, entry in entries.items():
        assert re.sub(r"<[^>]+>", "", entry["caption"]).strip(), f"{path} has no caption"
        assert f"report/{entry['data_uri']}" in members, f"{path}: its file is not in the zip"
    site = results / "explorer"
    bundled = Path("report") / Path(entries["results/explorer/index.html"]["data_uri"]).parent
    pages = [p for p in site.rglob("*") if p.is_file() and p.name != ".snakemake_timestamp"]  # Snakemake's own
    loaded = {str(bundled / p.relative_to(site)) for p in pages}
    assert loaded <= members, sorted(loaded - members)[:5]


def test_a_run_that_stopped_part_way_still_gets_an_explorer(pipeline_run, tmp_path):
    """One model's adversarial audit failed (its audit, summary and card never written; the run went on with
    ``--keep-going``): ``explorer_partial`` builds nothing that is missing, lists every model, and gives that model a
    card from the summaries it has, naming the missing audit (the full ``explorer`` would wait for it)."""
    shared, config = pipeline_run
    workdir = tmp_path / "copy"
    shutil.copytree(shared, workdir, symlinks=True)
    dataset, model = "sst_small", "lstm-additive-base-s0"
    lost = [
        workdir / f"results/audits/{dataset}/{model}/jw_adversarial.parquet",
        workdir / f"results/summaries/jain_wallace/{dataset}/{model}.json",
        *(workdir / f"results/cards/{dataset}/{model}.{ext}" for ext in ("json", "html", "md")),
    ]
    for path in lost:
        path.unlink()
    assert {rule for rule, _ in jobs_of(snakemake(workdir, "-n", "explorer_partial", config=config).stdout)} == {
        "explorer_partial"
    }
    snakemake(workdir, "--cores", "2", "explorer_partial", config=config)
    assert not any(path.exists() for path in lost)
    site = workdir / "results/explorer-partial"
    index = read_js(site / "data/index.js")
    cfg = yaml.safe_load(config.read_text())
    expected = {(d, m) for d, entry in cfg["datasets"].items() for m in sheet(d, entry)}
    assert {(e["dataset"], e["model"]) for e in index["models"]} == expected
    entry = next(e for e in index["models"] if (e["dataset"], e["model"]) == (dataset, model))
    assert any("jw_adversarial.parquet" in m for m in entry["missing"]) and any(
        "audit card" in m for m in entry["missing"]
    )
    assert entry["n_instances"] > 0 and entry["card"]["missing"] == [
        f"jain_wallace (no summary file results/summaries/jain_wallace/{dataset}/{model}.json)"
    ]
    assert [s["stage"] for s in entry["card"]["sections"]] == ["saliency"]  # B&F's summary was written
    assert "Missing audits" in (site / f"cards/{dataset}/{model}.html").read_text(encoding="utf-8")
    others = [e for e in index["models"] if (e["dataset"], e["model"]) != (dataset, model)]
    assert all(e["card"] and not any("audit card" in m for m in e.get("missing", [])) for e in others)


def test_a_second_experiment_keeps_the_first_ones_tables(pipeline_run, tmp_path):
    """Tables are kept per dataset: a run of another experiment (here only the planted corpus) in the same
    directory rebuilds the combined tables over its datasets and leaves the other datasets' tables as they were;
    classes are named by the corpus's label names."""
    shared, config = pipeline_run
    workdir = tmp_path / "copy"
    shutil.copytree(shared, workdir, symlinks=True)
    kept = workdir / "results/tables/jain_wallace/sst_small/correlation.csv"
    before = kept.read_bytes()
    cfg = yaml.safe_load(config.read_text())
    cfg["datasets"] = {"planted": cfg["datasets"]["planted"]}
    cfg["tutek_snajder"]["datasets"] = []
    second = tmp_path / "second.yaml"
    second.write_text(yaml.safe_dump(cfg))
    rules = {rule for rule, _ in jobs_of(snakemake(workdir, "-n", config=second).stdout)}
    assert not rules & {"train", "importance", "jw_tables", "jw_permutation", "jw_adversarial"}, rules
    snakemake(workdir, "--cores", "2", config=second)
    assert kept.read_bytes() == before
    combined = pd.read_csv(workdir / "results/tables/jain_wallace/correlation.csv")
    assert set(combined["dataset"]) == {"planted"}
    names = json.loads((workdir / "results/corpora/planted/manifest.json").read_text())["label_names"]
    assert len(combined) and set(combined["label"]) <= set(names)
    both = pd.read_csv(shared / "results/tables/jain_wallace/correlation.csv")
    assert set(both["dataset"]) == {"planted", "sst_small"}
    heatmap = (shared / "results/figures/jain_wallace/sst_small/heatmaps/lstm-additive-base-s0.html").read_text()
    assert re.search(r"label <bdi>(negative|positive)</bdi>, predicted <bdi>(negative|positive)</bdi>", heatmap)
