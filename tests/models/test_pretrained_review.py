"""Loading paths found wrong in review: a converted file into a model built with other options (no shape tells heads
or slopes) loaded silently; features_only with weights crashed in timm's vispe_vit; num_classes=0 with weights was
refused; a rope-vit name took other encoding options and dropped them in silence; the timm weights of a rope-vit name
were checked against a stray config in the working folder; overlay weights went unrecorded."""
from __future__ import annotations

from pathlib import Path

import pytest
import timm
import torch

import vispe
from vispe.checkpoint import CheckpointMismatchError
from vispe.converters.files import convert_checkpoint

from ..conftest import TINY_VIT
from ..helpers import max_diff

ARCHITECTURE = {key: value for key, value in TINY_VIT.items() if key != 'model_name'}
LOOKHERE = Path(__file__).parents[1] / 'data' / 'released' / 'lookhere' / 'state_dict.pt'


def converted_lookhere(tmp_path: Path) -> tuple[Path, dict]:
    output = tmp_path / 'lookhere.pth'
    conversion = convert_checkpoint('lookhere', LOOKHERE, output)
    return output, dict(conversion.model)


def test_a_converted_file_loads_into_its_own_model_and_refuses_other_options(tmp_path: Path) -> None:
    path, config = converted_lookhere(tmp_path)
    arguments = {key: value for key, value in config.items() if key not in ('type', 'model_name')}
    same = vispe.create_vit(config['model_name'], pretrained=path, **arguments)
    assert same.pretrained_cfg['notes'] == (f'weights: {path}',)
    for change, message in ((dict(encoding={**config['encoding'], 'global_slope': 9.0}), 'encoding.global_slope'),
                            (dict(num_heads=config['num_heads'] * 2), 'num_heads'),
                            (dict(norm_eps=1e-6), 'norm_eps')):
        with pytest.raises(CheckpointMismatchError, match=rf'was converted for another model .*{message}: file '):
            vispe.create_vit(config['model_name'], pretrained=path, **{**arguments, **change})


def test_features_only_with_weights_through_timm(tmp_path: Path) -> None:
    model = vispe.create_vit(TINY_VIT['model_name'], encoding=dict(type='RoPEMixed'), **ARCHITECTURE).eval()
    timm.models.save_for_hf(model, tmp_path)
    features = timm.create_model(f'local-dir:{tmp_path}', pretrained=True, features_only=True, out_indices=(1,))
    images = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        expected = model.forward_intermediates(images, indices=[1], intermediates_only=True)[0]
        assert max_diff(features.eval()(images)[0], expected) <= 1e-6


def test_no_head_with_weights(tmp_path: Path) -> None:
    model = vispe.create_vit(TINY_VIT['model_name'], encoding=dict(type='RoPEAxial'), **ARCHITECTURE).eval()
    timm.models.save_for_hf(model, tmp_path)
    pooled = {**ARCHITECTURE, 'num_classes': 0}
    for headless in (vispe.create_vit(TINY_VIT['model_name'], encoding=dict(type='RoPEAxial'), pretrained=tmp_path,
                                      **pooled),
                     timm.create_model(f'local-dir:{tmp_path}', pretrained=True, num_classes=0)):
        images = torch.randn(1, 3, 56, 56)
        with torch.no_grad():
            assert max_diff(headless.eval()(images), model.forward_head(model.forward_features(images),
                                                                        pre_logits=True)) <= 1e-6


def test_a_rope_vit_name_refuses_other_encoding_options() -> None:
    with pytest.raises(ValueError, match=r"vit_small_patch16_rope_224 is timm's port of a rope-vit model"):
        vispe.create_vit('vit_small_patch16_rope_224', encoding=dict(type='RoPEAxial', theta=10000.0), depth=1)
    same = vispe.create_vit('vit_small_patch16_rope_224', encoding=dict(type='RoPEAxial'), depth=1)
    assert same.encoding.theta == 100


def test_rope_vit_weights_ignore_configs_in_the_working_folder(tmp_path: Path, monkeypatch) -> None:
    small = dict(depth=1, img_size=32, num_classes=10)
    eva = timm.create_model('vit_small_patch16_rope_224', dynamic_img_size=True, **small)
    torch.save(eva.state_dict(), tmp_path / 'eva.pth')
    (tmp_path / 'work').mkdir()
    (tmp_path / 'work' / 'other.py').write_text("model = dict(encoding=dict(type='SinCos2D'))\n")
    monkeypatch.chdir(tmp_path / 'work')
    overlay = dict(file=str(tmp_path / 'eva.pth'), num_classes=10)
    model = vispe.create_vit('vit_small_patch16_rope_224', pretrained=True, pretrained_cfg_overlay=overlay, **small)
    assert type(model.encoding).__name__ == 'RoPEAxial'


def test_weights_given_by_overlay_are_recorded(tmp_path: Path) -> None:
    model = vispe.create_vit(TINY_VIT['model_name'], encoding=dict(type='SinCos2D'), **ARCHITECTURE)
    torch.save(model.state_dict(), tmp_path / 'weights.pth')
    again = timm.create_model('vispe_vit', base_model=TINY_VIT['model_name'], encoding=dict(type='SinCos2D'),
                              pretrained=True, pretrained_cfg_overlay=dict(file=str(tmp_path / 'weights.pth')),
                              **ARCHITECTURE)
    assert again.pretrained_cfg['file'] == str(tmp_path / 'weights.pth')
    assert again.pretrained_cfg['notes'] == (f'weights: {tmp_path / "weights.pth"}',)
