"""Object layouts of mv-scenes: class meshes at random positions, yaws and scales on the ground plane.

A layout is drawn in the lidar frame (x forward, y left, z up; the ground at ``z = ground_z``):

* the number of objects is uniform in ``[min_objects, max_objects]``, each object's class uniform over
  the meshes;
* each object gets a colour (its albedo): saturation uniform in [0.55, 0.9], value in [0.45, 0.95], and a hue
  uniform in its class's band when ``class_hues`` (class ``k`` of ``K`` within ``hue_band / 2`` of ``k / K``
  on the hue circle, so the class can be told from colour and the set measures 3D localisation more than
  recognition), else a hue uniform over the circle with saturation in [0.25, 0.85] and value in [0.35, 0.95];
* each object gets a uniform scale factor in ``[1 - scale_jitter, 1 + scale_jitter]`` (all axes), a
  uniform yaw in [-pi, pi), and a box centre at a uniform distance in ``[min_distance, max_distance]``
  and a uniform bearing around the lidar; it rests on the ground (its lowest point at ``ground_z``);
* a draw whose bird's-eye-view footprint (its tight box's rectangle) overlaps an earlier object's or the
  ego vehicle's (:attr:`LayoutConfig.ego_footprint`) is rejected and redrawn at a new position, up to
  ``max_attempts`` times, after which that object is left out. Footprints may touch and objects may
  occlude one another; they never interpenetrate.

Boxes are ``(x, y, z, l, w, h, yaw)`` (:mod:`vispe.geometry.boxes`): the tight box of the transformed
mesh in its own yawed frame, gravity centre, l along the heading.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from vispe.datasets.mv_scenes.errors import DegenerateBoxError
from vispe.datasets.mv_scenes.meshes import MIN_SIDE, CanonicalMesh
from vispe.geometry import box_corners

__all__ = ['LayoutConfig', 'PlacedObject', 'footprint', 'footprints_overlap', 'place_object', 'points_in_boxes',
           'sample_layout', 'tight_box']

# Corners of box_corners that outline the footprint, in order: front-left, front-right, rear-right, rear-left.
FOOTPRINT_CORNERS = [0, 1, 5, 4]


@dataclass(frozen=True)
class LayoutConfig:
    """How a layout is drawn (see the module docstring). ``ego_footprint`` is the rectangle (x_min,
    x_max, y_min, y_max) in the lidar frame that objects keep clear of: the ego car (about 4.1 x 1.7 m
    around the lidar, 0.94 m ahead of the rear axle) with 0.5 m margin."""

    min_objects: int = 2
    max_objects: int = 6
    min_distance: float = 2.0
    max_distance: float = 15.0
    scale_jitter: float = 0.15
    max_attempts: int = 50
    ego_footprint: tuple[float, float, float, float] = (-2.25, 2.9, -1.4, 1.4)
    class_hues: bool = True
    hue_band: float = 0.08


@dataclass(frozen=True, eq=False)
class PlacedObject:
    """An object of a layout in the lidar frame.

    Attributes:
        label: class index (into the mesh list).
        vertices: (V, 3) float64 transformed mesh vertices.
        faces: (F, 3) int32.
        box: (7,) float64 ``(x, y, z, l, w, h, yaw)``.
        albedo: (3,) float64 RGB reflectance in [0, 1].
    """

    label: int
    vertices: np.ndarray
    faces: np.ndarray
    box: np.ndarray
    albedo: np.ndarray


def tight_box(vertices: np.ndarray, yaw: float) -> np.ndarray:
    """(7,) box ``(x, y, z, l, w, h, yaw)`` of (V, 3) vertices: their bounding box in the frame turned by
    ``yaw`` about +z (gravity centre, l along the heading), yaw wrapped to [-pi, pi)."""
    cos, sin = math.cos(yaw), math.sin(yaw)
    to_object = np.array([[cos, sin, 0.0], [-sin, cos, 0.0], [0.0, 0.0, 1.0]])
    local = vertices @ to_object.T
    low, high = local.min(0), local.max(0)
    centre = to_object.T @ ((low + high) / 2)
    wrapped = yaw - 2 * math.pi * math.floor(yaw / (2 * math.pi) + 0.5)
    return np.array([*centre, *(high - low), wrapped])


def footprint(boxes: np.ndarray) -> np.ndarray:
    """(..., 4, 2) bird's-eye-view rectangles of (..., 7) boxes (corners of :func:`vispe.geometry.box_corners`)."""
    corners = box_corners(torch.from_numpy(np.asarray(boxes, np.float64)))
    return corners[..., FOOTPRINT_CORNERS, :2].numpy()


def footprints_overlap(first: np.ndarray, second: np.ndarray) -> bool:
    """Whether two convex (4, 2) rectangles overlap with positive area (separating-axis test; touching
    edges do not overlap)."""
    for polygon in (first, second):
        edges = np.roll(polygon, -1, 0) - polygon
        normals = np.stack([-edges[:, 1], edges[:, 0]], 1)
        a, b = first @ normals.T, second @ normals.T
        if ((a.max(0) <= b.min(0)) | (b.max(0) <= a.min(0))).any():
            return False
    return True


