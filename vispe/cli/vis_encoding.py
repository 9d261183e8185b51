"""Draw what encodings do before any training: one row per encoding, for one query patch.

    vispe vis-encoding --encodings SinCos2D LearnedAPE RoPEAxial RoPEMixed LookHere ALiBi2D \\
        --grid 14 14 --query center --out encodings.png

Absolute encodings (an ``embed`` hook): cosine similarity of the query's embedding to every patch's.
Relative ones (rotations, logit biases): attention logits of the query to every patch when every
token has the same content, one panel per head (masked keys blank). Encodings get the facts of a
model with ``--embed-dim`` and ``--heads`` (random initialisation, seeded).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

import torch

import vispe
from vispe.engine.arguments import (InvalidArgument, check_query, grid_query, name_or_config, positive_int, reported_by,
                                    writable_output)
from vispe.visualization import embedding_similarity, query_index, relative_logits


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe vis-encoding``."""
    parser = argparse.ArgumentParser(prog='vispe vis-encoding', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--encodings', nargs='+', type=name_or_config,
                        default=['SinCos2D', 'RoPEAxial', 'LookHere', 'ALiBi2D'],
                        help='registered names or JSON configs')
    parser.add_argument('--grid', type=positive_int, nargs=2, default=[14, 14])
    parser.add_argument('--query', type=grid_query, default='center', help="'center' or 'ROW,COL'")
    parser.add_argument('--embed-dim', type=positive_int, default=192)
    parser.add_argument('--heads', type=positive_int, default=4)
    parser.add_argument('--seed', type=int, default=0)
    parser.add_argument('--out', type=Path, default=Path('encodings.png'))
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless the grid, width and heads are
    positive (the width a multiple of the heads), the query is on the grid and the output folder can be made."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        check_query('--query', args.query, args.grid, 0, 'grid of --grid')
        if args.embed_dim % args.heads:
            multiple = args.heads * max(1, args.embed_dim // args.heads)
            raise InvalidArgument('--embed-dim', args.embed_dim, f'not divisible by --heads {args.heads}',
                                  f'give a multiple of {args.heads}, e.g. {multiple}')
        writable_output(args.out, '--out')
    return args


def main(argv: Sequence[str] | None = None) -> int:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    args = parse_args(argv)
    grid = tuple(args.grid)
    head_dim = args.embed_dim // args.heads
    context = dict(embed_dim=args.embed_dim, num_heads=args.heads, head_dim=head_dim, depth=1, grid_size=grid,
                   patch_size=(16, 16), num_prefix_tokens=0)
    query = query_index(args.query, grid, 0)
    rows = []
    for cfg in args.encodings:
        torch.manual_seed(args.seed)
        encoding = vispe.build_encoding(cfg, **context).eval()
        label = cfg if isinstance(cfg, str) else cfg['type']
        if encoding.implements('position_embedding'):
            rows.append((label, 'cosine similarity', [embedding_similarity(encoding, grid, query, args.embed_dim)]))
        elif encoding.active_hooks & {'rotate', 'logits_bias'}:
            maps = relative_logits(encoding, grid, query, args.heads, head_dim, seed=args.seed)
            rows.append((label, 'logits', list(maps)))
        elif 'between_blocks' in encoding.active_hooks:
            rows.append((label, 'acts between blocks on features: nothing to draw untrained', []))
        else:
            rows.append((label, 'no position information', []))
    columns = max(1, max(len(maps) for _, _, maps in rows))
    figure, axes = plt.subplots(len(rows), columns, figsize=(2.0 * columns, 2.1 * len(rows)), squeeze=False)
    for row, (label, kind, maps) in enumerate(rows):
        for col in range(columns):
            axis = axes[row, col]
            axis.axis('off')
            if col < len(maps):
                image = maps[col].clone()
                image[~torch.isfinite(image)] = float('nan')
                axis.imshow(image.numpy(), cmap='viridis')
                axis.plot(query % grid[1], query // grid[1], 'r+', markersize=6)
                axis.set_title(f'{label}: {kind}' + (f' h{col}' if len(maps) > 1 else ''), fontsize=7)
            elif col == 0:
                axis.set_title(f'{label}: {kind}', fontsize=7)
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=120)
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
