"""Rooms of pt-scenes: a rectangular floor and four walls, real meshes standing on the floor, and scan positions.

A room is drawn in its own frame (x along its length, y along its width, z up, the floor at z = 0, the
room centred on the origin, as ScanNet's axis-aligned scans):

* length and width uniform in ``[min_size, max_size]`` (independently), walls ``wall_height`` high;
* ``min_objects``..``max_objects`` objects, each of a class uniform over the meshes, scaled per axis by
  factors log-uniform in ``[min_scale, max_scale]`` (so the aspect ratio changes too), turned about +z by
  a multiple of 90° (uniform over the four; the axis-aligned box then stays tight) or, with ``rotated``,
  by a uniform yaw, resting on the floor;
* each object is placed against a wall (probability ``wall_fraction``: flush with a random wall, a gap
  of 1 mm..``max_gap``), against an earlier object (``touch_fraction``: its axis-aligned extent next to
  that object's on a random side, same gap, overlapping it along that side), or anywhere in the room;
  a draw that leaves the room or whose footprint (its box's rectangle seen from above) overlaps an
  earlier object's is redrawn, up to ``max_attempts`` times, after which the object is left out.
  Footprints may touch and objects occlude one another; they never interpenetrate;
* ``min_sensors``..``max_sensors`` scan positions at a height uniform in ``sensor_height``, at least
  ``sensor_clearance`` from the walls and from every object's axis-aligned extent (fewer when no such
  place is found in ``max_attempts`` draws);
* colours are drawn independently of the class (HSV): objects any hue, saturation 0.15-0.85, value
  0.25-0.95; the floor brown or grey (hue 0.05-0.12, saturation 0-0.5, value 0.3-0.7); the walls
  pale (any hue, saturation 0-0.15, value 0.65-0.95).

An object's box is the tight box of its whole transformed mesh (amodal, like SUN RGB-D's; ScanNet's
boxes are those of the reconstructed instance points, see ``datasets/README.md``): ``(x, y, z, l, w, h,
yaw)`` (:mod:`vispe.geometry.boxes`), yaw 0 (axis-aligned) unless ``rotated``.
"""
from __future__ import annotations

import colorsys
import math
from dataclasses import dataclass

import numpy as np

from vispe.datasets.mv_scenes.errors import DegenerateBoxError
from vispe.datasets.mv_scenes.layout import PlacedObject, footprint, footprints_overlap, tight_box
from vispe.datasets.mv_scenes.meshes import MIN_SIDE, CanonicalMesh

__all__ = ['Room', 'RoomConfig', 'sample_room']

SIDES = ((0, 1.0), (0, -1.0), (1, 1.0), (1, -1.0))    # (axis, direction) of the four walls / object sides
MIN_GAP = 1e-3


@dataclass(frozen=True)
class RoomConfig:
    """How a room is drawn (see the module docstring); sizes in metres."""

    min_size: float = 4.0
    max_size: float = 7.0
    wall_height: float = 2.5
    min_objects: int = 4
    max_objects: int = 12
    min_scale: float = 0.7
    max_scale: float = 1.4
    rotated: bool = False
    wall_fraction: float = 0.35
    touch_fraction: float = 0.3
    max_gap: float = 0.02
    min_sensors: int = 2
    max_sensors: int = 4
    sensor_height: tuple[float, float] = (1.2, 1.8)
    sensor_clearance: float = 0.3
    max_attempts: int = 50

    def check(self) -> None:
        """Refuse settings that cannot give a room (ValueError naming the field and the fix)."""
        if not 0 < self.min_size <= self.max_size:
            raise ValueError(f'RoomConfig needs 0 < min_size <= max_size, got {self.min_size}, {self.max_size}')
        if not 1 <= self.min_objects <= self.max_objects:
            raise ValueError(f'RoomConfig needs 1 <= min_objects <= max_objects, got {self.min_objects}, '
                             f'{self.max_objects}')
        if not 1 <= self.min_sensors <= self.max_sensors:
            raise ValueError(f'RoomConfig needs 1 <= min_sensors <= max_sensors, got {self.min_sensors}, '
                             f'{self.max_sensors}')
        if not 0 < self.min_scale <= self.max_scale:
            raise ValueError(f'RoomConfig needs 0 < min_scale <= max_scale, got {self.min_scale}, {self.max_scale}')
        if not (0 <= self.wall_fraction and 0 <= self.touch_fraction and self.wall_fraction + self.touch_fraction
                <= 1):
            raise ValueError(f'RoomConfig wall_fraction + touch_fraction must lie in [0, 1], got '
                             f'{self.wall_fraction} + {self.touch_fraction}')
        low, high = self.sensor_height
        if not 0 < low <= high < self.wall_height:
            raise ValueError(f'RoomConfig sensor_height {self.sensor_height} must lie between the floor and the '
                             f'top of the walls ({self.wall_height} m)')
        if not MIN_GAP <= self.max_gap or not 0 <= self.sensor_clearance < self.min_size / 2:
            raise ValueError(f'RoomConfig needs max_gap >= {MIN_GAP} and 0 <= sensor_clearance < min_size / 2, got '
                             f'{self.max_gap}, {self.sensor_clearance}')


