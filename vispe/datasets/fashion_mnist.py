"""Fashion-MNIST from its original IDX files (Debian's ``dataset-fashion-mnist``), no download."""
from __future__ import annotations

import gzip
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from vispe.datasets.options import (check_bool, check_choice, check_crop_scale, check_non_negative_int,
                                    check_positive_int)
from vispe.datasets.transforms import EVAL_MODES, classification_transform
from vispe.registry import DATASETS

DEBIAN_ROOT = Path('/usr/share/datasets/fashion-mnist')
LOCAL_ROOT = Path('datasets') / 'fashion-mnist'  # under the working directory, as the configs' data roots
CLASSES = ('T-shirt/top', 'Trouser', 'Pullover', 'Dress', 'Coat', 'Sandal', 'Shirt', 'Sneaker', 'Bag', 'Ankle boot')
FILES = {'train': 'train', 'test': 't10k'}
# A held-out split of the training file, for choosing checkpoints and test-time options without the test set:
# 'minival' is MINIVAL_SIZE images of the training file (200 per class, seed 0), 'train-minus-minival' the rest.
MINIVAL_SIZE = 2000
SPLITS = ('train', 'test', 'minival', 'train-minus-minival')


def default_root() -> Path:
    """``$VISPE_FASHION_MNIST``, else ``datasets/fashion-mnist`` under the working directory (a checkout's root, or
    wherever an installed vispe runs), else Debian's path."""
    if os.environ.get('VISPE_FASHION_MNIST'):
        return Path(os.environ['VISPE_FASHION_MNIST'])
    return LOCAL_ROOT if (LOCAL_ROOT / 'train-labels-idx1-ubyte.gz').is_file() else DEBIAN_ROOT


def read_idx(root: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 28, 28) uint8, labels (N,) uint8) of a split, with errors that name the fix."""
    prefix = FILES[split]
    labels_path, images_path = root / f'{prefix}-labels-idx1-ubyte.gz', root / f'{prefix}-images-idx3-ubyte.gz'
    for path in (labels_path, images_path):
        if not path.is_file():
            raise FileNotFoundError(
                f'Fashion-MNIST file {path} not found. Install the data with `apt-get install dataset-fashion-mnist` '
                f'(it goes to {DEBIAN_ROOT}; `make setup` does this as root), or put the four IDX .gz files in '
                f'{LOCAL_ROOT.resolve()} or in $VISPE_FASHION_MNIST.')
    try:
        with gzip.open(labels_path) as handle:
            labels = np.frombuffer(handle.read(), np.uint8, offset=8)
        with gzip.open(images_path) as handle:
            images = np.frombuffer(handle.read(), np.uint8, offset=16)
    except (OSError, EOFError) as exc:
        raise RuntimeError(f'Fashion-MNIST file in {root} is corrupt or truncated: {exc}') from None
    if images.size != labels.size * 28 * 28:
        raise RuntimeError(f'{images_path} holds {images.size} bytes of pixels for {labels.size} labels: corrupt file.')
    return images.reshape(-1, 28, 28), labels


def read_split(root: Path, split: str) -> tuple[np.ndarray, np.ndarray]:
    """(images (N, 28, 28) uint8, labels (N,) uint8) of one of :data:`SPLITS`: 'train', 'test', or the held-out
    division of the training file ('minival', 'train-minus-minival'), the same images for every caller."""
    check_choice('read_split', 'split', split, SPLITS)
    images, labels = read_idx(root, 'test' if split == 'test' else 'train')
    if split in ('minival', 'train-minus-minival'):
        minival = np.zeros(len(labels), dtype=bool)
        minival[balanced_subset(labels, MINIVAL_SIZE, seed=0)] = True
        keep = np.flatnonzero(minival if split == 'minival' else ~minival)
        images, labels = images[keep], labels[keep]
    return images, labels


@DATASETS.register_module()
class FashionMNIST(Dataset):
    """Fashion-MNIST (Xiao et al., 2017): 60k train / 10k test grey 28×28 images, 10 classes.

    Items are ``dict(inputs=(1, S, S) float tensor, label=int)``; see
    :func:`~vispe.datasets.transforms.classification_transform` for the pipeline.

    Args:
        split: 'train' (60k), 'test' (10k), or a held-out division of the training file: 'minival' (2000
            images, 200 per class, fixed) and 'train-minus-minival' (the other 58000).
        image_size: S, the size the model sees.
        train_augment: random resized crop + flip (the scale augmentation of ViT recipes).
        crop_scale: area range of the random resized crop.
        eval_mode: how an evaluation image reaches S: 'upsample' (resized whole, as LookHere's pipeline resizes a
            square image at sizes other than 224: :mod:`vispe.evaluation`) or
            'canvas' (pasted at 28 px in the centre of an S×S canvas: same object scale, more patches).
        subset: keep this many images, the same count per class, chosen with ``subset_seed``.
        subset_seed: seed of the subset choice.
        root: folder of the IDX files (default :func:`default_root`).

    Options are checked before any file is read (TypeError / ValueError naming the option and the fix).
    """

    classes = CLASSES

    def __init__(self, split: str = 'train', image_size: int = 28, train_augment: bool = False,
                 crop_scale: Sequence[float] = (0.35, 1.0), eval_mode: str = 'upsample', subset: int | None = None,
                 subset_seed: int = 0, root: str | os.PathLike | None = None) -> None:
        check_choice('FashionMNIST', 'split', split, SPLITS)
        check_positive_int('FashionMNIST', 'image_size', image_size)
        check_crop_scale('FashionMNIST', 'crop_scale', crop_scale)
        check_choice('FashionMNIST', 'eval_mode', eval_mode, EVAL_MODES)
        check_bool('FashionMNIST', 'train_augment', train_augment)
        check_non_negative_int('FashionMNIST', 'subset_seed', subset_seed)
        if subset is not None:
            check_positive_int('FashionMNIST', 'subset', subset)
        self.transform = classification_transform(image_size, source_size=28, train_augment=train_augment,
                                                  crop_scale=crop_scale, eval_mode=eval_mode, mean=(0.2860,),
                                                  std=(0.3530,))
        self.root = Path(root) if root is not None else default_root()
        images, labels = read_split(self.root, split)
        if subset is not None:
            keep = balanced_subset(labels, subset, subset_seed)
            images, labels = images[keep], labels[keep]
        self.images = torch.from_numpy(images.copy())
        self.labels = torch.from_numpy(labels.astype(np.int64))
        self.split, self.image_size, self.subset, self.subset_seed = split, image_size, subset, subset_seed
        self.metainfo = dict(classes=CLASSES, split=split, subset=subset, subset_seed=subset_seed,
                             image_size=image_size, eval_mode=eval_mode)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return dict(inputs=self.transform(self.images[index].unsqueeze(0)), label=int(self.labels[index]))


def balanced_subset(labels: np.ndarray, size: int, seed: int) -> np.ndarray:
    """Indices of ``size`` items, as equal a count per class as possible, chosen with a seeded RNG."""
    classes = np.unique(labels)
    if size > len(labels):
        raise ValueError(f'subset={size} is larger than the split ({len(labels)} images): choose a subset of at most '
                         f'{len(labels)}, or subset=None for the whole split.')
    rng = np.random.default_rng(seed)
    per_class = [rng.permutation(np.flatnonzero(labels == c)) for c in classes]
    counts = [size // len(classes) + (1 if i < size % len(classes) else 0) for i in range(len(classes))]
    return np.sort(np.concatenate([idx[:count] for idx, count in zip(per_class, counts)]))
