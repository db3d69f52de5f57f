"""Which positions of a batch are ranked, permuted or attended to: the real tokens without the sentence markers.

J&W's code never scores, permutes or adversarially attends to ``<s>``/``</s>`` (they are structure, not words of
the text), W&P §3.2 spread uniform attention over the inner tokens only, and B&F's rankings (this project's ERASER
metrics) rank words. Every stage takes those positions from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from attnaudit.specials import marker_ids  # noqa: F401 (re-exported: every stage takes the markers from here)

if TYPE_CHECKING:
    from attnaudit.models import Batch


def candidate_mask(tokens: torch.Tensor, mask: torch.Tensor, markers: tuple[int, ...] | list[int]) -> torch.Tensor:
    """Real tokens that are not sentence markers (may be empty for an instance made only of markers)."""
    if not len(markers):
        return mask
    return mask & ~torch.isin(tokens, torch.as_tensor(list(markers), dtype=tokens.dtype, device=tokens.device))


def content_mask(batch: Batch, markers: tuple[int, ...], exclude_markers: bool = True) -> torch.Tensor:
    """Real positions, without the sentence markers when ``exclude_markers``. An instance made only of
    markers keeps all its real positions (so every instance has something to rank, permute or attend to)."""
    if not exclude_markers:
        return batch.mask
    return content_positions(batch.tokens, batch.mask, markers)


def content_positions(tokens: torch.Tensor, mask: torch.Tensor, markers: tuple[int, ...]) -> torch.Tensor:
    """:func:`candidate_mask`, except that an instance made only of markers keeps all its real positions."""
    content = candidate_mask(tokens, mask, markers)
    return torch.where(content.any(dim=1, keepdim=True), content, mask)
