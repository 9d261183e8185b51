"""Predicted against true yaw of a multi-view detector's matched boxes, per class: where orientation is learned.

    vispe vis-orientation configs/petr/petr-r18_petr-lid_mv-scenes.py \\
        work_dirs/petr-r18_petr-lid_mv-scenes_s0/best.pth --out models/petr-r18_petr-lid_mv-scenes_orientation.png
    vispe vis-orientation --from-json models/petr-r18_petr-lid_mv-scenes_orientation.json --out figure.png

The detector predicts the config's test split (or ``--split``); each prediction above ``--score`` is matched, highest
score first, to the nearest unmatched ground-truth box of its class closer than 2 m in bird's-eye view (nuScenes'
true-positive threshold). The JSON beside the PNG holds every match (class, true and predicted yaw, the bearing of the
box from the ego origin, score) and per class the mean orientation error with the full turn and with a half turn
as period; the figure is drawn from the JSON (``--from-json`` draws it again). One panel per class: a dot per match,
on the diagonal when the yaw is right, on the dashed lines when front and back are swapped; noise fills the square.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

import vispe
from vispe.engine import load_config, named_unknown_types
from vispe.engine.arguments import (InvalidArgument, existing_config, existing_file, positive_int,
                                    recorded_command, reported_by, run_main, writable_output)
from vispe.files import write_atomically
from vispe.registry import DATASETS, MODELS
from vispe.reporting.provenance import run_stamp
from vispe.visualization.multiview import save_figure
from vispe.visualization.multiview_scene import Progress, check_data_root

MATCH_DISTANCE = 2.0


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe vis-orientation``."""
    parser = argparse.ArgumentParser(prog='vispe vis-orientation', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', nargs='?', default=None)
    parser.add_argument('checkpoint', nargs='?', default=None)
    parser.add_argument('--split', default=None, help="data split (default: the config's test split)")
    parser.add_argument('--samples', type=positive_int, default=None, help='the first N samples (default: all)')
    parser.add_argument('--score', type=float, default=0.3, help='predictions above this score are matched (0.3)')
    parser.add_argument('--from-json', type=Path, default=None, help='draw the figure of a JSON this tool wrote')
    parser.add_argument('--out', type=Path, default=Path('orientation.png'), help='PNG; the JSON goes beside it')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        writable_output(args.out, '--out')
        if args.from_json is not None:
            existing_file(args.from_json, '--from-json')
        elif args.config is None or args.checkpoint is None:
            raise InvalidArgument('config', args.config, 'a figure needs predictions',
                                  'give a multi-view detection config and its checkpoint, or --from-json')
        else:
            args.config = existing_config(args.config, 'config')
            existing_file(args.checkpoint, 'checkpoint')
    return args


def wrapped(angle: np.ndarray, period: float = 2 * math.pi) -> np.ndarray:
    """Angles in [−period/2, period/2)."""
    return np.mod(np.asarray(angle) + period / 2, period) - period / 2


def match_boxes(boxes: np.ndarray, scores: np.ndarray, labels: np.ndarray, gt_boxes: np.ndarray,
                gt_labels: np.ndarray) -> list[tuple[int, int]]:
    """(prediction, ground truth) index pairs: by score, each prediction to the nearest unmatched box of its class
    closer than 2 m in bird's-eye view."""
    taken = np.zeros(len(gt_boxes), dtype=bool)
    pairs = []
    for index in np.argsort(-scores, kind='stable'):
        distance = np.linalg.norm(gt_boxes[:, :2] - boxes[index, :2], axis=1)
        distance[taken | (gt_labels != labels[index])] = np.inf
        if len(distance) and distance.min() < MATCH_DISTANCE:
            nearest = int(distance.argmin())
            taken[nearest] = True
            pairs.append((int(index), nearest))
    return pairs


def collect_matches(config: str, checkpoint: str, split: str | None, samples: int | None,
                    score: float) -> tuple[list[dict[str, Any]], list[str]]:
    """Run the detector over the split and return its matches and the class names."""
    from vispe.datasets.multiview_detection import multiview_collate
    cfg = load_config(config)
    if cfg.model.get('type') != 'PETRDetector':
        raise InvalidArgument('config', config, f'its model ({cfg.model.get("type")}) is not a multi-view 3D '
                              f'detector', 'give a configs/petr config')
    with named_unknown_types():
        model = MODELS.build(cfg.model).eval()
    vispe.load_checkpoint(model, checkpoint)
    dataset_cfg = dict(cfg.test_dataloader.dataset)
    check_data_root(dataset_cfg['data_root'], 'the config\'s data_root')
    if split is not None:
        dataset_cfg['split'] = split
    dataset = DATASETS.build(dataset_cfg)
    classes = list(dataset_cfg['classes'])
    count = len(dataset) if samples is None else min(samples, len(dataset))
    matches = []
    with torch.no_grad():
        for start in range(0, count, 8):
            batch = multiview_collate([dataset[i] for i in range(start, min(start + 8, count))])
            for result, sample in zip(model.test_step(batch), batch['data_samples']):
                keep = result['scores'].numpy() > score
                boxes, scores = result['boxes_3d'].numpy()[keep], result['scores'].numpy()[keep]
                labels = result['labels_3d'].numpy()[keep]
                gt_boxes, gt_labels = np.asarray(sample['gt_boxes']), np.asarray(sample['gt_labels'])
                for predicted, true in match_boxes(boxes, scores, labels, gt_boxes, gt_labels):
                    bearing = math.atan2(gt_boxes[true, 1], gt_boxes[true, 0])
                    matches.append(dict(cls=classes[int(gt_labels[true])], true=float(wrapped(gt_boxes[true, 6])),
                                        predicted=float(wrapped(boxes[predicted, 6])), bearing=bearing,
                                        score=float(scores[predicted])))
    return matches, classes


def summarise(matches: list[dict[str, Any]], classes: list[str]) -> dict[str, dict[str, float]]:
    """Per class: matches, mean |yaw error| with period 2π and with period π (rad)."""
    summary = {}
    for name in classes:
        rows = [m for m in matches if m['cls'] == name]
        error = np.array([m['predicted'] - m['true'] for m in rows])
        summary[name] = dict(matches=len(rows),
                             error_full_turn=float(np.abs(wrapped(error)).mean()) if rows else math.nan,
                             error_half_turn=float(np.abs(wrapped(error, math.pi)).mean()) if rows else math.nan)
    return summary


def draw(document: dict[str, Any], out: Path) -> None:
    """One scatter panel per class of predicted against true yaw, from a JSON document of this tool."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    classes = document['classes']
    figure, axes = plt.subplots(1, len(classes), figsize=(3.1 * len(classes), 3.9), squeeze=False)
    line = np.array([-math.pi, math.pi])
    for axis, name in zip(axes[0], classes):
        rows = [m for m in document['matches'] if m['cls'] == name]
        axis.scatter([m['true'] for m in rows], [m['predicted'] for m in rows], s=4, alpha=0.5)
        axis.plot(line, line, color='tab:green', linewidth=0.8)
        for shift in (-math.pi, math.pi):
            axis.plot(line, line + shift, color='tab:red', linewidth=0.8, linestyle='--')
        axis.set_xlim(-math.pi, math.pi)
        axis.set_ylim(-math.pi, math.pi)
        axis.set_aspect('equal')
        stats = document['summary'][name]
        axis.set_title(f'{name} ({stats["matches"]})\nerror {stats["error_full_turn"]:.2f} rad, '
                       f'mod π {stats["error_half_turn"]:.2f}', fontsize=8)
        axis.set_xlabel('true yaw (rad)', fontsize=8)
        axis.tick_params(labelsize=7)
    axes[0][0].set_ylabel('predicted yaw (rad)', fontsize=8)
    figure.suptitle(f'{document["label"]}: matched boxes (< 2 m), split {document["split"]}\ngreen: right; red '
                    f'dashed: front and back swapped; random yaws would give 1.57 and 0.79', fontsize=9)
    figure.tight_layout(rect=(0, 0.04, 1, 0.9))
    save_figure(figure, out)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.from_json is not None:
        document = json.loads(args.from_json.read_text())
    else:
        progress = Progress()
        progress(f'predicting with {Path(args.checkpoint).parent.name or args.checkpoint}')
        matches, classes = collect_matches(args.config, args.checkpoint, args.split, args.samples, args.score)
        split = args.split or load_config(args.config).test_dataloader.dataset.get('split')
        document = dict(**run_stamp(), command=recorded_command('vis-orientation', argv),
                        label=Path(args.checkpoint).parent.name, config=str(args.config),
                        checkpoint=str(args.checkpoint), split=split, score=args.score, classes=classes,
                        summary=summarise(matches, classes), matches=matches)
        json_path = args.out.with_suffix('.json')
        write_atomically(json_path, lambda path: path.write_text(json.dumps(document, indent=1)))
        print(f'wrote {json_path}')
    draw(document, args.out)
    for name, stats in document['summary'].items():
        print(f'{name:<14} {stats["matches"]:5d} matches  error {stats["error_full_turn"]:.2f} rad, '
              f'mod π {stats["error_half_turn"]:.2f}')
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    run_main(main)
