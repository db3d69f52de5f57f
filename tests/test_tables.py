"""attnaudit.tables: combined tables from per-dataset tables (concatenated CSVs, one markdown section per dataset),
a clear error naming a missing per-dataset table, and Markdown cells that stay literal text."""

from __future__ import annotations

import re
from html import escape

import markdown_it
import pandas as pd
import pytest

from attnaudit import AttnauditError
from attnaudit.tables import combine, markdown_cell


def write(root, dataset, name, text):
    (root / dataset).mkdir(parents=True, exist_ok=True)
    (root / dataset / name).write_text(text)


def test_combine_concatenates_csvs_and_sections_markdown(tmp_path):
    write(tmp_path, "sst", "t.csv", "dataset,x\nsst,1\nsst,2\n")
    write(tmp_path, "imdb", "t.csv", "dataset,x,extra\nimdb,3,a\n")
    write(tmp_path, "sst", "t.md", "| a |\n|---|\n| 1 |\n")
    write(tmp_path, "imdb", "t.md", "| a |\n|---|\n| 3 |\n")
    combine(tmp_path, {"t.csv": ["sst", "imdb"], "t.md": ["sst", "imdb"]})
    frame = pd.read_csv(tmp_path / "t.csv")
    assert frame["dataset"].tolist() == ["sst", "sst", "imdb"] and frame["x"].tolist() == [1, 2, 3]
    assert frame["extra"].isna().tolist() == [True, True, False]
    assert (tmp_path / "t.md").read_text() == "| a |\n|---|\n| 1 |\n| 3 |\n"  # one generator: rows merged


def test_markdown_of_other_shapes_gets_a_section_per_dataset(tmp_path):
    write(tmp_path, "sst", "d.md", "# Claims\n\n- holds (4 of 4)\n")
    write(tmp_path, "imdb", "d.md", "# Claims\n\n- mixed (1 of 2)\n")
    combine(tmp_path, {"d.md": ["sst", "imdb"]})
    md = (tmp_path / "d.md").read_text()
    assert md.index("## sst") < md.index("### Claims") < md.index("holds") < md.index("## imdb") < md.index("mixed")


def test_one_dataset_is_copied_and_empty_tables_keep_their_header(tmp_path):
    write(tmp_path, "sst", "t.md", "# title\n")
    write(tmp_path, "sst", "e.csv", "dataset,x\n")
    combine(tmp_path, {"t.md": ["sst"], "e.csv": ["sst"]})
    assert (tmp_path / "t.md").read_text() == "# title\n"
    assert list(pd.read_csv(tmp_path / "e.csv").columns) == ["dataset", "x"]


def test_a_missing_or_unlabelled_table_is_named(tmp_path):
    write(tmp_path, "sst", "t.csv", "x\n1\n")
    with pytest.raises(AttnauditError, match="imdb/t.csv"):
        combine(tmp_path, {"t.csv": ["sst", "imdb"]})
    with pytest.raises(AttnauditError, match="sst/t.csv.*'dataset' column"):
        combine(tmp_path, {"t.csv": ["sst"]})


def test_an_emptied_table_is_named_unreadable(tmp_path):
    """A per-dataset CSV truncated to nothing (a crash outside the atomic writes, a user's edit) is named."""
    write(tmp_path, "sst", "t.csv", "dataset,x\nsst,1\n")
    write(tmp_path, "imdb", "t.csv", "")
    with pytest.raises(AttnauditError, match=r"imdb/t.csv is unreadable .*Delete it and rerun"):
        combine(tmp_path, {"t.csv": ["sst", "imdb"]})


def test_markdown_cell_is_literal_text_in_a_table():
    """Escaped cells render (CommonMark + GFM tables) as their text: no link, emphasis, code, image or HTML, one
    cell per text, newlines as spaces; an underscore inside a word is left as it is."""
    texts = ["a|b", "[x](javascript:alert(1))", "two\nlines\r\nthree\rfour", "*e* _u_ `c` ~~s~~ \\[y](z) #h ![i](j)"]
    texts += ["<img src=x onerror=alert(1)> &amp; </script>", "_a_ b_ _c tau_g sst__x"]
    doc = "| text |\n|---|\n" + "".join(f"| {markdown_cell(t)} |\n" for t in texts)
    page = markdown_it.MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(doc)
    assert re.findall(r"<td>(.*?)</td>", page) == [escape(re.sub(r"\r\n?|\n", " ", t), quote=False) for t in texts]
    assert markdown_cell("tau_g of sst_small") == "tau_g of sst_small"  # "_" inside a word is no emphasis
