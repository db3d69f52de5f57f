"""What every stage's figures share: the Agg backend, atomic PNG writes, the predicted-class colours and the
violins of J&W Fig. 8's plane (a value on x, the instance's max attention binned on y, split by predicted class),
which J&W Figs. 3/5 and W&P Fig. 3 all use."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from attnaudit.io import atomic_path  # noqa: E402

# J&W colour predicted classes: purple negative (0), orange positive (1)
CLASS_COLOURS = ["#7b3294", "#e66101", "#1b9e77", "#377eb8", "#999999"]


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


def attention_violins(
    ax, data: pd.DataFrame, x: str, y: str, order: list[str], classes: list[str], indices: list[int] | None = None
) -> None:
    """Densities of ``x`` per bin ``y`` (in ``order``), split by the string column ``class`` (its values
    ``classes``, coloured by their class ``indices``; default: the names are the indices)."""
    indices = classes if indices is None else indices
    data = data.assign(**{"class": data["class"].map(plain_text)})  # class names go into the legend
    classes = [plain_text(c) for c in classes]
    sns.violinplot(
        data=data,
        x=x,
        y=y,
        hue="class",
        order=order,
        hue_order=classes,
        split=len(classes) == 2,
        orient="h",
        cut=0,
        density_norm="width",
        inner="quartile",
        linewidth=0.6,
        ax=ax,
        palette={c: class_colour(i) for c, i in zip(classes, indices, strict=True)},
    )
