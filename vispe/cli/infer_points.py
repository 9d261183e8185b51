"""Detect 3D boxes in your own scan with a trained point-cloud detector.

    vispe infer-points configs/vdetr/vdetr-s_vertex-rpe_pt-scenes.py work_dirs/.../best.pth scan.ply \\
        [--up z|y] [--units 1.0] [--voxel-size 0.02] [--score-threshold 0.3] [--out boxes]

Input (``.ply``, ``.pcd`` or ``.npy`` of any size and density, read by :func:`vispe.geometry.read_points`): xyz in
metres (``--units`` scales other units to metres, e.g. 0.001 for millimetres), gravity along −z (``--up y`` turns a
y-up scan, as many phone and photogrammetry scans are, into z-up), colour optional (a model trained with colour gets
the training colours' mean for a scan without any, and a warning). The scan is brought to the density the model was
trained on: voxel down-sampling at ``--voxel-size`` (pt-scenes: 2 cm; ScanNet's meshes: about the same), then a
fixed seeded sample of the config's test point budget (with repeats, as 3DETR, when the scan has fewer points).

Checks: the numeric options must be finite (``--units`` and ``--voxel-size`` above 0, ``--score-threshold`` in
0..1); points with NaN or inf are dropped with a warning that counts them; a ``.npy`` whose rgb is all <= 1 (0..1
colours where 0..255 are read) is refused. A scan whose horizontal extent (in metres, after ``--units``; the
larger of its x and y spans between the 1st and 99th percentiles of the points) is more than
``EXTENT_FACTOR`` (4) times larger than the largest, or smaller than the smallest, training scene (the config's
``scene_extent``, times the test set's ``scene_scale``) gets a warning with the ``--units`` that would bring it
into range: a millimetre scan read as metres gives hundreds of meaningless boxes.

Writes ``<out>.json`` (each box: centre and size in the scan's own frame and units; yaw counter-clockwise about the
up axis, seen from above; class and score) and
``<out>.ply`` (the scan's points with each box's edges drawn in red), both atomically.
"""
from __future__ import annotations

import argparse
import json
import math
import warnings
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

import vispe
from vispe.datasets.point_scenes import MEAN_COLOR_RGB
from vispe.engine import load_config
from vispe.engine.cli import ConfigOptionsAction
from vispe.engine.arguments import (existing_config, existing_file, positive_float, reported_by, run_main,
                                    unit_fraction, writable_output)
from vispe.engine.benchmark_common import write_text_atomically
from vispe.geometry import box_corners, read_points, voxel_down_sample, write_points
from vispe.registry import MODELS

