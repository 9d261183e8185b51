"""nuScenes detection mAP / NDS as an mmengine metric: vispe's own implementation, with nuscenes-devkit's
evaluation beside it when the devkit is installed (see :mod:`vispe.evaluation.nuscenes_detection` for the maths
and :mod:`vispe.evaluation.nuscenes_devkit` for the submission format)."""
from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from mmengine.evaluator import BaseMetric
from mmengine.logging import MMLogger

from vispe.datasets.nuscenes_tables import DETECTION_NAMES, NuScenesTables
from vispe.evaluation.nuscenes_detection import (BIKE_RACK_CATEGORY, CVPR_2019_CLASS_RANGE, TP_ERROR_NAMES,
                                                 DetectionEvalConfig, DetectionSummary, OrientedBoxes,
                                                 SampleBoxes, check_classes, evaluate_detection, filter_boxes, nd_score)
from vispe.evaluation.nuscenes_devkit import (DevkitEvaluation, DevkitUnavailable, build_submission,
                                              detections_to_sample_boxes, devkit_accumulate, devkit_import_error,
                                              run_detection_eval, write_submission)
from vispe.registry import METRICS

__all__ = ['NuScenesMetric', 'read_ground_truth']

MAX_SUBMISSION_BOXES = 500  # the nuScenes submission format's limit per sample


def read_ground_truth(tables: NuScenesTables, sample_tokens: Sequence[str]) -> tuple[
        dict[str, SampleBoxes], dict[str, np.ndarray], dict[str, OrientedBoxes]]:
    """Ground truth of the samples in the global frame, as the devkit reads it: per sample the annotations
    whose category has a detection name (``SampleBoxes``, ``num_pts`` = lidar + radar points), the ego position
    of its LIDAR_TOP key frame (3,), and its ``static_object.bicycle_rack`` boxes."""
    gt, ego_translation, bike_racks = {}, {}, {}
    for token in sample_tokens:
        annotations = tables.annotations(token)
        records = [tables.get('sample_annotation', ann, f'sample {token}') for ann in annotations.tokens]
        detected = [name is not None for name in annotations.detection_names]
        racks = [category == BIKE_RACK_CATEGORY for category in annotations.category_names]

        def fields(mask: list[bool], key: str) -> list[Any]:
            return [record[key] for record, keep in zip(records, mask) if keep]

        gt[token] = SampleBoxes(fields(detected, 'translation'), fields(detected, 'size'), fields(detected, 'rotation'),
                                names=[name for name in annotations.detection_names if name is not None],
                                num_pts=annotations.num_points[np.array(detected, dtype=bool)])
        bike_racks[token] = OrientedBoxes(fields(racks, 'translation'), fields(racks, 'size'),
                                          fields(racks, 'rotation'))
        ego_translation[token] = tables.lidar_frame(token).ego2global[:3, 3]
    return gt, ego_translation, bike_racks


