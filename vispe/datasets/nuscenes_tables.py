"""A reader of nuScenes-format tables (the devkit's json schema), without the devkit.

nuScenes (Caesar et al., CVPR 2020) stores a data set as json tables under ``<root>/<version>/``:
``sample``, ``sample_data``, ``calibrated_sensor``, ``ego_pose``, ``sample_annotation``, ``category``,
``instance``, ``scene``, ``sensor`` and ``log`` (``attribute``, ``visibility`` and ``map`` are read when
present). Files live at ``<root>/<sample_data.filename>``: ``samples/CAM_*/*.jpg`` (or .png) and
``samples/LIDAR_TOP/*.pcd.bin`` (float32 (N, 5): x, y, z, intensity, ring in the lidar frame).

Per sample this reader gives the key-frame records of the six cameras and of ``LIDAR_TOP`` (each with its
own ego pose, at its own timestamp), ``lidar2cam`` (V, 4, 4) = cam <- ego(t_cam) <- global <- ego(t_lidar)
<- lidar (mmdet3d's lidar2cam, both ego poses included), ``lidar2global`` (4, 4), and the annotations as
(N, 7) boxes ``(x, y, z, l, w, h, yaw)`` in the lidar frame (:func:`vispe.geometry.boxes_from_nuscenes`)
with their nuScenes detection names. Matrix maths is float64 numpy. Quaternions are (w, x, y, z).
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from vispe.datasets.nuscenes_table_checks import check_annotation_boxes, check_categories
from vispe.geometry import boxes_from_nuscenes

__all__ = ['CAMERA_CHANNELS', 'DETECTION_NAMES', 'LIDAR_CHANNEL', 'NuScenesTables', 'SampleAnnotations', 'SensorFrame',
           'category_to_detection_name', 'load_points', 'pose_matrix', 'quaternion_matrix', 'rigid_inverse']

# The six cameras in mmdet3d's order (the view order of every multi-view item).
CAMERA_CHANNELS = ('CAM_FRONT', 'CAM_FRONT_RIGHT', 'CAM_FRONT_LEFT', 'CAM_BACK', 'CAM_BACK_LEFT', 'CAM_BACK_RIGHT')
LIDAR_CHANNEL = 'LIDAR_TOP'
REQUIRED_TABLES = ('category', 'instance', 'sensor', 'calibrated_sensor', 'ego_pose', 'log', 'scene', 'sample',
                   'sample_data', 'sample_annotation')
OPTIONAL_TABLES = ('attribute', 'visibility', 'map')
# The ten classes of the nuScenes detection benchmark, in the devkit's order.
DETECTION_NAMES = ('car', 'truck', 'bus', 'trailer', 'construction_vehicle', 'pedestrian', 'motorcycle', 'bicycle',
                   'traffic_cone', 'barrier')
# nuScenes category -> detection name (the benchmark's mapping of the public category list); categories not
# listed (animal, personal mobility, strollers, wheelchairs, debris, pushable/pullable objects, bicycle racks,
# emergency vehicles) have no detection name and are not detection targets.
_DETECTION_NAME_OF_CATEGORY = {
    'vehicle.car': 'car',
    'vehicle.truck': 'truck',
    'vehicle.bus.bendy': 'bus',
    'vehicle.bus.rigid': 'bus',
    'vehicle.trailer': 'trailer',
    'vehicle.construction': 'construction_vehicle',
    'human.pedestrian.adult': 'pedestrian',
    'human.pedestrian.child': 'pedestrian',
    'human.pedestrian.construction_worker': 'pedestrian',
    'human.pedestrian.police_officer': 'pedestrian',
    'vehicle.motorcycle': 'motorcycle',
    'vehicle.bicycle': 'bicycle',
    'movable_object.trafficcone': 'traffic_cone',
    'movable_object.barrier': 'barrier',
}
# Boxes are gravity-aligned in the global frame; in the lidar frame they tilt by the ego's pitch/roll and the
# lidar's mounting. Tilts up to this (rad) are dropped to the yaw; more means a frame mix-up.
MAX_BOX_TILT = 0.3
QUATERNION_NORM_TOL = 1e-3
POINT_COLUMNS = 5


def category_to_detection_name(category: str) -> str | None:
    """The nuScenes detection name of a category (``'human.pedestrian.adult'`` -> ``'pedestrian'``), or None."""
    return _DETECTION_NAME_OF_CATEGORY.get(category)


def quaternion_matrix(quaternion: Sequence[float], where: str = 'quaternion') -> np.ndarray:
    """(3, 3) float64 rotation of a unit quaternion (w, x, y, z); ``where`` names it in errors."""
    q = np.asarray(quaternion, dtype=np.float64)
    if q.shape != (4,) or not np.isfinite(q).all():
        raise ValueError(f'{where} must be 4 finite numbers (w, x, y, z), got {quaternion!r}')
    norm = float(np.linalg.norm(q))
    if abs(norm - 1) > QUATERNION_NORM_TOL:
        raise ValueError(f'{where} has norm {norm:.6g}, not 1: a rotation is a unit quaternion (w, x, y, z); '
                         f'fix the record (e.g. write pyquaternion Quaternion(...).normalised.elements)')
    w, x, y, z = q / norm
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def pose_matrix(translation: Sequence[float], rotation: Sequence[float], where: str = 'pose') -> np.ndarray:
    """(4, 4) float64 ``[[R, t], [0, 1]]`` of a nuScenes translation and (w, x, y, z) rotation."""
    t = np.asarray(translation, dtype=np.float64)
    if t.shape != (3,) or not np.isfinite(t).all():
        raise ValueError(f'{where} translation must be 3 finite numbers (metres), got {translation!r}')
    matrix = np.eye(4)
    matrix[:3, :3] = quaternion_matrix(rotation, f'{where} rotation')
    matrix[:3, 3] = t
    return matrix


def rigid_inverse(matrix: np.ndarray) -> np.ndarray:
    """Inverse of (..., 4, 4) rigid transforms: ``[[R^T, -R^T t], [0, 1]]``."""
    out = np.zeros_like(matrix)
    rot_t = np.swapaxes(matrix[..., :3, :3], -1, -2)
    out[..., :3, :3] = rot_t
    out[..., :3, 3] = -(rot_t @ matrix[..., :3, 3:])[..., 0]
    out[..., 3, 3] = 1
    return out


def _quaternion_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Hamilton products of (..., 4) quaternions (w, x, y, z): the rotation ``b`` followed by ``a``."""
    aw, ax, ay, az = np.moveaxis(a, -1, 0)
    bw, bx, by, bz = np.moveaxis(b, -1, 0)
    return np.stack([aw * bw - ax * bx - ay * by - az * bz, aw * bx + ax * bw + ay * bz - az * by,
                     aw * by - ax * bz + ay * bw + az * bx, aw * bz + ax * by - ay * bx + az * bw], -1)


