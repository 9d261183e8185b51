"""Fashion-MNIST from the Debian IDX files: subsets, pipelines, errors."""
from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest
import torch

from vispe.datasets import FashionMNIST, classification_transform
from vispe.datasets.fashion_mnist import balanced_subset


def test_real_splits_and_balanced_subset() -> None:
    train = FashionMNIST('train', subset=1000, subset_seed=3)
    assert len(train) == 1000 and np.bincount(train.labels.numpy()).tolist() == [100] * 10
    again = FashionMNIST('train', subset=1000, subset_seed=3)
    assert torch.equal(train.images, again.images)
    item = train[0]
    assert item['inputs'].shape == (1, 28, 28) and item['inputs'].dtype == torch.float32
    assert len(FashionMNIST('test')) == 10000


def test_minival_is_held_out_of_the_training_file() -> None:
    train, minival, rest = FashionMNIST('train'), FashionMNIST('minival'), FashionMNIST('train-minus-minival')
    assert len(minival) == 2000 and len(rest) == 58000
    assert np.bincount(minival.labels.numpy()).tolist() == [200] * 10
    images = [{bytes(image) for image in dataset.images.flatten(1).numpy()} for dataset in (train, minival, rest)]
    assert images[1] | images[2] == images[0] and not images[1] & images[2]
    assert torch.equal(FashionMNIST('minival', subset=500).images, FashionMNIST('minival', subset=500).images)


def test_eval_sizes_upsample_and_canvas() -> None:
    image = torch.zeros(1, 28, 28, dtype=torch.uint8)
    image[0, 10:18, 10:18] = 255
    upsampled = classification_transform(56, 28, mean=(0.0,), std=(1.0,))(image)
    canvas = classification_transform(56, 28, eval_mode='canvas', mean=(0.0,), std=(1.0,))(image)
    assert upsampled.shape == canvas.shape == (1, 56, 56)
    assert (upsampled > 0.5).sum() > 200 and (canvas > 0.5).sum() == 64
    assert canvas[0, 14 + 10, 14 + 10] == 1.0
    with pytest.raises(ValueError, match='smaller'):
        classification_transform(20, 28, eval_mode='canvas')


def test_training_crops_vary() -> None:
    dataset = FashionMNIST('train', subset=10, train_augment=True)
    assert not torch.equal(dataset[0]['inputs'], dataset[0]['inputs'])


def test_missing_and_corrupt_files_name_the_fix(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match='apt-get install dataset-fashion-mnist'):
        FashionMNIST('train', root=tmp_path)
    for name in ('train-labels-idx1-ubyte.gz', 'train-images-idx3-ubyte.gz'):
        with gzip.open(tmp_path / name, 'wb') as handle:
            handle.write(b'\0' * 20)
    with pytest.raises(RuntimeError, match='corrupt'):
        FashionMNIST('train', root=tmp_path)


def test_balanced_subset_counts() -> None:
    labels = np.repeat(np.arange(3), 10)
    keep = balanced_subset(labels, 8, seed=0)
    assert np.bincount(labels[keep]).tolist() == [3, 3, 2]
    with pytest.raises(ValueError, match=r'subset=31 is larger than the split \(30 images\)'):
        balanced_subset(labels, 31, seed=0)


def test_default_root_is_the_working_directorys_copy_else_debians(tmp_path: Path, monkeypatch) -> None:
    """Installed or in a checkout, ``datasets/fashion-mnist`` is looked up where the command runs (as the configs'
    data roots), never inside site-packages."""
    from vispe.datasets.fashion_mnist import DEBIAN_ROOT, default_root
    monkeypatch.delenv('VISPE_FASHION_MNIST', raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_root() == DEBIAN_ROOT
    local = tmp_path / 'datasets' / 'fashion-mnist'
    local.mkdir(parents=True)
    (local / 'train-labels-idx1-ubyte.gz').write_bytes(b'')
    assert default_root().resolve() == local.resolve()
    monkeypatch.setenv('VISPE_FASHION_MNIST', str(tmp_path / 'elsewhere'))
    assert default_root() == tmp_path / 'elsewhere'
