"""Camera frustum points of a feature map: PETR's 3D coordinates generator, and one depth per pixel (3DPPE).

PETR (Liu et al., ECCV 2022; megvii-research/PETR ``PETRHead.position_embeding``) lifts every cell of
an h×w feature map of padded (pad_h, pad_w) images to D depths and maps the homogeneous point
``(u·max(d, 1e-5), v·max(d, 1e-5), d, 1)`` through ``img2lidar``. Its pixel of cell (i, j) is the
top-left corner of the stride cell, ``(u, v) = (j·pad_w/w, i·pad_h/h)``; ``pixel='center'`` gives the
cell centre ``((j + 0.5)·pad_w/w - 0.5, (i + 0.5)·pad_h/h - 0.5)`` with pixel centres at integers.
"""
from __future__ import annotations

from typing import Literal, Sequence

import torch

from vispe.geometry.cameras import DEPTH_EPS, Cameras, no_autocast
from vispe.geometry.checks import check_depth_range, check_finite, size_pair
from vispe.geometry.device_constants import device_constant

__all__ = ['depth_bins', 'depth_map_points', 'frustum_pixels', 'frustum_points', 'homogeneous_pixels', 'lift',
           'normalize_points']

PixelMode = Literal['corner', 'center']


def depth_bins(num: int, start: float, stop: float, mode: Literal['LID', 'UD'] = 'LID',
               device: torch.device | str | None = None) -> torch.Tensor:
    """(num,) float32 depths ``d_i``, i = 0..D-1 (D = num), PETR's bins.

    'LID' (linear-increasing): ``d_i = start + (stop - start) / (D (D + 1)) · i (i + 1)``.
    'UD' (uniform): ``d_i = start + i (stop - start) / D``. Neither reaches ``stop``. Computed in float32 in
    PETR's order of operations, so the bins equal the reference's bit for bit. ``num`` must be a whole number >= 1
    and ``0 < start < stop`` finite (depths in front of the camera).
    """
    num = check_depth_range('depth_bins', num, start, stop)
    index = torch.arange(num, device=device, dtype=torch.float32)
    if mode == 'LID':
        return start + (stop - start) / (num * (1 + num)) * index * (index + 1)
    if mode == 'UD':
        return start + (stop - start) / num * index
    raise ValueError(f"depth_bins mode must be 'LID' or 'UD', got {mode!r}")


def frustum_pixels(feat_size: Sequence[int], image_size: Sequence[int], pixel: PixelMode = 'corner',
                   device: torch.device | str | None = None) -> torch.Tensor:
    """(h, w, 2) float32 (u, v) image pixels of the cells of an h×w feature map of (H, W) images (both positive whole
    numbers)."""
    height, width = size_pair(feat_size, 'frustum_pixels feat_size', 'give the (h, w) cells of the feature map')
    img_h, img_w = size_pair(image_size, 'frustum_pixels image_size', 'give the (H, W) pixels of the images')
    if pixel not in ('corner', 'center'):
        raise ValueError(f"pixel must be 'corner' (PETR) or 'center', got {pixel!r}")
    offset = 0.5 if pixel == 'center' else 0.0
    rows = (torch.arange(height, device=device, dtype=torch.float64) + offset) * img_h / height - offset
    cols = (torch.arange(width, device=device, dtype=torch.float64) + offset) * img_w / width - offset
    v, u = torch.meshgrid(rows, cols, indexing='ij')
    return torch.stack([u, v], -1).float()


