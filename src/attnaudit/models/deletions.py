"""Every single-token deletion of a one-layer BiLSTM classifier at once, without re-encoding (J&W Algorithm 1).

Deleting token t leaves the forward states before t and the backward states after t as they were. So each
direction resumes from the original state next to the gap: the forward states from t on and the backward states
before t are recomputed, with the input projections W_ih x computed once per instance and shared by all its
deletions — about T steps of the hidden-to-hidden product per deletion instead of 2(T−1) full LSTM steps. At step
s every deletion that step changes advances at once, as one slice of the (deleted position × instance) grid.

Every position j of a deleted sequence is then *completed* exactly once: in the forward pass when j ≥ t (new
forward half, unchanged backward half of original position j + 1) or in the backward pass when j < t (unchanged
forward half of position j, new backward half). Attention scores (additive vᵀtanh(W h + b) or dot h·q/√m) and
the decoder are linear in h up to the score's non-linearity, so the unchanged half's contribution is computed
once per original position and only the new half is projected; the softmax over positions is accumulated online
(running maximum) together with the per-token logits W h_j + b, whose attention-weighted mean is the deleted
sequence's logits (T&Š Eq. 9). Nothing of size T² × hidden is ever stored: memory is O(T × B × (hidden + C)),
so long documents fit. Written by hand: no library computes deletion leave-one-out; a test compares it with
re-encoding every shorter sequence.

Encoders with a bounded window need no recursion at all (:func:`local_deletion_logits`): deleting token t from a
token-wise encoder (J&W's average encoder, W&P's MLP) leaves every other hidden state, attention score and
per-token logit as it was, so the deleted sequence's logits are the softmax-weighted per-token logits of the other
positions — a prefix and a suffix aggregate per t; a CNN with kernels up to 2r + 1 changes only the 2r states
around the gap, recomputed on short windows — O(T·r) per instance instead of re-encoding T sequences.

A deletion's effect on the recurrent state fades: once a deletion's recomputed states (h and c, every instance of
the batch) are within ``tolerance`` of the original states at the same position, the rest of its recursion would
reproduce the original states, so it stops there and takes the rest of its softmax from the original sequence's
readout (a suffix aggregate for the forward direction, a prefix aggregate for the backward one). The work then
grows with T × (the steps a deletion takes to fade) instead of T²; ``tolerance = 0`` recomputes every state.
"""

from __future__ import annotations

import torch

from attnaudit.models.attention import AdditiveAttention, DotAttention
from attnaudit.models.batch import Batch
from attnaudit.models.encoders import CNNEncoder, TokenwiseEncoder, token_projections


def attention_readout(attention, query: torch.Tensor | None):
    """``(W, b, score)`` with φ(h) = score(W h + b), b ``[k]`` or per instance ``[B, k]`` (a QA query), or None
    where φ is not of that form (dot attention on a per-instance query)."""
    if isinstance(attention, AdditiveAttention):  # vᵀtanh(z) = 2vᵀσ(2z) − Σv: σ is ~5× cheaper than tanh on CPU
        bias = attention.w_hidden.bias if query is None else attention.w_hidden.bias + attention.w_query(query)
        v = attention.v.weight[0]
        return 2 * attention.w_hidden.weight, 2 * bias, lambda pre: torch.sigmoid(pre) @ (2 * v) - v.sum()
    if isinstance(attention, DotAttention) and query is None:
        weight = (attention.learned_query * attention.scale)[None, :]
        return weight, weight.new_zeros(1), lambda pre: pre[..., 0]
    return None


def supports(model, batch: Batch) -> bool:
    """A one-layer BiLSTM in eval mode whose attention and decoder read h linearly up to a per-position score and
    a final map (:func:`attention_readout`, ``model.linear_readout``): the classifier with learned additive or dot
    attention, J&W's QA model with additive attention."""
    if not getattr(model.encoder, "reuses_deletion_states", False) or model.training:
        return False
    return attention_readout(model.attention, model.attention_query(model.encode_query(batch))) is not None


