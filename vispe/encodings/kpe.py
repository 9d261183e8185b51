"""KPE: intrinsics-aware positional encoding of image crops (Prakash, Gupta, Gupta; ECCV 2024, "Mitigating
Perspective Distortion-induced Shape Ambiguity in Image Crops"; ap229997/ambiguity).

A crop's place in the camera is encoded by the viewing-ray angles of its pixels relative to the principal
axis, θx = atan2(x − cx, fx) and θy = atan2(y − cy, fy), in pixels (x, y) of the full image whose intrinsics
K are (fx, fy, cx, cy); each angle becomes γ(θ) = (sin 2^l θ, cos 2^l θ), l = 0…L−1 (no π factor).

* ``center-corner`` (the reference's ``center+corner_latent``): the angles of the crop's centre (2) and of its
  corners (x0, y0), (x0, y1), (x1, y0), (x1, y1) (8), features ordered (l, angle, sin|cos): 4L + 16L = 20L
  values per crop.
* ``dense`` (``dense_latent``): the angles of every pixel of the crop, x0…x1 × y0…y1 inclusive, 4L channels
  ordered (l, axis x|y, sin|cos), resized to the target grid bilinearly with ``align_corners=True``. Since θx
  depends on x alone, the resize is done per axis, exactly (the same values as resizing the full map).

Scaling the full image and K together leaves the centre and corner features unchanged (atan2 of two scaled
lengths); the dense map changes only through its resampling.
"""
from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from vispe.encodings.base import AbsoluteEncoding, apply_learned
from vispe.encodings.options import Option, model_fact
from vispe.geometry import Positions
from vispe.geometry.checks import checking_values
from vispe.geometry.device_constants import device_constant
from vispe.registry import ENCODINGS

__all__ = ['KPE', 'check_crops', 'kpe_angles', 'kpe_center_corner', 'kpe_dense', 'kpe_features']


def kpe_angles(pixels: torch.Tensor, intrinsics: torch.Tensor) -> torch.Tensor:
    """(..., 2) pixels (x, y) of the full image and (..., 3, 3) K -> (..., 2) viewing-ray angles (θx, θy) in
    radians: atan2(x − cx, fx), atan2(y − cy, fy)."""
    focal = torch.stack([intrinsics[..., 0, 0], intrinsics[..., 1, 1]], dim=-1)
    principal = intrinsics[..., :2, 2]
    return torch.atan2(pixels - principal, focal)


def kpe_features(angles: torch.Tensor, num_freqs: int) -> torch.Tensor:
    """(..., A) angles -> (..., 2·A·L) features sin / cos(2^l θ_a) at index (l·A + a)·2 + {0 sin, 1 cos}."""
    scales = 2.0 ** torch.arange(num_freqs, dtype=torch.float32, device=angles.device)
    scaled = angles.float()[..., None, :] * scales[:, None]
    return torch.stack([scaled.sin(), scaled.cos()], dim=-1).flatten(-3)


def check_crops(boxes: torch.Tensor, intrinsics: torch.Tensor, image_size: tuple[int, int]) -> None:
    """Refuse crops with NaN or infinite corners, of zero size or outside their (H, W) image, and intrinsics with fx
    or fy ≤ 0, naming the sample."""
    height, width = image_size
    x0, y0, x1, y1 = boxes.unbind(-1)
    problems = (
        (~torch.isfinite(boxes).all(-1), 'has NaN or infinite corners; give (x0, y0, x1, y1) in pixels of the full '
                                         'image'),
        ((x1 <= x0) | (y1 <= y0), 'has zero or negative size; give x1 > x0 and y1 > y0'),
        ((x0 < 0) | (y0 < 0) | (x1 > width) | (y1 > height),
         f'lies outside its {height}x{width} image; crop inside the full image the intrinsics describe'),
        ((intrinsics[..., 0, 0] <= 0) | (intrinsics[..., 1, 1] <= 0),
         'has intrinsics with fx or fy <= 0; give the camera matrix K of the full image'),
    )
    for bad, message in problems:
        if bool(bad.any()):
            index = int(bad.nonzero()[0, 0])
            raise ValueError(f'Crop {index} {boxes[index].tolist()} {message}.')


