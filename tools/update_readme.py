"""Regenerate the encodings table of README.md from the registry (``--check``: fail if it is stale).

    python tools/update_readme.py          # rewrite the table between the markers
    python tools/update_readme.py --check  # exit 1 if README.md is out of date
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import vispe

README = Path(__file__).resolve().parents[1] / 'README.md'
START, END = '<!-- encodings:start -->', '<!-- encodings:end -->'


def with_current_table(text: str) -> str:
    head, rest = text.split(START, 1)
    _, tail = rest.split(END, 1)
    return f'{head}{START}\n{vispe.list_encodings().markdown()}\n{END}{tail}'


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--check', action='store_true')
    args = parser.parse_args()
    text = README.read_text()
    updated = with_current_table(text)
    if args.check:
        if updated != text:
            print('README.md encodings table is stale: run python tools/update_readme.py', file=sys.stderr)
            return 1
        return 0
    README.write_text(updated)
    return 0


if __name__ == '__main__':
    sys.exit(main())