@dataclass(frozen=True, eq=False)
class Room:
    """A drawn room.

    Attributes:
        length, width, height: extent along x and y, wall height (m); the floor spans
            ``[-length/2, length/2] x [-width/2, width/2]`` at z = 0.
        objects: the placed meshes (``label`` = class index, ``box`` (7,), ``albedo`` (3,) in [0, 1]).
        sensors: (S, 3) float64 scan positions.
        floor_albedo, wall_albedo: (3,) float64 RGB in [0, 1].
    """

    length: float
    width: float
    height: float
    objects: list[PlacedObject]
    sensors: np.ndarray
    floor_albedo: np.ndarray
    wall_albedo: np.ndarray

    @property
    def half(self) -> np.ndarray:
        """(2,) half length and half width."""
        return np.array([self.length / 2, self.width / 2])


def _hsv(hue: float, saturation: float, value: float) -> np.ndarray:
    """(3,) RGB in [0, 1] of an HSV colour."""
    return np.array(colorsys.hsv_to_rgb(hue % 1.0, saturation, value))


def _draw_object(rng: np.random.Generator, mesh: CanonicalMesh,
                 config: RoomConfig) -> tuple[np.ndarray, float, np.ndarray]:
    """(vertices (V, 3) scaled and turned about the origin, yaw, albedo (3,))."""
    scale = np.exp(rng.uniform(math.log(config.min_scale), math.log(config.max_scale), 3))
    yaw = float(rng.uniform(-math.pi, math.pi)) if config.rotated else float(rng.integers(4)) * math.pi / 2
    albedo = _hsv(rng.uniform(0, 1), rng.uniform(0.15, 0.85), rng.uniform(0.25, 0.95))
    cos, sin = math.cos(yaw), math.sin(yaw)
    rotation = np.array([[cos, -sin, 0.0], [sin, cos, 0.0], [0.0, 0.0, 1.0]])
    return (mesh.vertices * scale) @ rotation.T, yaw, albedo


def _offset(rng: np.random.Generator, low: np.ndarray, high: np.ndarray, half: np.ndarray,
            placed: list[np.ndarray], config: RoomConfig) -> np.ndarray | None:
    """A candidate (2,) translation of an object whose extent about the origin is ``[low, high]`` (2,):
    against a wall, against an earlier object's extent (``placed``: (2, 2) [low, high] each) or anywhere."""
    gap = rng.uniform(MIN_GAP, config.max_gap)
    free_low, free_high = -half - low, half - high            # translations that keep the object in the room
    if np.any(free_low > free_high):
        return None
    offset = rng.uniform(free_low, free_high)
    choice = rng.uniform()
    axis, direction = SIDES[int(rng.integers(4))]
    if choice < config.wall_fraction:
        offset[axis] = (half[axis] - gap - high[axis]) if direction > 0 else (-half[axis] + gap - low[axis])
    elif choice < config.wall_fraction + config.touch_fraction and placed:
        other = placed[int(rng.integers(len(placed)))]
        across = 1 - axis
        offset[axis] = (other[1, axis] + gap - low[axis]) if direction > 0 else (other[0, axis] - gap - high[axis])
        lo, hi = other[0, across] - high[across], other[1, across] - low[across]
        margin = min(0.1, (hi - lo) / 4)
        offset[across] = rng.uniform(lo + margin, hi - margin)
    return offset


