"""Bridge to nuscenes-devkit (1.2.0, an optional extra): vispe's lidar-frame detections as a nuScenes detection
submission, and the devkit's own detection evaluation of them.

Submission format (https://www.nuscenes.org/object-detection)::

    {"meta": {"use_camera": true, "use_lidar": false, "use_radar": false, "use_map": false, "use_external": false},
     "results": {sample_token: [{"sample_token", "translation" [x, y, z] global gravity centre,
                                 "size" [w, l, h], "rotation" [w, x, y, z], "velocity" [vx, vy],
                                 "detection_name", "detection_score", "attribute_name"}, ...]}}

Every sample of the evaluated split needs an entry (an empty list is allowed).

Attributes (:func:`box_attributes`): when the detector predicts velocity (boxes (K, 9)), each box's attribute
follows its class and speed as in the nuScenes baselines (mmdetection3d's ``NuScenesDataset``): above
:data:`MOVING_SPEED` (0.2 m/s) car, truck, bus, trailer and construction_vehicle are ``vehicle.moving``, bicycle
and motorcycle ``cycle.with_rider``, pedestrian ``pedestrian.moving``; at or below it ``vehicle.parked`` (bus:
``vehicle.stopped``), ``cycle.without_rider``, ``pedestrian.standing``; barrier and traffic_cone none. Without
predicted velocity (the static rendered scenes; velocity written as [0, 0]) every box gets its class's
:data:`DEFAULT_ATTRIBUTES` (a parked or standing object; none for barrier and traffic_cone), as before: the AAE
then measures how often the ground truth is parked or standing, and the official NDS is not comparable to
published numbers of velocity-predicting detectors.

The devkit is imported lazily: this module imports without it. :func:`run_detection_eval` runs its
``DetectionEval`` on the tables in the data root; :func:`devkit_accumulate` runs its ``accumulate`` /
``calc_ap`` / ``calc_tp`` on boxes in memory, for when the full evaluation cannot run (a split the devkit does
not know, tables it cannot load).
"""
from __future__ import annotations

import contextlib
import io
import json
import math
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import torch
from mmengine.logging import MMLogger

from vispe.evaluation.nuscenes_detection import (DETECTION_NAMES, DetectionEvalConfig, DetectionSummary,
                                                 OrientedBoxes, SampleBoxes, check_classes)
from vispe.extras import NUSCENES_DEVKIT_INSTALL
from vispe.geometry.boxes import boxes_to_nuscenes

__all__ = ['ATTRIBUTE_NAMES', 'DEFAULT_ATTRIBUTES', 'MOVING_SPEED', 'NUSCENES_TABLES', 'SUBMISSION_META',
           'DevkitEvaluation', 'DevkitUnavailable', 'box_attributes', 'build_submission', 'detections_to_sample_boxes',
           'devkit_accumulate', 'devkit_import_error', 'lidar_boxes_to_global', 'run_detection_eval',
           'split_scene_names', 'write_submission']

SUBMISSION_META = {'use_camera': True, 'use_lidar': False, 'use_radar': False, 'use_map': False,
                   'use_external': False}

DEFAULT_ATTRIBUTES = {'car': 'vehicle.parked', 'truck': 'vehicle.parked', 'bus': 'vehicle.parked',
                      'trailer': 'vehicle.parked', 'construction_vehicle': 'vehicle.parked',
                      'pedestrian': 'pedestrian.standing', 'motorcycle': 'cycle.without_rider',
                      'bicycle': 'cycle.without_rider', 'traffic_cone': '', 'barrier': ''}

# The devkit's attribute names (nuscenes.eval.detection.constants.ATTRIBUTE_NAMES); '' is "no attribute".
ATTRIBUTE_NAMES = ('pedestrian.moving', 'pedestrian.sitting_lying_down', 'pedestrian.standing', 'cycle.with_rider',
                   'cycle.without_rider', 'vehicle.moving', 'vehicle.parked', 'vehicle.stopped')
