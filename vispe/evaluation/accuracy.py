"""Top-k classification accuracy as an mmengine metric."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from mmengine.evaluator import BaseMetric

from vispe.registry import METRICS


@METRICS.register_module()
class Accuracy(BaseMetric):
    """Top-k accuracy in percent (``accuracy/top1``, ``accuracy/top5``) of 'predict' outputs.

    Args:
        topk: the k values.
    """

    default_prefix = 'accuracy'

    def __init__(self, topk: Sequence[int] = (1, 5), collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.topk = tuple(topk)

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            if sample['label'] is None:
                raise ValueError('Accuracy needs labels in the predictions (the dataset must provide them).')
            ranked = sample['scores'].topk(min(max(self.topk), sample['scores'].numel())).indices
            self.results.append([bool((ranked[:k] == sample['label']).any()) for k in self.topk])

    def compute_metrics(self, results: list) -> dict[str, float]:
        hits = torch.tensor(results, dtype=torch.float64)
        return {f'top{k}': float(hits[:, i].mean() * 100) for i, k in enumerate(self.topk)}
