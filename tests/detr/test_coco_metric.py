"""CocoMetric reports pycocotools' numbers, on a hand-made case whose AP is known."""
from __future__ import annotations

import json

import pytest
import torch

from vispe.evaluation import CocoMetric


def write_ground_truth(path) -> None:
    images = [dict(id=i, file_name=f'{i}.png', width=100, height=100) for i in (1, 2)]
    annotations = [dict(id=1, image_id=1, category_id=3, bbox=[10, 10, 40, 40], area=1600, iscrowd=0),
                   dict(id=2, image_id=2, category_id=7, bbox=[50, 20, 30, 60], area=1800, iscrowd=0)]
    categories = [dict(id=3, name='a'), dict(id=7, name='b')]
    path.write_text(json.dumps(dict(images=images, annotations=annotations, categories=categories)))


def prediction(image_id, boxes, scores, labels) -> dict:
    return dict(image_id=image_id, boxes=torch.tensor(boxes, dtype=torch.float32), scores=torch.tensor(scores),
                labels=torch.tensor(labels))


def metric_on(ann_file, predictions) -> dict[str, float]:
    metric = CocoMetric(ann_file=str(ann_file))
    metric.process({}, predictions)
    return metric.compute_metrics(metric.results)


def test_perfect_detections_give_ap_one(tmp_path) -> None:
    ann_file = tmp_path / 'gt.json'
    write_ground_truth(ann_file)
    results = metric_on(ann_file, [prediction(1, [[10, 10, 50, 50]], [0.9], [0]),
                                   prediction(2, [[50, 20, 80, 80]], [0.8], [1])])
    assert results['bbox_mAP'] == pytest.approx(1.0) and results['bbox_mAP_50'] == pytest.approx(1.0)


def test_false_positive_ranked_first_halves_precision(tmp_path) -> None:
    """Class 'a': a wrong box at score 0.9, then the right one at 0.5: precision 1/2 at recall 1, so AP = 0.5
    (101-point interpolation); class 'b' is perfect: mAP = 0.75. Labels index the sorted category ids."""
    ann_file = tmp_path / 'gt.json'
    write_ground_truth(ann_file)
    predictions = [prediction(1, [[60, 60, 90, 90], [10, 10, 50, 50]], [0.9, 0.5], [0, 0]),
                   prediction(2, [[50, 20, 80, 80]], [0.8], [1])]
    results = metric_on(ann_file, predictions)
    assert results['bbox_mAP'] == pytest.approx(0.75)

    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval
    coco = COCO(str(ann_file))
    detections = coco.loadRes([dict(image_id=1, category_id=3, bbox=[60, 60, 30, 30], score=0.9),
                               dict(image_id=1, category_id=3, bbox=[10, 10, 40, 40], score=0.5),
                               dict(image_id=2, category_id=7, bbox=[50, 20, 30, 60], score=0.8)])
    evaluator = COCOeval(coco, detections, 'bbox')
    evaluator.evaluate()
    evaluator.accumulate()
    evaluator.summarize()
    assert [results[k] for k in ('bbox_mAP', 'bbox_mAP_50', 'bbox_mAP_75')] == pytest.approx(evaluator.stats[:3])


def test_only_evaluated_images_count_and_empty_is_zero(tmp_path) -> None:
    ann_file = tmp_path / 'gt.json'
    write_ground_truth(ann_file)
    assert metric_on(ann_file, [prediction(2, [[50, 20, 80, 80]], [0.8], [1])])['bbox_mAP'] == pytest.approx(1.0)
    assert metric_on(ann_file, [prediction(1, [], [], [])])['bbox_mAP'] == 0.0


def test_image_of_another_split_is_an_error_naming_the_file(tmp_path) -> None:
    ann_file = tmp_path / 'gt.json'
    write_ground_truth(ann_file)
    with pytest.raises(ValueError, match=r"image id 5 is not in .*gt\.json.*ann_file"):
        metric_on(ann_file, [prediction(5, [[50, 20, 80, 80]], [0.8], [1])])


def test_labels_can_be_category_ids(tmp_path) -> None:
    """DETR's COCO models predict category ids (labels='category_id'): the same detections as category ids score as
    the sorted-index labels do; a label that is no category (DETR's 0) counts for none."""
    ann_file = tmp_path / 'gt.json'
    write_ground_truth(ann_file)
    metric = CocoMetric(ann_file=str(ann_file), labels='category_id')
    metric.process({}, [prediction(1, [[10, 10, 50, 50], [0, 0, 5, 5]], [0.9, 0.95], [3, 0]),
                        prediction(2, [[50, 20, 80, 80]], [0.8], [7])])
    assert metric.compute_metrics(metric.results)['bbox_mAP'] == pytest.approx(1.0)
    indexed = metric_on(ann_file, [prediction(1, [[10, 10, 50, 50]], [0.9], [1]),
                                   prediction(2, [[50, 20, 80, 80]], [0.8], [0])])
    assert indexed['bbox_mAP'] == pytest.approx(0.0)
    with pytest.raises(ValueError, match=r"CocoMetric labels must be one of \('index', 'category_id'\); got 'ids'"):
        CocoMetric(ann_file=str(ann_file), labels='ids')
