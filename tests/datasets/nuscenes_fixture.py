"""A tiny nuScenes-format root for the reader and dataset tests (not a pytest fixture: call :func:`write_nuscenes`).

The devkit's tables with its field names (``NuScenes(version, dataroot)`` loads them), two scenes named from the
devkit's splits (``scene-0001`` in train with 2 samples, ``scene-0003`` in val with 1), six cameras on a
nuScenes-like rig with each camera's own timestamp and ego pose, a rotated and slightly rolled LIDAR_TOP, small
gradient PNG images (red encodes the column, green the row: ``(u + 0.5) / W * 255``), a float32 (N, 5)
``.pcd.bin`` per sample, uint16 millimetre dense depth PNGs and a few annotations (gravity-aligned in the global
frame) in front of different cameras, plus a non-key-frame camera record the reader must ignore.
"""
from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image
from pyquaternion import Quaternion

VERSION = 'v1.0-trainval'
SOURCE_SIZE = (54, 96)  # (H, W) of the fixture's images
CAMERAS = (('CAM_FRONT', 0.0), ('CAM_FRONT_RIGHT', -55.0), ('CAM_FRONT_LEFT', 55.0), ('CAM_BACK', 180.0),
           ('CAM_BACK_LEFT', 110.0), ('CAM_BACK_RIGHT', -110.0))
SCENES = (('scene-0001', 2), ('scene-0003', 1))
LOG = 'n015-2018-07-24-11-22-45+0800'
# (category, centre in the ego frame at the lidar time, (l, w, h), yaw in the ego frame, num_lidar_pts)
OBJECTS = (
    ('vehicle.car', (10.0, 0.5, 0.9), (4.2, 1.8, 1.6), 0.3, 40),
    ('human.pedestrian.adult', (6.0, 4.5, 0.9), (0.7, 0.6, 1.8), 1.0, 12),
    ('movable_object.barrier', (5.0, -5.5, 0.5), (0.5, 2.0, 1.0), -0.4, 5),
    ('movable_object.trafficcone', (-8.0, -1.0, 0.35), (0.4, 0.4, 0.7), 0.0, 3),
    ('vehicle.truck', (-4.0, 7.0, 1.5), (6.0, 2.5, 3.0), 2.0, 30),
    ('animal', (8.0, -1.5, 0.3), (0.8, 0.3, 0.5), 0.0, 4),
    ('vehicle.car', (20.0, -3.0, 0.9), (4.0, 1.8, 1.5), -1.0, 0),
)


def token(*parts: Any) -> str:
    """A deterministic 32-hex-digit token, as nuScenes tokens look."""
    return hashlib.md5('/'.join(map(str, parts)).encode()).hexdigest()


def save_table(root: Path, name: str, records: list[dict[str, Any]]) -> None:
    (root / VERSION / f'{name}.json').write_text(json.dumps(records, indent=1))


def load_table(root: Path, name: str) -> list[dict[str, Any]]:
    return json.loads((root / VERSION / f'{name}.json').read_text())


def _camera_rotation(yaw_deg: float, pitch: float) -> Quaternion:
    """Camera (OpenCV: x right, y down, z forward) -> ego rotation of a camera looking along ``yaw_deg``."""
    yaw = math.radians(yaw_deg)
    forward = np.array([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), -math.sin(pitch)])
    right = np.array([math.sin(yaw), -math.cos(yaw), 0.0])
    down = np.cross(forward, right)
    return Quaternion(matrix=np.stack([right, down, forward], 1))


def _ego_pose(sample_index: int, dt: float) -> tuple[np.ndarray, Quaternion]:
    """Ego translation and rotation at ``dt`` seconds after sample ``sample_index``'s lidar sweep (5 m/s, turning,
    pitched)."""
    yaw = 0.4 + 0.1 * sample_index + 0.05 * dt
    rotation = Quaternion(axis=[0, 0, 1], angle=yaw) * Quaternion(axis=[0, 1, 0], angle=0.015)
    translation = np.array([600.0 + 12 * sample_index, 1600.0 - 5 * sample_index, 0.05 * sample_index])
    return translation + 5.0 * dt * np.array([math.cos(yaw), math.sin(yaw), 0.0]), rotation


def _pose(translation: np.ndarray, rotation: Quaternion) -> np.ndarray:
    matrix = rotation.transformation_matrix
    matrix[:3, 3] = translation
    return matrix


def _gradient_image(view: int) -> np.ndarray:
    height, width = SOURCE_SIZE
    v, u = np.mgrid[0:height, 0:width]
    return np.stack([np.round((u + 0.5) / width * 255), np.round((v + 0.5) / height * 255),
                     np.full_like(u, 40 * view)], -1).astype(np.uint8)


