"""Layer-wise relevance propagation, LRP-ε (Bach et al. 2015; Arras et al. 2017), Bastings & Filippova (2020)
§3.2: a forward pass gives the top-level relevance f_c(x); a special backward pass redistributes it layer by
layer down to the word embeddings; the relevance of token i is the sum over its embedding dimensions.

Captum's ``LRP`` has no rules for ``nn.LSTM``, ``nn.Conv1d`` over sequences or ``nn.Embedding``, so the rules are
written out here. With stab(z) = z + ε·sign(z) (sign(0) = +1):

* **Linear / Conv1d, ε-rule** (Bach et al. 2015): for z_k = Σ_j a_j w_jk + b_k, R_j = Σ_k a_j w_jk R_k / stab(z_k).
  The bias and ε absorb Σ_k R_k (b_k + ε·sign z_k) / stab(z_k). Conv1d uses the same rule through autograd
  (R_x = x ⊙ convᵀ(R / stab(z))), an exact transpose of the convolution.
* **ReLU**: identity for relevance (an inactive unit has output 0, hence no relevance).
* **Decoder**: the top relevance is f_c = w·h_α + b for the predicted class c (``output="margin"``: w, b are the
  decoder row of c minus the mean of the other rows — the identified log-odds, see ``_forward``; ``"logit"``:
  the row of c). Then the ε-rule.
* **J&W's QA/NLI decoder** f_c = w·tanh(u) + b, u = W₁p h_α + b₁ + W₁q q (§2): the ε-rule from f_c to tanh(u),
  tanh as identity (as the LSTM's g below), then the ε-rule on u, whose bias and query share W₁q q absorb their
  part: the query is held fixed, as every saliency method here holds it. The margin's mean runs over every other
  class, candidates or not; the explained class is the predicted one, a candidate.
* **Attention-weighted sum** h_α = Σ_t α_t h_t: α is held constant (a weight, not an input), so
  R_{h_tj} = α_t h_tj R_{h_α,j} / stab(h_α,j): relevance goes to h_t in proportion to its contribution α_t h_t.
* **BiLSTM** (Arras et al. 2017, "signal-take-all"), per direction, for c_t = f_t ⊙ c_{t−1} + i_t ⊙ g_t,
  h_t = o_t ⊙ tanh(c_t), g_t = tanh(W_g x_t + U_g h_{t−1} + b_g): h_t passes all its relevance to c_t (the
  output gate gets none); c_t splits it between c_{t−1} and i_t ⊙ g_t by the ε-rule on the sum (the input gate
  gets none: the signal g_t takes all); g_t's relevance (tanh as identity) goes to x_t and h_{t−1} by the
  ε-rule on its pre-activation. The gates i, f, o never receive relevance. Directions run on the real tokens
  only, as the packed LSTM does; the backward direction starts at each instance's last real token.

Conservation: Σ_{t,d} R(e_td) = f_c − (relevance absorbed by biases and ε), exactly up to rounding;
:func:`lrp_relevance` returns both terms so the tests check it per encoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from attnaudit import AttnauditError
from attnaudit.importance.registry import ImportanceMethod, UnsupportedArchitecture, register
from attnaudit.models import AttentionClassifier, Batch
from attnaudit.models.encoders import LSTMEncoder, reverse_within_lengths

LRP_OUTPUTS = ("margin", "logit")


@dataclass
class Relevance:
    embedded: torch.Tensor  # [B, T, d] relevance of every embedding entry
    score: torch.Tensor  # [B] f_c, the top-level relevance
    absorbed: torch.Tensor  # [B] relevance absorbed by biases and the ε stabiliser
    target: torch.Tensor  # [B] the explained (predicted) class

    @property
    def tokens(self) -> torch.Tensor:
        return self.embedded.sum(dim=-1)


def _sign(z: torch.Tensor) -> torch.Tensor:
    return torch.where(z >= 0, 1.0, -1.0).to(z.dtype)


def _stab(z: torch.Tensor, eps: float) -> torch.Tensor:
    return z + eps * _sign(z)


# -- BiLSTM (Arras et al. 2017) ----------------------------------------------------------------------------------
@dataclass
class _LSTMTrace:
    i: torch.Tensor  # [B, T, H] input gate
    f: torch.Tensor  # forget gate
    g: torch.Tensor  # candidate tanh(z_g)
    z_g: torch.Tensor  # candidate pre-activation
    c: torch.Tensor  # cell states
    h: torch.Tensor  # hidden states


def _lstm_forward(x: torch.Tensor, w_ih, w_hh, b_ih, b_hh) -> _LSTMTrace:
    """One direction of ``nn.LSTM`` (gate order i, f, g, o) with every intermediate kept; zero initial state."""
    batch, width, _ = x.shape
    hidden = w_hh.shape[1]
    projected = x @ w_ih.T + b_ih  # [B, T, 4H]: the input part of every step at once
    h = x.new_zeros(batch, hidden)
    c = x.new_zeros(batch, hidden)
    trace = {k: [] for k in ("i", "f", "g", "z_g", "c", "h")}
    for t in range(width):  # the recurrence itself is sequential
        z = projected[:, t] + h @ w_hh.T + b_hh
        z_i, z_f, z_g, z_o = z.chunk(4, dim=-1)
        i, f, g, o = torch.sigmoid(z_i), torch.sigmoid(z_f), torch.tanh(z_g), torch.sigmoid(z_o)
        c = f * c + i * g
        h = o * torch.tanh(c)
        for key, value in (("i", i), ("f", f), ("g", g), ("z_g", z_g), ("c", c), ("h", h)):
            trace[key].append(value)
    return _LSTMTrace(**{k: torch.stack(v, dim=1) for k, v in trace.items()})


def _lstm_relevance(
    x: torch.Tensor, trace: _LSTMTrace, w_ih, w_hh, b_ih, b_hh, relevance_h: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Signal-take-all LRP-ε through one direction: relevance of h_t [B,T,H] → relevance of x_t [B,T,d]."""
    hidden = w_hh.shape[1]
    cand = slice(2 * hidden, 3 * hidden)
    w_gx, w_gh, b_g = w_ih[cand], w_hh[cand], b_ih[cand] + b_hh[cand]
    relevance_x = torch.zeros_like(x)
    absorbed = x.new_zeros(x.shape[0])
    from_h = x.new_zeros(x.shape[0], hidden)  # relevance of h_t arriving from step t+1
    from_c = x.new_zeros(x.shape[0], hidden)  # relevance of c_t arriving from step t+1
    for t in reversed(range(x.shape[1])):
        c_prev = trace.c[:, t - 1] if t > 0 else torch.zeros_like(from_c)
        h_prev = trace.h[:, t - 1] if t > 0 else torch.zeros_like(from_h)
        r_c = relevance_h[:, t] + from_h + from_c  # h_t = o ⊙ tanh(c_t): all of h_t's relevance goes to c_t
        s = r_c / _stab(trace.c[:, t], eps)
        from_c = trace.f[:, t] * c_prev * s  # c_t = f ⊙ c_{t−1} + i ⊙ g: ε-rule on the sum
        r_g = trace.i[:, t] * trace.g[:, t] * s  # the signal g takes all of i ⊙ g's share
        absorbed += (s * eps * _sign(trace.c[:, t])).sum(dim=-1)
        s_g = r_g / _stab(trace.z_g[:, t], eps)  # tanh as identity; ε-rule on z_g = W_g x + U_g h + b_g
        relevance_x[:, t] = x[:, t] * (s_g @ w_gx)
        from_h = h_prev * (s_g @ w_gh)
        absorbed += (s_g * (b_g + eps * _sign(trace.z_g[:, t]))).sum(dim=-1)
    return relevance_x, absorbed


