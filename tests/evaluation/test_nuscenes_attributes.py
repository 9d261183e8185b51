"""nuScenes submissions choose each box's attribute from its class and predicted speed (the nuScenes baselines'
rule); without predicted velocity every class keeps its one default attribute. The devkit reads the submission and
its AAE follows the choice."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vispe.evaluation.nuscenes_detection import SampleBoxes
from vispe.evaluation.nuscenes_devkit import (ATTRIBUTE_NAMES, DEFAULT_ATTRIBUTES, MOVING_SPEED, box_attributes,
                                              build_submission, detections_to_sample_boxes)

# (class, speed m/s) -> attribute, by the rule of the module docstring; 0.2 m/s is not moving (strictly above).
EXPECTED = {
    ('car', 0.0): 'vehicle.parked', ('car', 0.2): 'vehicle.parked', ('car', 0.21): 'vehicle.moving',
    ('truck', 3.0): 'vehicle.moving', ('truck', 0.1): 'vehicle.parked',
    ('trailer', 3.0): 'vehicle.moving', ('trailer', 0.0): 'vehicle.parked',
    ('construction_vehicle', 1.0): 'vehicle.moving', ('construction_vehicle', 0.0): 'vehicle.parked',
    ('bus', 8.0): 'vehicle.moving', ('bus', 0.05): 'vehicle.stopped',
    ('bicycle', 4.0): 'cycle.with_rider', ('bicycle', 0.0): 'cycle.without_rider',
    ('motorcycle', 6.0): 'cycle.with_rider', ('motorcycle', 0.2): 'cycle.without_rider',
    ('pedestrian', 1.3): 'pedestrian.moving', ('pedestrian', 0.1): 'pedestrian.standing',
    ('barrier', 5.0): '', ('barrier', 0.0): '', ('traffic_cone', 2.0): '', ('traffic_cone', 0.0): '',
}


def sample(names, speeds, headings=None, velocity_predicted=None, spacing=10.0) -> SampleBoxes:
    """Boxes along x, ``spacing`` apart, moving at ``speeds`` in the directions ``headings`` (radians)."""
    count = len(names)
    headings = np.linspace(0, 2 * math.pi, count, endpoint=False) if headings is None else np.asarray(headings)
    velocity = np.stack([np.cos(headings), np.sin(headings)], 1) * np.asarray(speeds, dtype=np.float64)[:, None]
    translation = np.stack([np.arange(count) * spacing, np.zeros(count), np.ones(count)], 1)
    return SampleBoxes(translation, np.tile([1.9, 4.5, 1.6], (count, 1)), np.tile([1.0, 0, 0, 0], (count, 1)),
                       names=names, scores=np.linspace(0.9, 0.5, count),
                       velocity=velocity if velocity_predicted is not False else None,
                       velocity_predicted=velocity_predicted)


def test_the_attribute_follows_class_and_speed() -> None:
    names, speeds = zip(*EXPECTED)
    assert box_attributes(sample(list(names), speeds)) == list(EXPECTED.values())
    assert MOVING_SPEED == 0.2


def test_every_class_and_motion_gets_an_attribute_the_devkit_allows() -> None:
    constants = pytest.importorskip('nuscenes.eval.detection.constants')
    assert ATTRIBUTE_NAMES == tuple(constants.ATTRIBUTE_NAMES)
    assert {name for name, _ in EXPECTED} == set(constants.DETECTION_NAMES)


def test_without_predicted_velocity_each_class_keeps_its_default() -> None:
    names = sorted(DEFAULT_ATTRIBUTES)
    static = sample(names, np.zeros(len(names)), velocity_predicted=False)
    assert not static.velocity_predicted and static.velocity.tolist() == [[0.0, 0.0]] * len(names)
    assert box_attributes(static) == [DEFAULT_ATTRIBUTES[name] for name in names]
    # Predicted as standing still, a bus is stopped rather than parked (the rule), unlike its default.
    assert box_attributes(sample(['bus'], [0.0])) == ['vehicle.stopped'] != [DEFAULT_ATTRIBUTES['bus']]
    assert sample(['car', 'bus'], [0.0, 5.0]).select(np.array([False, True])).velocity_predicted


def test_a_fixed_mapping_still_applies_and_is_checked() -> None:
    boxes = sample(['car', 'pedestrian'], [5.0, 5.0])
    assert box_attributes(boxes, DEFAULT_ATTRIBUTES) == ['vehicle.parked', 'pedestrian.standing']
    with pytest.raises(ValueError, match=r"lack the classes \['pedestrian'\]; map every detected class to one of "
                                         r"\['pedestrian.moving'.* or pass attributes=None"):
        box_attributes(boxes, {'car': 'vehicle.moving'})
    with pytest.raises(ValueError, match=r"name attributes the devkit does not know: \['vehicle.parkd'\]"):
        box_attributes(boxes, {'car': 'vehicle.parkd', 'pedestrian': ''})


def test_detections_with_velocity_choose_by_speed_in_any_frame() -> None:
    lidar2global = np.eye(4)
    lidar2global[:2, :2] = [[0.0, -1.0], [1.0, 0.0]]  # the speed does not depend on the frame's turn
    lidar2global[:3, 3] = [500.0, 1200.0, 1.0]
    boxes = np.array([[10, 0, 0, 4.5, 1.9, 1.6, 0, 0.0, 3.0], [20, 0, 0, 4.5, 1.9, 1.6, 0, 0.1, 0.1],
                      [5, 5, 0, 0.7, 0.6, 1.8, 0, 0.0, -1.2], [8, 8, 0, 1.7, 0.6, 1.2, 0, 0.0, 0.0]])
    result = detections_to_sample_boxes(boxes, [0.9, 0.8, 0.7, 0.6], [0, 0, 1, 2], lidar2global,
                                        ('car', 'pedestrian', 'bicycle'))
    assert result.velocity_predicted
    np.testing.assert_allclose(result.velocity[0], [-3.0, 0.0], atol=1e-9)
    attributes = [box['attribute_name'] for box in build_submission({'s': result})['results']['s']]
    assert attributes == ['vehicle.moving', 'vehicle.parked', 'pedestrian.moving', 'cycle.without_rider']
    without = detections_to_sample_boxes(boxes[:, :7], [0.9, 0.8, 0.7, 0.6], [0, 0, 1, 2], lidar2global,
                                         ('car', 'pedestrian', 'bicycle'))
    assert not without.velocity_predicted
    assert [box['attribute_name'] for box in build_submission({'s': without})['results']['s']] == [
        'vehicle.parked', 'vehicle.parked', 'pedestrian.standing', 'cycle.without_rider']


def test_a_nan_velocity_is_refused() -> None:
    boxes = np.array([[10, 0, 0, 4.5, 1.9, 1.6, 0, math.nan, 3.0]])
    with pytest.raises(ValueError, match=r'1 predicted boxes are not finite .* box 0 = \[10\.0, .*nan, 3\.0\].* '
                                         r'finite boxes \(and velocities\)'):
        detections_to_sample_boxes(boxes, [0.9], [0], np.eye(4), ('car',), sample_token='tok')


def aae(truth: SampleBoxes, truth_attributes: list[str], predicted: SampleBoxes, name: str) -> float:
    """The devkit's attribute error of class ``name``: the submission read back by its EvalBoxes, matched at 2 m."""
    from nuscenes.eval.common.data_classes import EvalBoxes
    from nuscenes.eval.common.utils import center_distance
    from nuscenes.eval.detection.algo import accumulate, calc_tp
    from nuscenes.eval.detection.data_classes import DetectionBox
    predictions = EvalBoxes.deserialize(build_submission({'tok': predicted})['results'], DetectionBox)
    gt = EvalBoxes()
    gt.add_boxes('tok', [DetectionBox(sample_token='tok', translation=tuple(t), size=tuple(s), rotation=tuple(r),
                                      velocity=tuple(v), num_pts=10, detection_name=n, attribute_name=a)
                         for t, s, r, v, n, a in zip(truth.translation, truth.size, truth.rotation, truth.velocity,
                                                     truth.names, truth_attributes)])
    return calc_tp(accumulate(gt, predictions, name, center_distance, 2.0), 0.1, 'attr_err')


@pytest.mark.parametrize('name', ['car', 'bus', 'pedestrian', 'bicycle'])
def test_the_devkit_aae_follows_the_predicted_speed(name: str) -> None:
    pytest.importorskip('nuscenes.eval.detection.algo')
    speeds = np.array([0.0, 4.0, 0.0, 4.0, 4.0, 0.0, 4.0, 0.1])
    truth = sample([name] * 8, speeds)
    truth_attributes = box_attributes(truth)
    assert len(set(truth_attributes)) == 2
    assert aae(truth, truth_attributes, sample([name] * 8, speeds), name) == 0.0
    static = aae(truth, truth_attributes, sample([name] * 8, speeds, velocity_predicted=False), name)
    swapped = aae(truth, truth_attributes, sample([name] * 8, 4.0 - speeds), name)
    assert swapped == 1.0
    # Without velocity every box gets the default: right for the parked / standing half only (a bus's default,
    # vehicle.parked, is never a bus's ground truth: stopped or moving).
    assert static == (1.0 if name == 'bus' else pytest.approx(0.5, abs=0.2))
