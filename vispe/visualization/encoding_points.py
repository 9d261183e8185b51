"""The 3D points a camera encoding builds its key embedding from, for one sample, and their re-projection.

* PETR (Liu et al., ECCV 2022): every feature cell lifted to D depth bins along its ray (``PETR.frustum``);
* 3DPPE (Shu et al., ICCV 2023): one point per cell at its depth (``PPE3D.points``: the depth net's prediction,
  or as its ``depth_source`` says), or at the cell's LiDAR depth (the depth its ground-truth source reads);
* MultiViewSine (no 3D PE): none; its keys come from (camera, row, column) alone.

The points come from the encoding's own functions on the detector's memory positions (the same cameras, feature
grid and pixel convention the encoding saw), de-normalised from the position range to metres; projecting them back
with those cameras must land on the cells' pixels (``frustum_pixels``, PETR's top-left pixel of the cell).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Mapping

import torch

from vispe.encodings.camera import MultiViewSine
from vispe.encodings.petr import PETR
from vispe.encodings.ppe3d import PPE3D
from vispe.geometry import Cameras, Positions, depth_map_points, frustum_pixels
from vispe.models.petr.detector import PETRDetector

DepthChoice = Literal['predicted', 'gt']
SUPPORTED = (PETR, PPE3D, MultiViewSine)


@dataclass
class EncodingPoints:
    """The points of one sample's V camera grids.

    Attributes:
        kind: 'frustum' (PETR), 'depth' (3DPPE) or 'none' (an encoding without 3D points).
        points: (V, h, w, K, 3) float32 scene-frame metres: K depth bins per cell (PETR) or K = 1 (3DPPE);
            (V, h, w, 0, 3) for 'none'.
        valid: (V, h, w, K) bool, False for cells of padding or (3DPPE, LiDAR depth) without a measurement.
        depths: (V, h, w, K) float32 the camera depth each point was lifted at.
        cell_pixels: (h, w, 2) the (u, v) pixel of each cell (the pixel the encoding lifts).
        cameras: the cameras the encoding saw (B = 1); feat_size: (h, w).
        description: what the points are, for a figure's title.
    """

    kind: str
    points: torch.Tensor
    valid: torch.Tensor
    depths: torch.Tensor
    cell_pixels: torch.Tensor
    cameras: Cameras
    feat_size: tuple[int, int]
    description: str

    def reproject(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(V, h, w, K, 2) pixels and (V, h, w, K) camera depths of the points in their own cameras."""
        views, height, width, count = self.points.shape[:4]
        pixels, depth = self.cameras.project(self.points.reshape(1, views, -1, 3))
        return pixels[0].view(views, height, width, count, 2), depth[0].view(views, height, width, count)

    def reprojection_error(self) -> float:
        """The largest distance in pixels between a valid point's projection and its cell's pixel (0 if none)."""
        pixels, _ = self.reproject()
        error = (pixels - self.cell_pixels[None, :, :, None]).norm(dim=-1)
        return float(error[self.valid].max()) if bool(self.valid.any()) else 0.0


def check_encoding(model: Any) -> None:
    """The model must be a PETRDetector with an encoding whose points this module knows."""
    if not isinstance(model, PETRDetector):
        raise TypeError(f'{type(model).__name__} is not a multi-view 3D detector: the 3D points of an encoding exist '
                        f'for PETRDetector configs (configs/petr/petr-r18_{{petr-lid,petr-ud,3dppe,nope}}'
                        f'_mv-scenes.py).')
    if not isinstance(model.encoding, SUPPORTED):
        raise TypeError(f'{type(model.encoding).__name__} is not one of the encodings whose points can be drawn '
                        f'({", ".join(kind.__name__ for kind in SUPPORTED)}).')


def memory_positions(model: PETRDetector, batch: Mapping[str, Any]) -> tuple[torch.Tensor, Positions]:
    """The backbone features (B·V, C, h, w) and the memory's positions, as ``PETRDetector.predict_sets`` makes them."""
    inputs, masks, samples = batch['inputs'], batch.get('masks'), batch['data_samples']
    model.check_inputs(inputs, masks)
    cameras = Cameras.from_batch(samples, inputs.device)
    cameras.check_images(inputs)
    features = model.backbone(inputs.flatten(0, 1))
    pos = model.memory_positions(inputs.shape[0], inputs.shape[1], features.shape[-2:], masks, cameras,
                                 model.depth_maps(samples, inputs.device))
    return features, pos


