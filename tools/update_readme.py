"""Regenerate the tables of README.md that come from elsewhere (``--check``: fail if one is stale).

- the encodings table, from the registry (``vispe.list_encodings()``);
- the model-zoo table, copied from ``models/README.md`` (written by ``tools/zoo_card.py``).

    python tools/update_readme.py          # rewrite the tables between their markers
    python tools/update_readme.py --check  # exit 1 if README.md is out of date
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import vispe

REPO_ROOT = Path(__file__).resolve().parents[1]
README = REPO_ROOT / 'README.md'
ZOO_INDEX = REPO_ROOT / 'models' / 'README.md'
ENCODINGS = ('<!-- encodings:start -->', '<!-- encodings:end -->')
ZOO = ('<!-- zoo:start -->', '<!-- zoo:end -->')


def between(text: str, markers: tuple[str, str]) -> str:
    return text.split(markers[0], 1)[1].split(markers[1], 1)[0]


def replaced(text: str, markers: tuple[str, str], body: str) -> str:
    head, rest = text.split(markers[0], 1)
    _, tail = rest.split(markers[1], 1)
    return f'{head}{markers[0]}\n{body.strip()}\n{markers[1]}{tail}'


def with_current_tables(text: str) -> str:
    text = replaced(text, ENCODINGS, vispe.list_encodings().markdown())
    zoo = between(ZOO_INDEX.read_text(), ZOO).replace('](', '](models/')  # links relative to the repository root
    return replaced(text, ZOO, zoo)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--check', action='store_true')
    args = parser.parse_args()
    text = README.read_text()
    updated = with_current_tables(text)
    if args.check:
        if updated != text:
            print('README.md tables are stale: run python tools/update_readme.py', file=sys.stderr)
            return 1
        return 0
    README.write_text(updated)
    return 0


if __name__ == '__main__':
    sys.exit(main())
