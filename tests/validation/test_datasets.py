"""Bad dataset options and COCO files fail before any data is read, naming the option or file and the fix;
valid options give the same items as before."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vispe.datasets import CocoDetection, FashionMNIST, ImageFolderDataset, classification_transform
from vispe.evaluation import CocoMetric

from .test_detection_targets import write_coco

MISSING = '/nonexistent/vispe/instances.json'


@pytest.mark.parametrize('options,error,match', [
    (dict(image_size=0), ValueError, r'CocoDetection image_size must be ≥ 1; got 0\. Set it to a positive number of '
                                     r'pixels'),
    (dict(image_size=-800), ValueError, r'image_size must be ≥ 1; got -800'),
    (dict(image_size=800.0), TypeError, r'image_size must be an int; got 800\.0 \(float\) \(use 800\)'),
    (dict(max_size=0), ValueError, r'max_size must be ≥ 1; got 0'),
    (dict(image_size=800, max_size=600), ValueError,
     r'image_size 800 exceeds max_size 600: max_size caps the longer side.*max_size=None'),
    (dict(image_size=600, max_size=700, train_scales=(480, 800)), ValueError, r'train_scales 800 exceeds max_size 700'),
    (dict(train_scales=()), ValueError, r'train_scales must be a non-empty sequence .*got \(\)'),
    (dict(train_scales=[]), ValueError, r'train_scales must be a non-empty sequence'),
    (dict(train_scales=(480, 0)), ValueError, r'train_scales value must be ≥ 1; got 0'),
    (dict(subset=0), ValueError, r'CocoDetection subset must be ≥ 1; got 0'),
    (dict(eval_mode='canvas'), ValueError, r"resizes whole images \(eval_mode='upsample'\); got 'canvas'"),
    (dict(eval_mode='upsampel'), ValueError, r"eval_mode must be one of \('upsample',\); got 'upsampel'\. Did you "
                                             r"mean 'upsample'\?"),
    (dict(std=(0.2, 0.0, 0.2)), ValueError, r'std must be > 0 for every channel.*got \(0\.2, 0\.0, 0\.2\)'),
    (dict(mean=(0.5,)), ValueError, r'mean must hold 3 numbers, one per channel; got \(0\.5,\)'),
])
def test_coco_detection_options_fail_before_reading_the_file(options, error, match) -> None:
    with pytest.raises(error, match=match):
        CocoDetection(MISSING, **options)


@pytest.mark.parametrize('key', ['images', 'annotations', 'categories'])
def test_coco_json_without_a_required_list_names_file_and_key(tmp_path, key) -> None:
    path = write_coco(tmp_path, drop_keys=(key,))
    unlabelled = r' \(an unlabelled set needs "annotations": \[\]\)' if key == 'annotations' else ''
    with pytest.raises(ValueError, match=rf"COCO annotation file .*instances\.json has no '{key}': a COCO json needs "
                                         rf"the top-level lists \['images', 'annotations', 'categories'\]{unlabelled}"):
        CocoDetection(str(path), str(tmp_path))
    with pytest.raises(ValueError, match=rf"has no '{key}'"):
        CocoMetric(ann_file=str(path)).coco


def test_unknown_category_id_names_file_annotation_image_and_category(tmp_path) -> None:
    annotations = [dict(id=1, image_id=1, category_id=3, bbox=[4, 6, 10, 12], area=1, iscrowd=0),
                   dict(id=5, image_id=2, category_id=99, bbox=[4, 6, 10, 12], area=1, iscrowd=0)]
    path = write_coco(tmp_path, annotations)
    with pytest.raises(ValueError, match=r'instances\.json: annotation id 5 of image id 2 has category_id 99, which no '
                                         r'entry of "categories" has \(ids \[3, 7\]\)\. Add the category'):
        CocoDetection(str(path), str(tmp_path))


def test_coco_json_that_is_not_an_object_is_corrupt(tmp_path) -> None:
    path = tmp_path / 'list.json'
    path.write_text('[1, 2]')
    with pytest.raises(RuntimeError, match=r'list\.json is corrupt: it holds a json list, not the object'):
        CocoDetection(str(path))
    truncated = tmp_path / 'cut.json'
    truncated.write_text('{"images": [')
    with pytest.raises(RuntimeError, match=r'cut\.json is corrupt or not json \(.*\)\. Write it again'):
        CocoDetection(str(truncated))


def test_valid_coco_items_are_unchanged(tmp_path) -> None:
    path = write_coco(tmp_path)
    data = CocoDetection(str(path), str(tmp_path), image_size=60, max_size=100, train_scales=[30])
    assert data.train_scales == (30,) and data.dropped_annotations == set()
    item = data[1]
    assert item['inputs'].shape == (3, 60, 80) and item['data_samples']['size'] == (60, 80)
    torch.testing.assert_close(item['data_samples']['boxes'], torch.tensor([[24 / 40, 14 / 30, 8 / 40, 8 / 30]]))
    assert item['data_samples']['labels'].tolist() == [1] and item['data_samples']['orig_size'] == (30, 40)
    assert CocoDetection(str(path), str(tmp_path), image_size=800).train_scales == (800,)


def write_idx(root: Path, count: int = 20) -> tuple[np.ndarray, np.ndarray]:
    """Fashion-MNIST-layout IDX files of ``count`` random images, two per class."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (count, 28, 28), dtype=np.uint8)
    labels = (np.arange(count) % 10).astype(np.uint8)
    with gzip.open(root / 'train-labels-idx1-ubyte.gz', 'wb') as handle:
        handle.write(b'\0' * 8 + labels.tobytes())
    with gzip.open(root / 'train-images-idx3-ubyte.gz', 'wb') as handle:
        handle.write(b'\0' * 16 + images.tobytes())
    return images, labels


