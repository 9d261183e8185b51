"""The ``vispe`` command: one subcommand per tool, each with the tool's own arguments and outputs.

    vispe                                   # the subcommands, one line each
    vispe train vispe::vit/vit-t4_rope-mixed_fmnist-28.py --cfg-options train_cfg.max_epochs=1
    vispe eval-resolution work_dirs/vit-t4_* --sizes 28 56
    vispe dataset point-scenes --train 50 --val 10 --test 0 --out datasets/pt-small
    vispe list configs vit/                 # packaged configs, usable as vispe::<name>
    vispe <command> --help                  # the tool's own help

A subcommand imports its module (``vispe.cli.<module>``) only when it runs, so ``vispe --help`` and
``vispe list`` are fast and need no extra. ``python -m vispe`` is the same command; in a checkout
``python tools/<module>.py`` runs the same ``main``.
"""
from __future__ import annotations

import difflib
import importlib
import sys
from dataclasses import dataclass
from typing import Sequence

PROG = 'vispe'


@dataclass(frozen=True)
class Command:
    """One subcommand: the module under ``vispe.cli`` whose ``main(argv)`` runs it, and its line in the listing."""

    module: str
    summary: str


DATASET_COMMANDS = {
    'fmnist-detection': Command('dataset_converters.fmnist_detection',
                                'write fmnist-det, Fashion-MNIST items pasted on a canvas (2D detection)'),
    'multiview-scenes': Command('dataset_converters.multiview_scenes',
                                'render mv-scenes (multi-camera 3D detection; --task nvs|crops for the others)'),
    'point-scenes': Command('dataset_converters.point_scenes',
                            'scan pt-scenes (point-cloud 3D detection, ScanNet layout)'),
}

COMMANDS = {
    'train': Command('train', 'train a model from a config'),
    'test': Command('test', 'evaluate a checkpoint on a config\'s test set'),
    'eval-resolution': Command('eval_resolution', 'evaluate trained models at several input sizes'),
    'vis-attention': Command('vis_attention', 'draw where a query attends, at several input sizes'),
    'vis-encoding': Command('vis_encoding', 'draw what encodings do before any training'),
    'vis-positions': Command('vis_positions', 'draw the 3D points of a multi-view detector\'s camera encoding'),
    'vis-orientation': Command('vis_orientation', 'draw predicted against true yaw of a multi-view detector'),
    'vis-crop-depth': Command('vis_crop_depth', 'draw depth-from-crops predictions on one image'),
    'vis-nvs': Command('vis_nvs', 'draw novel-view renderings beside the ground truth'),
    'nvs-mean-image': Command('nvs_mean_image', 'score the mean-image floor of novel-view synthesis'),
    'benchmark': Command('benchmark', 'time every encoding at every resolution'),
    'compare-trees': Command('compare_trees', 'benchmark two checkouts of vispe side by side'),
    'convert': Command('convert_checkpoint', 'convert a released checkpoint into vispe\'s module names'),
    'export': Command('export', 'export a detector to ONNX, checked with onnxruntime'),
    'infer-points': Command('infer_points', 'detect 3D boxes in your own point cloud'),
    'compress': Command('gaussians.compress', 'compress a 3DGS .ply into a .vgs bitstream'),
    'decompress': Command('gaussians.decompress', 'decompress a .vgs bitstream into a 3DGS .ply'),
    'gaussians-from-points': Command('gaussians.from_points', 'initialise 3DGS Gaussians from a coloured point cloud'),
    'gaussians-report': Command('gaussians.report', 'rate-distortion report of Gaussian bitstreams'),
    'dataset': Command('', 'write a data set: ' + ', '.join(DATASET_COMMANDS)),
    'demo': Command('demo', 'train small ViTs on Fashion-MNIST and compare them across sizes'),
    'zoo-card': Command('zoo_card', 'write model-zoo cards from a work dir and an eval JSON'),
    'three-cell': Command('three_cell', 'score 2D encodings on the Three Cell Experiment (LOOPE)'),
    'list': Command('', 'list the encodings and the packaged configs (list configs [PATTERN], list encodings)'),
}


def listing(commands: dict[str, Command], prefix: str) -> str:
    """The subcommands, one line each with its summary."""
    width = max(map(len, commands)) + 2
    return '\n'.join(f'  {prefix}{name:<{width}}{command.summary}' for name, command in commands.items())


def usage() -> str:
    return (f'usage: {PROG} <command> [arguments]   ({PROG} <command> --help: its arguments)\n\n'
            f'commands:\n{listing(COMMANDS, "")}\n')


def closest(name: str, known: Sequence[str]) -> str:
    """The error text for an unknown subcommand: the closest known ones (difflib), then all of them."""
    close = difflib.get_close_matches(name, known, n=2, cutoff=0.5)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
    return f'unknown command {name!r}.{hint} Commands: {", ".join(known)}.'


def run(command: Command, argv: Sequence[str]) -> int:
    """Import the subcommand's module and run its ``main(argv)``; an InvalidArgument found after parsing is
    printed as argparse prints its errors (exit status 2)."""
    from vispe.engine.arguments import InvalidArgument
    module = importlib.import_module(f'vispe.cli.{command.module}')
    try:
        return module.main(list(argv))
    except InvalidArgument as error:
        print(f'{PROG}: error: {error}', file=sys.stderr)
        return 2


def dispatch(commands: dict[str, Command], argv: Sequence[str], prefix: str) -> int:
    """Run ``argv[0]`` of ``commands`` with the rest; no name prints the listing, an unknown one the closest."""
    if not argv or argv[0] in ('-h', '--help'):
        print(usage() if not prefix else f'usage: {PROG} {prefix}<name> [arguments]\n\n{listing(commands, prefix)}')
        return 0
    name, rest = argv[0], argv[1:]
    if name not in commands:
        print(f'{PROG} {prefix}'.rstrip() + ': error: ', closest(name, list(commands)),
              sep='', file=sys.stderr)
        return 2
    if name == 'dataset':
        return dispatch(DATASET_COMMANDS, rest, 'dataset ')
    if name == 'list':
        from vispe.cli.listing import main as list_main
        return list_main(rest)
    return run(commands[name], rest)


def main(argv: Sequence[str] | None = None) -> int:
    """``vispe <command> [arguments]``; returns the exit status (0: done, 2: bad command line)."""
    return dispatch(COMMANDS, sys.argv[1:] if argv is None else list(argv), '')


if __name__ == '__main__':
    sys.exit(main())
