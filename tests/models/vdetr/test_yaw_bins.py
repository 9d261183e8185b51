"""3DETR's heading code: bins centred at k·2π/K, residuals in half-bins, and its round trip."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.models.vdetr import decode_yaw, yaw_bin_targets


def test_bins_and_residuals_by_hand() -> None:
    step = math.pi / 6  # 12 bins of 30°
    yaw = torch.tensor([0.0, step / 2 - 1e-4, step / 2, -step / 2, math.pi, -math.pi, 2 * step + step / 4])
    bins, residuals = yaw_bin_targets(yaw, 12)
    assert bins.tolist() == [0, 0, 1, 0, 6, 6, 2]
    assert residuals.tolist() == pytest.approx([0.0, 1.0, -1.0, -1.0, 0.0, 0.0, 0.5], abs=1e-3)


@pytest.mark.parametrize('num_bins', [1, 4, 12])
def test_targets_decode_back_to_the_yaw(num_bins: int) -> None:
    yaw = (torch.rand(200, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 2 - 1) * math.pi
    bins, residuals = yaw_bin_targets(yaw, num_bins)
    assert ((residuals >= -1) & (residuals < 1)).all() and bins.max() < num_bins
    logits = torch.nn.functional.one_hot(bins, num_bins).double()
    decoded = decode_yaw(logits, residuals[:, None].expand(-1, num_bins))
    assert ((decoded >= -math.pi) & (decoded < math.pi)).all()
    assert torch.allclose(torch.remainder(decoded - yaw + math.pi, 2 * math.pi) - math.pi,
                          torch.zeros_like(yaw), atol=1e-9)


def test_half_precision_codes_decode_in_float32() -> None:
    logits = torch.nn.functional.one_hot(torch.tensor([11]), 12).bfloat16()
    residuals = torch.full((1, 12), 0.9).bfloat16()
    yaw = decode_yaw(logits, residuals)
    assert yaw.dtype == torch.float32
    assert float(yaw) == pytest.approx(11 * math.pi / 6 + float(residuals[0, 0]) * math.pi / 12 - 2 * math.pi, abs=1e-6)
