"""mkdocs hook: the changelog page is CHANGELOG.md of the repository root, read at every build (so it stays current),
with its links to ``docs/...`` made relative to the site's pages."""
from __future__ import annotations

import re
from pathlib import Path

CHANGELOG = Path(__file__).resolve().parents[2] / 'CHANGELOG.md'


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace ``docs/changelog.md``'s text with CHANGELOG.md; leave every other page as it is."""
    if page.file.src_uri != 'changelog.md':
        return markdown
    return re.sub(r'\]\(docs/', '](', CHANGELOG.read_text())
