"""tools/convert_checkpoint.py and the PETR converter: a checkpoint of another family is refused (it reported
"0 tensors converted", wrote a file and exited 0), and a broken --config names its file and line."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from vispe.converters import convert_state_dict
from vispe.models.petr.convert import CheckpointFamilyError, convert_petr_state_dict

from ..helpers import load_tool
from ..models.petr.test_convert import reference_state_dict


def detr_r50_keys() -> dict[str, torch.Tensor]:
    """Keys of facebookresearch/detr's DETR-R50 (a 2D detector: another family)."""
    names = ['backbone.0.body.conv1.weight', 'backbone.0.body.layer1.0.conv1.weight', 'input_proj.weight',
             'input_proj.bias', 'query_embed.weight', 'transformer.encoder.layers.0.self_attn.in_proj_weight',
             'transformer.decoder.layers.0.linear1.weight', 'class_embed.weight', 'bbox_embed.layers.0.weight']
    return {name: torch.zeros(2, 2) for name in names}


def timm_vit_keys() -> dict[str, torch.Tensor]:
    return {name: torch.zeros(2) for name in ('cls_token', 'pos_embed', 'patch_embed.proj.weight',
                                              'blocks.0.attn.qkv.weight', 'head.weight')}


def backbone_only() -> dict[str, torch.Tensor]:
    """An mmdet3d image backbone without a detection head (e.g. a pretraining checkpoint)."""
    released = reference_state_dict('petr_checkpoint_keys.json')
    return {key: value for key, value in released.items() if key.startswith('img_backbone.')}


def mostly_foreign() -> dict[str, torch.Tensor]:
    """One PETR head tensor among many keys of another model."""
    return {'pts_bbox_head.input_proj.weight': torch.zeros(2, 2), **timm_vit_keys(), **detr_r50_keys()}


@pytest.mark.parametrize('state_dict, mapped', [(detr_r50_keys, '0 of its 9'), (timm_vit_keys, '0 of its 5'),
                                                (backbone_only, 'in the head'), (mostly_foreign, '1 of its 15'),
                                                (dict, '0 of its 0')])
def test_another_family_is_refused_by_the_library(state_dict, mapped: str) -> None:
    with pytest.raises(CheckpointFamilyError, match=rf'other\.pth is not a PETR / 3DPPE checkpoint: .*{mapped}.*'
                                                    r"Convert a checkpoint of the authors' PETR or 3DPPE release"):
        convert_petr_state_dict(state_dict(), 'other.pth')


def test_the_tool_exits_1_and_writes_nothing_for_another_family(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'detr-r50.pth', tmp_path / 'out.pth'
    torch.save(dict(model=detr_r50_keys()), source)
    assert load_tool('convert_checkpoint').main(['petr', str(source), str(output)]) == 1
    error = capsys.readouterr().err
    assert f"{source} is not a 'petr' checkpoint (PETR / 3DPPE" in error and 'its 9 keys (' in error
    assert 'backbone.0.body.conv1.weight' in error and error.rstrip().endswith('Nothing written.')
    assert not output.exists()


def test_a_petr_release_still_converts() -> None:
    conversion = convert_petr_state_dict(reference_state_dict('petr_depth_checkpoint_keys.json'))
    assert any(key.startswith('decoder.layers.') for key in conversion.state_dict)


def test_a_config_with_a_syntax_error_names_its_file_and_line(tmp_path: Path) -> None:
    source, config = tmp_path / 'petr.pth', tmp_path / 'broken.py'
    torch.save(dict(state_dict=reference_state_dict('petr_checkpoint_keys.json')), source)
    config.write_text("num_classes = 10\nmodel = dict(type='PETRDetector',\n")
    with pytest.raises(SyntaxError, match=r'Config .*broken\.py has a syntax error at line 2: '
                                          r"model = dict\(type='PETRDetector', .*Fix that line"):
        load_tool('convert_checkpoint').main(['petr', str(source), str(tmp_path / 'out.pth'), '--config', str(config)])


DETR_GOLDEN = Path(__file__).parents[1] / 'data' / 'released' / 'detr' / 'state_dict.pt'


def test_converter_options_reach_the_family_and_the_file(tmp_path: Path) -> None:
    """What the tensors cannot say (DETR's head count) is a converter option on the command line, recorded in the
    file with the model config it gave."""
    output = tmp_path / 'detr.pth'
    assert load_tool('convert_checkpoint').main(['detr', str(DETR_GOLDEN), str(output), '--option', 'num_heads=4']) == 0
    meta = torch.load(output, weights_only=True)['meta']
    assert meta['converter_options'] == {'num_heads': 4}
    assert meta['model']['encoder']['num_heads'] == 4 and meta['converter_version'] >= 1


def test_an_unknown_converter_option_names_those_the_family_takes(tmp_path: Path, capsys) -> None:
    output = tmp_path / 'detr.pth'
    assert load_tool('convert_checkpoint').main(['detr', str(DETR_GOLDEN), str(output), '--option', 'heads=4']) == 1
    assert "The 'detr' converter has no option heads; it takes num_heads=8, dilation=False." in capsys.readouterr().err
    assert not output.exists()


def test_with_a_config_the_file_records_the_configs_model(tmp_path: Path) -> None:
    """--config's model is the one checked and recorded (before, meta['model'] kept the inferred one)."""
    from vispe.engine import load_config
    config = tmp_path / 'detr_small.py'
    inferred = convert_state_dict('detr', torch.load(DETR_GOLDEN, weights_only=True)['model']).model
    config.write_text(f'model = {inferred!r}\n')
    output = tmp_path / 'detr.pth'
    assert load_tool('convert_checkpoint').main(['detr', str(DETR_GOLDEN), str(output), '--config', str(config)]) == 0
    assert torch.load(output, weights_only=True)['meta']['model'] == load_config(config).model.to_dict()


@pytest.mark.parametrize('arguments, message', [
    (['--option', 'num_heads=3'], r'detr\.pth: num_heads=3 does not divide the width'),
    ([], r"holds no state dict of tensors"),
])
def test_refusals_are_messages_not_tracebacks(arguments: list[str], message: str, tmp_path: Path, capsys) -> None:
    """A converter's refusal (an unsupported setting) and a file of no tensors are messages with exit 1."""
    source = tmp_path / 'detr.pth'
    if arguments:
        source.write_bytes(DETR_GOLDEN.read_bytes())
    else:
        torch.save({'foo': 1}, source)
    assert load_tool('convert_checkpoint').main(['detr', str(source), str(tmp_path / 'out.pth'), *arguments]) == 1
    assert re.search(message, capsys.readouterr().err)
    assert not (tmp_path / 'out.pth').exists()
