"""Regenerate the generated blocks of README.md and docs/*.md (``--check``: fail if one is stale).

A file shows a generated table by holding its marker block, ``<!-- NAME:start -->`` ... ``<!-- NAME:end -->``;
every known block found is filled (the names and their sources: ``vispe/reporting/blocks.py``):

- ``encodings``: the encodings table, from the registry (``vispe.list_encodings()``);
- ``headline``: a few headline results; ``zoo``: the model zoo (``models/*/results.json``);
- results from ``models/*.json`` (``detr-extrapolation``, ``petr-map``, ``petr-nuscenes``, ``vdetr-sweep``,
  ``novel-views``, ``crop-depth``, ``gaussian-codecs``) and benchmarks from ``benchmarks/*.json`` (``bench-*``).

Each block ends with a stamp naming its JSON files and the date and commit of their runs (recorded in the JSON, or
the commit that last changed the file from ``git log``, said which). A missing or malformed JSON, or an unknown
block name, is an error naming it.

    python tools/update_readme.py                 # rewrite every block of README.md and docs/*.md
    python tools/update_readme.py --check         # exit 1 if a block is stale, naming it
    python tools/update_readme.py --files my.md   # other files (e.g. a draft)
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from vispe.reporting.generator import generated_files, stale_blocks, with_current_blocks
from vispe.reporting.provenance import ReportSourceError, relative_name
from vispe.reporting.sources import Sources

REPO_ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--check', action='store_true', help='change nothing; exit 1 if a generated block is stale')
    parser.add_argument('--files', nargs='+', type=Path, default=None,
                        help='markdown files to process (default: README.md and docs/**/*.md with marker blocks)')
    parser.add_argument('--root', type=Path, default=REPO_ROOT, help='the repository whose JSON the tables read')
    args = parser.parse_args(argv)
    sources = Sources(args.root)
    files = args.files if args.files is not None else generated_files(args.root)
    stale = []
    try:
        for path in files:
            text = path.read_text()
            updated = with_current_blocks(text, sources, where=relative_name(path, args.root))
            if args.check:
                stale += [f'{relative_name(path, args.root)}: {name}' for name in stale_blocks(text, updated)]
            elif updated != text:
                path.write_text(updated)
    except (ReportSourceError, ValueError, OSError) as error:
        print(f'error: {error}', file=sys.stderr)
        return 2
    if stale:
        print('stale generated blocks (run python tools/update_readme.py):\n  ' + '\n  '.join(stale), file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main())
