"""attnaudit.adam.Adam against torch.optim.Adam: the same parameters, moments and step counts after the same
gradients, to the bit; and no import of torch._dynamo (the reason it exists)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from attnaudit.adam import Adam


def parameters(seed: int) -> list[torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = [(50, 8), (8,), (3, 4, 5)]  # an embedding-like matrix, a bias, a 3-d tensor
    return [torch.randn(shape, generator=generator).requires_grad_() for shape in shapes]


def grouped(params: list[torch.Tensor], split: bool) -> list:
    """One group, or two with their own weight decay and learning rate (train.training.adam's attention group)."""
    if not split:
        return params
    return [{"params": params[:2]}, {"params": params[2:], "weight_decay": 0.0, "lr": 0.03}]


@pytest.mark.parametrize("fused", [True, None], ids=["fused", "default"])
@pytest.mark.parametrize("amsgrad", [False, True], ids=["adam", "amsgrad"])
@pytest.mark.parametrize("split", [False, True], ids=["one-group", "two-groups"])
def test_adam_steps_as_torch_optim_adam(fused, amsgrad, split):
    ours_params, torch_params = parameters(0), parameters(0)
    options = dict(lr=0.01, weight_decay=1e-3, amsgrad=amsgrad, fused=fused)
    ours = Adam(grouped(ours_params, split), **options)
    reference = torch.optim.Adam(grouped(torch_params, split), **options)
    generator = torch.Generator().manual_seed(1)
    for step in range(25):
        grads = [torch.randn(p.shape, generator=generator) for p in ours_params]
        for i, (a, b, g) in enumerate(zip(ours_params, torch_params, grads)):
            if step % 7 == 3 and i == 1:  # a parameter without a gradient this step is left alone
                a.grad = b.grad = None
            else:
                a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        reference.step()
        ours.zero_grad()
        reference.zero_grad()
    for a, b in zip(ours_params, torch_params):
        assert torch.equal(a, b)
        assert a.grad is None and b.grad is None
        mine, theirs = ours.state[a], reference.state[b]
        assert mine.keys() == theirs.keys()
        for key in theirs:
            assert mine[key].dtype == theirs[key].dtype and mine[key].device == theirs[key].device, key
            assert torch.equal(mine[key], theirs[key]), key


def test_adam_leaves_torch_dynamo_unimported():
    """torch.optim imports torch._dynamo when an optimiser is first built or stepped; this Adam does not (a fresh
    interpreter, since pytest's own process may have imported it already)."""
    program = (
        "import sys, torch\n"
        "from attnaudit.adam import Adam\n"
        "p = torch.zeros(3, requires_grad=True)\n"
        "optimiser = Adam([p], lr=0.1, amsgrad=True, fused=True)\n"
        "p.grad = torch.ones(3)\n"
        "optimiser.step()\n"
        "optimiser.zero_grad()\n"
        "assert p.grad is None and float(p[0]) != 0.0\n"
        "print(sorted(m for m in ('torch._dynamo', 'sympy') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]", proc.stdout


def test_adam_refuses_what_it_does_not_compute():
    p = torch.zeros(2, dtype=torch.complex64, requires_grad=True)
    optimiser = Adam([p])
    p.grad = torch.ones(2, dtype=torch.complex64)
    with pytest.raises(ValueError, match="real dense"):
        optimiser.step()
    with pytest.raises(ValueError, match="empty"):
        Adam([])
