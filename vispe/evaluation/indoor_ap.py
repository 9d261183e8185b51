"""Indoor 3D detection AP / AR (ScanNet, SUN RGB-D) as 3DETR and V-DETR report it, as an mmengine metric.

The definition is 3DETR's ``utils/eval_det.py`` / ``utils/ap_calculator.py`` (VoteNet's, from the VOC devkit), for
each IoU threshold and each class:

1. all detections of the class over all scenes, sorted by score, highest first;
2. each detection takes the ground truth of the same class in the same scene with the highest IoU (the first one on
   ties); it is a true positive if that IoU is **strictly greater** than the threshold and that ground truth is not
   matched yet (it then becomes matched), else a false positive (a duplicate does not fall back to another box);
3. precision = TP / (TP + FP) and recall = TP / #ground truth along the sorted list;
4. AP = VOC all-points area (``use_07_metric=False``): the precision envelope (running maximum from the right),
   summed over the recall steps, with sentinels recall 0 -> 1 and precision 0 at both ends.

With rotated boxes the IoU cannot tell a box from the same box turned by π, so :class:`IndoorAP` also reports the
heading error of the true positives (nuScenes' AOE, Caesar et al., CVPR 2020, on indoor matching).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from vispe.geometry.iou3d import axis_aligned_iou3d, rotated_iou3d
from vispe.registry import METRICS

__all__ = ['IndoorAP', 'voc_average_precision']

GT_KEYS = ('gt_boxes', 'gt_labels')


def voc_average_precision(recall: np.ndarray, precision: np.ndarray) -> float:
    """VOC all-points AP of a precision/recall curve (K,) along the score-sorted detections (0 if K = 0).

    Recall gets sentinels 0 and 1 and precision 0 and 0 at the ends; precision is replaced by its envelope (the
    maximum at any higher recall) and summed over the points where recall changes, weighted by the change.
    """
    recall = np.concatenate([[0.0], np.asarray(recall, dtype=np.float64), [1.0]])
    precision = np.concatenate([[0.0], np.asarray(precision, dtype=np.float64), [0.0]])
    envelope = np.maximum.accumulate(precision[::-1])[::-1]
    steps = np.flatnonzero(recall[1:] != recall[:-1])
    return float(np.sum((recall[steps + 1] - recall[steps]) * envelope[steps + 1]))


def _threshold_name(threshold: float) -> str:
    return f'{threshold * 100:g}'


def _field(sample: Any, key: str) -> Any:
    """``sample[key]`` of a mapping, or None when absent."""
    return sample.get(key) if isinstance(sample, Mapping) else None


def _as_boxes(boxes: Any, device: torch.device | None = None) -> torch.Tensor:
    """A detached box tensor; an empty one of any shape as (0, 7)."""
    boxes = torch.as_tensor(boxes, device=device).detach()
    return boxes.reshape(0, 7) if boxes.numel() == 0 else boxes


@METRICS.register_module()
class IndoorAP(BaseMetric):
    """Per-class 3D AP and recall at IoU thresholds, averaged over classes (3DETR's / V-DETR's ScanNet numbers).

    See the module docstring for the matching and the AP. Reported, for each threshold t (0.25 -> ``25``):
    ``AP25_<class>`` per class, ``mAP25`` their mean and ``AR25`` the mean over the same classes of the recall at
    the end of the sorted list (all detections kept). Values are in [0, 1] (3DETR prints them times 100).

    Classes, as 3DETR: a label counts when it occurs in the ground truth **or** among the detections of the
    evaluated scenes. A label with detections but no ground truth gets AP 0 and recall 0 and lowers the means (3DETR
    adds every predicted label to its ground-truth map); a label with ground truth but no detection gets AP 0 and
    recall 0; a label with neither is not reported. Equal scores keep the order of the scenes and detections as
    processed (3DETR's unstable ``argsort`` leaves it unspecified).

    With ``rotated`` also, per threshold, ``AOE25_<class>``: the mean absolute heading error (radians, in [0, π],
    the yaw difference wrapped) of the class's true positives, and ``mAOE25`` its mean over the classes that have
    true positives (nuScenes' AOE; chance is π/2); absent where there are none.

    ``process`` takes the detector's predictions, one dict per scene ``dict(boxes (n, 7) (x, y, z, l, w, h, yaw),
    scores (n,), labels (n,) int64)``; each scene's ground truth ``gt_boxes (m, 7)`` and ``gt_labels (m,)`` comes
    from the same position of ``data_batch['data_samples']``, or, when that has none, from the prediction dict.
    Detections are matched per scene there (IoU on the predictions' device); only scores, labels and the best
    matches are kept, so the results gathered across processes are small.

    Args:
        iou_thresholds: the IoU thresholds, each in (0, 1).
        rotated: use :func:`~vispe.geometry.rotated_iou3d` (yawed boxes, SUN RGB-D) instead of
            :func:`~vispe.geometry.axis_aligned_iou3d`, which ignores yaw (ScanNet's axis-aligned boxes; both give
            the same numbers when every yaw is a multiple of pi).
        classes: class names indexed by the labels; None: the ``classes`` of ``dataset_meta`` when the evaluator
            sets it, else the label index.
    """

    default_prefix: str | None = 'indoor'

    def __init__(self, iou_thresholds: Sequence[float] = (0.25, 0.5), rotated: bool = False,
                 classes: Sequence[str] | None = None, collect_device: str = 'cpu', prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        thresholds = tuple(float(t) for t in iou_thresholds)
        if not thresholds or not all(0 < t < 1 for t in thresholds):
            raise ValueError(f'iou_thresholds must be a non-empty list of IoUs in (0, 1), got {iou_thresholds!r}; '
                             f'3DETR / V-DETR report (0.25, 0.5)')
        if len({_threshold_name(t) for t in thresholds}) != len(thresholds):
            raise ValueError(f'iou_thresholds {iou_thresholds!r} repeat a value (keys are AP<100 t>); drop duplicates')
        self.iou_thresholds = thresholds
        self.rotated = rotated
        self.classes = None if classes is None else tuple(str(name) for name in classes)

    def process(self, data_batch: Any, data_samples: Sequence[Mapping[str, Any]]) -> None:
        samples = _field(data_batch, 'data_samples') or []
        iou_function = rotated_iou3d if self.rotated else axis_aligned_iou3d
        for index, prediction in enumerate(data_samples):
            sample = samples[index] if index < len(samples) else None
            source = sample if all(_field(sample, key) is not None for key in GT_KEYS) else prediction
            if any(_field(source, key) is None for key in GT_KEYS):
                raise KeyError(f'IndoorAP: no ground truth for scene {index} of the batch: data_batch["data_samples"]'
                               f'[{index}] (or the prediction dict) must carry gt_boxes (m, 7) and gt_labels (m,); '
                               f'have the dataset pack them into each data sample')
            boxes, scores, labels = (prediction.get(key) for key in ('boxes', 'scores', 'labels'))
            if boxes is None or scores is None or labels is None:
                raise KeyError(f'IndoorAP: prediction {index} needs boxes (n, 7), scores (n,) and labels (n,), got '
                               f'keys {sorted(prediction)}')
            boxes = _as_boxes(boxes)
            device = boxes.device
            gt_boxes = _as_boxes(source['gt_boxes'], device)
            gt_labels = torch.as_tensor(source['gt_labels'], device=device).detach().long()
            scores = torch.as_tensor(scores, device=device).detach()
            labels = torch.as_tensor(labels, device=device).detach().long()
            num, num_gt = len(boxes), len(gt_boxes)
            if (boxes.shape != (num, 7) or scores.shape != (num,) or labels.shape != (num,)
                    or gt_boxes.shape != (num_gt, 7) or gt_labels.shape != (num_gt,)):
                raise ValueError(f'IndoorAP: scene {index} needs boxes (n, 7) = (x, y, z, l, w, h, yaw), scores (n,), '
                                 f'labels (n,), gt_boxes (m, 7) and gt_labels (m,), got {tuple(boxes.shape)}, '
                                 f'{tuple(scores.shape)}, {tuple(labels.shape)}, {tuple(gt_boxes.shape)} and '
                                 f'{tuple(gt_labels.shape)}')
            # Best same-class ground truth of each detection; -1 where the scene has none of its class.
            iou = iou_function(boxes, gt_boxes)
            iou = torch.where(labels[:, None] == gt_labels[None], iou, torch.full_like(iou, -1.0))
            if num_gt:
                best_iou, best_gt = iou.max(1)
                turn = boxes[:, 6].double() - gt_boxes[best_gt, 6].double()
                heading_error = torch.remainder(turn + torch.pi, 2 * torch.pi).sub(torch.pi).abs()
            else:
                best_iou, best_gt = iou.new_full((num,), -1.0), labels.new_zeros(num)
                heading_error = best_iou.new_zeros(num, dtype=torch.float64)
            self.results.append(dict(scores=scores.double().cpu().numpy(), labels=labels.cpu().numpy(),
                                     best_iou=best_iou.double().cpu().numpy(), best_gt=best_gt.cpu().numpy(),
                                     gt_labels=gt_labels.cpu().numpy(), heading_error=heading_error.cpu().numpy()))

    def _class_names(self) -> tuple[str, ...] | None:
        if self.classes is not None:
            return self.classes
        names = (self.dataset_meta or {}).get('classes')
        return None if names is None else tuple(str(name) for name in names)

    def compute_metrics(self, results: list[dict[str, Any]]) -> dict[str, float]:
        """mAP / AR per threshold and per-class AP over all processed scenes (see the class docstring)."""
        gt_offsets = np.cumsum([0] + [len(result['gt_labels']) for result in results])
        scores = np.concatenate([np.zeros(0)] + [result['scores'] for result in results])
        labels = np.concatenate([np.zeros(0, np.int64)] + [result['labels'] for result in results])
        best_iou = np.concatenate([np.zeros(0)] + [result['best_iou'] for result in results])
        gt_ids = np.concatenate([np.zeros(0, np.int64)] + [result['best_gt'] + offset
                                                           for result, offset in zip(results, gt_offsets)])
        gt_labels = np.concatenate([np.zeros(0, np.int64)] + [result['gt_labels'] for result in results])
        heading_error = np.concatenate([np.zeros(0)] + [result['heading_error'] for result in results])
        present = np.union1d(labels, gt_labels).astype(np.int64)
        names = self._class_names()
        if len(present) and (present.min() < 0 or (names is not None and present.max() >= len(names))):
            raise ValueError(f'IndoorAP: labels must be class indices in [0, {len(names) if names else "K"}), got '
                             f'{present.tolist()}; drop padding labels (< 0) and give classes (or the dataset\'s '
                             f'metainfo) one name per label')
        if not len(present):
            MMLogger.get_current_instance().warning('IndoorAP: no ground truth and no detections; every mAP is 0.')
        order = np.argsort(-scores, kind='stable')
        metrics, per_class = {}, {}
        for threshold in self.iou_thresholds:
            suffix = _threshold_name(threshold)
            aps, recalls, heading_errors = [], [], []
            for label in present:
                ranked = order[labels[order] == label]
                hit = best_iou[ranked] > threshold
                # A hit is a true positive when it is the first hit of its ground truth down the list.
                _, first = np.unique(gt_ids[ranked][hit], return_index=True)
                true_positive = np.zeros(len(ranked))
                true_positive[np.flatnonzero(hit)[first]] = 1
                tp = np.cumsum(true_positive)
                fp = np.cumsum(1 - true_positive)
                num_gt = int((gt_labels == label).sum())
                recall = tp / num_gt if num_gt else np.zeros_like(tp)
                precision = tp / np.maximum(tp + fp, np.finfo(np.float64).eps)
                aps.append(voc_average_precision(recall, precision))
                recalls.append(float(recall[-1]) if len(recall) else 0.0)
                name = names[label] if names else label
                per_class[f'AP{suffix}_{name}'] = aps[-1]
                if self.rotated and true_positive.any():
                    heading_errors.append(float(heading_error[ranked][true_positive == 1].mean()))
                    per_class[f'AOE{suffix}_{name}'] = heading_errors[-1]
            metrics[f'mAP{suffix}'] = float(np.mean(aps)) if aps else 0.0
            metrics[f'AR{suffix}'] = float(np.mean(recalls)) if recalls else 0.0
            if heading_errors:
                metrics[f'mAOE{suffix}'] = float(np.mean(heading_errors))
        return {**metrics, **per_class}
