"""nuScenes json tables of mv-scenes (the devkit's schema, ``docs/schema_nuscenes.md`` of nuscenes-devkit).

:class:`TableBuilder` collects the records of rendered samples and writes the 13 tables the devkit's
``NuScenes`` loads from ``<root>/v1.0-trainval/``: category, attribute, visibility, instance, sensor,
calibrated_sensor, ego_pose, log, scene, sample, sample_data, sample_annotation, map. Tokens are
32-hex md5 digests of the seed and the record's key (same seed, same tokens); timestamps are
microseconds. Each sample_data has its own ego_pose and calibrated_sensor record (rig jitter is per
sample); samples of a scene are 0.5 s apart and linked by prev/next, as are the sample_data of a
channel. Every annotation has its own instance (layouts are drawn independently per sample), no
attributes and no radar points; visibility tokens are nuScenes' '1'..'4' (0-40 %, 40-60 %, 60-80 %,
80-100 % of the object's pixels visible over the six cameras).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from vispe.geometry import boxes_to_nuscenes, transform_boxes

__all__ = ['ATTRIBUTES', 'LIDARSEG_INDEX', 'TABLE_NAMES', 'VISIBILITY_LEVELS', 'SampleRecord', 'SensorRecord',
           'TableBuilder', 'make_token', 'visibility_token']

TABLE_NAMES = ('category', 'attribute', 'visibility', 'instance', 'sensor', 'calibrated_sensor', 'ego_pose', 'log',
               'scene', 'sample', 'sample_data', 'sample_annotation', 'map')
VISIBILITY_LEVELS = (('1', 'v0-40', 'visibility of whole object is between 0 and 40%'),
                     ('2', 'v40-60', 'visibility of whole object is between 40 and 60%'),
                     ('3', 'v60-80', 'visibility of whole object is between 60 and 80%'),
                     ('4', 'v80-100', 'visibility of whole object is between 80 and 100%'))
# nuScenes' attribute names (none is used: the scenes are static and each object is annotated once).
ATTRIBUTES = ('vehicle.moving', 'vehicle.stopped', 'vehicle.parked', 'cycle.with_rider', 'cycle.without_rider',
              'pedestrian.sitting_lying_down', 'pedestrian.standing', 'pedestrian.moving')
# nuScenes-lidarseg label index of the categories used here (the category table's 'index' field).
LIDARSEG_INDEX = {'human.pedestrian.adult': 2, 'movable_object.barrier': 9, 'movable_object.trafficcone': 12,
                  'vehicle.bicycle': 14, 'vehicle.car': 17, 'vehicle.motorcycle': 21, 'vehicle.truck': 23}
SAMPLE_PERIOD_US = 500_000


def make_token(seed: int, kind: str, *keys: object) -> str:
    """A 32-hex token, the md5 of the seed, the table kind and the record's key."""
    text = '|'.join(['mv-scenes', str(seed), kind, *map(str, keys)])
    return hashlib.md5(text.encode()).hexdigest()


def visibility_token(fraction: float) -> str:
    """nuScenes visibility token '1'..'4' of a visible fraction in [0, 1]."""
    return '1' if fraction < 0.4 else '2' if fraction < 0.6 else '3' if fraction < 0.8 else '4'


@dataclass(frozen=True, eq=False)
class SensorRecord:
    """One sensor reading of a sample: channel, file (relative to the root), pose sensor -> ego
    (translation (3,), quaternion (4,) (w, x, y, z)), intrinsics (3, 3) or None (lidar), image (H, W)."""

    channel: str
    token: str
    filename: str
    translation: np.ndarray
    rotation: np.ndarray
    intrinsics: np.ndarray | None = None
    image_size: tuple[int, int] = (0, 0)


@dataclass(frozen=True, eq=False)
class SampleRecord:
    """What the tables need of one rendered sample.

    Attributes:
        split, scene_name, position: the split, its scene, the sample's index in the scene.
        timestamp: microseconds.
        ego_translation (3,), ego_rotation (4,): ego -> global.
        lidar2global: (4, 4) float64.
        sensors: the six cameras and the lidar.
        boxes: (N, 7) float64 lidar-frame boxes; labels (N,) int; num_lidar_pts (N,) int; visibility (N,) float.
        redraws: how many layouts were rejected before this one (empty-scene rule).
    """

    split: str
    scene_name: str
    position: int
    timestamp: int
    ego_translation: np.ndarray
    ego_rotation: np.ndarray
    lidar2global: np.ndarray
    sensors: tuple[SensorRecord, ...]
    boxes: np.ndarray
    labels: np.ndarray
    num_lidar_pts: np.ndarray
    visibility: np.ndarray
    redraws: int = 0


def _floats(values: Any) -> list[float]:
    return [float(v) for v in np.asarray(values, np.float64).ravel()]


