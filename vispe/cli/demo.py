"""vispe's main job on a CPU: train small ViTs with several encodings on Fashion-MNIST at 28 px,
evaluate them at larger sizes, print the extrapolation table and write the plot.

    vispe demo                       # what `make demo` runs
    vispe demo --encodings ape rope-mixed lookhere alibi2d --epochs 4 --sizes 28 44 56 84

Each encoding is a packaged config ``vispe::vit/vit-t4_<name>_fmnist-28.py`` trained through mmengine's
Runner for 2 of its 8 epochs (the same recipe, a shorter cosine schedule), then ``vispe eval-resolution``
measures top-1 at every size on a balanced test subset, and ``vispe vis-attention`` draws the
last model's per-head attention for the centre of a real photo (scikit-image's astronaut) at the
first two sizes.
"""
from __future__ import annotations

import argparse
import importlib.util
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

from mmengine.config import Config

from vispe.configs import CONFIG_ROOT
from vispe.engine import build_runner, load_config, named_unknown_types
from vispe.engine.arguments import (InvalidArgument, check_distinct, existing_file, positive_int, reported_by,
                                    writable_folder, writable_output)

def config_path(name: str) -> Path:
    """The config of an encoding name of ``--encodings``."""
    return CONFIG_ROOT / 'vit' / f'vit-t4_{name}_fmnist-28.py'


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe demo``."""
    parser = argparse.ArgumentParser(prog='vispe demo', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--encodings', nargs='+', default=['ape', 'rope-mixed', 'lookhere'],
                        help='config names: vispe::vit/vit-t4_<name>_fmnist-28.py')
    parser.add_argument('--epochs', type=positive_int, default=2, help='at least 2: warm-up, then cosine decay')
    parser.add_argument('--train-subset', type=positive_int, default=None,
                        help='train on a balanced subset of this many images (default: the config\'s 58k)')
    parser.add_argument('--test-subset', type=positive_int, default=1000)
    parser.add_argument('--sizes', type=positive_int, nargs='+', default=[28, 44, 56, 84])
    parser.add_argument('--work-root', type=Path, default=Path('work_dirs/demo'))
    parser.add_argument('--out', type=Path, default=Path('results/demo/extrapolation'))
    parser.add_argument('--image', default='skimage:astronaut', help='photo for the attention figure')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused before any training with a message naming the argument unless every
    encoding has a config, counts are positive, the sizes are distinct multiples of the patch size, the
    image can be read and the output folders can be created."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        check_arguments(args)
    return args


def check_arguments(args: argparse.Namespace) -> None:
    """What would otherwise fail only after minutes of training (see :func:`parse_args`)."""
    missing = [name for name in args.encodings if not config_path(name).is_file()]
    if missing:
        known = sorted(p.name[len('vit-t4_'):-len('_fmnist-28.py')] for p in (CONFIG_ROOT / 'vit').glob(
            'vit-t4_*_fmnist-28.py'))
        raise InvalidArgument('--encodings', missing, f'No config for {missing} in configs/vit', f'choose from {known}')
    if args.epochs < 2:
        raise InvalidArgument('--epochs', args.epochs, 'the schedule needs one warm-up epoch, then cosine decay',
                              'give at least 2')
    check_distinct('--sizes', args.sizes)
    for name in args.encodings:
        patch = Config.fromfile(str(config_path(name))).model.backbone.get('patch_size')
        bad = [size for size in args.sizes if patch and size % patch]
        if bad:
            raise InvalidArgument('--sizes', args.sizes, f'{", ".join(map(str, bad))} not a multiple of the patch size '
                                  f'{patch} of vit-t4_{name}_fmnist-28', f'give multiples of {patch}')
    kind, _, image = args.image.partition(':')
    if kind == 'skimage':
        if importlib.util.find_spec('skimage') is None:
            raise InvalidArgument('--image', args.image, 'skimage:NAME images need scikit-image, which is not '
                                  'installed', 'pip install "vispe[3d]" (or scikit-image), or give fmnist:INDEX or '
                                  'an image file')
        import skimage.data
        if not hasattr(skimage.data, image):
            raise InvalidArgument('--image', args.image, f'scikit-image has no image {image!r}',
                                  'try skimage:astronaut, skimage:camera or skimage:coffee')
    elif not (kind == 'fmnist' and image.isdigit()):
        existing_file(Path(args.image), '--image')
    writable_folder(args.work_root, '--work-root')
    writable_output(args.out, '--out', suffixes=('.csv', '.json', '.png'))


def train(name: str, args: argparse.Namespace) -> Path:
    config = config_path(name)
    work_dir = args.work_root / config.stem
    options = {'train_cfg.max_epochs': args.epochs, 'param_scheduler.1.end': args.epochs,
               'val_dataloader.dataset.subset': args.test_subset, 'default_hooks.logger.interval': 10 ** 6,
               'log_level': 'WARNING'}
    if args.train_subset is not None:
        options['train_dataloader.dataset.subset'] = args.train_subset
    cfg = load_config(config, options, work_dir)
    start = time.perf_counter()
    with named_unknown_types():
        runner = build_runner(cfg)
        runner.train()
    images = len(runner.train_dataloader.dataset)
    print(f'trained {config.stem}: {args.epochs} epochs of {images} images in '
          f'{time.perf_counter() - start:.0f} s -> {work_dir}', flush=True)
    return work_dir


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    work_dirs = [train(name, args) for name in args.encodings]
    command = [sys.executable, '-m', 'vispe', 'eval-resolution', *map(str, work_dirs),
               '--sizes', *map(str, args.sizes), '--subset', str(args.test_subset), '--out', str(args.out)]
    if subprocess.run(command).returncode != 0:
        return 1
    figure = args.out.parent / f'attention_{work_dirs[-1].name}.png'
    command = [sys.executable, '-m', 'vispe', 'vis-attention', str(next(work_dirs[-1].glob('*.py'))),
               str(work_dirs[-1] / 'best.pth'), '--image', args.image, '--sizes', *map(str, args.sizes[:2]),
               '--query', 'center', '--heads', 'all', '--out', str(figure)]
    return subprocess.run(command).returncode


if __name__ == '__main__':
    sys.exit(main())
