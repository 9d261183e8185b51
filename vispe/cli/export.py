"""Export a detector's network forward to ONNX and check the file with onnxruntime.

    vispe export configs/petr/petr-r18_petr-lid_mv-scenes.py --out petr.onnx --checkpoint best.pth \\
        [--image-size 90 160] [--views 6] [--points 4096] [--batch 1] [--atol 1e-4] [--rtol 1e-4] [--no-check]

The file holds the network forward on tensors (vispe.export: PETRNetwork, VDETRNetwork, DETRNetwork) at one input
size: PETR / 3DPPE take ``images`` (B, V, 3, H, W), ``intrinsics`` (B, V, 3, 3) and ``lidar2cam`` (B, V, 4, 4), so
any rig of V cameras runs through the same file; V-DETR takes ``points`` (B, N, 3 + C); DETR ``images`` (B, 3, H, W).
The outputs are the last decoder layer's class logits and boxes (box codes for PETR); the post-processing (PETR's
top-k decoding, V-DETR's NMS, DETR's scaling to the image) stays outside the file (docs/export.md).

Sizes: ``--image-size`` defaults to the config's test set ``image_size``, ``--points`` to its ``num_points``;
``--views`` to 6 (mv-scenes and nuScenes rigs). The backbone's pretrained weights are never downloaded: the
checkpoint (read by vispe's allow-list loader, never unpickled) holds the weights; without one the network is the
config's untrained initialisation (seed 0). The file is written atomically; then, unless ``--no-check``, onnxruntime
runs it on seeded example inputs (PETR: a ring of cameras) and the tool exits 1 when an output differs from the eager
model's by more than ``atol + rtol · |eager|``.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

import vispe
from vispe.engine import load_config, named_unknown_types
from vispe.engine.arguments import (InvalidArgument, existing_config, existing_file, non_negative_float, positive_int,
                                    reported_by, run_main, writable_output)
from vispe.engine.cli import ConfigOptionsAction
from vispe.export import PETRNetwork, VDETRNetwork, detector_network, example_inputs, export_onnx, run_onnx
from vispe.registry import MODELS

DEFAULT_VIEWS = 6


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe export``."""
    parser = argparse.ArgumentParser(prog='vispe export', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config', help='a detector config (configs/petr, configs/vdetr, configs/detr)')
    parser.add_argument('--out', type=Path, required=True, help='the .onnx file to write')
    parser.add_argument('--checkpoint', help='weights to export (a vispe or converted checkpoint)')
    parser.add_argument('--image-size', type=positive_int, nargs=2, metavar=('H', 'W'),
                        help="image size of the file (default: the config's test set image_size)")
    parser.add_argument('--views', type=positive_int, default=DEFAULT_VIEWS,
                        help='cameras of a multi-view detector (6)')
    parser.add_argument('--points', type=positive_int,
                        help="points per scene of a point detector (default: the config's test set num_points)")
    parser.add_argument('--batch', type=positive_int, default=1, help='samples per run of the file (1)')
    parser.add_argument('--atol', type=non_negative_float, default=1e-4, help='absolute tolerance of the check')
    parser.add_argument('--rtol', type=non_negative_float, default=1e-4, help='relative tolerance of the check')
    parser.add_argument('--no-check', action='store_true', help='write the file without running onnxruntime')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptionsAction, default={},
                        help='override config entries, e.g. model.num_queries=100')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        args.config = existing_config(args.config, 'config')
        if args.checkpoint:
            existing_file(Path(args.checkpoint), '--checkpoint')
        if args.out.suffix.lower() != '.onnx':
            raise InvalidArgument('--out', args.out, 'is not an .onnx file', 'give a path ending in .onnx')
        writable_output(args.out, '--out')
    return args


def test_dataset(cfg: Any) -> dict[str, Any]:
    """The config's test (else validation) dataset settings, or an empty dict."""
    for key in ('test_dataloader', 'val_dataloader'):
        dataset = (cfg.get(key) or {}).get('dataset')
        if dataset:
            return dict(dataset)
    return {}


def export_sizes(args: argparse.Namespace, cfg: Any, network: torch.nn.Module) -> dict[str, Any]:
    """The example_inputs sizes of the file: image size (and views) of an image detector, points of a point one."""
    dataset = test_dataset(cfg)
    if isinstance(network, VDETRNetwork):
        points = args.points or dataset.get('num_points')
        if not points:
            raise InvalidArgument('--points', None, 'the config has no test set num_points',
                                  'give the points per scene, e.g. --points 4096')
        if points < network.detector.backbone.num_samples:
            raise InvalidArgument('--points', points, f'the backbone samples {network.detector.backbone.num_samples} '
                                                      f'points of each scene', 'give at least that many')
        return dict(points=int(points))
    size = args.image_size or dataset.get('image_size')
    if not size:
        raise InvalidArgument('--image-size', None, 'the config has no test set image_size',
                              'give the image size of the file, e.g. --image-size 90 160')
    size = (int(size), int(size)) if isinstance(size, (int, float)) else (int(size[0]), int(size[1]))
    return dict(image_size=size, views=args.views if isinstance(network, PETRNetwork) else None)


def build_network(args: argparse.Namespace) -> tuple[torch.nn.Module, Any]:
    """The config's detector (weights from ``--checkpoint``; no pretrained download) as its exportable network."""
    cfg = load_config(args.config, args.cfg_options)
    backbone = cfg.model.get('backbone')
    if isinstance(backbone, dict) and 'pretrained' in backbone:
        backbone['pretrained'] = False
    torch.manual_seed(0)
    with named_unknown_types():
        model = MODELS.build(cfg.model)
    try:
        network = detector_network(model)
    except TypeError as error:
        raise InvalidArgument('config', args.config, str(error).rstrip('.'), 'give a detector config') from None
    if args.checkpoint:
        vispe.load_checkpoint(model, args.checkpoint)
    else:
        print('no --checkpoint: exporting the untrained network of the config (seed 0)')
    return network, cfg


def describe(names: list[str], tensors: list[Any]) -> str:
    return ', '.join(f'{name} {tuple(tensor.shape)}' for name, tensor in zip(names, tensors))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    network, cfg = build_network(args)
    inputs = example_inputs(network, args.batch, **export_sizes(args, cfg, network))
    path = export_onnx(network, inputs, args.out)
    with torch.no_grad():
        expected = network(*inputs)
    print(f'wrote {path}: inputs {describe(list(network.input_names), list(inputs))}; '
          f'outputs {describe(list(network.output_names), list(expected))}')
    if args.no_check:
        return 0
    status = 0
    for name, output, reference in zip(network.output_names, run_onnx(path, inputs), expected):
        reference = reference.numpy()
        difference = np.abs(output - reference)
        within = bool((difference <= args.atol + args.rtol * np.abs(reference)).all())
        print(f'onnxruntime vs eager, {name}: max |difference| {difference.max():.3g}'
              f'{"" if within else f" > {args.atol} + {args.rtol} x |eager|"}')
        status |= not within
    return int(status)


if __name__ == '__main__':
    run_main(main)
