"""The nuScenes detection metric (Caesar et al., "nuScenes: A multimodal dataset for autonomous driving",
CVPR 2020): vispe's own implementation of nuscenes-devkit 1.2.0's detection evaluation (``detection_cvpr_2019``).

Boxes are in the global frame, as in the nuScenes tables and the submission format: ``translation`` (K, 3)
the gravity centre, ``size`` (K, 3) as (w, l, h), ``rotation`` (K, 4) a quaternion (w, x, y, z).

Per class and centre-distance threshold d in {0.5, 1, 2, 4} m:

1. the predictions of all samples are sorted by score, highest first (equal scores: the later one first,
   as the devkit sorts);
2. each is matched greedily to the nearest still unmatched ground-truth box of its class in its sample by the
   bird's-eye-view (x, y) centre distance; a match needs distance < d;
3. precision and recall after each prediction; precision is interpolated at the 101 recall points
   0, 0.01, ..., 1 (0 past the highest recall reached);
4. AP = mean over the recall points above ``min_recall`` of max(precision - ``min_precision``, 0),
   divided by 1 - ``min_precision``.

True-positive errors come from the matches at d = 2 m: ATE the centre distance (m), ASE = 1 - IoU of the two
boxes aligned on centre and heading (the devkit's ``scale_iou``), AOE the smallest yaw difference (rad; period
pi for barrier, not defined (nan) for traffic_cone: ``DetectionEvalConfig.yaw_symmetry``). Each is the cumulative
mean over the matches in score order, resampled at the confidence of every recall point, and averaged over the
recall points from ``min_recall`` (excluded) to the highest recall reached; a class with no match gets error 1.

mAP is the mean AP over classes and thresholds, mTP the mean error over classes (nan ignored), and

    NDS = (w * mAP + sum over the used TP errors of (1 - min(1, mTP))) / (w + number of used TP errors),  w = 5.

With all five TP errors (ATE, ASE, AOE, AVE, AAE) this is the official nuScenes detection score. Velocity and
attribute errors do not apply to static scenes without attributes, so vispe's default uses (ATE, ASE, AOE) only:
that NDS is **not** comparable to published nuScenes NDS values. A TP error that is nan for every class scores
0, as in the devkit.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np
import torch
from kornia.geometry.conversions import quaternion_to_rotation_matrix

from vispe.datasets.nuscenes_tables import DETECTION_NAMES
from vispe.geometry.boxes import boxes_from_nuscenes

__all__ = ['BIKE_RACK_CATEGORY', 'CVPR_2019_CLASS_RANGE', 'DETECTION_NAMES', 'TP_ERROR_NAMES',
           'DetectionCurves', 'DetectionEvalConfig', 'DetectionSummary', 'OrientedBoxes', 'SampleBoxes',
           'accumulate_class', 'average_precision', 'check_classes', 'evaluate_detection', 'filter_boxes',
           'nd_score', 'quaternion_yaw', 'tp_error']

BIKE_RACK_CATEGORY = 'static_object.bicycle_rack'

# The devkit's detection_cvpr_2019 evaluation ranges: boxes farther (xy) from the ego vehicle are dropped (m).
CVPR_2019_CLASS_RANGE = {'car': 50.0, 'truck': 50.0, 'bus': 50.0, 'trailer': 50.0, 'construction_vehicle': 50.0,
                         'pedestrian': 40.0, 'motorcycle': 40.0, 'bicycle': 40.0, 'traffic_cone': 30.0,
                         'barrier': 30.0}

# The devkit's orientation rules: a class's yaw symmetry n (its box looks the same after 1/n of a turn, so AOE uses
# the period 2π/n) or None where AOE is not evaluated; classes not listed are not symmetric (n = 1).
NUSCENES_YAW_SYMMETRY = {'barrier': 2, 'traffic_cone': None}

# vispe's true-positive errors with their nuScenes metric names: translation, scale, orientation.
TP_ERROR_NAMES = {'trans_err': 'mATE', 'scale_err': 'mASE', 'orient_err': 'mAOE'}

NUM_RECALL_POINTS = 101


def check_classes(classes: Sequence[str]) -> tuple[str, ...]:
    """Refuse class names the nuScenes detection task does not know, and duplicates."""
    classes = tuple(classes)
    unknown = [name for name in classes if name not in DETECTION_NAMES]
    if unknown or not classes or len(set(classes)) != len(classes):
        raise ValueError(f'classes must be distinct nuScenes detection names {DETECTION_NAMES}, got {classes}'
                         + (f' (unknown: {unknown})' if unknown else '')
                         + '; the dataset maps nuScenes categories to these names (category_to_detection_name)')
    return classes


@dataclass(frozen=True)
class OrientedBoxes:
    """K boxes in the global frame: translation (K, 3), size (K, 3) as (w, l, h), rotation (K, 4) (w, x, y, z)."""

    translation: np.ndarray
    size: np.ndarray
    rotation: np.ndarray

    def __post_init__(self) -> None:
        for name, width in (('translation', 3), ('size', 3), ('rotation', 4)):
            value = np.asarray(getattr(self, name), dtype=np.float64).reshape(-1, width)
            object.__setattr__(self, name, value)
        if not len(self.translation) == len(self.size) == len(self.rotation):
            raise ValueError(f'boxes need as many translations, sizes and rotations, got {len(self.translation)}, '
                             f'{len(self.size)} and {len(self.rotation)}')

    def __len__(self) -> int:
        return len(self.translation)

    def contains(self, points: np.ndarray) -> np.ndarray:
        """(N, 3) points -> (K, N) bool: the point lies in the box (faces included), as the devkit's
        ``points_in_box``."""
        if not len(self):
            return np.zeros((0, len(points)), dtype=bool)
        rotation = quaternion_to_rotation_matrix(torch.from_numpy(self.rotation)).numpy()
        local = np.einsum('kji,knj->kni', rotation, points[None] - self.translation[:, None])
        half = self.size[:, None, [1, 0, 2]] / 2  # (l, w, h) along the box's x, y, z
        return (np.abs(local) <= half).all(-1)


@dataclass(frozen=True)
class SampleBoxes(OrientedBoxes):
    """The boxes of one sample: :class:`OrientedBoxes` plus ``names`` (K,) nuScenes detection names,
    ``scores`` (K,) (ground truth: -1), ``num_pts`` (K,) lidar + radar points in the box (predictions: -1) and
    ``velocity`` (K, 2) global-frame (vx, vy) m/s (zeros when not predicted); ``velocity_predicted`` says which
    (default: whether ``velocity`` was given), and so whether the submission's attributes follow the speed."""

    names: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=str))
    scores: np.ndarray | None = None
    num_pts: np.ndarray | None = None
    velocity: np.ndarray | None = None
    velocity_predicted: bool | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        count = len(self.translation)
        predicted = self.velocity is not None if self.velocity_predicted is None else bool(self.velocity_predicted)
        object.__setattr__(self, 'velocity_predicted', predicted)
        object.__setattr__(self, 'names', np.asarray(self.names, dtype=str).reshape(-1))
        for name in ('scores', 'num_pts'):
            value = getattr(self, name)
            value = np.full(count, -1.0) if value is None else np.asarray(value, dtype=np.float64).reshape(-1)
            object.__setattr__(self, name, value)
        velocity = np.zeros((count, 2)) if self.velocity is None else np.asarray(self.velocity, np.float64)
        object.__setattr__(self, 'velocity', velocity.reshape(-1, 2))
        if not len(self.names) == len(self.scores) == len(self.num_pts) == len(self.velocity) == count:
            raise ValueError(f'{count} boxes need {count} names, scores and num_pts, got {len(self.names)}, '
                             f'{len(self.scores)} and {len(self.num_pts)}')
        unknown = sorted(set(self.names.tolist()) - set(DETECTION_NAMES))
        if unknown:
            raise ValueError(f'unknown detection names {unknown}; nuScenes detection names are {DETECTION_NAMES}')

    @cached_property
    def yaw(self) -> np.ndarray:
        """(K,) heading of each box about +z (:func:`quaternion_yaw`)."""
        return quaternion_yaw(self.rotation)

    def select(self, keep: np.ndarray) -> SampleBoxes:
        """The boxes where ``keep`` (K,) is True."""
        return SampleBoxes(self.translation[keep], self.size[keep], self.rotation[keep], self.names[keep],
                           self.scores[keep], self.num_pts[keep], self.velocity[keep], self.velocity_predicted)


