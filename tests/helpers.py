"""Helpers shared by tests (not fixtures)."""
from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch

import vispe
from vispe.geometry import Positions

from .conftest import TINY_VIT


def tiny_vit(encoding=None, **overrides) -> vispe.VisionTransformer:
    """The tiny ViT of conftest.TINY_VIT with an encoding, in eval mode."""
    cfg = {**TINY_VIT, **overrides}
    return vispe.create_vit(cfg.pop('model_name'), encoding=encoding, **cfg).eval()


def positions(grid, num_prefix_tokens=1) -> Positions:
    return Positions(grid, num_prefix_tokens=num_prefix_tokens)


def load_tool(name: str) -> ModuleType:
    """The module of the tool ``tools/<name>.py`` (e.g. 'eval_resolution', 'dataset_converters/multiview_scenes'):
    ``vispe.cli.<name>``, whose functions tests call in-process."""
    return importlib.import_module('vispe.cli.' + name.replace('/', '.'))


def load_developer_tool(name: str) -> ModuleType:
    """A developer script that stays in ``tools/`` (no ``vispe`` subcommand, e.g. 'update_readme'), imported from
    its file once per test process."""
    module_name = f'developer_tool_{name}'
    if module_name not in sys.modules:
        spec = importlib.util.spec_from_file_location(module_name, Path(__file__).parents[1] / 'tools' / f'{name}.py')
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    return sys.modules[module_name]


def max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def untrained_work_dir(parent: Path, name: str, cfg, seed: int, config_name: str) -> Path:
    """A work dir as training leaves it: the dumped config and a weights-only best.pth of the config's model,
    untrained (initialised with ``seed``)."""
    from vispe.registry import MODELS
    work_dir = parent / name
    work_dir.mkdir()
    cfg.dump(str(work_dir / config_name))
    torch.manual_seed(seed)
    torch.save({'state_dict': MODELS.build(cfg.model).state_dict(), 'meta': {'epoch': 0}}, work_dir / 'best.pth')
    return work_dir
