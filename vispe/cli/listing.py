"""What vispe offers: the registered encodings (``vispe.list_encodings()``) and the packaged configs.

    vispe list                      # both
    vispe list encodings [--image-only]
    vispe list configs [PATTERN]    # e.g. vit/, 'detr/*rope*'; each usable as vispe::<name>
"""
from __future__ import annotations

import argparse
from typing import Sequence

from vispe.configs import PREFIX, packaged_configs


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe list``."""
    parser = argparse.ArgumentParser(prog='vispe list', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('what', nargs='?', choices=('encodings', 'configs'), default=None,
                        help='only the encodings, or only the configs (default: both)')
    parser.add_argument('pattern', nargs='?', default=None,
                        help='configs: a shell pattern or a part of the name, e.g. vit/ or "detr/*rope*"')
    parser.add_argument('--image-only', action='store_true',
                        help='encodings: only those that need nothing beyond a 2D grid (every ViT and DETR takes them)')
    return parser


def config_lines(pattern: str | None) -> list[str]:
    """The packaged configs matching ``pattern``, one ``vispe::<name>`` a line."""
    return [PREFIX + name for name in packaged_configs(pattern)]


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.pattern is not None and args.what != 'configs':
        parser.error(f'a pattern ({args.pattern!r}) filters configs: write `vispe list configs {args.pattern}`')
    if args.what in (None, 'encodings'):
        from vispe import list_encodings
        encodings = list_encodings(image_only=args.image_only)
        print(f'encodings ({len(encodings)}; build one with dict(type=NAME, ...)):\n{encodings}')
    if args.what in (None, 'configs'):
        lines = config_lines(args.pattern)
        if not lines:
            parser.error(f'no packaged config matches {args.pattern!r}; `vispe list configs` lists them all')
        if args.what is None:
            print()
        print(f'configs ({len(lines)}; train one with `vispe train NAME`):')
        print('\n'.join(f'  {line}' for line in lines))
    return 0
