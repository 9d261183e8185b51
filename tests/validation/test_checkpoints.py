"""Checkpoints are checked where they enter: the encoding they were trained with, how much of the model
they fill, and finite values."""
from __future__ import annotations

import runpy
import sys
import warnings
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

import vispe
from vispe.checkpoint import CheckpointMismatchError, NonFiniteWeightsError, config_encodings, model_encodings
from vispe.registry import MODELS

from ..conftest import REPO_ROOT
from ..helpers import tiny_vit

def model_from(config: str, **encoding) -> torch.nn.Module:
    cfg = Config.fromfile(str(REPO_ROOT / 'configs' / 'vit' / f'{config}.py'))
    if encoding:
        cfg.model.backbone.encoding = encoding
    return MODELS.build(cfg.model)


def sincos_run_checkpoint(path: Path) -> Path:
    """best.pth as training writes it (WeightsCheckpointHook: weights and the encodings in the metadata) for the
    SinCos2D config."""
    model = model_from('vit-t4_sincos_fmnist-28')
    torch.save({'state_dict': model.state_dict(), 'meta': {'epoch': 8, 'encodings': model_encodings(model)}}, path)
    return path


def test_a_checkpoint_of_another_encoding_is_refused(tmp_path: Path) -> None:
    """A SinCos2D run's weights fit a RoPEAxial model key for key (neither has parameters): before, they
    loaded and tools/test.py reported 10% top-1."""
    checkpoint = sincos_run_checkpoint(tmp_path / 'best.pth')
    rope = model_from('vit-t4_sincos_fmnist-28', type='RoPEAxial')
    with pytest.raises(CheckpointMismatchError, match=r'trained with encoding SinCos2D, but the model has RoPEAxial.*'
                                                      r'check_encoding=False'):
        vispe.load_checkpoint(rope, checkpoint)
    vispe.load_checkpoint(rope, checkpoint, check_encoding=False)
    vispe.load_checkpoint(model_from('vit-t4_sincos_fmnist-28'), checkpoint)


def test_test_tool_refuses_a_checkpoint_of_another_encoding(tmp_path: Path) -> None:
    argv = sys.argv
    sys.argv = ['tools/test.py', str(REPO_ROOT / 'configs' / 'vit' / 'vit-t4_rope-axial_fmnist-28.py'),
                str(sincos_run_checkpoint(tmp_path / 'best.pth'))]
    try:
        with pytest.raises(CheckpointMismatchError, match='SinCos2D'):
            runpy.run_path(str(REPO_ROOT / 'tools' / 'test.py'), run_name='__main__')
    finally:
        sys.argv = argv


def test_written_checkpoints_name_their_encodings(tmp_path: Path) -> None:
    model = tiny_vit(['LearnedAPE', dict(type='RoPEAxial')])
    assert model_encodings(model) == ['LearnedAPE', 'RoPEAxial']
    torch.save({'state_dict': model.state_dict(), 'meta': {'encodings': ['LearnedAPE', 'RoPEMixed']}},
               tmp_path / 'ckpt.pth')
    with pytest.raises(CheckpointMismatchError, match='LearnedAPE \\+ RoPEMixed'):
        vispe.load_checkpoint(tiny_vit(['LearnedAPE', dict(type='RoPEAxial')]), tmp_path / 'ckpt.pth')


def test_stored_config_is_read_not_run(tmp_path: Path) -> None:
    marker = tmp_path / 'ran.txt'
    text = (f'open({str(marker)!r}, "w").write("x")\n'
            "model = dict(backbone=dict(encoding=[dict(type='LearnedAPE'), 'vispe.RoPEAxial']))\n"
            "other = {'encoding': {'type': 'PEG'}}\n")
    assert config_encodings(text) == ['LearnedAPE', 'RoPEAxial', 'PEG']
    assert config_encodings('model = dict(') is None
    assert not marker.exists()


def test_strict_false_that_loads_almost_nothing_warns_with_counts(tmp_path: Path) -> None:
    torch.save({'unrelated.weight': torch.zeros(3), 'cls_token': torch.zeros(1, 1, 64)}, tmp_path / 'other.pth')
    with pytest.warns(UserWarning, match=r'loaded 1 of the model\'s \d+ tensors .*\(\d+ missing from the checkpoint, '
                                         r'1 unexpected in it, 0 of another shape\)'):
        vispe.load_checkpoint(tiny_vit('NoPE'), tmp_path / 'other.pth', strict=False)
    source = tiny_vit('NoPE', num_classes=5)
    torch.save(source.state_dict(), tmp_path / 'five_classes.pth')
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        report = vispe.load_checkpoint(tiny_vit('NoPE'), tmp_path / 'five_classes.pth', strict=False)
    assert report['skipped'] == ['head.weight', 'head.bias']


def test_non_finite_weights_are_reported(tmp_path: Path) -> None:
    state = tiny_vit('NoPE').state_dict()
    state['blocks.0.attn.qkv.weight'][0, :3] = torch.tensor([float('nan'), float('inf'), -float('inf')])
    torch.save({'state_dict': state}, tmp_path / 'diverged.pth')
    with pytest.raises(NonFiniteWeightsError, match=r'blocks.0.attn.qkv.weight \(3 of \d+\).*earlier checkpoint.*'
                                                    r'allow_nonfinite=True'):
        vispe.load_checkpoint(tiny_vit('NoPE'), tmp_path / 'diverged.pth')
    model = tiny_vit('NoPE')
    vispe.load_checkpoint(model, tmp_path / 'diverged.pth', allow_nonfinite=True)
    assert torch.isnan(model.blocks[0].attn.qkv.weight).any()


def test_a_work_dir_config_names_the_encoding_of_a_file_that_does_not(tmp_path: Path) -> None:
    """A best.pth of an older vispe holds only the epoch; the config dumped beside it in the work dir says
    which encoding it was trained with."""
    cfg = Config.fromfile(str(REPO_ROOT / 'configs' / 'vit' / 'vit-t4_sincos_fmnist-28.py'))
    cfg.dump(str(tmp_path / 'vit-t4_sincos_fmnist-28.py'))
    torch.save({'state_dict': MODELS.build(cfg.model).state_dict(), 'meta': {'epoch': 3}}, tmp_path / 'best.pth')
    with pytest.raises(CheckpointMismatchError, match='trained with encoding SinCos2D, but the model has RoPEAxial'):
        vispe.load_checkpoint(model_from('vit-t4_sincos_fmnist-28', type='RoPEAxial'), tmp_path / 'best.pth')


def test_arguments_of_the_wrong_kind_are_named() -> None:
    with pytest.raises(TypeError, match='loads into a torch nn.Module; got NoneType'):
        vispe.load_checkpoint(None, 'x.pth')
    with pytest.raises(TypeError, match='path of a checkpoint file .*; got NoneType'):
        vispe.load_checkpoint(tiny_vit('NoPE'), None)
