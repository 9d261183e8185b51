"""Checks of 3D detectors' training targets (the multi-view PETR / 3DPPE detector and the V-DETR point detector).

A data sample carries ``gt_boxes`` (G, 7) (x, y, z, l, w, h, yaw) and ``gt_labels`` (G,) class indices. Bad
targets do not fail loudly in a set-prediction loss (a NaN box turns the matching cost NaN, a label ≥ K indexes
past the classes), so both detectors take their targets through :func:`box3d_targets`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

__all__ = ['box3d_targets']


def box3d_targets(data_samples: Sequence[Mapping[str, Any]], device: torch.device, num_classes: int,
                  source: str) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Each sample's ``gt_boxes`` (G, 7) float32 and ``gt_labels`` (G,) int64 on ``device``, checked.

    Args:
        data_samples: one mapping per sample.
        device: where the targets go.
        num_classes: K; labels must lie in 0…K − 1.
        source: the dataset that gives such samples, for the messages ('MultiViewDetection').

    Raises:
        ValueError: a sample without boxes or labels, counts that differ, a box that is not finite or not of positive
            size, a label outside the classes, each naming the sample.
    """
    boxes, labels = [], []
    for index, sample in enumerate(data_samples):
        if not isinstance(sample, Mapping) or 'gt_boxes' not in sample or 'gt_labels' not in sample:
            raise ValueError(f'data_samples[{index}] needs gt_boxes (G, 7) and gt_labels (G,) for the loss (what '
                             f'{source} gives).')
        sample_boxes = torch.as_tensor(sample['gt_boxes'], device=device).float().reshape(-1, 7)
        sample_labels = torch.as_tensor(sample['gt_labels'], device=device).long().reshape(-1)
        where = f"data_samples[{index}] ({sample.get('scene_id') or sample.get('sample_token') or 'no scene id'})"
        if len(sample_boxes) != len(sample_labels):
            raise ValueError(f'{where} has {len(sample_boxes)} gt_boxes but {len(sample_labels)} gt_labels; give one '
                             f'label per box.')
        if not bool(torch.isfinite(sample_boxes).all()) or bool((sample_boxes[:, 3:6] <= 0).any()):
            raise ValueError(f'{where} has a gt box that is not finite or not of positive size; fix or drop it in the '
                             f'dataset.')
        if bool(((sample_labels < 0) | (sample_labels >= num_classes)).any()):
            raise ValueError(f'{where} has labels outside 0..{num_classes - 1}: {sorted(set(sample_labels.tolist()))}; '
                             f"set num_classes to the dataset's classes.")
        boxes.append(sample_boxes)
        labels.append(sample_labels)
    return boxes, labels
