"""Fashion-MNIST detection set: real Fashion-MNIST items pasted at random positions and scales on
canvases, written as COCO json + PNGs. Seeded: the same arguments give the same files.

    vispe dataset fmnist-detection --out datasets/fmnist-det

Each canvas (``--canvas`` px square, black) receives ``--min-objects``..``--max-objects`` items. An item
is a 28×28 Fashion-MNIST image resized to a side drawn uniformly in ``[--min-side, --max-side]`` px and
placed at a uniform position, rejected (and redrawn, up to 50 times) when its box overlaps an earlier
one with IoU above ``--max-iou``; pixels combine by maximum. The box is the tight box of the item's
pixels brighter than ``--threshold`` (Fashion-MNIST items do not fill their 28×28 square). Three splits share no
item: ``train`` canvases use the Fashion-MNIST training images outside its ``minival`` (vispe's 2000 held-out
training images), ``minival`` canvases those 2000 images (for choosing checkpoints and test-time options, never the
test set), and ``val`` canvases the test images (the set results are reported on, as COCO reports on val2017).

Writes ``<out>/{train,minival,val}/NNNNNN.png`` (grey) and ``<out>/annotations/{train,minival,val}.json`` with the
ten Fashion-MNIST classes as categories 1..10 and, in ``info``, the command and arguments.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from PIL import Image
from tqdm import tqdm

from vispe.datasets.fashion_mnist import CLASSES, default_root, read_split
from vispe.engine.arguments import (InvalidArgument, existing_folder, non_negative_int, positive_int,
                                    progress_wanted, recorded_command, reported_by, unit_fraction, writable_folder)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe dataset fmnist-detection``."""
    parser = argparse.ArgumentParser(prog='vispe dataset fmnist-detection', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--out', type=Path, default=Path('datasets') / 'fmnist-det')
    parser.add_argument('--root', type=Path, default=None, help='Fashion-MNIST IDX folder (default: vispe\'s)')
    parser.add_argument('--train', type=positive_int, default=6000, help='number of training canvases')
    parser.add_argument('--minival', type=positive_int, default=500,
                        help='number of held-out canvases of training items (checkpoint choice, --tune)')
    parser.add_argument('--val', type=positive_int, default=500, help='number of test canvases (of test items)')
    parser.add_argument('--canvas', type=positive_int, default=64)
    parser.add_argument('--min-objects', type=positive_int, default=1)
    parser.add_argument('--max-objects', type=positive_int, default=3)
    parser.add_argument('--min-side', type=positive_int, default=16)
    parser.add_argument('--max-side', type=positive_int, default=32)
    parser.add_argument('--max-iou', type=unit_fraction, default=0.1)
    parser.add_argument('--threshold', type=non_negative_int, default=16,
                        help='grey level above which a pixel is the item')
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--quiet', action='store_true', help='no progress bar (none either when stderr is not a '
                                                             'terminal)')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless counts and sizes are positive,
    --min-X <= --max-X, items fit on the canvas, the IoU is in [0, 1], the threshold below 255 and the
    output folder can be created."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        if args.min_side > args.max_side:
            raise InvalidArgument('--min-side', args.min_side, f'larger than --max-side {args.max_side}',
                                  'give --min-side <= --max-side')
        if args.max_side > args.canvas:
            raise InvalidArgument('--max-side', args.max_side, f'larger than --canvas {args.canvas}',
                                  'give --max-side <= --canvas, or a larger --canvas')
        if args.min_objects > args.max_objects:
            raise InvalidArgument('--min-objects', args.min_objects, f'larger than --max-objects {args.max_objects}',
                                  'give --min-objects <= --max-objects')
        if args.threshold > 254:
            raise InvalidArgument('--threshold', args.threshold, 'no grey level (0-255) is above it',
                                  'give a level from 0 to 254')
        if args.root is not None:
            existing_folder(args.root, '--root')
        writable_folder(args.out, '--out')
    return args


def box_iou(a: tuple[float, float, float, float], b: tuple[float, float, float, float]) -> float:
    """IoU of two (x0, y0, x1, y1) boxes."""
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    inter = max(w, 0) * max(h, 0)
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def tight_box(item: np.ndarray, threshold: int) -> tuple[int, int, int, int] | None:
    """(x0, y0, x1, y1), x1/y1 exclusive, of the pixels above ``threshold``; None if there are none."""
    rows, cols = np.nonzero(item > threshold)
    if rows.size == 0:
        return None
    return int(cols.min()), int(rows.min()), int(cols.max()) + 1, int(rows.max()) + 1


def make_split(name: str, count: int, images: np.ndarray, labels: np.ndarray, args: argparse.Namespace,
               rng: np.random.Generator) -> dict[str, Any]:
    (args.out / name).mkdir(parents=True, exist_ok=True)
    coco_images, annotations = [], []
    for image_id in tqdm(range(1, count + 1), desc=name, unit='canvas', file=sys.stderr,
                         disable=not progress_wanted(args.quiet)):
        canvas = np.zeros((args.canvas, args.canvas), np.uint8)
        boxes: list[tuple[float, float, float, float]] = []
        for _ in range(int(rng.integers(args.min_objects, args.max_objects + 1))):
            for _attempt in range(50):
                index = int(rng.integers(len(images)))
                side = int(rng.integers(args.min_side, args.max_side + 1))
                item = np.asarray(Image.fromarray(images[index]).resize((side, side), Image.BILINEAR))
                local = tight_box(item, args.threshold)
                if local is None:
                    continue
                x, y = (int(v) for v in rng.integers(0, args.canvas - side + 1, size=2))
                box = (x + local[0], y + local[1], x + local[2], y + local[3])
                if all(box_iou(box, other) <= args.max_iou for other in boxes):
                    break
            else:
                continue
            canvas[y:y + side, x:x + side] = np.maximum(canvas[y:y + side, x:x + side], item)
            boxes.append(box)
            width, height = box[2] - box[0], box[3] - box[1]
            annotations.append(dict(id=len(annotations) + 1, image_id=image_id, category_id=int(labels[index]) + 1,
                                    bbox=[box[0], box[1], width, height], area=width * height, iscrowd=0))
        file_name = f'{name}/{image_id:06d}.png'
        Image.fromarray(canvas).save(args.out / file_name)
        coco_images.append(dict(id=image_id, file_name=file_name, width=args.canvas, height=args.canvas))
    return dict(images=coco_images, annotations=annotations,
                categories=[dict(id=i + 1, name=label) for i, label in enumerate(CLASSES)])


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    root = args.root or default_root()
    rng = np.random.default_rng(args.seed)
    (args.out / 'annotations').mkdir(parents=True, exist_ok=True)
    info = dict(description='Fashion-MNIST items pasted on canvases (vispe)',
                command=recorded_command('dataset fmnist-detection', argv,
                                                 'tools/dataset_converters/fmnist_detection.py'),
                arguments={k: str(v) for k, v in vars(args).items()})
    for split, source, count in (('train', 'train-minus-minival', args.train), ('minival', 'minival', args.minival),
                                 ('val', 'test', args.val)):
        images, labels = read_split(root, source)
        coco = make_split(split, count, images, labels, args, rng)
        coco['info'] = info
        path = args.out / 'annotations' / f'{split}.json'
        path.write_text(json.dumps(coco))
        print(f'{split}: {len(coco["images"])} canvases, {len(coco["annotations"])} objects -> {path}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