@pytest.mark.parametrize('options,error,match', [
    (dict(image_size=0), ValueError, r'FashionMNIST image_size must be ≥ 1; got 0'),
    (dict(image_size=-28), ValueError, r'image_size must be ≥ 1; got -28'),
    (dict(image_size=28.0), TypeError, r'FashionMNIST image_size must be an int; got 28\.0 \(float\) \(use 28\)'),
    (dict(image_size=True), TypeError, r'image_size must be an int; got True \(bool\)'),
    (dict(image_size='28'), TypeError, r"image_size must be an int; got '28' \(str\)"),
    (dict(subset=0), ValueError, r'FashionMNIST subset must be ≥ 1; got 0\. Set it to a positive number of items'),
    (dict(subset=-5), ValueError, r'subset must be ≥ 1; got -5'),
    (dict(subset=2.5), TypeError, r'subset must be an int; got 2\.5'),
    (dict(crop_scale=(0.5,)), ValueError, r'crop_scale must be \(low, high\); got \(0\.5,\)\. Pass two fractions'),
    (dict(crop_scale=0.5), ValueError, r'crop_scale must be \(low, high\); got 0\.5'),
    (dict(crop_scale=(0, 1)), ValueError, r'crop_scale values must lie in \(0, 1\] .*got \(0, 1\)'),
    (dict(crop_scale=(0.5, 1.5)), ValueError, r'values must lie in \(0, 1\]'),
    (dict(crop_scale=(0.9, 0.5)), ValueError, r'crop_scale must have low ≤ high; got \(0\.9, 0\.5\)\. Swap them: '
                                              r'\(0\.5, 0\.9\)'),
    (dict(crop_scale=('a', 'b')), TypeError, r'crop_scale must hold two numbers'),
    (dict(eval_mode='canva'), ValueError, r"FashionMNIST eval_mode must be one of \('upsample', 'canvas'\); got "
                                          r"'canva'\. Did you mean 'canvas'\?"),
    (dict(eval_mode='canvas', image_size=20), ValueError, r"eval_mode='canvas' pads a 28 px image; image_size 20 is "
                                                          r"smaller\. Use image_size ≥ 28"),
    (dict(split='tset'), ValueError, r"split must be one of \('train', 'test', 'minival', 'train-minus-minival'\); "
                                  r"got 'tset'\. Did you mean 'test'"),
])
def test_fashion_mnist_options_fail_before_reading_files(tmp_path, options, error, match) -> None:
    with pytest.raises(error, match=match):
        FashionMNIST(root=tmp_path, **{'split': 'train', **options})


def test_fashion_mnist_valid_items_are_unchanged(tmp_path) -> None:
    images, labels = write_idx(tmp_path)
    plain = FashionMNIST('train', root=tmp_path)
    expected = (torch.from_numpy(images[3]).float() / 255 - 0.2860) / 0.3530
    torch.testing.assert_close(plain[3]['inputs'][0], expected)
    assert plain[3]['label'] == labels[3] and len(FashionMNIST('train', root=tmp_path, subset=10)) == 10
    augmented = FashionMNIST('train', root=tmp_path, image_size=42, train_augment=True, crop_scale=[0.5, 1])
    transform = classification_transform(42, 28, train_augment=True, crop_scale=(0.5, 1), mean=(0.2860,),
                                         std=(0.3530,))
    torch.manual_seed(5)
    ours = augmented[7]['inputs']
    torch.manual_seed(5)
    assert torch.equal(ours, transform(torch.from_numpy(images[7]).unsqueeze(0)))
    canvas = FashionMNIST('train', root=tmp_path, image_size=56, eval_mode='canvas')[0]['inputs']
    assert canvas.shape == (1, 56, 56) and torch.equal(canvas[0, 14:42, 14:42], plain[0]['inputs'][0])


