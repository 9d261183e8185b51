"""Drawing multi-camera scenes (PETR, Liu et al. ECCV 2022; 3DPPE, Shu et al. ICCV 2023): six camera panels,
3D boxes projected into them, feature-cell grids, heat maps over the cells, and bird's-eye-view panels.

Conventions are vispe's (docs/geometry.md): boxes (x, y, z, l, w, h, yaw) in the scene frame (x forward, y left,
z up), pixel centres at integers (an image of width W spans u in [-0.5, W - 0.5]). The bird's-eye view puts x
(forward) up and y (left) to the left. Cameras are :class:`vispe.geometry.Cameras` of one sample (B = 1).
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from vispe.geometry import Cameras, box_corners

# Panels of a six-camera rig as 2 rows x 3: the front cameras left to right, then the back ones (nuScenes names).
PANEL_CHANNELS = ('CAM_FRONT_LEFT', 'CAM_FRONT', 'CAM_FRONT_RIGHT', 'CAM_BACK_LEFT', 'CAM_BACK', 'CAM_BACK_RIGHT')
# The 12 edges of a box between the corners of vispe.geometry.box_corners (front face 0-3, rear face 4-7).
BOX_EDGES = ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4), (0, 4), (1, 5), (2, 6), (3, 7))
FRONT_EDGES = 4
# Points closer to the camera than this (metres of camera depth) are clipped off before projecting.
NEAR_PLANE = 0.1


def panel_views(channels: Sequence[str]) -> list[int]:
    """The view index shown in each panel of the 2 × 3 grid: :data:`PANEL_CHANNELS` when the rig has those six
    cameras, else the views in their order."""
    if sorted(channels) == sorted(PANEL_CHANNELS):
        return [list(channels).index(name) for name in PANEL_CHANNELS]
    return list(range(len(channels)))


def camera_colors(num_views: int) -> np.ndarray:
    """(V, 4) RGBA, one distinct colour per camera (matplotlib's tab10)."""
    from matplotlib import colormaps
    return colormaps['tab10'](np.arange(num_views) % 10)


def heat_overlay(image: np.ndarray, heat: torch.Tensor, vmax: float, alpha: float = 0.6) -> np.ndarray:
    """RGB image (H, W, 3) in [0, 1] with a cell heat map (h, w) upsampled to it (bilinear, as the cells tile the
    image) in 'inferno', scaled by ``vmax`` (shared by the panels compared, so their colours compare)."""
    from matplotlib import colormaps
    height, width = image.shape[:2]
    heat = F.interpolate(heat[None, None].float(), size=(height, width), mode='bilinear', align_corners=False)[0, 0]
    coloured = colormaps['inferno']((heat / max(vmax, 1e-12)).clamp(0, 1).numpy())[..., :3]
    return (1 - alpha) * image + alpha * coloured


def box_segments(cameras: Cameras, view: int, boxes: torch.Tensor, near: float = NEAR_PLANE) -> list[np.ndarray]:
    """Pixel segments of the edges of ``boxes`` (N, 7) in one view, each edge clipped to camera depth >= ``near``.

    Returns:
        per box an (E, 2, 2) array of (start, end) (u, v) pixels; E = 0 when the box is behind the camera. The
        first segments are the front face's (the heading side), when in front.
    """
    one = cameras.index_views(view)
    corners = box_corners(boxes.float().reshape(-1, 7))
    segments = []
    for box in corners:
        _, depth = one.project(box[None, None])
        depth = depth[0, 0]
        starts, ends = [], []
        for a, b in BOX_EDGES:
            da, db = float(depth[a]), float(depth[b])
            if da < near and db < near:
                continue
            start, end = box[a], box[b]
            if da < near:
                start = box[a] + (near - da) / (db - da) * (box[b] - box[a])
            elif db < near:
                end = box[b] + (near - db) / (da - db) * (box[a] - box[b])
            starts.append(start)
            ends.append(end)
        if not starts:
            segments.append(np.zeros((0, 2, 2), np.float32))
            continue
        pixels, _ = one.project(torch.stack(starts + ends)[None, None])
        pixels = pixels[0, 0].numpy()
        segments.append(np.stack([pixels[:len(starts)], pixels[len(starts):]], 1))
    return segments


def draw_segments(axis: Any, segments: np.ndarray, color: Any, linewidth: float = 1.0) -> None:
    """Draw (E, 2, 2) pixel segments."""
    from matplotlib.collections import LineCollection
    if len(segments):
        axis.add_collection(LineCollection(segments, colors=[color], linewidths=linewidth))


def draw_cell_grid(axis: Any, feat_size: Sequence[int], image_size: Sequence[int], color: str = 'white',
                   linewidth: float = 0.4) -> None:
    """The borders of the h × w feature cells of an (H, W) image: cell (i, j) covers the pixels from
    (j·W/w, i·H/h) (its top-left pixel, PETR's cell pixel) to the next cell's, borders half a pixel before."""
    (height, width), (img_h, img_w) = feat_size, image_size
    columns = [min(j * img_w / width, img_w) - 0.5 for j in range(width + 1)]
    rows = [min(i * img_h / height, img_h) - 0.5 for i in range(height + 1)]
    axis.vlines(columns, -0.5, img_h - 0.5, colors=color, linewidths=linewidth, alpha=0.6)
    axis.hlines(rows, -0.5, img_w - 0.5, colors=color, linewidths=linewidth, alpha=0.6)


def show_image(axis: Any, image: np.ndarray, title: str) -> None:
    """An image panel with pixel-centre coordinates and no ticks."""
    height, width = image.shape[:2]
    axis.imshow(image, extent=(-0.5, width - 0.5, height - 0.5, -0.5), interpolation='nearest')
    axis.set_xlim(-0.5, width - 0.5)
    axis.set_ylim(height - 0.5, -0.5)
    axis.set_title(title, fontsize=7)
    axis.set_xticks([])
    axis.set_yticks([])


def bev_footprint(box: torch.Tensor) -> np.ndarray:
    """(5, 2) closed (x, y) outline of a box's top face, front edge first."""
    corners = box_corners(box.float())[[0, 1, 5, 4, 0], :2]
    return corners.numpy()


def draw_bev_boxes(axis: Any, boxes: torch.Tensor, color: Any, labels: Sequence[str] | None = None,
                   linewidth: float = 1.0) -> None:
    """Boxes (N, 7) as footprints in a bird's-eye view (x up, y left), with a line from the centre to the front."""
    for index, box in enumerate(boxes.reshape(-1, 7)):
        outline = bev_footprint(box)
        axis.plot(outline[:, 1], outline[:, 0], color=color, linewidth=linewidth)
        front = outline[:2].mean(0)
        axis.plot([float(box[1]), front[1]], [float(box[0]), front[0]], color=color, linewidth=linewidth)
        if labels is not None:
            axis.text(float(box[1]), float(box[0]), labels[index], color=color, fontsize=5, ha='center', va='center')


def draw_bev_cameras(axis: Any, cameras: Cameras, colors: np.ndarray, reach: float = 6.0,
                     labels: Sequence[str] | None = None) -> None:
    """Each camera's centre and the two rays through its image's left and right edges (at mid height),
    ``reach`` metres of depth long, in the camera's colour."""
    height, width = cameras.image_size
    edge_pixels = torch.tensor([[-0.5, (height - 1) / 2], [width - 0.5, (height - 1) / 2]])
    for view in range(cameras.num_views):
        one = cameras.index_views(view)
        centre = one.cam2lidar[0, 0, :3, 3].numpy()
        ends = one.unproject(edge_pixels[None, None], torch.full((1, 1, 2), reach))[0, 0].numpy()
        for end in ends:
            axis.plot([centre[1], end[1]], [centre[0], end[0]], color=colors[view], linewidth=0.8)
        if labels is not None:
            tip = ends.mean(0)
            axis.text(tip[1], tip[0], labels[view], color=colors[view], fontsize=5, ha='center', va='center')


def setup_bev(axis: Any, extent: Sequence[float], title: str) -> None:
    """A bird's-eye-view axis over ``extent`` = (xmin, ymin, xmax, ymax) metres: x up, y to the left."""
    xmin, ymin, xmax, ymax = extent
    axis.set_xlim(ymax, ymin)
    axis.set_ylim(xmin, xmax)
    axis.set_aspect('equal')
    axis.set_xlabel('y (m, left)', fontsize=6)
    axis.set_ylabel('x (m, forward)', fontsize=6)
    axis.tick_params(labelsize=5)
    axis.set_title(title, fontsize=7)


def save_figure(figure: Any, out: Path, dpi: int = 120) -> None:
    """Write a matplotlib figure as PNG atomically (a temporary name in the same folder, then a rename)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    temporary = out.with_name(f'.{out.name}.{os.getpid()}.tmp')
    try:
        figure.savefig(temporary, dpi=dpi, format='png', pil_kwargs=dict(compress_level=1))
        os.replace(temporary, out)
    finally:
        temporary.unlink(missing_ok=True)