def write_nuscenes(root: Path, seed: int = 0) -> Path:
    """Write the fixture root under ``root`` and return it."""
    rng = np.random.default_rng(seed)
    height, width = SOURCE_SIZE
    tables: dict[str, list[dict[str, Any]]] = {name: [] for name in (
        'category', 'attribute', 'visibility', 'instance', 'sensor', 'calibrated_sensor', 'ego_pose', 'log',
        'scene', 'sample', 'sample_data', 'sample_annotation', 'map')}
    categories = sorted({name for name, *_ in OBJECTS})
    tables['category'] = [dict(token=token('category', name), name=name, description=name, index=i)
                          for i, name in enumerate(categories)]
    tables['attribute'] = [dict(token=token('attribute', 'vehicle.parked'), name='vehicle.parked', description='')]
    tables['visibility'] = [dict(token=str(i), level=level, description='') for i, level in
                            enumerate(('v0-40', 'v40-60', 'v60-80', 'v80-100'), start=1)]
    tables['log'] = [dict(token=token('log'), logfile=LOG, vehicle='n015', date_captured='2018-07-24',
                          location='singapore-onenorth')]
    (root / 'maps').mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8), np.uint8)).save(root / 'maps' / 'map.png')
    tables['map'] = [dict(token=token('map'), log_tokens=[token('log')], category='semantic_prior',
                          filename='maps/map.png')]
    lidar_rotation = Quaternion(axis=[0, 0, 1], angle=-math.pi / 2) * Quaternion(axis=[1, 0, 0], angle=0.01)
    sensors = [(name, 'camera') for name, _ in CAMERAS] + [('LIDAR_TOP', 'lidar')]
    for name, modality in sensors:
        tables['sensor'].append(dict(token=token('sensor', name), channel=name, modality=modality))
    for view, (name, yaw) in enumerate(CAMERAS):
        rad = math.radians(yaw)
        focal = 0.5 * width + view
        tables['calibrated_sensor'].append(dict(
            token=token('calib', name), sensor_token=token('sensor', name),
            translation=[0.5 + 1.2 * math.cos(rad), 0.8 * math.sin(rad), 1.5],
            rotation=list(_camera_rotation(yaw, 0.02 * (view - 2)).elements),
            camera_intrinsic=[[focal, 0.0, width / 2 - 0.7], [0.0, focal, height / 2 - 0.2], [0.0, 0.0, 1.0]]))
    tables['calibrated_sensor'].append(dict(
        token=token('calib', 'LIDAR_TOP'), sensor_token=token('sensor', 'LIDAR_TOP'), translation=[0.94, 0.0, 1.84],
        rotation=list(lidar_rotation.elements), camera_intrinsic=[]))
    lidar2ego = _pose(np.array([0.94, 0.0, 1.84]), lidar_rotation)
    sample_index = 0
    for scene_name, num_samples in SCENES:
        scene_token = token('scene', scene_name)
        sample_tokens = [token('sample', scene_name, i) for i in range(num_samples)]
        tables['scene'].append(dict(token=scene_token, log_token=token('log'), nbr_samples=num_samples,
                                    first_sample_token=sample_tokens[0], last_sample_token=sample_tokens[-1],
                                    name=scene_name, description='fixture'))
        for i, sample_token in enumerate(sample_tokens):
            stamp = 1532402927647951 + 500000 * sample_index
            tables['sample'].append(dict(token=sample_token, timestamp=stamp, scene_token=scene_token,
                                         prev=sample_tokens[i - 1] if i else '',
                                         next=sample_tokens[i + 1] if i + 1 < num_samples else ''))
            records = [(name, (view - 3) * 8000) for view, (name, _) in enumerate(CAMERAS)] + [('LIDAR_TOP', 0)]
            for name, offset in records:
                record_token = token('sample_data', sample_token, name)
                translation, rotation = _ego_pose(sample_index, offset * 1e-6)
                tables['ego_pose'].append(dict(token=record_token, timestamp=stamp + offset,
                                               rotation=list(rotation.elements), translation=list(translation)))
                is_camera = name != 'LIDAR_TOP'
                filename = f'samples/{name}/{LOG}__{name}__{stamp + offset}.' + ('png' if is_camera else 'pcd.bin')
                tables['sample_data'].append(dict(
                    token=record_token, sample_token=sample_token, ego_pose_token=record_token,
                    calibrated_sensor_token=token('calib', name), timestamp=stamp + offset,
                    fileformat='png' if is_camera else 'pcd', is_key_frame=True, height=height if is_camera else 0,
                    width=width if is_camera else 0, filename=filename, prev='', next=''))
                (root / filename).parent.mkdir(parents=True, exist_ok=True)
                if is_camera:
                    view = [n for n, _ in CAMERAS].index(name)
                    Image.fromarray(_gradient_image(view)).save(root / filename)
                    depth = rng.integers(500, 60000, size=SOURCE_SIZE).astype(np.uint16)
                    depth[rng.random(SOURCE_SIZE) < 0.2] = 0
                    depth_path = root / 'depth' / name / f'{Path(filename).stem}.png'
                    depth_path.parent.mkdir(parents=True, exist_ok=True)
                    Image.fromarray(depth).save(depth_path)
            sweep = token('sweep', sample_token)
            tables['ego_pose'].append(dict(token=sweep, timestamp=stamp - 40000, rotation=[1.0, 0.0, 0.0, 0.0],
                                           translation=[0.0, 0.0, 0.0]))
            tables['sample_data'].append(dict(
                token=sweep, sample_token=sample_token, ego_pose_token=sweep,
                calibrated_sensor_token=token('calib', 'CAM_FRONT'),
                timestamp=stamp - 40000, fileformat='jpg', is_key_frame=False, height=height, width=width,
                filename=f'sweeps/CAM_FRONT/{LOG}__CAM_FRONT__{stamp - 40000}.jpg', prev='', next=''))
            ego_translation, ego_rotation = _ego_pose(sample_index, 0.0)
            ego2global = _pose(ego_translation, ego_rotation)
            _write_points(root, tables, sample_token, lidar2ego, ego2global, rng)
            for k, (category, centre, (length, wide, tall), yaw, num_points) in enumerate(OBJECTS):
                ann = token('annotation', sample_token, k)
                instance = token('instance', scene_name, k)
                centre_global = ego2global @ np.array([*centre, 1.0])
                global_yaw = ego_rotation.yaw_pitch_roll[0] + yaw
                tables['sample_annotation'].append(dict(
                    token=ann, sample_token=sample_token, instance_token=instance, visibility_token='4',
                    attribute_tokens=[], translation=list(centre_global[:3]), size=[wide, length, tall],
                    rotation=list(Quaternion(axis=[0, 0, 1], angle=global_yaw).elements), prev='', next='',
                    num_lidar_pts=num_points, num_radar_pts=0))
                if i == 0:
                    tables['instance'].append(dict(token=instance, category_token=token('category', category),
                                                   nbr_annotations=num_samples, first_annotation_token=ann,
                                                   last_annotation_token=ann))
            sample_index += 1
    (root / VERSION).mkdir(parents=True)
    for name, records in tables.items():
        save_table(root, name, records)
    return root