def kpe_center_corner(boxes: torch.Tensor, intrinsics: torch.Tensor, num_freqs: int = 8) -> torch.Tensor:
    """The reference's ``center+corner_latent``: (B, 4) crops (x0, y0, x1, y1) and (B, 3, 3) K -> (B, 20L)
    (the centre's 4L features, then the four corners' 16L)."""
    x0, y0, x1, y1 = boxes.unbind(-1)
    center = torch.stack([(x0 + x1) / 2, (y0 + y1) / 2], dim=-1)
    corners = torch.stack([torch.stack([x0, y0], -1), torch.stack([x0, y1], -1), torch.stack([x1, y0], -1),
                           torch.stack([x1, y1], -1)], dim=-2)
    center_angles = kpe_angles(center, intrinsics)
    corner_angles = kpe_angles(corners, intrinsics[..., None, :, :]).flatten(-2)
    return torch.cat([kpe_features(center_angles, num_freqs), kpe_features(corner_angles, num_freqs)], dim=-1)


def _resampled_axis(start: torch.Tensor, stop: torch.Tensor, size: int, principal: torch.Tensor,
                    focal: torch.Tensor, num_freqs: int) -> torch.Tensor:
    """(B, size, L, 2) features of one axis: the integer pixels start…stop of each crop resampled to ``size``
    samples by linear interpolation with aligned corners (torch's ``align_corners=True``)."""
    count = torch.floor(stop - start) + 1
    index = torch.arange(size, dtype=torch.float32, device=start.device)
    if size > 1:
        source = index * ((count[:, None] - 1) / (size - 1))
    else:
        source = torch.zeros(start.shape[0], 1, device=start.device)
    low = source.floor()
    weight = (source - low)[..., None, None]
    high = torch.minimum(low + 1, count[:, None] - 1)

    def features(offset: torch.Tensor) -> torch.Tensor:
        angles = torch.atan2(start[:, None] + offset - principal[:, None], focal[:, None])
        return kpe_features(angles[..., None], num_freqs).unflatten(-1, (num_freqs, 2))

    return features(low) * (1 - weight) + features(high) * weight


def kpe_dense(boxes: torch.Tensor, intrinsics: torch.Tensor, size: tuple[int, int], num_freqs: int = 8) -> torch.Tensor:
    """The reference's ``dense_latent`` resized to ``size`` = (h, w): (B, 4) crops and (B, 3, 3) K -> (B, 4L, h, w),
    channel 4l + 2·axis + {0 sin, 1 cos}."""
    height, width = size
    x0, y0, x1, y1 = boxes.float().unbind(-1)
    along_x = _resampled_axis(x0, x1, width, intrinsics[:, 0, 2], intrinsics[:, 0, 0], num_freqs)
    along_y = _resampled_axis(y0, y1, height, intrinsics[:, 1, 2], intrinsics[:, 1, 1], num_freqs)
    x_maps = along_x.permute(0, 2, 3, 1)[..., None, :].expand(-1, -1, -1, height, width)
    y_maps = along_y.permute(0, 2, 3, 1)[..., :, None].expand(-1, -1, -1, height, width)
    return torch.stack([x_maps, y_maps], dim=2).flatten(1, 3)


