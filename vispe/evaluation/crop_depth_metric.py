"""Depth error of image crops as an mmengine metric, overall and by where the crop lies in its camera (the offset
bins of :class:`~vispe.datasets.CropDepth`: centre, edge, corner)."""
from __future__ import annotations

import math
from typing import Any, Sequence

import torch
from mmengine.evaluator import BaseMetric

from vispe.datasets.crop_depth import OFFSET_BINS
from vispe.registry import METRICS

__all__ = ['CropDepthMetric', 'crop_depth_errors']


def crop_depth_errors(pred: torch.Tensor, target: torch.Tensor) -> dict[str, float]:
    """Errors of one crop's (S, S) depth over the pixels with known depth (target > 0): ``absrel`` mean |d̂ − d| / d,
    ``rmse_log`` sqrt(mean (log d̂ − log d)²), ``delta1`` the fraction with max(d̂/d, d/d̂) < 1.25 (Eigen et al.'s
    definitions); NaN when no pixel is known."""
    known = target > 0
    if not bool(known.any()):
        return dict(absrel=math.nan, rmse_log=math.nan, delta1=math.nan)
    pred, target = pred[known].double(), target[known].double()
    ratio = torch.maximum(pred / target, target / pred)
    return dict(absrel=float(((pred - target).abs() / target).mean()),
                rmse_log=float((pred.log() - target.log()).pow(2).mean().sqrt()),
                delta1=float((ratio < 1.25).double().mean()))


@METRICS.register_module()
class CropDepthMetric(BaseMetric):
    """Means over crops of :func:`crop_depth_errors`: ``depth/absrel``, ``depth/rmse_log``, ``depth/delta1``, and the
    same per offset bin (``depth/absrel_center``, ``..._edge``, ``..._corner``) for crops that carry one; crops
    without known depth are skipped. Takes 'predict' outputs of :class:`~vispe.models.CropDepthViT`."""

    default_prefix = 'depth'

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            errors = crop_depth_errors(sample['pred'].cpu(), sample['target'].cpu())
            self.results.append(dict(errors, offset_bin=sample.get('offset_bin', 'random')))

    def compute_metrics(self, results: list) -> dict[str, float]:
        metrics = {}
        for suffix, members in [('', results)] + [(f'_{name}', [r for r in results if r['offset_bin'] == name])
                                                  for name in OFFSET_BINS]:
            if suffix and not members:
                continue
            for key in ('absrel', 'rmse_log', 'delta1'):
                values = [member[key] for member in members if not math.isnan(member[key])]
                metrics[key + suffix] = sum(values) / len(values) if values else math.nan
        return metrics
