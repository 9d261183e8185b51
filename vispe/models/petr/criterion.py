"""PETR's set loss: Hungarian matching with focal-class and L1-box costs, sigmoid focal loss and weighted L1.

As mmdet3d's ``HungarianAssigner3D`` (``FocalLossCost`` weight 2, ``BBox3DL1Cost`` weight 0.25 on the first 8
code channels) and ``PETRHead.loss_single`` (``FocalLoss`` γ 2, α 0.25, weight 2; ``L1Loss`` weight 0.25 with
``code_weights``; both divided by the number of matched boxes, averaged over processes, at least 1), on every
decoder layer (``d{i}.`` prefixes for all but the last).
"""
from __future__ import annotations

from typing import Sequence

import torch
import torch.distributed as dist
from scipy.optimize import linear_sum_assignment
from torch import nn
from torchvision.ops import sigmoid_focal_loss

from vispe.models.petr.box_coder import encode_boxes

MATCH_CHANNELS = 8
YAW_CHANNELS = slice(6, 8)
YAW_LOSSES = ('l1', 'von_mises')


def von_mises_loss(predicted: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per box (M,) the negative log-likelihood of the target yaw θ under a von Mises distribution whose mean and
    concentration are the predicted (sin, cos) channels (M, 2) read as κ·(sin μ, cos μ): ``log I0(κ) − κ·cos(θ − μ)``
    up to a constant (Prokudin, Gehler, Nowozin, "Deep Directional Statistics", ECCV 2018). Its gradient in the
    predicted vector is ``A(κ)·(sin μ, cos μ) − (sin θ, cos θ)``, the target's own direction: unlike an L1 on the
    channels, whose sign gradients from objects of opposite yaws cancel once the channels reach their median (0, 0),
    it keeps pulling towards every object's yaw in proportion to what the features tell about it. The decoded yaw is
    still ``atan2(sin, cos)``. target: (M, 2) (sin θ, cos θ)."""
    vector = predicted.float()
    concentration = vector.norm(dim=-1)
    log_i0 = torch.log(torch.special.i0e(concentration)) + concentration
    return log_i0 - (vector * target.float()).sum(-1)


def focal_cost(logits: torch.Tensor, labels: torch.Tensor, alpha: float = 0.25, gamma: float = 2.0,
               eps: float = 1e-12) -> torch.Tensor:
    """mmdet's ``FocalLossCost``: (Q, K) logits, (G,) labels -> (Q, G) cost of giving query q the label of g."""
    prob = logits.float().sigmoid()
    negative = -(1 - prob + eps).log() * (1 - alpha) * prob.pow(gamma)
    positive = -(prob + eps).log() * alpha * (1 - prob).pow(gamma)
    return positive[:, labels] - negative[:, labels]


class HungarianMatcher3D:
    """One-to-one assignment per sample minimising ``cls_weight·focal_cost + bbox_weight·L1(code[:8])``.

    The L1 runs between the predicted code (centres in metres, log sizes, sin/cos) and the encoded target boxes;
    with ``unit_yaw`` the predicted (sin, cos) are made unit first (a von Mises yaw code's length is its
    concentration, not a distance to the target).
    """

    def __init__(self, cls_weight: float = 2.0, bbox_weight: float = 0.25, alpha: float = 0.25,
                 gamma: float = 2.0, unit_yaw: bool = False) -> None:
        self.cls_weight, self.bbox_weight = cls_weight, bbox_weight
        self.alpha, self.gamma = alpha, gamma
        self.unit_yaw = unit_yaw

    @torch.no_grad()
    def __call__(self, logits: torch.Tensor, code: torch.Tensor, labels: torch.Tensor,
                 target_code: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """logits (Q, K), code (Q, C), labels (G,), target_code (G, C) -> (query indices, target indices)."""
        if labels.numel() == 0:
            empty = torch.zeros(0, dtype=torch.int64)
            return empty, empty
        predicted = code[:, :MATCH_CHANNELS].float()
        if self.unit_yaw:
            yaw = predicted[:, YAW_CHANNELS]
            predicted = torch.cat([predicted[:, :6], yaw / yaw.norm(dim=-1, keepdim=True).clamp(min=1e-6)], 1)
        cost = (self.cls_weight * focal_cost(logits, labels, self.alpha, self.gamma)
                + self.bbox_weight * torch.cdist(predicted, target_code[:, :MATCH_CHANNELS].float(), p=1))
        if not bool(torch.isfinite(cost).all()):
            raise FloatingPointError('The matching cost holds NaN or inf: the predictions diverged (lower the '
                                     'learning rate or clip gradients) or a target box is not finite.')
        rows, cols = linear_sum_assignment(cost.cpu().numpy())
        return torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64)


class PETRCriterion(nn.Module):
    """PETR's losses on every decoder layer.

    Args:
        num_classes: K.
        code_weights: per code channel (PETR: 1 ×8, 0.2 for the velocities).
        cls_weight, bbox_weight: loss weights (2.0, 0.25), also the matching costs' weights.
        alpha, gamma: focal loss parameters (0.25, 2).
        yaw_loss: ``'l1'`` (PETR: L1 on the sin/cos channels like the others) or ``'von_mises'``
            (:func:`von_mises_loss` in their place, times their code weight).
    """

    def __init__(self, num_classes: int, code_weights: Sequence[float] = (1.0,) * 8, cls_weight: float = 2.0,
                 bbox_weight: float = 0.25, alpha: float = 0.25, gamma: float = 2.0, yaw_loss: str = 'l1') -> None:
        super().__init__()
        if yaw_loss not in YAW_LOSSES:
            raise ValueError(f"yaw_loss must be 'l1' (PETR) or 'von_mises' (the yaw's negative log-likelihood); got "
                             f"{yaw_loss!r}.")
        self.yaw_loss = yaw_loss
        self.num_classes = num_classes
        self.code_size = len(code_weights)
        self.cls_weight, self.bbox_weight = cls_weight, bbox_weight
        self.alpha, self.gamma = alpha, gamma
        self.matcher = HungarianMatcher3D(cls_weight, bbox_weight, alpha, gamma, unit_yaw=yaw_loss == 'von_mises')
        self.register_buffer('code_weights', torch.tensor(code_weights, dtype=torch.float32), persistent=False)

    @staticmethod
    def num_matched(count: int, device: torch.device) -> float:
        """Matched boxes per process, averaged over processes, at least 1."""
        total = torch.tensor(float(count), device=device)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(total)
            total = total / dist.get_world_size()
        return max(total.item(), 1.0)

    def single_layer(self, logits: torch.Tensor, code: torch.Tensor, labels: list[torch.Tensor],
                     target_codes: list[torch.Tensor]) -> dict[str, torch.Tensor]:
        """Losses of one decoder layer: logits (B, Q, K), code (B, Q, C)."""
        targets = torch.zeros_like(logits, dtype=torch.float32)
        matched_code, matched_target = [], []
        for index, (sample_logits, sample_code, sample_labels, sample_targets) in enumerate(
                zip(logits, code, labels, target_codes)):
            rows, cols = self.matcher(sample_logits, sample_code, sample_labels, sample_targets)
            targets[index, rows.to(logits.device), sample_labels[cols]] = 1.0
            matched_code.append(sample_code[rows.to(code.device)])
            matched_target.append(sample_targets[cols])
        num = self.num_matched(sum(len(m) for m in matched_code), logits.device)
        loss_cls = sigmoid_focal_loss(logits.float(), targets, self.alpha, self.gamma, reduction='sum') / num
        predicted, target = torch.cat(matched_code).float(), torch.cat(matched_target).float()
        errors = (predicted - target).abs() * self.code_weights
        if self.yaw_loss == 'von_mises':
            yaw = von_mises_loss(predicted[:, YAW_CHANNELS], target[:, YAW_CHANNELS]) * self.code_weights[6]
            errors = torch.cat([errors[:, :6], yaw[:, None], errors[:, 8:]], 1)
        loss_bbox = errors.sum() / num
        return dict(loss_cls=self.cls_weight * loss_cls, loss_bbox=self.bbox_weight * loss_bbox)

    def forward(self, logits: torch.Tensor, code: torch.Tensor, boxes: list[torch.Tensor], labels: list[torch.Tensor],
                velocities: list[torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
        """logits (L, B, Q, K), code (L, B, Q, C) with centres in metres; per sample boxes (G, 7), labels (G,) and,
        for a 10-channel code, velocities (G, 2)."""
        per_sample = velocities if velocities is not None else [None] * len(boxes)
        target_codes = [encode_boxes(sample_boxes.float(), self.code_size, velocity)
                        for sample_boxes, velocity in zip(boxes, per_sample)]
        losses: dict[str, torch.Tensor] = {}
        last = len(logits) - 1
        for layer, (layer_logits, layer_code) in enumerate(zip(logits, code)):
            prefix = '' if layer == last else f'd{layer}.'
            for name, value in self.single_layer(layer_logits, layer_code, labels, target_codes).items():
                losses[prefix + name] = value
        return losses
