"""Camera rigs and the lidar of mv-scenes: two 6-camera rigs in the nuScenes layout, and the rig jitter.

Frames (nuScenes): the ego frame has x forward, y left, z up, its origin on the ground; each sensor's
pose is sensor -> ego (translation, quaternion (w, x, y, z)). Cameras are OpenCV pinholes (x right,
y down, z forward). A mount's yaw turns the optical axis counter-clockwise about +z from +x, a positive
pitch tilts it down, roll turns it about its optical axis:
``R_cam2ego = Rz(yaw) Ry(pitch) Rx(roll) R0`` with ``R0`` the axis swap of a camera looking along +x.

Focal lengths are in pixels of the 180 x 320 (H x W) reference image (nuScenes' 900 x 1600 at 0.2);
other image sizes scale them, with the principal point at the image centre ((W - 1) / 2, (H - 1) / 2)
in the convention of pixel centres at integers.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from scipy.spatial.transform import Rotation

__all__ = ['CAMERA_CHANNELS', 'LIDAR', 'LIDAR_CHANNEL', 'REFERENCE_SIZE', 'RIG1', 'RIG2', 'CameraCalibration',
           'CameraMount', 'LidarSpec', 'Rig', 'RigJitter', 'calibrate', 'jitter_rig', 'pose_matrix',
           'quaternion_matrix', 'rotation_quaternion']

CAMERA_CHANNELS = ('CAM_FRONT', 'CAM_FRONT_RIGHT', 'CAM_FRONT_LEFT', 'CAM_BACK', 'CAM_BACK_LEFT', 'CAM_BACK_RIGHT')
LIDAR_CHANNEL = 'LIDAR_TOP'
REFERENCE_SIZE = (180, 320)
# Columns: the camera's x (right), y (down), z (forward) axes in the ego frame for a camera looking along +x.
CAMERA_AXES = np.array([[0.0, 0.0, 1.0], [-1.0, 0.0, 0.0], [0.0, -1.0, 0.0]])


@dataclass(frozen=True)
class CameraMount:
    """One camera of a rig: channel, orientation (degrees), position in the ego frame (metres), focal
    length (pixels at :data:`REFERENCE_SIZE`, fx = fy)."""

    channel: str
    yaw: float
    translation: tuple[float, float, float]
    focal: float
    pitch: float = 0.0
    roll: float = 0.0


@dataclass(frozen=True)
class Rig:
    """A named set of six camera mounts (order of :data:`CAMERA_CHANNELS`) and its per-sample jitter."""

    name: str
    cameras: tuple[CameraMount, ...]
    jitter: RigJitter | None = None


@dataclass(frozen=True)
class RigJitter:
    """Uniform per-sample, per-camera perturbations: yaw, pitch and roll (± degrees), height (± metres),
    focal length (± fraction)."""

    yaw: float = 5.0
    pitch: float = 1.5
    roll: float = 1.0
    height: float = 0.15
    focal: float = 0.08


@dataclass(frozen=True)
class LidarSpec:
    """A spinning lidar: ``beams`` rings at elevations evenly spaced in ``elevation`` (degrees), ``azimuths``
    rays per ring, returns beyond ``max_range`` metres dropped; mounted at ``translation`` (ego frame) with
    the ego's orientation, so the lidar frame is x forward, y left, z up."""

    translation: tuple[float, float, float] = (0.94, 0.0, 1.84)
    beams: int = 32
    elevation: tuple[float, float] = (-30.0, 10.0)
    azimuths: int = 1000
    max_range: float = 60.0


@dataclass(frozen=True, eq=False)
class CameraCalibration:
    """A calibrated camera as written to ``calibrated_sensor``: intrinsics (3, 3) for ``image_size``
    (H, W), and the camera -> ego pose as translation (3,) and unit quaternion (4,) (w, x, y, z)."""

    channel: str
    intrinsics: np.ndarray
    translation: np.ndarray
    rotation: np.ndarray
    image_size: tuple[int, int]

    @property
    def cam2ego(self) -> np.ndarray:
        """(4, 4) float64, rebuilt from the stored quaternion (what a reader of the tables gets)."""
        return pose_matrix(self.translation, self.rotation)