# A box faster than this (m/s, speed of the predicted vx, vy) is moving (the nuScenes baselines' threshold).
MOVING_SPEED = 0.2
# (moving, not moving) attribute of each class with a motion attribute; the others have none.
MOTION_ATTRIBUTES = {**{name: ('vehicle.moving', 'vehicle.parked')
                        for name in ('car', 'truck', 'trailer', 'construction_vehicle')},
                     'bus': ('vehicle.moving', 'vehicle.stopped'),
                     'bicycle': ('cycle.with_rider', 'cycle.without_rider'),
                     'motorcycle': ('cycle.with_rider', 'cycle.without_rider'),
                     'pedestrian': ('pedestrian.moving', 'pedestrian.standing')}

# The tables the devkit's NuScenes class loads from <data_root>/<version>/.
NUSCENES_TABLES = ('category', 'attribute', 'visibility', 'instance', 'sensor', 'calibrated_sensor', 'ego_pose',
                   'log', 'scene', 'sample', 'sample_data', 'sample_annotation', 'map')

class DevkitUnavailable(RuntimeError):
    """The devkit's evaluation cannot run here; the message says why and what to do."""


def devkit_import_error() -> str | None:
    """None if the devkit's detection evaluation imports, else why not."""
    try:
        import nuscenes.eval.detection.evaluate  # noqa: F401
    except Exception as error:  # noqa: BLE001 - any failure to import means "not available", reported with its cause
        return (f'nuscenes-devkit does not import ({type(error).__name__}: {error}); install it with '
                f'`{NUSCENES_DEVKIT_INSTALL}` (the devkit\'s metadata pins numpy<2; the parts vispe uses run on '
                f'numpy 2)')
    return None


def lidar_boxes_to_global(boxes: np.ndarray | torch.Tensor, lidar2global: np.ndarray | torch.Tensor,
                          name: str = 'boxes') -> OrientedBoxes:
    """(K, 7) boxes (x, y, z, l, w, h, yaw) in the lidar frame -> global-frame nuScenes boxes.

    The centre goes through ``lidar2global`` (4, 4); the heading is the rotated box x axis projected on the
    global ground plane, so the box stays upright (yaw about global +z) even if the ego pose tilts.
    """
    boxes = np.asarray(boxes.detach().cpu() if isinstance(boxes, torch.Tensor) else boxes, dtype=np.float64)
    matrix = np.asarray(lidar2global.detach().cpu() if isinstance(lidar2global, torch.Tensor) else lidar2global,
                        dtype=np.float64)
    if boxes.ndim != 2 or boxes.shape[1] != 7:
        raise ValueError(f'{name} must be (K, 7) (x, y, z, l, w, h, yaw) in the lidar frame, got {boxes.shape}')
    rotation = matrix[:3, :3] if matrix.shape == (4, 4) else None
    if (rotation is None or not np.isfinite(matrix).all() or not np.allclose(matrix[3], [0, 0, 0, 1])
            or not np.allclose(rotation.T @ rotation, np.eye(3), atol=1e-5) or np.linalg.det(rotation) <= 0):
        raise ValueError(f'lidar2global for {name} must be a rigid (4, 4) transform (rotation and translation, '
                         f'last row 0 0 0 1), got {matrix.tolist()}; build it from the LIDAR_TOP calibrated_sensor '
                         f'and its ego_pose')
    centre = boxes[:, :3] @ rotation.T + matrix[:3, 3]
    heading = np.stack([np.cos(boxes[:, 6]), np.sin(boxes[:, 6]), np.zeros(len(boxes))], 1) @ rotation.T
    yaw = np.arctan2(heading[:, 1], heading[:, 0])
    centre_t, wlh, quaternion = boxes_to_nuscenes(torch.from_numpy(
        np.concatenate([centre, boxes[:, 3:6], yaw[:, None]], 1)))
    return OrientedBoxes(centre_t.numpy(), wlh.numpy(), quaternion.numpy())