def _write_points(root: Path, tables: dict[str, list[dict[str, Any]]], sample_token: str, lidar2ego: np.ndarray,
                  ego2global: np.ndarray, rng: np.random.Generator) -> None:
    """Ground and object points around the car, plus pairs on CAM_FRONT's rays (same pixel, depths t and 1.6 t)."""
    ground = np.concatenate([rng.uniform(-25, 25, (400, 2)), np.zeros((400, 1))], 1)
    high = np.concatenate([rng.uniform(-15, 15, (200, 2)), rng.uniform(0.2, 2.5, (200, 1))], 1)
    ego_points = np.concatenate([ground, high])
    points = (np.linalg.inv(lidar2ego) @ np.concatenate([ego_points, np.ones((len(ego_points), 1))], 1).T).T[:, :3]
    calib = next(r for r in tables['calibrated_sensor'] if r['token'] == token('calib', 'CAM_FRONT'))
    record = next(r for r in tables['sample_data'] if r['token'] == token('sample_data', sample_token, 'CAM_FRONT'))
    pose = next(r for r in tables['ego_pose'] if r['token'] == record['ego_pose_token'])
    cam2global = _pose(np.array(pose['translation']), Quaternion(pose['rotation'])) @ _pose(
        np.array(calib['translation']), Quaternion(calib['rotation']))
    cam2lidar = np.linalg.inv(ego2global @ lidar2ego) @ cam2global
    directions = np.concatenate([rng.uniform(-0.6, 0.6, (30, 2)), np.ones((30, 1))], 1)
    near = directions * rng.uniform(4, 20, (30, 1))
    rays = np.concatenate([near, 1.6 * near])
    rays = (cam2lidar @ np.concatenate([rays, np.ones((len(rays), 1))], 1).T).T[:, :3]
    points = np.concatenate([points, rays])
    extra = np.stack([rng.uniform(0, 100, len(points)), rng.integers(0, 32, len(points))], 1)
    record = next(r for r in tables['sample_data'] if r['token'] == token('sample_data', sample_token, 'LIDAR_TOP'))
    np.concatenate([points, extra], 1).astype(np.float32).tofile(root / record['filename'])