class Readout:
    """Attention score and the decoder's linear part (per-token logits for a classifier, T&Š Eq. 9; W₁p h for J&W's
    QA model) of a hidden state h = [f; g] (+ the embedding, T&Š §3.1), split into the part of the half a deletion
    changes and the part known from the original states; ``finish`` turns their attention-weighted mean into logits."""

    def __init__(self, model, embedded: torch.Tensor, mask: torch.Tensor, states: dict, query: torch.Tensor | None):
        size = model.encoder.rnn.hidden_size
        weight, bias, self.score = attention_readout(model.attention, model.attention_query(query))
        linear, linear_bias, self.finish = model.linear_readout(query)
        self.width = weight.shape[0]
        matrix = torch.cat([weight, linear])  # [k + D, m]: attention pre-activation, then the decoder's linear part
        offset = torch.cat([bias, linear_bias.expand(*bias.shape[:-1], -1)], dim=-1)  # [k + D] or [B, k + D]
        self.new = {"forward": matrix[:, :size].t(), "backward": matrix[:, size : 2 * size].t()}
        real = mask.t()[:, :, None].to(embedded.dtype)
        words = embedded.transpose(0, 1) * real  # [T, B, d]
        mode = model.cfg.hidden_mode
        if mode == "concat":
            from_words = words @ matrix[:, 2 * size :].t()
        elif mode == "residual":
            from_words = words[..., :size] @ self.new["forward"] + words[..., size:] @ self.new["backward"]
        else:
            from_words = 0.0
        # the part of W h that does not change, per original position p [T, B, k + C]
        self.known = {
            "forward": states["backward"] @ self.new["backward"] + from_words + offset,  # read at p = j + 1
            "backward": states["forward"] @ self.new["forward"] + from_words + offset,  # read at p = j
        }


def doubled_cell_input(gates: torch.Tensor) -> torch.Tensor:
    """Gate pre-activations (last dimension i, f, g, o: PyTorch's order) with the cell input g doubled, so that one
    sigmoid over all four gates gives σ(2g) and tanh(g) = 2σ(2g) − 1 (:func:`lstm_step`)."""
    size = gates.shape[-1] // 4
    scale = torch.ones(4 * size, dtype=gates.dtype, device=gates.device)
    scale[2 * size : 3 * size] = 2.0
    return gates * scale


