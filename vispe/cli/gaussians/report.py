"""Rate–distortion report of Gaussian bitstreams against the scene they came from: size, bits per Gaussian and per
section (centres, context model, each attribute group) beside each group's empirical entropy, attribute PSNR per
group, encode and decode time; a table, and with ``--out`` JSON, CSV and a rate–distortion plot.

    vispe gaussians-report scene.ply scene.vgs                       # one bitstream
    vispe gaussians-report scene.ply work_dirs/gaussians/scene_*.vgs --out models/gaussians_scene

Rendered PSNR needs a Gaussian rasterizer (gsplat's CUDA path); none runs on this CPU-only machine, so the report
measures the attributes themselves (vispe.gaussians.report).
"""
from __future__ import annotations

import argparse
import csv
import json
import math
from pathlib import Path
from typing import Sequence

from vispe.engine.arguments import existing_file, recorded_command, reported_by, run_main, writable_output
from vispe.evaluation.sweep import json_safe, write_atomically
from vispe.gaussians import read_gaussians_ply
from vispe.gaussians.bitstream import key_option
from vispe.gaussians.report import bitstream_report

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
    return args


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
    lines = [header]
    for row in rows:
        bits = row['section_bits']
        lines.append([Path(row['file']).name, row['codec'], cell(row['step_scale'], 1), str(row['bytes']),
                      cell(row['bits_per_gaussian']), cell(bits.get('positions')), cell(bits.get('model')),
                      *[f"{cell(row['groups'][g]['coded_bits'])}/{cell(row['groups'][g]['entropy_bits'])}"
                        for g in GROUPS],
                      cell(row['psnr'], 1), *[cell(row['groups'][g]['psnr'], 1) for g in GROUPS],
                      cell(row['centres_psnr'], 1), cell(row['encode_seconds'], 1), cell(row['decode_seconds'], 1)])
    return '\n'.join('| ' + ' | '.join(line) + ' |' for line in [lines[0], ['---'] * len(header), *lines[1:]])


def plot(rows: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    figure, axis = plt.subplots(figsize=(6, 4))
    for codec in dict.fromkeys(row['codec'] for row in rows):
        points = sorted((row['bits_per_gaussian'], row['psnr']) for row in rows if row['codec'] == codec)
        axis.plot(*zip(*[(x, min(y, 99.0)) for x, y in points]), marker='o', label=codec)
    axis.set(xlabel='bits per Gaussian (file size)', ylabel='attribute PSNR (dB)', title=title)
    axis.grid(alpha=0.3)
    axis.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    source = read_gaussians_ply(args.ply)
    rows = [bitstream_report(source, path, args.key) for path in args.bitstreams]
    text = table(rows)
    print(f'{args.ply}: {len(source)} Gaussians, SH degree {source.sh_degree}, {args.ply.stat().st_size} bytes\n{text}')
    if args.out is not None:
        command = recorded_command('gaussians-report', argv)
        record = dict(command=command, source=str(args.ply), gaussians=len(source),
                      source_bytes=args.ply.stat().st_size, rows=infinite_as_text(rows))
        write_atomically(args.out.with_suffix('.json'),
                         lambda path: path.write_text(json.dumps(json_safe(record), indent=1)))
        flat = [{key: value for key, value in row.items() if key not in ('groups', 'section_bits')}
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
