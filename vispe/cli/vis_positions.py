"""Draw the 3D points a multi-view detector's camera encoding uses, in 3D and re-projected onto the images.

    vispe vis-positions configs/petr/petr-r18_petr-lid_mv-scenes.py --scene 0 --bins 4 --out petr.png
    vispe vis-positions configs/petr/petr-r18_3dppe_mv-scenes.py --scene 0 --depth gt --out 3dppe.png
    vispe vis-positions configs/petr/petr-r18_3dppe_mv-scenes.py work_dirs/.../best.pth --scene 0

PETR (petr-lid, petr-ud): the frustum points of every feature cell at its D depth bins (``--bins K`` keeps every
K-th). 3DPPE: one point per cell at the depth its depth net predicts (needs a checkpoint) or at the cell's LiDAR
depth (``--depth gt``). "No 3D PE" (MultiViewSine) has no points; the figure says so. Sample ``--scene N`` of the
config's test split (or ``--split``). The top row is a bird's-eye view and a 3D view of the points (colour: camera)
with the LiDAR points (grey) and the ground-truth boxes (green); below, the points projected back into each camera
with the same cameras the encoding saw, over the feature-cell grid (colour: depth): every point lands on its cell's
pixel (PETR's top-left pixel of the cell); the title gives the largest distance.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from mmengine.config import Config

import vispe
from vispe.engine import load_config, named_unknown_types
from vispe.engine.arguments import (InvalidArgument, existing_config, existing_file, non_negative_int, positive_int,
                                    reported_by, run_main, writable_output)
from vispe.encodings.ppe3d import PPE3D
from vispe.geometry import box_corners
from vispe.registry import MODELS
from vispe.visualization.encoding_points import EncodingPoints, check_encoding, encoding_points
from vispe.visualization.multiview import (BOX_EDGES, camera_colors, draw_bev_boxes, draw_bev_cameras,
                                           draw_cell_grid, panel_views, save_figure, setup_bev, show_image)
from vispe.visualization.multiview_scene import MultiViewSample, Progress, load_sample

PETR_CONFIGS = 'configs/petr/petr-r18_{petr-lid,petr-ud,3dppe,nope}_mv-scenes.py'
LIDAR_SHOWN = 6000  # LiDAR points drawn at most (a seeded subset)
GT_COLOR = 'tab:green'
NO_POINTS = 'no 3D points:\nthis encoding\'s keys encode\ncamera, row and column (2D)'


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe vis-positions``."""
    parser = argparse.ArgumentParser(prog='vispe vis-positions', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint', nargs='?', default=None,
                        help='optional: trained weights (3DPPE: its depth net predicts the depth of the points)')
    parser.add_argument('--scene', type=non_negative_int, default=0, help='sample index in the split')
    parser.add_argument('--split', default=None, help="data split (default: the config's test split)")
    parser.add_argument('--data-root', type=Path, default=None, help="default: the config's data_root")
    parser.add_argument('--bins', type=positive_int, default=1, help='PETR: draw every K-th depth bin')
    parser.add_argument('--depth', choices=['predicted', 'gt'], default=None,
                        help="3DPPE: the predicted depth (needs a checkpoint; the default with one) or the LiDAR "
                             "depth ('gt', the default without)")
    parser.add_argument('--out', type=Path, default=Path('positions.png'))
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        args.config = existing_config(args.config, 'config')
        if args.checkpoint is not None:
            existing_file(args.checkpoint, 'checkpoint')
        writable_output(args.out, '--out')
    return args


def build_model(args: argparse.Namespace) -> tuple[torch.nn.Module, Config]:
    """The config's detector (eval mode), refused unless it is a multi-view 3D detector, with the checkpoint."""
    cfg = load_config(args.config)
    if cfg.model.get('type') != 'PETRDetector':
        raise InvalidArgument('config', args.config, f'its model ({cfg.model.get("type")}) has no camera encoding '
                              f'with 3D points', f'give a multi-view 3D detection config ({PETR_CONFIGS})')
    with named_unknown_types():
        model = MODELS.build(cfg.model).eval()
    check_encoding(model)
    if isinstance(model.encoding, PPE3D):
        if args.depth is None:
            args.depth = 'predicted' if args.checkpoint else 'gt'
        if args.depth == 'predicted' and args.checkpoint is None:
            raise InvalidArgument('--depth', 'predicted', 'an untrained depth net predicts nothing meaningful',
                                  'give a checkpoint, or --depth gt for the LiDAR depth')
    elif args.depth is not None:
        raise InvalidArgument('--depth', args.depth, f'only 3DPPE has per-cell depths; this config\'s encoding is '
                              f'{type(model.encoding).__name__}', 'leave out --depth')
    if args.checkpoint is not None:
        vispe.load_checkpoint(model, args.checkpoint)
    return model, cfg


