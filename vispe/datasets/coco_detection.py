"""COCO-format detection data for DETR: images, boxes and labels, resized keeping the aspect ratio."""
from __future__ import annotations

import contextlib
import io
import json
import random
from pathlib import Path
from typing import Any, Sequence

import torch
import torchvision.transforms.v2.functional as TF
from PIL import Image
from torch.utils.data import Dataset
from torchvision.ops import box_convert

from vispe.datasets.coco_checks import (BOX_OK, box_problems, check_coco_json, coco_boxes, describe_box_problem,
                                        image_size_of)
from vispe.datasets.options import check_choice, check_normalisation, check_positive_int
from vispe.registry import DATASETS, FUNCTIONS

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
INVALID_BOX_POLICIES = ('raise', 'drop')


def load_coco(ann_file: str | Path) -> Any:
    """A pycocotools ``COCO`` index of ``ann_file``, with errors that name the file and the fix: a missing
    file, corrupt json, a missing ``images``/``annotations``/``categories`` list or an unknown ``category_id``
    (:func:`~vispe.datasets.coco_checks.check_coco_json`)."""
    from pycocotools.coco import COCO
    path = Path(ann_file)
    if not path.is_file():
        raise FileNotFoundError(f'COCO annotation file {path} not found. For the Fashion-MNIST detection set run '
                                f'`vispe dataset fmnist-detection`; for COCO see datasets/README.md.')
    try:
        dataset = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RuntimeError(f'COCO annotation file {path} is corrupt or not json ({exc}). Write it again, or download '
                           f'it again (see datasets/README.md).') from None
    if not isinstance(dataset, dict):
        raise RuntimeError(f'COCO annotation file {path} is corrupt: it holds a json {type(dataset).__name__}, not '
                           f'the object with "images", "annotations" and "categories" that COCO json is.')
    check_coco_json(dataset, path)
    coco = COCO()
    coco.dataset = dataset
    with contextlib.redirect_stdout(io.StringIO()):
        coco.createIndex()
    return coco


def resized_shape(height: int, width: int, size: int, max_size: int | None = None) -> tuple[int, int]:
    """DETR's rule: the shorter side becomes ``size``, unless the longer side would exceed ``max_size``."""
    if max_size is not None:
        short, long = min(height, width), max(height, width)
        if long / short * size > max_size:
            size = int(round(max_size * short / long))
    if (width <= height and width == size) or (height <= width and height == size):
        return height, width
    if width < height:
        return int(size * height / width), size
    return size, int(size * width / height)


def detection_image(image: torch.Tensor, size: int, max_size: int | None = None,
                    mean: Sequence[float] = IMAGENET_MEAN, std: Sequence[float] = IMAGENET_STD) -> torch.Tensor:
    """uint8 (3, H, W) -> float (3, h, w): resized by DETR's rule (:func:`resized_shape`), normalised."""
    height, width = resized_shape(image.shape[-2], image.shape[-1], size, max_size)
    image = TF.resize(image, [height, width], antialias=True)
    return TF.normalize(TF.to_dtype(image, torch.float32, scale=True), list(mean), list(std))


