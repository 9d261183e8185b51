"""DETR's set loss: classification with a down-weighted no-object class, L1 and GIoU on matched boxes."""
from __future__ import annotations

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torchvision.ops import box_convert, generalized_box_iou

from vispe.models.detr.matcher import HungarianMatcher
from vispe.models.detr.targets import check_targets


def matched_targets(matches: list[tuple[torch.Tensor, torch.Tensor]], targets: list[dict[str, torch.Tensor]],
                    logits: torch.Tensor, boxes: torch.Tensor, num_classes: int, label_key: str,
                    box_key: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What a set criterion compares after matching: the class of every query (B, Q) (no-object = ``num_classes``
    where unmatched), and the matched predicted boxes (M, D) and their targets (M, D), float32.

    Args:
        matches: per sample (query indices, target indices).
        targets: per sample its labels (``label_key``) and boxes (``box_key``).
        logits: (B, Q, K+1) class logits; boxes: (B, Q, D) predicted boxes.
    """
    sample_index = torch.cat([torch.full_like(query, i) for i, (query, _) in enumerate(matches)])
    query_index = torch.cat([query for query, _ in matches])
    classes = torch.full(logits.shape[:2], num_classes, dtype=torch.int64, device=logits.device)
    classes[sample_index, query_index] = torch.cat(
        [t[label_key][target] for t, (_, target) in zip(targets, matches)]).to(logits.device)
    matched = boxes[sample_index, query_index].float()
    target_boxes = torch.cat([t[box_key][target] for t, (_, target) in zip(targets, matches)]).float()
    return classes, matched, target_boxes


class SetCriterion(nn.Module):
    """Losses of DETR (Carion et al., ECCV 2020) on Hungarian-matched predictions.

    ``loss_ce``: cross-entropy over K+1 classes, every unmatched query labelled no-object, whose weight
    is ``eos_coef`` (0.1). ``loss_bbox``: L1 of matched (cx, cy, w, h), summed and divided by the number
    of target boxes in the batch (over all processes). ``loss_giou``: 1 − GIoU, likewise. Each is
    multiplied by its weight (1, 5, 2 in DETR); with auxiliary outputs the same losses of decoder
    layer i are returned as ``d{i}.loss_*`` (each output matched on its own). The targets are checked
    first (:func:`~vispe.models.detr.targets.check_targets`: labels in [0, K), boxes finite, non-empty and
    inside the image), with errors that name the image and the annotation.

    Args:
        num_classes: K, object classes (the no-object class is index K).
    """

    def __init__(self, num_classes: int, matcher: HungarianMatcher, class_weight: float = 1.0,
                 bbox_weight: float = 5.0, giou_weight: float = 2.0, eos_coef: float = 0.1) -> None:
        super().__init__()
        self.num_classes = num_classes
        self.matcher = matcher
        self.weights = dict(loss_ce=class_weight, loss_bbox=bbox_weight, loss_giou=giou_weight)
        empty_weight = torch.ones(num_classes + 1)
        empty_weight[-1] = eos_coef
        self.register_buffer('empty_weight', empty_weight, persistent=False)

    @staticmethod
    def num_target_boxes(targets: list[dict[str, torch.Tensor]], device: torch.device) -> float:
        """Target boxes per process, averaged over processes, at least 1 (DETR's normaliser)."""
        count = torch.tensor(float(sum(len(t['labels']) for t in targets)), device=device)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(count)
            count = count / dist.get_world_size()
        return max(count.item(), 1.0)

    def single_output(self, logits: torch.Tensor, boxes: torch.Tensor, targets: list[dict[str, torch.Tensor]],
                      num_boxes: float) -> dict[str, torch.Tensor]:
        """Weighted losses of one set of predictions: logits (B, Q, K+1), boxes (B, Q, 4)."""
        matches = self.matcher(logits, boxes, targets)
        target_classes, matched, target_boxes = matched_targets(matches, targets, logits, boxes, self.num_classes,
                                                                'labels', 'boxes')
        loss_ce = F.cross_entropy(logits.float().transpose(1, 2), target_classes, self.empty_weight)
        loss_bbox = F.l1_loss(matched, target_boxes, reduction='sum') / num_boxes
        giou = torch.diag(generalized_box_iou(box_convert(matched, 'cxcywh', 'xyxy'),
                                              box_convert(target_boxes, 'cxcywh', 'xyxy')))
        loss_giou = (1 - giou).sum() / num_boxes
        losses = dict(loss_ce=loss_ce, loss_bbox=loss_bbox, loss_giou=loss_giou)
        return {name: value * self.weights[name] for name, value in losses.items()}

    def forward(self, logits: torch.Tensor, boxes: torch.Tensor,
                targets: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
        """logits (L, B, Q, K+1) and boxes (L, B, Q, 4) of every decoder layer (the last is the output)."""
        check_targets(targets, self.num_classes, batch_size=logits.shape[1])
        num_boxes = self.num_target_boxes(targets, logits.device)
        losses = self.single_output(logits[-1], boxes[-1], targets, num_boxes)
        for layer in range(logits.shape[0] - 1):
            aux = self.single_output(logits[layer], boxes[layer], targets, num_boxes)
            losses.update({f'd{layer}.{name}': value for name, value in aux.items()})
        return losses
