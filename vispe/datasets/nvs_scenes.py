"""Novel-view synthesis scenes (``multiview_scenes.py --task nvs``, :mod:`vispe.datasets.mv_scenes.nvs`): input views
with their cameras, and target rays with their colours.

Cameras are made canonical as GTA's and SRT's loaders make them: every world -> camera extrinsic E is replaced by
E·E_0⁻¹, E_0 the first input view's, so the first input camera is the identity and nothing depends on where the
scene's world frame was put. Target rays are pixels (row, col) of the target views, view-major with the same
count per view (GTA's layout): ``rays_per_view`` random pixels of each target view in training, every pixel in
evaluation (``rays_per_view=None``).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from vispe.datasets.npz_files import load_npz
from vispe.datasets.options import check_choice, check_positive_int
from vispe.datasets.point_scenes import torch_seeded_rng
from vispe.registry import DATASETS, FUNCTIONS

__all__ = ['NVSScenes', 'canonical_extrinsics', 'nvs_collate']

KEYS = ('images', 'depth', 'objects', 'intrinsics', 'cam2world', 'num_inputs')


def canonical_extrinsics(cam2world: np.ndarray) -> np.ndarray:
    """(V, 4, 4) camera -> world poses -> (V, 4, 4) world -> camera extrinsics E_v·E_0⁻¹ (float64)."""
    extrinsics = np.linalg.inv(cam2world)
    return extrinsics @ cam2world[0]


@DATASETS.register_module()
class NVSScenes(Dataset):
    """The scenes of one split of an NVS set.

    Args:
        data_root: the set's folder (``datasets/mv-scenes-nvs``).
        split: 'train', 'val' or 'test'.
        rays_per_view: target pixels drawn per target view and item (training), or None for every pixel.

    Items: ``inputs`` = dict(images (Vi, 3, H, W) float in [0, 1], intrinsics (Vi, 3, 3), extrinsics (Vi, 4, 4)
    canonical world -> camera), ``data_samples`` = dict(target_intrinsics (Vt, 3, 3), target_extrinsics (Vt, 4, 4),
    rays (Vt·R, 2) int64 pixel (row, col) of each target ray, view-major, rgb (Vt·R, 3), objects (Vt·R,) bool,
    image_size (H, W), scene_id).
    """

    def __init__(self, data_root: str | Path, split: str = 'train', rays_per_view: int | None = None) -> None:
        self.data_root = Path(data_root)
        self.split = check_choice('NVSScenes', 'split', split, ('train', 'val', 'test'))
        self.rays_per_view = None if rays_per_view is None else check_positive_int('NVSScenes', 'rays_per_view',
                                                                                   rays_per_view)
        folder = self.data_root / split
        if not folder.is_dir():
            raise FileNotFoundError(f'NVSScenes: {folder} does not exist; write the set with '
                                    f'vispe dataset multiview-scenes --task nvs --root {self.data_root}')
        self.files = sorted(folder.glob('*.npz'))
        if not self.files:
            raise FileNotFoundError(f'NVSScenes: {folder} holds no scene (.npz); rewrite the set with '
                                    f'multiview_scenes.py --task nvs --overwrite')

    def __len__(self) -> int:
        return len(self.files)

    def load(self, index: int) -> dict[str, np.ndarray]:
        """The arrays of scene ``index``, checked (a truncated or foreign file names its path)."""
        path = self.files[index]
        scene = load_npz(path, KEYS, 'a readable NVS scene', 'rewrite the set with multiview_scenes.py --task nvs '
                                                             '--overwrite')
        views, height, width = scene['depth'].shape
        inputs = int(scene['num_inputs'])
        if scene['images'].shape != (views, height, width, 3) or not 0 < inputs < views:
            raise ValueError(f'{path}: images {scene["images"].shape} and {inputs} inputs do not fit {views} views of '
                             f'{height}x{width}; rewrite the set with multiview_scenes.py --task nvs --overwrite')
        return scene

    def target_pixels(self, views: int, height: int, width: int) -> np.ndarray:
        """(views·R,) flat pixel indices per target view, view-major: random without replacement, or all."""
        if self.rays_per_view is None:
            return np.tile(np.arange(height * width), views)
        if self.rays_per_view > height * width:
            raise ValueError(f'NVSScenes rays_per_view={self.rays_per_view} exceeds the {height}x{width} pixels of a '
                             f'target view; lower it.')
        rng = torch_seeded_rng()
        return np.concatenate([rng.choice(height * width, self.rays_per_view, replace=False) for _ in range(views)])

    def __getitem__(self, index: int) -> dict[str, Any]:
        scene = self.load(index)
        inputs = int(scene['num_inputs'])
        views, height, width = scene['depth'].shape
        extrinsics = torch.from_numpy(canonical_extrinsics(scene['cam2world'])).float()
        intrinsics = torch.from_numpy(scene['intrinsics']).float()
        images = torch.from_numpy(scene['images']).permute(0, 3, 1, 2).float() / 255
        targets = views - inputs
        flat = self.target_pixels(targets, height, width)
        view_of_ray = np.repeat(np.arange(inputs, views), len(flat) // targets)
        rays = torch.from_numpy(np.stack([flat // width, flat % width], axis=-1)).long()
        rgb = images[view_of_ray, :, rays[:, 0], rays[:, 1]]
        objects = torch.from_numpy(scene['objects'][view_of_ray, rays[:, 0].numpy(), rays[:, 1].numpy()])
        return dict(inputs=dict(images=images[:inputs], intrinsics=intrinsics[:inputs],
                                extrinsics=extrinsics[:inputs]),
                    data_samples=dict(target_intrinsics=intrinsics[inputs:], target_extrinsics=extrinsics[inputs:],
                                      rays=rays, rgb=rgb, objects=objects, image_size=(height, width),
                                      scene_id=f'{self.split}/{self.files[index].stem}'))


@FUNCTIONS.register_module()
def nvs_collate(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack :class:`NVSScenes` items: inputs and the per-ray targets as (B, ...) tensors, ``data_samples`` a list of
    dicts (scene_id, image_size). Use it as ``collate_fn=dict(type='vispe.nvs_collate')``."""
    stacked = ('target_intrinsics', 'target_extrinsics', 'rays', 'rgb', 'objects')
    shapes = sorted({tuple(item['data_samples']['rays'].shape) + tuple(item['inputs']['images'].shape)
                     for item in batch})
    if len(shapes) != 1:
        raise ValueError(f'nvs_collate needs the same views, image size and ray count in every scene; got {shapes}.')
    inputs = {key: torch.stack([item['inputs'][key] for item in batch]) for key in batch[0]['inputs']}
    inputs.update({key: torch.stack([item['data_samples'][key] for item in batch]) for key in stacked})
    samples = [dict(scene_id=item['data_samples']['scene_id'], image_size=item['data_samples']['image_size'])
               for item in batch]
    return dict(inputs=inputs, data_samples=samples)
