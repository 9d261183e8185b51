"""The documentation site builds: ``mkdocs build --strict`` (every page in the nav, every link, every docstring the API
reference renders) with no network: proxies point nowhere, so a theme or plugin that fetches fails the build."""
from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys

import pytest

UNREACHABLE = 'http://127.0.0.1:9'


@pytest.mark.slow
def test_mkdocs_builds_strictly_offline(repo_root, tmp_path) -> None:
    assert importlib.util.find_spec('mkdocs') is not None, (
        'mkdocs is not installed: the docs build is part of the tests; pip install -e ".[dev]" (it includes [docs])')
    env = {**os.environ, 'HTTP_PROXY': UNREACHABLE, 'HTTPS_PROXY': UNREACHABLE, 'http_proxy': UNREACHABLE,
           'https_proxy': UNREACHABLE, 'NO_PROXY': '', 'no_proxy': '', 'NO_MKDOCS_2_WARNING': '1'}
    site = tmp_path / 'site'
    result = subprocess.run([sys.executable, '-m', 'mkdocs', 'build', '--strict', '--site-dir', str(site)],
                            cwd=repo_root, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    changelog_heading = next(line for line in (repo_root / 'CHANGELOG.md').read_text().splitlines()
                             if line.startswith('## '))[3:]
    assert changelog_heading in (site / 'changelog' / 'index.html').read_text()
    assert 'create_vit' in (site / 'api' / 'vispe' / 'index.html').read_text()
    assert 'LookHere' in (site / 'encodings' / 'index.html').read_text()


def test_quick_start_cross_attention_and_cameras_example_runs(repo_root) -> None:
    """The quick start's second example (the first is the README's, run by tests/test_readme.py)."""
    text = (repo_root / 'docs' / 'quickstart.md').read_text()
    block = re.findall(r'```python\n(.*?)```', text, flags=re.S)[1]
    namespace: dict = {}
    exec(compile(block, 'docs/quickstart.md', 'exec'), namespace)
    assert namespace['out'].shape == (1, 10, 384)
    assert namespace['points'].shape == (1, 1, 20, 50, 64, 3)
