"""Checks of DETR's training targets, from any dataset, before they are matched.

A target is ``dict(labels (n,) integer, boxes (n, 4) float (cx, cy, w, h) normalised to the image)`` and
optionally ``image_id``. Bad targets do not fail loudly in DETR: a label ≥ K indexes the no-object class
or out of range, a NaN box turns the matching cost NaN, pixel or (x0, y0, x1, y1) boxes train on
nonsense. The structure is checked per image (metadata only); the values of the whole batch at once,
with one reduction.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch

BOX_TOLERANCE = 1e-3  # how far a normalised box edge may lie outside [0, 1] (rounding of pixel boxes)


def image_name(target: Mapping[str, Any], index: int) -> str:
    """'image 3 of the batch (image_id 42)', or without the id when the target has none."""
    image_id = target.get('image_id')
    if isinstance(image_id, torch.Tensor) and image_id.numel() == 1:
        image_id = image_id.item()
    return f'image {index} of the batch' + ('' if image_id is None else f' (image_id {image_id})')


def check_target_structure(target: Mapping[str, Any], index: int) -> None:
    """Keys, types, dtypes and shapes of one image's target."""
    name = image_name(target, index)
    for key in ('labels', 'boxes'):
        if key not in target:
            raise ValueError(f'The target of {name} has no {key!r}; each data sample needs labels (n,) int64 and '
                             f'boxes (n, 4) float (cx, cy, w, h) normalised to the image, as CocoDetection gives.')
        if not isinstance(target[key], torch.Tensor):
            raise TypeError(f'{key} of {name} must be a torch.Tensor; got {type(target[key]).__name__}. '
                            f'Convert it with torch.as_tensor(...).')
    labels, boxes = target['labels'], target['boxes']
    if labels.dtype in (torch.bool, torch.uint8) or labels.is_floating_point() or labels.is_complex():
        raise TypeError(f'labels of {name} are {labels.dtype}; they are class indices: convert them with '
                        f'labels.long().')
    if not boxes.is_floating_point():
        raise TypeError(f'boxes of {name} are {boxes.dtype}; they must be float (cx, cy, w, h) normalised to the '
                        f'image. Integer boxes look like pixels: divide by (W, H, W, H) after '
                        f'torchvision.ops.box_convert(boxes, in_fmt, "cxcywh").')
    if labels.ndim != 1:
        raise ValueError(f'labels of {name} must have shape (n,); got {tuple(labels.shape)}.')
    if boxes.ndim != 2 or boxes.shape[1] != 4:
        raise ValueError(f'boxes of {name} must have shape (n, 4); got {tuple(boxes.shape)}.')
    if len(labels) != len(boxes):
        raise ValueError(f'{name} has {len(labels)} labels but {len(boxes)} boxes: one label per box.')


def check_targets(targets: Sequence[Mapping[str, Any]], num_classes: int, batch_size: int | None = None) -> None:
    """Check DETR targets: structure per image, then labels in [0, K) and boxes finite, w, h > 0 and inside
    the image (±:data:`BOX_TOLERANCE`) for all annotations of the batch with one reduction.

    Args:
        targets: one dict per image (``labels``, ``boxes``, optional ``image_id``).
        num_classes: K.
        batch_size: the number of images predicted (None: not checked).

    Raises:
        ValueError: a missing key, a shape, a count or a value, naming the image and the annotation index.
        TypeError: a non-tensor or a wrong dtype.
    """
    if batch_size is not None and len(targets) != batch_size:
        raise ValueError(f'{len(targets)} targets for a batch of {batch_size} images: pass one data sample per '
                         f'image, in the order of the batch.')
    for index, target in enumerate(targets):
        check_target_structure(target, index)
    counts = [len(target['labels']) for target in targets]
    if sum(counts) == 0:
        return
    labels = torch.cat([target['labels'] for target in targets])
    boxes = torch.cat([target['boxes'].float() for target in targets])
    cx, cy, w, h = boxes.unbind(-1)
    finite = torch.isfinite(boxes).all(-1)
    low, high = -BOX_TOLERANCE, 1 + BOX_TOLERANCE
    problems = torch.stack([
        (labels < 0) | (labels >= num_classes),
        ~finite,
        finite & ((w <= 0) | (h <= 0)),
        finite & ((cx - w / 2 < low) | (cy - h / 2 < low) | (cx + w / 2 > high) | (cy + h / 2 > high)),
    ])
    if not bool(problems.any()):
        return
    raise ValueError(describe_first_problem(problems, targets, counts, num_classes))


def describe_first_problem(problems: torch.Tensor, targets: Sequence[Mapping[str, Any]], counts: list[int],
                           num_classes: int) -> str:
    """The message for the first bad annotation of a batch; ``problems`` (4, N) bool as in :func:`check_targets`."""
    bad = problems.any(0)
    position = int(torch.nonzero(bad)[0, 0])
    kind = int(torch.nonzero(problems[:, position])[0, 0])
    ends = torch.tensor(counts).cumsum(0)
    index = int((ends <= position).sum())
    annotation = position - (int(ends[index - 1]) if index else 0)
    target = targets[index]
    where = f'annotation {annotation} of {image_name(target, index)}'
    total = int(bad.sum())
    also = f' ({total} bad annotations in this batch)' if total > 1 else ''
    box = [round(v, 4) for v in target['boxes'][annotation].tolist()]
    if kind == 0:
        label = int(target['labels'][annotation])
        note = ' (K is the no-object class)' if label == num_classes else ''
        return (f'Label {label} of {where} is outside [0, {num_classes}){note}{also}: labels index the model\'s '
                f'num_classes={num_classes} classes. Build the model with num_classes equal to the dataset\'s '
                f'number of categories (len(dataset.metainfo["classes"])), or fix the label map.')
    if kind == 1:
        return (f'Box {box} of {where} is not finite{also}. Fix or remove the annotation; CocoDetection(..., '
                f'invalid_boxes=\'drop\') skips such boxes as DETR does.')
    if kind == 2:
        return (f'Box {box} of {where} has width or height ≤ 0{also}: boxes are (cx, cy, w, h) normalised to the '
                f'image. Convert (x0, y0, x1, y1) boxes with torchvision.ops.box_convert(boxes, "xyxy", "cxcywh"), '
                f'or drop empty boxes (CocoDetection(..., invalid_boxes=\'drop\')).')
    return (f'Box {box} of {where} reaches outside the image [0, 1] (cx, cy, w, h){also}: boxes must be normalised '
            f'by the image width and height (divide pixel boxes by (W, H, W, H)) and clipped to the image.')
