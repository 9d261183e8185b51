"""Depth from crops, looked at: one image's 3 x 3 grid of crops, each crop's true depth and every run's prediction.

    vispe vis-crop-depth work_dirs/vit-t4_kpe-center-corner_mv-crops-depth work_dirs/vit-t4_crop-box_... \\
        --image test-wide:0 --out crops.png
    vispe vis-crop-depth work_dirs/vit-t4_kpe-center-corner_mv-crops-depth ... --image stereo-motorcycle

``--image SPLIT:INDEX`` takes an image of the runs' crops set (the first run's config); ``stereo-motorcycle`` takes
the real Middlebury pair bundled with scikit-image: the left image, its depth from the ground-truth disparity and the
calibration in skimage's docstring (Z = f·B / (d + doffs), f 994.978 px, B 193.001 mm, doffs 31.086 px, principal
point (311.193, 254.877)). The rendered set is a synthetic ground-plane world, so on the real image the check is
qualitative: does the prediction follow where the crop lies? Rows: crop, true depth, one per run (AbsRel of the crop
in the title; one colour scale for the truth and the predictions; white: unknown depth).
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

import vispe
from vispe.datasets.crop_depth import cut_crop, grid_crops
from vispe.datasets.stereo_motorcycle import motorcycle_rgbd
from vispe.engine import load_config
from vispe.engine.arguments import InvalidArgument, reported_by, run_main, writable_output
from vispe.evaluation.crop_depth_metric import crop_depth_errors
from vispe.registry import DATASETS, MODELS

def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe vis-crop-depth``."""
    parser = argparse.ArgumentParser(prog='vispe vis-crop-depth', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('runs', nargs='+', type=Path, help='work dirs of crop-depth runs (config and best.pth)')
    parser.add_argument('--image', default='test:0', help="SPLIT:INDEX of the crops set, or 'stereo-motorcycle'")
    parser.add_argument('--checkpoint-name', default='best.pth', help='checkpoint file inside a work dir')
    parser.add_argument('--out', type=Path, default=Path('crops.png'), help='the figure (.png)')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        writable_output(args.out, '--out', suffixes=('.png',))
        for run in args.runs:
            if not (run / args.checkpoint_name).is_file() or not list(run.glob('*.py')):
                raise InvalidArgument('runs', str(run), f'holds no config (.py) and {args.checkpoint_name}',
                                      'give the work dir a training run wrote')
    return args


def set_image(cfg, spec: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """SPLIT:INDEX of the config's crops set: image, depth, K."""
    split, _, index = spec.partition(':')
    if not index.isdigit():
        raise InvalidArgument('--image', spec, "is neither SPLIT:INDEX nor 'stereo-motorcycle'", 'e.g. test-wide:0')
    dataset = DATASETS.build(dict(cfg.test_dataloader.dataset, split=split))
    if int(index) >= len(dataset.files):
        raise InvalidArgument('--image', spec, f'is beyond the {len(dataset.files)} images of {split}',
                              'give a smaller index')
    data = dataset.load(int(index))
    return data['image'], data['depth'], data['intrinsics']


@torch.inference_mode()
def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    configs = [load_config(sorted(run.glob('*.py'))[0]) for run in args.runs]
    image, depth, intrinsics = motorcycle_rgbd() if args.image == 'stereo-motorcycle' else set_image(configs[0], args.image)
    height, width = depth.shape
    crop_size = configs[0].test_dataloader.dataset.get('crop_size', 32)
    side = round(configs[0].test_dataloader.dataset.get('eval_side', 0.5) * height)
    crops = [cut_crop(image, depth, x0, y0, side, crop_size) + (offset_bin,)
             for x0, y0, offset_bin in grid_crops(height, width, side)]
    inputs = dict(image=torch.stack([crop[0] for crop in crops]), crop_box=torch.stack([crop[2] for crop in crops]),
                  intrinsics=torch.from_numpy(np.asarray(intrinsics, np.float32)).expand(len(crops), 3, 3),
                  image_size=torch.tensor([[height, width]]).expand(len(crops), 2))
    predictions = []
    for run, cfg in zip(args.runs, configs):
        model = MODELS.build(cfg.model).eval()
        vispe.load_checkpoint(model, run / args.checkpoint_name)
        predictions.append((run.name, model(inputs)))

    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    truths = torch.stack([crop[1] for crop in crops])
    vmax = float(max(truths.max(), *(predicted[truths > 0].max() for _, predicted in predictions)))
    colours = matplotlib.colormaps['viridis'].with_extremes(bad='white')
    rows = 2 + len(predictions)
    figure, axes = plt.subplots(rows, len(crops), figsize=(1.6 * len(crops), 1.8 * rows), dpi=110, squeeze=False)
    for column, (rgb, truth, box, offset_bin) in enumerate(crops):
        axes[0, column].imshow(rgb.permute(1, 2, 0).numpy())
        axes[0, column].set_title(f'{offset_bin} ({int(box[0])}, {int(box[1])})', fontsize=6)
        unknown = (truth <= 0).numpy()
        axes[1, column].imshow(np.ma.masked_where(unknown, truth.numpy()), cmap=colours, vmin=0, vmax=vmax)
        axes[1, column].set_title('true depth' if column == 0 else '', fontsize=6)
        for row, (label, predicted) in enumerate(predictions, start=2):
            axes[row, column].imshow(np.ma.masked_where(unknown, predicted[column].numpy()), cmap=colours, vmin=0,
                                     vmax=vmax)
            absrel = crop_depth_errors(predicted[column], truth)['absrel']
            axes[row, column].set_title((f'{label[:28]}\n' if column == 0 else '') + f'AbsRel {absrel:.2f}', fontsize=5)
    for axis in axes.flat:
        axis.set_xticks([])
        axis.set_yticks([])
    figure.suptitle(f'depth from crops: {args.image} ({height}x{width}, fx {float(intrinsics[0][0]):.0f} px), '
                    f'depth 0-{vmax:.1f} m', fontsize=8)
    figure.tight_layout()
    figure.savefig(args.out)
    plt.close(figure)
    print(f'{args.out}: {len(crops)} crops, {len(predictions)} runs')
    return 0


if __name__ == '__main__':
    run_main(main)
