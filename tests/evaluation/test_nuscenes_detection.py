"""vispe's nuScenes detection metric (vispe.evaluation.nuscenes_detection): hand-computed goldens, and equality
with nuscenes-devkit's accumulate / calc_ap / calc_tp on the same boxes."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vispe.evaluation.nuscenes_detection import (DetectionEvalConfig, OrientedBoxes, SampleBoxes, accumulate_class,
                                                 average_precision, check_classes, evaluate_detection, filter_boxes,
                                                 nd_score, tp_error)


def _quaternion(yaw: np.ndarray) -> np.ndarray:
    yaw = np.asarray(yaw, dtype=np.float64)
    return np.stack([np.cos(yaw / 2), 0 * yaw, 0 * yaw, np.sin(yaw / 2)], -1)


def _boxes(xy, names, size=(2.0, 4.0, 1.5), yaw=0.0, scores=None, num_pts=None) -> SampleBoxes:
    xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
    count = len(xy)
    translation = np.concatenate([xy, np.ones((count, 1))], 1)
    sizes = np.broadcast_to(np.asarray(size, dtype=np.float64), (count, 3))
    names = [names] * count if isinstance(names, str) else names
    return SampleBoxes(translation, sizes, _quaternion(np.broadcast_to(yaw, (count,))), names=names, scores=scores,
                       num_pts=num_pts)


def _gt_and_predictions(rng: np.random.Generator, num_samples: int = 4):
    """Ground truth of four classes in several samples; predictions with misses, duplicates, false positives,
    centre/size/yaw noise (flipped headings included) and random scores."""
    classes = ('car', 'pedestrian', 'barrier', 'traffic_cone')
    gt, predictions = {}, {}
    for index in range(num_samples):
        count = int(rng.integers(4, 9))
        xy = rng.uniform(-30, 30, (count, 2))
        names = list(rng.choice(classes, count))
        size = rng.uniform(0.5, 4.0, (count, 3))
        yaw = rng.uniform(-math.pi, math.pi, count)
        gt[f's{index}'] = SampleBoxes(np.concatenate([xy, rng.uniform(0, 2, (count, 1))], 1), size, _quaternion(yaw),
                                      names=names)
        keep = rng.random(count) < 0.8
        duplicate = rng.random(count) < 0.2
        source = np.concatenate([np.flatnonzero(keep), np.flatnonzero(duplicate)])
        noise = rng.normal(0, 0.8, (len(source), 2))
        flip = np.where(rng.random(len(source)) < 0.15, math.pi, 0.0)
        false_count = int(rng.integers(1, 4))
        pred_xy = np.concatenate([xy[source] + noise, rng.uniform(-30, 30, (false_count, 2))])
        pred_size = np.concatenate([size[source] * rng.uniform(0.7, 1.3, (len(source), 3)),
                                    rng.uniform(0.5, 4.0, (false_count, 3))])
        pred_yaw = np.concatenate([yaw[source] + rng.normal(0, 0.3, len(source)) + flip,
                                   rng.uniform(-math.pi, math.pi, false_count)])
        pred_names = [names[i] for i in source] + list(rng.choice(classes, false_count))
        predictions[f's{index}'] = SampleBoxes(
            np.concatenate([pred_xy, rng.uniform(0, 2, (len(pred_xy), 1))], 1), pred_size, _quaternion(pred_yaw),
            names=pred_names, scores=rng.random(len(pred_xy)))
    return classes, gt, predictions


def test_perfect_predictions_give_ap_one_and_zero_errors() -> None:
    gt = {'a': _boxes([[0, 0], [10, 0]], 'car', yaw=0.4), 'b': _boxes([[5, 5]], 'car', yaw=-2.0)}
    predictions = {token: SampleBoxes(b.translation, b.size, b.rotation, names=b.names, scores=[0.9] * len(b))
                   for token, b in gt.items()}
    summary = evaluate_detection(gt, predictions, ['car'])
    assert summary.label_aps['car'] == pytest.approx({0.5: 1.0, 1.0: 1.0, 2.0: 1.0, 4.0: 1.0})
    assert summary.label_tp_errors['car'] == pytest.approx({'trans_err': 0, 'scale_err': 0, 'orient_err': 0},
                                                            abs=1e-12)
    assert summary.nd_score() == pytest.approx(1.0)


def test_shift_of_0p7_m_matches_only_from_the_1_m_threshold() -> None:
    gt = {'a': _boxes([[0, 0], [10, 0], [0, 10]], 'car')}
    shifted = {'a': _boxes([[0.7, 0], [10, 0.7], [0, 9.3]], 'car', scores=[0.9, 0.8, 0.7])}
    summary = evaluate_detection(gt, shifted, ['car'])
    assert summary.label_aps['car'] == pytest.approx({0.5: 0.0, 1.0: 1.0, 2.0: 1.0, 4.0: 1.0})
    assert summary.mean_ap == pytest.approx(0.75)
    assert summary.tp_errors['trans_err'] == pytest.approx(0.7)
    # NDS over ATE, ASE, AOE: (5 * 0.75 + (1 - 0.7) + 1 + 1) / 8.
    assert summary.nd_score() == pytest.approx((5 * 0.75 + 0.3 + 2) / 8)


def test_half_recall_at_full_precision_by_hand() -> None:
    # 4 ground truths, 2 found and no false positive: precision 1 at recall points 0..0.50, 0 above. AP counts the
    # 90 points 0.11..1.00, 40 of them at precision 1: (40 * (1 - 0.1) / 90) / (1 - 0.1) = 4 / 9.
    gt = {'a': _boxes([[0, 0], [10, 0], [20, 0], [30, 0]], 'pedestrian')}
    predictions = {'a': _boxes([[0, 0], [10, 0]], 'pedestrian', scores=[0.9, 0.8])}
    curves = accumulate_class(gt, predictions, 'pedestrian', 2.0)
    assert curves.max_recall_index == 50
    assert average_precision(curves, 0.1, 0.1) == pytest.approx(4 / 9)


def test_greedy_matching_and_interpolation_by_hand() -> None:
    # Ground truth at x = 0 and 1.5. Prediction A (score 0.9) at x = 0.7 is nearer to x = 0 (0.7 m < 0.8 m);
    # B (0.8) sits on x = 1.5. At 0.5 m, A is a false positive: precision (0, 1/2) at recall (0, 1/2), so the
    # interpolated precision is r up to r = 0.5 and AP = sum_{k=11..50}(k/100 - 0.1) / 90 / 0.9 = 8.2 / 81.
    gt = {'a': _boxes([[0, 0], [1.5, 0]], 'car')}
    predictions = {'a': _boxes([[0.7, 0], [1.5, 0]], 'car', scores=[0.9, 0.8])}
    assert average_precision(accumulate_class(gt, predictions, 'car', 0.5), 0.1, 0.1) == pytest.approx(8.2 / 81)
    curves = accumulate_class(gt, predictions, 'car', 2.0)
    assert average_precision(curves, 0.1, 0.1) == pytest.approx(1.0)
    # ATE: running means (0.7, 0.35) at scores (0.9, 0.8); the recall points' confidence is 0.9 up to r = 0.5,
    # then falls linearly to 0.8 at r = 1, so the error is 0.7 up to r = 0.5 and 0.7 (1.5 - r) above:
    # (40 * 0.7 + 0.7 * sum_{k=51..100}(1.5 - k/100)) / 90 = 0.7 * 77.25 / 90.
    assert tp_error(curves, 'trans_err', 0.1) == pytest.approx(0.7 * 77.25 / 90)


def test_scale_and_orientation_errors_by_hand() -> None:
    gt = {'a': SampleBoxes([[0, 0, 0], [10, 0, 0], [0, 10, 0]], [[2, 4, 2], [0.5, 2, 1], [0.4, 0.4, 1]],
                           _quaternion([0.0, 0.0, 0.0]), names=['car', 'barrier', 'traffic_cone'])}
    predictions = {'a': SampleBoxes([[0, 0, 0], [10, 0, 0], [0, 10, 0]], [[1, 4, 2], [0.5, 2, 1], [0.4, 0.4, 1]],
                                    _quaternion([0.3, math.pi + 0.2, 2.0]), names=['car', 'barrier', 'traffic_cone'],
                                    scores=[0.9, 0.8, 0.7])}
    summary = evaluate_detection(gt, predictions, ['car', 'barrier', 'traffic_cone'])
    errors = summary.label_tp_errors
    assert errors['car']['scale_err'] == pytest.approx(0.5)  # IoU = 8 / (16 + 8 - 8)
    assert errors['car']['orient_err'] == pytest.approx(0.3)
    assert errors['barrier']['orient_err'] == pytest.approx(0.2)  # barrier headings have period pi
    assert math.isnan(errors['traffic_cone']['orient_err'])
    assert summary.tp_errors['orient_err'] == pytest.approx(0.25)  # the cone does not count
    car_flipped = {'a': predictions['a'].select(np.array([True, False, False]))}
    car_flipped = {'a': SampleBoxes(car_flipped['a'].translation, car_flipped['a'].size, _quaternion([math.pi]),
                                    names=['car'], scores=[0.9])}
    assert evaluate_detection({'a': gt['a'].select(np.array([True, False, False]))}, car_flipped,
                              ['car']).label_tp_errors['car']['orient_err'] == pytest.approx(math.pi)


def test_yaw_symmetry_sets_the_orientation_period_per_class() -> None:
    """A class that looks the same after a half turn (yaw_symmetry 2) gets barrier's period π; None drops its AOE
    (as cones); without a setting the devkit's rules hold (a car turned by π + 0.2 is 2.94 rad off)."""
    gt = {'a': SampleBoxes([[0, 0, 0], [10, 0, 0]], [[2, 4, 2], [0.5, 0.8, 1.7]], _quaternion([0.0, 0.0]),
                           names=['car', 'pedestrian'])}
    predictions = {'a': SampleBoxes([[0, 0, 0], [10, 0, 0]], [[2, 4, 2], [0.5, 0.8, 1.7]],
                                    _quaternion([math.pi + 0.2, math.pi + 0.1]), names=['car', 'pedestrian'],
                                    scores=[0.9, 0.8])}
    classes = ['car', 'pedestrian']
    nuscenes = evaluate_detection(gt, predictions, classes).label_tp_errors
    assert nuscenes['pedestrian']['orient_err'] == pytest.approx(math.pi - 0.1)
    config = DetectionEvalConfig(yaw_symmetry={'pedestrian': 2, 'car': None})
    assert config.yaw_symmetry['barrier'] == 2 and config.yaw_symmetry['traffic_cone'] is None   # nuScenes' kept
    errors = evaluate_detection(gt, predictions, classes, config).label_tp_errors
    assert errors['pedestrian']['orient_err'] == pytest.approx(0.1)
    assert math.isnan(errors['car']['orient_err'])
    for bad in (0, 1.5, True):
        with pytest.raises(ValueError, match='whole number n >= 1'):
            DetectionEvalConfig(yaw_symmetry={'pedestrian': bad})