def quaternion_yaw(rotation: np.ndarray) -> np.ndarray:
    """(K, 4) quaternions (w, x, y, z) -> (K,) heading of the rotated x axis about +z, the devkit's
    ``quaternion_yaw`` (any tilt is ignored)."""
    rotation = np.asarray(rotation, dtype=np.float64).reshape(-1, 4)
    placeholder = torch.ones(len(rotation), 3, dtype=torch.float64)
    boxes = boxes_from_nuscenes(placeholder, placeholder, torch.from_numpy(rotation), max_tilt=math.pi)
    return boxes[:, 6].numpy()


@dataclass(frozen=True)
class DetectionEvalConfig:
    """The devkit's ``detection_cvpr_2019`` settings. ``class_range`` None keeps boxes at any distance;
    ``filter_empty`` drops ground truth with no lidar or radar point; ``filter_bike_racks`` drops bicycles and
    motorcycles whose centre lies in a ``static_object.bicycle_rack`` annotation (both the devkit's filters);
    ``yaw_symmetry`` sets classes' orientation periods over the devkit's rules (:data:`NUSCENES_YAW_SYMMETRY`)."""

    class_range: Mapping[str, float] | None = field(default_factory=lambda: dict(CVPR_2019_CLASS_RANGE))
    dist_ths: tuple[float, ...] = (0.5, 1.0, 2.0, 4.0)
    dist_th_tp: float = 2.0
    min_recall: float = 0.1
    min_precision: float = 0.1
    mean_ap_weight: float = 5.0
    filter_empty: bool = True
    filter_bike_racks: bool = True
    yaw_symmetry: Mapping[str, int | None] = field(default_factory=lambda: dict(NUSCENES_YAW_SYMMETRY))

    def __post_init__(self) -> None:
        object.__setattr__(self, 'yaw_symmetry', {**NUSCENES_YAW_SYMMETRY, **self.yaw_symmetry})
        for name, fold in self.yaw_symmetry.items():
            if fold is not None and (isinstance(fold, bool) or not isinstance(fold, int) or fold < 1):
                raise ValueError(f'yaw_symmetry[{name!r}] must be a whole number n >= 1 (the class looks the same '
                                 f'after 1/n of a turn; AOE uses the period 2π/n) or None (no AOE); got {fold!r}')
        if self.dist_th_tp not in self.dist_ths:
            raise ValueError(f'dist_th_tp={self.dist_th_tp} must be one of dist_ths={self.dist_ths}')
        if not (0 <= self.min_precision < 1 and 0 <= self.min_recall <= 1):
            raise ValueError(f'need 0 <= min_precision < 1 and 0 <= min_recall <= 1, got {self.min_precision} and '
                             f'{self.min_recall}')
        if self.class_range is not None:
            missing = [name for name in DETECTION_NAMES if name not in self.class_range]
            if missing:
                raise ValueError(f'class_range lacks {missing}; give a range (m) for every detection name or None')


