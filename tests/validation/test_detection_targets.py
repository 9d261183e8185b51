"""Bad detection targets fail clearly: at the dataset (COCO boxes, naming file, image and annotation) and
at the loss (labels and boxes from any dataset, naming the image and the annotation index)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from PIL import Image

from vispe.datasets import CocoDetection
from vispe.models.detr import HungarianMatcher, SetCriterion
from vispe.models.detr import criterion as criterion_module
from vispe.registry import MODELS


def write_coco(root: Path, annotations: list[dict] | None = None, images: list[dict] | None = None,
               categories: list[dict] | None = None, drop_keys: tuple[str, ...] = ()) -> Path:
    """Two 40x30 RGB images (``1.png``, ``2.png``) and a COCO json in ``root``; returns the json's path."""
    for index in (1, 2):
        Image.new('RGB', (40, 30), (index * 80, 20, 20)).save(root / f'{index}.png')
    coco = dict(
        images=images if images is not None else [dict(id=i, file_name=f'{i}.png', width=40, height=30)
                                                  for i in (1, 2)],
        annotations=annotations if annotations is not None else [
            dict(id=1, image_id=1, category_id=3, bbox=[4, 6, 10, 12], area=120, iscrowd=0),
            dict(id=2, image_id=2, category_id=7, bbox=[20, 10, 8, 8], area=64, iscrowd=0)],
        categories=categories if categories is not None else [dict(id=3, name='a'), dict(id=7, name='b')])
    for key in drop_keys:
        del coco[key]
    path = root / 'instances.json'
    path.write_text(json.dumps(coco))
    return path


def annotation(ann_id: int, bbox: list, image_id: int = 1, **extra) -> dict:
    return dict(id=ann_id, image_id=image_id, category_id=3, bbox=bbox, area=1, **{'iscrowd': 0, **extra})


def dataset(root: Path, annotations: list[dict], **kwargs) -> CocoDetection:
    return CocoDetection(str(write_coco(root, annotations)), str(root), image_size=30, max_size=None, **kwargs)


@pytest.mark.parametrize('bbox,problem', [
    ([float('nan'), 6, 10, 12], r'is not finite \(NaN or inf\)'),
    ([4, 6, float('inf'), 12], r'is not finite'),
    ([4, 6, 0, 12], r'has width or height ≤ 0'),
    ([4, 6, 10, -3], r'has width or height ≤ 0'),
    ([40, 6, 10, 12], r'lies entirely outside the image \(width 40, height 30\)'),
    ([-20, 6, 10, 12], r'lies entirely outside the image'),
    ([4, 31, 10, 12], r'lies entirely outside the image'),
])
def test_invalid_boxes_name_file_image_annotation_and_fix(tmp_path, bbox, problem) -> None:
    annotations = [annotation(1, [4, 6, 10, 12]), annotation(9, bbox, image_id=2)]
    with pytest.raises(ValueError, match=r"instances\.json: annotation id 9 of image id 2 \(2\.png\) has bbox "
                                         rf".*\(\[x, y, w, h\] in pixels\), which {problem}.*\. Fix the annotation, or "
                                         r"build the dataset with invalid_boxes='drop' to skip such boxes as DETR"):
        dataset(tmp_path, annotations)


def test_the_error_counts_all_invalid_boxes_and_is_raised_at_load(tmp_path) -> None:
    annotations = [annotation(1, [4, 6, 0, 12]), annotation(2, [4, 6, 10, 12]), annotation(3, [99, 6, 10, 12])]
    with pytest.raises(ValueError, match=r'annotation id 1 .*\(2 annotations have invalid boxes\)'):
        dataset(tmp_path, annotations)


def test_drop_skips_invalid_boxes_as_detr_does(tmp_path) -> None:
    annotations = [annotation(1, [4, 6, 0, 12]), annotation(2, [4, 6, 10, 12]), annotation(3, [99, 6, 10, 12]),
                   annotation(4, [float('nan'), 0, 1, 1], image_id=2), annotation(5, [20, 10, 8, 8], image_id=2)]
    data = dataset(tmp_path, annotations, invalid_boxes='drop')
    assert data.dropped_annotations == {1, 3, 4}
    first, second = data[0]['data_samples'], data[1]['data_samples']
    torch.testing.assert_close(first['boxes'], torch.tensor([[9 / 40, 12 / 30, 10 / 40, 12 / 30]]))
    torch.testing.assert_close(second['boxes'], torch.tensor([[24 / 40, 14 / 30, 8 / 40, 8 / 30]]))
    assert first['labels'].tolist() == [0] and second['labels'].tolist() == [0]


