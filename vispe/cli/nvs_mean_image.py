"""The mean-image floor of novel-view synthesis: every target view rendered as the per-pixel mean of the training
set's target views, scored with the config's NVSMetric (PSNR / SSIM over all pixels and over object pixels).

    vispe nvs-mean-image configs/nvs/srt-s_gta_mv-scenes.py --split test --out models/nvs_mean-image.json

A blurry mean of ground and sky already scores well over all pixels; a model that has learned the cameras but not
the objects sits near this floor on object pixels. Prints the metrics as JSON; ``--out`` also writes them, with the
command, atomically.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

import vispe  # noqa: F401  (registers the datasets and metrics)
from vispe.datasets.nvs_scenes import NVSScenes
from vispe.engine import load_config
from vispe.engine.arguments import existing_config, recorded_command, reported_by, run_main, writable_output
from vispe.evaluation.sweep import write_atomically, write_json
from vispe.registry import METRICS


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe nvs-mean-image``."""
    parser = argparse.ArgumentParser(prog='vispe nvs-mean-image', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='an NVS config (its data root and metric)')
    parser.add_argument('--split', choices=('val', 'test'), default='test', help='the split scored (default test)')
    parser.add_argument('--data-root', type=Path, default=None, help="the NVS set (default: the config's)")
    parser.add_argument('--out', type=Path, default=None, help='also write the metrics here (.json)')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        args.config = existing_config(args.config, 'config')
        if args.out is not None:
            writable_output(args.out, '--out', suffixes=('.json',))
    return args


def target_views(dataset: NVSScenes, index: int) -> tuple[np.ndarray, np.ndarray]:
    """(Vt, 3, H, W) float target images in [0, 1] and (Vt, H, W) object masks of scene ``index``."""
    scene = dataset.load(index)
    inputs = int(scene['num_inputs'])
    images = scene['images'][inputs:].transpose(0, 3, 1, 2).astype(np.float64) / 255
    return images, scene['objects'][inputs:]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = load_config(Path(args.config))
    root = str(args.data_root or cfg.test_dataloader.dataset.data_root)
    train = NVSScenes(root, 'train')
    total = None
    for index in range(len(train)):
        images = target_views(train, index)[0].sum(0)
        total = images if total is None else total + images
    mean = torch.from_numpy(total / (len(train) * len(target_views(train, 0)[0]))).float()
    scored = NVSScenes(root, args.split)
    metric = METRICS.build(cfg.test_evaluator)
    for index in range(len(scored)):
        images, objects = target_views(scored, index)
        metric.process({}, [dict(pred=mean.expand(len(images), -1, -1, -1), target=torch.from_numpy(images).float(),
                                 objects=torch.from_numpy(objects))])
    metrics = {key: round(float(value), 4) for key, value in metric.evaluate(len(scored)).items()}
    print(json.dumps(metrics))
    if args.out is not None:
        record = dict(command=recorded_command('nvs-mean-image', argv), data_root=root,
                      split=args.split, training_scenes=len(train), metrics=metrics)
        write_atomically(args.out, lambda path: write_json(path, record))
    return 0


if __name__ == '__main__':
    run_main(main)