def _unit(quaternion: Sequence[float]) -> np.ndarray:
    """A (w, x, y, z) quaternion divided by its norm (records are checked by :func:`quaternion_matrix` first)."""
    q = np.asarray(quaternion, dtype=np.float64)
    return q / np.linalg.norm(q)


def _read_splits(path: Path) -> dict[str, list[str]]:
    """A splits file ``{split: [scene names]}``."""
    try:
        splits = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RuntimeError(f'{path} is truncated or not json ({exc}); write it again as '
                           f'{{"split": ["scene names"]}}.') from None
    if not isinstance(splits, dict) or not all(isinstance(v, list) for v in splits.values()):
        raise RuntimeError(f'{path} must be a json object {{"split": ["scene names"]}}; write it again.')
    return splits


def load_points(path: str | Path) -> np.ndarray:
    """float32 (N, 5) lidar points (x, y, z, intensity, ring) of a nuScenes ``.pcd.bin`` file.

    Raises:
        FileNotFoundError: the file is missing; RuntimeError: its size is not a multiple of 5 float32
        (truncated) or it holds non-finite coordinates.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'Lidar file {path} not found: extract the nuScenes samples (LIDAR_TOP) into the data '
                                f'root, or write the data set again (vispe dataset multiview-scenes).')
    size = path.stat().st_size
    if size % (POINT_COLUMNS * 4):
        raise RuntimeError(f'Lidar file {path} has {size} bytes, not a multiple of {POINT_COLUMNS * 4} '
                           f'({POINT_COLUMNS} float32 per point: x, y, z, intensity, ring): it is truncated or not '
                           f'a nuScenes .pcd.bin; extract or write it again.')
    points = np.fromfile(path, dtype=np.float32).reshape(-1, POINT_COLUMNS)
    bad = ~np.isfinite(points[:, :3]).all(1)
    if bad.any():
        raise RuntimeError(f'Lidar file {path} has {int(bad.sum())} points with non-finite (NaN/inf) coordinates '
                           f'(first: row {int(np.flatnonzero(bad)[0])}), which would give NaN depth: write the file '
                           f'again without them.')
    return points


@dataclass(frozen=True)
class SensorFrame:
    """One key-frame ``sample_data`` record of a sensor, resolved.

    Attributes:
        channel: sensor channel, e.g. ``'CAM_FRONT'``.
        token: the sample_data token.
        path: ``root / filename``.
        timestamp: microseconds.
        sensor2ego: (4, 4) float64 from ``calibrated_sensor``.
        ego2global: (4, 4) float64 from the ``ego_pose`` at this record's timestamp.
        intrinsics: (3, 3) float64 camera matrix K (None for the lidar).
        image_size: (H, W) from the record, None where it says 0 (the decoded image decides).
    """

    channel: str
    token: str
    path: Path
    timestamp: int
    sensor2ego: np.ndarray
    ego2global: np.ndarray
    intrinsics: np.ndarray | None
    image_size: tuple[int, int] | None

    @property
    def sensor2global(self) -> np.ndarray:
        """(4, 4) float64 sensor -> global."""
        return self.ego2global @ self.sensor2ego


@dataclass(frozen=True)
class SampleAnnotations:
    """The annotations of one sample in its lidar frame.

    Attributes:
        tokens: N sample_annotation tokens.
        boxes: (N, 7) float64 ``(x, y, z, l, w, h, yaw)``, gravity centre, lidar frame.
        category_names: N nuScenes categories.
        detection_names: N detection names (None where the category has none).
        num_points: (N,) int64 ``num_lidar_pts + num_radar_pts``.
        velocities: (N, 2) float64 (vx, vy) m/s in the lidar frame by the devkit's ``box_velocity`` rule (NaN where
            the instance has no neighbouring annotation within 1.5 s, 3 s across both).
    """

    tokens: list[str]
    boxes: torch.Tensor
    category_names: list[str]
    detection_names: list[str | None]
    num_points: np.ndarray
    velocities: np.ndarray


class NuScenesTables:
    """The json tables of a nuScenes-format root, indexed by token (see the module docstring).

    Args:
        root: data root holding ``<version>/*.json`` and the ``samples/`` folders (a real nuScenes root
            or one written by ``vispe dataset multiview-scenes``).
        version: table folder, e.g. ``'v1.0-trainval'`` or ``'v1.0-mini'``.

    Raises:
        FileNotFoundError: the version folder or a required table is missing (the file is named);
        RuntimeError: a table is truncated or not json; ValueError: a record lacks a field, a token
        it refers to is missing, a sample has two key frames of one channel, or an annotation has a zero,
        negative or non-finite size.

    Warns (:mod:`~vispe.datasets.nuscenes_table_checks`) when a category is not a nuScenes one (its boxes would be
    no target). :meth:`camera_frames` refuses a channel that is neither in the sensor table nor a nuScenes camera.
    """

    def __init__(self, root: str | Path, version: str = 'v1.0-trainval') -> None:
        self.root = Path(root)
        self.version = version
        self.table_root = self.root / version
        if not self.table_root.is_dir():
            present = sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []
            raise FileNotFoundError(
                f'nuScenes table folder {self.table_root} not found (folders in {self.root}: {present or "none"}). '
                f'Pass the version whose tables are there (e.g. version="v1.0-mini"), extract the nuScenes metadata '
                f'(v1.0-trainval_meta.tgz) into {self.root}, or write mv-scenes with '
                f'`vispe dataset multiview-scenes`.')
        self.tables: dict[str, list[dict[str, Any]]] = {}
        self.index: dict[str, dict[str, dict[str, Any]]] = {}
        for name in REQUIRED_TABLES + OPTIONAL_TABLES:
            if name in REQUIRED_TABLES or (self.table_root / f'{name}.json').is_file():
                self.tables[name] = self._load_table(name)
                self.index[name] = {record['token']: record for record in self.tables[name]}
        self._channel_of_calibration = {}
        for record in self.tables['calibrated_sensor']:
            sensor = self.get('sensor', self._field('calibrated_sensor', record, 'sensor_token'),
                              f'calibrated_sensor {record["token"]}')
            self._channel_of_calibration[record['token']] = self._field('sensor', sensor, 'channel')
        self.channels = frozenset(self._field('sensor', record, 'channel') for record in self.tables['sensor'])
        check_categories(self.tables['category'], self._path('category'), _DETECTION_NAME_OF_CATEGORY)
        self._key_frames: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
        for record in self.tables['sample_data']:
            if self._field('sample_data', record, 'is_key_frame'):
                calibration = self._field('sample_data', record, 'calibrated_sensor_token')
                channel = self._channel_of_calibration.get(calibration)
                if channel is None:
                    self._missing('calibrated_sensor', calibration, f'sample_data {record["token"]}')
                sample = self.get('sample', self._field('sample_data', record, 'sample_token'),
                                  f'sample_data {record["token"]}')['token']
                if channel in self._key_frames[sample]:
                    raise ValueError(f'sample {sample} has two key-frame {channel} records in '
                                     f'{self._path("sample_data")} ({self._key_frames[sample][channel]["token"]} and '
                                     f'{record["token"]}): a sample has one key frame a sensor; set is_key_frame '
                                     f'false on the other, or write the tables again.')
                self._key_frames[sample][channel] = record
        self._samples_of_scene: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in self.tables['sample']:
            scene = self.get('scene', self._field('sample', record, 'scene_token'), f'sample {record["token"]}')
            self._samples_of_scene[scene['token']].append(record)
            if LIDAR_CHANNEL not in self._key_frames.get(record['token'], {}):
                raise ValueError(f'sample {record["token"]} has no key-frame {LIDAR_CHANNEL} record in '
                                 f'{self._path("sample_data")}: the lidar frame of a sample is its {LIDAR_CHANNEL} '
                                 f'key frame; add it or remove the sample.')
        self._annotations_of_sample: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for record in self.tables['sample_annotation']:
            sample = self.get('sample', self._field('sample_annotation', record, 'sample_token'),
                              f'sample_annotation {record["token"]}')
            self._annotations_of_sample[sample['token']].append(record)
        check_annotation_boxes(self.tables['sample_annotation'], self._path('sample_annotation'),
                               lambda record, key: self._field('sample_annotation', record, key), QUATERNION_NORM_TOL)

    def _path(self, name: str) -> Path:
        return self.table_root / f'{name}.json'

    def _load_table(self, name: str) -> list[dict[str, Any]]:
        path = self._path(name)
        if not path.is_file():
            raise FileNotFoundError(
                f'nuScenes table {path} not found; a nuScenes root needs {", ".join(REQUIRED_TABLES)} in '
                f'{self.table_root}. Extract the nuScenes metadata again, or write the data set again '
                f'(vispe dataset multiview-scenes).')
        try:
            with path.open('rb') as handle:
                table = json.load(handle)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise RuntimeError(f'nuScenes table {path} is truncated or not json ({exc}). Extract it again from the '
                               f'nuScenes metadata archive, or write the data set again.') from None
        if not isinstance(table, list) or not all(isinstance(r, dict) and 'token' in r for r in table):
            raise RuntimeError(f'nuScenes table {path} is corrupt: it must be a json list of records that each have '
                               f'a "token" (the devkit\'s format). Extract or write it again.')
        return table

    def _field(self, table: str, record: dict[str, Any], key: str) -> Any:
        if key not in record:
            raise ValueError(f'{table} record {record.get("token")} in {self._path(table)} has no field {key!r} '
                             f'(fields: {sorted(record)}): the table is not in the nuScenes format; write it with '
                             f'the devkit\'s field names.')
        return record[key]

    def _missing(self, table: str, token: str, referrer: str) -> None:
        raise ValueError(f'{referrer} refers to {table} token {token!r}, which is not in {self._path(table)}: the '
                         f'tables are inconsistent (from different versions or a partial write); extract or write '
                         f'them again together.')

    def get(self, table: str, token: str, referrer: str = 'a record') -> dict[str, Any]:
        """The ``table`` record of ``token``; the error names ``referrer`` and the table file."""
        if table not in self.index:
            raise KeyError(f'table {table!r} is not loaded (loaded: {sorted(self.index)})')
        record = self.index[table].get(token)
        if record is None:
            self._missing(table, token, referrer)
        return record

    def scene_names(self) -> list[str]:
        """The scene names in the scene table's order."""
        return [self._field('scene', scene, 'name') for scene in self.tables['scene']]

    def split_scenes(self, split: str) -> list[str]:
        """Scene names of ``split``: from ``<root>/splits.json`` ({split: [scene names]}) when present; else the
        nuScenes devkit's splits (``train``, ``val``, ``test``, ``mini_train``, ``mini_val``, ...) and, as the devkit
        reads custom splits, those of ``<root>/<version>/splits.json``."""
        path = self.root / 'splits.json'
        if path.is_file():
            splits, source = _read_splits(path), str(path)
        else:
            custom = self.table_root / 'splits.json'
            splits = _read_splits(custom) if custom.is_file() else {}
            if split not in splits:
                try:
                    from nuscenes.utils.splits import create_splits_scenes
                except ImportError:
                    raise ImportError(f'{self.root} has no splits.json naming split {split!r}, so its scenes are the '
                                      f'nuScenes devkit\'s lists: install it (`pip install nuscenes-devkit`), or write '
                                      f'{path} as {{"split": ["scene names"]}}.') from None
                splits = create_splits_scenes() | splits
            source = 'nuscenes.utils.splits' + (f' or {custom}' if custom.is_file() else '')
        if split not in splits:
            raise ValueError(f'split {split!r} is not defined in {source}; the splits are {sorted(splits)}.')
        return list(splits[split])

    def sample_tokens(self, split: str | None = None) -> list[str]:
        """Sample tokens of ``split`` (all samples when None): scenes in the scene table's order, each scene's
        samples by timestamp."""
        wanted = None if split is None else set(self.split_scenes(split))
        tokens = []
        for scene in self.tables['scene']:
            if wanted is not None and self._field('scene', scene, 'name') not in wanted:
                continue
            samples = sorted(self._samples_of_scene.get(scene['token'], []),
                             key=lambda record: self._field('sample', record, 'timestamp'))
            tokens += [record['token'] for record in samples]
        if split is not None and not tokens:
            raise ValueError(f'split {split!r} has no samples in {self.table_root}: none of its scenes is in '
                             f'scene.json '
                             f'(which holds {self.scene_names()[:5]}...). Choose the split of this version (e.g. '
                             f'"mini_train" for v1.0-mini) or list the scenes in {self.root / "splits.json"}.')
        return tokens

    def scene_name(self, sample_token: str) -> str:
        """The name of the scene a sample belongs to."""
        sample = self.get('sample', sample_token)
        return self.get('scene', sample['scene_token'], f'sample {sample_token}')['name']

    def _frame(self, record: dict[str, Any], channel: str) -> SensorFrame:
        where = f'sample_data {record["token"]} ({channel})'
        calibration = self.get('calibrated_sensor', record['calibrated_sensor_token'], where)
        ego = self.get('ego_pose', self._field('sample_data', record, 'ego_pose_token'), where)
        sensor2ego = pose_matrix(self._field('calibrated_sensor', calibration, 'translation'),
                                 self._field('calibrated_sensor', calibration, 'rotation'),
                                 f'calibrated_sensor {calibration["token"]}')
        ego2global = pose_matrix(self._field('ego_pose', ego, 'translation'), self._field('ego_pose', ego, 'rotation'),
                                 f'ego_pose {ego["token"]}')
        intrinsics = None
        if channel != LIDAR_CHANNEL:
            intrinsics = np.asarray(calibration.get('camera_intrinsic', []), dtype=np.float64)
            if intrinsics.shape != (3, 3) or not np.isfinite(intrinsics).all():
                raise ValueError(f'calibrated_sensor {calibration["token"]} of {channel} in '
                                 f'{self._path("calibrated_sensor")} has camera_intrinsic '
                                 f'{calibration.get("camera_intrinsic")}; '
                                 f'a camera needs its finite 3×3 K.')
        height, width = int(record.get('height') or 0), int(record.get('width') or 0)
        return SensorFrame(channel=channel, token=record['token'],
                           path=self.root / self._field('sample_data', record, 'filename'),
                           timestamp=int(self._field('sample_data', record, 'timestamp')), sensor2ego=sensor2ego,
                           ego2global=ego2global, intrinsics=intrinsics,
                           image_size=(height, width) if height and width else None)

    def _check_channels(self, channels: Sequence[str]) -> None:
        """Refuse a channel that is neither in the sensor table nor a nuScenes camera (a typo would otherwise give
        an empty view in every sample); a nuScenes camera the table lacks was warned about at loading."""
        if isinstance(channels, str):
            raise TypeError(f'channels must be a list of channel names, got the string {channels!r}; pass '
                            f'[{channels!r}].')
        unknown = [channel for channel in channels if channel not in self.channels and channel not in CAMERA_CHANNELS]
        if unknown:
            raise ValueError(f'channels {unknown} are not in {self._path("sensor")} (its channels: '
                             f'{sorted(self.channels)}); pass channels from those (default: the nuScenes cameras '
                             f'{list(CAMERA_CHANNELS)}).')

    def camera_frames(self, sample_token: str,
                      channels: Sequence[str] = CAMERA_CHANNELS) -> list[SensorFrame | None]:
        """The key-frame records of ``channels`` (None where the sample has none)."""
        self._check_channels(channels)
        self.get('sample', sample_token)
        key_frames = self._key_frames.get(sample_token, {})
        return [self._frame(key_frames[channel], channel) if channel in key_frames else None for channel in channels]

    def lidar_frame(self, sample_token: str) -> SensorFrame:
        """The sample's ``LIDAR_TOP`` key frame (its lidar frame is the scene frame of the sample)."""
        self.get('sample', sample_token)
        return self._frame(self._key_frames[sample_token][LIDAR_CHANNEL], LIDAR_CHANNEL)

    def lidar2global(self, sample_token: str) -> np.ndarray:
        """(4, 4) float64 lidar -> global of the sample (ego pose at the lidar's timestamp)."""
        return self.lidar_frame(sample_token).sensor2global

    def lidar2cam(self, sample_token: str,
                  channels: Sequence[str] = CAMERA_CHANNELS) -> tuple[np.ndarray, np.ndarray]:
        """(V, 4, 4) float64 lidar -> camera (cam <- ego(t_cam) <- global <- ego(t_lidar) <- lidar) and (V,) bool
        validity; a channel without a key frame gets the identity and False."""
        lidar2global = self.lidar2global(sample_token)
        matrices = np.tile(np.eye(4), (len(channels), 1, 1))
        valid = np.zeros(len(channels), dtype=bool)
        for view, frame in enumerate(self.camera_frames(sample_token, channels)):
            if frame is not None:
                matrices[view] = rigid_inverse(frame.sensor2global) @ lidar2global
                valid[view] = True
        return matrices, valid

    def annotations(self, sample_token: str) -> SampleAnnotations:
        """The sample's annotations as boxes in its lidar frame, with category and detection names."""
        self.get('sample', sample_token)
        records = self._annotations_of_sample.get(sample_token, [])
        categories = []
        for record in records:
            where = f'sample_annotation {record["token"]}'
            instance = self.get('instance', self._field('sample_annotation', record, 'instance_token'), where)
            category = self.get('category', self._field('instance', instance, 'category_token'),
                                f'instance {instance["token"]}')
            categories.append(self._field('category', category, 'name'))
        lidar_record = self._key_frames[sample_token][LIDAR_CHANNEL]
        global2lidar = rigid_inverse(self._frame(lidar_record, LIDAR_CHANNEL).sensor2global)
        centres = np.array([r['translation'] for r in records], dtype=np.float64).reshape(-1, 3)
        centres = centres @ global2lidar[:3, :3].T + global2lidar[:3, 3]
        calibration = self.index['calibrated_sensor'][lidar_record['calibrated_sensor_token']]
        ego = self.index['ego_pose'][lidar_record['ego_pose_token']]
        lidar2global = _quaternion_product(_unit(ego['rotation']), _unit(calibration['rotation']))
        global2lidar_q = lidar2global * np.array([1.0, -1.0, -1.0, -1.0])
        rotations = np.array([r['rotation'] for r in records], dtype=np.float64).reshape(-1, 4)
        rotations = _quaternion_product(np.broadcast_to(global2lidar_q, rotations.shape),
                                        rotations / np.linalg.norm(rotations, axis=-1, keepdims=True))
        sizes = np.array([r['size'] for r in records], dtype=np.float64).reshape(-1, 3)
        try:
            boxes = boxes_from_nuscenes(torch.from_numpy(centres), torch.from_numpy(sizes), torch.from_numpy(rotations),
                                        max_tilt=MAX_BOX_TILT)
        except ValueError as exc:
            raise ValueError(f'annotations of sample {sample_token} in {self._path("sample_annotation")}: '
                             f'{exc}') from None
        num_points = np.array([int(r.get('num_lidar_pts', 0)) + int(r.get('num_radar_pts', 0)) for r in records],
                              dtype=np.int64)
        velocities = np.array([self.global_velocity(r) for r in records], dtype=np.float64).reshape(-1, 3)
        velocities = (velocities @ global2lidar[:3, :3].T)[:, :2]
        return SampleAnnotations(tokens=[r['token'] for r in records], boxes=boxes, category_names=categories,
                                 detection_names=[category_to_detection_name(c) for c in categories],
                                 num_points=num_points, velocities=velocities)

    def global_velocity(self, record: dict[str, Any], max_time_diff: float = 1.5) -> np.ndarray:
        """(3,) velocity of an annotation in the global frame, m/s, as the devkit's ``box_velocity``: the centre
        difference between its previous and next annotations (or itself) over their time difference; NaN without a
        neighbour or when they lie more than ``max_time_diff`` seconds apart (twice that with both neighbours)."""
        previous, following = record.get('prev', ''), record.get('next', '')
        if not previous and not following:
            return np.full(3, np.nan)
        first = self.get('sample_annotation', previous, f'sample_annotation {record["token"]}') if previous else record
        last = self.get('sample_annotation', following, f'sample_annotation {record["token"]}') if following else record
        seconds = 1e-6 * (self.get('sample', last['sample_token'])['timestamp']
                          - self.get('sample', first['sample_token'])['timestamp'])
        if seconds <= 0 or seconds > (2 * max_time_diff if previous and following else max_time_diff):
            return np.full(3, np.nan)
        return (np.asarray(last['translation'], dtype=np.float64) - np.asarray(first['translation'],
                                                                               dtype=np.float64)) / seconds