def test_partly_outside_boxes_are_clipped_and_crowds_ignored(tmp_path) -> None:
    annotations = [annotation(1, [-10, 20, 30, 20]), annotation(2, [float('nan'), 0, 0, 0], iscrowd=1)]
    boxes = dataset(tmp_path, annotations)[0]['data_samples']['boxes']
    # clipped to x 0..20, y 20..30 of the 40x30 image
    torch.testing.assert_close(boxes, torch.tensor([[10 / 40, 25 / 30, 20 / 40, 10 / 30]]))


def test_boxes_of_images_without_json_size_are_checked_when_loaded(tmp_path) -> None:
    images = [dict(id=1, file_name='1.png'), dict(id=2, file_name='2.png', width=40, height=30)]
    path = write_coco(tmp_path, [annotation(1, [50, 6, 10, 12]), annotation(2, [4, 6, 10, 12])], images=images)
    data = CocoDetection(str(path), str(tmp_path), image_size=30, max_size=None)
    with pytest.raises(ValueError, match=r'annotation id 1 of image id 1 \(1\.png\).*width 40, height 30.*'
                                         r'checked against the decoded image'):
        data[0]
    dropping = CocoDetection(str(path), str(tmp_path), image_size=30, max_size=None, invalid_boxes='drop')
    assert dropping.dropped_annotations == set()
    torch.testing.assert_close(dropping[0]['data_samples']['boxes'],
                               torch.tensor([[9 / 40, 12 / 30, 10 / 40, 12 / 30]]))


def test_malformed_bbox_and_policy(tmp_path) -> None:
    with pytest.raises(ValueError, match=r'annotation id 1 of image id 1 has bbox \[4, 6, 10\]; a bbox is 4 numbers'):
        dataset(tmp_path, [annotation(1, [4, 6, 10]), annotation(2, [4, 6, 10])])
    with pytest.raises(ValueError, match=r"invalid_boxes must be one of \('raise', 'drop'\); got 'dorp'\. Did you "
                                         r"mean 'drop'\?"):
        dataset(tmp_path, [annotation(1, [4, 6, 10, 12])], invalid_boxes='dorp')


def criterion(num_classes: int = 3) -> SetCriterion:
    return SetCriterion(num_classes, HungarianMatcher())


def predictions(batch: int = 2, layers: int = 2, queries: int = 4, classes: int = 3) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    return (torch.randn(layers, batch, queries, classes + 1, generator=generator),
            torch.rand(layers, batch, queries, 4, generator=generator) * 0.3 + 0.2)


def targets(**changes) -> list[dict]:
    good = [dict(labels=torch.tensor([0, 2]), boxes=torch.tensor([[0.5, 0.5, 0.2, 0.3], [0.2, 0.3, 0.1, 0.1]]),
                 image_id=42),
            dict(labels=torch.tensor([1]), boxes=torch.tensor([[0.5, 0.5, 1.0, 1.0]]))]
    for key, value in changes.items():
        index, name = key.split('_', 1)
        if value is None:
            del good[int(index[1:])][name]
        else:
            good[int(index[1:])][name] = value
    return good