@DATASETS.register_module()
class CocoDetection(Dataset):
    """Images and boxes of a COCO json (pycocotools), as DETR consumes them.

    Items are ``dict(inputs=(3, H, W) float, data_samples=dict(image_id, labels (n,) int64 in 0..K-1,
    boxes (n, 4) (cx, cy, w, h) normalised to the resized image, orig_size (h, w), size (h, w)))``.
    Categories map to labels in the order of their sorted ids. Crowd boxes are dropped; boxes partly
    outside the image are clipped to it (as DETR). Boxes that are not finite, have a width or height ≤ 0
    or lie entirely outside the image are an error naming the file, image and annotation (checked when the
    file is loaded against the json's image sizes, and again against each decoded image), or are skipped
    with ``invalid_boxes='drop'``, as DETR does.

    Args:
        ann_file: COCO json.
        data_root: folder that ``file_name`` entries are relative to.
        image_size: shorter side after resizing (the input size; ``eval_resolution --sizes`` sets it).
        max_size: cap on the longer side (1333 for COCO; None for none).
        train_augment: random horizontal flip and a random shorter side from ``train_scales``.
        train_scales: shorter sides to draw from in training (default: ``image_size`` only).
        eval_mode: 'upsample' (resize the whole image, the only mode for detection).
        subset: keep the first N images by id (deterministic evaluation subsets).
        mean, std: normalisation (ImageNet's).
        invalid_boxes: 'raise' or 'drop' (see above).

    Attributes:
        dropped_annotations: ids of the annotations skipped at load with ``invalid_boxes='drop'``.
    """

    def __init__(self, ann_file: str, data_root: str = '', image_size: int = 800, max_size: int | None = 1333,
                 train_augment: bool = False, train_scales: Sequence[int] | None = None, eval_mode: str = 'upsample',
                 subset: int | None = None, mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD, invalid_boxes: str = 'raise') -> None:
        self.train_scales = check_detection_sizes(image_size, max_size, train_scales)
        if eval_mode == 'canvas':
            raise ValueError(f"CocoDetection resizes whole images (eval_mode='upsample'); got {eval_mode!r}.")
        check_choice('CocoDetection', 'eval_mode', eval_mode, ('upsample',))
        if subset is not None:
            check_positive_int('CocoDetection', 'subset', subset)
        check_normalisation('CocoDetection', mean, std, channels=3)
        self.invalid_boxes = check_choice('CocoDetection', 'invalid_boxes', invalid_boxes, INVALID_BOX_POLICIES)
        self.ann_path = Path(ann_file)
        self.coco = load_coco(ann_file)
        self.data_root = Path(data_root)
        self.image_size = image_size
        self.max_size = max_size
        self.train_augment = train_augment
        self.mean, self.std = list(mean), list(std)
        self.cat_ids = sorted(self.coco.getCatIds())
        self.label_of = {cat_id: label for label, cat_id in enumerate(self.cat_ids)}
        self.image_ids = sorted(self.coco.getImgIds())
        if subset is not None:
            self.image_ids = self.image_ids[:subset]
        self.dropped_annotations = self.check_boxes()

    def check_boxes(self) -> set[int]:
        """Check every non-crowd box against its image's json size (vectorised); return the ids to drop
        (``invalid_boxes='drop'``) or raise for the first invalid one."""
        images = self.coco.imgs
        row_of = {image_id: row for row, image_id in enumerate(images)}
        sizes = torch.tensor([image_size_of(image) for image in images.values()], dtype=torch.float32).reshape(-1, 2)
        annotations = [a for a in self.coco.dataset['annotations']
                       if not a.get('iscrowd', 0) and a.get('image_id') in row_of]
        rows = torch.tensor([row_of[a['image_id']] for a in annotations], dtype=torch.int64)
        codes = box_problems(coco_boxes(annotations, self.ann_path), sizes[rows, 0], sizes[rows, 1])
        bad = torch.nonzero(codes != BOX_OK).flatten().tolist()
        if bad and self.invalid_boxes == 'raise':
            first = annotations[bad[0]]
            width, height = sizes[rows[bad[0]]].tolist()
            raise ValueError(describe_box_problem(self.ann_path, first, images[first['image_id']],
                                                  int(codes[bad[0]]), width, height, count=len(bad)))
        return {annotations[index]['id'] for index in bad}

    @property
    def metainfo(self) -> dict[str, Any]:
        """The category names in label order (mmengine's dataset meta)."""
        return dict(classes=tuple(self.coco.cats[cat_id]['name'] for cat_id in self.cat_ids))

    def __len__(self) -> int:
        return len(self.image_ids)

    def load_image(self, image_id: int) -> Image.Image:
        path = self.data_root / self.coco.imgs[image_id]['file_name']
        try:
            with Image.open(path) as image:
                return image.convert('RGB')
        except FileNotFoundError:
            raise FileNotFoundError(f'Image {path} of image id {image_id} not found (data_root={self.data_root}).') from None
        except OSError as exc:
            raise RuntimeError(f'Image {path} of image id {image_id} is corrupt or unreadable ({exc}): replace the '
                               f'file, or remove the image and its annotations from the json.') from None

    def annotations(self, image_id: int, width: int, height: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(boxes (n, 4) xyxy pixels clipped to the image, labels (n,)) without crowds; invalid boxes for the
        decoded ``width`` × ``height`` raise or are dropped by ``invalid_boxes``."""
        anns = [a for a in self.coco.imgToAnns[image_id]
                if not a.get('iscrowd', 0) and a['id'] not in self.dropped_annotations]
        boxes = coco_boxes(anns, self.ann_path)
        codes = box_problems(boxes, width, height)
        keep = codes == BOX_OK
        if self.invalid_boxes == 'raise' and not bool(keep.all()):
            index = int(torch.nonzero(~keep)[0, 0])
            raise ValueError(describe_box_problem(self.ann_path, anns[index], self.coco.imgs[image_id],
                                                  int(codes[index]), width, height, count=int((~keep).sum()))
                             + ' (checked against the decoded image; its json width and height differ or are '
                               'missing)')
        boxes = box_convert(boxes[keep], 'xywh', 'xyxy')
        boxes[:, 0::2] = boxes[:, 0::2].clamp(0, width)
        boxes[:, 1::2] = boxes[:, 1::2].clamp(0, height)
        labels = torch.tensor([self.label_of[a['category_id']] for a, ok in zip(anns, keep.tolist()) if ok],
                              dtype=torch.int64)
        return boxes, labels

    def __getitem__(self, index: int) -> dict[str, Any]:
        image_id = self.image_ids[index]
        image = TF.pil_to_tensor(self.load_image(image_id))
        orig_height, orig_width = image.shape[-2:]
        boxes, labels = self.annotations(image_id, orig_width, orig_height)
        if self.train_augment and random.random() < 0.5:
            image = TF.horizontal_flip(image)
            boxes = boxes[:, [2, 1, 0, 3]] * boxes.new_tensor([-1, 1, -1, 1]) + boxes.new_tensor(
                [orig_width, 0, orig_width, 0])
        size = random.choice(self.train_scales) if self.train_augment else self.image_size
        image = detection_image(image, size, self.max_size, self.mean, self.std)
        height, width = image.shape[-2:]
        scale = boxes.new_tensor([orig_width, orig_height, orig_width, orig_height])
        return dict(inputs=image, data_samples=dict(
            image_id=image_id, labels=labels, boxes=box_convert(boxes / scale, 'xyxy', 'cxcywh'),
            orig_size=(int(orig_height), int(orig_width)), size=(height, width)))


def check_detection_sizes(image_size: int, max_size: int | None,
                          train_scales: Sequence[int] | None) -> tuple[int, ...]:
    """Check CocoDetection's sizes; return the training scales (``(image_size,)`` when None)."""
    check_positive_int('CocoDetection', 'image_size', image_size)
    if max_size is not None:
        check_positive_int('CocoDetection', 'max_size', max_size)
    if train_scales is None:
        scales: tuple[int, ...] = (image_size,)
    else:
        if isinstance(train_scales, (str, bytes)) or not isinstance(train_scales, Sequence) or not train_scales:
            raise ValueError(f'CocoDetection train_scales must be a non-empty sequence of shorter sides (px); '
                             f'got {train_scales!r}. Pass e.g. train_scales=({image_size},), or None for '
                             f'image_size only.')
        scales = tuple(check_positive_int('CocoDetection', 'train_scales value', s) for s in train_scales)
    if max_size is not None and max(image_size, *scales) > max_size:
        name, value = ('image_size', image_size) if image_size > max_size else ('train_scales', max(scales))
        raise ValueError(f'CocoDetection {name} {value} exceeds max_size {max_size}: max_size caps the longer side, '
                         f'so the shorter side could never reach {value}. Raise max_size (DETR: 1333 for 800), '
                         f'lower {name}, or pass max_size=None for no cap.')
    return scales


@FUNCTIONS.register_module()
def detr_collate(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Pad images to the largest height and width of the batch (bottom and right, zeros).

    Returns ``dict(inputs (B, 3, H, W), masks (B, H, W) bool True on real pixels, data_samples list)``.
    Use it as ``collate_fn=dict(type='vispe.detr_collate')``.
    """
    height = max(item['inputs'].shape[-2] for item in batch)
    width = max(item['inputs'].shape[-1] for item in batch)
    inputs = batch[0]['inputs'].new_zeros(len(batch), batch[0]['inputs'].shape[0], height, width)
    masks = torch.zeros(len(batch), height, width, dtype=torch.bool)
    for index, item in enumerate(batch):
        h, w = item['inputs'].shape[-2:]
        inputs[index, :, :h, :w] = item['inputs']
        masks[index, :h, :w] = True
    return dict(inputs=inputs, masks=masks, data_samples=[item['data_samples'] for item in batch])
