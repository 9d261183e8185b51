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

from vispe.registry import DATASETS, FUNCTIONS

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def load_coco(ann_file: str | Path) -> Any:
    """A pycocotools ``COCO`` index of ``ann_file``, with errors that name the file and the fix."""
    from pycocotools.coco import COCO
    path = Path(ann_file)
    if not path.is_file():
        raise FileNotFoundError(f'COCO annotation file {path} not found. For the Fashion-MNIST detection set run '
                                f'`python tools/dataset_converters/fmnist_detection.py`; for COCO see datasets/README.md.')
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            return COCO(str(path))
    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as exc:
        raise RuntimeError(f'COCO annotation file {path} is corrupt or not COCO json: {exc!r}') from None


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
    Categories map to labels in the order of their sorted ids. Crowd boxes and boxes of zero area are
    dropped.

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
    """

    def __init__(self, ann_file: str, data_root: str = '', image_size: int = 800, max_size: int | None = 1333,
                 train_augment: bool = False, train_scales: Sequence[int] | None = None, eval_mode: str = 'upsample',
                 subset: int | None = None, mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD) -> None:
        if eval_mode != 'upsample':
            raise ValueError(f"CocoDetection resizes whole images (eval_mode='upsample'); got {eval_mode!r}.")
        self.coco = load_coco(ann_file)
        self.data_root = Path(data_root)
        self.image_size = image_size
        self.max_size = max_size
        self.train_augment = train_augment
        self.train_scales = tuple(train_scales) if train_scales else (image_size,)
        self.mean, self.std = list(mean), list(std)
        self.cat_ids = sorted(self.coco.getCatIds())
        self.label_of = {cat_id: label for label, cat_id in enumerate(self.cat_ids)}
        self.image_ids = sorted(self.coco.getImgIds())
        if subset is not None:
            self.image_ids = self.image_ids[:subset]

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
            raise RuntimeError(f'Image {path} is corrupt or unreadable: {exc}') from None

    def annotations(self, image_id: int, width: int, height: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(boxes (n, 4) xyxy pixels clipped to the image, labels (n,)) without crowds or empty boxes."""
        anns = [a for a in self.coco.imgToAnns[image_id] if not a.get('iscrowd', 0)]
        boxes = torch.tensor([a['bbox'] for a in anns], dtype=torch.float32).reshape(-1, 4)
        boxes = box_convert(boxes, 'xywh', 'xyxy')
        boxes[:, 0::2] = boxes[:, 0::2].clamp(0, width)
        boxes[:, 1::2] = boxes[:, 1::2].clamp(0, height)
        labels = torch.tensor([self.label_of[a['category_id']] for a in anns], dtype=torch.int64)
        keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
        return boxes[keep], labels[keep]

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
