"""The rope-vit family (naver-ai/rope-vit's DeiT-III with RoPE-Axial / RoPE-Mixed, with and without APE): a state
dict made by the authors' own model code converts, through ``vispe convert`` and the library, into a vispe TimmViT
whose logits equal theirs at the training size and at 1.5x (extrapolation); other files are refused.

tests/data/released/rope-vit/README.md says how the data were made."""
from __future__ import annotations

from pathlib import Path

import mmengine
import pytest
import timm
import torch

import vispe
from vispe.checkpoint import read_checkpoint
from vispe.converters import CheckpointFamilyError, UnsupportedCheckpointError, convert_state_dict
from vispe.converters.rope_vit import convert_rope_vit_state_dict, rope_vit_model

from ..helpers import load_tool

DATA = Path(__file__).parents[1] / 'data' / 'released' / 'rope-vit'
REPO_ROOT = Path(__file__).parents[2]
TOLERANCE = 1e-5
# The golden file is their rope_mixed_ape model's; each variant's file is it without the keys that model lacks
# (the harness checked these are exactly the key sets of their four models, which share the other weights).
LACKS = {'axial': ('freqs', 'freqs_t_x', 'freqs_t_y', 'pos_embed'), 'mixed': ('pos_embed',),
         'axial_ape': ('freqs', 'freqs_t_x', 'freqs_t_y'), 'mixed_ape': ()}
ENCODINGS = {'axial': ['RoPEAxial'], 'mixed': ['RoPEMixed'], 'axial_ape': ['LearnedAPE', 'RoPEAxial'],
             'mixed_ape': ['LearnedAPE', 'RoPEMixed']}


@pytest.fixture(scope='module')
def released() -> dict[str, torch.Tensor]:
    return torch.load(DATA / 'state_dict.pt', weights_only=True)['model']


@pytest.fixture(scope='module')
def golden() -> dict[str, torch.Tensor]:
    return torch.load(DATA / 'golden.pt', weights_only=True)


def variant_state_dict(released: dict[str, torch.Tensor], variant: str) -> dict[str, torch.Tensor]:
    return {key: value for key, value in released.items() if key not in LACKS[variant]}


def max_errors(model: torch.nn.Module, golden: dict[str, torch.Tensor], variant: str) -> dict[str, float]:
    """max |vispe - rope-vit| of the logits at the training size (32 px) and at 48 px."""
    model.eval()
    with torch.no_grad():
        return {size: (model(golden[f'images_{size}']) - golden[f'{variant}_logits_{size}']).abs().max().item()
                for size in ('train', 'test')}


@pytest.mark.parametrize('variant', list(LACKS))
def test_vispe_convert_gives_their_logits(released, golden, variant: str, tmp_path: Path, capsys) -> None:
    source, output = tmp_path / f'rope_{variant}.pth', tmp_path / 'vispe.pth'
    torch.save({'model': variant_state_dict(released, variant)}, source)
    assert load_tool('convert_checkpoint').main(['rope-vit', str(source), str(output)]) == 0
    out = capsys.readouterr().out
    assert f'wrote {output}' in out and 'no vispe module' not in out
    state_dict, meta = read_checkpoint(output)
    assert meta['kind'] == 'rope-vit' and meta['encodings'] == ENCODINGS[variant] and meta['unmapped'] == []
    assert meta['derived'] == ([] if 'freqs' in LACKS[variant] else ['freqs_t_x', 'freqs_t_y'])
    model = vispe.MODELS.build(meta['model'])
    model.load_state_dict(state_dict, strict=True)
    errors = max_errors(model, golden, variant)
    assert max(errors.values()) <= TOLERANCE, errors


@pytest.mark.parametrize('variant', list(LACKS))
def test_the_library_gives_their_logits(released, golden, variant: str) -> None:
    conversion = convert_state_dict('rope-vit', variant_state_dict(released, variant), 'golden')
    model = vispe.MODELS.build(conversion.model)
    model.load_state_dict(conversion.state_dict, strict=True)
    assert conversion.model['num_heads'] == 2 and conversion.model['init_values'] is not None
    assert conversion.model['class_token'] and conversion.model['global_pool'] == 'token'
    errors = max_errors(model, golden, variant)
    assert max(errors.values()) <= TOLERANCE, errors
    assert bool(conversion.notes) == (variant == 'axial_ape')  # the APE-only DeiT baseline has the same keys


def test_the_golden_comparison_sees_a_wrong_head_layout_or_theta(released, golden) -> None:
    """The parity test can fail: the mixed frequencies read as one head, or axial at another θ, miss by far."""
    one_head = convert_rope_vit_state_dict(variant_state_dict(released, 'mixed'), num_heads=1)
    model = vispe.MODELS.build(one_head.model)
    model.load_state_dict(one_head.state_dict)
    assert max_errors(model, golden, 'mixed')['train'] > 1e-2
    axial = convert_rope_vit_state_dict(variant_state_dict(released, 'axial'))
    model = vispe.MODELS.build({**axial.model, 'encoding': dict(type='RoPEAxial', theta=10.0)})
    model.load_state_dict(axial.state_dict)
    assert max_errors(model, golden, 'axial')['train'] > 1e-2


def test_a_shallower_file_gives_a_shallower_model(released) -> None:
    shallow = {key: value for key, value in released.items() if not key.startswith('blocks.1.')}
    shallow['freqs'] = released['freqs'][:, :1]
    conversion = convert_state_dict('rope-vit', shallow)
    assert conversion.model['depth'] == 1 and conversion.state_dict['encoding.encodings.1.freqs'].shape == (2, 1, 2, 32)
    vispe.MODELS.build(conversion.model).load_state_dict(conversion.state_dict, strict=True)


