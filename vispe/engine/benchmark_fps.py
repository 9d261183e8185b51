"""The farthest-point sampling benchmark of ``tools/benchmark.py --fps``: :func:`vispe.geometry.farthest_point_sample`
with the torch loop (the baseline, on ``--device``) and with the fpsample library (the CPU), B clouds of N points to M
samples each, timed in one run; and whether the two gave the same indices there.

    vispe benchmark --fps --batch 2 --points 20000 --samples 2048
"""
from __future__ import annotations

import argparse
import importlib.metadata
from typing import Callable

import torch

from vispe.engine.arguments import InvalidArgument
from vispe.engine.benchmark_common import machine_description, measure, report_table, round_ratios
from vispe.geometry.fpsample_backend import fpsample_importable, fpsample_ties_to_highest
from vispe.geometry.point_sampling import farthest_point_sample

ROOM = (6.0, 6.0, 3.0)  # metres: the clouds are uniform in a room of this size


def check_fps_arguments(args: argparse.Namespace) -> None:
    """FPS mode: batch 2, 20000 points and 2048 samples by default, samples at most the points, fpsample installed."""
    args.batch = args.batch or 2
    args.points = args.points or 20000
    if args.samples > args.points:
        raise InvalidArgument('--samples', args.samples, f'more than the {args.points} points of each cloud',
                              'give at most --points')
    if not fpsample_importable():
        raise InvalidArgument('--fps', True, 'times the fpsample library, which does not import here',
                              'install it with pip install "vispe[3d]"')


def fps_clouds(batch: int, points: int, seed: int = 0) -> torch.Tensor:
    """(batch, points, 3) float32 points uniform in :data:`ROOM`."""
    generator = torch.Generator().manual_seed(seed)
    return torch.rand(batch, points, 3, generator=generator) * torch.tensor(ROOM)


def fps_runs(xyz: torch.Tensor, samples: int, device: torch.device,
             indices: dict[str, torch.Tensor]) -> tuple[dict[str, Callable[[], None]], dict[str, str]]:
    """label -> one sampling of the clouds, keeping its indices in ``indices[label]``, and label -> the device it runs
    on: the torch loop (on ``device``) first, then fpsample (on the CPU)."""
    clouds = {'torch loop': (xyz.to(device), 'torch'), 'fpsample': (xyz, 'fpsample')}

    def run(label: str) -> None:
        points, backend = clouds[label]
        indices[label] = farthest_point_sample(points, samples, backend=backend)
    return ({label: (lambda label=label: run(label)) for label in clouds},
            {label: str(points.device) for label, (points, _) in clouds.items()})


def run_fps(args: argparse.Namespace, device: torch.device, command: str) -> None:
    """FPS mode: time both backends on the same clouds, compare their indices, print the table, write <out>.*."""
    machine = machine_description(device)
    xyz = fps_clouds(args.batch, args.points)
    indices: dict[str, torch.Tensor] = {}
    runs, devices = fps_runs(xyz, args.samples, device, indices)
    results = measure(runs, device, args.repeats, args.warmup)
    machine['load_average_1min_after'] = machine_description(device)['load_average_1min']
    baseline = next(iter(results))
    reference = indices[baseline].cpu()
    rows = [dict(model=label, runs_on=devices[label], batch=args.batch, points=args.points, num_samples=args.samples,
                 **result, **round_ratios(result, results[baseline]),
                 same_indices=None if label == baseline else torch.equal(indices[label].cpu(), reference))
            for label, result in results.items()]
    version = importlib.metadata.version('fpsample')
    ties = 'highest index, so vispe hands clouds over reversed' if fpsample_ties_to_highest() else 'lowest index'
    title = (f'farthest-point sampling from point 0, {args.batch} clouds of {args.points} float32 points uniform in a '
             f'{" x ".join(f"{side:g}" for side in ROOM)} m room -> {args.samples} each, torch loop on {device}, '
             f'fpsample {version} on the cpu (its ties: {ties}), {torch.get_num_threads()} threads, torch '
             f'{torch.__version__}, median of {args.repeats} interleaved repeats after {args.warmup} warm-up; '
             f'x: median of the per-round ratios (highest); same indices: equal to the torch loop\'s in this run')
    cells = [['runs on', 'backend', 'ms', f'x {baseline}', 'same indices']]
    cells += [[row['runs_on'], row['model'], f"{row['seconds'] * 1e3:.1f}",
               f"{row['ratio']:.3f} ({row['ratio_high']:.3f})",
               {None: '(baseline)', True: 'yes', False: 'NO'}[row['same_indices']]] for row in rows]
    report_table(args.out, command, title, machine, rows, cells, note=args.note)
