"""A plugin outside vispe becomes usable by dict(type=...) through custom_imports and through an entry point.

Each route runs in a fresh interpreter, so one route cannot leak registrations into the other.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PLUGIN_ROOT = Path(__file__).parent / 'plugins' / 'vispe_example_plugin'
CONFIG = Path(__file__).parent / 'plugins' / 'configs' / 'vit_factorized_ape.py'

BUILD_FROM_REGISTRY = """
import torch, vispe
enc = vispe.build_encoding(dict(type='FactorizedAPE'), embed_dim=8)
print(type(enc).__module__, enc.rows.shape[1])
"""

BUILD_FROM_CONFIG = """
import sys, torch
from mmengine.config import Config
import vispe
from vispe.registry import MODELS
cfg = Config.fromfile(sys.argv[1])
model = MODELS.build(cfg.model).eval()
print(type(model.encoding).__name__, tuple(model(torch.randn(2, 3, 32, 48)).shape))
"""


def run_python(code: str, *args: str, pythonpath: list[Path]) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(p) for p in pythonpath), HF_HUB_OFFLINE='1')
    return subprocess.run([sys.executable, '-c', code, *args], capture_output=True, text=True, env=env, timeout=300)


def write_dist_info(site: Path) -> None:
    """What `pip install` writes for the plugin: metadata and entry points taken from its pyproject."""
    project = tomllib.loads((PLUGIN_ROOT / 'pyproject.toml').read_text())['project']
    dist_info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / 'METADATA').write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    lines = []
    for group, entries in project['entry-points'].items():
        lines.append(f'[{group}]')
        lines += [f'{name} = {target}' for name, target in entries.items()]
    (dist_info / 'entry_points.txt').write_text('\n'.join(lines) + '\n')


@pytest.mark.slow
def test_plugin_through_entry_point(tmp_path: Path) -> None:
    write_dist_info(tmp_path)
    result = run_python(BUILD_FROM_REGISTRY, pythonpath=[tmp_path, PLUGIN_ROOT])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ['vispe_example_plugin.factorized_ape', '8']


@pytest.mark.slow
def test_plugin_without_entry_point_is_unknown() -> None:
    result = run_python(BUILD_FROM_REGISTRY, pythonpath=[PLUGIN_ROOT])
    assert result.returncode != 0
    assert "Unknown encoding type 'FactorizedAPE'" in result.stderr
    assert 'custom_imports' in result.stderr


@pytest.mark.slow
def test_plugin_through_custom_imports() -> None:
    result = run_python(BUILD_FROM_CONFIG, str(CONFIG), pythonpath=[PLUGIN_ROOT])
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-3:] == ['FactorizedAPE', '(2,', '10)']


@pytest.mark.slow
def test_broken_plugin_warns_and_is_named_in_errors(tmp_path: Path) -> None:
    dist_info = tmp_path / 'broken_plugin-0.1.dist-info'
    dist_info.mkdir()
    (dist_info / 'METADATA').write_text('Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n')
    (dist_info / 'entry_points.txt').write_text('[vispe.plugins]\nbroken = no_such_module_anywhere\n')
    code = ("import vispe\ntry:\n    vispe.build_encoding('Missing')\nexcept KeyError as e:\n    print(e)")
    result = run_python(code, pythonpath=[tmp_path])
    assert result.returncode == 0, result.stderr
    assert "vispe plugin 'broken'" in result.stderr
    assert 'Plugins that failed to import: broken' in result.stdout
