"""ImageNet-layout classification data (``root/<split>/<class>/<image>``) with timm's pipelines."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import torchvision
from timm.data import create_transform
from torch.utils.data import Dataset

from vispe.datasets.options import check_bool, check_choice, check_crop_scale, check_positive_int
from vispe.datasets.transforms import EVAL_MODES
from vispe.registry import DATASETS

# Resize filters timm's transforms take by name.
INTERPOLATIONS = ('nearest', 'bilinear', 'bicubic', 'box', 'hamming', 'lanczos')


@DATASETS.register_module()
class ImageFolderDataset(Dataset):
    """``root/<split>/<class>/<image>`` (ImageNet's layout) through torchvision's ``ImageFolder``,
    transformed by timm's ``create_transform``.

    Items are ``dict(inputs=(3, S, S) float tensor, label=int)``.

    Args:
        root: the data root (e.g. ``datasets/imagenet``).
        split: sub-folder ('train', 'val').
        image_size: S.
        train_augment: timm's training pipeline (random resized crop, flip, ``auto_augment``,
            random erasing); otherwise evaluation resize (by ``crop_pct``) and centre crop.
        auto_augment: timm policy string, e.g. 'rand-m15-n2' (RandAugment(2, 15)) or '3a' (DeiT III's
            3-Augment: one of solarize, grayscale, Gaussian blur per image; colour jitter stays on).
        color_jitter: colour-jitter strength (timm's default 0.4; DeiT III's 3-Augment uses 0.3).
        re_prob: random-erasing probability.
        crop_pct: evaluation crop fraction (1.0 resizes the whole image: the LookHere protocol).
        interpolation: resize interpolation.
        scale: area range of the training random resized crop, (low, high) in (0, 1].
        eval_mode: 'upsample' only (evaluation resizes the image).

    Options are checked before the folder is read (TypeError / ValueError naming the option and the fix).
    """

    def __init__(self, root: str | os.PathLike, split: str = 'train', image_size: int = 224,
                 train_augment: bool = False, auto_augment: str | None = None, color_jitter: float = 0.4,
                 re_prob: float = 0.0,
                 crop_pct: float = 1.0, interpolation: str = 'bicubic', scale: Sequence[float] = (0.08, 1.0),
                 eval_mode: str = 'upsample') -> None:
        check_positive_int('ImageFolderDataset', 'image_size', image_size)
        check_crop_scale('ImageFolderDataset', 'scale', scale)
        check_choice('ImageFolderDataset', 'eval_mode', eval_mode, EVAL_MODES)
        check_choice('ImageFolderDataset', 'interpolation', interpolation, INTERPOLATIONS)
        check_bool('ImageFolderDataset', 'train_augment', train_augment)
        if eval_mode != 'upsample':
            raise ValueError(f"ImageFolderDataset evaluates by resizing (eval_mode='upsample'); got {eval_mode!r}.")
        folder = Path(root) / split
        if not folder.is_dir():
            raise FileNotFoundError(f'Image folder {folder} not found: put the data in <root>/{split}/<class>/<image> '
                                    f'(see datasets/README.md) or set the dataset root in the config.')
        transform = create_transform(image_size, is_training=train_augment, auto_augment=auto_augment,
                                     color_jitter=color_jitter, re_prob=re_prob, crop_pct=crop_pct, interpolation=interpolation,
                                     scale=tuple(scale) if train_augment else None)
        self.folder = torchvision.datasets.ImageFolder(str(folder))
        self.transform = transform
        self.metainfo = dict(classes=self.folder.classes, split=split, image_size=image_size)

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, index: int) -> dict[str, Any]:
        image, label = self.folder[index]
        return dict(inputs=self.transform(image), label=label)
