"""Where a measured figure comes from: loading a result JSON with clear errors, and the date and commit of its run.

A JSON written by ``tools/benchmark.py`` or ``tools/compare_trees.py`` records ``date`` (ISO 8601, UTC) and
``commit`` (``git rev-parse HEAD`` of the tree that ran, or null outside a git checkout): ``run_stamp()`` makes
them. JSON written before these tools recorded them carries the commit that last changed the file and that commit's
date, copied from ``git log`` with ``"date_source": "git log"`` (so no table depends on the clone's history); a
result file that records neither is stamped from ``git log`` when the tables are generated. Either way the stamp
says so.
"""
from __future__ import annotations

import datetime
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class ReportSourceError(ValueError):
    """A result JSON a generated table needs is missing, malformed or lacks a field; the message names the file."""


def git_output(repo_root: Path, *args: str) -> str | None:
    """stdout of ``git args`` run in ``repo_root``, stripped; None when git is missing or fails."""
    try:
        result = subprocess.run(['git', *args], cwd=repo_root, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def run_stamp(repo_root: Path | None = None) -> dict[str, str | None]:
    """``{'date': now in UTC (ISO 8601, seconds), 'commit': HEAD or None}`` for a result JSON. The commit is that of
    the checkout ``repo_root`` (default: the one this vispe package lies in), and None when it is not the top of a
    git work tree (an installed wheel, an exported tree)."""
    root = (Path(__file__).resolve().parents[2] if repo_root is None else Path(repo_root)).resolve()
    date = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    top = git_output(root, 'rev-parse', '--show-toplevel')
    commit = git_output(root, 'rev-parse', 'HEAD') if top and Path(top).resolve() == root else None
    return dict(date=date, commit=commit or None)


def load_json(path: Path, repo_root: Path) -> Any:
    """The parsed JSON at ``path``; ReportSourceError naming the path (relative to ``repo_root``) if it is missing
    or not valid JSON."""
    name = relative_name(path, repo_root)
    if not path.is_file():
        raise ReportSourceError(f'{name}: missing; the generated tables need it (write it with the tool named in '
                                'docs/benchmarks.md or docs/results.md, or restore it from git)')
    try:
        return json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ReportSourceError(f'{name}: malformed JSON ({error}); regenerate it with the tool that wrote it') \
            from error


def relative_name(path: Path, repo_root: Path) -> str:
    """``path`` relative to ``repo_root`` when it lies inside it, else as given."""
    try:
        return path.resolve().relative_to(repo_root.resolve()).as_posix()
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class Provenance:
    """The run behind one result file: its date (YYYY-MM-DD), commit (short hash or None), a sortable timestamp
    and how they were found (``recorded`` in the JSON or ``git log`` of the file)."""

    name: str
    date: str
    commit: str | None
    timestamp: float
    how: str

    @classmethod
    def of(cls, path: Path, document: Any, repo_root: Path) -> 'Provenance':
        """The JSON's own ``date``/``commit`` (and ``date_source``) if it records a date; else the last commit that
        changed the file."""
        name = relative_name(path, repo_root)
        if isinstance(document, dict) and document.get('date'):
            try:
                when = datetime.datetime.fromisoformat(str(document['date']))
            except ValueError as error:
                raise ReportSourceError(f'{name}: "date" {document["date"]!r} is not ISO 8601') from error
            commit = document.get('commit')
            how = str(document.get('date_source', 'recorded'))
            return cls(name, when.date().isoformat(), commit[:7] if commit else None, when.timestamp(), how)
        log = git_output(repo_root, 'log', '-1', '--format=%H %cs %ct', '--', name)
        if not log:
            raise ReportSourceError(f'{name}: records no "date"/"commit" and git log has no commit of it; commit the '
                                    'file (or re-run the tool that writes it, which records both)')
        commit, date, timestamp = log.split()
        return cls(name, date, commit[:7], float(timestamp), 'git log')

    def describe(self) -> str:
        """``run 2026-12-04, commit 0c22443 (recorded in the JSON)`` or the git-log form."""
        commit = f'commit {self.commit}' if self.commit else 'no commit recorded'
        if self.how == 'recorded':
            return f'run {self.date}, {commit} (recorded in the JSON)'
        return f'{self.date}, {commit} (git log: the last commit that changed the file)'
