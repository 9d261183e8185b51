"""Helpers for the mv-scenes tests: a tiny rendered set, its layouts replayed from the seed, and an
independent open3d scene to cast single rays in (built here, not with the converter's renderer)."""
from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import open3d as o3d
from pyquaternion import Quaternion

from vispe.datasets.mv_scenes import (INFO_FILE, LIDAR, SPLITS, ConversionConfig, PlacedObject, plan_tasks,
                                      sample_layout, sample_setup)
from vispe.datasets.mv_scenes.layout import LayoutConfig
from vispe.datasets.mv_scenes.tables import make_token

# A tiny set: 45 x 80 images, a 360-azimuth lidar, 2 train + 1 val + 1 test-rig1 samples; its own layout, so that
# tuning the default layout leaves the tests' scenes (and the margins measured on them) as they are.
TINY_CONFIG = ConversionConfig(seed=3, image_size=(45, 80), lidar=replace(LIDAR, azimuths=360),
                               layout=LayoutConfig(min_objects=3, max_objects=8, max_distance=25.0,
                                                   class_hues=False))
TINY_COUNTS = dict(train=2, val=1, test=1)


def sensor_pose(nusc, sample_data: dict) -> np.ndarray:
    """(4, 4) sensor -> ego of a sample_data record, through pyquaternion (as the devkit does)."""
    calibration = nusc.get('calibrated_sensor', sample_data['calibrated_sensor_token'])
    matrix = Quaternion(calibration['rotation']).transformation_matrix
    matrix[:3, 3] = calibration['translation']
    return matrix


@dataclass
class Replayed:
    """A sample's layout replayed from the seed, and its lidar -> ego pose from the tables."""

    objects: list[PlacedObject]
    lidar2ego: np.ndarray
    ground_z: float


def replay(root: Path, nusc, sample_token: str, meshes, config: ConversionConfig = TINY_CONFIG) -> Replayed:
    """The objects of ``sample_token``: its task found by token, its layout redrawn as often as the
    conversion recorded (``redrawn`` in mv-scenes.json)."""
    info = json.loads((root / INFO_FILE).read_text())
    counts = {plan.name: info['samples'].get(plan.name, 0) for plan in SPLITS}
    task = next(task for task in plan_tasks(counts)
                if make_token(config.seed, 'sample', task.split, task.scene_name, task.position) == sample_token)
    setup = sample_setup(task, config)
    for _ in range(info['redrawn'].get(sample_token, 0) + 1):
        objects = sample_layout(setup.rng, meshes, setup.ground_z, config.layout)
    sample = nusc.get('sample', sample_token)
    lidar2ego = sensor_pose(nusc, nusc.get('sample_data', sample['data']['LIDAR_TOP']))
    return Replayed(objects, lidar2ego, -float(lidar2ego[2, 3]))


def independent_scene(objects: list[PlacedObject], ground_z: float) -> o3d.t.geometry.RaycastingScene:
    """A RaycastingScene of a 2 km ground square (geometry 0) and the objects (1..N), built here."""
    scene = o3d.t.geometry.RaycastingScene()
    ground = np.array([[-1e3, -1e3, ground_z], [1e3, -1e3, ground_z], [1e3, 1e3, ground_z], [-1e3, 1e3, ground_z]])
    scene.add_triangles(o3d.core.Tensor(ground.astype(np.float32)),
                        o3d.core.Tensor(np.array([[0, 1, 2], [2, 3, 0]], np.uint32)))
    for item in objects:
        scene.add_triangles(o3d.core.Tensor(item.vertices.astype(np.float32)),
                            o3d.core.Tensor(item.faces.astype(np.uint32)))
    return scene


def cast_one(scene: o3d.t.geometry.RaycastingScene, origin: np.ndarray, direction: np.ndarray) -> tuple[float, int]:
    """(t, geometry id) of one ray (t = inf, id = -1 on a miss)."""
    ray = np.concatenate([origin, direction])[None].astype(np.float32)
    result = scene.cast_rays(o3d.core.Tensor(ray))
    geometry = int(result['geometry_ids'].numpy()[0])
    return float(result['t_hit'].numpy()[0]), (-1 if geometry == scene.INVALID_ID else geometry)


def cast_many(scene: o3d.t.geometry.RaycastingScene, rays: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t (R,), geometry ids (R,), -1 on a miss) of (R, 6) rays in one call."""
    result = scene.cast_rays(o3d.core.Tensor(rays.astype(np.float32)))
    geometry = result['geometry_ids'].numpy().astype(np.int64)
    geometry[geometry == scene.INVALID_ID] = -1
    return result['t_hit'].numpy(), geometry