def box_attributes(sample: SampleBoxes, attributes: Mapping[str, str] | None = None) -> list[str]:
    """Each box's nuScenes attribute: ``attributes[class]`` when given (one fixed attribute a class); else, when the
    sample's velocity was predicted, from its class and speed (above :data:`MOVING_SPEED` moving, module
    docstring); else its class's :data:`DEFAULT_ATTRIBUTES`.

    Raises:
        ValueError: ``attributes`` lacks a class of the boxes or names an attribute the devkit does not know.
    """
    names = sample.names.tolist()
    if attributes is not None:
        missing = sorted(set(names) - set(attributes))
        unknown = sorted({str(value) for value in attributes.values()} - {'', *ATTRIBUTE_NAMES})
        if missing or unknown:
            raise ValueError(f'attributes {dict(attributes)} ' + (f'lack the classes {missing}' if missing else
                             f'name attributes the devkit does not know: {unknown}') + f'; map every detected class '
                             f'to one of {list(ATTRIBUTE_NAMES)} or \'\', or pass attributes=None (chosen by speed)')
        return [str(attributes[name]) for name in names]
    if not sample.velocity_predicted:
        return [DEFAULT_ATTRIBUTES[name] for name in names]
    moving = np.hypot(sample.velocity[:, 0], sample.velocity[:, 1]) > MOVING_SPEED
    return [MOTION_ATTRIBUTES[name][0 if fast else 1] if name in MOTION_ATTRIBUTES else ''
            for name, fast in zip(names, moving.tolist())]


def _numpy(value: Any, name: str, where: str) -> np.ndarray:
    if value is None:
        raise KeyError(f'{where} has no {name!r}; the detector\'s predict mode returns dict(sample_token, '
                       f'boxes_3d (K, 7), scores (K,), labels_3d (K,))')
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu()
        return (value.double() if value.is_floating_point() else value).numpy()
    return np.asarray(value)


def detections_to_sample_boxes(boxes_3d: Any, scores: Any, labels_3d: Any, lidar2global: Any,
                               classes: Sequence[str], max_boxes: int = 500,
                               sample_token: str = '?') -> SampleBoxes:
    """One sample's detections -> its global-frame :class:`SampleBoxes`, ready for :func:`build_submission`.

    Args:
        boxes_3d: (K, 7) boxes (x, y, z, l, w, h, yaw) in the lidar frame, or (K, 9) with the velocity (vx, vy),
            which is rotated into the global frame for the submission (and chooses the attributes,
            :func:`box_attributes`).
        scores: (K,) confidences. labels_3d: (K,) indices into ``classes``.
        lidar2global: (4, 4) lidar -> global of the sample.
        max_boxes: the highest-scoring boxes kept (the submission allows 500 per sample).

    Raises:
        ValueError: shapes disagree, a box or score is NaN/inf or a size is <= 0, a label is out of range.
    """
    where = f'the prediction of sample {sample_token!r}'
    boxes = _numpy(boxes_3d, 'boxes_3d', where).astype(np.float64)
    scores = _numpy(scores, 'scores', where).astype(np.float64).reshape(-1)
    labels = _numpy(labels_3d, 'labels_3d', where).reshape(-1)
    if boxes.ndim != 2 or boxes.shape[1] < 7 or not len(boxes) == len(scores) == len(labels):
        raise ValueError(f'{where}: boxes_3d must be (K, 7) with K scores and labels, got {boxes.shape}, '
                         f'{scores.shape}, {labels.shape}')
    predicted = boxes.shape[1] >= 9
    velocity = boxes[:, 7:9] if predicted else np.zeros((len(boxes), 2))
    bad = ~np.isfinite(boxes[:, :9]).all(1) | ~np.isfinite(scores) | ~(boxes[:, 3:6] > 0).all(1)
    if bad.any():
        index = int(np.flatnonzero(bad)[0])
        raise ValueError(f'{where}: {int(bad.sum())} predicted boxes are not finite or have a size <= 0 (first: box '
                         f'{index} = {boxes[index, :9].tolist()}, score {scores[index]}); the detector must output '
                         f'finite boxes (and velocities) with positive sizes (check for NaN losses)')
    boxes = boxes[:, :7]
    if len(labels) and (labels.min() < 0 or labels.max() >= len(classes)):
        raise ValueError(f'{where}: labels_3d must index classes {tuple(classes)}, got values '
                         f'{labels.min()}..{labels.max()}')
    keep = np.argsort(-scores, kind='stable')[:max_boxes]
    global_boxes = lidar_boxes_to_global(boxes[keep], lidar2global, name=where)
    rotation = np.asarray(lidar2global.detach().cpu() if isinstance(lidar2global, torch.Tensor) else lidar2global,
                          dtype=np.float64)[:3, :3]
    global_velocity = np.concatenate([velocity[keep], np.zeros((len(keep), 1))], 1) @ rotation.T
    return SampleBoxes(global_boxes.translation, global_boxes.size, global_boxes.rotation,
                       names=[classes[int(label)] for label in labels[keep]], scores=scores[keep],
                       velocity=global_velocity[:, :2], velocity_predicted=predicted)