def filter_boxes(boxes: Mapping[str, SampleBoxes], ego_translation: Mapping[str, np.ndarray],
                 config: DetectionEvalConfig,
                 bike_racks: Mapping[str, OrientedBoxes] | None = None) -> dict[str, SampleBoxes]:
    """The devkit's ``filter_eval_boxes``: per sample, drop boxes at xy distance >= the class range from the ego
    position (``ego_translation[token]`` (3,), the LIDAR_TOP key frame's ego pose), then boxes with
    ``num_pts == 0``, then bicycles and motorcycles in a bike rack."""
    filtered = {}
    for token, sample in boxes.items():
        keep = np.ones(len(sample), dtype=bool)
        if config.class_range is not None:
            if token not in ego_translation:
                raise KeyError(f'no ego pose for sample {token!r}: the LIDAR_TOP key frame of the sample is missing '
                               f'in sample_data / ego_pose')
            ego_dist = np.linalg.norm(sample.translation[:, :2] - np.asarray(ego_translation[token])[:2], axis=1)
            ranges = np.array([config.class_range[name] for name in sample.names], dtype=np.float64)
            keep &= ego_dist < ranges
        if config.filter_empty:
            keep &= sample.num_pts != 0
        racks = bike_racks.get(token) if bike_racks is not None else None
        if config.filter_bike_racks and racks is not None and len(racks):
            cycles = np.isin(sample.names, ('bicycle', 'motorcycle'))
            keep &= ~(cycles & racks.contains(sample.translation).any(0))
        filtered[token] = sample.select(keep)
    return filtered


