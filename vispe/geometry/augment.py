"""Augmentations that keep cameras and boxes consistent with what they describe.

Image augmentations (resize, crop/pad, horizontal flip) act on pixels: a 3×3 pixel-space matrix ``P``
maps old pixels to new ones and the cameras get ``K' = P @ K`` and the new image size. Pixel centres
sit at integers, and resizing is exact: a pixel centre u maps to ``sx·(u + 0.5) - 0.5``, the sampling
of ``F.interpolate(..., align_corners=False)``. mmdet3d / PETR's ``ResizeCropFlipImage`` uses
``u' = s·u`` instead, (s - 1)/2 pixel away from this.

Scene ("global") augmentations act on the scene: ``p' = A p`` for points, boxes move with ``A``, and
the cameras record ``A`` (``Cameras.scene_transform``) so that their extrinsics become
``lidar2cam @ A^-1``: a moved scene projects to the same pixels as before.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

import torch
from kornia.geometry.linalg import transform_points

from vispe.geometry.boxes import check_gravity_similarity, transform_boxes
from vispe.geometry.cameras import Cameras, no_autocast

__all__ = ['SceneTransform', 'crop_cameras', 'hflip_cameras', 'resize_cameras', 'transform_intrinsics']

PerView = float | bool | torch.Tensor


def _per_view(value: PerView, cameras: Cameras, name: str) -> torch.Tensor:
    """A scalar, (B,) or (B, V) value as a (B, V) float64 tensor."""
    batch, views = cameras.num_samples, cameras.num_views
    value = torch.as_tensor(value, dtype=torch.float64, device=cameras.device)
    if value.ndim == 1 and value.shape[0] == batch:
        value = value[:, None]
    elif value.ndim not in (0, 2) or (value.ndim == 2 and value.shape != (batch, views)):
        raise ValueError(f'{name} must be a scalar, (B,) = ({batch},) or (B, V) = ({batch}, {views}), '
                         f'got shape {tuple(value.shape)}')
    return value.expand(batch, views)


def _pixel_matrix(scale_x: torch.Tensor, scale_y: torch.Tensor, shift_x: torch.Tensor,
                  shift_y: torch.Tensor) -> torch.Tensor:
    """(B, V, 3, 3) ``[[sx, 0, tx], [0, sy, ty], [0, 0, 1]]`` from (B, V) entries."""
    zero, one = torch.zeros_like(scale_x), torch.ones_like(scale_x)
    return torch.stack([scale_x, zero, shift_x, zero, scale_y, shift_y, zero, zero, one], -1).unflatten(-1, (3, 3))


def transform_intrinsics(cameras: Cameras, pixel_transform: torch.Tensor, image_size: Sequence[int]) -> Cameras:
    """Cameras after an image warp ``P`` (old pixels -> new pixels): ``K' = P @ K``.

    Args:
        cameras: B × V cameras.
        pixel_transform: (3, 3), (B, 3, 3) or (B, V, 3, 3) with last row (0, 0, 1).
        image_size: (H', W') of the new images.
    """
    batch, views = cameras.num_samples, cameras.num_views
    if pixel_transform.shape not in ((3, 3), (batch, 3, 3), (batch, views, 3, 3)):
        raise ValueError(f'pixel_transform must have shape (3, 3), (B, 3, 3) or (B, V, 3, 3) with B={batch}, '
                         f'V={views}, got {tuple(pixel_transform.shape)}')
    if pixel_transform.ndim == 3:
        pixel_transform = pixel_transform[:, None]
    with no_autocast(cameras.device):
        intrinsics = pixel_transform.to(cameras.device).double() @ cameras.intrinsics.double()
    return replace(cameras, intrinsics=intrinsics, image_size=tuple(image_size))


def resize_cameras(cameras: Cameras, size: Sequence[int]) -> Cameras:
    """Cameras of the images resized from ``cameras.image_size`` to ``size`` = (H', W').

    Exact resize: ``u' = sx·(u + 0.5) - 0.5`` with ``sx = W'/W`` (likewise v), as
    ``F.interpolate(images, size, align_corners=False)`` samples.
    """
    (height, width), (new_h, new_w) = cameras.image_size, size
    scale_x = _per_view(new_w / width, cameras, 'scale')
    scale_y = _per_view(new_h / height, cameras, 'scale')
    matrix = _pixel_matrix(scale_x, scale_y, (scale_x - 1) / 2, (scale_y - 1) / 2)
    return transform_intrinsics(cameras, matrix, (new_h, new_w))


def crop_cameras(cameras: Cameras, top: PerView, left: PerView, size: Sequence[int]) -> Cameras:
    """Cameras of the (H', W') = ``size`` crops whose top-left pixel was (top, left): ``u' = u - left``.

    ``top`` / ``left`` are scalars, (B,) or (B, V); negative offsets or a larger size pad the image
    (top/left and bottom/right).
    """
    left = _per_view(left, cameras, 'left')
    top = _per_view(top, cameras, 'top')
    one = torch.ones_like(left)
    return transform_intrinsics(cameras, _pixel_matrix(one, one, -left, -top), size)


def hflip_cameras(cameras: Cameras, flip: PerView = True) -> Cameras:
    """Cameras of horizontally flipped images, ``u' = W - 1 - u``, where ``flip`` (scalar, (B,), (B, V)) is True."""
    flip = _per_view(flip, cameras, 'flip')
    width = cameras.image_size[1]
    matrix = _pixel_matrix(1 - 2 * flip, torch.ones_like(flip), flip * (width - 1), torch.zeros_like(flip))
    return transform_intrinsics(cameras, matrix, cameras.image_size)


