"""Losses of the point-cloud detector: Hungarian-matched set losses on every decoder layer (3DETR / V-DETR) and the
proposal loss of the first stage (each point's objectness and box), for axis-aligned or rotated boxes."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment
from torch import nn

from vispe.geometry.iou3d import rotated_giou3d
from vispe.models.detr.criterion import matched_targets
from vispe.models.petr.criterion import PETRCriterion
from vispe.models.vdetr.yaw_bins import check_num_yaw_bins, yaw_bin_targets


def box_extremes(boxes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The minimum and maximum corners (..., 3) of axis-aligned (..., 7) boxes (yaw ignored)."""
    half = boxes[..., 3:6] / 2
    return boxes[..., :3] - half, boxes[..., :3] + half


def aligned_giou3d(boxes1: torch.Tensor, boxes2: torch.Tensor, pairwise: bool = False) -> torch.Tensor:
    """Generalised IoU of axis-aligned 3D boxes (Rezatofighi et al., CVPR 2019, in 3D), differentiable.

    boxes1 (N, 7), boxes2 (N, 7) -> (N,) elementwise; with ``pairwise``, boxes2 (M, 7) -> (N, M).
    """
    low1, high1 = box_extremes(boxes1)
    low2, high2 = box_extremes(boxes2)
    if pairwise:
        low1, high1 = low1[:, None], high1[:, None]
    volume1, volume2 = (high1 - low1).prod(-1), (high2 - low2).prod(-1)
    inter = (torch.minimum(high1, high2) - torch.maximum(low1, low2)).clamp(min=0).prod(-1)
    union = volume1 + volume2 - inter
    enclosing = (torch.maximum(high1, high2) - torch.minimum(low1, low2)).prod(-1)
    return inter / union - (enclosing - union) / enclosing