@dataclass(frozen=True)
class DetectionCurves:
    """One class at one distance threshold, at the 101 recall points: ``precision``, ``confidence`` and the TP
    ``errors`` (name -> (101,)), each (101,); ``recall`` is 0, 0.01, ..., 1."""

    precision: np.ndarray
    confidence: np.ndarray
    errors: dict[str, np.ndarray]
    recall: np.ndarray = field(default_factory=lambda: np.linspace(0, 1, NUM_RECALL_POINTS))

    @classmethod
    def no_match(cls) -> DetectionCurves:
        """No ground truth or no match: precision and confidence 0, every error 1."""
        zeros = np.zeros(NUM_RECALL_POINTS)
        return cls(zeros, zeros.copy(), {name: np.ones(NUM_RECALL_POINTS) for name in TP_ERROR_NAMES})

    @property
    def max_recall_index(self) -> int:
        """Index of the highest recall reached: the last recall point with a confidence > 0."""
        nonzero = np.flatnonzero(self.confidence)
        return int(nonzero[-1]) if len(nonzero) else 0


def _cumulative_mean(values: np.ndarray) -> np.ndarray:
    """Mean of values[:i + 1] for each i, nan ignored; all nan -> ones (the devkit's ``cummean``)."""
    valid = ~np.isnan(values)
    if not valid.any():
        return np.ones(len(values))
    total, count = np.nancumsum(values), np.cumsum(valid)
    return np.divide(total, count, out=np.zeros_like(total), where=count != 0)


def _angle_difference(a: np.ndarray, b: np.ndarray, period: float) -> np.ndarray:
    """|smallest difference| between angles a and b (rad) for a given period, in [0, pi]."""
    diff = np.mod(a - b + period / 2, period) - period / 2
    return np.abs(np.where(diff > math.pi, diff - 2 * math.pi, diff))


def _scale_error(gt_size: np.ndarray, pred_size: np.ndarray) -> float:
    """1 - IoU of two boxes of the given (w, l, h) sharing centre and heading."""
    intersection = np.prod(np.minimum(gt_size, pred_size))
    return float(1 - intersection / (np.prod(gt_size) + np.prod(pred_size) - intersection))


