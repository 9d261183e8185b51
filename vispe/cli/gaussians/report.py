"""Rate–distortion report of Gaussian bitstreams against the scene they came from: size, bits per Gaussian and per
section (centres, context model, each attribute group) beside each group's empirical entropy, attribute PSNR per
group, encode and decode time, and with ``--cameras`` the rendered PSNR and SSIM of each decoded scene against the
source's renders from those cameras; a table, and with ``--out`` JSON, CSV and a rate–distortion plot.

    vispe gaussians-report scene.ply scene.vgs                       # one bitstream
    vispe gaussians-report scene.ply work_dirs/gaussians/scene_*.vgs --cameras scene.cameras.json \
        --out models/gaussians_scene

``--cameras`` takes 3DGS's cameras.json (``gaussians-from-points --cameras`` writes held-out ones for its sources).
Rendering: gsplat's CUDA kernels on a CUDA device where ``vispe[render]`` is installed, else vispe's PyTorch
rasterizer, which computes the same images (``--renderer`` chooses; the JSON records which ran).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Sequence

import torch

from vispe.engine.arguments import (InvalidArgument, existing_file, positive_float, recorded_command, reported_by,
                                    run_main, writable_output)
from vispe.evaluation.sweep import json_safe, write_atomically
from vispe.extras import MissingExtraError, import_extra
from vispe.gaussians import read_gaussians_ply
from vispe.gaussians.bitstream import key_option
from vispe.gaussians.cameras import read_cameras_json
from vispe.gaussians.render import RENDERERS, default_renderer
from vispe.gaussians.render_quality import ReferenceViews
from vispe.gaussians.report import bitstream_report
from vispe.reporting.provenance import run_stamp

GROUPS = ('f_dc', 'f_rest', 'opacity', 'scale', 'rotation')


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe gaussians-report``."""
    parser = argparse.ArgumentParser(prog='vispe gaussians-report', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('ply', type=Path, help='the scene the bitstreams were compressed from (.ply)')
    parser.add_argument('bitstreams', type=Path, nargs='+', help='.vgs files')
    parser.add_argument('--out', type=Path, default=None, help='stem of the .json, .csv and .png outputs')
    parser.add_argument('--key-file', type=Path, default=None,
                        help='verify every bitstream\'s HMAC-SHA256 signature under the bytes of this file')
    parser.add_argument('--cameras', type=Path, default=None,
                        help='3DGS cameras.json: render the source and every decoded scene from these cameras')
    parser.add_argument('--render-scale', type=positive_float, default=1.0,
                        help='render at this fraction of each camera\'s size (1)')
    parser.add_argument('--device', default=None, help='where to render (default: cuda if available, else cpu)')
    parser.add_argument('--renderer', choices=RENDERERS, default=None,
                        help='gsplat (CUDA, vispe[render]) or torch (any device); default: gsplat on CUDA where '
                             'installed, else torch')
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        existing_file(args.ply, 'ply')
        args.key = key_option(args.key_file)
        for path in args.bitstreams:
            existing_file(path, 'bitstreams')
        if args.out is not None:
            writable_output(args.out, '--out', suffixes=('.json', '.csv', '.png'))
        if args.cameras is None:
            given = [option for option, value in (('--render-scale', args.render_scale != 1.0),
                                                  ('--device', args.device), ('--renderer', args.renderer)) if value]
            if given:
                raise InvalidArgument(given[0], getattr(args, given[0][2:].replace('-', '_')),
                                      'only applies to rendering, which needs --cameras',
                                      'give --cameras CAMERAS.json (3DGS\'s) or drop the option')
            return args
        existing_file(args.cameras, '--cameras')
        try:
            args.camera_list = [camera.scaled(args.render_scale) for camera in read_cameras_json(args.cameras)]
        except ValueError as error:
            raise InvalidArgument('--cameras', args.cameras, str(error), 'give 3DGS\'s cameras.json') from None
        args.device, args.renderer = render_device_and_renderer(args.device, args.renderer)
    return args


def render_device_and_renderer(device: str | None, renderer: str | None) -> tuple[str, str]:
    """The device and renderer to use, defaults filled in, or an :class:`InvalidArgument` saying what cannot run."""
    device = device or ('cuda' if torch.cuda.is_available() else 'cpu')
    try:
        kind = torch.device(device).type
    except RuntimeError as error:
        raise InvalidArgument('--device', device, f'is no torch device ({error})', 'give cpu or cuda') from None
    if kind == 'cuda' and not torch.cuda.is_available():
        raise InvalidArgument('--device', device, 'torch sees no CUDA device here', 'render with --device cpu')
    renderer = renderer or default_renderer(device)
    if renderer == 'gsplat':
        if kind != 'cuda':
            raise InvalidArgument('--renderer', renderer, f'gsplat rasterizes on CUDA only, not on {device}',
                                  'give --device cuda on a machine with a GPU, or --renderer torch')
        try:
            import_extra('gsplat', 'rendering with gsplat')
        except MissingExtraError as error:
            raise InvalidArgument('--renderer', renderer, str(error).rstrip('.'), 'or render with --renderer torch') \
                from None
    return device, renderer


def cell(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return '–'
    return '∞' if value == math.inf else f'{value:.{digits}f}'


def infinite_as_text(value):
    """``value`` with infinite floats (a group reproduced exactly) as the string 'inf' (JSON has no ∞)."""
    if isinstance(value, float) and math.isinf(value):
        return 'inf'
    if isinstance(value, dict):
        return {key: infinite_as_text(item) for key, item in value.items()}
    if isinstance(value, list):
        return [infinite_as_text(item) for item in value]
    return value


def table(rows: list[dict]) -> str:
    header = ['file', 'codec', 'step', 'bytes', 'bits/G', 'centres', 'model',
              *[f'{group} coded/entropy' for group in GROUPS], 'PSNR', *[f'{group} PSNR' for group in GROUPS],
              'centres PSNR', 'enc s', 'dec s']
    rendered = any('render_psnr' in row for row in rows)
    if rendered:
        header += ['render PSNR', 'render SSIM']
    lines = [header]
    for row in rows:
        bits = row['section_bits']
        lines.append([Path(row['file']).name, row['codec'], cell(row['step_scale'], 1), str(row['bytes']),
                      cell(row['bits_per_gaussian']), cell(bits.get('positions')), cell(bits.get('model')),
                      *[f"{cell(row['groups'][g]['coded_bits'])}/{cell(row['groups'][g]['entropy_bits'])}"
                        for g in GROUPS],
                      cell(row['psnr'], 1), *[cell(row['groups'][g]['psnr'], 1) for g in GROUPS],
                      cell(row['centres_psnr'], 1), cell(row['encode_seconds'], 1), cell(row['decode_seconds'], 1),
                      *([cell(row.get('render_psnr'), 2), cell(row.get('render_ssim'), 4)] if rendered else [])])
    return '\n'.join('| ' + ' | '.join(line) + ' |' for line in [lines[0], ['---'] * len(header), *lines[1:]])


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    metrics = [('psnr', 'attribute PSNR (dB)')]
    if any('render_psnr' in row for row in rows):
        metrics.append(('render_psnr', 'rendered PSNR (dB)'))
    figure, axes = plt.subplots(1, len(metrics), figsize=(6 * len(metrics), 4), squeeze=False)
    for axis, (metric, label) in zip(axes[0], metrics):
        for codec in dict.fromkeys(row['codec'] for row in rows):
            points = sorted((row['bits_per_gaussian'], row[metric]) for row in rows if row['codec'] == codec)
            axis.plot(*zip(*[(x, min(y, 99.0)) for x, y in points]), marker='o', label=codec)
        axis.set(xlabel='bits per Gaussian (file size)', ylabel=label, title=title)
        axis.grid(alpha=0.3)
        axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    source = read_gaussians_ply(args.ply)
    views = None
    if args.cameras is not None:
        views = ReferenceViews.of(source, args.camera_list, args.renderer, args.device)
        print(f'rendering {len(views.cameras)} views of {args.cameras} with {views.describe()["renderer"]}')
    rows = [bitstream_report(source, path, args.key, views) for path in args.bitstreams]
    text = table(rows)
    print(f'{args.ply}: {len(source)} Gaussians, SH degree {source.sh_degree}, {args.ply.stat().st_size} bytes\n{text}')
    if args.out is not None:
        command = recorded_command('gaussians-report', argv)
        record = dict(command=command, **run_stamp(), source=str(args.ply), gaussians=len(source),
                      source_bytes=args.ply.stat().st_size, rows=infinite_as_text(rows))
        if views is not None:
            record['render'] = dict(views.describe(), cameras=str(args.cameras), scale=args.render_scale)
        write_atomically(args.out.with_suffix('.json'),
                         lambda path: path.write_text(json.dumps(json_safe(record), indent=1)))
        flat = [{key: value for key, value in row.items() if key not in ('groups', 'section_bits', 'render_psnr_views',
                                                                          'render_ssim_views')}
                | {f'{g}_{k}': v for g, values in row['groups'].items() for k, v in values.items()}
                | {f'bits_{name}': v for name, v in row['section_bits'].items()} for row in rows]
        fields = list(dict.fromkeys(key for row in flat for key in row))

        def write_csv(path: Path) -> None:
            with path.open('w', newline='') as file:
                writer = csv.DictWriter(file, fields)
                writer.writeheader()
                writer.writerows(flat)
        write_atomically(args.out.with_suffix('.csv'), write_csv)
        write_atomically(args.out.with_suffix('.png'), lambda path: plot(rows, path, args.ply.name))
        print(f'wrote {args.out}.json, .csv, .png')
    return 0


if __name__ == '__main__':
    run_main(main)
