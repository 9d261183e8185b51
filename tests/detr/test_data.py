"""The Fashion-MNIST detection converter, the COCO dataset, its transforms and the padding collate."""
from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch
from PIL import Image

from vispe.datasets import CocoDetection, detr_collate
from vispe.datasets.coco_detection import resized_shape
from vispe.datasets.fashion_mnist import CLASSES

from . import conftest


def test_converter_writes_coco_with_tight_boxes_on_real_items(fmnist_det) -> None:
    coco = json.loads((fmnist_det / 'annotations' / 'train.json').read_text())
    assert len(coco['images']) == 24 and [c['name'] for c in coco['categories']] == list(CLASSES)
    assert coco['info']['command'].startswith('vispe dataset fmnist-detection --out ')
    for annotation in coco['annotations'][:20]:
        image = coco['images'][annotation['image_id'] - 1]
        pixels = np.asarray(Image.open(fmnist_det / image['file_name']))
        x, y, w, h = annotation['bbox']
        assert 0 <= x and 0 <= y and x + w <= 64 and y + h <= 64 and w > 0 and h > 0
        inside = pixels[y:y + h, x:x + w]
        assert (inside[0] > 16).any() and (inside[-1] > 16).any() and (inside[:, 0] > 16).any()


def test_converter_is_seeded(fmnist_det, tmp_path) -> None:
    conftest.fmnist_detection.main(['--out', str(tmp_path), '--train', '24', '--minival', '8', '--val', '8',
                                    '--canvas', '64', '--min-side', '20', '--max-side', '32', '--seed', '0'])
    for split in ('train', 'minival', 'val'):
        ours = json.loads((tmp_path / 'annotations' / f'{split}.json').read_text())
        theirs = json.loads((fmnist_det / 'annotations' / f'{split}.json').read_text())
        assert ours['annotations'] == theirs['annotations']
    assert (tmp_path / 'train' / '000003.png').read_bytes() == (fmnist_det / 'train' / '000003.png').read_bytes()


def test_converter_takes_each_split_from_its_own_fashion_mnist_images(tmp_path, monkeypatch) -> None:
    sources = []
    read_split = conftest.fmnist_detection.read_split

    def recording(root, split):
        sources.append(split)
        return read_split(root, split)

    monkeypatch.setattr(conftest.fmnist_detection, 'read_split', recording)
    conftest.fmnist_detection.main(['--out', str(tmp_path), '--train', '2', '--minival', '3', '--val', '4'])
    assert sources == ['train-minus-minival', 'minival', 'test']
    counts = {split: len(json.loads((tmp_path / 'annotations' / f'{split}.json').read_text())['images'])
              for split in ('train', 'minival', 'val')}
    assert counts == {'train': 2, 'minival': 3, 'val': 4}


def test_detection_configs_choose_checkpoints_on_minival_and_report_on_val() -> None:
    from mmengine.config import Config

    cfg = Config.fromfile('vispe::detr/detr-r18_sine_fmnist-det.py')
    assert cfg.val_dataloader.dataset.ann_file.endswith('annotations/minival.json')
    assert cfg.val_evaluator.ann_file == cfg.val_dataloader.dataset.ann_file
    assert cfg.test_dataloader.dataset.ann_file.endswith('annotations/val.json')
    assert cfg.test_evaluator.ann_file == cfg.test_dataloader.dataset.ann_file


def test_resize_rule_is_detrs() -> None:
    assert resized_shape(480, 640, 800, 1333) == (800, 1066)
    assert resized_shape(300, 1000, 800, 1333) == (400, 1333)
    assert resized_shape(128, 128, 192, None) == (192, 192)


def test_items_boxes_flip_and_collate(fmnist_det) -> None:
    ann_file = str(fmnist_det / 'annotations' / 'val.json')
    dataset = CocoDetection(ann_file, str(fmnist_det), image_size=96, max_size=None)
    item = dataset[0]
    assert item['inputs'].shape == (3, 96, 96)
    sample = item['data_samples']
    coco = json.loads((fmnist_det / 'annotations' / 'val.json').read_text())
    x, y, w, h = next(a['bbox'] for a in coco['annotations'] if a['image_id'] == sample['image_id'])
    torch.testing.assert_close(sample['boxes'][0], torch.tensor([(x + w / 2) / 64, (y + h / 2) / 64, w / 64, h / 64]))
    assert sample['orig_size'] == (64, 64) and sample['size'] == (96, 96)

    flipping = CocoDetection(ann_file, str(fmnist_det), image_size=64, max_size=None, train_augment=True)
    flips = set()
    for seed in range(8):
        random.seed(seed)
        boxes = flipping[0]['data_samples']['boxes'][0]
        flips.add(round(boxes[0].item(), 5))
    assert flips == {round((x + w / 2) / 64, 5), round(1 - (x + w / 2) / 64, 5)}

    small = CocoDetection(ann_file, str(fmnist_det), image_size=48, max_size=None)
    batch = detr_collate([dataset[0], small[1]])
    assert batch['inputs'].shape == (2, 3, 96, 96) and batch['masks'].shape == (2, 96, 96)
    assert batch['masks'][1, :48, :48].all() and not batch['masks'][1, 48:].any() and batch['masks'][0].all()
    assert (batch['inputs'][1, :, 48:] == 0).all()


def test_missing_and_corrupt_annotations_name_the_file(tmp_path) -> None:
    with pytest.raises(FileNotFoundError, match='vispe dataset fmnist-detection'):
        CocoDetection(str(tmp_path / 'none.json'))
    corrupt = tmp_path / 'bad.json'
    corrupt.write_text('{"images": [')
    with pytest.raises(RuntimeError, match='bad.json'):
        CocoDetection(str(corrupt))
