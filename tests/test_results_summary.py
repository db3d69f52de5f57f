"""``python -m attnaudit results``: the README's generated sections, from tables written by the stages; a named
block of the README is replaced and nothing else."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from attnaudit import AttnauditError
from attnaudit.cli import main


def write_tables(root):
    jw = root / "tables" / "jain_wallace"
    jw.mkdir(parents=True)
    keys = "dataset,model,predicted_class,n"
    (jw / "correlation.csv").write_text(
        f"{keys},pair,tau_mean\n"
        "adr,lstm-additive-base-s0,0,30,attention~gradient,0.5\nadr,lstm-additive-base-s0,1,10,attention~gradient,0.1\n"
    )
    (jw / "permutation.csv").write_text(f"{keys},small_change_fraction\nadr,lstm-additive-base-s0,0,40,0.25\n")
    (jw / "adversarial.csv").write_text(
        f"{keys},eps_max_jsd_mean,high_jsd_fraction\nadr,lstm-additive-base-s0,0,40,0.6,0.75\n"
    )
    (jw / "table1.md").write_text("# J&W Table 1\n\n| adr | 0.600 |\n")
    model = root / "models" / "adr" / "lstm-additive-base-s0"
    model.mkdir(parents=True)
    (model / "metrics.json").write_text(json.dumps({"test": {"macro_f1": 0.7}}))


def test_a_named_block_gets_the_chosen_papers_only(tmp_path):
    write_tables(tmp_path / "results")
    readme = tmp_path / "README.md"
    readme.write_text(
        "a\n<!-- results:start -->\nold default\n<!-- results:end -->\n<!-- jw:start -->\nx\n<!-- jw:end -->\n"
    )
    main(
        ["results", "--results", str(tmp_path / "results"), "--readme", str(readme), "--block", "jw"]
        + ["--papers", "jain_wallace"]
    )
    text = readme.read_text()
    assert "old default" in text and "\nx\n" not in text
    block = text.split("<!-- jw:start -->")[1]
    assert "| adr | lstm-additive-base-s0 | 0.700 | 0.400 |" in block  # τ weighted by instances: (30·.5 + 10·.1)/40
    assert "25 %" in block and "0.600 | 75 %" in block and "##### J&W Table 1" in block
    assert "Bastings" not in block and "Wiegreffe" not in block


def test_a_missing_block_is_named(tmp_path):
    write_tables(tmp_path / "results")
    (tmp_path / "README.md").write_text("no markers\n")
    with pytest.raises(AttnauditError, match="no <!-- jw:start -->"):
        from attnaudit.results_summary import update_readme

        update_readme(tmp_path / "README.md", "t", "jw")


def test_a_paper_without_tables_or_markers_out_of_order_leave_the_readme_alone(tmp_path):
    """A paper asked for whose tables are missing stops the command (its README section used to be replaced by a
    "missing" note, exit 0); so do end-before-start or doubled markers (a traceback, or a second block left stale)."""
    from attnaudit.results_summary import update_readme

    write_tables(tmp_path / "results")
    readme = tmp_path / "README.md"
    published = "<!-- results:start -->\npublished\n<!-- results:end -->\n"
    readme.write_text(published)
    args = ["results", "--results", str(tmp_path / "results"), "--readme", str(readme)]
    assert main([*args, "--papers", "jain_wallace", "tutek_snajder"]) == 2
    assert main([*args, "--papers", "jain_wallace", "bastings_filippova"]) == 2  # B&F's table too
    assert readme.read_text() == published
    for broken in ("<!-- b:end -->\n<!-- b:start -->\n", "<!-- b:start -->\n<!-- b:end -->\n" * 2):
        readme.write_text(broken)
        with pytest.raises(AttnauditError, match="expected one <!-- b:start --> followed by one <!-- b:end -->"):
            update_readme(readme, "t", "b")
        assert readme.read_text() == broken


def test_a_model_without_bf_rows_is_named(tmp_path, capsys):
    """``--model`` names the model of B&F's AOPC ranking: one the table does not hold used to drop the ranking from
    the README block without a word."""
    write_tables(tmp_path / "results")
    bf = tmp_path / "results" / "tables" / "bastings_filippova"
    bf.mkdir(parents=True)
    rows = [("adr", "lstm-additive-base-s0", method, 0.3 - i / 10, 0.1) for i, method in enumerate(["gradient", "loo"])]
    frame = pd.DataFrame(rows, columns=["dataset", "model", "method", "comprehensiveness", "sufficiency"])
    frame.assign(k="aopc", variant="deletion", ranking="signed").to_csv(bf / "faithfulness.csv", index=False)
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:start -->\npublished\n<!-- results:end -->\n")
    args = ["results", "--results", str(tmp_path / "results"), "--readme", str(readme)]
    args += ["--papers", "jain_wallace", "bastings_filippova"]
    assert main([*args, "--model", "lstm-additive-base-s1"]) == 2
    assert "--model 'lstm-additive-base-s1': no B&F AOPC rows" in capsys.readouterr().err
    assert main([*args, "--model", "lstm-additive-base-s0"]) == 0
    assert "| 1 | gradient | 0.300 | 0.100 |" in readme.read_text()
