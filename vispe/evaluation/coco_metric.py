"""COCO box mAP as an mmengine metric, computed by pycocotools."""
from __future__ import annotations

import contextlib
import io
from typing import Any, Sequence

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from vispe.datasets.coco_detection import load_coco
from vispe.datasets.options import check_choice
from vispe.registry import METRICS

LABEL_KINDS = ('index', 'category_id')
STAT_NAMES = ('bbox_mAP', 'bbox_mAP_50', 'bbox_mAP_75', 'bbox_mAP_s', 'bbox_mAP_m', 'bbox_mAP_l')


@METRICS.register_module()
class CocoMetric(BaseMetric):
    """Box AP of detections against a COCO json, by pycocotools' ``COCOeval`` (keys as mmdet's).

    ``process`` takes the detector's predictions (``dict(image_id, boxes (Q, 4) xyxy in original
    pixels, scores, labels)``); labels index the json's categories in sorted-id order, as
    :class:`~vispe.datasets.CocoDetection` assigns them, or are the category ids themselves (``labels='category_id'``:
    DETR's released COCO models, whose 92 logits are indexed by category id; a label that is no category of the
    json, such as DETR's 0, counts for none, as in DETR's own evaluation). Only the images that were evaluated count
    (evaluation on a subset). Values are in [0, 1]: mAP@[.5:.95], @.5, @.75, small/medium/large.

    Args:
        ann_file: the ground-truth COCO json.
        max_dets: detections kept per image, highest scores first (100 as COCO).
        labels: 'index' (labels index the sorted category ids) or 'category_id' (labels are category ids).
    """

    default_prefix: str | None = 'coco'

    def __init__(self, ann_file: str, max_dets: int = 100, labels: str = 'index', collect_device: str = 'cpu',
                 prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.labels = check_choice('CocoMetric', 'labels', labels, LABEL_KINDS)
        self.ann_file = ann_file
        self.max_dets = max_dets
        self._coco = None

    @property
    def coco(self) -> Any:
        if self._coco is None:
            self._coco = load_coco(self.ann_file)
        return self._coco

    def process(self, data_batch: Any, data_samples: Sequence[dict]) -> None:
        for prediction in data_samples:
            if int(prediction['image_id']) not in self.coco.imgs:
                raise ValueError(f"CocoMetric: image id {int(prediction['image_id'])} is not in {self.ann_file}; the "
                                 'metric scores against the annotations of another split than the data it was '
                                 "given: point the evaluator's ann_file at the dataloader's ann_file.")
            scores = prediction['scores'].detach().float().cpu().numpy()
            order = np.argsort(-scores, kind='stable')[:self.max_dets]
            boxes = prediction['boxes'].detach().float().cpu().numpy().reshape(-1, 4)[order]
            self.results.append(dict(image_id=int(prediction['image_id']), scores=scores[order],
                                     labels=prediction['labels'].detach().cpu().numpy()[order],
                                     boxes=np.concatenate([boxes[:, :2], boxes[:, 2:] - boxes[:, :2]], axis=1)))

    def compute_metrics(self, results: list[dict[str, Any]]) -> dict[str, float]:
        from pycocotools.cocoeval import COCOeval
        cat_ids = sorted(self.coco.getCatIds())
        category = (lambda label: int(label)) if self.labels == 'category_id' else (lambda label: cat_ids[int(label)])
        detections = [dict(image_id=result['image_id'], category_id=category(label),
                           bbox=[float(v) for v in box], score=float(score))
                      for result in results
                      for box, score, label in zip(result['boxes'], result['scores'], result['labels'])]
        if not detections:
            MMLogger.get_current_instance().warning('CocoMetric: no detections; every AP is 0.')
            return {name: 0.0 for name in STAT_NAMES}
        with contextlib.redirect_stdout(io.StringIO()) as summary:
            evaluator = COCOeval(self.coco, self.coco.loadRes(detections), 'bbox')
            evaluator.params.imgIds = sorted({result['image_id'] for result in results})
            evaluator.params.maxDets = [1, 10, self.max_dets]
            evaluator.evaluate()
            evaluator.accumulate()
            evaluator.summarize()
        MMLogger.get_current_instance().info('\n' + summary.getvalue())
        return {name: float(value) for name, value in zip(STAT_NAMES, evaluator.stats)}
