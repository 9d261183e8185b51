"""Ray casting of mv-scenes with open3d's ``RaycastingScene``: RGB, dense depth and a spinning lidar.

One scene per sample holds a ground quad (geometry 0, two triangles 2 km wide at ``ground_z``) and the
objects' meshes (geometry 1..N), all in the lidar frame. Each camera is one ``cast_rays`` call over all
its pixels (pixel centres at integers): the ray of pixel (u, v) is ``K^-1 (u, v, 1)`` (camera-frame
z = 1) turned into the lidar frame, so the hit's parameter ``t`` is its camera-frame depth z.

* RGB: Lambertian shading ``albedo * (ambient + diffuse * max(0, n . sun))`` of the hit's face normal
  (turned to face the camera), a fixed sun in the global frame, a random albedo per object, a grey
  2 m checkerboard on the ground in global coordinates (its contrast fades where a pixel covers more
  than a quarter of a square, against aliasing), and a sky gradient where a ray hits nothing.
* Depth: camera-frame z of the first hit in metres, 0 where there is none or it lies beyond
  ``max_depth``.
* Lidar: ``beams`` x ``azimuths`` unit rays from the lidar origin (a random azimuth phase per sample),
  returns within ``max_range`` as (x, y, z, intensity, ring) float32 in the lidar frame; intensity is
  ``255 * reflectance * |cos(incidence)|``.
* Per object: visible pixels per camera (first hits), visibility = visible pixels / pixels whose ray
  meets the object at all (``list_intersections`` over the rays that first hit an object; a ray that
  first hits the ground or nothing cannot meet an object resting on the ground), lidar returns.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from vispe.datasets.mv_scenes.errors import RenderError
from vispe.datasets.mv_scenes.layout import PlacedObject
from vispe.datasets.mv_scenes.rigs import LidarSpec
from vispe.extras import import_extra

o3d = import_extra('open3d', 'rendering mv-scenes (open3d\'s ray caster)')

__all__ = ['RenderedCamera', 'RenderedLidar', 'SceneRenderer', 'camera_rays', 'check_camera']

GROUND_HALF_SIZE = 1000.0
CHECKER_SIZE = 2.0
GROUND_ALBEDO = np.array([0.50, 0.48, 0.44])
GROUND_CONTRAST = 0.12
AMBIENT, DIFFUSE = 0.35, 0.65
SUN_ELEVATION, SUN_AZIMUTH = np.deg2rad(50.0), np.deg2rad(30.0)
SKY_HORIZON, SKY_ZENITH = np.array([0.82, 0.87, 0.93]), np.array([0.42, 0.60, 0.86])
MISS = o3d.t.geometry.RaycastingScene.INVALID_ID


@dataclass(frozen=True, eq=False)
class RenderedCamera:
    """One camera: ``image`` (H, W, 3) uint8, ``depth`` (H, W) float32 metres (0 = none), ``visible``
    (N,) int64 first-hit pixels per object, ``meets`` (N,) int64 pixels whose ray meets each object,
    ``geometry`` (H, W) int16 what each pixel sees first (-1 nothing, 0 the ground, k object k - 1)."""

    image: np.ndarray
    depth: np.ndarray
    visible: np.ndarray
    meets: np.ndarray
    geometry: np.ndarray


@dataclass(frozen=True, eq=False)
class RenderedLidar:
    """``points`` (P, 5) float32 (x, y, z, intensity, ring) in the lidar frame and ``geometry`` (P,) int64:
    0 for the ground, k for object k - 1."""

    points: np.ndarray
    geometry: np.ndarray


def check_camera(intrinsics: np.ndarray, cam2lidar: np.ndarray, where: str) -> None:
    """Refuse a calibration that would give NaN or undefined depth (:class:`RenderError` naming ``where``)."""
    if not (np.isfinite(intrinsics).all() and np.isfinite(cam2lidar).all()):
        raise RenderError(f'{where}: the calibration has NaN or inf entries (intrinsics '
                          f'{np.round(intrinsics, 4).tolist()}), so its depth would be NaN; check the rig '
                          f'(focal length, mount angles and position) for this camera')
    singular = np.linalg.svd(intrinsics, compute_uv=False)
    if not singular[-1] > 1e-9 * singular[0] or np.abs(intrinsics[2] - (0, 0, 1)).max() > 0:
        raise RenderError(f'{where}: the intrinsics {np.round(intrinsics, 4).tolist()} are singular or not '
                          f'[[fx, 0, cx], [0, fy, cy], [0, 0, 1]], so pixel rays and depth are undefined; give a '
                          f'positive focal length')


@lru_cache(maxsize=8)
def _pixel_grid(image_size: tuple[int, int]) -> np.ndarray:
    """(H * W, 3) float64 homogeneous pixel centres (u, v, 1), row-major."""
    height, width = image_size
    rows, cols = np.meshgrid(np.arange(height, dtype=np.float64), np.arange(width, dtype=np.float64),
                             indexing='ij')
    return np.stack([cols.ravel(), rows.ravel(), np.ones(height * width)], 1)


def camera_rays(intrinsics: np.ndarray, cam2lidar: np.ndarray, image_size: tuple[int, int]) -> np.ndarray:
    """(H * W, 6) float32 rays (origin, direction) in the lidar frame, row-major over pixels; a direction's
    camera-frame z is 1."""
    pixels = _pixel_grid(tuple(image_size))
    rays = np.empty((len(pixels), 6), np.float32)
    rays[:, :3] = cam2lidar[:3, 3]
    rays[:, 3:] = pixels @ (cam2lidar[:3, :3] @ np.linalg.inv(intrinsics)).T
    return rays


class SceneRenderer:
    """The ray-casting scene of one sample.

    Args:
        objects: the layout (geometry ids 1..N in this order).
        ground_z: height of the ground plane in the lidar frame.
        lidar2global: (4, 4) pose of the lidar frame in the global frame (sun direction, ground pattern).
        nthreads: open3d threads per cast (0 = all).
        ground_contrast: albedo difference of the checkerboard's squares from the mean ground albedo (0: a plain
            ground).
    """

    def __init__(self, objects: list[PlacedObject], ground_z: float, lidar2global: np.ndarray,
                 nthreads: int = 0, ground_contrast: float = GROUND_CONTRAST) -> None:
        self.objects, self.ground_z, self.lidar2global, self.nthreads = objects, ground_z, lidar2global, nthreads
        self.ground_contrast = ground_contrast
        self.scene = o3d.t.geometry.RaycastingScene()
        half = GROUND_HALF_SIZE
        ground = np.array([[-half, -half, ground_z], [half, -half, ground_z], [half, half, ground_z],
                           [-half, half, ground_z]], np.float32)
        self.scene.add_triangles(o3d.core.Tensor(ground), o3d.core.Tensor(np.array([[0, 1, 2], [0, 2, 3]],
                                                                                    np.uint32)))
        for item in objects:
            self.scene.add_triangles(o3d.core.Tensor(item.vertices.astype(np.float32)),
                                     o3d.core.Tensor(item.faces.astype(np.uint32)))
        global2lidar = np.linalg.inv(lidar2global)[:3, :3]
        sun = np.array([np.cos(SUN_ELEVATION) * np.cos(SUN_AZIMUTH), np.cos(SUN_ELEVATION) * np.sin(SUN_AZIMUTH),
                        np.sin(SUN_ELEVATION)])
        self.sun = global2lidar @ sun
        self.albedo = np.stack([GROUND_ALBEDO, *(item.albedo for item in objects)])

    def cast(self, rays: np.ndarray) -> dict[str, np.ndarray]:
        """open3d ``cast_rays`` on (R, 6) float32 rays: t_hit (R,), geometry (R,) int64 (-1 = miss), normals."""
        result = self.scene.cast_rays(o3d.core.Tensor(rays), nthreads=self.nthreads)
        geometry = result['geometry_ids'].numpy().astype(np.int64)
        geometry[geometry == MISS] = -1
        return dict(t_hit=result['t_hit'].numpy(), geometry=geometry, normals=result['primitive_normals'].numpy())

    def _ground_albedo(self, points: np.ndarray, footprint: np.ndarray) -> np.ndarray:
        """(R, 3) checkerboard albedo at lidar-frame ground points, faded where ``footprint`` (m per pixel)
        exceeds a quarter square."""
        world = points @ self.lidar2global[:3, :3].T + self.lidar2global[:3, 3]
        parity = (np.floor(world[:, 0] / CHECKER_SIZE) + np.floor(world[:, 1] / CHECKER_SIZE)) % 2 * 2 - 1
        contrast = self.ground_contrast * np.clip(1.5 - 2 * footprint / CHECKER_SIZE, 0, 1)
        return GROUND_ALBEDO + (parity * contrast)[:, None]

    def render_camera(self, intrinsics: np.ndarray, cam2lidar: np.ndarray, image_size: tuple[int, int],
                      max_depth: float, where: str) -> RenderedCamera:
        """Render one camera (``where`` names it in errors)."""
        check_camera(intrinsics, cam2lidar, where)
        rays = camera_rays(intrinsics, cam2lidar, image_size)
        hit = self.cast(rays)
        t_hit, geometry = hit['t_hit'], hit['geometry']
        if np.isnan(t_hit).any():
            raise RenderError(f'{where}: ray casting gave NaN depth at {int(np.isnan(t_hit).sum())} pixels; a mesh '
                              f'of this sample has NaN vertices or the camera is degenerate')
        directions = rays[:, 3:]
        elevation = directions[:, 2] / np.linalg.norm(directions, axis=1)
        colour = SKY_HORIZON + np.clip(2 * elevation, 0, 1)[:, None] * (SKY_ZENITH - SKY_HORIZON)
        found = np.flatnonzero(geometry >= 0)
        rays_found, normals = directions[found], hit['normals'][found]
        normals *= np.where(np.einsum('ij,ij->i', normals, rays_found) > 0, -1.0, 1.0).astype(np.float32)[:, None]
        shade = AMBIENT + DIFFUSE * np.clip(normals @ self.sun.astype(np.float32), 0, None)
        albedo = self.albedo[geometry[found]]
        ground = geometry[found] == 0
        t_ground = t_hit[found[ground]]
        points = rays[found[ground], :3] + rays_found[ground] * t_ground[:, None]
        height_above_ground = max(cam2lidar[2, 3] - self.ground_z, 1e-3)
        albedo[ground] = self._ground_albedo(points, t_ground ** 2 / (intrinsics[1, 1] * height_above_ground))
        colour[found] = albedo * shade[:, None]
        height, width = image_size
        image = np.round(np.clip(colour, 0, 1) * 255).astype(np.uint8).reshape(height, width, 3)
        depth = np.where((geometry >= 0) & (t_hit <= max_depth), t_hit, 0).astype(np.float32).reshape(height, width)
        count = len(self.objects) + 1
        visible = np.bincount(geometry[found], minlength=count)[1:]
        on_object = np.flatnonzero(geometry > 0)
        meets = np.zeros(len(self.objects), np.int64)
        if len(on_object):
            crossings = self.scene.list_intersections(o3d.core.Tensor(rays[on_object]), nthreads=self.nthreads)
            pairs = np.unique(crossings['ray_ids'].numpy().astype(np.int64) * count
                              + crossings['geometry_ids'].numpy().astype(np.int64))
            meets = np.bincount(pairs % count, minlength=count)[1:]
        return RenderedCamera(image, depth, visible, np.maximum(meets, visible),
                              geometry.astype(np.int16).reshape(height, width))

    def render_lidar(self, spec: LidarSpec, phase: float, where: str) -> RenderedLidar:
        """Spin the lidar once, ``phase`` (radians) the azimuth of the first column (``where`` names it in
        errors)."""
        elevation = np.deg2rad(np.linspace(spec.elevation[0], spec.elevation[1], spec.beams))
        azimuth = phase + 2 * np.pi * np.arange(spec.azimuths) / spec.azimuths
        elevation, azimuth = np.meshgrid(elevation, azimuth)          # (azimuths, beams): one column per firing
        directions = np.stack([np.cos(elevation) * np.cos(azimuth), np.cos(elevation) * np.sin(azimuth),
                               np.sin(elevation)], -1).reshape(-1, 3)
        rings = np.broadcast_to(np.arange(spec.beams), elevation.shape).reshape(-1)
        rays = np.concatenate([np.zeros_like(directions), directions], 1).astype(np.float32)
        hit = self.cast(rays)
        t_hit, geometry = hit['t_hit'], hit['geometry']
        if np.isnan(t_hit).any():
            raise RenderError(f'{where}: ray casting gave NaN ranges; a mesh of this sample has NaN vertices')
        keep = (geometry >= 0) & (t_hit <= spec.max_range)
        directions = rays[keep, 3:].astype(np.float64)
        cosine = np.abs((hit['normals'][keep] * directions).sum(1))
        points = directions * t_hit[keep, None]
        reflectance = self.albedo[geometry[keep]].mean(1)
        ground = geometry[keep] == 0
        reflectance[ground] = self._ground_albedo(points[ground], np.zeros(int(ground.sum()))).mean(1)
        cloud = np.concatenate([points, (255 * reflectance * cosine)[:, None], rings[keep, None]], 1)
        return RenderedLidar(cloud.astype(np.float32), geometry[keep])
