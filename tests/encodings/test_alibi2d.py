"""ALiBi2D: the closed form on a small grid, and its test-time distance scale."""
from __future__ import annotations

import math

import torch

from vispe.encodings import ALiBi2D
from vispe.geometry import Positions


def test_closed_form_on_a_small_grid() -> None:
    encoding = ALiBi2D(num_heads=2, num_prefix_tokens=1)
    pos = Positions((2, 3), num_prefix_tokens=1)
    bias = encoding.logits_bias(None, None, pos, pos, 0)
    assert bias.shape == (1, 2, 7, 7)
    slopes = [2 ** -4, 2 ** -8]
    # token 1 = (0, 0), token 6 = (1, 2): distance sqrt(5)
    for head, slope in enumerate(slopes):
        assert math.isclose(bias[0, head, 1, 6].item(), -slope * math.sqrt(5), rel_tol=1e-6)
        assert math.isclose(bias[0, head, 2, 4].item(), -slope * math.sqrt(2), rel_tol=1e-6)
    assert torch.all(bias[0, :, 0] == 0) and torch.all(bias[0, :, :, 0] == 0)
    assert torch.all(bias[0, :, 1:, 1:].diagonal(dim1=-2, dim2=-1) == 0)


def test_distance_scale_is_a_test_time_option() -> None:
    encoding = ALiBi2D(num_heads=4, num_prefix_tokens=0)
    pos = Positions((3, 3))
    base = encoding.bias(pos)
    encoding.distance_scale = 0.5
    assert torch.allclose(encoding.bias(Positions((3, 3))), base * 0.5)
