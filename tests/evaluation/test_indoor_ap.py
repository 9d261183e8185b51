"""IndoorAP: 3DETR's per-class VOC AP / recall on hand-made scenes with known values, and against a loop reference."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vispe.evaluation.indoor_ap import IndoorAP, voc_average_precision
from vispe.registry import METRICS


def _cube(x: float = 0.0, y: float = 0.0, l: float = 1.0, w: float = 1.0, yaw: float = 0.0) -> list[float]:
    return [x, y, 0.5, l, w, 1.0, yaw]


def _scene(boxes, scores, labels, gt_boxes, gt_labels) -> tuple[dict, dict]:
    """(prediction, ground truth) dicts of one scene."""
    prediction = dict(boxes=torch.tensor(boxes, dtype=torch.float32).reshape(-1, 7),
                      scores=torch.tensor(scores, dtype=torch.float32), labels=torch.tensor(labels, dtype=torch.int64))
    truth = dict(gt_boxes=torch.tensor(gt_boxes, dtype=torch.float32).reshape(-1, 7),
                 gt_labels=torch.tensor(gt_labels, dtype=torch.int64))
    return prediction, truth


def _evaluate(scenes, **kwargs) -> dict[str, float]:
    metric = IndoorAP(**kwargs)
    metric.process(dict(data_samples=[truth for _, truth in scenes]), [prediction for prediction, _ in scenes])
    return metric.compute_metrics(metric.results)


def test_voc_all_points_formula_by_hand() -> None:
    # Ranked [FP, TP] for one gt: recall (0, 1), precision (0, 1/2) -> the envelope 1/2 over recall 0..1.
    assert voc_average_precision(np.array([0.0, 1.0]), np.array([0.0, 0.5])) == pytest.approx(0.5)
    # Ranked [TP, FP, TP] for two gts: 1/2 * 1 + 1/2 * 2/3.
    assert voc_average_precision(np.array([0.5, 0.5, 1.0]), np.array([1.0, 0.5, 2 / 3])) == pytest.approx(5 / 6)
    assert voc_average_precision(np.zeros(0), np.zeros(0)) == 0.0


def test_perfect_detections_give_one_and_output_keys() -> None:
    scenes = [_scene([_cube(), _cube(x=3)], [0.9, 0.8], [0, 1], [_cube(x=3), _cube()], [1, 0]),
              _scene([_cube(y=2)], [0.7], [1], [_cube(y=2)], [1])]
    results = _evaluate(scenes, classes=['chair', 'table'])
    assert results == pytest.approx({'mAP25': 1.0, 'AR25': 1.0, 'mAP50': 1.0, 'AR50': 1.0, 'AP25_chair': 1.0,
                                     'AP25_table': 1.0, 'AP50_chair': 1.0, 'AP50_table': 1.0})
    assert list(results)[:4] == ['mAP25', 'AR25', 'mAP50', 'AR50']
    assert set(_evaluate(scenes, iou_thresholds=[0.7])) == {'mAP70', 'AR70', 'AP70_0', 'AP70_1'}


def test_false_positive_ranked_first_halves_ap() -> None:
    scenes = [_scene([_cube(x=5), _cube()], [0.9, 0.5], [0, 0], [_cube()], [0])]
    results = _evaluate(scenes)
    assert results['AP25_0'] == pytest.approx(0.5) and results['AR25'] == pytest.approx(1.0)


def test_duplicates_are_false_positives_without_fallback() -> None:
    # Two gts A (x=0) and B (x=0.3). The second detection's best gt is A (IoU 0.82 > 0.67 with B), already taken:
    # a false positive although B is free and above the threshold. TP, FP of 2 gts: AP 1/2, recall 1/2.
    scenes = [_scene([_cube(), _cube(x=0.1)], [0.9, 0.8], [0, 0], [_cube(), _cube(x=0.3)], [0, 0])]
    results = _evaluate(scenes)
    assert results['AP50_0'] == pytest.approx(0.5) and results['AR50'] == pytest.approx(0.5)
    # An exact duplicate between two true positives: [TP, FP, TP] -> 5/6.
    scenes = [_scene([_cube(), _cube(), _cube(x=4)], [0.9, 0.8, 0.7], [0, 0, 0], [_cube(), _cube(x=4)], [0, 0])]
    assert _evaluate(scenes)['AP50_0'] == pytest.approx(5 / 6)


def test_iou_threshold() -> None:
    shift = 0.7 / 1.3  # unit cubes shifted by d along x: IoU (1 - d) / (1 + d) = 0.3
    results = _evaluate([_scene([_cube(x=shift)], [0.9], [0], [_cube()], [0])])
    assert results['AP25_0'] == pytest.approx(1.0) and results['AP50_0'] == 0.0
    assert results['AR25'] == pytest.approx(1.0) and results['AR50'] == 0.0


def test_classes_averaged_and_missing_detections() -> None:
    # Class 0 perfect, class 1 with a false positive first (AP 1/2), class 2 never detected (AP 0, recall 0).
    scenes = [_scene([_cube()], [0.9], [0], [_cube()], [0]),
              _scene([_cube(x=5), _cube(x=2)], [0.9, 0.3], [1, 1], [_cube(x=2), _cube(y=3)], [1, 2])]
    results = _evaluate(scenes)
    assert results['AP50_0'] == pytest.approx(1.0) and results['AP50_1'] == pytest.approx(0.5)
    assert results['AP50_2'] == 0.0
    assert results['mAP50'] == pytest.approx(0.5) and results['AR50'] == pytest.approx(2 / 3)


def test_labels_without_ground_truth_count_as_zero_like_3detr() -> None:
    """3DETR adds every predicted label to its ground-truth map: AP 0 and recall 0 in the means."""
    scenes = [_scene([_cube(), _cube(x=4)], [0.9, 0.8], [0, 3], [_cube()], [0])]
    results = _evaluate(scenes)
    assert results['AP25_3'] == 0.0 and results['mAP25'] == pytest.approx(0.5)
    assert results['AR25'] == pytest.approx(0.5)
    assert 'AP25_1' not in results and 'AP25_2' not in results  # neither gt nor detections: not reported


def test_rotated_option() -> None:
    # A 2 x 1 box detected turned by 90 deg: yaw ignored, IoU 1; rotated, IoU 1/3 (between 0.25 and 0.5).
    scenes = [_scene([_cube(l=2, yaw=math.pi / 2)], [0.9], [0], [_cube(l=2)], [0])]
    axis_aligned = _evaluate(scenes)
    rotated = _evaluate(scenes, rotated=True)
    assert axis_aligned['AP50_0'] == pytest.approx(1.0)
    assert rotated['AP50_0'] == 0.0 and rotated['AP25_0'] == pytest.approx(1.0)


def test_heading_error_of_true_positives_with_rotated_boxes() -> None:
    # Class 0: a box found turned by pi (the same box: IoU 1) and one found 0.3 rad off; class 1: exact, and a
    # false positive 0.9 rad off that does not count. The duplicate of a matched box does not count either.
    scenes = [_scene([_cube(l=2, yaw=math.pi + 0.1), _cube(x=5, l=2, yaw=0.3), _cube(x=10, yaw=2.0),
                      _cube(x=10, yaw=1.1), _cube(l=2, yaw=1.0)], [0.9, 0.8, 0.7, 0.6, 0.5], [0, 0, 1, 1, 0],
                     [_cube(l=2, yaw=0.1), _cube(x=5, l=2), _cube(x=10, yaw=2.0)], [0, 0, 1])]
    metrics = _evaluate(scenes, rotated=True)
    assert metrics['AOE25_0'] == pytest.approx((math.pi + 0.3) / 2, abs=1e-5)
    assert metrics['AOE25_1'] == pytest.approx(0.0, abs=1e-6)
    assert metrics['mAOE25'] == pytest.approx((math.pi + 0.3) / 4, abs=1e-5)
    assert 'mAOE25' not in _evaluate(scenes)  # axis-aligned: no heading
    assert 'mAOE50' not in _evaluate([_scene([_cube(x=3)], [0.9], [0], [_cube()], [0])], rotated=True)


def test_ground_truth_sources_names_and_prefix() -> None:
    prediction, truth = _scene([_cube()], [0.9], [1], [_cube()], [1])
    metric = METRICS.build(dict(type='IndoorAP'))
    metric.dataset_meta = dict(classes=('chair', 'table'))
    metric.process({}, [{**prediction, **truth}])  # ground truth in the prediction dict
    assert metric.evaluate(1) == pytest.approx({'indoor/mAP25': 1.0, 'indoor/AR25': 1.0, 'indoor/mAP50': 1.0,
                                                'indoor/AR50': 1.0, 'indoor/AP25_table': 1.0,
                                                'indoor/AP50_table': 1.0})
    metric = IndoorAP()
    with pytest.raises(KeyError, match=r'no ground truth for scene 0 .*gt_boxes \(m, 7\) and gt_labels'):
        metric.process(dict(data_samples=[dict(scene_id='a')]), [prediction])
    with pytest.raises(ValueError, match=r'scene 0 needs boxes \(n, 7\).*got \(1, 7\), \(1,\), \(1,\), \(1, 6\)'):
        metric.process({}, [{**prediction, 'gt_boxes': torch.zeros(1, 6), 'gt_labels': torch.zeros(1)}])
    metric.process({}, [{**prediction, **truth}])
    with pytest.raises(ValueError, match=r'labels must be class indices in \[0, 1\), got \[1\]'):
        IndoorAP(classes=['chair']).compute_metrics(metric.results)


def test_empty_scenes_and_bad_thresholds() -> None:
    scenes = [_scene([], [], [], [], []), _scene([_cube()], [0.9], [0], [], [])]
    assert _evaluate(scenes)['mAP25'] == 0.0
    assert _evaluate([_scene([], [], [], [], [])])['mAP50'] == 0.0
    assert _evaluate([_scene([], [], [], [_cube()], [2])], rotated=True) == {
        'mAP25': 0.0, 'AR25': 0.0, 'mAP50': 0.0, 'AR50': 0.0, 'AP25_2': 0.0, 'AP50_2': 0.0}
    with pytest.raises(ValueError, match=r'iou_thresholds must be .* in \(0, 1\)'):
        IndoorAP(iou_thresholds=[0.5, 50])
    with pytest.raises(ValueError, match='repeat a value'):
        IndoorAP(iou_thresholds=[0.5, 0.5])


def _reference_metrics(scenes, thresholds) -> dict[str, float]:
    """3DETR's eval_det loop, re-typed: per detection a loop over the gts, VOC AP by a backward loop."""
    def iou(a, b) -> float:
        inter = 1.0
        for axis in range(3):
            low = max(a[axis] - a[axis + 3] / 2, b[axis] - b[axis + 3] / 2)
            high = min(a[axis] + a[axis + 3] / 2, b[axis] + b[axis + 3] / 2)
            inter *= max(high - low, 0.0)
        return inter / (a[3] * a[4] * a[5] + b[3] * b[4] * b[5] - inter)

    def voc_ap(rec, prec) -> float:
        mrec, mpre = [0.0] + list(rec) + [1.0], [0.0] + list(prec) + [0.0]
        for i in range(len(mpre) - 1, 0, -1):
            mpre[i - 1] = max(mpre[i - 1], mpre[i])
        return sum((mrec[i + 1] - mrec[i]) * mpre[i + 1] for i in range(len(mrec) - 1) if mrec[i + 1] != mrec[i])

    out = {}
    classes = sorted({int(c) for p, t in scenes for c in [*p['labels'].tolist(), *t['gt_labels'].tolist()]})
    for threshold in thresholds:
        aps, recalls = [], []
        for c in classes:
            gts = {s: [b for b, lab in zip(t['gt_boxes'].tolist(), t['gt_labels'].tolist()) if lab == c]
                   for s, (_, t) in enumerate(scenes)}
            taken = {s: [False] * len(g) for s, g in gts.items()}
            dets = sorted([(score, s, box) for s, (p, _) in enumerate(scenes)
                           for box, score, lab in zip(p['boxes'].tolist(), p['scores'].tolist(), p['labels'].tolist())
                           if lab == c], key=lambda d: -d[0])
            tp, fp = [], []
            for _, s, box in dets:
                best, best_j = -math.inf, -1
                for j, gt in enumerate(gts[s]):
                    if iou(box, gt) > best:
                        best, best_j = iou(box, gt), j
                hit = best > threshold and not taken[s][best_j]
                if hit:
                    taken[s][best_j] = True
                tp.append((tp[-1] if tp else 0) + hit)
                fp.append((fp[-1] if fp else 0) + (not hit))
            npos = sum(len(g) for g in gts.values())
            rec = [t / npos if npos else 0.0 for t in tp]
            prec = [t / max(t + f, np.finfo(np.float64).eps) for t, f in zip(tp, fp)]
            aps.append(voc_ap(rec, prec))
            recalls.append(rec[-1] if rec else 0.0)
            out[f'AP{threshold * 100:g}_{c}'] = aps[-1]
        out[f'mAP{threshold * 100:g}'] = float(np.mean(aps))
        out[f'AR{threshold * 100:g}'] = float(np.mean(recalls))
    return out