def test_a_width_without_a_known_head_count_is_refused_unless_given(tmp_path: Path, capsys) -> None:
    narrow = vispe.create_vit('vit_small_patch16_224', embed_dim=96, depth=1, num_heads=3, init_values=1e-4,
                              num_classes=4, encoding=dict(type='RoPEMixed'))
    state_dict = {key.replace('ls1.gamma', 'gamma_1').replace('ls2.gamma', 'gamma_2'): value
                  for key, value in narrow.state_dict().items() if key != 'encoding.freqs'}
    state_dict['freqs'] = narrow.encoding.freqs.detach().reshape(2, 1, -1)
    with pytest.raises(UnsupportedCheckpointError, match=r'width 96 is not a multiple of 64.*num_heads=H'):
        convert_state_dict('rope-vit', state_dict, 'narrow.pth')
    source, output = tmp_path / 'narrow.pth', tmp_path / 'out.pth'
    torch.save({'model': state_dict}, source)
    assert load_tool('convert_checkpoint').main(['rope-vit', str(source), str(output)]) == 1
    assert 'width 96 is not a multiple of 64' in capsys.readouterr().err and not output.exists()
    conversion = convert_rope_vit_state_dict(state_dict, num_heads=3)
    model = vispe.MODELS.build(conversion.model).eval()
    model.load_state_dict(conversion.state_dict, strict=True)
    images = torch.randn(1, 3, 48, 64)
    with torch.no_grad():
        assert torch.allclose(model(images), narrow.eval()(images), atol=1e-6)


def test_frequencies_of_another_depth_are_refused(released) -> None:
    wrong = {**released, 'freqs': torch.cat([released['freqs'], released['freqs'][:, :1]], dim=1)}
    with pytest.raises(UnsupportedCheckpointError, match=r'freqs has shape \(2, 3, 64\).*2 blocks.*\(2, 2, 64\)'):
        convert_state_dict('rope-vit', wrong, 'deeper.pth')


def test_a_timm_vit_is_refused_and_nothing_written(tmp_path: Path, capsys) -> None:
    timm_vit = timm.create_model('vit_tiny_patch16_224', depth=1, num_classes=3)
    source, output = tmp_path / 'timm.pth', tmp_path / 'out.pth'
    torch.save({'model': timm_vit.state_dict()}, source)
    with pytest.raises(CheckpointFamilyError, match="not a 'rope-vit' checkpoint"):
        convert_state_dict('rope-vit', timm_vit.state_dict(), str(source))
    assert load_tool('convert_checkpoint').main(['rope-vit', str(source), str(output)]) == 1
    error = capsys.readouterr().err
    assert f"{source} is not a 'rope-vit' checkpoint" in error and error.rstrip().endswith('Nothing written.')
    assert not output.exists()


def test_timms_eva_port_is_refused_naming_its_keys() -> None:
    """timm's vit_*_rope_mixed_* (Eva) has rope-vit's keys but its frequencies under rope.freqs."""
    eva = timm.create_model('vit_small_patch16_rope_mixed_224', depth=1, embed_dim=64, num_heads=1, num_classes=3)
    with pytest.raises(CheckpointFamilyError, match=r'eva\.pth is not a rope-vit DeiT checkpoint .*: its keys '
                                                    r'rope\.freqs are not in that layout'):
        convert_state_dict('rope-vit', eva.state_dict(), 'eva.pth')


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'cut.pth', tmp_path / 'out.pth'
    data = (DATA / 'state_dict.pt').read_bytes()
    source.write_bytes(data[:len(data) // 2])
    assert load_tool('convert_checkpoint').main(['rope-vit', str(source), str(output)]) == 1
    assert str(source) in capsys.readouterr().err and not output.exists()


@pytest.mark.parametrize('variant, config', [('axial', 'rope-vit_deit-s-axial_in1k.py'),
                                             ('mixed', 'rope-vit_deit-s-mixed_in1k.py')])
def test_released_configs_hold_the_backbone_inferred_for_vit_s(variant: str, config: str) -> None:
    """The ViT-S files' shapes (rope_{axial,mixed}_deit_small_patch16_LS) give the configs' backbones."""
    shapes = {'cls_token': (1, 1, 384), 'patch_embed.proj.weight': (384, 3, 16, 16), 'patch_embed.proj.bias': (384,),
              'norm.weight': (384,), 'norm.bias': (384,), 'head.weight': (1000, 384), 'head.bias': (1000,)}
    for index in range(12):
        shapes.update({f'blocks.{index}.attn.qkv.weight': (1152, 384), f'blocks.{index}.attn.qkv.bias': (1152,),
                       f'blocks.{index}.mlp.fc1.weight': (1536, 384), f'blocks.{index}.gamma_1': (384,)})
    state_dict = {key: torch.empty(shape, device='meta') for key, shape in shapes.items()}
    if variant == 'mixed':
        index = torch.arange(196, dtype=torch.float32)
        state_dict.update(freqs=torch.empty(2, 12, 192, device='meta'), freqs_t_x=index % 14, freqs_t_y=index // 14)
    cfg = mmengine.Config.fromfile(str(REPO_ROOT / 'configs' / 'released' / config))
    assert cfg.model.type == 'ImageClassifier'
    assert cfg.model.backbone.to_dict() == rope_vit_model(state_dict)