def accumulate_class(gt: Mapping[str, SampleBoxes], predictions: Mapping[str, SampleBoxes], class_name: str,
                     dist_th: float, yaw_period: float | None = None) -> DetectionCurves:
    """Greedy matching of one class's predictions at one centre-distance threshold -> :class:`DetectionCurves`;
    orientation errors use ``yaw_period`` (default: the devkit's, π for barrier and 2π otherwise)."""
    gt_of_class = {token: np.flatnonzero(sample.names == class_name) for token, sample in gt.items()}
    num_gt = sum(len(index) for index in gt_of_class.values())
    if num_gt == 0:
        return DetectionCurves.no_match()
    tokens, translations, sizes, yaws, scores = [], [], [], [], []
    for token, sample in predictions.items():
        pick = sample.names == class_name
        tokens += [token] * int(pick.sum())
        translations.append(sample.translation[pick])
        sizes.append(sample.size[pick])
        yaws.append(sample.yaw[pick])
        scores.append(sample.scores[pick])
    if not tokens:
        return DetectionCurves.no_match()
    translation, size, yaw, score = (np.concatenate(a) for a in (translations, sizes, yaws, scores))
    order = np.lexsort((np.arange(len(score)), score))[::-1]
    taken = {token: np.zeros(len(index), dtype=bool) for token, index in gt_of_class.items()}
    period = yaw_period if yaw_period is not None else math.pi if class_name == 'barrier' else 2 * math.pi
    is_match = np.zeros(len(order), dtype=bool)
    errors: dict[str, list[float]] = {name: [] for name in TP_ERROR_NAMES}
    for rank, index in enumerate(order):
        token = tokens[index]
        if token not in gt_of_class:
            raise KeyError(f'predictions for sample {token!r}, which has no ground truth entry; evaluate the same '
                           f'samples on both sides')
        candidates = gt_of_class[token]
        if not len(candidates):
            continue
        sample = gt[token]
        offset = sample.translation[candidates, :2] - translation[index, :2]
        distance = np.sqrt(offset[:, 0] ** 2 + offset[:, 1] ** 2)
        distance[taken[token]] = np.inf
        nearest = int(np.argmin(distance))
        if not distance[nearest] < dist_th:
            continue
        taken[token][nearest] = True
        is_match[rank] = True
        match = candidates[nearest]
        errors['trans_err'].append(float(distance[nearest]))
        errors['scale_err'].append(_scale_error(sample.size[match], size[index]))
        errors['orient_err'].append(float(_angle_difference(sample.yaw[match], yaw[index], period)))
    if not is_match.any():
        return DetectionCurves.no_match()
    true_pos = np.cumsum(is_match).astype(np.float64)
    false_pos = np.cumsum(~is_match).astype(np.float64)
    precision, recall = true_pos / (true_pos + false_pos), true_pos / num_gt
    confidence = score[order]
    recall_points = np.linspace(0, 1, NUM_RECALL_POINTS)
    precision_at = np.interp(recall_points, recall, precision, right=0)
    confidence_at = np.interp(recall_points, recall, confidence, right=0)
    match_confidence = confidence[is_match]
    errors_at = {}
    for name, values in errors.items():
        running = _cumulative_mean(np.asarray(values, dtype=np.float64))
        # np.interp needs increasing x: walk the confidences from low to high.
        errors_at[name] = np.interp(confidence_at[::-1], match_confidence[::-1], running[::-1])[::-1]
    return DetectionCurves(precision_at, confidence_at, errors_at)


def average_precision(curves: DetectionCurves, min_recall: float, min_precision: float) -> float:
    """Area of the precision above ``min_precision`` over the recall points above ``min_recall``, in [0, 1]."""
    first = round(100 * min_recall) + 1
    return float(np.mean(np.clip(curves.precision[first:] - min_precision, 0, None))) / (1.0 - min_precision)


def tp_error(curves: DetectionCurves, name: str, min_recall: float) -> float:
    """Mean of one TP error over the recall points from ``min_recall`` (excluded) to the highest recall reached;
    1 when that recall is not above ``min_recall``."""
    first, last = round(100 * min_recall) + 1, curves.max_recall_index
    if last < first:
        return 1.0
    return float(np.mean(curves.errors[name][first:last + 1]))


