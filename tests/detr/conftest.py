"""A small Fashion-MNIST detection set written by the converter once per session, and config overrides
that point the detection configs at it."""
from __future__ import annotations

from pathlib import Path

import pytest

from vispe.cli.dataset_converters import fmnist_detection


@pytest.fixture(scope='session')
def fmnist_det(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('fmnist-det')
    fmnist_detection.main(['--out', str(root), '--train', '24', '--minival', '8', '--val', '8', '--canvas', '64',
                           '--min-side', '20', '--max-side', '32', '--seed', '0'])
    return root


def data_overrides(root: Path, image_size: int = 64) -> dict[str, object]:
    """--cfg-options that train and evaluate a detection config on ``root`` at ``image_size``."""
    train, minival, val = (str(root / 'annotations' / f'{split}.json') for split in ('train', 'minival', 'val'))
    overrides: dict[str, object] = {'val_evaluator.ann_file': minival, 'test_evaluator.ann_file': val,
                                    'train_dataloader.dataset.train_scales': (image_size,),
                                    'model.image_size': image_size}
    for loader, ann_file in (('train', train), ('val', minival), ('test', val)):
        overrides[f'{loader}_dataloader.dataset.ann_file'] = ann_file
        overrides[f'{loader}_dataloader.dataset.data_root'] = str(root)
        overrides[f'{loader}_dataloader.dataset.image_size'] = image_size
    return overrides