def place_object(mesh: CanonicalMesh, label: int, scale: float, yaw: float, xy: tuple[float, float],
                 ground_z: float, albedo: np.ndarray) -> PlacedObject:
    """``mesh`` scaled, turned by ``yaw``, with its box centre at ``xy`` and its lowest point on the ground
    (the canonical mesh is centred on its box in x/y and rests on z = 0).

    Raises:
        DegenerateBoxError: a side of the resulting box is below 1 mm (or not finite).
    """
    cos, sin = math.cos(yaw), math.sin(yaw)
    rotation = np.array([[cos, -sin, 0.0], [sin, cos, 0.0], [0.0, 0.0, 1.0]])
    vertices = (mesh.vertices * scale) @ rotation.T + np.array([xy[0], xy[1], ground_z])
    box = tight_box(vertices, yaw)
    if not (np.isfinite(box).all() and (box[3:6] >= MIN_SIDE).all()):
        raise DegenerateBoxError(f'the {mesh.name!r} object from {mesh.path} at scale {scale:.4g} has box '
                                 f'(l, w, h) = {box[3:6].round(6).tolist()} m: a side below {MIN_SIDE} m cannot be '
                                 f'annotated; check the mesh (it must have volume) and the class size')
    return PlacedObject(label, vertices, mesh.faces, box, np.asarray(albedo, np.float64))


def _random_albedo(rng: np.random.Generator, label: int, num_classes: int, config: LayoutConfig) -> np.ndarray:
    """A random colour of class ``label`` (see the module docstring; HSV -> RGB)."""
    if config.class_hues:
        hue = label / num_classes + rng.uniform(-config.hue_band / 2, config.hue_band / 2)
        saturation, value = rng.uniform(0.55, 0.9), rng.uniform(0.45, 0.95)
    else:
        hue, saturation, value = rng.uniform(0, 1), rng.uniform(0.25, 0.85), rng.uniform(0.35, 0.95)
    channel = (np.array([5.0, 3.0, 1.0]) + hue * 6) % 6
    return value - value * saturation * np.clip(np.minimum(channel, 4 - channel), 0, 1)


def sample_layout(rng: np.random.Generator, meshes: list[CanonicalMesh], ground_z: float,
                  config: LayoutConfig = LayoutConfig()) -> list[PlacedObject]:
    """A random layout (see the module docstring); may hold fewer than ``min_objects`` objects when
    positions run out."""
    if not 1 <= config.min_objects <= config.max_objects:
        raise ValueError(f'need 1 <= min_objects <= max_objects, got {config.min_objects}, {config.max_objects}')
    if not 0 <= config.min_distance < config.max_distance:
        raise ValueError(f'need 0 <= min_distance < max_distance, got {config.min_distance}, {config.max_distance}')
    if not 0 < config.hue_band <= 1 / len(meshes):
        raise ValueError(f'hue_band must lie in (0, 1 / classes = {1 / len(meshes):.3f}] so that class hues do not '
                         f'overlap, got {config.hue_band}')
    x0, x1, y0, y1 = config.ego_footprint
    taken = [np.array([[x1, y1], [x1, y0], [x0, y0], [x0, y1]])]
    objects: list[PlacedObject] = []
    for _ in range(int(rng.integers(config.min_objects, config.max_objects + 1))):
        label = int(rng.integers(len(meshes)))
        scale = float(rng.uniform(1 - config.scale_jitter, 1 + config.scale_jitter))
        yaw = float(rng.uniform(-math.pi, math.pi))
        albedo = _random_albedo(rng, label, len(meshes), config)
        size = meshes[label].size * scale
        for _attempt in range(config.max_attempts):
            distance = rng.uniform(config.min_distance, config.max_distance)
            bearing = rng.uniform(-math.pi, math.pi)
            xy = (distance * math.cos(bearing), distance * math.sin(bearing))
            rectangle = footprint(np.array([xy[0], xy[1], 0.0, size[0], size[1], size[2], yaw]))
            if not any(footprints_overlap(rectangle, other) for other in taken):
                placed = place_object(meshes[label], label, scale, yaw, xy, ground_z, albedo)
                taken.append(footprint(placed.box))
                objects.append(placed)
                break
    return objects


def points_in_boxes(points: np.ndarray, boxes: np.ndarray, margin: float = 0.01) -> np.ndarray:
    """(N, P) bool: whether each of (P, 3) points lies in each of (N, 7) boxes grown by ``margin`` metres
    on every side (closed, as the devkit's ``points_in_box``)."""
    boxes = np.asarray(boxes, np.float64).reshape(-1, 7)
    offset = np.asarray(points, np.float64)[None, :, :3] - boxes[:, None, :3]
    cos, sin = np.cos(boxes[:, 6:7]), np.sin(boxes[:, 6:7])
    local = np.stack([cos * offset[..., 0] + sin * offset[..., 1], -sin * offset[..., 0] + cos * offset[..., 1],
                      offset[..., 2]], -1)
    return (np.abs(local) <= boxes[:, None, 3:6] / 2 + margin).all(-1)
