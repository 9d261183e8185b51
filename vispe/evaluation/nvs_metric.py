"""Image quality of rendered target views as an mmengine metric: PSNR and SSIM (kornia's), over all pixels and over
the pixels that see an object (a mean image of ground and sky already scores well over all pixels)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from kornia.metrics import psnr, ssim
from mmengine.evaluator import BaseMetric

from vispe.registry import METRICS

__all__ = ['NVSMetric', 'view_quality']


def view_quality(pred: torch.Tensor, target: torch.Tensor, objects: torch.Tensor,
                 window_size: int = 11) -> dict[str, float]:
    """PSNR (dB) and SSIM of one (3, H, W) view in [0, 1] over all pixels, and over the (H, W) ``objects`` pixels
    (MSE and the SSIM map averaged there; NaN when the view shows no object). SSIM: kornia's Gaussian window
    (σ 1.5) with 'same' padding."""
    pred, target = pred[None].clamp(0, 1).double(), target[None].double()
    ssim_map = ssim(pred, target, window_size)[0].mean(0)
    quality = dict(psnr=float(psnr(pred, target, 1.0)), ssim=float(ssim_map.mean()))
    count = int(objects.sum())
    if count:
        mse = float(((pred[0] - target[0]) ** 2).mean(0)[objects].mean())
        quality.update(psnr_objects=10 * math.log10(1 / max(mse, 1e-10)), ssim_objects=float(ssim_map[objects].mean()))
    else:
        quality.update(psnr_objects=math.nan, ssim_objects=math.nan)
    return quality


@METRICS.register_module()
class NVSMetric(BaseMetric):
    """Mean over target views of :func:`view_quality` (``nvs/psnr``, ``nvs/ssim``, ``nvs/psnr_objects``,
    ``nvs/ssim_objects``; the object means skip views without objects) of 'predict' outputs (dicts with ``pred``
    and ``target`` (Vt, 3, H, W) and ``objects`` (Vt, H, W))."""

    default_prefix = 'nvs'

    def __init__(self, window_size: int = 11, collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.window_size = window_size

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        # One result per scene (a list of its views): mmengine's evaluate(size) keeps the first ``size`` results, and
        # size is the number of scenes.
        for sample in data_samples:
            self.results.append([view_quality(pred.cpu(), target.cpu(), objects.cpu().bool(), self.window_size)
                                 for pred, target, objects in zip(sample['pred'], sample['target'], sample['objects'])])

    def compute_metrics(self, results: list) -> dict[str, float]:
        views = [view for scene in results for view in scene]
        metrics = {}
        for key in ('psnr', 'ssim', 'psnr_objects', 'ssim_objects'):
            values = [result[key] for result in views if not math.isnan(result[key])]
            metrics[key] = sum(values) / len(values) if values else math.nan
        return metrics