def denormalize(points: torch.Tensor, position_range: tuple[float, ...]) -> torch.Tensor:
    """Inverse of :func:`vispe.geometry.normalize_points`: [0, 1]³ of the range -> metres."""
    low = torch.tensor(position_range[:3], dtype=torch.float64)
    extent = torch.tensor(position_range[3:], dtype=torch.float64) - low
    return (points.double() * extent + low).float()


@torch.no_grad()
def encoding_points(model: PETRDetector, batch: Mapping[str, Any], bin_step: int = 1,
                    depth: DepthChoice = 'predicted') -> EncodingPoints:
    """The points the detector's encoding uses for sample 0 of ``batch``.

    Args:
        model: a PETRDetector (eval mode; only 3DPPE's predicted depth depends on its weights).
        batch: ``dict(inputs (1, V, 3, H, W), masks, data_samples)``; 3DPPE's 'gt' needs ``depth`` in the samples.
        bin_step: PETR: keep every ``bin_step``-th depth bin.
        depth: 3DPPE: 'predicted' (``PPE3D.points``, as the encoding computes them: the depth net, or its
            ``depth_source``) or 'gt' (each cell's LiDAR depth; cells without one are left out).
    """
    check_encoding(model)
    if bin_step < 1:
        raise ValueError(f'bin_step must be at least 1; got {bin_step}.')
    encoding = model.encoding
    features, pos = memory_positions(model, batch)
    views, (height, width) = pos.num_views, pos.grid_size
    image_size = pos.camera.cameras.image_size
    cell_valid = pos.valid_mask[0] if pos.valid_mask is not None else torch.ones(views, height, width,
                                                                                   dtype=torch.bool)
    if isinstance(encoding, PETR):
        bins = torch.arange(0, encoding.depth_num, bin_step)
        points = denormalize(encoding.frustum(pos)[0][..., bins, :], encoding.position_range)
        depths = encoding.depths.cpu()[bins].expand(views, height, width, -1)
        shown = '' if bin_step == 1 else f' (one in {bin_step})'
        return EncodingPoints('frustum', points, cell_valid[..., None].expand(-1, -1, -1, len(bins)), depths.clone(),
                              frustum_pixels((height, width), image_size, encoding.pixel), pos.camera.cameras,
                              (height, width), f'PETR frustum points at {len(bins)} of the {encoding.depth_num} '
                                               f'{encoding.depth_mode} depth bins of each cell{shown}')
    pixels = frustum_pixels((height, width), image_size, 'corner')
    if isinstance(encoding, PPE3D):
        if depth == 'gt':
            if not pos.has('depth'):
                raise ValueError('the LiDAR depth of 3DPPE\'s points needs the samples\' depth maps: load the data '
                                 'with MultiViewDetection(with_depth=True).')
            cell_depth = encoding.measured_depth(pos)
            points = depth_map_points(pos.camera.cameras, cell_depth)[0]
            valid = cell_valid & (cell_depth[0] > 0)
            what = f'3DPPE points at the LiDAR depth ({int(valid.sum())} of {valid.numel()} cells have one)'
        else:
            encoded = encoding.encode_features(features, pos)
            cell_depth = encoding.cell_depth(pos, encoded.extras['depth'])
            points = denormalize(encoding.points(pos, encoded.extras)[0], encoding.position_range)
            valid = cell_valid
            what = f'3DPPE points at the depth of its source {encoding.depth_source!r}'
        return EncodingPoints('depth', points[..., None, :], valid[..., None], cell_depth[0][..., None].float(),
                              pixels, pos.camera.cameras, (height, width), what)
    empty = torch.zeros(views, height, width, 0)
    return EncodingPoints('none', empty[..., None].expand(-1, -1, -1, 0, 3).clone(), empty.bool(), empty, pixels,
                          pos.camera.cameras, (height, width), f'{type(encoding).__name__}: no 3D points (its keys encode '
                                                        f'camera, row and column in 2D)')
