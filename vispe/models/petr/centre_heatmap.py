"""A 2D auxiliary head for multi-view detectors: per-view class heatmaps of the projected 3D box centres.

Camera-query detectors that train their backbone on the set loss alone learn slowly: every query starts by
attending to all cameras' tokens, so the first gradients barely tell one image region from another. StreamPETR
and Focal-PETR add 2D supervision of the image features with the projected 3D objects; this head is the simplest
such signal, CenterNet's (Zhou et al., 2019): each view's features predict one heatmap per class, whose target is
a Gaussian at every box centre that projects into the view. The Gaussian's peak (1) is the cell holding the
projected centre; its σ is ``(2r + 1) / 6`` cells (CenterNet's drawing) with ``r = max(min_radius, radius_scale ·
projected box diameter)`` in cells, the diameter being the box's longest side over its camera depth times the
focal length. The loss is CenterNet's penalty-reduced focal loss (α 2, β 4) summed over the real cells and divided
by the number of peaks (at least 1). It adds no parameter the released PETR checkpoints have; it runs at inference
only when the detector draws its queries from the tokens it scores best (``PETRDetector(token_queries=...)``).

Shapes: features (B·V, C, h, w) -> logits (B·V, K, h, w); targets from boxes (G_b, 7) per sample, labels (G_b,) and
the cameras of the batch.
"""
from __future__ import annotations

import math

import torch
from torch import nn

from vispe.geometry import Cameras

PRIOR = 0.1
MIN_DEPTH = 0.1


