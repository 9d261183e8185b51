"""A synthetic two-sample, two-camera batch for detector unit tests: cameras looking along +x and -x from 1.5 m up,
random images and a few boxes."""
from __future__ import annotations

import math

import torch

PC_RANGE = (-20.0, -20.0, -3.0, 20.0, 20.0, 2.0)
BOXES = [torch.tensor([[5.0, 2.0, -1.0, 4.0, 2.0, 1.5, 0.3], [-3.0, 8.0, -1.2, 0.8, 0.6, 1.7, -1.0]]),
         torch.tensor([[10.0, -6.0, -0.5, 6.0, 2.5, 3.0, 2.0]])]
LABELS = [torch.tensor([0, 3]), torch.tensor([1])]


def batch(views: int = 2, size: int = 32) -> tuple[torch.Tensor, list[dict]]:
    """Two samples of ``views`` cameras looking out along +x and -x from 1.5 m up."""
    torch.manual_seed(0)
    intrinsics = torch.tensor([[20.0, 0, size / 2], [0, 20.0, size / 2], [0, 0, 1]])
    lidar2cam = []
    for yaw in torch.linspace(0, 2 * math.pi, views + 1)[:-1]:
        rotation = torch.tensor([[math.sin(yaw), -math.cos(yaw), 0], [0, 0, -1], [math.cos(yaw), math.sin(yaw), 0]])
        transform = torch.eye(4)
        transform[:3, :3] = rotation
        transform[:3, 3] = rotation @ torch.tensor([0.0, 0.0, -1.5])
        lidar2cam.append(transform)
    samples = [dict(intrinsics=intrinsics.expand(views, 3, 3).clone(), lidar2cam=torch.stack(lidar2cam),
                    pad_shape=(size, size), img_shape=(size, size), gt_boxes=boxes, gt_labels=labels)
               for boxes, labels in zip(BOXES, LABELS)]
    return torch.randn(2, views, 3, size, size), samples


def first_camera_turned(samples: list[dict], degrees: float = 30.0) -> list[dict]:
    """The samples with their first camera alone turned about its own y axis."""
    turn = torch.eye(4)
    cos, sin = math.cos(math.radians(degrees)), math.sin(math.radians(degrees))
    turn[[0, 0, 2, 2], [0, 2, 0, 2]] = torch.tensor([cos, sin, -sin, cos])
    return [dict(sample, lidar2cam=torch.cat([turn @ sample['lidar2cam'][:1], sample['lidar2cam'][1:]]))
            for sample in samples]


def tiny_detector(**options):
    """A seeded PETR detector small enough for unit tests: resnet10t to stride 8, width 32, 2 decoder layers of 4
    heads, 7 queries, the multi-view 2D sine keys; ``options`` override or add PETRDetector arguments."""
    from vispe.models import PETRDetector
    torch.manual_seed(0)
    arguments = dict(backbone=dict(type='TimmFeatures', model_name='resnet10t', out_index=-3), num_classes=5,
                     encoding=dict(type='MultiViewSine'), num_queries=7, embed_dim=32, code_size=8,
                     pc_range=PC_RANGE, decoder=dict(depth=2, num_heads=4, mlp_dim=64, dropout=0.0))
    return PETRDetector(**{**arguments, **options})