class _LSTMRule:
    def __init__(self, model: AttentionClassifier, embedded: torch.Tensor, mask: torch.Tensor):
        rnn = model.encoder.rnn
        if rnn.num_layers != 1 or not rnn.bidirectional or not rnn.batch_first:
            raise AttnauditError("LRP supports the single-layer batch-first BiLSTM of J&W A.1")
        self.x, self.mask = embedded, mask
        self.params = [
            tuple(getattr(rnn, f"{name}_l0{suffix}") for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"))
            for suffix in ("", "_reverse")
        ]
        self.rev = LSTMEncoder.reversal(mask)
        self.forward_trace = _lstm_forward(embedded, *self.params[0])
        self.backward_trace = _lstm_forward(reverse_within_lengths(embedded, self.rev), *self.params[1])

    def hidden(self) -> torch.Tensor:
        h = torch.cat([self.forward_trace.h, reverse_within_lengths(self.backward_trace.h, self.rev)], dim=-1)
        return h * self.mask.unsqueeze(-1)  # the packed LSTM outputs zeros on padding

    def relevance(self, relevance_h: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        half = relevance_h.shape[-1] // 2
        r_fwd, a_fwd = _lstm_relevance(self.x, self.forward_trace, *self.params[0], relevance_h[..., :half], eps)
        r_bwd, a_bwd = _lstm_relevance(
            reverse_within_lengths(self.x, self.rev),
            self.backward_trace,
            *self.params[1],
            reverse_within_lengths(relevance_h[..., half:], self.rev),
            eps,
        )
        return r_fwd + reverse_within_lengths(r_bwd, self.rev), a_fwd + a_bwd


# -- CNN and average encoders: ε-rule through Conv1d / Linear, ReLU as identity ----------------------------------
class _CNNRule:
    def __init__(self, model: AttentionClassifier, embedded: torch.Tensor, mask: torch.Tensor):
        self.convs = model.encoder.convs
        self.x = (embedded * mask.unsqueeze(-1)).transpose(1, 2)  # [B, d, T], as CNNEncoder.forward
        self.z = [conv(self.x) for conv in self.convs]  # pre-activations [B, F, T]

    def hidden(self) -> torch.Tensor:
        return torch.cat([torch.relu(z) for z in self.z], dim=1).transpose(1, 2)

    def relevance(self, relevance_h: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        relevance_x = torch.zeros_like(self.x)
        absorbed = self.x.new_zeros(self.x.shape[0])
        for conv, z, r in zip(
            self.convs, self.z, relevance_h.transpose(1, 2).split([z.shape[1] for z in self.z], dim=1)
        ):
            s = r / _stab(z, eps)
            with torch.enable_grad():
                x = self.x.detach().requires_grad_(True)
                (transposed,) = torch.autograd.grad(conv(x), x, grad_outputs=s)  # convᵀ(s)
            relevance_x += self.x * transposed
            absorbed += (s * (conv.bias[None, :, None] + eps * _sign(z))).sum(dim=(1, 2))
        return relevance_x.transpose(1, 2), absorbed


class _TokenwiseRule:
    """J&W's average encoder (ReLU) and W&P's diagnostic MLP (tanh): ε-rule through the affine layer, the
    activation passed as identity (Arras et al. 2017 treat tanh so)."""

    def __init__(self, model: AttentionClassifier, embedded: torch.Tensor, mask: torch.Tensor):
        self.proj, self.activation, self.x = model.encoder.proj, model.encoder.activation, embedded
        self.z = self.proj(embedded)

    def hidden(self) -> torch.Tensor:
        return self.activation(self.z)

    def relevance(self, relevance_h: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
        s = relevance_h / _stab(self.z, eps)
        absorbed = (s * (self.proj.bias + eps * _sign(self.z))).sum(dim=(1, 2))
        return self.x * (s @ self.proj.weight), absorbed


_RULES = {"lstm": _LSTMRule, "cnn": _CNNRule, "average": _TokenwiseRule, "mlp": _TokenwiseRule}


@torch.no_grad()
def lrp_relevance(
    model: AttentionClassifier,
    batch: Batch,
    epsilon: float = 1e-3,
    output: str = "margin",
    target: torch.Tensor | None = None,
) -> Relevance:
    """LRP-ε relevance of every embedding entry for the predicted class (or ``target``), with the conservation
    terms (see the module docstring)."""
    if output not in LRP_OUTPUTS:
        raise AttnauditError(f"lrp output must be one of {LRP_OUTPUTS}, got {output!r}")
    if model.cfg.lstm_layers != 1 and model.cfg.encoder == "lstm":
        raise UnsupportedArchitecture(f"lrp supports one BiLSTM layer, not {model.cfg.lstm_layers} (T&Š App. B)")
    if model.cfg.hidden_mode != "plain":
        raise UnsupportedArchitecture(
            f"lrp has no rule for {model.cfg.hidden_mode} hidden states (T&Š §3.1) in this implementation"
        )
    mask = batch.mask
    embedded = model.embed(batch)
    rule = _RULES[model.cfg.encoder](model, embedded, mask)
    hidden = rule.hidden()
    query = model.encode_query(batch)
    alpha = model.attend(hidden, batch, query)
    context = torch.einsum("bt,btm->bm", alpha, hidden)
    if model.linear_decoder:
        top, weight, bias = context, model.decoder.weight, model.decoder.bias
        logits = top @ weight.T + bias
    else:  # QA/NLI: u = W₁p h_α + b₁ + W₁q q, f = W₂ tanh(u) + b₂, answered among the candidates
        q, allowed = model.split_query(query)
        fixed = model.w_passage.bias + model.w_query(q)
        u = context @ model.w_passage.weight.T + fixed
        top, weight, bias = torch.tanh(u), model.output.weight, model.output.bias
        logits = (top @ weight.T + bias).masked_fill(allowed == 0, float("-inf"))
    target = logits.argmax(dim=-1) if target is None else target
    w, b = weight[target], bias[target]
    n_classes = weight.shape[0]
    if output == "margin" and n_classes > 1:
        w = w - (weight.sum(dim=0) - w) / (n_classes - 1)
        b = b - (bias.sum() - b) / (n_classes - 1)
    score = (top * w).sum(dim=-1) + b

    # decoder: ε-rule from the score to its input (h_α, or the QA decoder's tanh(u))
    s = score / _stab(score, epsilon)
    relevance_context = top * w * s[:, None]
    absorbed = s * (b + epsilon * _sign(score))
    if not model.linear_decoder:  # tanh as identity, then the ε-rule on u; b₁ and the query's share absorb theirs
        s = relevance_context / _stab(u, epsilon)
        relevance_context = context * (s @ model.w_passage.weight)
        absorbed += (s * (fixed + epsilon * _sign(u))).sum(dim=-1)
    # attention-weighted sum, α constant
    s = relevance_context / _stab(context, epsilon)
    relevance_h = alpha.unsqueeze(-1) * hidden * s.unsqueeze(1)
    absorbed += (s * epsilon * _sign(context)).sum(dim=-1)
    # encoder
    relevance_e, absorbed_encoder = rule.relevance(relevance_h, epsilon)
    relevance_e = relevance_e * mask.unsqueeze(-1)
    return Relevance(relevance_e, score, absorbed + absorbed_encoder, target)


@register
class LRP(ImportanceMethod):
    name = "lrp"
    signed = True
    citation = "Bastings & Filippova 2020, §3.2 (LRP-ε: Bach et al. 2015; LSTM rule: Arras et al. 2017)"

    def __init__(self, epsilon: float = 1e-3, output: str = "margin"):
        if output not in LRP_OUTPUTS:
            raise AttnauditError(f"lrp output must be one of {LRP_OUTPUTS}, got {output!r}")
        self.epsilon, self.output = float(epsilon), output

    def attribute(self, model, batch):
        with torch.backends.cudnn.flags(enabled=False):
            relevance = lrp_relevance(model, batch, self.epsilon, self.output)
        return relevance.tokens.masked_fill(~batch.mask, 0.0)
