"""Evaluate a checkpoint with a config's test set.

    python tools/test.py configs/vit/vit-t2_rope-mixed_fmnist-28.py work_dirs/vit-t2_rope-mixed_fmnist-28/best.pth
        [--cfg-options test_dataloader.dataset.image_size=56 ...] [--work-dir DIR]

The checkpoint loads with vispe.load_checkpoint (best.pth/last.pth written by training, an epoch
checkpoint, or a timm/vispe state dict), read without running code from the file; learned position
tables are resampled to the model's grid, and a checkpoint trained with another encoding than the
config's is refused.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import vispe
from vispe.engine import add_runner_arguments, build_runner, load_config, named_unknown_types
from vispe.engine.arguments import existing_file, reported_by, run_main, writable_folder


def parse_args() -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless the config exists."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    add_runner_arguments(parser)
    args = parser.parse_args()
    with reported_by(parser):
        existing_file(Path(args.config), 'config')
    return args


def main() -> int:
    args = parse_args()
    cfg = load_config(args.config, args.cfg_options, args.work_dir)
    writable_folder(Path(cfg.work_dir), '--work-dir')
    cfg.launcher = args.launcher
    cfg.load_from = None
    runner = build_runner(cfg)
    vispe.load_checkpoint(runner.model, args.checkpoint)
    with named_unknown_types():
        metrics = runner.test()
    print(json.dumps({key: round(float(value), 4) for key, value in metrics.items()}))
    return 0


if __name__ == '__main__':
    run_main(main)