def test_matches_a_loop_reference_on_random_scenes() -> None:
    generator = torch.Generator().manual_seed(0)
    scenes = []
    for _ in range(6):
        num_gt = int(torch.randint(0, 6, (1,), generator=generator))
        gt = torch.cat([torch.rand(num_gt, 3, generator=generator) * 4,
                        torch.rand(num_gt, 3, generator=generator) + 0.3, torch.zeros(num_gt, 1)], -1)
        gt_labels = torch.randint(0, 4, (num_gt,), generator=generator)
        # Noisy copies of the gts (some twice, some relabelled) and random boxes.
        pick = torch.randint(0, max(num_gt, 1), (2 * num_gt,), generator=generator)
        noisy = gt[pick] + torch.randn(2 * num_gt, 7, generator=generator) * torch.tensor([.2] * 3 + [.1] * 3 + [0])
        noise = torch.cat([torch.rand(4, 3, generator=generator) * 4,
                           torch.rand(4, 3, generator=generator) + 0.3, torch.zeros(4, 1)], -1)
        boxes = torch.cat([noisy, noise])
        labels = torch.cat([gt_labels[pick], torch.randint(0, 4, (4,), generator=generator)])
        labels[torch.rand(len(labels), generator=generator) < 0.15] = 3
        prediction, truth = _scene([], [], [], [], [])
        prediction.update(boxes=boxes, scores=torch.rand(len(boxes), generator=generator), labels=labels)
        truth.update(gt_boxes=gt, gt_labels=gt_labels)
        scenes.append((prediction, truth))
    results = _evaluate(scenes, iou_thresholds=(0.25, 0.5))
    expected = _reference_metrics(scenes, (0.25, 0.5))
    assert results.keys() == expected.keys()
    assert results == pytest.approx(expected, abs=1e-9)
    assert 0 < results['mAP50'] < results['mAP25'] < 1