def _batched(value: float | bool | torch.Tensor | Sequence[float], name: str, dim: int = 0) -> torch.Tensor:
    """A scalar or (B,) value as (B,) float64; with ``dim``, a (dim,) or (B, dim) vector as (B, dim)."""
    value = torch.as_tensor(value, dtype=torch.float64)
    expected = f'({dim},) or (B, {dim})' if dim else 'a scalar or (B,)'
    if value.ndim > (2 if dim else 1) or (dim and (value.ndim == 0 or value.shape[-1] != dim)):
        raise ValueError(f'{name} must be {expected}, got shape {tuple(value.shape)}')
    return value.reshape(-1, dim) if dim else value.reshape(-1)


@dataclass(frozen=True, eq=False)
class SceneTransform:
    """Per-sample global scene augmentation ``p' = A p``: rotations about +z, uniform scales, flips of x/y
    and translations (so boxes stay gravity-aligned).

    Attributes:
        matrix: (B, 4, 4) float64 ``A``; B = 1 applies to any batch.

    Compose with :meth:`then`: ``SceneTransform.rotation(a).then(SceneTransform.scaling(s))`` rotates,
    then scales.
    """

    matrix: torch.Tensor

    def __post_init__(self) -> None:
        if self.matrix.ndim != 3 or self.matrix.shape[-2:] != (4, 4):
            raise ValueError(f'SceneTransform.matrix must have shape (B, 4, 4), got {tuple(self.matrix.shape)}')
        check_gravity_similarity(self.matrix)
        object.__setattr__(self, 'matrix', self.matrix.double())

    @classmethod
    def rotation(cls, angle: float | torch.Tensor) -> SceneTransform:
        """Rotations by ``angle`` (scalar or (B,), radians) counter-clockwise about +z."""
        angle = _batched(angle, 'angle')
        cos, sin = torch.cos(angle), torch.sin(angle)
        zero, one = torch.zeros_like(angle), torch.ones_like(angle)
        return cls(torch.stack([cos, -sin, zero, zero, sin, cos, zero, zero, zero, zero, one, zero,
                                zero, zero, zero, one], -1).unflatten(-1, (4, 4)))

    @classmethod
    def scaling(cls, factor: float | torch.Tensor) -> SceneTransform:
        """Uniform scales by ``factor`` (scalar or (B,), > 0) about the origin."""
        factor = _batched(factor, 'factor')
        return cls(torch.diag_embed(torch.stack([factor, factor, factor, torch.ones_like(factor)], -1)))

    @classmethod
    def flip(cls, x: bool | torch.Tensor = False, y: bool | torch.Tensor = False) -> SceneTransform:
        """Flips ``x -> -x`` (yaw -> pi - yaw) and/or ``y -> -y`` (yaw -> -yaw); bools or (B,) bools."""
        x, y = _batched(x, 'x'), _batched(y, 'y')
        x, y = torch.broadcast_tensors(x, y)
        diagonal = torch.stack([1 - 2 * x, 1 - 2 * y, torch.ones_like(x), torch.ones_like(x)], -1)
        return cls(torch.diag_embed(diagonal))

    @classmethod
    def translation(cls, offset: Sequence[float] | torch.Tensor) -> SceneTransform:
        """Translations by ``offset`` ((3,) or (B, 3), metres)."""
        offset = _batched(offset, 'offset', dim=3)
        matrix = torch.eye(4, dtype=torch.float64, device=offset.device).repeat(offset.shape[0], 1, 1)
        matrix[:, :3, 3] = offset
        return cls(matrix)

    def then(self, other: SceneTransform) -> SceneTransform:
        """This transform followed by ``other``: ``other.matrix @ self.matrix``."""
        return SceneTransform(other.matrix.to(self.matrix.device) @ self.matrix)

    def _matrix(self, batch: int, device: torch.device) -> torch.Tensor:
        if self.matrix.shape[0] not in (1, batch):
            raise ValueError(f'the scene transform holds B={self.matrix.shape[0]} samples but the input has '
                             f'B={batch}; build one transform per sample (or a single one)')
        return self.matrix.to(device).expand(batch, 4, 4)

    def apply_points(self, points: torch.Tensor) -> torch.Tensor:
        """(B, N, 3) scene points -> ``A p`` (float32, or float64 if given)."""
        if points.ndim != 3 or points.shape[-1] != 3:
            raise ValueError(f'points must have shape (B, N, 3), got {tuple(points.shape)}')
        dtype = torch.promote_types(points.dtype, torch.float32)
        with no_autocast(points.device):
            matrix = self._matrix(points.shape[0], points.device).to(dtype)
            return transform_points(matrix, points.to(dtype))

    def apply_boxes(self, boxes: torch.Tensor) -> torch.Tensor:
        """(B, N, 7) boxes moved with ``A`` (see :func:`vispe.geometry.transform_boxes`)."""
        return transform_boxes(boxes, self._matrix(boxes.shape[0], boxes.device))

    def apply_cameras(self, cameras: Cameras) -> Cameras:
        """Cameras of the moved scene: ``scene_transform' = A @ scene_transform``, i.e. extrinsics
        ``lidar2cam @ scene_transform^-1 @ A^-1``; projections of moved points are unchanged."""
        with no_autocast(cameras.device):
            matrix = self._matrix(cameras.num_samples, cameras.device) @ cameras.scene_transform.double()
        return replace(cameras, scene_transform=matrix)