RIG1 = Rig('rig1', (
    CameraMount('CAM_FRONT', 0.0, (1.70, 0.00, 1.51), 252.0),
    CameraMount('CAM_FRONT_RIGHT', -55.0, (1.55, -0.49, 1.50), 252.0),
    CameraMount('CAM_FRONT_LEFT', 55.0, (1.52, 0.49, 1.51), 252.0),
    CameraMount('CAM_BACK', 180.0, (0.03, 0.00, 1.57), 161.8),
    CameraMount('CAM_BACK_LEFT', 110.0, (1.04, 0.48, 1.56), 252.0),
    CameraMount('CAM_BACK_RIGHT', -110.0, (1.04, -0.48, 1.56), 252.0),
), RigJitter())

RIG2 = Rig('rig2', (
    CameraMount('CAM_FRONT', 27.0, (1.95, 0.10, 1.92), 302.4, pitch=4.0),
    CameraMount('CAM_FRONT_RIGHT', -30.0, (1.80, -0.62, 1.88), 214.2, pitch=4.0),
    CameraMount('CAM_FRONT_LEFT', 82.0, (1.60, 0.62, 1.90), 289.8, pitch=4.0),
    CameraMount('CAM_BACK', -152.0, (-0.10, 0.05, 1.95), 137.5, pitch=4.0),
    CameraMount('CAM_BACK_LEFT', 138.0, (1.00, 0.62, 1.92), 206.6, pitch=4.0),
    CameraMount('CAM_BACK_RIGHT', -84.0, (1.00, -0.62, 1.88), 297.4, pitch=4.0),
))

LIDAR = LidarSpec()


def rotation_quaternion(matrix: np.ndarray) -> np.ndarray:
    """(3, 3) rotation -> unit quaternion (w, x, y, z) with w >= 0."""
    quaternion = Rotation.from_matrix(matrix).as_quat(scalar_first=True)
    return quaternion if quaternion[0] >= 0 else -quaternion


def quaternion_matrix(quaternion: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) -> (3, 3) float64 rotation."""
    return Rotation.from_quat(np.asarray(quaternion, np.float64), scalar_first=True).as_matrix()


def pose_matrix(translation: np.ndarray, quaternion: np.ndarray) -> np.ndarray:
    """(4, 4) float64 ``[[R(q), t], [0, 1]]``."""
    matrix = np.eye(4)
    matrix[:3, :3] = quaternion_matrix(quaternion)
    matrix[:3, 3] = translation
    return matrix


def jitter_rig(rig: Rig, rng: np.random.Generator) -> Rig:
    """A copy of ``rig`` with each camera perturbed by ``rig.jitter`` (unchanged when it has none)."""
    if rig.jitter is None:
        return rig
    jitter, cameras = rig.jitter, []
    for mount in rig.cameras:
        yaw, pitch, roll, height, focal = rng.uniform(-1, 1, 5) * (jitter.yaw, jitter.pitch, jitter.roll,
                                                                 jitter.height, jitter.focal)
        x, y, z = mount.translation
        cameras.append(replace(mount, yaw=mount.yaw + yaw, pitch=mount.pitch + pitch, roll=mount.roll + roll,
                               translation=(x, y, z + height), focal=mount.focal * (1 + focal)))
    return Rig(rig.name, tuple(cameras), None)


def calibrate(mount: CameraMount, image_size: tuple[int, int]) -> CameraCalibration:
    """The calibration of ``mount`` for images of ``image_size`` (H, W)."""
    height, width = image_size
    if height < 1 or width < 1:
        raise ValueError(f'image size must be positive (H, W), got {image_size}')
    scale_y, scale_x = height / REFERENCE_SIZE[0], width / REFERENCE_SIZE[1]
    intrinsics = np.array([[mount.focal * scale_x, 0.0, (width - 1) / 2],
                           [0.0, mount.focal * scale_y, (height - 1) / 2],
                           [0.0, 0.0, 1.0]])
    yaw, pitch, roll = np.deg2rad([mount.yaw, mount.pitch, mount.roll])
    rotation = Rotation.from_euler('ZYX', [yaw, pitch, roll]).as_matrix() @ CAMERA_AXES
    return CameraCalibration(mount.channel, intrinsics, np.asarray(mount.translation, np.float64),
                             rotation_quaternion(rotation), (int(height), int(width)))