@pytest.mark.parametrize('changes,error,match', [
    (dict(i0_labels=torch.tensor([0, 3])), ValueError,
     r'Label 3 of annotation 1 of image 0 of the batch \(image_id 42\) is outside \[0, 3\) \(K is the no-object '
     r'class\): .*num_classes=3.*len\(dataset\.metainfo\["classes"\]\)'),
    (dict(i1_labels=torch.tensor([-1])), ValueError, r'Label -1 of annotation 0 of image 1 of the batch is outside'),
    (dict(i0_labels=torch.tensor([0.0, 1.0])), TypeError, r'labels of image 0 .* are torch\.float32.*labels\.long\(\)'),
    (dict(i0_labels=torch.tensor([0, 1], dtype=torch.uint8)), TypeError, r'torch\.uint8'),
    (dict(i1_boxes=torch.tensor([[5, 5, 10, 10]])), TypeError, r'boxes of image 1 .* torch\.int64.*\(W, H, W, H\)'),
    (dict(i1_boxes=torch.tensor([[0.5, 0.5, 0.2]])), ValueError, r'boxes of image 1 .* \(n, 4\); got \(1, 3\)'),
    (dict(i1_labels=torch.tensor([1, 1])), ValueError, r'image 1 of the batch has 2 labels but 1 boxes'),
    (dict(i1_labels=torch.tensor([[1]])), ValueError, r'labels of image 1 .* \(n,\); got \(1, 1\)'),
    (dict(i1_boxes=None), ValueError, r"image 1 of the batch has no 'boxes'"),
    (dict(i0_labels=[0, 2]), TypeError, r'labels of image 0 .* torch\.Tensor; got list'),
    (dict(i0_boxes=torch.tensor([[0.5, 0.5, 0.2, 0.3], [0.2, float('nan'), 0.1, 0.1]])), ValueError,
     r'Box \[0\.2, nan, 0\.1, 0\.1\] of annotation 1 of image 0 of the batch \(image_id 42\) is not finite'),
    (dict(i1_boxes=torch.tensor([[0.5, 0.5, 0.0, 0.1]])), ValueError,
     r'annotation 0 of image 1 of the batch has width or height ≤ 0.*box_convert\(boxes, "xyxy", "cxcywh"\)'),
    (dict(i1_boxes=torch.tensor([[0.6, 0.6, -0.2, 0.2]])), ValueError, r'width or height ≤ 0'),
    (dict(i1_boxes=torch.tensor([[20.0, 15.0, 10.0, 10.0]])), ValueError,
     r'Box \[20\.0, 15\.0, 10\.0, 10\.0\] of annotation 0 of image 1 .* outside the image \[0, 1\].*\(W, H, W, H\)'),
    (dict(i1_boxes=torch.tensor([[0.9, 0.5, 0.3, 0.2]])), ValueError, r'outside the image'),
])
def test_loss_targets_name_image_annotation_and_fix(changes, error, match) -> None:
    logits, boxes = predictions()
    with pytest.raises(error, match=match):
        criterion()(logits, boxes, targets(**changes))


def test_loss_counts_bad_annotations_and_checks_the_batch_size() -> None:
    logits, boxes = predictions()
    bad = targets(i0_labels=torch.tensor([5, 7]), i1_labels=torch.tensor([3]))
    with pytest.raises(ValueError, match=r'Label 5 of annotation 0 .*\(3 bad annotations in this batch\)'):
        criterion()(logits, boxes, bad)
    with pytest.raises(ValueError, match=r'1 targets for a batch of 2 images'):
        criterion()(logits, boxes, targets()[:1])


def test_valid_targets_train_and_are_checked_once_per_batch(monkeypatch) -> None:
    calls = []
    real = criterion_module.check_targets
    monkeypatch.setattr(criterion_module, 'check_targets', lambda *a, **k: calls.append(1) or real(*a, **k))
    logits, boxes = predictions(layers=3)
    edge = targets(i1_boxes=torch.tensor([[0.5, 0.5, 1.0005, 1.0]]))  # within the rounding tolerance
    losses = criterion()(logits, boxes, edge)
    assert calls == [1] and all(torch.isfinite(v) for v in losses.values()) and 'd1.loss_giou' in losses
    empty = [dict(labels=torch.zeros(0, dtype=torch.int64), boxes=torch.zeros(0, 4)) for _ in range(2)]
    assert torch.isfinite(criterion()(logits, boxes, empty)['loss_ce'])


def test_detr_loss_names_the_image_id_from_data_samples() -> None:
    torch.manual_seed(0)
    model = MODELS.build(dict(
        type='DETR', backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-3), num_classes=2,
        num_queries=4, embed_dim=32, image_size=32, encoder=dict(depth=1, num_heads=4, mlp_dim=64, dropout=0.0),
        decoder=dict(depth=1, num_heads=4, mlp_dim=64, dropout=0.0)))
    samples = [dict(image_id=7, labels=torch.tensor([0]), boxes=torch.tensor([[0.5, 0.5, 0.2, 0.2]])),
               dict(image_id=8, labels=torch.tensor([2]), boxes=torch.tensor([[0.5, 0.5, 0.2, 0.2]]))]
    with pytest.raises(ValueError, match=r'Label 2 of annotation 0 of image 1 of the batch \(image_id 8\) is outside '
                                         r'\[0, 2\)'):
        model(torch.randn(2, 3, 32, 32), data_samples=samples, mode='loss')
    with pytest.raises(TypeError, match=r'data_samples\[0\] must be a dict'):
        model(torch.randn(2, 3, 32, 32), data_samples=[1, 2], mode='loss')
    samples[1]['labels'] = torch.tensor([1])
    losses = model(torch.randn(2, 3, 32, 32), data_samples=samples, mode='loss')
    assert all(torch.isfinite(v) for v in losses.values())