def build_submission(predictions: Mapping[str, SampleBoxes], meta: Mapping[str, Any] | None = None,
                     attributes: Mapping[str, str] | None = None) -> dict[str, Any]:
    """sample token -> predicted boxes (global frame) -> the submission dict (samples in the given order).

    ``attributes``: one fixed attribute per class; None (default) chooses each box's by :func:`box_attributes`
    (its speed when the velocity was predicted)."""
    results = {}
    for token, sample in predictions.items():
        results[token] = [dict(sample_token=token, translation=[float(v) for v in translation],
                               size=[float(v) for v in size], rotation=[float(v) for v in rotation],
                               velocity=[float(v) for v in velocity], detection_name=str(name),
                               detection_score=float(score), attribute_name=attribute)
                          for translation, size, rotation, name, score, velocity, attribute
                          in zip(sample.translation, sample.size, sample.rotation, sample.names, sample.scores,
                                 sample.velocity, box_attributes(sample, attributes))]
    return {'meta': dict(SUBMISSION_META if meta is None else meta), 'results': results}


def write_submission(path: str | os.PathLike, submission: Mapping[str, Any]) -> Path:
    """Write the submission json atomically (a temporary file in the same folder, then a rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f'.{path.name}.', suffix='.tmp', dir=path.parent)
    try:
        with os.fdopen(handle, 'w') as file:
            json.dump(submission, file, allow_nan=False)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def split_scene_names(split: str, data_root: str | os.PathLike | None = None,
                      version: str = 'v1.0-trainval') -> list[str]:
    """Scene names of a split: a devkit split (``nuscenes.utils.splits``: train, val, test, mini_train, ...) or a
    custom split in ``<data_root>/<version>/splits.json`` (the devkit's own custom-split file)."""
    reasons = []
    import_error = devkit_import_error()
    if import_error is None:
        from nuscenes.utils.splits import create_splits_scenes
        predefined = create_splits_scenes(verbose=False)
        if split in predefined:
            return list(predefined[split])
        reasons.append(f'the devkit splits are {sorted(predefined)}')
    else:
        reasons.append(import_error)
    if data_root is not None:
        custom = Path(data_root) / version / 'splits.json'
        if custom.is_file():
            try:
                splits = json.loads(custom.read_text())
            except json.JSONDecodeError as error:
                raise ValueError(f'{custom} is not valid json ({error}); rewrite it as '
                                 f'{{"split name": ["scene-0001", ...]}}') from error
            if split in splits:
                return list(splits[split])
            reasons.append(f'{custom} has no split {split!r} (it has {sorted(splits)})')
        else:
            reasons.append(f'no custom split file {custom}')
    raise ValueError(f'unknown split {split!r}: ' + '; '.join(reasons) + '; use a devkit split name, add the split '
                     f'to splits.json, or pass the scene names')


@dataclass(frozen=True)
class DevkitEvaluation:
    """The devkit's results: ``summary`` (its per-class APs and TP errors), ``mean_ap``, ``tp_errors`` (all five,
    by the devkit's names), ``nd_score`` (the official NDS over all five) and ``method`` ('DetectionEval' or
    'accumulate')."""

    summary: DetectionSummary
    mean_ap: float
    tp_errors: dict[str, float]
    nd_score: float
    method: str


def _devkit_config(classes: Sequence[str], config: DetectionEvalConfig, max_boxes_per_sample: int) -> Any:
    from nuscenes.eval.detection.data_classes import DetectionConfig
    class_range = config.class_range or {name: math.inf for name in DETECTION_NAMES}
    devkit_config = DetectionConfig(class_range=dict(class_range), dist_fcn='center_distance',
                                    dist_ths=list(config.dist_ths), dist_th_tp=config.dist_th_tp,
                                    min_recall=config.min_recall, min_precision=config.min_precision,
                                    max_boxes_per_sample=max_boxes_per_sample,
                                    mean_ap_weight=config.mean_ap_weight)
    # Evaluate (and average over) vispe's classes only; with all ten names this is the official set.
    devkit_config.class_names = list(classes)
    return devkit_config


def _evaluation(metrics: Any, method: str) -> DevkitEvaluation:
    from nuscenes.eval.detection.constants import TP_METRICS
    cfg = metrics.cfg
    summary = DetectionSummary(
        {name: {dist_th: metrics.get_label_ap(name, dist_th) for dist_th in cfg.dist_ths} for name in cfg.class_names},
        {name: {tp: metrics.get_label_tp(name, tp) for tp in TP_METRICS} for name in cfg.class_names},
        cfg.mean_ap_weight)
    return DevkitEvaluation(summary, float(metrics.mean_ap), dict(metrics.tp_errors), float(metrics.nd_score),
                            method)


def _unavailable(reason: str, required: bool) -> None:
    if required:
        raise DevkitUnavailable(reason)
    MMLogger.get_current_instance().warning(f'nuScenes devkit evaluation skipped: {reason}')


def run_detection_eval(data_root: str | os.PathLike, version: str, split: str, submission_path: str | os.PathLike,
                       classes: Sequence[str], config: DetectionEvalConfig | None = None,
                       max_boxes_per_sample: int = 500, required: bool = False) -> DevkitEvaluation | None:
    """The devkit's ``DetectionEval`` of a submission json on ``<data_root>/<version>`` for ``split``.

    The devkit always drops ground truth without lidar/radar points and bicycles in bike racks, whatever
    ``config`` says. Returns None (and logs why) when it cannot run: the devkit does not import, a table is
    missing, the devkit does not know the split (or not for this version), its split holds other samples than
    the submission, or no sample has a predicted box (the devkit fails then);
    with ``required`` these raise :class:`DevkitUnavailable` instead. Errors of the evaluation itself propagate.
    """
    config = config or DetectionEvalConfig()
    classes = check_classes(classes)
    reason = devkit_import_error()
    if reason is not None:
        return _unavailable(reason, required)
    table_root = Path(data_root) / version
    missing = [name for name in NUSCENES_TABLES if not (table_root / f'{name}.json').is_file()]
    if missing:
        return _unavailable(f'{table_root} lacks the nuScenes tables {[f"{n}.json" for n in missing]}', required)
    try:
        scenes = set(split_scene_names(split, data_root, version))
    except ValueError as error:
        return _unavailable(str(error), required)
    from nuscenes.utils.splits import is_predefined_split
    needs = {'train': 'trainval', 'val': 'trainval', 'train_detect': 'trainval', 'train_track': 'trainval',
             'mini_train': 'mini', 'mini_val': 'mini', 'test': 'test'}
    if is_predefined_split(split) and not version.endswith(needs[split]):
        return _unavailable(f'the devkit evaluates split {split!r} only on a *{needs[split]} version, not {version!r}',
                            required)
    with open(submission_path) as file:
        results = json.load(file).get('results', {})
    if not any(results.values()):
        return _unavailable(f'{submission_path} has no predicted box in any sample (the devkit fails then)', required)
    predicted_samples = set(results)
    from nuscenes import NuScenes
    from nuscenes.eval.detection.evaluate import DetectionEval
    log = io.StringIO()
    with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
        nusc = NuScenes(version=version, dataroot=str(data_root), verbose=False)
    split_samples = {sample['token'] for sample in nusc.sample
                     if nusc.get('scene', sample['scene_token'])['name'] in scenes}
    if split_samples != predicted_samples:
        return _unavailable(f"the devkit's split {split!r} holds {len(split_samples)} samples of {table_root} and the "
                            f"submission {len(predicted_samples)}, {len(split_samples ^ predicted_samples)} of them in "
                            f"one only: vispe's dataset and the devkit define the split differently", required)
    with tempfile.TemporaryDirectory() as output_dir, contextlib.redirect_stdout(log), \
            contextlib.redirect_stderr(log):
        evaluator = DetectionEval(nusc, _devkit_config(classes, config, max_boxes_per_sample),
                                  result_path=str(submission_path), eval_set=split, output_dir=output_dir,
                                  verbose=False)
        metrics, _ = evaluator.evaluate()
    return _evaluation(metrics, 'DetectionEval')


def _eval_boxes(boxes: Mapping[str, SampleBoxes], predicted: bool, attributes: Mapping[str, str] | None) -> Any:
    """The devkit's EvalBoxes: predictions with their velocity and :func:`box_attributes`, ground truth without."""
    from nuscenes.eval.common.data_classes import EvalBoxes
    from nuscenes.eval.detection.data_classes import DetectionBox
    eval_boxes = EvalBoxes()
    for token, sample in boxes.items():
        chosen = box_attributes(sample, attributes) if predicted else [''] * len(sample)
        eval_boxes.add_boxes(token, [DetectionBox(
            sample_token=token, translation=tuple(float(v) for v in translation), size=tuple(float(v) for v in size),
            rotation=tuple(float(v) for v in rotation),
            velocity=tuple(float(v) for v in velocity) if predicted else (math.nan, math.nan), num_pts=int(num_pts),
            detection_name=str(name), detection_score=float(score) if predicted else -1.0, attribute_name=attribute)
            for translation, size, rotation, name, score, num_pts, velocity, attribute
            in zip(sample.translation, sample.size, sample.rotation, sample.names, sample.scores, sample.num_pts,
                   sample.velocity, chosen)])
    return eval_boxes


def devkit_accumulate(gt: Mapping[str, SampleBoxes], predictions: Mapping[str, SampleBoxes],
                      classes: Sequence[str], config: DetectionEvalConfig | None = None,
                      attributes: Mapping[str, str] | None = None) -> DevkitEvaluation:
    """The devkit's ``accumulate`` / ``calc_ap`` / ``calc_tp`` and ``DetectionMetrics`` on boxes in memory
    (already filtered, e.g. by :func:`~vispe.evaluation.nuscenes_detection.filter_boxes`), the steps of its
    ``DetectionEval.evaluate``. Ground truth has no velocity or attribute here, so its AVE and AAE are 1.
    ``attributes``: as :func:`build_submission`'s."""
    reason = devkit_import_error()
    if reason is not None:
        raise DevkitUnavailable(reason)
    from nuscenes.eval.common.utils import center_distance
    from nuscenes.eval.detection.algo import accumulate, calc_ap, calc_tp
    from nuscenes.eval.detection.constants import TP_METRICS
    from nuscenes.eval.detection.data_classes import DetectionMetrics
    config = config or DetectionEvalConfig()
    classes = check_classes(classes)
    gt_boxes = _eval_boxes(gt, False, attributes)
    pred_boxes = _eval_boxes(predictions, True, attributes)
    devkit_config = _devkit_config(classes, config, 500)
    metrics = DetectionMetrics(devkit_config)
    for name in classes:
        curves = {dist_th: accumulate(gt_boxes, pred_boxes, name, center_distance, dist_th)
                  for dist_th in config.dist_ths}
        for dist_th, curve in curves.items():
            metrics.add_label_ap(name, dist_th, calc_ap(curve, config.min_recall, config.min_precision))
        for metric_name in TP_METRICS:
            not_applicable = ((name == 'traffic_cone' and metric_name in ('attr_err', 'vel_err', 'orient_err'))
                              or (name == 'barrier' and metric_name in ('attr_err', 'vel_err')))
            metrics.add_label_tp(name, metric_name, math.nan if not_applicable
                                 else calc_tp(curves[config.dist_th_tp], config.min_recall, metric_name))
    return _evaluation(metrics, 'accumulate')
