"""The irpe-deit converter against microsoft/Cream's DeiT-with-iRPE: small models of their code (contextual product,
50 shared buckets, on k and on q, k, v) give the same logits in vispe, at their training size and a larger one
(tests/data/released/irpe-deit/README.md says how the data were made)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import vispe
from vispe.converters import CheckpointFamilyError, convert_state_dict
from vispe.engine import load_config

from .released_data import (CONFIGS, RELEASED, TOLERANCE, assert_refused_by_the_tool,
                            assert_the_tool_gives_their_logits, assert_truncated_file_named, built, deit_shapes,
                            golden_diffs, meta_tensors, released)

FAMILY = 'irpe-deit'
VARIANTS = ('k', 'qkv')


@pytest.mark.parametrize('on', VARIANTS)
def test_the_library_gives_their_logits(on: str) -> None:
    conversion = convert_state_dict(FAMILY, released(FAMILY, on), 'deit.pth')
    assert conversion.unmapped == [] and conversion.derived == []
    assert conversion.model['encoding'] == [dict(type='LearnedAPE'), dict(
        type='iRPE', method='product', mode='contextual', on=on, shared_head=True, ratio=1.9)]
    assert (conversion.model['embed_dim'], conversion.model['depth'], conversion.model['num_heads'],
            conversion.model['img_size'], conversion.model['patch_size']) == (64, 2, 2, 32, 8)
    assert max(golden_diffs(built(conversion.model, conversion.state_dict), FAMILY, on)) <= TOLERANCE


@pytest.mark.parametrize('on', VARIANTS)
def test_vispe_convert_writes_a_file_that_gives_their_logits(on: str, tmp_path: Path) -> None:
    assert_the_tool_gives_their_logits(FAMILY, on, tmp_path)


def test_the_cls_bucket_matters() -> None:
    """skip=1: every pair with the cls token reads the last bucket; the golden logits hold that bucket's weights."""
    conversion = convert_state_dict(FAMILY, released(FAMILY, 'qkv'), 'deit.pth')
    state_dict = dict(conversion.state_dict)
    for side in 'qkv':
        table = state_dict[f'encoding.encodings.1.lookup_{side}'].clone()
        if side == 'v':
            table[..., -1, :] = 0
        else:
            table[..., -1] = 0
        state_dict[f'encoding.encodings.1.lookup_{side}'] = table
    assert golden_diffs(built(conversion.model, state_dict), FAMILY, 'qkv')[0] > 1e-3


def test_a_shallower_model_converts_to_its_own_depth() -> None:
    state_dict = {key: value for key, value in released(FAMILY, 'k').items() if not key.startswith('blocks.1.')}
    conversion = convert_state_dict(FAMILY, state_dict, 'deit.pth')
    assert conversion.model['depth'] == 1
    assert conversion.state_dict['encoding.encodings.1.lookup_k'].shape == (1, 1, 1, 32, 50)
    built(conversion.model, conversion.state_dict)


def test_unshared_tables_give_the_heads() -> None:
    state_dict = dict(released(FAMILY, 'k'))
    for index in range(2):
        key = f'blocks.{index}.attn.rpe_k.lookup_table_weight'
        state_dict[key] = state_dict[key].expand(2, -1, -1).clone()
    conversion = convert_state_dict(FAMILY, state_dict, 'deit.pth')
    assert conversion.model['num_heads'] == 2 and conversion.model['encoding'][1]['shared_head'] is False
    built(conversion.model, conversion.state_dict)