def draw(sample: MultiViewSample, found: EncodingPoints, title: str, out: Path) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.gridspec import GridSpec

    colors = camera_colors(len(sample.channels))
    figure = plt.figure(figsize=(11, 9.5))
    grid = GridSpec(3, 3, figure=figure, height_ratios=[1.6, 1, 1])
    points = found.points[found.valid].numpy()  # (P, 3)
    view_of = torch.arange(found.points.shape[0])[:, None, None, None].expand(found.valid.shape)[found.valid].numpy()
    lidar = sample.lidar_points
    if len(lidar) > LIDAR_SHOWN:
        lidar = lidar[np.random.default_rng(0).choice(len(lidar), LIDAR_SHOWN, replace=False)]
    extent = np.abs(np.concatenate([points[:, :2], sample.gt_boxes[:, :2].numpy(), [[10.0, 10.0]]])).max() * 1.05
    lidar = lidar[(np.abs(lidar[:, :2]) <= extent).all(1)]

    bev = figure.add_subplot(grid[0, 0])
    bev.scatter(lidar[:, 1], lidar[:, 0], s=0.3, color='0.7', linewidths=0)
    bev.scatter(points[:, 1], points[:, 0], s=3, c=colors[view_of], linewidths=0)
    draw_bev_boxes(bev, sample.gt_boxes, GT_COLOR, [sample.classes[int(label)] for label in sample.gt_labels])
    draw_bev_cameras(bev, found.cameras, colors, labels=[name.replace('CAM_', '') for name in sample.channels])
    setup_bev(bev, (-extent, -extent, extent, extent), "bird's-eye view (colour: camera)")

    scene = figure.add_subplot(grid[0, 1:], projection='3d')
    scene.scatter(lidar[:, 0], lidar[:, 1], lidar[:, 2], s=0.2, color='0.7', linewidths=0)
    scene.scatter(points[:, 0], points[:, 1], points[:, 2], s=3, c=colors[view_of], linewidths=0)
    for corners in box_corners(sample.gt_boxes).numpy():
        for a, b in BOX_EDGES:
            scene.plot(*corners[[a, b]].T, color=GT_COLOR, linewidth=0.8)
    scene.set_xlabel('x (m)', fontsize=6)
    scene.set_ylabel('y (m)', fontsize=6)
    scene.set_zlabel('z (m)', fontsize=6)
    scene.tick_params(labelsize=5)
    scene.set_xlim(-extent, extent)
    scene.set_ylim(-extent, extent)
    scene.set_box_aspect((1, 1, 0.4))
    scene.view_init(elev=25, azim=200)
    scene.set_title('3D view (grey: LiDAR, green: ground truth)', fontsize=7)
    if found.kind == 'none':
        note = dict(ha='center', va='center', fontsize=8, color='tab:red', bbox=dict(facecolor='white', alpha=0.85))
        bev.text(0.5, 0.5, NO_POINTS, transform=bev.transAxes, **note)
        scene.text2D(0.5, 0.5, NO_POINTS, transform=scene.transAxes, **note)

    pixels, _ = found.reproject()
    images = sample.images()
    depth_max = float(found.depths[found.valid].max()) if bool(found.valid.any()) else 1.0
    for panel, view in enumerate(panel_views(sample.channels)):
        axis = figure.add_subplot(grid[1 + panel // 3, panel % 3])
        show_image(axis, images[view], sample.channels[view])
        draw_cell_grid(axis, found.feat_size, found.cameras.image_size)
        keep = found.valid[view]
        if bool(keep.any()):
            uv = pixels[view][keep].numpy()
            axis.scatter(uv[:, 0], uv[:, 1], s=4, c=found.depths[view][keep].numpy(), cmap='viridis', vmin=0,
                         vmax=depth_max, linewidths=0)
    figure.suptitle(title, fontsize=8)
    figure.tight_layout()
    save_figure(figure, out)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    progress = Progress()
    progress(f'building {Path(args.config).name}')
    model, cfg = build_model(args)
    progress(f'loading sample {args.scene}')
    sample = load_sample(cfg.test_dataloader.dataset, args.scene, args.split, args.data_root,
                         with_depth=True if args.depth == 'gt' else None)
    progress(f'computing the points of {type(model.encoding).__name__} for {sample.describe()}')
    found = encoding_points(model, sample.batch, args.bins, args.depth or 'predicted')
    error = found.reprojection_error()
    count = int(found.valid.sum())
    title = (f'{Path(args.config).stem}, {sample.describe()}\n{found.description}; {count} points, '
             f'{found.feat_size[0]}x{found.feat_size[1]} cells per camera')
    if found.kind != 'none':
        title += f'; re-projected onto their cells within {error:.3g} px'
    progress(f'drawing {count} points')
    draw(sample, found, title, args.out)
    print(f'{found.description}: {count} points; largest re-projection distance {error:.3g} px')
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    run_main(main)
