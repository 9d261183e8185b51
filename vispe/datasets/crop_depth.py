"""Depth from image crops (``multiview_scenes.py --task crops``, :mod:`vispe.datasets.mv_scenes.crops`): square crops
of full camera images, resized to one size, with their dense depth, the crop box in the full image's pixels and
that image's intrinsics (what KPE encodes, Prakash et al. ECCV 2024).

Training draws ``crops_per_image`` random crops per image and epoch: a side uniform in ``side_range`` times the
image height, a position uniform over the image. Evaluation takes, from every image, the 9 crops of side
``eval_side`` (times the height) on a 3 × 3 grid that spans the image: the centre crop, 4 edge crops and 4 corner
crops, binned by that place (``OFFSET_BINS``): how far the crop lies from the principal point.

Crop boxes follow KPE's convention: (x0, y0, x1, y1) are the full image's pixel coordinates of the crop's first and
last pixel (inclusive), so a crop of side s has x1 − x0 = s − 1.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import Dataset

from vispe.datasets.npz_files import load_npz
from vispe.datasets.options import check_choice, check_positive_int
from vispe.datasets.point_scenes import torch_seeded_rng
from vispe.registry import DATASETS, FUNCTIONS

__all__ = ['CROP_SPLITS', 'OFFSET_BINS', 'CropDepth', 'crop_depth_collate', 'cut_crop', 'grid_crops']

CROP_SPLITS = ('train', 'val', 'test', 'test-wide', 'test-tele')
OFFSET_BINS = ('center', 'edge', 'corner')
KEYS = ('image', 'depth', 'intrinsics')


def grid_crops(height: int, width: int, side: int) -> list[tuple[int, int, str]]:
    """The 3 × 3 evaluation crops of an (H, W) image: (x0, y0, offset bin) of each square crop of ``side`` pixels,
    row-major; first, middle and last positions along each axis."""
    if side > min(height, width):
        raise ValueError(f'an evaluation crop of {side} px does not fit the {height}x{width} images; lower eval_side')
    xs, ys = (0, (width - side) // 2, width - side), (0, (height - side) // 2, height - side)
    crops = []
    for row, y0 in enumerate(ys):
        for col, x0 in enumerate(xs):
            off_axis = (row != 1) + (col != 1)
            crops.append((x0, y0, OFFSET_BINS[off_axis]))
    return crops


def cut_crop(image: np.ndarray, depth: np.ndarray, x0: int, y0: int, side: int,
             crop_size: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The square crop of ``side`` pixels at (x0, y0) of an (H, W, 3) uint8 image and its (H, W) depth, resized to
    ``crop_size``: (3, S, S) float RGB in [0, 1] (bilinear, antialiased), (S, S) depth (nearest: no depth is mixed
    across an edge or with unknown pixels) and the (4,) box (x0, y0, x1, y1) of its first and last pixel."""
    size = (crop_size, crop_size)
    rgb = torch.from_numpy(np.ascontiguousarray(image[y0:y0 + side, x0:x0 + side])).permute(2, 0, 1).float()[None]
    crop_depth = torch.from_numpy(np.ascontiguousarray(depth[y0:y0 + side, x0:x0 + side], np.float32))[None, None]
    if side != crop_size:
        rgb = F.interpolate(rgb, size=size, mode='bilinear', align_corners=False, antialias=True)
        crop_depth = F.interpolate(crop_depth, size=size, mode='nearest-exact')
    box = torch.tensor([x0, y0, x0 + side - 1, y0 + side - 1], dtype=torch.float32)
    return (rgb[0] / 255).clamp(0, 1), crop_depth[0, 0], box