@pytest.mark.parametrize('edit, message', [
    (lambda sd: sd.pop('blocks.0.attn.rpe_k.lookup_table_weight'),
     r'iRPE on k has tables in 1 of 2 places \(missing blocks\.0\.attn\.rpe_k\)'),
    (lambda sd: sd.pop('blocks.1.attn.rpe_k.lookup_table_weight'), r'has 2 blocks but iRPE tables in 1'),
    (lambda sd: sd.pop('blocks.1.mlp.fc2.weight'), r'has no blocks\.1\.mlp\.fc2\.weight \(part of block 1 of 2\); '
                                                   r'a DeiT-with-iRPE checkpoint'),
    (lambda sd: sd.pop('pos_embed'), r"has no pos_embed \(DeiT's learned absolute embedding\)"),
    (lambda sd: sd.update({f'blocks.{i}.attn.rpe_k.lookup_table_weight': torch.zeros(1, 32, 60) for i in range(2)}),
     r'60 buckets per iRPE table is none of the configurations'),
    (lambda sd: sd.update({f'blocks.{i}.attn.rpe_k.lookup_table_bias': torch.zeros(1, 50) for i in range(2)}),
     r'mixes iRPE table kinds'),
    (lambda sd: sd.update({'dist_token': torch.zeros(1, 1, 64)}), r'is a distilled DeiT'),
])
def test_what_the_tensors_do_not_determine_is_refused(edit, message: str) -> None:
    state_dict = dict(released(FAMILY, 'k'))
    edit(state_dict)
    with pytest.raises(CheckpointFamilyError, match=message):
        convert_state_dict(FAMILY, state_dict, 'deit.pth')


def test_shared_bias_tables_are_refused_for_their_unknown_heads() -> None:
    state_dict = {key: value for key, value in released(FAMILY, 'k').items() if 'rpe_k' not in key}
    state_dict.update({f'blocks.{i}.attn.rpe_k.lookup_table_bias': torch.zeros(1, 50) for i in range(2)})
    with pytest.raises(CheckpointFamilyError, match=r'shared-head bias tables \(1, 50\) do not give the number '
                                                    r'of heads'):
        convert_state_dict(FAMILY, state_dict, 'deit.pth')


def test_a_plain_vit_is_refused_and_nothing_written(tmp_path: Path, capsys) -> None:
    state_dict = vispe.create_vit('vit_tiny_patch16_224', img_size=32, patch_size=8, embed_dim=64, depth=2,
                                  num_heads=2, num_classes=10).state_dict()
    path = tmp_path / 'vit.pth'
    torch.save(state_dict, path)
    with pytest.raises(CheckpointFamilyError, match="is not a 'irpe-deit' checkpoint"):
        convert_state_dict(FAMILY, state_dict, str(path))
    assert_refused_by_the_tool(FAMILY, path, tmp_path, capsys)


def test_a_cpvt_file_is_refused_naming_its_family(tmp_path: Path, capsys) -> None:
    assert_refused_by_the_tool(FAMILY, RELEASED / 'cpvt' / 'state_dict_cls.pt', tmp_path, capsys, resembles='cpvt')


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    assert_truncated_file_named(FAMILY, 'k', tmp_path, capsys)


def release_shapes(backbone: dict) -> dict[str, torch.Tensor]:
    """Tensors (no storage) of the shapes a DeiT-with-iRPE release of ``backbone``'s sizes holds, in their names."""
    width, grid, head_dim = backbone['embed_dim'], backbone['img_size'] // backbone['patch_size'], \
        backbone['embed_dim'] // backbone['num_heads']
    shapes = deit_shapes(width, backbone['depth'], backbone['patch_size'], backbone['mlp_ratio'],
                         backbone['num_classes'])
    shapes.update({'cls_token': (1, 1, width), 'pos_embed': (1, grid * grid + 1, width)})
    for index in range(backbone['depth']):
        for side in backbone['encoding'][1]['on']:
            shapes[f'blocks.{index}.attn.rpe_{side}.lookup_table_weight'] = \
                (1, 50, head_dim) if side == 'v' else (1, head_dim, 50)
    return meta_tensors(shapes)


@pytest.mark.parametrize('config', sorted(CONFIGS.glob('irpe_deit-*.py')), ids=lambda path: path.stem)
def test_the_released_configs_hold_the_model_the_converter_infers(config: Path) -> None:
    backbone = load_config(config).model.backbone.to_dict()
    assert convert_state_dict(FAMILY, release_shapes(backbone), config.stem).model == backbone