def homogeneous_pixels(pixels: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
    """PETR's homogeneous image points ``(u·max(d, 1e-5), v·max(d, 1e-5), d, 1)``: (..., 2) and (...) -> (..., 4)."""
    scaled = pixels * depth.clamp(min=DEPTH_EPS)[..., None]
    return torch.cat([scaled, depth[..., None], torch.ones_like(depth[..., None])], -1)


def lift(img2lidar: torch.Tensor, homogeneous: torch.Tensor) -> torch.Tensor:
    """``img2lidar @ p`` keeping x, y, z, as PETR computes it (a batched 4×4 product in float32, no division by
    the homogeneous coordinate): (B, V, 4, 4) and (B|1, V|1, N, 4) -> (B, V, N, 3)."""
    with no_autocast(img2lidar.device):
        product = torch.matmul(img2lidar[:, :, None, :3, :].float(), homogeneous.float()[..., None])
    return product[..., 0]


def frustum_points(cameras: Cameras, feat_size: Sequence[int], depths: torch.Tensor,
                   pixel: PixelMode = 'corner') -> torch.Tensor:
    """Scene-frame points of every feature cell at every depth.

    Args:
        cameras: B samples × V views; their ``image_size`` is the padded image size.
        feat_size: (h, w) of the feature map.
        depths: (D,) camera-frame depths, e.g. :func:`depth_bins`: finite and positive (in front of the camera; checked
            except while a model is traced).
        pixel: 'corner' (PETR) or 'center'.

    Returns:
        (B, V, h, w, D, 3) float32 points.
    """
    if depths.ndim != 1 or depths.numel() == 0:
        raise ValueError(f'depths must have shape (D,) with D >= 1, got {tuple(depths.shape)}; use depth_map_points '
                         f'for a (B, V, h, w) depth map')
    check_finite(depths, 'frustum_points depths', 'give depth bins in front of the camera, e.g. depth_bins(D, 1.0, '
                                                  '60.0)', positive=True)
    height, width = size_pair(feat_size, 'frustum_points feat_size', 'give the (h, w) cells of the feature map')
    uv = frustum_pixels(feat_size, cameras.image_size, pixel, cameras.device)
    depth = depths.to(cameras.device, torch.float32).expand(height, width, -1)
    homogeneous = homogeneous_pixels(uv[:, :, None].expand(height, width, depths.numel(), 2), depth)
    points = lift(cameras.img2lidar, homogeneous.reshape(1, 1, -1, 4))
    return points.view(cameras.num_samples, cameras.num_views, height, width, depths.numel(), 3)


def depth_map_points(cameras: Cameras, depth: torch.Tensor, pixel: PixelMode = 'corner', *,
                     check_values: bool = True) -> torch.Tensor:
    """Scene-frame points of a (B, V, h, w) depth map (one depth per cell, as 3DPPE), -> (B, V, h, w, 3).

    The cell pixels follow :func:`frustum_pixels` for the cameras' image size. Every depth is lifted as given, so it
    must be finite: NaN or inf is refused (except while a model is traced, or with ``check_values=False``). 0 and
    negative depths are not refused: they give the camera centre and points behind it. 3DPPE's predicted depth (an
    unconstrained direct head mixed with the categorical one) may be negative early in training and the reference
    lifts it as is; a measured map marks cells without a depth with 0 (``CameraGeometry.depth``), which its callers
    replace (:meth:`vispe.encodings.PPE3D.cell_depth`) or mask (``vispe.visualization.encoding_points``) themselves.
    ``check_values=False`` is for a model's own predicted depth, which is lifted as the reference does (an overflow
    under mixed precision then reaches the loss, whose step the gradient scaler skips) and costs no synchronisation.
    """
    batch, views = cameras.num_samples, cameras.num_views
    if depth.ndim != 4 or depth.shape[:2] != (batch, views):
        raise ValueError(f'depth must have shape (B, V, h, w) = ({batch}, {views}, h, w) for these cameras, got '
                         f'{tuple(depth.shape)}')
    if check_values:
        check_finite(depth, 'depth_map_points depth', 'write 0 for cells without a depth and replace or mask them')
    height, width = depth.shape[-2:]
    uv = frustum_pixels((height, width), cameras.image_size, pixel, cameras.device).view(1, 1, -1, 2)
    points = lift(cameras.img2lidar, homogeneous_pixels(uv, depth.flatten(2).float()))
    return points.view(batch, views, height, width, 3)


def normalize_points(points: torch.Tensor, position_range: Sequence[float]) -> torch.Tensor:
    """``(p - min) / (max - min)`` per axis, ``position_range = (xmin, ymin, zmin, xmax, ymax, zmax)``.

    Points inside the range map to [0, 1]; (..., 3) -> (..., 3) float32. The extents are taken in double
    precision before the float32 divide, as PETR divides by Python floats.
    """
    if points.shape[-1:] != (3,):
        raise ValueError(f'points must have shape (..., 3), got {tuple(points.shape)}')
    if len(position_range) != 6 or any(hi <= lo for lo, hi in zip(position_range[:3], position_range[3:])):
        raise ValueError(f'position_range must be (xmin, ymin, zmin, xmax, ymax, zmax) with max > min on every '
                         f'axis, got {position_range}')
    low = device_constant(position_range[:3], points, torch.float32)
    extent = device_constant([float(hi) - float(lo) for lo, hi in zip(position_range[:3], position_range[3:])],
                             points, torch.float32)
    return (points.float() - low) / extent