def nd_score(mean_ap: float, tp_errors: Mapping[str, float], mean_ap_weight: float = 5.0) -> float:
    """NDS = (w * mAP + sum(1 - min(1, mTP))) / (w + len(tp_errors)); a nan mTP scores 0."""
    scores = [0.0 if math.isnan(error) else 1.0 - min(1.0, error) for error in tp_errors.values()]
    return (mean_ap_weight * mean_ap + sum(scores)) / (mean_ap_weight + len(scores))


@dataclass(frozen=True)
class DetectionSummary:
    """Per-class results: ``label_aps[class][dist_th]`` and ``label_tp_errors[class][tp_name]`` (nan: the error
    does not apply to the class)."""

    label_aps: dict[str, dict[float, float]]
    label_tp_errors: dict[str, dict[str, float]]
    mean_ap_weight: float = 5.0

    @property
    def class_aps(self) -> dict[str, float]:
        """AP of each class, the mean over the distance thresholds."""
        return {name: float(np.mean(list(aps.values()))) for name, aps in self.label_aps.items()}

    @property
    def mean_ap(self) -> float:
        return float(np.mean(list(self.class_aps.values())))

    @property
    def tp_errors(self) -> dict[str, float]:
        """Each TP error averaged over the classes where it applies (nan where it applies to none)."""
        errors = {}
        for name in TP_ERROR_NAMES:
            values = np.array([tps[name] for tps in self.label_tp_errors.values()], dtype=np.float64)
            errors[name] = float(np.mean(values[~np.isnan(values)])) if (~np.isnan(values)).any() else math.nan
        return errors

    def nd_score(self, tp_metrics: Sequence[str] = tuple(TP_ERROR_NAMES)) -> float:
        """NDS over the TP errors ``tp_metrics`` (see the module docstring)."""
        errors = self.tp_errors
        return nd_score(self.mean_ap, {name: errors[name] for name in tp_metrics}, self.mean_ap_weight)


def evaluate_detection(gt: Mapping[str, SampleBoxes], predictions: Mapping[str, SampleBoxes],
                       classes: Sequence[str], config: DetectionEvalConfig | None = None) -> DetectionSummary:
    """AP per class and threshold and the TP errors per class, for boxes already filtered (:func:`filter_boxes`).

    Args:
        gt: sample token -> ground-truth boxes of the sample (global frame).
        predictions: sample token -> predicted boxes, for exactly the samples of ``gt``; prediction order
            decides between equal scores (later first).
        classes: the detection names to evaluate; mAP averages over them (a class without ground truth has AP 0).
    """
    config = config or DetectionEvalConfig()
    classes = check_classes(classes)
    missing, extra = [t for t in gt if t not in predictions], [t for t in predictions if t not in gt]
    if missing or extra:
        raise ValueError(f'predictions and ground truth must cover the same samples: {len(missing)} samples have no '
                         f'predictions {missing[:5]}, {len(extra)} predicted samples have no ground truth '
                         f'{extra[:5]}')
    label_aps: dict[str, dict[float, float]] = {}
    label_tp_errors: dict[str, dict[str, float]] = {}
    for name in classes:
        label_aps[name] = {}
        for dist_th in config.dist_ths:
            fold = config.yaw_symmetry.get(name, 1)
            curves = accumulate_class(gt, predictions, name, dist_th, 2 * math.pi / (fold or 1))
            label_aps[name][dist_th] = average_precision(curves, config.min_recall, config.min_precision)
            if dist_th == config.dist_th_tp:
                label_tp_errors[name] = {
                    error: math.nan if (fold is None and error == 'orient_err')
                    else tp_error(curves, error, config.min_recall) for error in TP_ERROR_NAMES}
    return DetectionSummary(label_aps, label_tp_errors, config.mean_ap_weight)
