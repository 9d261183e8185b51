"""Rendered target views beside the ground truth, for a trained novel-view synthesis model.

    vispe vis-nvs configs/nvs/srt-s_gta_mv-scenes.py work_dirs/.../best.pth --scenes 0 1 2 --out nvs.png

One row per scene of the config's test split: its input views, then each target view's ground truth, the model's
rendering and the absolute error, with the view's PSNR over all pixels and over object pixels in the titles.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import torch

import vispe
from vispe.engine import load_config
from vispe.engine.arguments import (InvalidArgument, existing_config, existing_file, non_negative_int, reported_by,
                                    run_main, writable_output)
from vispe.engine.cli import ConfigOptionsAction
from vispe.evaluation.nvs_metric import view_quality
from vispe.registry import DATASETS, FUNCTIONS, MODELS


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe vis-nvs``."""
    parser = argparse.ArgumentParser(prog='vispe vis-nvs', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--scenes', type=non_negative_int, nargs='+', default=[0, 1, 2],
                        help='indices into the test split (default 0 1 2)')
    parser.add_argument('--out', type=Path, default=Path('nvs.png'), help='the figure (.png)')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptionsAction, default={},
                        help='override config entries, e.g. test_dataloader.dataset.split=val')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        args.config = existing_config(args.config, 'config')
        existing_file(Path(args.checkpoint), 'checkpoint')
        writable_output(args.out, '--out', suffixes=('.png',))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt

    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    dataset = DATASETS.build(cfg.test_dataloader.dataset)
    too_far = [index for index in args.scenes if index >= len(dataset)]
    if too_far:
        raise InvalidArgument('--scenes', too_far, f'beyond the {len(dataset)} scenes of the test split',
                              f'give indices below {len(dataset)}')
    collate = FUNCTIONS.get(cfg.test_dataloader.collate_fn['type'].split('.')[-1])
    model = MODELS.build(cfg.model).eval()
    vispe.load_checkpoint(model, args.checkpoint)
    rows = []
    for index in args.scenes:
        batch = collate([dataset[index]])
        with torch.no_grad():
            [result] = model(batch['inputs'], batch['data_samples'], 'predict')
        rows.append((batch['inputs']['images'][0], result))
    inputs, targets = rows[0][0].shape[0], rows[0][1]['pred'].shape[0]
    columns = inputs + 3 * targets
    figure, axes = plt.subplots(len(rows), columns, figsize=(1.6 * columns, 1.4 * len(rows)), squeeze=False)
    for row, (images, result) in zip(axes, rows):
        panels = [(image, f'input {view}') for view, image in enumerate(images)]
        for view in range(targets):
            quality = view_quality(result['pred'][view], result['target'][view], result['objects'][view])
            error = (result['pred'][view] - result['target'][view]).abs().mean(0, keepdim=True).expand(3, -1, -1)
            panels += [(result['target'][view], f'target {view}'),
                       (result['pred'][view], f'{quality["psnr"]:.1f} dB / obj {quality["psnr_objects"]:.1f}'),
                       ((error * 4).clamp(0, 1), 'error x4')]
        for axis, (image, title) in zip(row, panels):
            axis.imshow(image.permute(1, 2, 0).clamp(0, 1).numpy())
            axis.set_title(title, fontsize=7)
            axis.axis('off')
    figure.suptitle(f'{Path(args.config).stem}: {Path(args.checkpoint).name}, test scenes {args.scenes}', fontsize=8)
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    partial = args.out.with_name(args.out.stem + '.partial.png')
    figure.savefig(partial, dpi=120)
    partial.replace(args.out)
    print(f'{args.out}: {len(rows)} scenes, {inputs} input and {targets} target views each')
    return 0


if __name__ == '__main__':
    run_main(main)
