"""The real RGB-D image bundled with scikit-image: ``skimage.data.stereo_motorcycle`` (Middlebury 2014
"Motorcycle", left camera), with depth from its ground-truth disparity and the calibration in skimage's docstring:
Z = f·B / (d + doffs), f 994.978 px, B 193.001 mm, doffs 31.086 px, principal point (311.193, 254.877)."""
from __future__ import annotations

import numpy as np
import torch

from vispe.extras import import_extra

__all__ = ['MOTORCYCLE', 'motorcycle_rgbd', 'rgbd_points']

MOTORCYCLE = dict(focal=994.978, cx=311.193, cy=254.877, doffs=31.086, baseline_mm=193.001)


def motorcycle_rgbd() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The left image (H, W, 3) uint8, its depth (H, W) float32 in metres (0 where the disparity is unknown) and
    the intrinsics K (3, 3)."""
    stereo_motorcycle = import_extra('skimage.data', 'the stereo-motorcycle RGB-D pair').stereo_motorcycle

    left, _, disparity = stereo_motorcycle()
    known = np.isfinite(disparity)
    depth = np.zeros(disparity.shape, np.float32)
    depth[known] = MOTORCYCLE['focal'] * MOTORCYCLE['baseline_mm'] / (disparity[known] + MOTORCYCLE['doffs']) / 1000
    intrinsics = np.array([[MOTORCYCLE['focal'], 0, MOTORCYCLE['cx']], [0, MOTORCYCLE['focal'], MOTORCYCLE['cy']],
                           [0, 0, 1]], np.float32)
    return left, depth, intrinsics


def rgbd_points(image: np.ndarray, depth: np.ndarray, intrinsics: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Back-project every pixel of known depth (> 0) with kornia: xyz (P, 3) float32 in the camera frame (OpenCV: x
    right, y down, z forward; pixel centres at integer coordinates, docs/geometry.md) and its colour (P, 3) in
    [0, 1]."""
    from kornia.geometry.camera import unproject_points

    rows, cols = np.nonzero(depth > 0)
    pixels = torch.from_numpy(np.stack([cols, rows], axis=1).astype(np.float64))
    xyz = unproject_points(pixels, torch.from_numpy(depth[rows, cols].astype(np.float64))[:, None],
                           torch.from_numpy(np.asarray(intrinsics, np.float64)))
    return xyz.numpy().astype(np.float32), image[rows, cols, :3].astype(np.float32) / 255.0
