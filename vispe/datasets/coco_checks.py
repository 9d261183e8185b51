"""Checks of COCO annotation files that pycocotools does not make.

pycocotools builds an empty index from a json without ``images``, ``annotations`` or ``categories``
and keeps annotations whose ``category_id`` no category has; DETR's pipeline silently drops boxes that
are not finite, have no width or height, or lie outside the image. These checks turn each into an
error that names the file, the image and the annotation, and say how to fix it.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import torch

REQUIRED_KEYS = ('images', 'annotations', 'categories')
BOX_OK, BOX_NOT_FINITE, BOX_EMPTY, BOX_OUTSIDE = range(4)


def check_coco_json(dataset: Any, path: Path) -> None:
    """The top-level keys of a COCO json, and that every annotation's ``category_id`` is a category."""
    missing = [key for key in REQUIRED_KEYS if key not in dataset]
    if missing:
        unlabelled = ' (an unlabelled set needs "annotations": [])' if missing == ['annotations'] else ''
        raise ValueError(f'COCO annotation file {path} has no {", ".join(repr(k) for k in missing)}: a COCO json '
                         f'needs the top-level lists {list(REQUIRED_KEYS)}{unlabelled}; pycocotools would index it '
                         f'as empty. Keys found: {sorted(dataset)}.')
    for index, image in enumerate(dataset['images']):
        absent = [key for key in ('id', 'file_name') if key not in image]
        if absent:
            raise ValueError(f'COCO annotation file {path}: entry {index} of "images" has no {absent} (keys found: '
                             f'{sorted(image)}). Every image needs an "id" and the "file_name" it is read from.')
    counts: dict[Any, int] = {}
    for image in dataset['images']:
        counts[image['id']] = counts.get(image['id'], 0) + 1
    repeated = [image_id for image_id, count in counts.items() if count > 1]
    if repeated:
        raise ValueError(f'COCO annotation file {path}: image ids {repeated[:8]} appear more than once in "images"; '
                         f'pycocotools would keep one of each. Give every image its own id.')
    for category in dataset['categories']:
        if 'id' not in category or 'name' not in category:
            raise ValueError(f'COCO annotation file {path}: category {category} needs an "id" and a "name".')
    category_ids = {category['id'] for category in dataset['categories']}
    for annotation in dataset['annotations']:
        if annotation.get('image_id') not in counts:
            raise ValueError(f'COCO annotation file {path}: annotation id {annotation.get("id")} belongs to image id '
                             f'{annotation.get("image_id")!r}, which "images" does not list. Add the image or remove '
                             f'the annotation.')
        if annotation.get('category_id') not in category_ids:
            known = sorted(category_ids)
            shown = known if len(known) <= 12 else known[:12] + ['...']
            raise ValueError(f'COCO annotation file {path}: annotation id {annotation.get("id")} of image id '
                             f'{annotation.get("image_id")} has category_id {annotation.get("category_id")!r}, which '
                             f'no entry of "categories" has (ids {shown}). Add the category to "categories" or fix '
                             f'the annotation\'s category_id.')


def box_problems(boxes: torch.Tensor, width: torch.Tensor | float, height: torch.Tensor | float) -> torch.Tensor:
    """Per COCO box (n, 4) float32 [x, y, w, h] in pixels: ``BOX_OK``, ``BOX_NOT_FINITE``, ``BOX_EMPTY``
    (w or h ≤ 0) or ``BOX_OUTSIDE`` (no area left after clipping to the ``width`` × ``height`` image, which
    may be per box; inf for unknown), as int64 (n,)."""
    width, height = torch.as_tensor(width, dtype=boxes.dtype), torch.as_tensor(height, dtype=boxes.dtype)
    x, y, w, h = boxes.unbind(-1)
    x0, x1 = torch.minimum(x.clamp(min=0), width), torch.minimum((x + w).clamp(min=0), width)
    y0, y1 = torch.minimum(y.clamp(min=0), height), torch.minimum((y + h).clamp(min=0), height)
    codes = torch.full(x.shape, BOX_OK, dtype=torch.int64)
    codes[~((x1 > x0) & (y1 > y0))] = BOX_OUTSIDE
    codes[(w <= 0) | (h <= 0)] = BOX_EMPTY
    codes[~torch.isfinite(boxes).all(-1)] = BOX_NOT_FINITE
    return codes


def coco_boxes(annotations: list[dict[str, Any]], path: Path) -> torch.Tensor:
    """The ``bbox`` of each annotation as (n, 4) float32, or an error naming the first malformed one."""
    if not annotations:
        return torch.zeros(0, 4)
    try:
        array = np.array([a['bbox'] for a in annotations], dtype=np.float32)
    except (KeyError, TypeError, ValueError):
        array = None
    if array is not None and array.shape == (len(annotations), 4):
        return torch.from_numpy(array)
    for annotation in annotations:
        bbox = annotation.get('bbox')
        if not (isinstance(bbox, (list, tuple)) and len(bbox) == 4
                and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in bbox)):
            raise ValueError(f'COCO annotation file {path}: annotation id {annotation.get("id")} of image id '
                             f'{annotation.get("image_id")} has bbox {bbox!r}; a bbox is 4 numbers [x, y, w, h] '
                             f'in pixels.')
    raise ValueError(f'COCO annotation file {path}: the bbox entries do not form an (n, 4) array of numbers.')


def image_size_of(image: dict[str, Any]) -> tuple[float, float]:
    """(width, height) of a COCO image entry; inf for a missing one (the box is then checked when loaded)."""
    sizes = [image.get(key) for key in ('width', 'height')]
    width, height = (float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.inf for v in sizes)
    return width, height


def describe_box_problem(path: Path, annotation: dict[str, Any], image: dict[str, Any], code: int,
                         width: float, height: float, count: int = 1) -> str:
    """The error for an invalid box: file, image, annotation, box, what is wrong, and the two fixes."""
    problem = {BOX_NOT_FINITE: 'is not finite (NaN or inf)',
               BOX_EMPTY: 'has width or height ≤ 0',
               BOX_OUTSIDE: f'lies entirely outside the image (width {width:g}, height {height:g})'}[code]
    also = f' ({count} annotations have invalid boxes)' if count > 1 else ''
    return (f'COCO annotation file {path}: annotation id {annotation.get("id")} of image id {image.get("id")} '
            f'({image.get("file_name")}) has bbox {annotation.get("bbox")} ([x, y, w, h] in pixels), which '
            f'{problem}{also}. Fix the annotation, or build the dataset with invalid_boxes=\'drop\' to skip such '
            f'boxes as DETR does.')
