"""Evaluate a checkpoint with a config's test set.

    python tools/test.py configs/vit/vit-t2_rope-mixed_fmnist-28.py work_dirs/vit-t2_rope-mixed_fmnist-28/best.pth
        [--cfg-options test_dataloader.dataset.image_size=56 ...] [--work-dir DIR]

The checkpoint loads with vispe.load_checkpoint (weights only: best.pth/last.pth written by training,
or timm/vispe state dicts); learned position tables are resampled to the model's grid.
"""
from __future__ import annotations

import argparse
import json
import sys

import vispe
from vispe.engine import add_runner_arguments, build_runner, load_config, named_unknown_types


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    add_runner_arguments(parser)
    return parser.parse_args()


def main() -> int:
    args = parse_args()
    cfg = load_config(args.config, args.cfg_options, args.work_dir)
    cfg.launcher = args.launcher
    cfg.load_from = None
    runner = build_runner(cfg)
    vispe.load_checkpoint(runner.model, args.checkpoint)
    with named_unknown_types():
        metrics = runner.test()
    print(json.dumps({key: round(float(value), 4) for key, value in metrics.items()}))
    return 0


if __name__ == '__main__':
    sys.exit(main())
