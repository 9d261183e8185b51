"""A 2D auxiliary head for multi-view detectors: per view, the local yaw of each object at its projected centre.

What a camera sees of an object fixes its yaw relative to the viewing ray, the local (or allocentric) yaw
``α = yaw − atan2(y_c − y_o, x_c − x_o)`` with c the box centre and o the camera centre in the scene frame (Mousavian
et al., "3D Bounding Box Estimation Using Deep Learning and Geometry", CVPR 2017): two cars of one yaw at two bearings
look different, two of one α alike. A detector whose box heads regress the yaw from queries has to learn that from
one matched box per object and step; this head asks the backbone for it densely, in every view that sees the object:
each view's features predict ``bins`` logits per cell, and the cells within ``radius`` cells (Chebyshev distance) of
the cell holding a projected box centre (as :mod:`~vispe.models.petr.centre_heatmap` places it) are classified into
the bin of its α (bin k covers [2πk/bins, 2π(k+1)/bins)), with cross-entropy averaged over those cells (FCOS3D
supervises every foreground location the same way; radius 0: the centre cell alone). Only in training; it adds no
inference cost and no parameter the released PETR checkpoints have.

Shapes: features (B·V, C, h, w) -> logits (B·V, bins, h, w); targets from boxes (G_b, 7) per sample and the cameras.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from vispe.geometry import Cameras
from vispe.models.petr.centre_heatmap import centre_cells, padded_boxes


def local_yaw_targets(cameras: Cameras, boxes: list[torch.Tensor], feat_size: tuple[int, int], stride: int,
                      bins: int, radius: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per view, box and cell of the (2·radius + 1)² window around the cell holding the projected centre (B, V, G·S):
    the cell's flat index ``row·w + col``, the bin of the box's local yaw α in that view, and True where the box is
    real, its centre projects into the grid and the window's cell lies inside it."""
    padded, real = padded_boxes(boxes, cameras.device)
    cells, _, inside = centre_cells(cameras, padded, feat_size, stride)
    origins = cameras.cam2lidar[..., :2, 3]                                            # (B, V, 2)
    offset = padded[:, None, :, :2] - origins[:, :, None]                              # (B, V, G, 2)
    alpha = torch.remainder(padded[:, None, :, 6] - torch.atan2(offset[..., 1], offset[..., 0]), 2 * math.pi)
    bin_index = torch.clamp((alpha * (bins / (2 * math.pi))).long(), max=bins - 1)
    steps = torch.arange(-radius, radius + 1, device=cells.device, dtype=cells.dtype)
    window = torch.stack(torch.meshgrid(steps, steps, indexing='ij'), -1).reshape(-1, 2)  # (S, 2) as (col, row)
    around = cells[..., None, :] + window                                              # (B, V, G, S, 2)
    height, width = feat_size
    keep = ((inside & real[:, None])[..., None] & (around[..., 0] >= 0) & (around[..., 0] < width)
            & (around[..., 1] >= 0) & (around[..., 1] < height))
    flat = torch.where(keep, around[..., 1] * width + around[..., 0], 0).long()
    spread = bin_index[..., None].expand_as(flat)
    return flat.flatten(2), spread.flatten(2), keep.flatten(2)


class LocalYawHead(nn.Module):
    """3×3 conv, ReLU, 1×1 conv to ``bins`` local-yaw logits per cell.

    Args:
        in_channels: backbone channels C.
        bins: yaw bins over the full turn (8).
        hidden: width of the 3×3 conv.
        weight: factor on the loss.
        radius: cells around the centre cell supervised too (0: the centre cell alone).
    """

    def __init__(self, in_channels: int, bins: int = 8, hidden: int = 64, weight: float = 1.0,
                 radius: int = 0) -> None:
        super().__init__()
        if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
            raise ValueError(f'local yaw bins must be a whole number >= 2 (bins over the full turn); got {bins!r}.')
        if isinstance(radius, bool) or not isinstance(radius, int) or radius < 0:
            raise ValueError(f'local yaw radius must be a whole number of cells >= 0; got {radius!r}.')
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f'local yaw weight must be a finite number >= 0; got {weight!r}.')
        self.layers = nn.Sequential(nn.Conv2d(in_channels, hidden, 3, padding=1), nn.ReLU(inplace=True),
                                    nn.Conv2d(hidden, bins, 1))
        self.bins, self.weight, self.radius = bins, weight, radius

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)

    def loss(self, logits: torch.Tensor, cameras: Cameras, boxes: list[torch.Tensor], stride: int,
             valid: torch.Tensor | None = None) -> torch.Tensor:
        """The weighted cross-entropy of this head's logits (B·V, bins, h, w) at the boxes' centre cells; valid
        (B, V, h, w) cells (a centre in padding or a missing view is not supervised). 0 without such a cell."""
        height, width = logits.shape[-2:]
        flat, target, keep = local_yaw_targets(cameras, boxes, (height, width), stride, self.bins, self.radius)
        if valid is not None:
            keep = keep & valid.flatten(2).gather(2, flat)
        per_cell = logits.view(cameras.num_samples, cameras.num_views, self.bins, height * width)
        picked = per_cell.gather(3, flat[:, :, None].expand(-1, -1, self.bins, -1))          # (B, V, bins, G)
        losses = F.cross_entropy(picked.float().movedim(2, -1)[keep], target[keep], reduction='sum')
        return self.weight * losses / keep.sum().clamp(min=1)
