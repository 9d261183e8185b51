"""Real coloured point clouds to initialise Gaussians from: a point-cloud file with colours, the real RGB-D pair of
scikit-image, or a rendered mv-scenes sample's lidar sweep coloured by its six cameras; and cameras that did not
make those points, to render the Gaussians from (:func:`held_out_cameras`)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from vispe.gaussians.cameras import PinholeCamera

if TYPE_CHECKING:
    from vispe.visualization.multiview_scene import MultiViewSample

__all__ = ['HELD_OUT_YAW_DEGREES', 'STEREO_MOTORCYCLE', 'coloured_points', 'held_out_cameras',
           'lidar_points_coloured']

STEREO_MOTORCYCLE = 'stereo-motorcycle'
HELD_OUT_YAW_DEGREES = 30.0


def _mv_sample(data_root: str | Path, index: int, split: str) -> MultiViewSample:
    import json

    from vispe.datasets.mv_scenes.meshes import CLASSES
    from vispe.visualization.multiview_scene import check_data_root, load_sample

    root = check_data_root(data_root, 'SOURCE')
    size = json.loads((root / 'mv-scenes.json').read_text())['config']['image_size']
    dataset = dict(type='MultiViewDetection', data_root=str(root), split=split,
                   classes=CLASSES, image_size=tuple(size))
    return load_sample(dataset, index)


def lidar_points_coloured(data_root: str | Path, index: int, split: str = 'test-rig1') -> tuple[np.ndarray, np.ndarray]:
    """The lidar points of mv-scenes sample ``index`` of ``split`` seen by at least one camera (scene frame), each
    coloured by the first camera (nuScenes order) whose image it falls in: xyz (P, 3), rgb (P, 3) in [0, 1].
    The images are read at their stored size (the converter's ``image_size``)."""
    sample = _mv_sample(data_root, index, split)
    images = sample.images()                                                   # (V, H, W, 3)
    pixels, depth = sample.cameras.project(torch.from_numpy(sample.lidar_points)[None])
    pixels, depth = pixels[0].numpy(), depth[0].numpy()                         # (V, N, 2), (V, N)
    height, width = images.shape[1:3]
    inside = (depth > 0.1) & (pixels[..., 0] >= 0) & (pixels[..., 0] <= width - 1) \
        & (pixels[..., 1] >= 0) & (pixels[..., 1] <= height - 1)
    seen = inside.any(0)
    view = inside.argmax(0)[seen]
    columns = np.rint(pixels[view, np.nonzero(seen)[0], 0]).astype(int)
    rows = np.rint(pixels[view, np.nonzero(seen)[0], 1]).astype(int)
    return sample.lidar_points[seen], images[view, rows, columns].astype(np.float32)


def coloured_points(source: str | Path, sample: int = 0, split: str = 'test-rig1') -> tuple[np.ndarray, np.ndarray]:
    """xyz (P, 3) and rgb (P, 3) in [0, 1] of ``source``: 'stereo-motorcycle' (scikit-image's RGB-D pair,
    back-projected in its left camera's frame), an mv-scenes root (sample ``sample`` of ``split``), or a .ply /
    .pcd / .npy point cloud with colours."""
    from vispe.datasets.stereo_motorcycle import motorcycle_rgbd, rgbd_points
    from vispe.geometry.point_cloud import read_points

    if str(source) == STEREO_MOTORCYCLE:
        return rgbd_points(*motorcycle_rgbd())
    path = Path(source)
    if path.is_dir():
        return lidar_points_coloured(path, sample, split)
    cloud = read_points(path)
    if cloud['colors'] is None:
        raise ValueError(f'{path} has no colours; 3DGS sets each Gaussian\'s colour from its point: give a cloud with '
                         f'red/green/blue (or rgb) values.')
    return cloud['xyz'].numpy(), cloud['colors'].numpy()


def held_out_cameras(source: str | Path, sample: int = 0, split: str = 'test-rig1') -> list[PinholeCamera]:
    """Cameras that did not make ``source``'s points (the frame :func:`coloured_points` returns them in), to render
    its Gaussians from: for 'stereo-motorcycle', the pair's real right camera (Middlebury's calibration: the centre
    193.001 mm to the right, the principal point ``doffs`` further right) and the left camera moved as far up and
    down; for an mv-scenes sample, each of its six cameras turned right by :data:`HELD_OUT_YAW_DEGREES` (between
    two cameras of the rig). A point file names no camera: a ValueError."""
    from vispe.datasets.stereo_motorcycle import MOTORCYCLE, motorcycle_rgbd

    if str(source) == STEREO_MOTORCYCLE:
        image, _, intrinsics = motorcycle_rgbd()
        left = PinholeCamera('left', np.eye(4), intrinsics.astype(np.float64), image.shape[1], image.shape[0])
        baseline = MOTORCYCLE['baseline_mm'] / 1000
        right = left.moved('right', (baseline, 0.0, 0.0))
        shifted = right.intrinsics.copy()
        shifted[0, 2] += MOTORCYCLE['doffs']
        return [replace(right, intrinsics=shifted), left.moved('up', (0.0, -baseline, 0.0)),
                left.moved('down', (0.0, baseline, 0.0))]
    path = Path(source)
    if not path.is_dir():
        raise ValueError(f'{source} is neither \'{STEREO_MOTORCYCLE}\' nor an mv-scenes folder: a point file names no '
                         f'camera; give gaussians-report the cameras to render from (3DGS\'s cameras.json)')
    cameras = _mv_sample(path, sample, split).cameras
    height, width = cameras.image_size
    views = []
    for view in range(cameras.num_views):
        camera = PinholeCamera(f'camera{view}', cameras.extrinsics[0, view].double().numpy(),
                               cameras.intrinsics[0, view].double().numpy(), width, height)
        views.append(camera.moved(f'camera{view}+{HELD_OUT_YAW_DEGREES:g}deg', yaw_degrees=HELD_OUT_YAW_DEGREES))
    return views
