"""TC-GS's adaptive wavelet loss: parity with the reference at five training steps (tests/data/tcgs_wavelet_parity.pt),
zero on identical images, a hand value, and the schedule's weights on the bands."""
from __future__ import annotations

import sys

import pytest
import torch

from vispe.gaussians.wavelet import haar_dwt, wavelet_loss

from ..conftest import REPO_ROOT


def test_parity_with_the_reference_at_every_phase_of_the_schedule() -> None:
    golden = torch.load(REPO_ROOT / 'tests' / 'data' / 'tcgs_wavelet_parity.pt', weights_only=True)
    losses = torch.stack([wavelet_loss(golden['render'], golden['target'], int(step)) for step in golden['steps']])
    torch.testing.assert_close(losses, golden['losses'], atol=1e-6, rtol=1e-5)
    assert 'pkg_resources' not in sys.modules or hasattr(sys.modules['pkg_resources'], 'working_set')


def test_zero_on_identical_images_and_a_hand_value() -> None:
    image = torch.rand(3, 16, 20, generator=torch.Generator().manual_seed(0))
    assert all(wavelet_loss(image, image.clone(), step).item() == 0 for step in (0, 12_000, 28_000))
    # one pixel off by δ in a 4x4 image: the level-2 low band is the sum / 4 (1/2 per level), so at step 0 the loss
    # is δ/4; half-way it is (1/2)·δ/4 + (1/2)·0.2·(three level-1 bands of δ/2 over 4 cells + three level-2 of δ/4)
    delta = 0.8
    target = torch.zeros(1, 4, 4)
    render = target.clone()
    render[0, 0, 0] = delta
    assert wavelet_loss(render, target, 0).item() == pytest.approx(delta / 4)
    expected = 0.5 * delta / 4 + 0.5 * 0.2 * (3 * (delta / 2) / 4 + 3 * delta / 4)
    assert wavelet_loss(render, target, 15_000).item() == pytest.approx(expected)


def test_the_schedule_weights_the_bands() -> None:
    generator = torch.Generator().manual_seed(1)
    render, target = torch.rand(2, 3, 12, 12, generator=generator)
    (low_r, (one_r, two_r)), (low_t, (one_t, two_t)) = haar_dwt(render[None]), haar_dwt(target[None])
    one = [(one_r[0, :, i] - one_t[0, :, i]).abs().mean() for i in range(3)]
    two = [(two_r[0, :, i] - two_t[0, :, i]).abs().mean() for i in range(3)]
    low = (low_r - low_t).abs().mean()
    assert wavelet_loss(render, target, 6_000).item() == pytest.approx((0.8 * low + 0.2 * 0.2 * sum(one + two)).item())
    late = 0.1 * (0.4 * one[0] + 0.3 * one[1] + 0.3 * one[2]) + 0.9 * (0.4 * two[0] + 0.3 * two[1] + 0.3 * two[2])
    assert wavelet_loss(render, target, 27_000).item() == pytest.approx(late.item())
    with pytest.raises(ValueError, match=r'\(C, H, W\)'):
        wavelet_loss(render[None], target[None], 0)
