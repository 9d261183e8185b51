"""vispe ViTs in timm: ``timm.create_model('vispe_vit', ...)``, and ``save_for_hf`` -> ``create_model('local-dir:...')``
rebuilding the same model with the same logits for every 2D encoding (before, timm rebuilt a plain ViT without the
encoding, with other logits and no warning, or failed on an unexpected key)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import timm
import torch

import vispe
from vispe.encodings.builder import registered_encodings
from vispe.models.timm_hub import vispe_vit

from ..conftest import TINY_VIT
from ..helpers import max_diff

IMAGE_ENCODINGS = [name for name in (info.name for info in vispe.list_encodings(image_only=True))]
CASES = [(name, index, example) for name in IMAGE_ENCODINGS
         for index, example in enumerate(registered_encodings()[name].examples)]
ARCHITECTURE = {key: value for key, value in TINY_VIT.items() if key != 'model_name'}


def perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """Every parameter moved by seeded noise, so that zero-initialised tables (iRPE, PEG's bias) matter."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    return model.eval()


def logits(model: torch.nn.Module, size: tuple[int, int]) -> torch.Tensor:
    torch.manual_seed(3)  # encodings that draw positions at evaluation draw the same
    images = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        return model(images)


@pytest.mark.parametrize('name, index, example', CASES, ids=[f'{name}-{index}' for name, index, _ in CASES])
def test_save_for_hf_and_local_dir_give_the_same_model(name: str, index: int, example: dict, tmp_path: Path) -> None:
    encoding = dict(type=name, **example)
    torch.manual_seed(0)
    model = perturbed(vispe.create_vit(TINY_VIT['model_name'], encoding=encoding, **ARCHITECTURE))
    timm.models.save_for_hf(model, tmp_path)
    config = json.loads((tmp_path / 'config.json').read_text())
    assert config['architecture'] == 'vispe_vit' and config['model_args']['encoding']['type'] == name
    again = timm.create_model(f'local-dir:{tmp_path}', pretrained=True).eval()
    assert type(again) is type(model) and type(again.encoding) is type(model.encoding)
    assert again.pretrained_cfg['encoding'] == config['model_args']['encoding']
    for size in ((56, 56), (88, 72)):
        expected = logits(model, size)
        assert max_diff(logits(again, size), expected) <= 1e-6


def test_a_model_without_its_weights_is_another_model(tmp_path: Path) -> None:
    """The round trip's equality comes from the weights: pretrained=False rebuilds the encoding, new weights."""
    model = perturbed(vispe.create_vit(TINY_VIT['model_name'], encoding=dict(type='RoPEAxial'), **ARCHITECTURE))
    timm.models.save_for_hf(model, tmp_path)
    fresh = timm.create_model(f'local-dir:{tmp_path}', pretrained=False).eval()
    assert type(fresh.encoding).__name__ == 'RoPEAxial'
    assert max_diff(logits(fresh, (56, 56)), logits(model, (56, 56))) > 1e-3


def test_timm_create_model_builds_vispe_vit_with_its_encoding() -> None:
    model = timm.create_model('vispe_vit', base_model=TINY_VIT['model_name'], encoding=dict(type='LookHere'),
                              **ARCHITECTURE)
    assert isinstance(model, vispe.VisionTransformer) and type(model.encoding).__name__ == 'LookHere'
    assert model.pretrained_cfg['architecture'] == 'vispe_vit'
    assert model.pretrained_cfg['encoding'] == dict(type='LookHere')
    assert vispe_vit.__name__ in timm.list_models('vispe_*')


def test_a_random_model_names_no_weights_it_does_not_have() -> None:
    """Before: a random RoPEMixed ViT carried hf_hub_id 'timm/vit_small_patch16_224.augreg_in21k_ft_in1k'."""
    model = vispe.create_vit('vit_small_patch16_224', encoding=dict(type='RoPEMixed'), depth=1)
    cfg = model.pretrained_cfg
    assert not any(cfg.get(key) for key in ('hf_hub_id', 'url', 'file', 'tag', 'source', 'notes'))
    assert cfg['base_model'] == 'vit_small_patch16_224' and cfg['encoding'] == dict(type='RoPEMixed')


def test_a_new_head_on_reload_keeps_the_rest(tmp_path: Path) -> None:
    model = perturbed(vispe.create_vit(TINY_VIT['model_name'], encoding=dict(type='RoPEMixed'), **ARCHITECTURE))
    timm.models.save_for_hf(model, tmp_path)
    again = timm.create_model(f'local-dir:{tmp_path}', pretrained=True, num_classes=3).eval()
    assert again.num_classes == 3
    images = torch.randn(1, 3, 56, 56)
    with torch.no_grad():
        assert max_diff(again.forward_features(images), model.forward_features(images)) <= 1e-6


def test_an_encoding_instance_cannot_be_saved_silently(tmp_path: Path) -> None:
    """An encoding given as an instance has no config to write: timm refuses it by name instead of saving a model
    that would come back without it."""
    model = vispe.create_vit(TINY_VIT['model_name'], encoding=vispe.build_encoding(dict(type='SinCos2D', embed_dim=64)),
                             **ARCHITECTURE)
    with pytest.raises(ValueError, match="Model argument 'encoding' is not serializable"):
        timm.models.save_for_hf(model, tmp_path)


def test_vispe_vit_needs_a_base_model_and_has_no_tags() -> None:
    with pytest.raises(TypeError, match="vispe_vit needs base_model=, a timm VisionTransformer name"):
        timm.create_model('vispe_vit')
    with pytest.raises(ValueError, match="vispe_vit has no pretrained tag 'in1k'"):
        timm.create_model('vispe_vit.in1k', base_model='vit_small_patch16_224')
