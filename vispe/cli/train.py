"""Train a model from an mmengine config.

    vispe train configs/vit/vit-t4_rope-mixed_fmnist-28.py [--work-dir DIR] [--resume [CKPT]]
        [--trust-checkpoint] [--amp] [--cfg-options key=value ...] [--launcher pytorch]

Writes mmengine's epoch checkpoints (for --resume), logs, and best.pth / last.pth (weights only) to
the work dir (default work_dirs/<config name>). A resumed run continues with the same random numbers
and data order as an uninterrupted one. Resume files are read without running code from them and
must lie in the work dir, unless --trust-checkpoint says the file is your own.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from vispe.engine import add_runner_arguments, build_runner, load_config, named_unknown_types
from vispe.engine.arguments import run_main, writable_folder


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe train``."""
    parser = argparse.ArgumentParser(prog='vispe train', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('--resume', nargs='?', const='auto', default=None,
                        help='resume from the latest checkpoint of the work dir, or from the given one (inside the '
                             'work dir)')
    parser.add_argument('--trust-checkpoint', action='store_true',
                        help='resume from a file outside the work dir, or one holding Python objects beyond '
                             'mmengine\'s training state, with Python\'s full unpickler. A crafted file runs any '
                             'code it contains on this machine: use only for files you wrote yourself')
    parser.add_argument('--amp', action='store_true', help='mixed precision (needs a CUDA device)')
    add_runner_arguments(parser)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options, args.work_dir, args.vis_backend)
    writable_folder(Path(cfg.work_dir), '--work-dir')
    cfg.launcher = args.launcher
    if args.resume == 'auto':
        cfg.resume, cfg.load_from = True, None
    elif args.resume is not None:
        cfg.resume, cfg.load_from = True, args.resume
    if args.trust_checkpoint:
        if args.resume is None:
            print('--trust-checkpoint applies to --resume; it was given without --resume.', file=sys.stderr)
            return 2
        cfg.trust_resume_file = True
    if args.amp:
        import torch
        if not torch.cuda.is_available():
            print('--amp needs a CUDA device (mmengine AmpOptimWrapper); none is available here.', file=sys.stderr)
            return 2
        cfg.optim_wrapper.type = 'AmpOptimWrapper'
        cfg.optim_wrapper.setdefault('loss_scale', 'dynamic')
    with named_unknown_types():
        build_runner(cfg).train()
    return 0


if __name__ == '__main__':
    run_main(main)
