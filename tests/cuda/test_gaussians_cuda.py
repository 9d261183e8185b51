"""Rendering Gaussians on CUDA: vispe's PyTorch rasterizer on the GPU equals its CPU run, and gsplat's CUDA kernels
(``vispe[render]``) draw the same images as it: gsplat's projection, opacity-aware boxes, compositing and SH."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from vispe.gaussians.cameras import PinholeCamera
from vispe.gaussians.render import GaussianScene, render


def random_scene(count: int = 3000, seed: int = 0) -> GaussianScene:
    generator = torch.Generator().manual_seed(seed)
    means = torch.randn(count, 3, generator=generator) * torch.tensor([1.0, 0.7, 0.8]) + torch.tensor([0, 0, 4.0])
    return GaussianScene(means, torch.randn(count, 4, generator=generator),
                         torch.rand(count, 3, generator=generator) * 0.08 + 0.005,
                         torch.rand(count, generator=generator), torch.randn(count, 16, 3, generator=generator) * 0.4)


def on(scene: GaussianScene, device: str) -> GaussianScene:
    return GaussianScene(*(getattr(scene, field.name).to(device) for field in dataclasses.fields(scene)))


CAMERA = PinholeCamera('front', np.eye(4), np.array([[150.0, 0, 95.3], [0, 150, 70.8], [0, 0, 1]]), 192, 144)
TURNED = CAMERA.moved('turned', offset=(0.4, -0.3, 0.5), yaw_degrees=8.0)


@pytest.mark.parametrize('camera', [CAMERA, TURNED], ids=['front', 'turned'])
def test_the_torch_rasterizer_on_cuda_equals_its_cpu_run(camera: PinholeCamera) -> None:
    scene = random_scene()
    expected, expected_alpha = render(scene, camera)
    image, alpha = render(on(scene, 'cuda'), camera)
    torch.testing.assert_close(image.cpu(), expected, atol=1e-4, rtol=0)
    torch.testing.assert_close(alpha.cpu(), expected_alpha, atol=1e-4, rtol=0)


@pytest.mark.parametrize('camera', [CAMERA, TURNED], ids=['front', 'turned'])
def test_gsplat_draws_what_the_torch_rasterizer_draws(camera: PinholeCamera) -> None:
    pytest.importorskip('gsplat', reason="gsplat is not installed: pip install 'vispe[render]'")
    scene = on(random_scene(), 'cuda')
    background = torch.tensor([0.1, 0.2, 0.3])
    expected, expected_alpha = render(scene, camera, 'torch', background)
    image, alpha = render(scene, camera, 'gsplat', background)
    assert image.shape == expected.shape == (camera.height, camera.width, 3)
    # float32 kernels with fast exp against float64 transmittance: equal to a few 1e-4, a rare pixel at a threshold
    difference = (image - expected).abs()
    assert float(difference.mean()) < 1e-5 and float((difference > 1e-3).float().mean()) < 1e-3, float(difference.max())
    torch.testing.assert_close(alpha.mean(), expected_alpha.mean(), atol=1e-5, rtol=0)