def points_in_boxes(points: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
    """(P, G) bool: point p lies in box g (its yaw included); points (P, 3), boxes (G, 7) (x, y, z, l, w, h, yaw)."""
    offset = points[:, None] - boxes[:, :3]
    cos, sin = torch.cos(boxes[:, 6]), torch.sin(boxes[:, 6])
    local = torch.stack([cos * offset[..., 0] + sin * offset[..., 1], cos * offset[..., 1] - sin * offset[..., 0],
                         offset[..., 2]], -1)
    return (local.abs() <= boxes[:, 3:6] / 2).all(-1)


def yaw_losses(logits: torch.Tensor, residuals: torch.Tensor, yaw: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """3DETR's heading losses of (M, K) bin logits and normalised residuals against the true yaw (M,): per box, the
    cross-entropy of the true bin and the Huber loss (δ = 1) of that bin's residual (M,), (M,)."""
    bins, residual = yaw_bin_targets(yaw, logits.shape[-1])
    predicted = residuals.gather(-1, bins[:, None])[:, 0]
    return (F.cross_entropy(logits, bins, reduction='none'),
            F.huber_loss(predicted, residual, reduction='none', delta=1.0))


class BoxSetCriterion(nn.Module):
    """Set losses of 3D boxes (B, Q, 7) and class logits (B, Q, K+1) against each scene's ``gt_boxes`` (G, 7) and
    ``gt_labels`` (G,), matched one-to-one by the Hungarian algorithm on
    ``−w_cls·p(c) + w_center·‖c − c*‖₁ + w_giou·(−GIoU)``.

    Losses (each times its weight, on every decoder layer; layer i but the last prefixed ``d{i}.``):
    ``loss_ce`` cross-entropy with the no-object class weighted ``eos_coef``; ``loss_center`` and ``loss_size`` L1
    of matched centres and sizes (metres), ``loss_giou`` 1 − GIoU, each summed and divided by the number of
    ground-truth boxes. The proposal stage adds ``loss_objectness`` (binary cross-entropy of every point token: is
    it inside a ground-truth box) and ``loss_proposal_center`` / ``loss_proposal_size`` (L1 of centre and log-size
    of the box a positive token lies in; the smallest such box), averaged over positive tokens.

    With ``num_yaw_bins`` K_yaw > 0 the boxes are rotated: the GIoU is :func:`~vispe.geometry.rotated_giou3d`
    (float64 for the matched pairs' loss: its float32 gradient is noisy for boxes that nearly coincide), and the
    heading codes (outputs ``yaw_code`` and ``proposal_yaw_code``: K_yaw bin logits then K_yaw residuals,
    :mod:`~vispe.models.vdetr.yaw_bins`) add ``loss_yaw_cls`` / ``loss_yaw_reg`` (3DETR's SUN RGB-D weights 0.1 and
    0.5; per matched box, divided by the number of ground-truth boxes) and ``loss_proposal_yaw_cls`` /
    ``loss_proposal_yaw_reg`` (the same weights, averaged over positive tokens). With 0 the GIoU is axis-aligned
    (ScanNet's boxes, yaw 0; :class:`~vispe.models.VDETR` refuses yawed targets then). Points are inside a box in
    the box's frame either way (the same at yaw 0).
    """

    def __init__(self, num_classes: int, class_weight: float = 1.0, center_weight: float = 5.0,
                 size_weight: float = 1.0, giou_weight: float = 2.0, eos_coef: float = 0.1,
                 objectness_weight: float = 1.0, proposal_weight: float = 1.0, num_yaw_bins: int = 0,
                 yaw_cls_weight: float = 0.1, yaw_reg_weight: float = 0.5) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.num_yaw_bins = check_num_yaw_bins(num_yaw_bins, 'BoxSetCriterion')
        self.weights = dict(loss_ce=class_weight, loss_center=center_weight, loss_size=size_weight,
                            loss_giou=giou_weight, loss_objectness=objectness_weight,
                            loss_proposal_center=proposal_weight, loss_proposal_size=proposal_weight,
                            loss_yaw_cls=yaw_cls_weight, loss_yaw_reg=yaw_reg_weight,
                            loss_proposal_yaw_cls=yaw_cls_weight, loss_proposal_yaw_reg=yaw_reg_weight)
        empty_weight = torch.ones(num_classes + 1)
        empty_weight[-1] = eos_coef
        self.register_buffer('empty_weight', empty_weight, persistent=False)

    def giou(self, boxes1: torch.Tensor, boxes2: torch.Tensor, pairwise: bool = False) -> torch.Tensor:
        """The GIoU of the box kind this criterion trains (rotated with heading bins, else axis-aligned)."""
        return (rotated_giou3d if self.num_yaw_bins else aligned_giou3d)(boxes1, boxes2, pairwise=pairwise)

    def matched_giou(self, boxes: torch.Tensor, gt_boxes: torch.Tensor) -> torch.Tensor:
        """(M,) GIoU of matched (M, 7) pairs, float32; rotated ones computed in float64 (class docstring)."""
        if self.num_yaw_bins:
            return rotated_giou3d(boxes.double(), gt_boxes.double()).float()
        return aligned_giou3d(boxes, gt_boxes)

    @torch.no_grad()
    def match(self, logits: torch.Tensor, boxes: torch.Tensor,
              targets: list[dict[str, torch.Tensor]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per scene, (query indices, target indices) of the minimum-cost assignment."""
        probs = logits.float().softmax(-1)
        matches = []
        for scene_probs, scene_boxes, target in zip(probs, boxes.float(), targets):
            gt_boxes = target['gt_boxes'].float()
            cost = (-self.weights['loss_ce'] * scene_probs[:, target['gt_labels']]
                    + self.weights['loss_center'] * torch.cdist(scene_boxes[:, :3], gt_boxes[:, :3], p=1)
                    - self.weights['loss_giou'] * self.giou(scene_boxes, gt_boxes, pairwise=True))
            rows, cols = linear_sum_assignment(cost.cpu().numpy())
            matches.append((torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64)))
        return matches

    def set_losses(self, logits: torch.Tensor, boxes: torch.Tensor, targets: list[dict[str, torch.Tensor]],
                   num_boxes: float, yaw_code: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """One layer's losses; ``yaw_code`` (B, Q, 2·K_yaw) its bin logits then residuals, with heading bins."""
        matches = self.match(logits, boxes, targets)
        predictions = boxes if yaw_code is None else torch.cat([boxes, yaw_code.to(boxes.dtype)], -1)
        classes, matched, gt_boxes = matched_targets(matches, targets, logits, predictions, self.num_classes,
                                                     'gt_labels', 'gt_boxes')
        losses = dict(
            loss_ce=F.cross_entropy(logits.float().transpose(1, 2), classes, self.empty_weight),
            loss_center=F.l1_loss(matched[:, :3], gt_boxes[:, :3], reduction='sum') / num_boxes,
            loss_size=F.l1_loss(matched[:, 3:6], gt_boxes[:, 3:6], reduction='sum') / num_boxes,
            loss_giou=(1 - self.matched_giou(matched[:, :7], gt_boxes)).sum() / num_boxes)
        if yaw_code is not None:
            cls, reg = yaw_losses(*matched[:, 7:].chunk(2, dim=-1), gt_boxes[:, 6])
            losses.update(loss_yaw_cls=cls.sum() / num_boxes, loss_yaw_reg=reg.sum() / num_boxes)
        return losses

    def proposal_losses(self, xyz: torch.Tensor, objectness: torch.Tensor, proposals: torch.Tensor,
                        targets: list[dict[str, torch.Tensor]],
                        yaw_code: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """xyz (B, M, 3) point tokens, objectness (B, M) logits, proposals (B, M, 7), yaw_code (B, M, 2·K_yaw)."""
        labels, errors = [], dict(center=[], size=[], yaw_cls=[], yaw_reg=[])
        for index, (scene_xyz, scene_proposals, target) in enumerate(zip(xyz, proposals.float(), targets)):
            gt_boxes = target['gt_boxes'].float()
            inside = points_in_boxes(scene_xyz.float(), gt_boxes)
            volume = gt_boxes[:, 3:6].prod(-1).expand_as(inside)
            if len(gt_boxes):
                owner = torch.where(inside, volume, torch.inf).argmin(-1)
            else:  # a scene without objects: every token negative
                owner = torch.zeros(len(inside), dtype=torch.int64, device=inside.device)
            positive = inside.any(-1)
            labels.append(positive.float())
            owned = gt_boxes[owner[positive]]
            errors['center'].append((scene_proposals[positive, :3] - owned[:, :3]).abs().sum(-1))
            errors['size'].append((scene_proposals[positive, 3:6].log() - owned[:, 3:6].log()).abs().sum(-1))
            if yaw_code is not None:
                cls, reg = yaw_losses(*yaw_code[index, positive].float().chunk(2, dim=-1), owned[:, 6])
                errors['yaw_cls'].append(cls)
                errors['yaw_reg'].append(reg)
        num_positive = PETRCriterion.num_matched(sum(len(e) for e in errors['center']), xyz.device)
        losses = dict(loss_objectness=F.binary_cross_entropy_with_logits(objectness.float(), torch.stack(labels)))
        losses.update({f'loss_proposal_{name}': torch.cat(values).sum() / num_positive
                       for name, values in errors.items() if values})
        return losses

    def forward(self, outputs: dict[str, torch.Tensor],
                targets: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """outputs: logits (L, B, Q, K+1), boxes (L, B, Q, 7), and the proposal stage's xyz (B, M, 3),
        objectness (B, M), proposals (B, M, 7); with heading bins also ``yaw_code`` (L, B, Q, 2·K_yaw) and
        ``proposal_yaw_code`` (B, M, 2·K_yaw)."""
        logits, boxes = outputs['logits'], outputs['boxes']
        yaw_code = proposal_yaw_code = None
        if self.num_yaw_bins:
            yaw_code, proposal_yaw_code = outputs.get('yaw_code'), outputs.get('proposal_yaw_code')
            widths = {code.shape[-1] for code in (yaw_code, proposal_yaw_code) if code is not None}
            if yaw_code is None or proposal_yaw_code is None or widths != {2 * self.num_yaw_bins}:
                raise ValueError(f'BoxSetCriterion(num_yaw_bins={self.num_yaw_bins}) needs the heading codes '
                                 f"'yaw_code' and 'proposal_yaw_code' of {2 * self.num_yaw_bins} numbers in the "
                                 f'outputs (got widths {sorted(widths)}): build the model with the same num_yaw_bins.')
        num_boxes = PETRCriterion.num_matched(sum(len(t['gt_labels']) for t in targets), logits.device)
        layers = logits.shape[0]
        per_layer = [self.set_losses(logits[layer], boxes[layer], targets, num_boxes,
                                     None if yaw_code is None else yaw_code[layer]) for layer in range(layers)]
        losses = dict(per_layer[-1])
        for layer, aux in enumerate(per_layer[:-1]):
            losses.update({f'd{layer}.{name}': value for name, value in aux.items()})
        losses.update(self.proposal_losses(outputs['xyz'], outputs['objectness'], outputs['all_proposals'], targets,
                                           proposal_yaw_code))
        return {name: value * self.weights[name.split('.')[-1]] for name, value in losses.items()}
