"""vispe's main job on a CPU: train small ViTs with several encodings on Fashion-MNIST at 28 px,
evaluate them at larger sizes, print the extrapolation table and write the plot.

    python tools/demo.py                       # what `make demo` runs (about 6 minutes on 2 cores)
    python tools/demo.py --encodings ape rope-mixed lookhere alibi2d --epochs 6 --sizes 28 42 56 84

Each encoding is a config ``configs/vit/vit-t2_<name>_fmnist-28.py`` trained through mmengine's
Runner on a balanced subset (shorter than the config's own schedule), then ``tools/eval_resolution.py``
measures top-1 at every size on a balanced test subset, and ``tools/vis_attention.py`` draws the
last model's per-head attention for the centre of a real photo (scikit-image's astronaut) at the
first two sizes.
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from vispe.engine import build_runner, load_config, named_unknown_types

REPO_ROOT = Path(__file__).resolve().parents[1]


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--encodings', nargs='+', default=['ape', 'rope-mixed', 'lookhere'],
                        help='config names: configs/vit/vit-t2_<name>_fmnist-28.py')
    parser.add_argument('--epochs', type=int, default=6, help='at least 2: warm-up, then cosine decay')
    parser.add_argument('--train-subset', type=int, default=4000)
    parser.add_argument('--test-subset', type=int, default=500)
    parser.add_argument('--sizes', type=int, nargs='+', default=[28, 42, 56, 84])
    parser.add_argument('--work-root', type=Path, default=Path('work_dirs/demo'))
    parser.add_argument('--out', type=Path, default=Path('results/demo/extrapolation'))
    parser.add_argument('--image', default='skimage:astronaut', help='photo for the attention figure')
    return parser.parse_args()


def train(name: str, args: argparse.Namespace) -> Path:
    config = REPO_ROOT / 'configs' / 'vit' / f'vit-t2_{name}_fmnist-28.py'
    work_dir = args.work_root / config.stem
    options = {'train_cfg.max_epochs': args.epochs, 'param_scheduler.1.end': args.epochs,
               'train_dataloader.dataset.subset': args.train_subset, 'val_dataloader.dataset.subset': args.test_subset,
               'default_hooks.logger.interval': 10 ** 6, 'log_level': 'WARNING'}
    cfg = load_config(config, options, work_dir)
    start = time.perf_counter()
    with named_unknown_types():
        build_runner(cfg).train()
    print(f'trained {config.stem}: {args.epochs} epochs of {args.train_subset} images in '
          f'{time.perf_counter() - start:.0f} s -> {work_dir}', flush=True)
    return work_dir


def main() -> int:
    args = parse_args()
    if args.epochs < 2:
        print('--epochs must be at least 2 (one warm-up epoch, then cosine decay).', file=sys.stderr)
        return 2
    missing = [name for name in args.encodings
               if not (REPO_ROOT / 'configs' / 'vit' / f'vit-t2_{name}_fmnist-28.py').is_file()]
    if missing:
        known = sorted(p.name[len('vit-t2_'):-len('_fmnist-28.py')] for p in (REPO_ROOT / 'configs' / 'vit').glob(
            'vit-t2_*_fmnist-28.py'))
        print(f'No config for {missing}; choose from {known}.', file=sys.stderr)
        return 2
    work_dirs = [train(name, args) for name in args.encodings]
    command = [sys.executable, str(REPO_ROOT / 'tools' / 'eval_resolution.py'), *map(str, work_dirs),
               '--sizes', *map(str, args.sizes), '--subset', str(args.test_subset), '--out', str(args.out)]
    if subprocess.run(command).returncode != 0:
        return 1
    figure = args.out.parent / f'attention_{work_dirs[-1].name}.png'
    command = [sys.executable, str(REPO_ROOT / 'tools' / 'vis_attention.py'), str(next(work_dirs[-1].glob('*.py'))),
               str(work_dirs[-1] / 'best.pth'), '--image', args.image, '--sizes', *map(str, args.sizes[:2]),
               '--query', 'center', '--heads', 'all', '--out', str(figure)]
    return subprocess.run(command).returncode


if __name__ == '__main__':
    sys.exit(main())