# Box edges as pairs of box_corners indices (front face, rear face, the four joining edges).
EDGES = ((0, 1), (1, 2), (2, 3), (3, 0), (4, 5), (5, 6), (6, 7), (7, 4), (0, 4), (1, 5), (2, 6), (3, 7))
# y-up to z-up: (x, y, z) -> (x, -z, y), a rotation of +90 degrees about x.
Y_UP_TO_Z_UP = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
# A scan this many times larger than the largest training scene, or smaller than the smallest, gets a warning.
EXTENT_FACTOR = 4.0


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe infer-points``."""
    parser = argparse.ArgumentParser(prog='vispe infer-points', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('scan', help='.ply, .pcd or .npy point cloud')
    parser.add_argument('--up', choices=('z', 'y'), default='z', help="the scan's up axis (default z)")
    parser.add_argument('--units', type=positive_float, default=1.0, help='metres per scan unit (default 1.0)')
    parser.add_argument('--voxel-size', type=positive_float, default=0.02,
                        help='down-sampling voxel in metres (0.02)')
    parser.add_argument('--score-threshold', type=unit_fraction, default=0.3,
                        help='boxes kept above this score, 0 to 1 (0.3)')
    parser.add_argument('--out', type=Path, default=Path('boxes'), help='writes <out>.json and <out>.ply')
    parser.add_argument('--cfg-options', nargs='+', action=ConfigOptionsAction, default={},
                        help='override config entries, e.g. model.test_cfg.nms_iou=0.5')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        args.config = existing_config(args.config, 'config')
        existing_file(Path(args.checkpoint), 'checkpoint')
        existing_file(Path(args.scan), 'scan')
        writable_output(args.out.with_suffix('.json'), '--out')
    return args


def training_extent(cfg: Any) -> tuple[float, float] | None:
    """The training scenes' horizontal extent in metres (the config's ``scene_extent`` times the test set's
    ``scene_scale``), or None when the config does not give it."""
    value = cfg.get('scene_extent')
    if value is None:
        return None
    if (not isinstance(value, (list, tuple)) or len(value) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value)
            or not 0 < value[0] <= value[1]):
        raise ValueError(f'Config {cfg.filename}: scene_extent must be (smallest, largest) training scene extent in '
                         f'metres, 0 < smallest <= largest; got {value!r}. E.g. scene_extent = (4.0, 7.0) '
                         f'(pt-scenes).')
    scale = float(cfg.test_dataloader.dataset.get('scene_scale', 1.0))
    return value[0] * scale, value[1] * scale


def scan_extent(xyz: np.ndarray) -> float:
    """The larger of the x and y spans of z-up points (N, 3) between their 1st and 99th percentiles (stray points
    do not count)."""
    low, high = np.percentile(xyz[:, :2], [1, 99], axis=0)
    return float((high - low).max())


def extent_problem(extent: float, training: tuple[float, float], units: float) -> str | None:
    """Why a scan ``extent`` metres across is far outside the ``training`` extent, with the fix; None if it is not."""
    smallest, largest = training
    if smallest / EXTENT_FACTOR <= extent <= largest * EXTENT_FACTOR:
        return None
    side = 'larger than the largest' if extent > largest else 'smaller than the smallest'
    text = (f'the scan is {extent:.4g} m across (at --units {units:g}), more than {EXTENT_FACTOR:g}x {side} scene '
            f'the model was trained on ({smallest:g} to {largest:g} m): its boxes would be meaningless')
    if extent > 0:
        suggested = units * 10.0 ** round(math.log10(math.sqrt(smallest * largest) / extent))
        text += (f'. If the scan is not in metres, pass --units with the metres per scan unit (e.g. --units '
                 f'{suggested:g} makes it {extent * suggested / units:.3g} m across)')
    return text


def model_input(xyz: np.ndarray, colors: np.ndarray | None, num_points: int, use_color: bool) -> torch.Tensor:
    """(1, num_points, 3 or 6): a fixed seeded sample (repeats when the scan is short), colour normalised as 3DETR."""
    rng = np.random.default_rng(0)
    index = rng.choice(len(xyz), num_points, replace=len(xyz) < num_points)
    points = xyz[index]
    if use_color:
        if colors is None:
            warnings.warn('The scan has no colour; the model was trained with colour, so every point gets the '
                          'training colours\' mean (expect lower scores).', UserWarning, stacklevel=2)
            rgb = np.tile(np.array(MEAN_COLOR_RGB, dtype=np.float32), (num_points, 1))
        else:
            rgb = colors[index] * 255.0
        points = np.concatenate([points, (rgb - np.array(MEAN_COLOR_RGB, dtype=np.float32)) / 256], axis=1)
    return torch.from_numpy(points.astype(np.float32))[None]


def edge_points(boxes: torch.Tensor, step: float) -> torch.Tensor:
    """Points every ``step`` along the 12 edges of each (K, 7) box: (E, 3)."""
    if len(boxes) == 0:
        return torch.zeros(0, 3)
    corners = box_corners(boxes)
    samples = max(2, int(float(boxes[:, 3:6].max()) / step) + 1)
    t = torch.linspace(0, 1, samples)[:, None]
    return torch.cat([corners[:, a, None] * (1 - t) + corners[:, b, None] * t for a, b in EDGES], dim=1).reshape(-1, 3)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = load_config(args.config, args.cfg_options)
    dataset = cfg.test_dataloader.dataset
    classes = tuple(cfg.test_evaluator.get('classes') or range(cfg.model.num_classes))
    model = MODELS.build(cfg.model).eval()
    vispe.load_checkpoint(model, args.checkpoint)
    scan = read_points(args.scan, drop_nonfinite=True)
    to_z_up = Y_UP_TO_Z_UP if args.up == 'y' else np.eye(3)
    xyz = scan['xyz'].numpy().astype(np.float64) * args.units @ to_z_up.T
    training, extent = training_extent(cfg), scan_extent(xyz)
    problem = None if training is None else extent_problem(extent, training, args.units)
    if training is None:
        warnings.warn(f'Config {cfg.filename} does not give scene_extent (the training scenes\' extent in metres), so '
                      f'the scan\'s extent ({extent:.4g} m) is not checked against it; add scene_extent = (smallest, '
                      f'largest) to the config (configs/_base_/datasets/pt-scenes.py has one).', UserWarning)
    elif problem:
        warnings.warn(f'{args.scan}: {problem}.', UserWarning)
    colors = None if scan['colors'] is None else scan['colors'].numpy()
    xyz_t, colors_t = voxel_down_sample(torch.from_numpy(xyz).float(), args.voxel_size,
                                        None if colors is None else torch.from_numpy(colors))
    down_xyz = xyz_t.numpy()
    down_colors = None if colors_t is None else colors_t.numpy()
    if len(down_xyz) < model.backbone.num_samples:
        raise ValueError(f'{args.scan} has {len(down_xyz)} points after {args.voxel_size:g} m voxels; the model '
                         f'samples {model.backbone.num_samples}: '
                         + (f'{problem}.' if problem else 'give a denser scan or a smaller --voxel-size.'))
    points = model_input(down_xyz, down_colors, int(dataset.get('num_points', 40000)),
                         bool(dataset.get('use_color', False)))
    with torch.no_grad():
        result = model(points, mode='predict')[0]
    keep = result['scores'] >= args.score_threshold
    boxes, scores, labels = result['boxes'][keep], result['scores'][keep], result['labels'][keep]
    back = torch.from_numpy(to_z_up.T.astype(np.float32))
    centres = (boxes[:, :3] @ back.T) / args.units
    sizes = boxes[:, 3:6] / args.units
    records = [dict(center=[round(v, 4) for v in centre.tolist()], size=[round(v, 4) for v in size.tolist()],
                    yaw=round(float(box[6]), 4), up=args.up, label=str(classes[int(label)]),
                    score=round(float(score), 4))
               for centre, size, box, label, score in zip(centres, sizes, boxes, labels, scores)]
    write_text_atomically(args.out.with_suffix('.json'), json.dumps(dict(scan=str(args.scan), boxes=records), indent=1))
    edges = edge_points(boxes, args.voxel_size) @ back.T / args.units
    base_colors = np.full((len(xyz), 3), 0.6, np.float32) if colors is None else colors.astype(np.float32)
    all_xyz = np.concatenate([scan['xyz'].numpy(), edges.numpy()]).astype(np.float32)
    all_colors = np.concatenate([base_colors, np.tile([[1.0, 0.0, 0.0]], (len(edges), 1))]).astype(np.float32)
    write_points(args.out.with_suffix('.ply'), torch.from_numpy(all_xyz), torch.from_numpy(all_colors))
    print(f'{len(records)} boxes above {args.score_threshold}: {args.out.with_suffix(".json")}, '
          f'{args.out.with_suffix(".ply")}')
    return 0


if __name__ == '__main__':
    run_main(main)
