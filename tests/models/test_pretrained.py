"""``pretrained=`` on create_vit and TimmViT configs: a checkpoint file, a save_for_hf folder, an ``hf-hub:`` id
(through the local cache, offline) or a vispe zoo card, all through vispe's safe reader; and timm's rope-vit names
(before: a bare TypeError from Eva about pos_embed)."""
from __future__ import annotations

import os
from pathlib import Path

import huggingface_hub.constants
import pytest
import timm
import torch

import vispe
from vispe.checkpoint import CheckpointMismatchError
from vispe.engine import load_config
from vispe.models.pretrained import PretrainedWeightsError, resolve_pretrained
from vispe.serialization import CorruptCheckpointError

from ..conftest import TINY_VIT
from ..helpers import max_diff

ARCHITECTURE = {key: value for key, value in TINY_VIT.items() if key != 'model_name'}
REPO_ROOT = Path(__file__).parents[2]


def tiny(encoding: dict, **overrides) -> vispe.VisionTransformer:
    return vispe.create_vit(TINY_VIT['model_name'], encoding=encoding, **{**ARCHITECTURE, **overrides}).eval()


def same_logits(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    images = torch.randn(2, 3, 56, 72)
    with torch.no_grad():
        return max_diff(a(images), b(images)) <= 1e-6


def test_a_checkpoint_file(tmp_path: Path) -> None:
    model = tiny(dict(type='RoPEMixed'))
    torch.save(model.state_dict(), tmp_path / 'weights.pth')
    loaded = tiny(dict(type='RoPEMixed'), pretrained=tmp_path / 'weights.pth')
    assert same_logits(loaded, model)
    assert loaded.pretrained_cfg['notes'] == (f'weights: {tmp_path / "weights.pth"}',)


def test_a_save_for_hf_folder_and_its_encoding_check(tmp_path: Path) -> None:
    model = tiny(dict(type='RoPEAxial'))
    timm.models.save_for_hf(model, tmp_path)
    assert same_logits(tiny(dict(type='RoPEAxial'), pretrained=str(tmp_path)), model)
    with pytest.raises(CheckpointMismatchError, match=r'was trained with encoding RoPEAxial, but the model has '
                                                      r'SinCos2D'):
        tiny(dict(type='SinCos2D'), pretrained=str(tmp_path))


def hub_cache(root: Path, repo: str, files: dict[str, Path]) -> None:
    """A Hugging Face cache as hf_hub_download leaves it: refs/main -> snapshots/<commit>/<files>."""
    commit = '0123456789abcdef0123456789abcdef01234567'
    folder = root / f'models--{repo.replace("/", "--")}'
    (folder / 'refs').mkdir(parents=True)
    (folder / 'refs' / 'main').write_text(commit)
    snapshot = folder / 'snapshots' / commit
    snapshot.mkdir(parents=True)
    for name, source in files.items():
        (snapshot / name).write_bytes(source.read_bytes())


def test_an_hf_hub_id_from_the_offline_cache(tmp_path: Path, monkeypatch) -> None:
    model = tiny(dict(type='LookHere'))
    timm.models.save_for_hf(model, tmp_path / 'saved')
    hub_cache(tmp_path / 'cache', 'someone/tiny-lookhere', {path.name: path for path in (tmp_path / 'saved').iterdir()})
    monkeypatch.setattr(huggingface_hub.constants, 'HF_HUB_CACHE', str(tmp_path / 'cache'))
    monkeypatch.setattr(huggingface_hub.constants, 'HF_HUB_OFFLINE', True)
    assert same_logits(tiny(dict(type='LookHere'), pretrained='hf-hub:someone/tiny-lookhere'), model)
    again = timm.create_model('hf-hub:someone/tiny-lookhere', pretrained=True).eval()
    assert type(again.encoding).__name__ == 'LookHere' and same_logits(again, model)


def test_an_uncached_hub_id_offline_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(huggingface_hub.constants, 'HF_HUB_CACHE', str(tmp_path))
    monkeypatch.setattr(huggingface_hub.constants, 'HF_HUB_OFFLINE', True)
    monkeypatch.setenv('HF_HUB_OFFLINE', '1')
    with pytest.raises(PretrainedWeightsError, match=r'hf-hub:someone/absent: none of model\.safetensors, '
                                                     r'pytorch_model\.bin is in the local Hugging Face cache and '
                                                     r'HF_HUB_OFFLINE=1 forbids'):
        tiny(dict(type='RoPEAxial'), pretrained='hf-hub:someone/absent')


def test_a_zoo_card_by_name_and_seed(monkeypatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    card = 'vit-t4_rope-axial_fmnist-28'
    source = resolve_pretrained(card)
    assert source.path == Path('models', card, f'{card}_s0.pth')
    assert resolve_pretrained(f'{card}_s1').path.name == f'{card}_s1.pth'
    config = load_config(f'models/{card}/{card}.py')
    backbone = {key: value for key, value in config.model.backbone.items() if key != 'type'}
    model = vispe.create_vit(backbone.pop('model_name'), pretrained=f'{card}_s1', **backbone).eval()
    reference = vispe.MODELS.build(config.model).eval()
    vispe.load_checkpoint(reference, source.path.with_name(f'{card}_s1.pth'))
    images = torch.randn(2, 1, 28, 28).expand(-1, backbone.get('in_chans', 3), -1, -1)
    with torch.no_grad():
        assert max_diff(model(images), reference(images)) <= 1e-6
    with pytest.raises(PretrainedWeightsError, match=rf'Zoo card {card} has no checkpoint of seed 7 .* seeds: 0, 1'):
        resolve_pretrained(f'{card}_s7')


@pytest.mark.parametrize('value, message', [
    ('vit-t4_rope-axel_fmnist-28', r"not a file, a folder, an hf-hub:org/name id or a vispe zoo card: no zoo card of "
                                   r"that name in models/\. Did you mean 'vit-t4_rope-axial_fmnist-28'"),
    ('missing/weights.pth', r"pretrained='missing/weights\.pth': no such file or folder"),
])
def test_unknown_weights_are_named(value: str, message: str, monkeypatch) -> None:
    monkeypatch.chdir(REPO_ROOT)
    with pytest.raises(PretrainedWeightsError, match=message):
        resolve_pretrained(value)


def test_a_truncated_file_names_its_path(tmp_path: Path) -> None:
    path = tmp_path / 'truncated.pth'
    torch.save(tiny(dict(type='RoPEAxial')).state_dict(), path)
    path.write_bytes(path.read_bytes()[:2000])
    with pytest.raises(CorruptCheckpointError, match=str(path)):
        tiny(dict(type='RoPEAxial'), pretrained=str(path))


def test_another_depth_is_refused_with_the_shapes(tmp_path: Path) -> None:
    torch.save(tiny(dict(type='RoPEMixed'), depth=3).state_dict(), tmp_path / 'deeper.pth')
    with pytest.raises(CheckpointMismatchError, match=r'Unexpected in the checkpoint: blocks\.2\..*Shape mismatches: '
                                                      r'encoding\.freqs: checkpoint \(2, 3, .*\) vs model \(2, 2, '):
        tiny(dict(type='RoPEMixed'), pretrained=str(tmp_path / 'deeper.pth'))


def test_a_config_takes_pretrained(tmp_path: Path) -> None:
    model = tiny(dict(type='iRPE'))
    torch.save(model.state_dict(), tmp_path / 'irpe.pth')
    built = vispe.MODELS.build(dict(type='TimmViT', model_name=TINY_VIT['model_name'], encoding=dict(type='iRPE'),
                                    pretrained=str(tmp_path / 'irpe.pth'), **ARCHITECTURE)).eval()
    assert same_logits(built, model)


@pytest.mark.parametrize('timm_name, encoding', [
    ('vit_small_patch16_rope_224', ['RoPEAxial']), ('vit_small_patch16_rope_mixed_224', ['RoPEMixed']),
    ('vit_small_patch16_rope_ape_224', ['LearnedAPE', 'RoPEAxial']),
    ('vit_small_patch16_rope_mixed_ape_224', ['LearnedAPE', 'RoPEMixed'])])
def test_timm_rope_vit_names_build_themselves_with_their_weights(timm_name: str, encoding: list[str],
                                                                 tmp_path: Path) -> None:
    """timm's rope-vit ports by name, with their timm weights (from a local file here, as pretrained_cfg_overlay
    allows): the same logits as timm's Eva at the training size and beyond."""
    small = dict(depth=2, img_size=32, num_classes=10)
    torch.manual_seed(0)
    eva = timm.create_model(timm_name, dynamic_img_size=True, **small).eval()
    state = {key: value + 0.05 * torch.randn_like(value) if value.is_floating_point() else value
             for key, value in eva.state_dict().items()}
    eva.load_state_dict(state)
    torch.save(state, tmp_path / 'eva.pth')
    overlay = dict(file=str(tmp_path / 'eva.pth'), num_classes=10)  # timm resets a head of other classes
    model = vispe.create_vit(timm_name, pretrained=True, pretrained_cfg_overlay=overlay, **small).eval()
    assert vispe.checkpoint.model_encodings(model) == encoding
    for size in ((32, 32), (48, 64)):
        images = torch.randn(2, 3, *size)
        with torch.no_grad():
            assert max_diff(model(images), eva(images)) <= 1e-5
    assert model.pretrained_cfg['notes'][0].startswith(f'weights: timm {timm_name}')


def test_other_timm_architectures_get_a_way_to_load_them() -> None:
    with pytest.raises(ValueError, match=r"'vit_base_patch16_rope_reg1_gap_256' is a timm 'eva' model, not a "
                                         r'plain VisionTransformer.*timm\.create_model'):
        vispe.create_vit('vit_base_patch16_rope_reg1_gap_256')
    with pytest.raises(ValueError, match=r"'vit_base_r50_s16_224' is a timm 'vision_transformer_hybrid' model"):
        vispe.create_vit('vit_base_r50_s16_224')
    with pytest.raises(ValueError, match=r"vit_small_patch16_rope_224 is timm's port of a rope-vit model: "
                                         r'vit_small_patch16_224 with encoding'):
        vispe.create_vit('vit_small_patch16_rope_224', encoding=dict(type='SinCos2D'))


def test_pretrained_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match='pretrained must be True/False, a checkpoint path'):
        vispe.create_vit('vit_small_patch16_224', pretrained=3)


def test_hub_offline_in_tests() -> None:
    assert os.environ.get('HF_HUB_OFFLINE') == '1'