def _place_objects(rng: np.random.Generator, meshes: list[CanonicalMesh], half: np.ndarray,
                   config: RoomConfig) -> list[PlacedObject]:
    """The objects of a room whose floor spans ``[-half, half]`` (2,), in placement order."""
    objects: list[PlacedObject] = []
    taken: list[np.ndarray] = []           # footprints (4, 2)
    extents: list[np.ndarray] = []         # (2, 2) axis-aligned [low, high] in x/y
    for _ in range(int(rng.integers(config.min_objects, config.max_objects + 1))):
        label = int(rng.integers(len(meshes)))
        vertices, yaw, albedo = _draw_object(rng, meshes[label], config)
        box = tight_box(vertices, yaw if config.rotated else 0.0)
        if not (np.isfinite(box).all() and (box[3:6] >= MIN_SIDE).all()):
            raise DegenerateBoxError(f'the {meshes[label].name!r} object from {meshes[label].path} has box (l, w, h) '
                                     f'= {box[3:6].round(6).tolist()} m: a side below {MIN_SIDE} m cannot be '
                                     f'annotated; check the mesh (it must have volume) and the class size')
        low, high = vertices[:, :2].min(0), vertices[:, :2].max(0)
        for _attempt in range(config.max_attempts):
            offset = _offset(rng, low, high, half, extents, config)
            if offset is None:
                break
            if np.any(low + offset < -half - 1e-9) or np.any(high + offset > half + 1e-9):
                continue
            moved = box.copy()
            moved[:2] += offset
            rectangle = footprint(moved)
            if not any(footprints_overlap(rectangle, other) for other in taken):
                shifted = vertices + np.array([offset[0], offset[1], 0.0])
                objects.append(PlacedObject(label, shifted, meshes[label].faces, moved, albedo))
                taken.append(rectangle)
                extents.append(np.stack([low + offset, high + offset]))
                break
    return objects


def _place_sensors(rng: np.random.Generator, objects: list[PlacedObject], half: np.ndarray,
                   config: RoomConfig) -> np.ndarray:
    """(S, 3) scan positions clear of the walls and of every object's axis-aligned extent."""
    clearance = config.sensor_clearance
    low = np.array([item.vertices[:, :2].min(0) for item in objects]).reshape(-1, 2) - clearance
    high = np.array([item.vertices[:, :2].max(0) for item in objects]).reshape(-1, 2) + clearance
    sensors = []
    for _ in range(int(rng.integers(config.min_sensors, config.max_sensors + 1))):
        for _attempt in range(config.max_attempts):
            xy = rng.uniform(-half + clearance, half - clearance)
            if not np.any(np.all((xy >= low) & (xy <= high), axis=1)):
                sensors.append([xy[0], xy[1], rng.uniform(*config.sensor_height)])
                break
    return np.array(sensors, np.float64).reshape(-1, 3)


def sample_room(rng: np.random.Generator, meshes: list[CanonicalMesh], config: RoomConfig = RoomConfig()) -> Room:
    """A random room (see the module docstring); may hold fewer than ``min_objects`` objects or
    ``min_sensors`` sensors when places run out (possibly none)."""
    config.check()
    length, width = rng.uniform(config.min_size, config.max_size, 2)
    floor = _hsv(rng.uniform(0.05, 0.12), rng.uniform(0, 0.5), rng.uniform(0.3, 0.7))
    wall = _hsv(rng.uniform(0, 1), rng.uniform(0, 0.15), rng.uniform(0.65, 0.95))
    half = np.array([length / 2, width / 2])
    objects = _place_objects(rng, meshes, half, config)
    sensors = _place_sensors(rng, objects, half, config)
    return Room(float(length), float(width), config.wall_height, objects, sensors, floor, wall)
