"""FourierFeatures equals the paper's Algorithm 1; W_r is drawn with std 1/γ."""
from __future__ import annotations

import math

import torch

from vispe.encodings import FourierFeatures
from vispe.geometry import Positions


def test_equals_the_formula() -> None:
    encoding = FourierFeatures(embed_dim=12, fourier_dim=8, hidden_dim=5, gamma=2.0)
    pos = Positions((3, 4), num_prefix_tokens=1)
    x = torch.randn(2, 13, 12)
    rows, cols = torch.meshgrid(torch.arange(3.0), torch.arange(4.0), indexing='ij')
    p = torch.stack([rows.flatten() + 0.5, cols.flatten() + 0.5], dim=-1)
    w_r = encoding.freqs.weight
    projected = p @ w_r.T
    features = torch.cat([torch.cos(projected), torch.sin(projected)], dim=-1) / math.sqrt(8)
    first, _, second = encoding.mlp
    pe = second(torch.nn.functional.gelu(first(features)))
    out = encoding.embed(x, pos)
    assert torch.equal(out[:, 0], x[:, 0])
    assert torch.allclose(out[:, 1:], x[:, 1:] + pe, atol=1e-6)


def test_w_r_std_is_one_over_gamma() -> None:
    encoding = FourierFeatures(embed_dim=8, fourier_dim=20000, gamma=10.0)
    assert abs(encoding.freqs.weight.std().item() - 0.1) < 0.003


def test_normalised_positions_are_patch_centres_over_the_grid() -> None:
    encoding = FourierFeatures(embed_dim=8, normalize=True)
    positions = encoding.positions(Positions((2, 4)))
    assert torch.allclose(positions[0], torch.tensor([0.25, 0.125]))
    assert torch.allclose(positions[-1], torch.tensor([0.75, 0.875]))


def test_defaults() -> None:
    encoding = FourierFeatures(embed_dim=64)
    assert encoding.fourier_dim == 64 and encoding.mlp[0].out_features == 32 and encoding.gamma == 10.0
