"""The result files of one generator run: each JSON read once, with its provenance."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from vispe.reporting.provenance import Provenance, ReportSourceError, load_json


class Sources:
    """Result JSON under ``repo_root``, addressed by repository-relative paths or glob patterns."""

    def __init__(self, repo_root: Path) -> None:
        self.repo_root = Path(repo_root)
        self._documents: dict[str, Any] = {}
        self._provenance: dict[str, Provenance] = {}

    def expand(self, pattern: str) -> list[str]:
        """The repository-relative paths a pattern names: itself when it has no wildcard (missing or not), else its
        sorted matches (ReportSourceError when there are none)."""
        if not any(char in pattern for char in '*?['):
            return [pattern]
        matches = sorted(path.relative_to(self.repo_root).as_posix() for path in self.repo_root.glob(pattern))
        if not matches:
            raise ReportSourceError(f'{pattern}: no file matches; the generated tables need at least one')
        return matches

    def document(self, name: str) -> Any:
        """The parsed JSON ``name`` (ReportSourceError naming it if missing or malformed)."""
        if name not in self._documents:
            self._documents[name] = load_json(self.repo_root / name, self.repo_root)
        return self._documents[name]

    def provenance(self, name: str) -> Provenance:
        """Date and commit of the run behind ``name``."""
        if name not in self._provenance:
            self._provenance[name] = Provenance.of(self.repo_root / name, self.document(name), self.repo_root)
        return self._provenance[name]

    def newer(self, name: str, candidates: list[str]) -> list[tuple[str, Any]]:
        """(path, JSON) of each candidate whose run is newer than ``name``'s, oldest first."""
        own = self.provenance(name).timestamp
        later = [c for c in candidates if c != name and self.provenance(c).timestamp > own]
        return [(c, self.document(c)) for c in sorted(later, key=lambda c: self.provenance(c).timestamp)]