def test_nd_score_formula() -> None:
    assert nd_score(0.5, {'trans_err': 0.2, 'scale_err': 1.5, 'orient_err': math.nan}) == pytest.approx(
        (2.5 + 0.8 + 0 + 0) / 8)
    assert nd_score(0.4, {}) == pytest.approx(0.4)


def test_class_without_ground_truth_or_matches() -> None:
    gt = {'a': _boxes([[0, 0]], 'car')}
    predictions = {'a': _boxes([[20, 0]], 'car', scores=[0.5])}
    summary = evaluate_detection(gt, predictions, ['car', 'pedestrian'])
    assert summary.class_aps == {'car': 0.0, 'pedestrian': 0.0}
    assert summary.label_tp_errors['pedestrian'] == {'trans_err': 1.0, 'scale_err': 1.0, 'orient_err': 1.0}


def test_filters_range_empty_boxes_and_bike_racks() -> None:
    boxes = {'a': SampleBoxes([[100, 0, 0], [100, 45, 0], [100, 35, 0], [120, 0, 0], [110, 10, 0], [90, 0, 0]],
                              np.ones((6, 3)), _quaternion(np.zeros(6)),
                              names=['car', 'car', 'pedestrian', 'car', 'bicycle', 'bicycle'],
                              num_pts=[5, 5, 5, 0, 5, 5])}
    racks = {'a': OrientedBoxes([[110, 10, 0]], [[1.0, 3.0, 1.0]], _quaternion([0.5]))}
    kept = filter_boxes(boxes, {'a': np.array([100.0, 0.0, 0.0])}, DetectionEvalConfig(), racks)['a']
    # pedestrian at 35 m (range 40) stays, car at 45 m (range 50) stays, empty car and racked bicycle go.
    assert kept.translation[:, :2].tolist() == [[100, 0], [100, 45], [100, 35], [90, 0]]
    everything = filter_boxes(boxes, {}, DetectionEvalConfig(class_range=None, filter_empty=False,
                                                              filter_bike_racks=False), racks)['a']
    assert len(everything) == 6


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown: \\['cars'\\]"):
        check_classes(['car', 'cars'])
    with pytest.raises(ValueError, match='unknown detection names'):
        _boxes([[0, 0]], 'vehicle.car')
    gt = {'a': _boxes([[0, 0]], 'car'), 'b': _boxes([[0, 0]], 'car')}
    with pytest.raises(ValueError, match="1 samples have no predictions \\['b'\\]"):
        evaluate_detection(gt, {'a': gt['a']}, ['car'])
    with pytest.raises(ValueError, match='dist_th_tp'):
        DetectionEvalConfig(dist_th_tp=3.0)


