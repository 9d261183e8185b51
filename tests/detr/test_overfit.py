"""DETR fits two real images: the loss falls by more than 90% and the matched boxes reach IoU 0.8.

This fails when the matching, the losses or the box parameterisation are wrong.
"""
from __future__ import annotations

import pytest
import torch
from torchvision.ops import box_convert, box_iou

from vispe.datasets import CocoDetection, detr_collate
from vispe.registry import MODELS


@pytest.mark.slow
def test_two_images_are_fitted(fmnist_det) -> None:
    dataset = CocoDetection(str(fmnist_det / 'annotations' / 'train.json'), str(fmnist_det), image_size=64,
                            max_size=None)
    batch = detr_collate([dataset[0], dataset[1]])
    model = MODELS.build(dict(
        type='DETR', backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-2), num_classes=10,
        num_queries=8, embed_dim=64, image_size=64,
        encoder=dict(depth=1, num_heads=4, mlp_dim=128, dropout=0.0, encoding=dict(type='DETRSine')),
        decoder=dict(depth=2, num_heads=4, mlp_dim=128, dropout=0.0)))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=1e-4)
    losses = []
    for _ in range(250):
        loss = sum(model(batch['inputs'], batch['masks'], batch['data_samples'], mode='loss').values())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.1)
        optimizer.step()
        losses.append(loss.item())
    assert min(losses[-10:]) < 0.1 * losses[0]

    model.eval()
    with torch.no_grad():
        outputs = model(batch['inputs'], batch['masks'], mode='tensor')
    targets = model.targets(batch['data_samples'], torch.device('cpu'))
    logits, boxes = outputs['logits'][-1], outputs['boxes'][-1]
    for (queries, indices), image_logits, image_boxes, target in zip(
            model.criterion.matcher(logits, boxes, targets), logits, boxes, targets):
        iou = box_iou(box_convert(image_boxes[queries], 'cxcywh', 'xyxy'),
                      box_convert(target['boxes'][indices], 'cxcywh', 'xyxy')).diag()
        assert (iou >= 0.8).all(), iou
        assert torch.equal(image_logits[queries].argmax(-1), target['labels'][indices])
