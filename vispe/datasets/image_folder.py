"""ImageNet-layout classification data (``root/<split>/<class>/<image>``) with timm's pipelines, or the LookHere
paper's evaluation pipeline (:class:`LookHereEval`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import torch
import torchvision
import torchvision.transforms.functional as F
from PIL import Image
from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD, create_transform
from torch.utils.data import Dataset

from vispe.datasets.options import check_bool, check_choice, check_crop_scale, check_positive_int
from vispe.datasets.transforms import EVAL_MODES
from vispe.registry import DATASETS

# Resize filters timm's transforms take by name.
INTERPOLATIONS = ('nearest', 'bilinear', 'bicubic', 'box', 'hamming', 'lanczos')
# How an evaluation image becomes S x S: timm's create_transform, or the LookHere paper's pipeline.
EVAL_PROTOCOLS = ('timm', 'lookhere')
# LookHere's rule: at 224 px the shorter side goes to 256 (DeiT's crop ratio 0.875), at any other size to S itself.
LOOKHERE_RESIZE_AT_224 = 256


class LookHereEval:
    """The evaluation pipeline of the LookHere paper (Fuller et al., NeurIPS 2024; GreenCUBIC/lookhere @ 641deab,
    ``data_prep.py``: ``ImageNetDataset`` with ``do_augment=False`` and ``ResizeSmall``), for a PIL image:

    1. to a float tensor in [0, 1] (torchvision's ``ToTensor``: uint8 / 255), before any resizing;
    2. the shorter side resized to R = 256 when S = 224, else R = S; the other side to ``int(side * (R / shorter))``
       (truncated, in float arithmetic: for some shorter sides, e.g. 49, 77 or 303, the shorter side itself comes
       out at R - 1), bilinear with antialiasing, on the float tensor (no rounding to uint8);
    3. a centre crop of S x S (torchvision's ``center_crop``: a side shorter than S, from the truncation of step 2, is
       padded with zeros first);
    4. normalised with ImageNet's mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225).

    Args:
        image_size: S.
    """

    def __init__(self, image_size: int) -> None:
        self.image_size = check_positive_int('LookHereEval', 'image_size', image_size)
        self.resize_to = LOOKHERE_RESIZE_AT_224 if image_size == 224 else image_size

    def __call__(self, image: Image.Image) -> torch.Tensor:
        pixels = F.pil_to_tensor(image).to(torch.float32).div(255)
        height, width = pixels.shape[-2:]
        ratio = float(self.resize_to) / min(height, width)
        pixels = F.resize(pixels, [int(height * ratio), int(width * ratio)],
                          interpolation=F.InterpolationMode.BILINEAR, antialias=True)
        pixels = F.center_crop(pixels, [self.image_size, self.image_size])
        return F.normalize(pixels, list(IMAGENET_DEFAULT_MEAN), list(IMAGENET_DEFAULT_STD))

    def __repr__(self) -> str:
        return f'LookHereEval(image_size={self.image_size}, shorter side -> {self.resize_to})'


@DATASETS.register_module()
class ImageFolderDataset(Dataset):
    """``root/<split>/<class>/<image>`` (ImageNet's layout) through torchvision's ``ImageFolder``,
    transformed by timm's ``create_transform`` (training, and evaluation with ``eval_protocol='timm'``) or by
    :class:`LookHereEval` (evaluation with ``eval_protocol='lookhere'``).

    Items are ``dict(inputs=(3, S, S) float tensor, label=int)``.

    Args:
        root: the data root (e.g. ``datasets/imagenet``).
        split: sub-folder ('train', 'val').
        image_size: S.
        train_augment: timm's training pipeline (random resized crop, flip, ``auto_augment``,
            random erasing); otherwise the evaluation pipeline of ``eval_protocol``.
        auto_augment: timm policy string, e.g. 'rand-m15-n2' (RandAugment(2, 15)) or '3a' (DeiT III's
            3-Augment: one of solarize, grayscale, Gaussian blur per image; colour jitter stays on).
        color_jitter: colour-jitter strength (timm's default 0.4; DeiT III's 3-Augment uses 0.3).
        re_prob: random-erasing probability.
        crop_pct: ``eval_protocol='timm'``: the shorter side is resized to ``floor(S / crop_pct)`` and the centre
            S x S cropped (1.0: the shorter side to S; the longer side is cropped either way).
        interpolation: ``eval_protocol='timm'`` and training: the resize filter.
        scale: area range of the training random resized crop, (low, high) in (0, 1].
        eval_mode: 'upsample' only (evaluation resizes the image).
        eval_protocol: 'timm' (above) or 'lookhere': the LookHere paper's evaluation pipeline
            (:class:`LookHereEval`: shorter side to 256 at 224 px and to S at other sizes, bilinear antialiased on
            float pixels, centre crop, ImageNet normalisation); ``crop_pct`` and ``interpolation`` must then be left
            at their defaults.

    Options are checked before the folder is read (TypeError / ValueError naming the option and the fix).
    """

    def __init__(self, root: str | os.PathLike, split: str = 'train', image_size: int = 224,
                 train_augment: bool = False, auto_augment: str | None = None, color_jitter: float = 0.4,
                 re_prob: float = 0.0,
                 crop_pct: float = 1.0, interpolation: str = 'bicubic', scale: Sequence[float] = (0.08, 1.0),
                 eval_mode: str = 'upsample', eval_protocol: str = 'timm') -> None:
        check_positive_int('ImageFolderDataset', 'image_size', image_size)
        check_crop_scale('ImageFolderDataset', 'scale', scale)
        check_choice('ImageFolderDataset', 'eval_mode', eval_mode, EVAL_MODES)
        check_choice('ImageFolderDataset', 'interpolation', interpolation, INTERPOLATIONS)
        check_choice('ImageFolderDataset', 'eval_protocol', eval_protocol, EVAL_PROTOCOLS)
        check_bool('ImageFolderDataset', 'train_augment', train_augment)
        if eval_mode != 'upsample':
            raise ValueError(f"ImageFolderDataset evaluates by resizing (eval_mode='upsample'); got {eval_mode!r}.")
        if eval_protocol == 'lookhere' and (crop_pct != 1.0 or interpolation != 'bicubic'):
            raise ValueError(f"ImageFolderDataset eval_protocol='lookhere' fixes its own crop (shorter side to 256 at "
                             f"224 px, to S otherwise) and filter (bilinear); got crop_pct={crop_pct!r}, "
                             f"interpolation={interpolation!r}. Leave them out, or use eval_protocol='timm'.")
        folder = Path(root) / split
        if not folder.is_dir():
            raise FileNotFoundError(f'Image folder {folder} not found: put the data in <root>/{split}/<class>/<image> '
                                    f'(see datasets/README.md) or set the dataset root in the config.')
        if eval_protocol == 'lookhere' and not train_augment:
            transform: Any = LookHereEval(image_size)
        else:
            transform = create_transform(image_size, is_training=train_augment, auto_augment=auto_augment,
                                         color_jitter=color_jitter, re_prob=re_prob, crop_pct=crop_pct,
                                         interpolation=interpolation, scale=tuple(scale) if train_augment else None)
        self.folder = torchvision.datasets.ImageFolder(str(folder))
        self.transform = transform
        self.metainfo = dict(classes=self.folder.classes, split=split, image_size=image_size)

    def __len__(self) -> int:
        return len(self.folder)

    def __getitem__(self, index: int) -> dict[str, Any]:
        image, label = self.folder[index]
        return dict(inputs=self.transform(image), label=label)
