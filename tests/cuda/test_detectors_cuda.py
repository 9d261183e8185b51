"""The detectors of every config family on CUDA: DETR, PETR and V-DETR forward in eval and training mode with inputs
on the GPU, and never wait for the host (``torch.cuda.set_sync_debug_mode('error')``) after the first forward,
which makes the tables and constants."""
from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

from ..models.vdetr.test_detector import scenes, small_detector
from ..test_host_sync import DETR_CONFIGS, PETR_CONFIGS, POINT_ENCODINGS, build


def without_host_waits(forward: Callable[[], dict]) -> dict:
    forward()
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode('error')
    try:
        outputs = forward()
    finally:
        torch.cuda.set_sync_debug_mode('default')
    return outputs


def assert_finite(outputs: dict) -> None:
    assert all(torch.isfinite(value).all() for value in outputs.values() if isinstance(value, torch.Tensor))


@pytest.mark.parametrize('name', DETR_CONFIGS)
@pytest.mark.parametrize('mode', ['eval', 'train'])
def test_detr(name: str, mode: str) -> None:
    model = build('detr', name).cuda().train(mode == 'train')
    images, masks = torch.randn(2, 3, 64, 80, device='cuda'), torch.ones(2, 64, 80, dtype=torch.bool, device='cuda')
    masks[1, :, 48:] = False
    assert_finite(without_host_waits(lambda: model(images, masks, mode='tensor')))


@pytest.mark.parametrize('name', PETR_CONFIGS)
@pytest.mark.parametrize('mode', ['eval', 'train'])
def test_petr(name: str, mode: str) -> None:
    from vispe.engine.benchmark_detector import builtin_rig, synthetic_batch
    model = build('petr', name).cuda().train(mode == 'train')
    data = synthetic_batch(builtin_rig((96, 160)), 1, (96, 160), torch.device('cuda'))
    assert_finite(without_host_waits(
        lambda: model(data['inputs'], data['masks'], data['data_samples'], mode='tensor')))


@pytest.mark.parametrize('encoding', POINT_ENCODINGS, ids=str)
@pytest.mark.parametrize('mode', ['eval', 'train'])
def test_vdetr(encoding, mode: str) -> None:
    model = small_detector(encoding).cuda().train(mode == 'train')
    points = scenes()[0].cuda()
    assert_finite(without_host_waits(lambda: model(points, mode='tensor')))
