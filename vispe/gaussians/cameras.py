"""Pinhole cameras to render Gaussians from, and 3DGS's ``cameras.json``.

3DGS writes the cameras of a trained scene to ``cameras.json``: a list of ``{"id", "img_name", "width", "height",
"position", "rotation", "fx", "fy"}`` with ``position`` the camera centre and ``rotation`` the camera-to-world
rotation (rows), in OpenCV's camera frame (x right, y down, z forward), the principal point at the image centre.
vispe reads and writes that list; two optional keys ``cx``, ``cy`` carry a principal point elsewhere, in vispe's
pixel convention (pixel centres at integers, docs/geometry.md: the centre is ((W − 1)/2, (H − 1)/2)).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

__all__ = ['PinholeCamera', 'read_cameras_json', 'write_cameras_json']

REQUIRED_KEYS = ('width', 'height', 'position', 'rotation', 'fx', 'fy')


@dataclass(frozen=True)
class PinholeCamera:
    """One camera.

    Attributes:
        name: what the camera is (3DGS's ``img_name``).
        world_to_camera: (4, 4) float64 rigid transform, world -> OpenCV camera frame.
        intrinsics: (3, 3) float64 ``K``, vispe's pixel convention (pixel centres at integers).
        width, height: the image size in pixels.
    """

    name: str
    world_to_camera: np.ndarray
    intrinsics: np.ndarray
    width: int
    height: int

    @property
    def centre(self) -> np.ndarray:
        """(3,) the camera centre in the world."""
        return -self.world_to_camera[:3, :3].T @ self.world_to_camera[:3, 3]

    def scaled(self, factor: float) -> PinholeCamera:
        """The same camera with images ``factor`` times as wide and high, rounded to whole pixels: u' = s·(u + 0.5)
        − 0.5 with s = W'/W the rounded ratio (likewise v)."""
        width, height = max(1, round(self.width * factor)), max(1, round(self.height * factor))
        sx, sy = width / self.width, height / self.height
        intrinsics = self.intrinsics.copy()
        intrinsics[0, [0, 2]] = sx * intrinsics[0, [0, 2]] + [0, 0.5 * sx - 0.5]
        intrinsics[1, [1, 2]] = sy * intrinsics[1, [1, 2]] + [0, 0.5 * sy - 0.5]
        return replace(self, intrinsics=intrinsics, width=width, height=height)

    def moved(self, name: str, offset: tuple[float, float, float] = (0.0, 0.0, 0.0),
              yaw_degrees: float = 0.0) -> PinholeCamera:
        """A camera named ``name`` with the centre moved by ``offset`` in this camera's frame and turned by
        ``yaw_degrees`` about its own y axis (down: positive turns right)."""
        angle = math.radians(yaw_degrees)
        turn = np.array([[math.cos(angle), 0, -math.sin(angle)], [0, 1, 0], [math.sin(angle), 0, math.cos(angle)]])
        rotation = self.world_to_camera[:3, :3]
        centre = self.centre + rotation.T @ np.asarray(offset, np.float64)
        matrix = np.eye(4)
        matrix[:3, :3] = turn @ rotation
        matrix[:3, 3] = -matrix[:3, :3] @ centre
        return replace(self, name=name, world_to_camera=matrix)


def _number(entry: dict, key: str, where: str) -> float:
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f'{where}: {key} is {value!r}, not a finite number')
    return float(value)


def _camera(entry: object, where: str) -> PinholeCamera:
    if not isinstance(entry, dict):
        raise ValueError(f'{where} is a {type(entry).__name__}, not a camera object {{"width", "height", '
                         f'"position", "rotation", "fx", "fy"}}')
    missing = [key for key in REQUIRED_KEYS if key not in entry]
    if missing:
        raise ValueError(f'{where} lacks {", ".join(missing)}; 3DGS\'s cameras.json gives each camera '
                         f'{", ".join(REQUIRED_KEYS)}')
    width, height = (entry[key] for key in ('width', 'height'))
    if not all(isinstance(size, int) and not isinstance(size, bool) and size > 0 for size in (width, height)):
        raise ValueError(f'{where}: width and height must be positive whole numbers of pixels, got {width!r}, '
                         f'{height!r}')
    fx, fy = _number(entry, 'fx', where), _number(entry, 'fy', where)
    if fx <= 0 or fy <= 0:
        raise ValueError(f'{where}: the focal lengths must be positive, got fx {fx}, fy {fy}')
    try:
        position = np.asarray(entry['position'], np.float64).reshape(3)
        rotation = np.asarray(entry['rotation'], np.float64).reshape(3, 3)
    except (TypeError, ValueError):
        raise ValueError(f'{where}: position must be 3 numbers and rotation a 3×3 list of numbers, got '
                         f'{entry["position"]!r} and {entry["rotation"]!r}') from None
    if not (np.isfinite(position).all() and np.isfinite(rotation).all()):
        raise ValueError(f'{where}: position or rotation holds a non-finite value')
    if not np.allclose(rotation @ rotation.T, np.eye(3), atol=1e-4) or np.linalg.det(rotation) < 0:
        raise ValueError(f'{where}: rotation is not a rotation matrix (RRᵀ ≠ I or det < 0); 3DGS stores the '
                         f'camera-to-world rotation')
    cx = _number(entry, 'cx', where) if 'cx' in entry else (width - 1) / 2
    cy = _number(entry, 'cy', where) if 'cy' in entry else (height - 1) / 2
    world_to_camera = np.eye(4)
    world_to_camera[:3, :3] = rotation.T
    world_to_camera[:3, 3] = -rotation.T @ position
    intrinsics = np.array([[fx, 0, cx], [0, fy, cy], [0, 0, 1]])
    return PinholeCamera(str(entry.get('img_name', entry.get('id', where))), world_to_camera, intrinsics,
                         width, height)


def read_cameras_json(path: str | Path) -> list[PinholeCamera]:
    """The cameras of a 3DGS ``cameras.json`` (errors name the file, the entry and what is wrong)."""
    path = Path(path)
    try:
        entries = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f'{path}: cannot read it as a cameras.json ({error})') from None
    if not isinstance(entries, list) or not entries:
        raise ValueError(f'{path}: a cameras.json is a non-empty list of cameras, got '
                         f'{"an empty list" if entries == [] else type(entries).__name__}')
    return [_camera(entry, f'{path}: camera {index}') for index, entry in enumerate(entries)]


def write_cameras_json(path: str | Path, cameras: list[PinholeCamera]) -> Path:
    """Write ``cameras`` as a 3DGS ``cameras.json`` (with ``cx``, ``cy``), atomically."""
    from vispe.evaluation.sweep import write_atomically

    entries = []
    for index, camera in enumerate(cameras):
        rotation = camera.world_to_camera[:3, :3].T
        entries.append(dict(id=index, img_name=camera.name, width=camera.width, height=camera.height,
                            position=camera.centre.tolist(), rotation=rotation.tolist(),
                            fx=float(camera.intrinsics[0, 0]), fy=float(camera.intrinsics[1, 1]),
                            cx=float(camera.intrinsics[0, 2]), cy=float(camera.intrinsics[1, 2])))
    path = Path(path)
    write_atomically(path, lambda target: target.write_text(json.dumps(entries, indent=1)))
    return path
