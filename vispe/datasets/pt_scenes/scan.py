"""Scanning a pt-scenes room with open3d's CPU ray caster (``RaycastingScene``).

Each scan position casts an equirectangular grid of rays: ``azimuths`` directions per turn (a random
azimuth phase per position) times the elevations from ``elevation[0]`` to ``elevation[1]`` degrees at the
same angular step. A ray's first hit on the floor, a wall or an object is a point (the room has no
ceiling, rays that go over the walls hit nothing), its range perturbed along the ray by Gaussian noise
(``range_noise`` m, clipped at 3 sigma). So the cloud has real occlusion (surfaces hidden from every
position are missing: the sides of objects that face a wall or another object, their undersides) and a
density that falls with distance and grazing incidence.

Colour: the surface's albedo (per object, floor and walls: :mod:`~vispe.datasets.pt_scenes.room`) times
Lambertian shading ``AMBIENT + DIFFUSE * max(0, n . LIGHT)`` (n the face normal turned towards the
sensor, a fixed light from above), plus Gaussian noise per point and channel (``colour_noise``),
clipped to [0, 1] and stored as integers 0..255 (ScanNet's vertex colours).

The points of all positions are merged and voxel-down-sampled: of the points in one ``voxel_size``
cube, the first (in ray order) is kept, unchanged, with its labels (an average would blend surfaces and
labels at object borders).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vispe.datasets.mv_scenes.errors import RenderError
from vispe.datasets.pt_scenes.room import Room
from vispe.extras import import_extra

o3d = import_extra('open3d', 'scanning pt-scenes rooms (open3d\'s ray caster)')

__all__ = ['AMBIENT', 'DIFFUSE', 'LIGHT', 'Scan', 'ScanConfig', 'background_mesh', 'equirectangular_rays',
           'scan_room', 'voxel_first']

AMBIENT, DIFFUSE = 0.55, 0.45
LIGHT = np.array([0.2, 0.35, 1.0]) / np.linalg.norm([0.2, 0.35, 1.0])
FLOOR_TRIANGLES = 2
MISS = o3d.t.geometry.RaycastingScene.INVALID_ID
VOXEL_KEY_BITS = 21


@dataclass(frozen=True)
class ScanConfig:
    """How a room is scanned (see the module docstring): rays per turn, elevation range (degrees), voxel
    size (m), range noise sigma (m) and colour noise sigma (fraction of full scale)."""

    azimuths: int = 256
    elevation: tuple[float, float] = (-80.0, 50.0)
    voxel_size: float = 0.02
    range_noise: float = 0.003
    colour_noise: float = 0.025

    def check(self) -> None:
        """Refuse settings that give no rays or no points (ValueError naming the field)."""
        low, high = self.elevation
        if self.azimuths < 8 or not -90 <= low < high <= 90:
            raise ValueError(f'ScanConfig needs azimuths >= 8 and -90 <= elevation[0] < elevation[1] <= 90, got '
                             f'{self.azimuths}, {self.elevation}')
        if not self.voxel_size > 0 or self.range_noise < 0 or self.colour_noise < 0:
            raise ValueError(f'ScanConfig needs voxel_size > 0 and non-negative noise, got {self.voxel_size}, '
                             f'{self.range_noise}, {self.colour_noise}')


@dataclass(frozen=True, eq=False)
class Scan:
    """A merged, down-sampled scan: ``points`` (N, 6) float32 (x, y, z, r, g, b) with rgb integers 0..255,
    ``owner`` (N,) int64: -1 for the floor and walls, k for ``room.objects[k]``."""

    points: np.ndarray
    owner: np.ndarray


def background_mesh(room: Room) -> tuple[np.ndarray, np.ndarray]:
    """Floor (triangles 0-1) and the four walls (2-9) as (8, 3) float32 vertices and (10, 3) uint32 faces."""
    x, y = room.half
    low = [[-x, -y, 0.0], [x, -y, 0.0], [x, y, 0.0], [-x, y, 0.0]]
    vertices = np.array(low + [[vx, vy, room.height] for vx, vy, _ in low], np.float32)
    faces = [[0, 1, 2], [0, 2, 3]]
    for corner in range(4):
        nxt = (corner + 1) % 4
        faces += [[corner, nxt, nxt + 4], [corner, nxt + 4, corner + 4]]
    return vertices, np.array(faces, np.uint32)


def equirectangular_rays(origin: np.ndarray, azimuths: int, elevation: tuple[float, float],
                         phase: float) -> np.ndarray:
    """(R, 6) float32 rays (origin, unit direction): ``azimuths`` per turn from ``phase`` (radians) times the
    elevations in ``elevation`` (degrees, both ends included) at the same step."""
    step = 2 * np.pi / azimuths
    low, high = np.deg2rad(elevation)
    rows = int(round((high - low) / step)) + 1
    azimuth, altitude = np.meshgrid(phase + step * np.arange(azimuths), np.linspace(low, high, rows))
    directions = np.stack([np.cos(altitude) * np.cos(azimuth), np.cos(altitude) * np.sin(azimuth),
                           np.sin(altitude)], -1).reshape(-1, 3)
    return np.concatenate([np.broadcast_to(origin, directions.shape), directions], 1).astype(np.float32)


def voxel_first(points: np.ndarray, voxel_size: float) -> np.ndarray:
    """Sorted indices of the first of (N, 3) points in each ``voxel_size`` cube (|coordinates| < 20 km)."""
    keys = np.floor(points / voxel_size).astype(np.int64) + (1 << (VOXEL_KEY_BITS - 1))
    packed = (keys[:, 0] << (2 * VOXEL_KEY_BITS)) | (keys[:, 1] << VOXEL_KEY_BITS) | keys[:, 2]
    return np.sort(np.unique(packed, return_index=True)[1])


def scan_room(room: Room, rng: np.random.Generator, config: ScanConfig = ScanConfig(), nthreads: int = 0,
              where: str = 'room') -> Scan:
    """Scan ``room`` from all its sensors (see the module docstring); ``where`` names the scene in errors.

    Raises:
        RenderError: the room has no sensor, or ray casting gave NaN ranges (NaN geometry).
    """
    config.check()
    if len(room.sensors) == 0:
        raise RenderError(f'{where}: the room has no scan position; loosen RoomConfig (smaller sensor_clearance, '
                          f'fewer objects)')
    scene = o3d.t.geometry.RaycastingScene()
    vertices, faces = background_mesh(room)
    scene.add_triangles(o3d.core.Tensor(vertices), o3d.core.Tensor(faces))
    for item in room.objects:
        scene.add_triangles(o3d.core.Tensor(item.vertices.astype(np.float32)),
                            o3d.core.Tensor(item.faces.astype(np.uint32)))
    rays = np.concatenate([equirectangular_rays(sensor, config.azimuths, config.elevation,
                                                rng.uniform(0, 2 * np.pi / config.azimuths))
                           for sensor in room.sensors])
    hit = scene.cast_rays(o3d.core.Tensor(rays), nthreads=nthreads)
    geometry = hit['geometry_ids'].numpy().astype(np.int64)
    found = np.flatnonzero(geometry != MISS)
    t_hit = hit['t_hit'].numpy()[found].astype(np.float64)
    if not np.isfinite(t_hit).all():
        raise RenderError(f'{where}: ray casting gave NaN ranges; a mesh of this room has NaN vertices')
    geometry, directions = geometry[found], rays[found, 3:].astype(np.float64)
    if config.range_noise > 0:
        t_hit += np.clip(rng.normal(0, config.range_noise, len(t_hit)), -3 * config.range_noise,
                         3 * config.range_noise)
    xyz = rays[found, :3] + directions * t_hit[:, None]
    normals = hit['primitive_normals'].numpy()[found].astype(np.float64)
    normals *= np.where(np.einsum('ij,ij->i', normals, directions) > 0, -1.0, 1.0)[:, None]
    shade = AMBIENT + DIFFUSE * np.clip(normals @ LIGHT, 0, None)
    albedo = np.stack([room.wall_albedo, room.floor_albedo, *(item.albedo for item in room.objects)])
    surface = np.where(geometry > 0, geometry + 1,
                       (hit['primitive_ids'].numpy()[found] < FLOOR_TRIANGLES).astype(np.int64))
    colour = albedo[surface] * shade[:, None] + rng.normal(0, config.colour_noise, (len(found), 3))
    rgb = np.round(np.clip(colour, 0, 1) * 255)
    keep = voxel_first(xyz, config.voxel_size)
    points = np.concatenate([xyz[keep], rgb[keep]], 1).astype(np.float32)
    return Scan(points, geometry[keep] - 1)