@dataclass
class TableBuilder:
    """Collects :class:`SampleRecord` s (in scene order) and writes the tables.

    Args:
        seed: the conversion seed (tokens depend on it).
        categories: nuScenes category name of each label.
        scene_descriptions: description of each split's scenes (the rig), keyed by split.
    """

    seed: int
    categories: tuple[str, ...]
    scene_descriptions: dict[str, str]
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {name: [] for name in TABLE_NAMES})
    _sensor_tokens: dict[str, str] = field(default_factory=dict)
    _last: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        seed = self.seed
        self.tables['category'] = [dict(token=make_token(seed, 'category', name), name=name,
                                        description=f'mv-scenes objects of nuScenes category {name}',
                                        index=LIDARSEG_INDEX.get(name, 0)) for name in self.categories]
        self.tables['attribute'] = [dict(token=make_token(seed, 'attribute', name), name=name,
                                         description=f'nuScenes attribute {name} (unused in mv-scenes)')
                                    for name in ATTRIBUTES]
        self.tables['visibility'] = [dict(token=token, level=level, description=text)
                                     for token, level, text in VISIBILITY_LEVELS]
        log_tokens = [make_token(seed, 'log', split) for split in self.scene_descriptions]
        self.tables['log'] = [dict(token=token, logfile=f'mv-scenes-{split}', vehicle='mv-scenes-ego',
                                   date_captured='2024-01-01', location='mv-scenes')
                              for token, split in zip(log_tokens, self.scene_descriptions)]
        self.tables['map'] = [dict(token=make_token(seed, 'map'), log_tokens=log_tokens, category='semantic_prior',
                                   filename='')]

    def _sensor(self, channel: str) -> str:
        if channel not in self._sensor_tokens:
            token = make_token(self.seed, 'sensor', channel)
            self._sensor_tokens[channel] = token
            self.tables['sensor'].append(dict(token=token, channel=channel,
                                              modality='lidar' if channel.startswith('LIDAR') else 'camera'))
        return self._sensor_tokens[channel]

    def _scene(self, record: SampleRecord, sample_token: str) -> dict[str, Any]:
        """The scene of ``record``, created at its first sample (which also starts new prev/next chains)."""
        last = self._last.get('scene')
        if last is not None and last['name'] == record.scene_name:
            return last
        if record.position != 0:
            raise ValueError(f'scene {record.scene_name}: samples must come in scene order, got position '
                             f'{record.position} first')
        scene = dict(token=make_token(self.seed, 'scene', record.split, record.scene_name), name=record.scene_name,
                     description=self.scene_descriptions[record.split],
                     log_token=make_token(self.seed, 'log', record.split), nbr_samples=0,
                     first_sample_token=sample_token, last_sample_token=sample_token)
        self.tables['scene'].append(scene)
        self._last = {'scene': scene}
        return scene

    def add(self, record: SampleRecord) -> None:
        """Add one sample (its scene, sample_data, poses, calibrations and annotations)."""
        seed, key = self.seed, (record.split, record.scene_name, record.position)
        sample_token = make_token(seed, 'sample', *key)
        scene = self._scene(record, sample_token)
        previous = self._last.get('sample')
        sample = dict(token=sample_token, timestamp=int(record.timestamp), scene_token=scene['token'],
                      prev=previous['token'] if previous else '', next='')
        if previous:
            previous['next'] = sample_token
        self._last['sample'] = sample
        self.tables['sample'].append(sample)
        scene['nbr_samples'] += 1
        scene['last_sample_token'] = sample_token
        for sensor in record.sensors:
            pose_token = make_token(seed, 'ego_pose', *key, sensor.channel)
            self.tables['ego_pose'].append(dict(token=pose_token, translation=_floats(record.ego_translation),
                                                rotation=_floats(record.ego_rotation), timestamp=int(record.timestamp)))
            calibration_token = make_token(seed, 'calibrated_sensor', *key, sensor.channel)
            intrinsics = [] if sensor.intrinsics is None else [_floats(row) for row in sensor.intrinsics]
            self.tables['calibrated_sensor'].append(dict(
                token=calibration_token, sensor_token=self._sensor(sensor.channel),
                translation=_floats(sensor.translation), rotation=_floats(sensor.rotation),
                camera_intrinsic=intrinsics))
            before = self._last.get(sensor.channel)
            height, width = sensor.image_size
            data = dict(token=sensor.token, sample_token=sample_token, ego_pose_token=pose_token,
                        calibrated_sensor_token=calibration_token, timestamp=int(record.timestamp),
                        fileformat='pcd' if sensor.intrinsics is None else 'jpg', is_key_frame=True,
                        height=int(height), width=int(width), filename=sensor.filename,
                        prev=before['token'] if before else '', next='')
            if before:
                before['next'] = sensor.token
            self._last[sensor.channel] = data
            self.tables['sample_data'].append(data)
        self._annotations(record, sample_token, key)

    def _annotations(self, record: SampleRecord, sample_token: str, key: tuple[Any, ...]) -> None:
        if len(record.boxes) == 0:
            return
        boxes = transform_boxes(torch.from_numpy(np.asarray(record.boxes, np.float64))[None],
                                torch.from_numpy(np.asarray(record.lidar2global, np.float64))[None])[0]
        centres, sizes, rotations = (value.numpy() for value in boxes_to_nuscenes(boxes))
        for index, label in enumerate(record.labels):
            annotation_token = make_token(self.seed, 'sample_annotation', *key, index)
            instance_token = make_token(self.seed, 'instance', *key, index)
            self.tables['instance'].append(dict(
                token=instance_token, category_token=self.tables['category'][int(label)]['token'], nbr_annotations=1,
                first_annotation_token=annotation_token, last_annotation_token=annotation_token))
            self.tables['sample_annotation'].append(dict(
                token=annotation_token, sample_token=sample_token, instance_token=instance_token,
                visibility_token=visibility_token(float(record.visibility[index])), attribute_tokens=[],
                translation=_floats(centres[index]), size=_floats(sizes[index]), rotation=_floats(rotations[index]),
                prev='', next='', num_lidar_pts=int(record.num_lidar_pts[index]), num_radar_pts=0))

    def write(self, folder: Path) -> None:
        """Write ``<folder>/<table>.json`` for every table (compact json)."""
        folder.mkdir(parents=True, exist_ok=True)
        for name in TABLE_NAMES:
            (folder / f'{name}.json').write_text(json.dumps(self.tables[name], separators=(',', ':')))
