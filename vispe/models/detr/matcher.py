"""Hungarian matching of DETR's predictions to ground-truth boxes (Carion et al., ECCV 2020)."""
from __future__ import annotations

import torch
from scipy.optimize import linear_sum_assignment
from torchvision.ops import box_convert, generalized_box_iou


class HungarianMatcher:
    """One-to-one assignment of queries to targets per image, minimising DETR's matching cost.

    cost(i, j) = −w_class·p_i(c_j) + w_bbox·‖b_i − b_j‖₁ + w_giou·(−GIoU(b_i, b_j)), with p the softmax
    over classes (no-object included), boxes (cx, cy, w, h) normalised to the image; solved by
    ``scipy.optimize.linear_sum_assignment``. DETR's weights are 1, 5, 2.
    """

    def __init__(self, class_weight: float = 1.0, bbox_weight: float = 5.0, giou_weight: float = 2.0) -> None:
        if class_weight == bbox_weight == giou_weight == 0:
            raise ValueError('HungarianMatcher needs at least one non-zero cost weight.')
        self.class_weight = class_weight
        self.bbox_weight = bbox_weight
        self.giou_weight = giou_weight

    def cost_matrices(self, logits: torch.Tensor, boxes: torch.Tensor,
                      targets: list[dict[str, torch.Tensor]]) -> list[torch.Tensor]:
        """Per image, the (num_queries, num_targets) cost; logits (B, Q, K+1), boxes (B, Q, 4)."""
        probs = logits.float().softmax(-1)
        costs = []
        for image_probs, image_boxes, target in zip(probs, boxes.float(), targets):
            labels, target_boxes = target['labels'], target['boxes'].float()
            giou = generalized_box_iou(box_convert(image_boxes, 'cxcywh', 'xyxy'),
                                       box_convert(target_boxes, 'cxcywh', 'xyxy'))
            costs.append(-self.class_weight * image_probs[:, labels]
                         + self.bbox_weight * torch.cdist(image_boxes, target_boxes, p=1)
                         - self.giou_weight * giou)
        return costs

    @torch.no_grad()
    def __call__(self, logits: torch.Tensor, boxes: torch.Tensor,
                 targets: list[dict[str, torch.Tensor]]) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per image, (query indices, target indices), int64, of equal length min(Q, num_targets)."""
        matches = []
        for cost in self.cost_matrices(logits, boxes, targets):
            rows, cols = linear_sum_assignment(cost.cpu().numpy())
            matches.append((torch.as_tensor(rows, dtype=torch.int64), torch.as_tensor(cols, dtype=torch.int64)))
        return matches
