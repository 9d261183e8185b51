"""The Three Cell Experiment's scores (Chowdhury et al., LOOPE, 2025, Table 4) as an mmengine metric."""
from __future__ import annotations

from typing import Any, Sequence

import torch
from mmengine.evaluator import BaseMetric

from vispe.datasets.three_cell import BITS, FAMILIES
from vispe.registry import METRICS


def three_cell_scores(logits: torch.Tensor, labels: torch.Tensor) -> dict[str, float]:
    """Per-family accuracy in percent of six sigmoid outputs (N, 6) against the answers (N, 6): a bit is predicted 1
    where its logit > 0 (sigmoid > 0.5); a family scores the mean accuracy of its bits (distance and area: two bits,
    so a tie answered (0, 0) counts fully right); ``average`` is the mean of the four families (the authors'
    model-selection score)."""
    if logits.ndim != 2 or logits.shape[1] != BITS or labels.shape != logits.shape:
        raise ValueError(f'Three Cell scores need logits and answers of shape (N, {BITS}); got '
                         f'{tuple(logits.shape)} and {tuple(labels.shape)}.')
    correct = ((logits > 0) == (labels > 0.5)).double()
    scores = {family: float(correct[:, list(bits)].mean() * 100) for family, bits in FAMILIES.items()}
    scores['average'] = sum(scores.values()) / len(FAMILIES)
    return scores


@METRICS.register_module()
class ThreeCellMetric(BaseMetric):
    """``three_cell/{distance,orientation,area,vector_sum,average}`` (percent) of the classifier's 'predict' outputs
    (their ``logits`` and 6-bit ``label``) on :class:`~vispe.datasets.ThreeCells`."""

    default_prefix = 'three_cell'

    def __init__(self, collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for sample in data_samples:
            label = sample.get('label')
            if not isinstance(label, torch.Tensor) or label.shape != (BITS,):
                raise ValueError(f'ThreeCellMetric needs each prediction\'s six answers (label of shape ({BITS},)); '
                                 f'got {label!r}. Use it with the ThreeCells dataset.')
            self.results.append((sample['logits'].float().cpu(), label.float().cpu()))

    def compute_metrics(self, results: list) -> dict[str, float]:
        logits, labels = (torch.stack(column) for column in zip(*results))
        return three_cell_scores(logits, labels)
