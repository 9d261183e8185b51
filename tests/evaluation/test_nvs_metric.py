"""NVSMetric: PSNR equals scikit-image's, SSIM is kornia's, the object-pixel numbers on hand-made cases."""
from __future__ import annotations

import math

import torch
from kornia.metrics import ssim
from skimage.metrics import peak_signal_noise_ratio

from vispe.evaluation import NVSMetric
from vispe.evaluation.nvs_metric import view_quality


def test_psnr_equals_scikit_image_and_ssim_equals_kornia() -> None:
    generator = torch.Generator().manual_seed(0)
    target = torch.rand(3, 24, 32, generator=generator)
    pred = (target + 0.05 * torch.randn(3, 24, 32, generator=generator)).clamp(0, 1)
    quality = view_quality(pred, target, torch.zeros(24, 32, dtype=torch.bool))
    assert math.isclose(quality['psnr'], peak_signal_noise_ratio(target.numpy(), pred.numpy(), data_range=1.0),
                        rel_tol=1e-9)
    assert math.isclose(quality['ssim'], float(ssim(pred[None].double(), target[None].double(), 11).mean()),
                        rel_tol=1e-9)
    assert math.isnan(quality['psnr_objects']) and math.isnan(quality['ssim_objects'])


def test_object_pixels_alone_on_a_hand_made_view() -> None:
    """Perfect everywhere except the 4x4 object patch, off by 0.1: object PSNR 20 dB, whole-view PSNR higher by
    10·log10(768 / 16)."""
    target = torch.full((3, 24, 32), 0.5)
    objects = torch.zeros(24, 32, dtype=torch.bool)
    objects[10:14, 10:14] = True
    pred = target.clone()
    pred[:, objects] += 0.1
    quality = view_quality(pred, target, objects)
    assert math.isclose(quality['psnr_objects'], 20.0, abs_tol=1e-4)
    assert math.isclose(quality['psnr'], 20.0 + 10 * math.log10(768 / 16), abs_tol=1e-4)
    assert quality['ssim_objects'] < quality['ssim'] < 1


def test_metric_averages_views_and_skips_views_without_objects() -> None:
    target = torch.full((2, 3, 8, 8), 0.5)
    pred = target.clone()
    pred[0] += 0.1
    pred[1] += 0.01
    objects = torch.zeros(2, 8, 8, dtype=torch.bool)
    objects[0, :2, :2] = True
    metric = NVSMetric(window_size=3)
    metric.process(None, [dict(pred=pred, target=target, objects=objects)])
    values = metric.compute_metrics(metric.results)
    assert math.isclose(values['psnr'], (20.0 + 40.0) / 2, abs_tol=1e-4)
    assert math.isclose(values['psnr_objects'], 20.0, abs_tol=1e-4)


def test_evaluate_with_the_scene_count_keeps_every_view() -> None:
    """mmengine's evaluate(size) keeps the first ``size`` results and the runner passes the number of scenes: with
    one result per view it dropped the later half of a two-target-view set (it did)."""
    target = torch.full((2, 3, 8, 8), 0.5)
    metric = NVSMetric(window_size=3)
    for error in (0.1, 0.01):
        metric.process(None, [dict(pred=target + error, target=target, objects=torch.zeros(2, 8, 8, dtype=torch.bool))])
    values = metric.evaluate(2)
    assert math.isclose(values['nvs/psnr'], (20.0 + 40.0) / 2, abs_tol=1e-4)