@METRICS.register_module()
class NuScenesMetric(BaseMetric):
    """nuScenes detection metric: mAP over centre-distance thresholds 0.5/1/2/4 m, the TP errors mATE, mASE,
    mAOE and an NDS over the TP errors in ``tp_metrics``.

    NDS = (5 mAP + sum over ``tp_metrics`` of (1 - min(1, mTP))) / (5 + len(tp_metrics)). With all five nuScenes
    TP errors it is the official NDS; vispe's scenes are static and carry no attributes, so the default uses
    ATE, ASE and AOE only and is **not** comparable to published NDS values. When the devkit runs, its numbers
    come beside vispe's under ``devkit/``: ``devkit/NDS`` over the same ``tp_metrics`` (from the devkit's TP
    errors) and ``devkit/NDS_official``, the devkit's own NDS over all five, where the velocity and attribute
    errors of static, attribute-free ground truth are 1.

    ``process`` takes the detector's predictions ``dict(sample_token, boxes_3d (K, 7) lidar frame (x, y, z, l,
    w, h, yaw), scores (K,), labels_3d (K,) indices into classes)`` and the sample's ``lidar2global`` (4, 4) from
    ``data_batch['data_samples']`` (or the prediction); boxes go to the global frame (centre through lidar2global,
    yaw about global +z) and become nuScenes (w, l, h) + quaternion. Ground truth comes from the nuScenes tables
    of ``data_root``; every sample of ``split`` needs a prediction.

    Args:
        data_root: nuScenes-format root (``<data_root>/<version>/*.json``).
        split: a split name (:meth:`NuScenesTables.split_scenes`), a list of scene names, or None (all samples).
        version: the table folder.
        classes: the detection names the labels index; mAP averages over them.
        format_only: only write ``<outfile_prefix>.json`` (the submission) and return {}.
        outfile_prefix: where the submission json goes (a trailing ``.json`` is not doubled); None: a temporary
            file when the devkit needs one.
        use_devkit: 'auto' runs the devkit when it imports (and logs why not otherwise), True requires it,
            False skips it. Its ``DetectionEval`` runs when the tables and the split allow it, else its
            ``accumulate`` / ``calc_ap`` / ``calc_tp`` on vispe's ground truth.
        tp_metrics: the TP errors in the NDS, a subset of ('trans_err', 'scale_err', 'orient_err').
        max_boxes_per_sample: highest-scoring boxes kept per sample (at most 500, the submission limit).
        class_range: 'detection_cvpr_2019' (the devkit's per-class distance limits), a dict of ranges (m) per
            detection name, or None (no distance filter).
        filter_empty_gt: drop ground truth without lidar or radar points (the devkit always does).
        yaw_symmetry: classes whose boxes look the same after 1/n of a turn -> n (AOE with the period 2π/n), or
            None (no AOE), over the devkit's rules (barrier 2, traffic_cone None); e.g. ``dict(pedestrian=2)`` for a
            data set whose pedestrian mesh is symmetric under a half turn. The devkit's numbers keep its own rules.
            Per-class AOE comes as ``<class>_AOE`` (classes without AOE left out).
    """

    default_prefix: str | None = 'nusc'

    def __init__(self, data_root: str, split: str | Sequence[str] | None = 'val', version: str = 'v1.0-trainval',
                 classes: Sequence[str] = DETECTION_NAMES, format_only: bool = False,
                 outfile_prefix: str | None = None, use_devkit: bool | str = 'auto',
                 tp_metrics: Sequence[str] = tuple(TP_ERROR_NAMES), max_boxes_per_sample: int = 300,
                 class_range: str | Mapping[str, float] | None = 'detection_cvpr_2019', filter_empty_gt: bool = True,
                 yaw_symmetry: Mapping[str, int | None] | None = None, collect_device: str = 'cpu',
                 prefix: str | None = None) -> None:
        super().__init__(collect_device=collect_device, prefix=prefix)
        self.data_root, self.split, self.version = data_root, split, version
        self.classes = check_classes(classes)
        if format_only and outfile_prefix is None:
            raise ValueError('format_only=True writes <outfile_prefix>.json: pass outfile_prefix, e.g. '
                             'outfile_prefix="work_dirs/results_nusc"')
        self.format_only, self.outfile_prefix = format_only, outfile_prefix
        if use_devkit not in ('auto', True, False):
            raise ValueError(f"use_devkit must be 'auto', True or False, got {use_devkit!r}")
        self.use_devkit = use_devkit
        unknown = [name for name in tp_metrics if name not in TP_ERROR_NAMES]
        if unknown:
            raise ValueError(f'tp_metrics {unknown} unknown: choose from {tuple(TP_ERROR_NAMES)} (velocity and '
                             f'attribute errors do not apply: predictions carry neither; the devkit\'s NDS over all '
                             f'five is reported as devkit/NDS_official)')
        self.tp_metrics = tuple(tp_metrics)
        if not 1 <= max_boxes_per_sample <= MAX_SUBMISSION_BOXES:
            raise ValueError(f'max_boxes_per_sample must be in [1, {MAX_SUBMISSION_BOXES}] (the nuScenes submission '
                             f'limit), got {max_boxes_per_sample}')
        self.max_boxes_per_sample = max_boxes_per_sample
        if class_range == 'detection_cvpr_2019':
            class_range = dict(CVPR_2019_CLASS_RANGE)
        elif isinstance(class_range, str):
            raise ValueError(f"class_range must be 'detection_cvpr_2019', a dict of ranges or None, got "
                             f"{class_range!r}")
        symmetry = dict(yaw_symmetry or {})
        unknown = [name for name in symmetry if name not in DETECTION_NAMES]
        if unknown:
            raise ValueError(f'yaw_symmetry names {unknown}, which are not nuScenes detection names {DETECTION_NAMES}.')
        self.config = DetectionEvalConfig(class_range=class_range, filter_empty=filter_empty_gt, yaw_symmetry=symmetry)
        self._tables: NuScenesTables | None = None

    @property
    def tables(self) -> NuScenesTables:
        if self._tables is None:
            self._tables = NuScenesTables(self.data_root, self.version)
        return self._tables

    def process(self, data_batch: Any, data_samples: Sequence[Mapping[str, Any]]) -> None:
        samples = data_batch.get('data_samples', []) if isinstance(data_batch, Mapping) else []
        lidar2global_of = {sample['sample_token']: sample['lidar2global'] for sample in samples
                           if isinstance(sample, Mapping) and 'sample_token' in sample and 'lidar2global' in sample}
        for prediction in data_samples:
            token = prediction.get('sample_token')
            if token is None:
                raise KeyError(f'a prediction has no sample_token (keys: {sorted(prediction)}); the detector\'s '
                               f'predict mode returns dict(sample_token, boxes_3d, scores, labels_3d)')
            lidar2global = prediction.get('lidar2global', lidar2global_of.get(token))
            if lidar2global is None:
                raise KeyError(f'no lidar2global for sample {token!r}: data_batch["data_samples"] must carry '
                               f'lidar2global (4, 4) for each sample (MultiViewDetection adds it)')
            boxes = detections_to_sample_boxes(
                prediction.get('boxes_3d'), prediction.get('scores'), prediction.get('labels_3d'), lidar2global,
                self.classes, self.max_boxes_per_sample, sample_token=token)
            self.results.append(dict(sample_token=token, translation=boxes.translation, size=boxes.size,
                                     rotation=boxes.rotation, scores=boxes.scores, names=boxes.names,
                                     velocity=boxes.velocity if boxes.velocity_predicted else None))

    def _sample_tokens(self) -> list[str]:
        if self.split is None or isinstance(self.split, str):
            return self.tables.sample_tokens(self.split)
        scenes = set(self.split)
        tokens = [token for token in self.tables.sample_tokens() if self.tables.scene_name(token) in scenes]
        if not tokens:
            raise ValueError(f'none of the scenes {sorted(scenes)[:5]} has samples in {self.tables.table_root}')
        return tokens

    def _predictions(self, results: list[dict[str, Any]]) -> dict[str, SampleBoxes]:
        """Predictions by sample token, in the split's sample order; every sample of the split must be there."""
        by_token: dict[str, SampleBoxes] = {}
        for result in results:
            token = result['sample_token']
            if token in by_token:
                raise ValueError(f'sample {token!r} was predicted twice; each sample of the split must be evaluated '
                                 f'once (check the dataset for repeated samples)')
            by_token[token] = SampleBoxes(result['translation'], result['size'], result['rotation'],
                                          names=result['names'], scores=result['scores'],
                                          velocity=result.get('velocity'))
        tokens = self._sample_tokens()
        missing = [token for token in tokens if token not in by_token]
        known = set(tokens)
        extra = [token for token in by_token if token not in known]
        if missing:
            raise ValueError(f'{len(missing)} of the {len(tokens)} samples of split {self.split!r} have no predictions '
                             f'(tokens: {missing[:10]}{" ..." if len(missing) > 10 else ""}); the nuScenes evaluation '
                             f'needs every sample of the split: run the model on the whole split (do not subsample '
                             f'the test dataset)')
        if extra:
            raise ValueError(f'{len(extra)} predicted samples are not in split {self.split!r} of '
                             f'{self.tables.table_root} (tokens: {extra[:10]}); evaluate the split the dataset reads')
        return {token: by_token[token] for token in tokens}

    def _submission_path(self, folder: str) -> Path:
        if self.outfile_prefix is None:
            return Path(folder) / 'results_nusc.json'
        prefix = str(self.outfile_prefix)
        return Path(prefix if prefix.endswith('.json') else f'{prefix}.json')

    def compute_metrics(self, results: list[dict[str, Any]]) -> dict[str, float]:
        logger = MMLogger.get_current_instance()
        predictions = self._predictions(results)
        with tempfile.TemporaryDirectory() as folder:
            path = self._submission_path(folder)
            if self.format_only or self.outfile_prefix is not None or self.use_devkit is not False:
                write_submission(path, build_submission(predictions))
                if self.outfile_prefix is not None:
                    logger.info(f'nuScenes submission of {len(predictions)} samples written to {path}')
            if self.format_only:
                return {}
            tokens = list(predictions)
            gt, ego_translation, bike_racks = read_ground_truth(self.tables, tokens)
            gt = filter_boxes(gt, ego_translation, self.config, bike_racks)
            predictions = filter_boxes(predictions, ego_translation, self.config, bike_racks)
            absent = [name for name in self.classes if not any((boxes.names == name).any() for boxes in gt.values())]
            if absent:
                logger.warning(f'NuScenesMetric: no ground truth of {absent} in split {self.split!r}; their AP is 0 '
                               f'and counts in mAP (as in the devkit); pass the classes of the data set')
            summary = evaluate_detection(gt, predictions, self.classes, self.config)
            metrics = self._vispe_metrics(summary)
            devkit = self._devkit(path, gt, predictions) if self.use_devkit is not False else None
        if devkit is not None:
            metrics.update(self._devkit_metrics(devkit))
        logger.info('\n' + self._table(summary, devkit))
        return metrics

    def _vispe_metrics(self, summary: DetectionSummary) -> dict[str, float]:
        errors = summary.tp_errors
        metrics = {'mAP': summary.mean_ap, 'NDS': summary.nd_score(self.tp_metrics)}
        metrics.update({label: errors[name] for name, label in TP_ERROR_NAMES.items()})
        metrics.update({f'{name}_AP': ap for name, ap in summary.class_aps.items()})
        metrics.update({f'{name}_AOE': tps['orient_err'] for name, tps in summary.label_tp_errors.items()
                        if not math.isnan(tps['orient_err'])})
        return metrics

    def _devkit_metrics(self, devkit: DevkitEvaluation) -> dict[str, float]:
        metrics = {'devkit/mAP': devkit.mean_ap,
                   'devkit/NDS': nd_score(devkit.mean_ap, {name: devkit.tp_errors[name] for name in self.tp_metrics},
                                          self.config.mean_ap_weight),
                   'devkit/NDS_official': devkit.nd_score}
        metrics.update({f'devkit/{label}': devkit.tp_errors[name] for name, label in TP_ERROR_NAMES.items()})
        metrics.update({f'devkit/{name}_AP': ap for name, ap in devkit.summary.class_aps.items()})
        return metrics

    def _devkit(self, path: Path, gt: dict[str, SampleBoxes],
                predictions: dict[str, SampleBoxes]) -> DevkitEvaluation | None:
        """The devkit's DetectionEval on the submission, else its accumulate path; None when it does not import
        and use_devkit is 'auto'."""
        reason = devkit_import_error()
        if reason is not None:
            if self.use_devkit is True:
                raise DevkitUnavailable(f'use_devkit=True but {reason}')
            MMLogger.get_current_instance().warning(f'NuScenesMetric: devkit evaluation skipped: {reason}')
            return None
        result = None
        if isinstance(self.split, str):
            result = run_detection_eval(self.data_root, self.version, self.split, path, self.classes, self.config,
                                        MAX_SUBMISSION_BOXES)
        if result is None:
            MMLogger.get_current_instance().info("NuScenesMetric: running the devkit's accumulate/calc_ap/calc_tp on "
                                                 "vispe's filtered ground truth instead of its DetectionEval")
            result = devkit_accumulate(gt, predictions, self.classes, self.config)
        return result

    def _table(self, summary: DetectionSummary, devkit: DevkitEvaluation | None) -> str:
        header = f'{"class":<22}{"AP":>8}{"ATE":>8}{"ASE":>8}{"AOE":>8}' + (f'{"devkit AP":>11}' if devkit else '')
        lines = [header]
        for name in self.classes:
            errors = summary.label_tp_errors[name]
            row = f'{name:<22}{summary.class_aps[name]:8.4f}' + ''.join(
                f'{errors[key]:8.4f}' if not math.isnan(errors[key]) else f'{"n/a":>8}' for key in TP_ERROR_NAMES)
            lines.append(row + (f'{devkit.summary.class_aps[name]:11.4f}' if devkit else ''))
        lines.append(f'mAP {summary.mean_ap:.4f}  NDS({", ".join(self.tp_metrics)}) '
                     f'{summary.nd_score(self.tp_metrics):.4f}'
                     + (f'  | devkit ({devkit.method}) mAP {devkit.mean_ap:.4f}, official NDS {devkit.nd_score:.4f}'
                        if devkit else ''))
        return '\n'.join(lines)