def lstm_step(pre: torch.Tensor, cell: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step from pre-activations whose cell input is doubled (:func:`doubled_cell_input`), with
    tanh(x) = 2σ(2x) − 1 throughout: the same state as ``torch.lstm`` to float rounding, without tanh calls."""
    size = pre.shape[-1] // 4
    gate = torch.sigmoid(pre)
    candidate = gate[..., 2 * size : 3 * size].mul(2.0).sub_(1.0)
    cell = torch.addcmul(gate[..., size : 2 * size] * cell, gate[..., :size], candidate)
    return gate[..., 3 * size :] * torch.sigmoid(2.0 * cell).mul_(2.0).sub_(1.0), cell


def original_states(encoder, embedding, tokens: torch.Tensor, mask: torch.Tensor, backward: bool):
    """``(input gates, h, c)`` of one direction of the first layer on the whole instances, time-major ``[T, B, ·]``
    (``torch.lstm`` returns no cell states); the gates' cell input is doubled (:func:`doubled_cell_input`)."""
    w_ih, w_hh, b_ih, b_hh = encoder.weights(0, backward)
    n_batch, width = tokens.shape
    per_token, index = token_projections(embedding, tokens, w_ih)
    per_token, w_hh = doubled_cell_input(per_token + (b_ih + b_hh)), doubled_cell_input(w_hh.t())
    gates = per_token[index]  # [B, T, 4H]
    reverse = encoder.reversal(mask) if backward else None
    inputs = per_token[index.gather(1, reverse[..., 0])] if backward else gates  # each sequence reversed in its length
    h = gates.new_zeros(n_batch, encoder.rnn.hidden_size)
    c, hs, cs = torch.zeros_like(h), [], []
    for step in range(width):
        h, c = lstm_step(torch.addmm(inputs[:, step], h, w_hh), c)
        hs.append(h)
        cs.append(c)
    h, c = torch.stack(hs, dim=1), torch.stack(cs, dim=1)
    if backward:
        h, c = (x.gather(1, reverse.expand_as(x)) for x in (h, c))
    return gates.transpose(0, 1), h.transpose(0, 1), c.transpose(0, 1)


class SoftmaxAccumulator:
    """Online softmax over positions of ``rows`` deleted sequences × B instances: running maximum ``best``, the
    sum of exp(score − best) ``total`` and the exp-weighted sum of per-token logits ``summed``."""

    def __init__(self, n_rows: int, n_batch: int, n_classes: int, like: torch.Tensor):
        self.best = like.new_full((n_rows, n_batch), float("-inf"))
        self.total = like.new_zeros(n_rows, n_batch)
        self.summed = like.new_zeros(n_rows, n_batch, n_classes)

    def add(self, rows, best: torch.Tensor, total: torch.Tensor, summed: torch.Tensor) -> None:
        """Merge an aggregate (a single position has total 1 and summed = its logits) into ``rows``."""
        top = torch.maximum(self.best[rows], best)
        shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
        kept, weight = torch.exp(self.best[rows] - shift), torch.exp(best - shift)
        self.total[rows] = self.total[rows] * kept + total * weight
        self.summed[rows] = self.summed[rows] * kept[..., None] + summed * weight[..., None]
        self.best[rows] = top

    def logits(self) -> torch.Tensor:
        return self.summed / self.total[..., None]  # 0/0 = NaN for an instance left empty


def running_aggregates(scores: torch.Tensor, logits: torch.Tensor, reverse: bool) -> tuple[torch.Tensor, ...]:
    """Softmax aggregates (best, total, summed) of the original positions before p (``reverse``: from p on), for
    every p in 0..T: ``[T + 1, B]``, ``[T + 1, B]``, ``[T + 1, B, C]``; position 0 (``reverse``: T) is empty."""
    width = scores.shape[0]
    acc = SoftmaxAccumulator(width + 1, scores.shape[1], logits.shape[-1], logits)
    order = range(width - 1, -1, -1) if reverse else range(width)
    previous = width if reverse else 0
    ones = torch.ones_like(scores[0])
    for p in order:
        here = p if reverse else p + 1
        for field in (acc.best, acc.total, acc.summed):
            field[here] = field[previous]
        acc.add(here, scores[p], ones, logits[p])
        previous = here
    return acc.best, acc.total, acc.summed


def settled_rows(states, original, ignore: torch.Tensor, tolerance: float, from_end: bool) -> int:
    """How many leading rows (``from_end``: trailing) have every instance's ``states`` (h, c ``[rows, B, H]``)
    within ``tolerance`` of the ``original`` (h, c ``[B, H]``), or ignored (past its end, a deletion beyond its
    length)."""
    gap = torch.stack([(new - old).abs().amax(-1) for new, old in zip(states, original, strict=True)]).amax(0)
    done = ((gap <= tolerance) | ignore).all(dim=1)
    if from_end:
        done = done.flip(0)
    return int(done.cumprod(0).sum())


FADE_CHECK_EVERY = 8  # steps between the checks whether deletions have faded (each check costs about one step)


def deletion_outputs(
    model, batch: Batch, first: int, last: int, tolerance: float = 0.0, stats: dict | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of every instance of ``batch`` as it is ``[B, C]`` (the model's head on the states computed here,
    so no second encoder pass) and with its token t deleted ``[last − first, B, C]``, for t in ``first..last−1``
    (:func:`supports` must hold; entries with t beyond an instance's length are unspecified; an instance left
    empty gets NaN). ``tolerance`` > 0 stops a deletion's recursion once its states are that
    close (max |Δh|, |Δc|) to the original states (module docstring); ``stats["row_steps"]`` counts the
    recomputed (deletion × instance × step) rows, padding included."""
    encoder, mask = model.encoder, batch.mask
    size, width, n_batch = encoder.rnn.hidden_size, mask.shape[1], mask.shape[0]
    n_rows = last - first
    with torch.no_grad():
        embedded = model.embed(batch)
        real = mask.t()[:, :, None].to(embedded.dtype)
        gates, hidden, cells = {}, {}, {}
        for direction in ("forward", "backward"):
            gates[direction], h, c = original_states(
                encoder, model.embedding, batch.tokens, mask, direction == "backward"
            )
            hidden[direction], cells[direction] = h * real, c * real  # 0 on padding: "nothing after t" reads 0
        query = model.encode_query(batch)
        readout = Readout(model, embedded, mask, hidden, query)
        states = model._with_embeddings(
            torch.cat([hidden["forward"], hidden["backward"]], -1).transpose(0, 1), embedded, mask
        )
        as_is = model.decode(states, model.attend(states, batch, query), query)  # the undeleted instances
        acc = SoftmaxAccumulator(n_rows, n_batch, readout.known["forward"].shape[-1] - readout.width, embedded)
        lengths = mask.sum(dim=1)
        # position j exists in a deleted sequence of instance b iff j < length_b − 1
        exists = torch.arange(max(width, 2), device=mask.device)[:, None] < lengths[None, :] - 1
        beyond = torch.arange(first, last, device=mask.device)[:, None] >= lengths[None, :]  # [rows, B] unspecified

        def complete(rows: slice, position: int, state: torch.Tensor, direction: str) -> None:
            """Fold position ``position`` of the deleted sequences ``rows`` into their online softmax."""
            original = position + 1 if direction == "forward" else position
            values = state @ readout.new[direction] + readout.known[direction][original]  # [n, B, k + C]
            score = readout.score(values[..., : readout.width]).masked_fill(~exists[position], float("-inf"))
            acc.add(rows, score, torch.ones_like(score), values[..., readout.width :])

        if tolerance > 0:  # the original sequence's readout per position, aggregated from either end
            values = hidden["forward"] @ readout.new["forward"] + readout.known["forward"]  # [T, B, k + C]
            scores = readout.score(values[..., : readout.width]).masked_fill(~mask.t(), float("-inf"))
            suffix = running_aggregates(scores, values[..., readout.width :], reverse=True)
            prefix = running_aggregates(scores, values[..., readout.width :], reverse=False)

        zeros = embedded.new_zeros(1, n_batch, size)
        # forward, step s: deletions t ≤ s resume from the state after position t − 1, reading x_{s+1}
        w_hh = doubled_cell_input(encoder.weights(0, False)[1].t())
        h = torch.cat([zeros, hidden["forward"]])[first:last].clone()  # [t, B, H]
        c = torch.cat([zeros, cells["forward"]])[first:last].clone()
        done, row_steps = 0, 0  # rows 0..done−1 have faded into the original states and are complete
        for step in range(first, width - 1):
            n = min(step + 1, last) - first
            if done == n:
                continue
            rows = slice(done, n)
            pre = (h[rows].reshape(-1, size) @ w_hh).view(n - done, n_batch, -1).add_(gates["forward"][step + 1])
            h[rows], c[rows] = lstm_step(pre, c[rows])
            complete(rows, step, h[rows], "forward")
            row_steps += (n - done) * n_batch
            if tolerance > 0 and (step - first) % FADE_CHECK_EVERY == 0:  # deleted position step = original step + 1
                original = (hidden["forward"][step + 1], cells["forward"][step + 1])
                ignore = beyond[rows] | ~exists[step + 1]
                settled = settled_rows((h[rows], c[rows]), original, ignore, tolerance, from_end=False)
                if settled:  # the rest: original positions step + 2 … (deleted positions step + 1 …)
                    faded = slice(done, done + settled)
                    acc.add(faded, *(x[step + 2] for x in suffix))
                    done += settled
        # backward, step s from T − 2 down: deletions t > s resume from the state of position t + 1, reading x_s
        w_hh = doubled_cell_input(encoder.weights(0, True)[1].t())
        h = torch.cat([hidden["backward"], zeros])[first + 1 : last + 1].clone()
        c = torch.cat([cells["backward"], zeros])[first + 1 : last + 1].clone()
        end = n_rows  # rows end.. have faded into the original states and are complete
        for step in range(min(last - 1, width - 1) - 1, -1, -1):
            start = max(step + 1, first) - first
            if start >= end:
                continue
            rows = slice(start, end)
            pre = (h[rows].reshape(-1, size) @ w_hh).view(-1, n_batch, 4 * size).add_(gates["backward"][step])
            h[rows], c[rows] = lstm_step(pre, c[rows])
            complete(rows, step, h[rows], "backward")
            row_steps += (end - start) * n_batch
            if tolerance > 0 and step % FADE_CHECK_EVERY == 0:  # deleted position `step` = original position `step`
                original = (hidden["backward"][step], cells["backward"][step])
                settled = settled_rows((h[rows], c[rows]), original, beyond[rows], tolerance, from_end=True)
                if settled:  # the rest: original positions 0 … step − 1
                    faded = slice(end - settled, end)
                    acc.add(faded, *(x[step] for x in prefix))
                    end -= settled
        if stats is not None:
            stats["row_steps"] = stats.get("row_steps", 0) + row_steps
        return as_is, readout.finish(acc.logits(), model.deletion_candidates(batch, first, last))


def local_radius(model, batch: Batch) -> int | None:
    """How far a deletion reaches into the hidden states of a model whose states depend on a bounded window of
    tokens: 0 for a token-wise encoder (average, MLP), ⌊k/2⌋ of the widest kernel for the CNN (odd kernels); None
    for any other model. The attention must be learned additive or dot attention (J&W's QA model: on its query)."""
    if model.training or not isinstance(model.attention, AdditiveAttention | DotAttention):
        return None
    if isinstance(model.encoder, TokenwiseEncoder):
        return 0
    if isinstance(model.encoder, CNNEncoder):
        kernels = [conv.kernel_size[0] for conv in model.encoder.convs]
        return max(kernels) // 2 if all(k % 2 for k in kernels) else None
    return None


def local_deletion_logits(model, batch: Batch, first: int, last: int, max_elements: int = 1 << 24) -> torch.Tensor:
    """Logits ``[last − first, B, C]`` with token t deleted (:func:`local_radius` must not be None). With radius
    r, the deleted sequence's states before t − r are the original ones, those from t + r on the original ones
    shifted by one, and only the 2r in between change: the softmax merges the original positions' aggregate before
    t − r, the 2r recomputed positions (the encoder run on 4r-token windows, at most ``max_elements`` embedding
    floats at a time) and the aggregate after t + r (no cancellation, online maximum). The decoder's linear part
    is averaged per token and finished after (``model.linear_readout``). r = 0 (token-wise encoders): nothing is
    recomputed, deleting t only drops it from the attention softmax."""
    radius = local_radius(model, batch)
    mask, lengths = batch.mask, batch.mask.sum(dim=1)
    n_batch, width = mask.shape
    with torch.no_grad():
        hidden = model.encode(model.embed(batch), mask)
        query = model.encode_query(batch)
        attention_query = model.attention_query(query)
        linear, bias, finish = model.linear_readout(query)
        scores = model.attention.scores(hidden, attention_query).masked_fill(~mask, float("-inf")).t()  # [T, B]
        logits = (hidden @ linear.t() + bias).transpose(0, 1)  # [T, B, D]
        before = running_aggregates(scores, logits, reverse=False)
        after = running_aggregates(scores, logits, reverse=True)
        acc = SoftmaxAccumulator(last - first, n_batch, logits.shape[-1], logits)
        t = torch.arange(first, last, device=mask.device)
        acc.add(slice(None), *(x[(t - radius).clamp_min(0)] for x in before))
        acc.add(slice(None), *(x[(t + radius + 1).clamp_max(width)] for x in after))
        if radius:
            span = torch.arange(4 * radius, device=mask.device)
            per = max(1, max_elements // (n_batch * 4 * radius * hidden.shape[-1]))
            for start in range(0, len(t), per):
                rows = slice(start, start + per)
                here = t[rows]
                deleted = here[:, None] - 2 * radius + span[None, :]  # deleted positions of each window [n, 4r]
                source = torch.where(deleted < here[:, None], deleted, deleted + 1)  # their original positions
                inside = (deleted[:, None, :] >= 0) & (source[:, None, :] < lengths[None, :, None])  # [n, B, 4r]
                tokens = batch.tokens[:, source.clamp(0, width - 1)].transpose(0, 1)  # [n, B, 4r]
                tokens = tokens.masked_fill(~inside, model.cfg.pad_index).flatten(0, 1)
                window = Batch(tokens, inside.flatten(0, 1))
                states = model.encode(model.embed(window), window.mask)[:, radius : 3 * radius]  # [n·B, 2r, m]
                repeat = None if attention_query is None else attention_query.repeat(len(here), 1)
                window_scores = model.attention.scores(states, repeat).view(len(here), n_batch, 2 * radius)
                window_logits = (states @ linear.t() + bias).view(len(here), n_batch, 2 * radius, -1)
                position = here[:, None] - radius + span[None, : 2 * radius]  # deleted positions j [n, 2r]
                real = (position[:, None, :] >= 0) & (position[:, None, :] < lengths[None, :, None] - 1)
                window_scores = window_scores.masked_fill(~real, float("-inf"))
                ones = torch.ones_like(window_scores[..., 0])
                for i in range(2 * radius):
                    acc.add(rows, window_scores[..., i], ones, window_logits[:, :, i])
        return finish(acc.logits(), model.deletion_candidates(batch, first, last))
