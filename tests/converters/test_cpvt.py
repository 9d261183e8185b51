"""The cpvt converter against CPVT on DeiT built from Twins' PosCNN (Meituan-AutoML/Twins gvt.py) placed among timm's
DeiT blocks (a cls token and one PEG after block 0; GAP and a PEG after each block, Twins' list layout): the same
logits in vispe at the training size and a larger one (tests/data/released/cpvt/README.md says how the data were
made); Twins' pyramid models are refused."""
from __future__ import annotations

from pathlib import Path

import pytest
import timm
import torch

import vispe
from vispe.converters import CheckpointFamilyError, UnsupportedCheckpointError, convert_state_dict
from vispe.engine import load_config

from ..helpers import load_tool
from .released_data import (CONFIGS, RELEASED, TOLERANCE, assert_refused_by_the_tool,
                            assert_the_tool_gives_their_logits, assert_truncated_file_named, built, deit_shapes,
                            golden_diffs, meta_tensors, released)

FAMILY = 'cpvt'
VARIANTS = ('cls', 'gap')


@pytest.mark.parametrize('tag', VARIANTS)
def test_the_library_gives_their_logits(tag: str) -> None:
    conversion = convert_state_dict(FAMILY, released(FAMILY, tag), 'cpvt.pth')
    assert conversion.unmapped == [] and conversion.derived == []
    after_blocks = (0,) if tag == 'cls' else (0, 1)
    assert conversion.model['encoding'] == dict(type='PEG', after_blocks=after_blocks, kernel_size=3)
    assert (conversion.model['embed_dim'], conversion.model['depth'], conversion.model['num_heads'],
            conversion.model['mlp_ratio']) == (64, 2, 1, 4 if tag == 'cls' else 2)
    assert conversion.model.get('class_token', True) is (tag == 'cls')
    assert max(golden_diffs(built(conversion.model, conversion.state_dict), FAMILY, tag)) <= TOLERANCE


@pytest.mark.parametrize('tag', VARIANTS)
def test_vispe_convert_writes_a_file_that_gives_their_logits(tag: str, tmp_path: Path) -> None:
    assert_the_tool_gives_their_logits(FAMILY, tag, tmp_path)


@pytest.mark.parametrize('tag, zeroed', [('cls', 'encoding.convs.0.'), ('gap', 'encoding.convs.0.'),
                                         ('gap', 'encoding.convs.1.')])
def test_each_peg_matters(tag: str, zeroed: str) -> None:
    """Zeroing a converted PEG moves the logits: the parity above checks each PEG's weights and place."""
    conversion = convert_state_dict(FAMILY, released(FAMILY, tag), 'cpvt.pth')
    state_dict = {key: torch.zeros_like(value) if key.startswith(zeroed) else value
                  for key, value in conversion.state_dict.items()}
    assert golden_diffs(built(conversion.model, state_dict), FAMILY, tag)[0] > 1e-2


def test_a_shallower_model_converts_to_its_own_depth() -> None:
    state_dict = {key: value for key, value in released(FAMILY, 'cls').items() if not key.startswith('blocks.1.')}
    conversion = convert_state_dict(FAMILY, state_dict, 'cpvt.pth')
    assert conversion.model['depth'] == 1
    built(conversion.model, conversion.state_dict)


def test_more_pegs_than_blocks_are_refused() -> None:
    state_dict = {key: value for key, value in released(FAMILY, 'gap').items() if not key.startswith('blocks.1.')}
    with pytest.raises(CheckpointFamilyError, match=r'has 1 blocks and 2 PEGs'):
        convert_state_dict(FAMILY, state_dict, 'cpvt.pth')


def test_an_absolute_embedding_beside_the_peg_is_kept() -> None:
    state_dict = {**released(FAMILY, 'cls'), 'pos_embed': torch.zeros(1, 1 + 6 * 6, 64)}
    conversion = convert_state_dict(FAMILY, state_dict, 'cpvt.pth')
    assert conversion.model['encoding'][0] == dict(type='LearnedAPE') and conversion.model['img_size'] == 48
    built(conversion.model, conversion.state_dict)


