"""Every single-token deletion of a one-layer BiLSTM classifier at once, without re-encoding (J&W Algorithm 1).

Deleting token t leaves the forward states before t and the backward states after t as they were. So each
direction resumes from the original state next to the gap: the forward states from t on and the backward states
before t are recomputed, with the input projections W_ih x computed once per instance and shared by all its
deletions — about T steps of the hidden-to-hidden product per deletion instead of 2(T−1) full LSTM steps. Each
direction runs in its own reading order (the backward one over each instance reversed within its length), where
deleting the u-th token read resumes after token u − 1: at step s every deletion u ≤ s of every instance longer
than s + 1 advances at once, one block of the (deletion × instance) grid once the instances are sorted by
decreasing length, so no padded state is computed (Σ L(L − 1) states per batch).

Occluding token t (B&F Eq. 5: its embedding zeroed, the length kept; :func:`occlusion_outputs`) leaves the same
states unchanged: each direction resumes from the state before t, reads the gate biases alone at t (W_ih·0 = 0) and
then the original tokens; position t has both halves new and is completed once both directions have passed it.

Every position j of a deleted sequence is then *completed* exactly once: in the forward pass when j ≥ t (new
forward half, unchanged backward half of original position j + 1) or in the backward pass when j < t (unchanged
forward half of position j, new backward half). Attention scores (additive vᵀtanh(W h + b) or dot h·q/√m) and
the decoder are linear in h up to the score's non-linearity, so the unchanged half's contribution is computed
once per original position and only the new half is projected; the softmax over positions is accumulated online
(running maximum) together with the per-token logits W h_j + b, whose attention-weighted mean is the deleted
sequence's logits (T&Š Eq. 9); positions outside the attention's support (the sentence markers) get no weight,
as in the model (a deletion that leaves an instance only its markers, whose attention then falls back to them, is
re-encoded by :func:`attnaudit.importance.loo.reencode_emptied`). Nothing of size T² × hidden is ever stored:
memory is O(T × B × (hidden + C)), so long documents fit. Written by hand: no library computes deletion
leave-one-out; a test compares it with re-encoding every shorter sequence.

Encoders with a bounded window need no recursion at all (:func:`local_deletion_logits`): deleting token t from a
token-wise encoder (J&W's average encoder, W&P's MLP) leaves every other hidden state, attention score and
per-token logit as it was, so the deleted sequence's logits are the softmax-weighted per-token logits of the other
positions — a prefix and a suffix aggregate per t; a CNN with kernels up to 2r + 1 changes only the 2r states
around the gap, recomputed on short windows — O(T·r) per instance instead of re-encoding T sequences.

A deletion's effect on the recurrent state fades: once a deletion's recomputed states (h and c, every instance of
the batch) are within ``tolerance`` of the original states at the same position, the rest of its recursion would
reproduce the original states, so it stops there and takes the rest of its softmax from the original sequence's
readout (an aggregate of the tokens its direction has still to read). The work then
grows with T × (the steps a deletion takes to fade) instead of T²; ``tolerance = 0`` recomputes every state.
"""

from __future__ import annotations

import torch
from torch import nn

from attnaudit.models.activations import tanh, tanh_
from attnaudit.models.attention import AdditiveAttention, DotAttention
from attnaudit.models.batch import Batch
from attnaudit.models.encoders import CNNEncoder, TokenwiseEncoder, token_projections


def attention_readout(attention, query: torch.Tensor | None):
    """``(W, b, score)`` with φ(h) = score(W h + b), b ``[k]`` or per instance ``[B, k]`` (a QA query), or None
    where φ is not of that form (dot attention on a per-instance query)."""
    if isinstance(attention, AdditiveAttention):
        bias = attention.w_hidden.bias if query is None else attention.w_hidden.bias + attention.w_query(query)
        v = attention.v.weight[0]
        return attention.w_hidden.weight, bias, lambda pre: tanh(pre) @ v
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
        spare = -matrix.shape[0] % 16  # zero rows: a product 16 columns wide at a time is the fastest per column
        matrix, offset = nn.functional.pad(matrix, (0, 0, 0, spare)), nn.functional.pad(offset, (0, spare))
        self.classes = slice(self.width, self.width + linear.shape[0])
        self.offset = offset
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


