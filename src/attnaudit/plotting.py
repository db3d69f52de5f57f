"""What every stage's figures share: the Agg backend, fonts for the scripts of any corpus, atomic PNG writes, the
predicted-class colours and the violins of J&W Fig. 8's plane (a value on x, the instance's max attention binned on
y, split by predicted class), which J&W Figs. 3/5 and W&P Fig. 3 all use."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from attnaudit.io import atomic_path  # noqa: E402
from attnaudit.labels import class_name  # noqa: E402

#: fonts of the scripts DejaVu Sans (matplotlib's own) lacks, Chinese, Japanese, Korean and Thai, by the names they
#: install under on Linux, macOS and Windows: each one installed draws what DejaVu Sans cannot (a corpus's tokens in
#: T&Š Fig. 2, its class names in the legends) instead of empty boxes, by matplotlib's font fallback
FALLBACK_FONTS = (
    "Noto Sans CJK SC",
    "Noto Sans CJK JP",
    "Noto Sans CJK KR",
    "Source Han Sans SC",
    "WenQuanYi Micro Hei",
    "WenQuanYi Zen Hei",
    "Droid Sans Fallback",
    "PingFang SC",
    "Hiragino Sans",
    "Apple SD Gothic Neo",
    "Microsoft YaHei",
    "Yu Gothic",
    "Malgun Gothic",
    "Noto Sans Thai",
    "Tahoma",
)


def font_families() -> list[str]:
    """DejaVu Sans, then each of :data:`FALLBACK_FONTS` that is installed."""
    from matplotlib import font_manager

    installed = {font.name for font in font_manager.fontManager.ttflist}
    return ["DejaVu Sans", *(name for name in FALLBACK_FONTS if name in installed)]


plt.rcParams["font.family"] = font_families()

# J&W colour predicted classes: purple negative (0), orange positive (1)
CLASS_COLOURS = ["#7b3294", "#e66101", "#1b9e77", "#377eb8", "#999999"]
POOLED_COLOUR = "#4d4d4d"  # every class of a corpus of more than len(CLASS_COLOURS) (:func:`class_groups`)


def save_figure(fig, path: str | Path) -> None:
    """Write ``fig`` as PNG atomically and close it."""
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)


def plain_text(text) -> str:
    """``text`` as matplotlib draws it literally: every ``$`` escaped, so that no corpus token or label is
    parsed as mathtext (``x$\\foo$y`` stopped the figure, ``a$b$c`` was drawn as maths)."""
    return str(text).replace("$", r"\$")


def class_colour(label) -> str:
    return CLASS_COLOURS[int(label) % len(CLASS_COLOURS)]


def class_groups(predicted: pd.Series, names: list[str]) -> tuple[pd.Series, dict[str, str]]:
    """The legend group of each instance's predicted class, and the palette (group → colour, in class order).
    J&W colour the predicted classes; ``CLASS_COLOURS`` tells apart the classes of a corpus of at most that many
    (``names``: the corpus's class names; none: the classes predicted). A corpus of more classes (bAbI's answer
    words, a user's topics) is one group, every class pooled, as J&W's Table 2 reports bAbI and CNN over all
    classes: recycled colours would merge classes, and a legend of dozens would cover the panels. The tables
    keep each predicted class."""
    predicted = predicted.astype(int)
    n_classes = len(names) or predicted.nunique()
    if n_classes > len(CLASS_COLOURS):
        pooled = f"any of the {n_classes} classes"
        return pd.Series(pooled, index=predicted.index), {pooled: POOLED_COLOUR}
    named = {i: plain_text(class_name(names, i)) for i in sorted(predicted.unique())}
    return predicted.map(named), {name: class_colour(i) for i, name in named.items()}


def attention_violins(ax, data: pd.DataFrame, x: str, y: str, order: list[str], palette: dict[str, str]) -> None:
    """Densities of ``x`` per bin ``y`` (in ``order``), split by the column ``class`` whose groups and colours
    ``palette`` gives (:func:`class_groups`)."""
    sns.violinplot(
        data=data,
        x=x,
        y=y,
        hue="class",
        order=order,
        hue_order=list(palette),
        split=len(palette) == 2,
        orient="h",
        cut=0,
        density_norm="width",
        inner="quartile",
        linewidth=0.6,
        ax=ax,
        palette=palette,
    )
    if ax.get_legend() is not None:
        ax.get_legend().set_title("predicted class")