@pytest.mark.parametrize('edit, message', [
    (lambda sd: sd.pop('blocks.1.attn.proj.bias'), r'has no blocks\.1\.attn\.proj\.bias \(part of block 1 of 2\)'),
    (lambda sd: sd.update({'pos_block.proj.0.weight': torch.zeros(64, 64, 3, 3)}), r'a depthwise conv'),
    (lambda sd: sd.update({'dist_token': torch.zeros(1, 1, 64)}), r'is a distilled DeiT'),
    (lambda sd: sd.update({'pos_block.2.proj.0.weight': torch.zeros(64, 1, 3, 3)}),
     r'neither one pos_block\.proj\.0\.\* nor pos_block\.0\.\.n-1\.proj\.0\.\*'),
    (lambda sd: sd.pop('pos_block.proj.0.bias'), r"PEG 0 has \['weight'\] of its conv"),
])
def test_what_it_cannot_convert_is_refused(edit, message: str) -> None:
    state_dict = dict(released(FAMILY, 'cls'))
    edit(state_dict)
    with pytest.raises(CheckpointFamilyError, match=message):
        convert_state_dict(FAMILY, state_dict, 'cpvt.pth')


def test_a_width_off_deits_head_size_is_refused() -> None:
    state_dict = dict(released(FAMILY, 'cls'))
    state_dict['patch_embed.proj.weight'] = torch.zeros(96, 3, 8, 8)
    state_dict['pos_block.proj.0.weight'] = torch.zeros(96, 1, 3, 3)
    with pytest.raises(UnsupportedCheckpointError, match=r'width 96 is not a multiple of 64, the head width'):
        convert_state_dict(FAMILY, state_dict, 'cpvt.pth')


def test_twins_pyramid_models_are_refused_naming_their_keys(tmp_path: Path, capsys) -> None:
    twins = timm.models.twins.Twins(img_size=32, patch_size=4, embed_dims=(16, 32), depths=(1, 1), num_heads=(1, 2),
                                    mlp_ratios=(2, 2), sr_ratios=(2, 1), num_classes=10)
    path, output = tmp_path / 'pcpvt_small.pth', tmp_path / 'out.pth'
    torch.save({'model': twins.state_dict()}, path)
    assert load_tool('convert_checkpoint').main([FAMILY, str(path), str(output)]) == 1
    error = capsys.readouterr().err
    assert f'{path} is a Twins pyramid model (PCPVT / ALTGVT' in error
    assert 'patch_embeds.0.proj.weight' in error and 'match no vispe architecture' in error
    assert not output.exists()


def test_a_plain_vit_is_refused_and_nothing_written(tmp_path: Path, capsys) -> None:
    state_dict = vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=8, embed_dim=64, depth=2,
                                  num_heads=1, num_classes=10).state_dict()
    path = tmp_path / 'vit.pth'
    torch.save(state_dict, path)
    with pytest.raises(CheckpointFamilyError, match="is not a 'cpvt' checkpoint"):
        convert_state_dict(FAMILY, state_dict, str(path))
    assert_refused_by_the_tool(FAMILY, path, tmp_path, capsys)


def test_an_irpe_deit_file_is_refused_naming_its_family(tmp_path: Path, capsys) -> None:
    assert_refused_by_the_tool(FAMILY, RELEASED / 'irpe-deit' / 'state_dict_k.pt', tmp_path, capsys,
                               resembles='irpe-deit')


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    assert_truncated_file_named(FAMILY, 'cls', tmp_path, capsys)


def file_shapes(backbone: dict) -> dict[str, torch.Tensor]:
    """Tensors (no storage) of the shapes a CPVT-on-DeiT file of ``backbone``'s sizes holds, in its names."""
    width, pegs = backbone['embed_dim'], backbone['encoding']['after_blocks']
    shapes = deit_shapes(width, backbone['depth'], backbone['patch_size'], backbone['mlp_ratio'],
                         backbone['num_classes'])
    for index in pegs:
        prefix = 'pos_block.proj.0' if len(pegs) == 1 else f'pos_block.{index}.proj.0'
        shapes.update({f'{prefix}.weight': (width, 1, 3, 3), f'{prefix}.bias': (width,)})
    if backbone.get('class_token', True):
        shapes['cls_token'] = (1, 1, width)
    return meta_tensors(shapes)


@pytest.mark.parametrize('config', sorted(CONFIGS.glob('cpvt_*.py')), ids=lambda path: path.stem)
def test_the_released_configs_hold_the_model_the_converter_infers(config: Path) -> None:
    backbone = load_config(config).model.backbone.to_dict()
    assert convert_state_dict(FAMILY, file_shapes(backbone), config.stem).model == backbone