def test_equals_the_devkit_accumulate_calc_ap_calc_tp() -> None:
    pytest.importorskip('nuscenes.eval.detection.algo')
    from nuscenes.eval.common.utils import center_distance
    from nuscenes.eval.detection.algo import accumulate

    from vispe.evaluation.nuscenes_devkit import DEFAULT_ATTRIBUTES, _eval_boxes, devkit_accumulate

    classes, gt, predictions = _gt_and_predictions(np.random.default_rng(3))
    summary = evaluate_detection(gt, predictions, classes)
    devkit = devkit_accumulate(gt, predictions, classes)
    for name in classes:
        assert summary.label_aps[name] == pytest.approx(devkit.summary.label_aps[name], abs=1e-9)
        for error, value in summary.label_tp_errors[name].items():
            assert value == pytest.approx(devkit.summary.label_tp_errors[name][error], abs=1e-9, nan_ok=True)
    assert summary.mean_ap == pytest.approx(devkit.mean_ap, abs=1e-9)
    assert 0.05 < summary.mean_ap < 0.95  # neither trivial nor empty
    for error, value in summary.tp_errors.items():
        assert value == pytest.approx(devkit.tp_errors[error], abs=1e-9)
    # The curves themselves, point by point.
    gt_boxes, pred_boxes = _eval_boxes(gt, False, DEFAULT_ATTRIBUTES), _eval_boxes(predictions, True,
                                                                                  DEFAULT_ATTRIBUTES)
    for name in classes:
        for dist_th in (0.5, 2.0):
            ours, theirs = (accumulate_class(gt, predictions, name, dist_th),
                            accumulate(gt_boxes, pred_boxes, name, center_distance, dist_th))
            np.testing.assert_allclose(ours.precision, theirs.precision, atol=1e-12)
            np.testing.assert_allclose(ours.confidence, theirs.confidence, atol=1e-12)
            for error in ('trans_err', 'scale_err', 'orient_err'):
                np.testing.assert_allclose(ours.errors[error], getattr(theirs, error), atol=1e-9)