@pytest.mark.parametrize('options,error,match', [
    (dict(image_size=0), ValueError, r'ImageFolderDataset image_size must be ≥ 1; got 0'),
    (dict(image_size=224.5), TypeError, r'ImageFolderDataset image_size must be an int; got 224\.5'),
    (dict(scale=(1.0, 0.08)), ValueError, r'ImageFolderDataset scale must have low ≤ high; got \(1\.0, 0\.08\)'),
    (dict(scale=(0.08, 1.0, 2.0)), ValueError, r'scale must be \(low, high\)'),
    (dict(eval_mode='upsampl'), ValueError, r"eval_mode must be one of \('upsample', 'canvas'\); got 'upsampl'\. "
                                            r"Did you mean 'upsample'\?"),
    (dict(eval_mode='canvas'), ValueError, r"evaluates by resizing \(eval_mode='upsample'\); got 'canvas'"),
])
def test_image_folder_options_fail_before_reading_the_folder(options, error, match) -> None:
    with pytest.raises(error, match=match):
        ImageFolderDataset('/nonexistent/vispe/imagenet', **options)


def test_image_folder_valid_items(tmp_path) -> None:
    for name in ('cat', 'dog'):
        (tmp_path / 'val' / name).mkdir(parents=True)
        Image.new('RGB', (40, 30), (200, 10, 10)).save(tmp_path / 'val' / name / 'a.png')
    data = ImageFolderDataset(tmp_path, split='val', image_size=32)
    item = data[1]
    assert item['inputs'].shape == (3, 32, 32) and item['label'] == 1 and data.metainfo['classes'] == ['cat', 'dog']


def test_classification_transform_options() -> None:
    with pytest.raises(ValueError, match=r'classification_transform image_size must be ≥ 1; got 0'):
        classification_transform(0, 28)
    with pytest.raises(ValueError, match="Did you mean 'upsample'"):
        classification_transform(28, 28, eval_mode='upsampling')
    whole = classification_transform(28, 28, train_augment=True, crop_scale=(1, 1))
    assert whole(torch.zeros(1, 28, 28, dtype=torch.uint8)).shape == (1, 28, 28)


@pytest.mark.parametrize('change, match', [
    (lambda coco: coco['images'].append(dict(coco['images'][0])), r'image ids \[1\] appear more than once'),
    (lambda coco: coco['images'][0].pop('file_name'), r"entry 0 of \"images\" has no \['file_name'\]"),
    (lambda coco: coco['annotations'][0].update(image_id=99), r'annotation id 1 belongs to image id 99, which '
                                                              r'"images" does not list'),
    (lambda coco: coco['categories'][0].pop('name'), r'needs an "id" and a "name"'),
], ids=['duplicate-image-id', 'no-file-name', 'unknown-image-id', 'category-without-name'])
def test_coco_json_inconsistencies_that_pycocotools_accepts(tmp_path, change, match) -> None:
    path = write_coco(tmp_path)
    coco = json.loads(path.read_text())
    change(coco)
    path.write_text(json.dumps(coco))
    with pytest.raises(ValueError, match=match):
        CocoDetection(str(path), str(tmp_path), image_size=30, max_size=None)


def test_flags_seeds_and_filters_are_checked() -> None:
    """Before: train_augment='no' switched augmentation on (a non-empty string is true), a negative seed
    failed inside numpy, a misspelt filter as a bare KeyError from timm."""
    with pytest.raises(TypeError, match=r"FashionMNIST train_augment must be True or False; got 'no'"):
        FashionMNIST(train_augment='no')
    with pytest.raises(ValueError, match='FashionMNIST subset_seed must be ≥ 0; got -1'):
        FashionMNIST(subset=10, subset_seed=-1)
    with pytest.raises(ValueError, match=r"interpolation must be one of .*; got 'bicubc'\. Did you mean 'bicubic'"):
        ImageFolderDataset('nowhere', interpolation='bicubc')


def test_a_corrupt_image_names_the_file_its_id_and_the_fix(tmp_path) -> None:
    path = write_coco(tmp_path)
    (tmp_path / '1.png').write_bytes(b'not a png')
    with pytest.raises(RuntimeError, match=r'1\.png of image id 1 is corrupt or unreadable .*replace the file'):
        CocoDetection(str(path), str(tmp_path), image_size=30, max_size=None)[0]
