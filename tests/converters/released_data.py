"""Shared by the converter tests: the golden data of tests/data/released/<family>/, building and running a converted
model, the tensor shapes of a DeiT, and the checks every family's files must pass (another family refused, a truncated
file named)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vispe
from vispe.checkpoint import load_checkpoint, read_checkpoint
from vispe.serialization import CorruptCheckpointError

from ..helpers import load_tool, max_diff

RELEASED = Path(__file__).parents[1] / 'data' / 'released'
CONFIGS = Path(__file__).parents[2] / 'configs' / 'released'
TOLERANCE = 1e-5


def released(family: str, tag: str) -> dict[str, torch.Tensor]:
    """The authors' state dict of ``state_dict_<tag>.pt`` (their names, under ``model``)."""
    return torch.load(RELEASED / family / f'state_dict_{tag}.pt', weights_only=True)['model']


def golden(family: str, tag: str) -> dict[str, torch.Tensor]:
    """``golden_<tag>.pt``: inputs at the training size and a larger one, and the authors' logits."""
    return torch.load(RELEASED / family / f'golden_{tag}.pt', weights_only=True)


def logits(model: torch.nn.Module, images: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return model.eval()(images)


def built(config: dict, state_dict: dict[str, torch.Tensor]) -> torch.nn.Module:
    """The model of ``config`` with ``state_dict`` loaded strictly, in eval mode."""
    model = vispe.MODELS.build(dict(config))
    model.load_state_dict(state_dict, strict=True)
    return model.eval()


def golden_diffs(model: torch.nn.Module, family: str, tag: str) -> tuple[float, float]:
    """Max |diff| of ``model``'s logits from the authors' at the training size and at the larger one."""
    data = golden(family, tag)
    return (max_diff(logits(model, data['x_train']), data['logits_train']),
            max_diff(logits(model, data['x_large']), data['logits_large']))


def assert_the_tool_gives_their_logits(family: str, tag: str, tmp_path: Path) -> None:
    """``vispe convert FAMILY state_dict_<tag>.pt OUT`` writes a file that, loaded into the model its meta names,
    gives the authors' logits."""
    output = tmp_path / 'converted.pth'
    assert load_tool('convert_checkpoint').main([family, str(RELEASED / family / f'state_dict_{tag}.pt'),
                                                 str(output)]) == 0
    _, meta = read_checkpoint(output)
    assert meta['kind'] == family and meta['unmapped'] == []
    model = vispe.MODELS.build(dict(meta['model']))
    load_checkpoint(model, output)
    assert max(golden_diffs(model, family, tag)) <= TOLERANCE


def deit_shapes(width: int, depth: int, patch: int, mlp_ratio: int, num_classes: int) -> dict[str, tuple[int, ...]]:
    """The shapes of a DeiT's tensors in timm's names, without cls token and absolute embedding."""
    hidden = width * mlp_ratio
    shapes = {'patch_embed.proj.weight': (width, 3, patch, patch), 'patch_embed.proj.bias': (width,),
              'norm.weight': (width,), 'norm.bias': (width,), 'head.weight': (num_classes, width),
              'head.bias': (num_classes,)}
    for index in range(depth):
        block = {'norm1.weight': (width,), 'norm1.bias': (width,), 'attn.qkv.weight': (3 * width, width),
                 'attn.qkv.bias': (3 * width,), 'attn.proj.weight': (width, width), 'attn.proj.bias': (width,),
                 'norm2.weight': (width,), 'norm2.bias': (width,), 'mlp.fc1.weight': (hidden, width),
                 'mlp.fc1.bias': (hidden,), 'mlp.fc2.weight': (width, hidden), 'mlp.fc2.bias': (width,)}
        shapes.update({f'blocks.{index}.{name}': shape for name, shape in block.items()})
    return shapes


def meta_tensors(shapes: dict[str, tuple[int, ...]]) -> dict[str, torch.Tensor]:
    """Tensors of these shapes without storage (converters read shapes only)."""
    return {name: torch.empty(shape, device='meta') for name, shape in shapes.items()}


def assert_refused_by_the_tool(family: str, path: Path, tmp_path: Path, capsys: pytest.CaptureFixture,
                               resembles: str | None = None) -> None:
    """``vispe convert FAMILY PATH`` exits 1 saying the file is not of ``family`` (and which family it resembles),
    and writes nothing."""
    output = tmp_path / 'out.pth'
    assert load_tool('convert_checkpoint').main([family, str(path), str(output)]) == 1
    error = capsys.readouterr().err
    assert f"{path} is not a '{family}' checkpoint" in error and error.rstrip().endswith('Nothing written.')
    if resembles is not None:
        assert f"Its keys resemble '{resembles}'" in error
    assert not output.exists()


def assert_truncated_file_named(family: str, tag: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A cut-off copy of the golden state dict is refused by the reader and by ``vispe convert``, naming the file."""
    path, output = tmp_path / 'truncated.pth', tmp_path / 'out.pth'
    path.write_bytes((RELEASED / family / f'state_dict_{tag}.pt').read_bytes()[:20000])
    with pytest.raises(CorruptCheckpointError, match=str(path)):
        read_checkpoint(path)
    assert load_tool('convert_checkpoint').main([family, str(path), str(output)]) == 1
    assert str(path) in capsys.readouterr().err and not output.exists()