@ENCODINGS.register_module()
class KPE(AbsoluteEncoding):
    """KPE as an additive token encoding of a ViT over crops: the crop's features through a 1×1 MLP
    (ZoeDepth's ``conv_pos_enc``: Linear(in → hidden) → ReLU → Linear(hidden → C) → ReLU) added to the patch
    tokens; ``dense`` gives each patch the features of its place in the crop, ``center-corner`` adds one
    vector to every patch. The reference adds its map to tokens 0…T−2 of BEiT (the cls token and all patches
    but the last, an off-by-one); vispe adds it to the patches and leaves prefix tokens alone.

    Positions: a single-image grid and a :class:`~vispe.geometry.CameraGeometry` with ``crop_boxes`` (B, 4) in
    pixels of the full images and ``cameras`` with their intrinsics (one view) and (H, W).

    Args:
        embed_dim: token width C, filled in by the model.
        num_freqs: L (8 in the depth and detection experiments, 4 for ARCTIC).
        mode: ``'dense'`` (4L features per patch) or ``'center-corner'`` (20L per crop).
        hidden_dim: width of the MLP (256).
        use_intrinsics: False reads the crop box in pixels alone, the baseline KPE is measured against: the
            angles are taken with a nominal camera of the image size (fx = fy = W, principal point at the image
            centre) in place of the real K, so the features say where the crop lies in pixels and nothing of the
            focal length.

    Shapes: embed x (B, prefix + h·w, C) -> same; position_embedding (B, h·w, C).
    """

    family: ClassVar[str] = 'camera'
    paper: ClassVar[str] = 'Prakash, Gupta, Gupta, ECCV 2024 (ap229997/ambiguity)'
    requires: ClassVar[tuple[str, ...]] = ('grid', 'cameras', 'crop_boxes')
    examples: ClassVar[tuple[dict, ...]] = ({}, {'mode': 'center-corner'},
                                            {'mode': 'center-corner', 'use_intrinsics': False})
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim'),
        'num_freqs': Option(int, ge=1, le=16, doc='The frequencies L of each angle, 2^0…2^(L−1) (8 in the paper).'),
        'mode': Option(str, choices=('dense', 'center-corner'),
                       doc="'dense' (every patch's angles) or 'center-corner' (the crop's centre and corners)."),
        'hidden_dim': Option(int, ge=1, doc='The width of the 1×1 MLP that maps the features to tokens (256).'),
        'use_intrinsics': Option(bool, doc='False: a nominal camera of the image size replaces K (the crop box in '
                                           'pixels alone, a baseline).'),
    }

    def __init__(self, embed_dim: int, num_freqs: int = 8, mode: str = 'dense', hidden_dim: int = 256,
                 use_intrinsics: bool = True) -> None:
        super().__init__()
        self.num_freqs = num_freqs
        self.mode = mode
        self.use_intrinsics = use_intrinsics
        in_dim = 4 * num_freqs if mode == 'dense' else 20 * num_freqs
        self.mlp = nn.Sequential(nn.Linear(in_dim, hidden_dim), nn.ReLU(), nn.Linear(hidden_dim, embed_dim), nn.ReLU())

    def crop_geometry(self, pos: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, 4) crop boxes and (B, 3, 3) intrinsics of the full images, checked (not while a model is traced)."""
        pos.require('cameras', 'crop_boxes', user='KPE')
        cameras, boxes = pos.camera.cameras, pos.camera.crop_boxes
        if cameras.num_views != 1:
            raise ValueError(f'KPE encodes crops of one image each; the cameras have {cameras.num_views} views.')
        intrinsics = cameras.intrinsics[:, 0]
        if checking_values(boxes):  # the checks read values back to the host
            check_crops(boxes, intrinsics, cameras.image_size)
        if not self.use_intrinsics:
            height, width = cameras.image_size
            nominal = device_constant([[width, 0, (width - 1) / 2], [0, width, (height - 1) / 2], [0, 0, 1]],
                                      intrinsics)
            intrinsics = nominal.expand_as(intrinsics)
        return boxes.float(), intrinsics

    def features(self, pos: Positions) -> torch.Tensor:
        """(B, h·w, 4L) dense or (B, 1, 20L) centre-and-corner features of this forward (built once)."""
        def build() -> torch.Tensor:
            boxes, intrinsics = self.crop_geometry(pos)
            if self.mode == 'center-corner':
                return kpe_center_corner(boxes, intrinsics, self.num_freqs)[:, None]
            return kpe_dense(boxes, intrinsics, pos.require_grid('KPE'), self.num_freqs).flatten(2).transpose(1, 2)
        return self.cached_table('features', pos, build)

    def prepare(self, pos: Positions) -> None:
        self.features(pos)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(B, h·w, C): the MLP of each patch's features (``center-corner``: the crop's one vector on every patch)."""
        pos.require_grid('KPE')
        embedding = apply_learned(self.mlp, self.features(pos))
        return embedding.expand(-1, pos.num_positions, -1)

    def extra_repr(self) -> str:
        return f'mode={self.mode!r}, num_freqs={self.num_freqs}, use_intrinsics={self.use_intrinsics}'