def padded_boxes(boxes: list[torch.Tensor], device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Each sample's (G_b, 7+) boxes zero-padded to the largest G: (B, G, 7) float32, and (B, G) bool True on real
    boxes."""
    count = max((len(sample) for sample in boxes), default=0)
    padded = torch.zeros(len(boxes), count, 7, device=device)
    real = torch.zeros(len(boxes), count, dtype=torch.bool, device=device)
    for index, sample_boxes in enumerate(boxes):
        padded[index, :len(sample_boxes)] = sample_boxes[:, :7].float()
        real[index, :len(sample_boxes)] = True
    return padded, real


def centre_cells(cameras: Cameras, padded: torch.Tensor, feat_size: tuple[int, int],
                 stride: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Where padded boxes (B, G, 7) project in every view: their centres' cells (B, V, G, 2) as (col, row) float,
    camera depths (B, V, G) and (B, V, G) True where the centre lies in front of the camera and inside the feature
    grid (h, w) of cells of ``stride`` pixels."""
    height, width = feat_size
    pixels, depth = cameras.project(padded[..., :3])
    cells = torch.floor(pixels / stride)
    inside = ((depth > MIN_DEPTH) & (cells[..., 0] >= 0) & (cells[..., 0] < width) & (cells[..., 1] >= 0)
              & (cells[..., 1] < height))
    return cells, depth, inside


def centre_heatmaps(cameras: Cameras, boxes: list[torch.Tensor], labels: list[torch.Tensor], num_classes: int,
                    feat_size: tuple[int, int], stride: int, radius_scale: float = 0.25,
                    min_radius: float = 1.0) -> torch.Tensor:
    """(B, V, K, h, w) Gaussian heatmap targets of the boxes' centres (see the module docstring)."""
    batch, views = cameras.num_samples, cameras.num_views
    height, width = feat_size
    device = cameras.device
    padded, _ = padded_boxes(boxes, device)
    heat = torch.zeros(batch, views, num_classes, height, width, device=device)
    if padded.shape[1] == 0:
        return heat
    extents = padded[..., 3:6].amax(-1)
    onehot = torch.zeros(batch, padded.shape[1], num_classes, device=device)
    for index, sample_labels in enumerate(labels):
        onehot[index, torch.arange(len(sample_labels), device=device), sample_labels.long()] = 1.0
    cells, depth, inside = centre_cells(cameras, padded, feat_size, stride)
    focal = cameras.intrinsics[..., 0, 0].abs().float()[..., None]
    radius = (radius_scale * extents[:, None] * focal / depth.clamp(min=MIN_DEPTH) / stride).clamp(min=min_radius)
    sigma = (2 * radius + 1) / 6
    rows = torch.arange(height, device=device, dtype=torch.float32)
    cols = torch.arange(width, device=device, dtype=torch.float32)
    distance = ((rows[:, None] - cells[..., 1, None, None]) ** 2
                + (cols[None, :] - cells[..., 0, None, None]) ** 2)  # (B, V, G, h, w)
    gaussian = torch.exp(-distance / (2 * sigma[..., None, None] ** 2)) * inside[..., None, None]
    weighted = gaussian[:, :, :, None] * onehot[:, None, :, :, None, None]  # (B, V, G, K, h, w)
    return weighted.amax(2)


def centre_heatmap_loss(logits: torch.Tensor, targets: torch.Tensor, valid: torch.Tensor | None = None,
                        alpha: float = 2.0, beta: float = 4.0) -> torch.Tensor:
    """CenterNet's penalty-reduced focal loss: logits and targets (..., K, h, w), optional valid cells (..., h, w)."""
    prob = logits.float().sigmoid().clamp(1e-4, 1 - 1e-4)
    peaks = targets.eq(1).float()
    positive = -(1 - prob).pow(alpha) * prob.log() * peaks
    negative = -(1 - targets).pow(beta) * prob.pow(alpha) * (1 - prob).log() * (1 - peaks)
    loss = positive + negative
    if valid is not None:
        loss = loss * valid[..., None, :, :].float()
        peaks = peaks * valid[..., None, :, :].float()
    return loss.sum() / peaks.sum().clamp(min=1.0)


def gather_tokens(tokens: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Tokens (B, N, ...) at index (B, k) -> (B, k, ...)."""
    expanded = index.reshape(*index.shape, *(1,) * (tokens.ndim - 2)).expand(-1, -1, *tokens.shape[2:])
    return tokens.gather(1, expanded)


class CentreHeatmapHead(nn.Module):
    """3×3 conv, ReLU, 1×1 conv to one logit per class and cell; the class bias starts at the prior 0.1.

    Args:
        in_channels: backbone channels C.
        num_classes: K.
        hidden: width of the 3×3 conv.
        weight: factor on the loss.
        radius_scale, min_radius: the Gaussian's radius in cells (see the module docstring).
    """

    def __init__(self, in_channels: int, num_classes: int, hidden: int = 64, weight: float = 1.0,
                 radius_scale: float = 0.25, min_radius: float = 1.0) -> None:
        super().__init__()
        for name, value in (('weight', weight), ('radius_scale', radius_scale), ('min_radius', min_radius)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f'centre heatmap {name} must be a finite number >= 0; got {value!r}.')
        self.layers = nn.Sequential(nn.Conv2d(in_channels, hidden, 3, padding=1), nn.ReLU(inplace=True),
                                    nn.Conv2d(hidden, num_classes, 1))
        nn.init.constant_(self.layers[-1].bias, -math.log((1 - PRIOR) / PRIOR))
        self.num_classes = num_classes
        self.weight, self.radius_scale, self.min_radius = weight, radius_scale, min_radius

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.layers(features)

    def loss(self, logits: torch.Tensor, cameras: Cameras, boxes: list[torch.Tensor], labels: list[torch.Tensor],
             stride: int, valid: torch.Tensor | None = None) -> torch.Tensor:
        """The weighted loss of this head's logits (B·V, K, h, w) against the boxes' heatmaps; valid (B, V, h, w)
        cells."""
        logits = logits.view(cameras.num_samples, cameras.num_views, *logits.shape[1:])
        targets = centre_heatmaps(cameras, boxes, labels, self.num_classes, tuple(logits.shape[-2:]), stride,
                                  self.radius_scale, self.min_radius)
        return self.weight * centre_heatmap_loss(logits, targets, valid)