def sigmoid_gates_first(weights: torch.Tensor) -> torch.Tensor:
    """Gate rows in the order i, f, o, g (PyTorch's: i, f, g, o), so that :func:`lstm_step` takes one sigmoid over
    the first three quarters and one tanh over the last (by the route that is fast on this CPU,
    :mod:`attnaudit.models.activations`)."""
    i, f, g, o = weights.chunk(4, dim=0)
    return torch.cat([i, f, o, g])


def lstm_step(pre: torch.Tensor, cell: torch.Tensor, out: tuple | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One LSTM step from gate pre-activations in the order of :func:`sigmoid_gates_first`: the same state as
    ``torch.lstm`` to float rounding. ``pre`` is scratch (overwritten); ``out``: (h, c) tensors to write the new
    state into (c may be ``cell`` itself)."""
    size = pre.shape[-1] // 4
    gate, candidate = pre[..., : 3 * size].sigmoid_(), tanh_(pre[..., 3 * size :])
    h, c = (None, None) if out is None else out
    cell = torch.mul(gate[..., size : 2 * size], cell, out=c).addcmul_(gate[..., :size], candidate)
    return torch.mul(gate[..., 2 * size :], tanh(cell), out=h), cell


def original_states(encoder, embedding, tokens: torch.Tensor, mask: torch.Tensor, backward: bool):
    """``(input gates, h, c)`` of one direction of the first layer on the whole instances, time-major ``[T, B, ·]``
    in that direction's reading order: the backward direction's position r is position L − 1 − r of an instance of
    length L (:meth:`LSTMEncoder.reversal`; padding stays in place). ``torch.lstm`` returns no cell states; the
    gates are in the order of :func:`sigmoid_gates_first`."""
    w_ih, w_hh, b_ih, b_hh = (sigmoid_gates_first(w) for w in encoder.weights(0, backward))
    per_token, index = token_projections(embedding, tokens, w_ih)
    per_token, w_hh = per_token + (b_ih + b_hh), w_hh.t()
    if backward:
        index = index.gather(1, encoder.reversal(mask)[..., 0])
    gates = per_token[index.t()]  # [T, B, 4H]
    h = gates.new_zeros(tokens.shape[0], encoder.rnn.hidden_size)
    c, hs, cs = torch.zeros_like(h), [], []
    for step in range(tokens.shape[1]):
        h, c = lstm_step(torch.addmm(gates[step], h, w_hh), c)
        hs.append(h)
        cs.append(c)
    return gates, torch.stack(hs), torch.stack(cs)


class SoftmaxAccumulator:
    """Online softmax over positions of ``rows`` deleted sequences × B instances: running maximum ``best``, the
    sum of exp(score − best) ``total`` and the exp-weighted sum of per-token logits ``summed``."""

    def __init__(self, n_rows: int, n_batch: int, n_classes: int, like: torch.Tensor):
        self.best = like.new_full((n_rows, n_batch), float("-inf"))
        self.total = like.new_zeros(n_rows, n_batch)
        self.summed = like.new_zeros(n_rows, n_batch, n_classes)

    def add(self, rows, best: torch.Tensor, total: torch.Tensor, summed: torch.Tensor) -> None:
        """Merge an aggregate (a single position has total 1 and summed = its logits) into ``rows`` (an index of
        the first dimension, or of the first two)."""
        top = torch.maximum(self.best[rows], best)
        shift = torch.where(torch.isinf(top), torch.zeros_like(top), top)
        kept, weight = torch.exp(self.best[rows] - shift), torch.exp(best - shift)
        self.total[rows] = self.total[rows] * kept + total * weight
        self.summed[rows] = self.summed[rows] * kept[..., None] + summed * weight[..., None]
        self.best[rows] = top

    def fields(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.best, self.total, self.summed

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
        for field in acc.fields():
            field[here] = field[previous]
        acc.add(here, scores[p], ones, logits[p])
        previous = here
    return acc.fields()


def gather_positions(x: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``x`` ``[T, B, …]`` with each instance's positions reordered: ``out[t, b] = x[index[t, b], b]``."""
    return x.gather(0, index.view(*index.shape, *[1] * (x.dim() - 2)).expand_as(x))


def settled_rows(states, original, tolerance: float) -> int:
    """How many leading rows have every instance's ``states`` (h, c ``[rows, B', H]``) within ``tolerance`` of the
    ``original`` (h, c ``[B', H]``). Rows fade about in order (the first started first), so they are checked in
    blocks of 1, 2, 4, … rows from the first until a row has not settled: a check costs about the rows it settles,
    plus as many again, rather than all rows."""
    n_rows, settled, block = states[0].shape[0], 0, 1
    while settled < n_rows:
        rows = slice(settled, min(n_rows, settled + block))
        gap = torch.stack([(new[rows] - old).abs().amax(-1) for new, old in zip(states, original, strict=True)])
        count = int((gap.amax(0) <= tolerance).all(dim=1).cumprod(0).sum())
        settled += count
        if count < rows.stop - rows.start:
            break
        block *= 2
    return settled


FADE_CHECK_EVERY = 8  # steps between the checks whether deletions have faded (a check that settles nothing is cheap)


def resume_rows(
    gates,
    hidden,
    cells,
    w_hh,
    active: list[int],
    readout: Readout,
    direction: str,
    known,
    excluded,
    suffix,
    tolerance: float,
    substitute: torch.Tensor | None = None,
) -> tuple[SoftmaxAccumulator, int, torch.Tensor | None]:
    """One direction's part of every deletion (or, with ``substitute``, every occlusion), in its reading order
    (``[T, B, ·]`` original gates, states and known readout, ``[T, B]`` positions outside the attention's support;
    instances sorted by decreasing length). A deletion's row u resumes from the state after token u − 1 and, at
    step s ≥ u, reads token s + 1 and completes that position. An occlusion's row u (``substitute``: the gate
    pre-activations of what replaces token u, ``[4H]``) resumes from the same state, reads ``substitute`` at step u
    and token s at step s > u, completing position s; its state at position u is returned as ``own`` ``[T, B, H]``
    (both halves of that position change, so it is completed once both directions are known).
    At step s only the ``active[s]`` instances with a token to read are computed, a leading block of the batch, so
    no padded row is. Returns the rows' online softmax ``[T, B]``, the number of (row × instance × step) states
    computed and ``own`` (None for deletions)."""
    shift = 1 if substitute is None else 0  # a deletion's step s reads token s + 1, an occlusion's token s
    width, n_batch, size = hidden.shape
    acc = SoftmaxAccumulator(width, n_batch, readout.classes.stop - readout.width, hidden)
    zeros = hidden.new_zeros(1, n_batch, size)
    h, c = torch.cat([zeros, hidden[:-1]]), torch.cat([zeros, cells[:-1]])  # row u starts after token u − 1
    own = None if substitute is None else torch.zeros_like(hidden)
    done, row_steps = 0, 0  # rows 0..done−1 have faded into the original states and are complete
    for step in range(width - shift):
        n_active = active[step]
        if n_active == 0:
            break
        if n_active < h.shape[1]:  # the shorter instances are complete: drop their rows' states
            h, c = h[:, :n_active].contiguous(), c[:, :n_active].contiguous()
        if done > step:
            continue
        read, rows = step + shift, slice(done, step + 1)
        pre = (h[rows].reshape(-1, size) @ w_hh).view(step + 1 - done, n_active, -1)
        if substitute is None:
            pre.add_(gates[read, :n_active])
        else:  # the last row, u = s, reads the substitute
            pre[:-1].add_(gates[read, :n_active])
            pre[-1].add_(substitute)
        lstm_step(pre, c[rows], out=(h[rows], c[rows]))
        completed = rows
        if substitute is not None:
            own[step, :n_active] = h[step]
            completed = slice(done, step)
        if completed.stop > completed.start:
            values = h[completed] @ readout.new[direction] + known[read, :n_active]  # [rows, B', k + C]
            score = readout.score(values[..., : readout.width]).masked_fill_(excluded[read, :n_active], float("-inf"))
            acc.add((completed, slice(0, n_active)), score, torch.ones_like(score), values[..., readout.classes])
        row_steps += (step + 1 - done) * n_active
        n_next = active[step + 1] if step + 1 < len(active) else 0
        if n_next and tolerance > 0 and step % FADE_CHECK_EVERY == 0:
            original = (hidden[read, :n_next], cells[read, :n_next])
            settled = settled_rows((h[rows, :n_next], c[rows, :n_next]), original, tolerance)
            if settled:  # the rest of their softmax: the original tokens read after token ``read``
                acc.add(slice(done, done + settled), *(x[read + 1] for x in suffix))
                done += settled
    return acc, row_steps, own


class ReusedStates:
    """What every deletion and every occlusion of a batch shares (:func:`supports` must hold): the instances
    sorted by decreasing length (``inverse`` restores the order), each direction's original input gates and
    states in its reading order, the readout of the unchanged half per position, the undeleted logits (the
    model's head on these states, so no second encoder pass), the positions outside the attention's support
    and, with ``tolerance`` > 0, the original readout aggregated from each reading's end (where a faded row
    takes the rest of its softmax)."""

    def __init__(self, model, batch: Batch, tolerance: float):
        order = torch.argsort(batch.lengths, descending=True, stable=True)  # active instances: a leading block
        self.batch, self.inverse = batch.select(order), torch.argsort(order)
        self.model, self.tolerance = model, tolerance
        encoder, mask = model.encoder, self.batch.mask
        self.width, self.lengths = mask.shape[1], mask.sum(dim=1)
        embedded = model.embed(self.batch)
        real = mask.t()[:, :, None].to(embedded.dtype)
        reverse = encoder.reversal(mask)[..., 0].t()  # [T, B]: backward reading order ↔ position (an involution)
        self.in_order = {"forward": lambda x: x, "backward": lambda x: gather_positions(x, reverse)}
        self.read = {}  # per direction, in its reading order: input gates, h, c (0 on padding)
        for direction in ("forward", "backward"):
            gates, h, c = original_states(encoder, model.embedding, self.batch.tokens, mask, direction == "backward")
            self.read[direction] = (gates, h * real, c * real)
        hidden = {direction: self.in_order[direction](self.read[direction][1]) for direction in self.read}
        query = model.encode_query(self.batch)
        self.readout = Readout(model, embedded, mask, hidden, query)
        states = model._with_embeddings(
            torch.cat([hidden["forward"], hidden["backward"]], -1).transpose(0, 1), embedded, mask
        )
        self.as_is = model.decode(states, model.attend(states, self.batch, query), query)  # the undeleted instances
        support = model.attention.support(self.batch)
        self.excluded = (mask & ~support).t()  # the markers α is 0 on (a deletion leaves an instance its content)
        self.suffix = {direction: None for direction in self.read}
        if tolerance > 0:  # the original sequence's readout per position, aggregated from each reading's end
            values = hidden["forward"] @ self.readout.new["forward"] + self.readout.known["forward"]  # [T, B, k + C]
            scores = self.readout.score(values[..., : self.readout.width]).masked_fill(~support.t(), float("-inf"))
            for direction in self.read:
                self.suffix[direction] = running_aggregates(
                    self.in_order[direction](scores),
                    self.in_order[direction](values[..., self.readout.classes]),
                    reverse=True,
                )

    def resume(self, substitute: dict | None = None) -> tuple[SoftmaxAccumulator, int, dict]:
        """Every deletion (``substitute``: every occlusion, with per direction the gates of what takes a token's
        place) in both directions (:func:`resume_rows`), merged by position: row t is the forward reading's row t
        and the backward reading's row L − 1 − t. Returns that softmax ``[T, B]``, the states computed and each
        direction's ``own`` states."""
        first_step = 1 if substitute is None else 0  # a deletion's step s reads token s + 1, an occlusion's s
        steps = torch.arange(first_step, self.width + first_step, device=self.lengths.device)
        active = (self.lengths[None, :] > steps[:, None]).sum(1).tolist()  # instances with that token, per step
        accumulated, own, row_steps = {}, {}, 0
        for direction, (gates, h, c) in self.read.items():
            w_hh = sigmoid_gates_first(self.model.encoder.weights(0, direction == "backward")[1]).t()
            accumulated[direction], computed, own[direction] = resume_rows(
                gates,
                h,
                c,
                w_hh,
                active,
                self.readout,
                direction,
                self.in_order[direction](self.readout.known[direction]),
                self.in_order[direction](self.excluded),
                self.suffix[direction],
                self.tolerance,
                None if substitute is None else substitute[direction],
            )
            row_steps += computed
        merged = accumulated["forward"]
        merged.add(slice(None), *(self.in_order["backward"](x) for x in accumulated["backward"].fields()))
        return merged, row_steps, own


def deletion_outputs(
    model, batch: Batch, tolerance: float = 0.0, stats: dict | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of every instance of ``batch`` as it is ``[B, C]`` (the model's head on the states computed here,
    so no second encoder pass) and with its token t deleted ``[T, B, C]``, for every position t (:func:`supports`
    must hold; entries with t beyond an instance's length are unspecified; an instance left empty gets NaN).
    ``tolerance`` > 0 stops a deletion's recursion once its states are that close (max |Δh|, |Δc|) to the
    original states (module docstring); ``stats["row_steps"]`` counts the recomputed (deletion × instance × step)
    states, Σ L(L − 1) without fading."""
    with torch.no_grad():
        shared = ReusedStates(model, batch, tolerance)
        merged, row_steps, _ = shared.resume()
        deleted = shared.readout.finish(merged.logits())
    if stats is not None:
        stats["row_steps"] = stats.get("row_steps", 0) + row_steps
    return shared.as_is[shared.inverse], deleted[:, shared.inverse]


def occlusion_outputs(
    model, batch: Batch, tolerance: float = 0.0, stats: dict | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits of every instance as it is ``[B, C]`` and with the embedding of its token t zeroed ``[T, B, C]``
    (occlusion, Bastings & Filippova §3.3 Eq. 5), for every position t, from the states an occlusion leaves
    unchanged as for a deletion (:func:`deletion_outputs`; the same conditions and ``tolerance``): the forward
    states before t and the backward states after t are the original ones, position t reads W_ih·0 = 0 (the gate
    biases alone) and has both halves new, and its embedding's share of h (T&Š's concat and residual) is 0.
    ``stats["row_steps"]``: Σ L(L + 1) without fading."""
    with torch.no_grad():
        shared = ReusedStates(model, batch, tolerance)
        biases = {  # W_ih 0 + b_ih + b_hh
            direction: sum(sigmoid_gates_first(w) for w in model.encoder.weights(0, direction == "backward")[2:])
            for direction in shared.read
        }
        merged, row_steps, own = shared.resume(substitute=biases)  # position t itself pairs the rows' own states
        readout = shared.readout
        values = (
            own["forward"] @ readout.new["forward"]
            + shared.in_order["backward"](own["backward"]) @ readout.new["backward"]
            + readout.offset
        )  # [T, B, k + C]
        score = readout.score(values[..., : readout.width]).masked_fill(shared.excluded, float("-inf"))
        merged.add(slice(None), score, torch.ones_like(score), values[..., readout.classes])
        occluded = readout.finish(merged.logits())
    if stats is not None:
        stats["row_steps"] = stats.get("row_steps", 0) + row_steps
    return shared.as_is[shared.inverse], occluded[:, shared.inverse]


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


class OriginalReadout:
    """What a bounded-window model's local deletions and occlusions keep of the original sequence: its hidden
    states, the attention's query, the decoder's linear part, the attention's support and the softmax aggregates
    of the original positions before and from every position (:func:`running_aggregates`)."""

    def __init__(self, model, batch: Batch):
        self.attention = model.attention
        self.hidden = model.encode(model.embed(batch), batch.mask)
        query = model.encode_query(batch)
        self.attention_query = model.attention_query(query)
        self.linear, self.bias, self.finish = model.linear_readout(query)
        self.support = model.attention.support(batch)
        scores = model.attention.scores(self.hidden, self.attention_query)
        scores = scores.masked_fill(~self.support, float("-inf")).t()  # [T, B]
        self.logits = (self.hidden @ self.linear.t() + self.bias).transpose(0, 1)  # [T, B, D]
        self.before = running_aggregates(scores, self.logits, reverse=False)
        self.after = running_aggregates(scores, self.logits, reverse=True)

    def windows_per_slice(self, window: int, max_elements: int) -> int:
        """How many rows' windows of ``window`` tokens (each over the whole batch) fit ``max_elements`` floats."""
        return max(1, max_elements // (self.hidden.shape[0] * window * self.hidden.shape[-1]))

    def add_windows(self, acc: SoftmaxAccumulator, rows: slice, states: torch.Tensor, kept: torch.Tensor) -> None:
        """Add to ``acc``'s ``rows`` the recomputed states ``[n·B, w, m]`` of their windows: attention scores
        (−∞ where not ``kept`` ``[n, B, w]``) and the decoder's linear part."""
        n_rows, n_batch, n_window = kept.shape
        query = None if self.attention_query is None else self.attention_query.repeat(n_rows, 1)
        scores = self.attention.scores(states, query).view(n_rows, n_batch, n_window)
        scores = scores.masked_fill(~kept, float("-inf"))
        logits = (states @ self.linear.t() + self.bias).view(n_rows, n_batch, n_window, -1)
        ones = torch.ones_like(scores[..., 0])
        for i in range(n_window):
            acc.add(rows, scores[..., i], ones, logits[:, :, i])

    def outside_windows(self, t: torch.Tensor, radius: int) -> SoftmaxAccumulator:
        """A softmax per row t ``[len(t), B]`` holding the original positions before t − ``radius`` and after
        t + ``radius``: what a change at t within that radius leaves as it was."""
        acc = SoftmaxAccumulator(len(t), self.logits.shape[1], self.logits.shape[-1], self.logits)
        acc.add(slice(None), *(x[(t - radius).clamp_min(0)] for x in self.before))
        acc.add(slice(None), *(x[(t + radius + 1).clamp_max(self.logits.shape[0])] for x in self.after))
        return acc


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
        original = OriginalReadout(model, batch)
        markers = torch.as_tensor(model.attention.markers, dtype=batch.tokens.dtype, device=mask.device)
        excludes_markers = (mask & ~original.support).any(dim=1)  # [B]: its markers are outside the support
        t = torch.arange(first, last, device=mask.device)
        acc = original.outside_windows(t, radius)
        if radius:
            span = torch.arange(4 * radius, device=mask.device)
            per = original.windows_per_slice(4 * radius, max_elements)
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
                position = here[:, None] - radius + span[None, : 2 * radius]  # deleted positions j [n, 2r]
                real = (position[:, None, :] >= 0) & (position[:, None, :] < lengths[None, :, None] - 1)
                marker = torch.isin(tokens.view(len(here), n_batch, 4 * radius)[..., radius : 3 * radius], markers)
                original.add_windows(acc, rows, states, real & ~(marker & excludes_markers[None, :, None]))
        return original.finish(acc.logits())


def local_occlusion_logits(model, batch: Batch, max_elements: int = 1 << 24) -> torch.Tensor:
    """Logits ``[T, B, C]`` with the embedding of token t zeroed (occlusion, B&F Eq. 5), for every position t
    (:func:`local_radius` must not be None; entries beyond an instance's length unspecified). With radius r only
    the states of positions t − r … t + r change: they are recomputed on (4r + 1)-token windows around t whose
    centre is zeroed (at most ``max_elements`` embedding floats at a time), and the softmax merges the original
    positions' aggregate before t − r, those 2r + 1 states and the aggregate after t + r, as
    :func:`local_deletion_logits` does for deletions. r = 0 (token-wise encoders): only position t changes."""
    radius = local_radius(model, batch)
    mask, lengths = batch.mask, batch.mask.sum(dim=1)
    n_batch, width = mask.shape
    with torch.no_grad():
        original = OriginalReadout(model, batch)
        t = torch.arange(width, device=mask.device)
        acc = original.outside_windows(t, radius)
        span = torch.arange(4 * radius + 1, device=mask.device)
        per = original.windows_per_slice(4 * radius + 1, max_elements)
        for start in range(0, width, per):
            rows = slice(start, start + per)
            here = t[rows]
            source = here[:, None] - 2 * radius + span[None, :]  # the window's positions [n, 4r + 1]
            inside = (source[:, None, :] >= 0) & (source[:, None, :] < lengths[None, :, None])  # [n, B, 4r + 1]
            tokens = batch.tokens[:, source.clamp(0, width - 1)].transpose(0, 1)  # [n, B, 4r + 1]
            window = Batch(tokens.masked_fill(~inside, model.cfg.pad_index).flatten(0, 1), inside.flatten(0, 1))
            embedded = model.embed(window)
            embedded[:, 2 * radius] = 0.0  # the occluded token, at the centre
            states = model.encode(embedded, window.mask)[:, radius : 3 * radius + 1]  # [n·B, 2r + 1, m]
            position = here[:, None] - radius + span[None, : 2 * radius + 1]  # the changed positions [n, 2r + 1]
            real = (position[:, None, :] >= 0) & (position[:, None, :] < lengths[None, :, None])
            supported = original.support[torch.arange(n_batch)[None, :, None], position.clamp(0, width - 1)[:, None, :]]
            original.add_windows(acc, rows, states, real & supported)
        return original.finish(acc.logits())
