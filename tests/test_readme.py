"""The README is true and short: its Python example runs, CI calls its test command, the plugin example of
docs/plugins.md defines a working encoding (its generated tables: test_generated_tables.py)."""
from __future__ import annotations

import re

import pytest


def python_blocks(text: str) -> list[str]:
    return re.findall(r'```python\n(.*?)```', text, flags=re.S)


@pytest.mark.slow
def test_python_api_block_runs(repo_root) -> None:
    api_block = python_blocks((repo_root / 'README.md').read_text())[0]
    namespace: dict = {}
    exec(compile(api_block, 'README.md', 'exec'), namespace)
    assert namespace['maps'][0].shape == (1, 6, 197, 197)
    assert namespace['enc'].normalize


def test_readme_is_at_most_250_lines(repo_root) -> None:
    lines = (repo_root / 'README.md').read_text().splitlines()
    assert len(lines) <= 250, f'README.md has {len(lines)} lines; move detail into docs/ (at most 250)'


def test_plugin_example_block_defines_a_working_encoding(repo_root) -> None:
    plugin_block = python_blocks((repo_root / 'docs' / 'plugins.md').read_text())[0]
    namespace: dict = {}
    from vispe.registry import ENCODINGS
    try:
        exec(compile(plugin_block, 'docs/plugins.md', 'exec'), namespace)
        import torch

        import vispe
        vit = vispe.create_vit('vit_tiny_patch16_224', encoding=dict(type='MyPE', scale=0.5), img_size=32,
                               depth=1, num_classes=2)
        assert vit(torch.randn(1, 3, 48, 32)).shape == (1, 2)
    finally:
        ENCODINGS.module_dict.pop('MyPE', None)


def test_ci_runs_the_readme_test_command(repo_root) -> None:
    ci = (repo_root / '.ci' / 'run').read_text()
    readme = (repo_root / 'README.md').read_text()
    assert 'make test' in ci and 'make test' in readme
