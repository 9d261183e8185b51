"""Image pipelines for classification at a training size and at other evaluation sizes."""
from __future__ import annotations

from typing import Sequence

import torch
import torchvision.transforms.v2 as T

from vispe.datasets.options import check_choice, check_crop_scale, check_positive_int

EVAL_MODES = ('upsample', 'canvas')


def classification_transform(image_size: int, source_size: int, train_augment: bool = False,
                             crop_scale: Sequence[float] = (0.35, 1.0), eval_mode: str = 'upsample',
                             mean: Sequence[float] = (0.5,), std: Sequence[float] = (0.5,)) -> T.Compose:
    """uint8 (C, H, W) image -> normalised float (C, S, S) tensor, S = ``image_size``.

    ``source_size`` is the dataset's native size (what ``'canvas'`` pads from); images of any size
    are resized to S in training and ``'upsample'`` evaluation (a no-op at S).

    Training with ``train_augment``: random resized crop (area ``crop_scale``, aspect 3/4–4/3) and
    horizontal flip. Evaluation: ``'upsample'`` resizes the whole image to S (bilinear, antialiased: what
    LookHere's pipeline does to a square image at sizes other than 224, objects grow; :mod:`vispe.evaluation`);
    ``'canvas'`` keeps the source size and pads it with zeros
    to S×S around the centre (objects keep their scale, the grid gains patches).

    Raises:
        TypeError, ValueError: ``image_size`` not an int ≥ 1, ``crop_scale`` not (low, high) in (0, 1] with
            low ≤ high, an unknown ``eval_mode`` (the closest is named), a canvas smaller than the source.
    """
    check_positive_int('classification_transform', 'image_size', image_size)
    check_crop_scale('classification_transform', 'crop_scale', crop_scale)
    check_choice('classification_transform', 'eval_mode', eval_mode, EVAL_MODES)
    steps: list[torch.nn.Module] = []
    if train_augment:
        steps += [T.RandomResizedCrop(image_size, scale=tuple(crop_scale), antialias=True), T.RandomHorizontalFlip()]
    elif eval_mode == 'canvas':
        if image_size < source_size:
            raise ValueError(f"eval_mode='canvas' pads a {source_size} px image; image_size {image_size} is smaller. "
                             f"Use image_size ≥ {source_size}, or eval_mode='upsample' to shrink the image.")
        before = (image_size - source_size) // 2
        after = image_size - source_size - before
        steps.append(T.Pad([before, before, after, after], fill=0))
    else:
        steps.append(T.Resize((image_size, image_size), antialias=True))
    steps += [T.ToDtype(torch.float32, scale=True), T.Normalize(list(mean), list(std))]
    return T.Compose(steps)
