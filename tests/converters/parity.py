"""Shared steps of the converters' golden tests: convert through the command, compare logits, refuse broken files."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

import vispe
from vispe.checkpoint import read_checkpoint

from ..helpers import load_tool, max_diff

RELEASED = Path(__file__).parents[1] / 'data' / 'released'


def assert_golden(model: torch.nn.Module, golden_file: Path, sizes: tuple[int, ...] = (32, 48),
                  tolerance: float = 1e-5) -> None:
    """The model's logits for each size's stored inputs are the stored reference logits within ``tolerance``."""
    golden = torch.load(golden_file, weights_only=True)
    model.eval()
    with torch.no_grad():
        for size in sizes:
            assert max_diff(model(golden[f'inputs_{size}']), golden[f'logits_{size}']) <= tolerance, (golden_file,
                                                                                                       size)


def convert_with_the_command(family: str, source: Path, output: Path) -> tuple[torch.nn.Module, dict[str, Any]]:
    """``vispe convert family source output``, then the model of the file's ``meta['model']`` with its weights."""
    assert load_tool('convert_checkpoint').main([family, str(source), str(output)]) == 0
    state_dict, meta = read_checkpoint(output)
    assert meta['kind'] == family and meta['unmapped'] == []
    model = vispe.MODELS.build(meta['model'])
    model.load_state_dict(state_dict, strict=True)
    return model, meta


def assert_refused(family: str, source: Path, output: Path, capsys, *fragments: str) -> None:
    """The command exits 1, writes nothing and its message names ``source`` and every fragment."""
    assert load_tool('convert_checkpoint').main([family, str(source), str(output)]) == 1
    error = capsys.readouterr().err
    assert str(source) in error and all(fragment in error for fragment in fragments), error
    assert error.rstrip().endswith('Nothing written.') and not output.exists()


def truncated_copy(source: Path, folder: Path, name: str) -> Path:
    """The first 5000 bytes of ``source`` as ``folder/name``."""
    path = folder / name
    path.write_bytes(source.read_bytes()[:5000])
    return path
