"""One target check for the 3D detectors (PETR / 3DPPE and V-DETR): each bad sample is named with what to fix."""
from __future__ import annotations

import math

import pytest
import torch

from vispe.models.box3d_targets import box3d_targets

BOX = [0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 0.0]


@pytest.mark.parametrize('sample, message', [
    (dict(gt_boxes=[BOX]), r'data_samples\[1\] needs gt_boxes \(G, 7\) and gt_labels \(G,\) for the loss \(what Src'),
    (dict(gt_boxes=[BOX, BOX], gt_labels=[0]), r'data_samples\[1\] \(scene7\) has 2 gt_boxes but 1 gt_labels'),
    (dict(gt_boxes=[[0.0, 0.0, math.nan, 1.0, 1.0, 1.0, 0.0]], gt_labels=[0]), 'not finite or not of positive size'),
    (dict(gt_boxes=[[0.0, 0.0, 0.0, 1.0, 0.0, 1.0, 0.0]], gt_labels=[0]), 'not finite or not of positive size'),
    (dict(gt_boxes=[BOX], gt_labels=[3]), r'labels outside 0\.\.2: \[3\]; set num_classes'),
])
def test_bad_targets_name_the_sample_and_the_fix(sample, message) -> None:
    good = dict(gt_boxes=[BOX], gt_labels=[1])
    with pytest.raises(ValueError, match=message):
        box3d_targets([good, dict(sample, scene_id='scene7')], torch.device('cpu'), 3, 'Src')


def test_targets_come_back_as_float_boxes_and_long_labels() -> None:
    boxes, labels = box3d_targets([dict(gt_boxes=[BOX], gt_labels=[2]), dict(gt_boxes=[], gt_labels=[])],
                                  torch.device('cpu'), 3, 'Src')
    assert boxes[0].dtype == torch.float32 and boxes[1].shape == (0, 7) and labels[0].tolist() == [2]
