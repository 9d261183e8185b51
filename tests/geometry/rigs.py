"""nuScenes-like camera rigs for the geometry tests (not fixtures)."""
from __future__ import annotations

import math

import torch

from vispe.geometry import Cameras

# Six cameras around the car: front, front-left/right (±55°), back (180°), back-left/right (±110°).
YAWS_DEG = (0.0, 55.0, -55.0, 180.0, 110.0, -110.0)
IMAGE_SIZE = (320, 800)


def cam2lidar(yaw: float, pitch: float, position: tuple[float, float, float]) -> torch.Tensor:
    """(4, 4) float64 pose of an OpenCV camera looking along ``yaw`` (about +z), tilted down by ``pitch``."""
    forward = torch.tensor([math.cos(pitch) * math.cos(yaw), math.cos(pitch) * math.sin(yaw), -math.sin(pitch)],
                           dtype=torch.float64)
    right = torch.tensor([math.sin(yaw), -math.cos(yaw), 0.0], dtype=torch.float64)
    down = torch.linalg.cross(forward, right)
    pose = torch.eye(4, dtype=torch.float64)
    pose[:3, :3] = torch.stack([right, down, forward], 1)
    pose[:3, 3] = torch.tensor(position, dtype=torch.float64)
    return pose


def rig(seed: int, focal: float = 633.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(V, 3, 3) intrinsics and (V, 4, 4) lidar2cam of a six-camera rig, jittered by ``seed``."""
    gen = torch.Generator().manual_seed(seed)
    jitter = lambda scale: float((torch.rand((), generator=gen, dtype=torch.float64) - 0.5) * 2 * scale)  # noqa: E731
    intrinsics, lidar2cam = [], []
    for yaw in YAWS_DEG:
        yaw = math.radians(yaw + jitter(2.0))
        pose = cam2lidar(yaw, math.radians(jitter(2.0)),
                         (1.0 * math.cos(yaw) + jitter(0.2), 0.6 * math.sin(yaw) + jitter(0.2), 1.6 + jitter(0.1)))
        lidar2cam.append(torch.linalg.inv(pose))
        f = focal + jitter(15.0)
        intrinsics.append(torch.tensor([[f, 0.0, 400.0 + jitter(8.0)], [0.0, f, 160.0 + jitter(8.0)],
                                        [0.0, 0.0, 1.0]], dtype=torch.float64))
    return torch.stack(intrinsics), torch.stack(lidar2cam)


def samples(*seeds: int) -> list[dict]:
    """Per-sample dicts (numpy values, as a data pipeline gives them) of different rigs."""
    out = []
    for seed in seeds:
        intrinsics, lidar2cam = rig(seed)
        out.append({'intrinsics': intrinsics.numpy(), 'lidar2cam': lidar2cam.numpy(), 'img_shape': IMAGE_SIZE})
    return out


def cameras(*seeds: int) -> Cameras:
    return Cameras.from_data_samples(samples(*seeds))
