"""load_checkpoint: timm and vispe files, resampling, nesting, and the errors for bad files."""
from __future__ import annotations

from pathlib import Path

import pytest
import timm
import torch
from timm.layers import resample_abs_pos_embed

import vispe
from vispe.checkpoint import CheckpointMismatchError
from vispe.serialization import CorruptCheckpointError, UnsafeCheckpointError

from .helpers import max_diff, tiny_vit


def timm_tiny(img_size: int = 56) -> torch.nn.Module:
    return timm.create_model('vit_tiny_patch16_224', img_size=img_size, patch_size=4, embed_dim=64, depth=2,
                             num_heads=4, num_classes=10).eval()


def test_timm_checkpoint_at_the_same_grid_loads_exactly(tmp_path: Path) -> None:
    theirs = timm_tiny()
    torch.save(theirs.state_dict(), tmp_path / 'timm.pth')
    ours = tiny_vit('LearnedAPE')
    report = vispe.load_checkpoint(ours, tmp_path / 'timm.pth')
    assert report['resampled'] == [] and report['missing'] == [] and report['unexpected'] == []
    images = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        assert max_diff(ours(images), theirs(images)) <= 1e-6


def test_timm_checkpoint_from_another_grid_is_resampled_as_timm_does(tmp_path: Path) -> None:
    theirs = timm_tiny(img_size=32)
    torch.save({'model': theirs.state_dict()}, tmp_path / 'deit_style.pth')
    ours = tiny_vit('LearnedAPE')
    report = vispe.load_checkpoint(ours, tmp_path / 'deit_style.pth')
    assert report['resampled'] == ['pos_embed']
    expected = resample_abs_pos_embed(theirs.pos_embed, new_size=[14, 14], old_size=[8, 8], num_prefix_tokens=1)
    assert torch.equal(ours.encoding.pos_embed.data, expected)


def test_vispe_checkpoint_round_trip_nested_and_ddp_prefixed(tmp_path: Path) -> None:
    source = tiny_vit(['LearnedAPE', 'FourierFeatures'])
    state = {f'module.{key}': value for key, value in source.state_dict().items()}
    torch.save({'state_dict': state, 'meta': {'epoch': 3}}, tmp_path / 'mmengine_style.pth')
    target = tiny_vit(['LearnedAPE', 'FourierFeatures'])
    vispe.load_checkpoint(target, tmp_path / 'mmengine_style.pth')
    images = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        assert max_diff(target(images), source(images)) == 0.0


def test_safetensors_checkpoint(tmp_path: Path) -> None:
    from safetensors.torch import save_file
    source = timm_tiny()
    save_file({k: v.contiguous() for k, v in source.state_dict().items()}, str(tmp_path / 'model.safetensors'))
    target = tiny_vit('LearnedAPE')
    vispe.load_checkpoint(target, tmp_path / 'model.safetensors')
    assert torch.equal(target.encoding.pos_embed, source.pos_embed)


def test_mismatched_keys_are_listed_with_the_resampling_status(tmp_path: Path) -> None:
    torch.save(timm_tiny().state_dict(), tmp_path / 'timm.pth')
    rope_like = tiny_vit('SinCos2D')
    with pytest.raises(CheckpointMismatchError) as info:
        vispe.load_checkpoint(rope_like, tmp_path / 'timm.pth')
    message = str(info.value)
    assert 'Unexpected in the checkpoint: pos_embed' in message
    assert 'Resampling: not tried: the model has no learned position table' in message
    report = vispe.load_checkpoint(rope_like, tmp_path / 'timm.pth', strict=False)
    assert report['unexpected'] == ['pos_embed']


def test_new_head_loads_with_strict_false(tmp_path: Path) -> None:
    torch.save(timm_tiny().state_dict(), tmp_path / 'timm.pth')
    five_classes = tiny_vit('LearnedAPE', num_classes=5)
    with pytest.raises(CheckpointMismatchError, match=r'head.weight: checkpoint \(10, 64\) vs model \(5, 64\)'):
        vispe.load_checkpoint(five_classes, tmp_path / 'timm.pth')
    report = vispe.load_checkpoint(five_classes, tmp_path / 'timm.pth', strict=False)
    assert report['skipped'] == ['head.weight', 'head.bias']


class NotAWeight:
    pass


def test_pickled_objects_are_refused_unless_trusted(tmp_path: Path) -> None:
    path = tmp_path / 'with_object.pth'
    torch.save({'state_dict': tiny_vit('NoPE').state_dict(), 'extra': NotAWeight()}, path)
    with pytest.raises(UnsafeCheckpointError, match=r'tests.test_checkpoint.NotAWeight\) that vispe does not unpickle'):
        vispe.load_checkpoint(tiny_vit('NoPE'), path)
    vispe.load_checkpoint(tiny_vit('NoPE'), path, trusted=True)


def test_corrupt_and_missing_files_name_the_path(tmp_path: Path) -> None:
    corrupt = tmp_path / 'corrupt.pth'
    torch.save(tiny_vit('NoPE').state_dict(), corrupt)
    corrupt.write_bytes(corrupt.read_bytes()[:200])
    with pytest.raises(CorruptCheckpointError, match=f'{corrupt} is corrupt or truncated'):
        vispe.load_checkpoint(tiny_vit('NoPE'), corrupt)
    with pytest.raises(FileNotFoundError, match='nowhere.pth'):
        vispe.load_checkpoint(tiny_vit('NoPE'), tmp_path / 'nowhere.pth')
    not_weights = tmp_path / 'list.pth'
    torch.save([1, 2, 3], not_weights)
    with pytest.raises(CheckpointMismatchError, match='holds no state dict'):
        vispe.load_checkpoint(tiny_vit('NoPE'), not_weights)
