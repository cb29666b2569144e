"""Gradient x input and integrated gradients through Captum, against closed forms: a linear
function's attributions are ``w * x`` exactly, and integrated gradients add up to
``f(x) - f(0)`` for a nonlinear one."""

from __future__ import annotations

import pytest
import torch

from attnkit.errors import UsageError
from attnkit.explain.captum import explain_methods, grad_x_input, integrated_gradients

pytest.importorskip("captum")


def test_linear_function_closed_form():
    w = torch.tensor([[1.0, -2.0, 0.5], [0.0, 3.0, 1.0]])         # 2 outputs

    def forward(x):
        return x @ w.T                                          # [batch, 2]
    x = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])
    gi = grad_x_input(forward, x, target=[0, 1])
    assert torch.allclose(gi, x * w[[0, 1]])
    ig, delta = integrated_gradients(forward, x, target=[0, 1], steps=8)
    assert torch.allclose(ig, x * w[[0, 1]], atol=1e-6) and delta.abs().max() < 1e-5


def test_integrated_gradients_completeness():
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    x = torch.randn(3, 4)
    ig, delta = integrated_gradients(net, x, target=0, steps=64)
    with torch.no_grad():
        gap = net(x)[:, 0] - net(torch.zeros_like(x))[:, 0]
    assert torch.allclose(ig.sum(-1), gap, atol=1e-3)
    assert delta.abs().max() < 1e-3


def test_unknown_method():
    with pytest.raises(UsageError, match="--explain must be among"):
        explain_methods("attention,lime", ("attention", "grad-input"))
