"""Adam as ``torch.optim.Adam`` computes it, without the import of ``torch._dynamo`` that ``torch.optim`` makes on
first use.

``torch.optim.Optimizer`` imports ``torch._dynamo`` (and with it SymPy) the first time an optimiser is built or
stepped, to mark its methods as not to be compiled: 1.4–2.0 CPU s per process on the Zen 3 EPYC of
docs/performance.md, paid by every training job and every J&W adversarial job — a quarter of a small training job,
more than a third of an adversarial chunk.
This class keeps the optimiser's state as ``torch.optim.Adam._init_group`` does and calls the same update,
``torch.optim.adam.adam`` (PyTorch's functional Adam, which ``torch.optim.Adam.step`` calls too), so the numbers are
the same to the bit (``tests/test_adam.py`` steps both side by side); it only leaves out what the pipeline does not
use (closures, complex or sparse parameters, gradient scaling, capturable and differentiable modes, state dicts).
"""

from __future__ import annotations

import torch
from torch.optim.adam import adam


class Adam:
    """``torch.optim.Adam(params, lr=…, weight_decay=…, amsgrad=…, fused=…)`` for real dense parameters: ``params``
    is an iterable of tensors or of parameter groups (dicts with ``params`` and any of the per-group options), as
    for ``torch.optim``; ``param_groups`` and ``state`` are kept the same way."""

    def __init__(
        self,
        params,
        *,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
        amsgrad: bool = False,
        fused: bool | None = None,
    ):
        groups = list(params)
        if not groups:
            raise ValueError("Adam got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad, fused=fused)
        self.param_groups = [{**defaults, **group, "params": list(group["params"])} for group in groups]
        self.state: dict[torch.Tensor, dict[str, torch.Tensor]] = {}

    def zero_grad(self) -> None:
        """Forget every parameter's gradient (``set_to_none=True``, torch.optim's default)."""
        for group in self.param_groups:
            for p in group["params"]:
                p.grad = None

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient, group by group."""
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._state(p, group) for p in params]
            beta1, beta2 = group["betas"]
            adam(
                params,
                [p.grad for p in params],
                [s["exp_avg"] for s in states],
                [s["exp_avg_sq"] for s in states],
                [s["max_exp_avg_sq"] for s in states] if group["amsgrad"] else [],
                [s["step"] for s in states],
                fused=group["fused"],
                amsgrad=group["amsgrad"],
                beta1=beta1,
                beta2=beta2,
                lr=group["lr"],
                weight_decay=group["weight_decay"],
                eps=group["eps"],
                maximize=False,
            )

    def _state(self, p: torch.Tensor, group: dict) -> dict[str, torch.Tensor]:
        """``p``'s moments and step count, made on its first update as ``torch.optim.Adam._init_group`` makes them:
        the step count on ``p``'s device in float32 when fused, else on the CPU in float64 if that is the default
        float type, float32 otherwise."""
        if p.grad.is_sparse or torch.is_complex(p):
            raise ValueError("attnaudit.adam.Adam takes real dense parameters and gradients only")
        if p not in self.state:
            if group["fused"]:
                step = torch.zeros((), dtype=torch.float32, device=p.device)
            else:
                scalar = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
                step = torch.tensor(0.0, dtype=scalar, device="cpu")
            state = {"step": step, "exp_avg": torch.zeros_like(p), "exp_avg_sq": torch.zeros_like(p)}
            if group["amsgrad"]:
                state["max_exp_avg_sq"] = torch.zeros_like(p)
            self.state[p] = state
        return self.state[p]