@DATASETS.register_module()
class CropDepth(Dataset):
    """Crops of one split of a depth-from-crops set.

    Args:
        data_root: the set's folder (``datasets/mv-crops-depth``).
        split: 'train', 'val', 'test', 'test-wide' or 'test-tele'.
        crop_size: side in pixels every crop is resized to (the model's input).
        random_crops: random crops (training) or the 3 × 3 grid (evaluation); default: random for 'train'.
        crops_per_image: random crops per image and epoch.
        side_range: (min, max) random crop side as a fraction of the image height.
        eval_side: the grid crops' side as a fraction of the image height.

    Items: ``inputs`` = dict(image (3, S, S) float in [0, 1], crop_box (4,) float, intrinsics (3, 3) of the full
    image, image_size (2,) int64 (H, W) of the full image); ``data_samples`` = dict(depth (S, S) metres, 0 where
    unknown, offset_bin ('center' | 'edge' | 'corner', or 'random'), image_id).
    """

    def __init__(self, data_root: str | Path, split: str = 'train', crop_size: int = 32,
                 random_crops: bool | None = None, crops_per_image: int = 4,
                 side_range: tuple[float, float] = (1 / 3, 2 / 3), eval_side: float = 0.5) -> None:
        self.data_root = Path(data_root)
        self.split = check_choice('CropDepth', 'split', split, CROP_SPLITS)
        self.crop_size = check_positive_int('CropDepth', 'crop_size', crop_size)
        self.random_crops = split == 'train' if random_crops is None else bool(random_crops)
        self.crops_per_image = check_positive_int('CropDepth', 'crops_per_image', crops_per_image)
        low, high = (float(value) for value in side_range)
        if not 0 < low <= high <= 1:
            raise ValueError(f'CropDepth side_range must satisfy 0 < min <= max <= 1 (fractions of the image '
                             f'height); got {side_range}.')
        if not 0 < eval_side <= 1:
            raise ValueError(f'CropDepth eval_side must lie in (0, 1] (a fraction of the image height); got '
                             f'{eval_side}.')
        self.side_range, self.eval_side = (low, high), float(eval_side)
        folder = self.data_root / split
        if not folder.is_dir():
            raise FileNotFoundError(f'CropDepth: {folder} does not exist; write the set with '
                                    f'vispe dataset multiview-scenes --task crops --root '
                                    f'{self.data_root}')
        self.files = sorted(folder.glob('*.npz'))
        if not self.files:
            raise FileNotFoundError(f'CropDepth: {folder} holds no image (.npz); rewrite the set with '
                                    f'multiview_scenes.py --task crops --overwrite')
        self.crops_each = crops_per_image if self.random_crops else 9

    def __len__(self) -> int:
        return len(self.files) * self.crops_each

    def load(self, index: int) -> dict[str, np.ndarray]:
        """The arrays of image ``index``, checked (a truncated or foreign file names its path)."""
        path = self.files[index]
        image = load_npz(path, KEYS, 'a readable crops image', 'rewrite the set with multiview_scenes.py --task crops '
                                                               '--overwrite')
        height, width = image['depth'].shape
        if image['image'].shape != (height, width, 3) or image['intrinsics'].shape != (3, 3):
            raise ValueError(f'{path}: image {image["image"].shape}, depth {image["depth"].shape} and intrinsics '
                             f'{image["intrinsics"].shape} do not fit; rewrite the set with multiview_scenes.py '
                             f'--task crops --overwrite')
        return image

    def crop_of(self, index: int, height: int, width: int) -> tuple[int, int, int, str]:
        """(x0, y0, side, offset bin) of crop ``index`` of its image."""
        if not self.random_crops:
            side = max(1, round(self.eval_side * height))
            x0, y0, offset_bin = grid_crops(height, width, side)[index % 9]
            return x0, y0, side, offset_bin
        rng = torch_seeded_rng()
        low, high = (max(1, round(fraction * height)) for fraction in self.side_range)
        side = int(rng.integers(low, high + 1))
        return int(rng.integers(0, width - side + 1)), int(rng.integers(0, height - side + 1)), side, 'random'

    def __getitem__(self, index: int) -> dict[str, Any]:
        image_index = index // self.crops_each
        data = self.load(image_index)
        height, width = data['depth'].shape
        x0, y0, side, offset_bin = self.crop_of(index, height, width)
        rgb, depth, box = cut_crop(data['image'], data['depth'], x0, y0, side, self.crop_size)
        return dict(inputs=dict(image=rgb, crop_box=box,
                                intrinsics=torch.from_numpy(data['intrinsics']).float(),
                                image_size=torch.tensor([height, width])),
                    data_samples=dict(depth=depth, offset_bin=offset_bin,
                                      image_id=f'{self.split}/{self.files[image_index].stem}'))


@FUNCTIONS.register_module()
def crop_depth_collate(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack :class:`CropDepth` items: the inputs and the depth targets as (B, ...) tensors, ``data_samples`` a list
    of dicts (offset_bin, image_id). Use it as ``collate_fn=dict(type='vispe.crop_depth_collate')``."""
    inputs = {key: torch.stack([item['inputs'][key] for item in batch]) for key in batch[0]['inputs']}
    inputs['depth'] = torch.stack([item['data_samples']['depth'] for item in batch])
    samples = [dict(offset_bin=item['data_samples']['offset_bin'], image_id=item['data_samples']['image_id'])
               for item in batch]
    return dict(inputs=inputs, data_samples=samples)
