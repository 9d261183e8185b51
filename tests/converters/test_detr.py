"""The `detr` converter against facebookresearch/detr's own outputs (tests/data/released/detr: a small DETR built with
their code, random weights, two images of different sizes, one padded), and what it refuses."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vispe.checkpoint import read_checkpoint, read_state_dict
from vispe.converters import CheckpointFamilyError, convert_state_dict
from vispe.converters.detr import convert_detr_state_dict
from vispe.converters.files import load_problems
from vispe.registry import MODELS

from ..conftest import REPO_ROOT
from ..helpers import load_tool

DATA = REPO_ROOT / 'tests' / 'data' / 'released' / 'detr'
STATE_DICT = DATA / 'state_dict.pt'
DETECTOR_TOLERANCE = 1e-4


@pytest.fixture(scope='module')
def golden() -> dict[str, torch.Tensor]:
    return torch.load(DATA / 'golden.pt', weights_only=True)


@pytest.fixture(scope='module')
def released() -> dict[str, torch.Tensor]:
    return read_state_dict(STATE_DICT)


def run(model_cfg: dict, state_dict: dict[str, torch.Tensor], golden: dict[str, torch.Tensor]) -> dict:
    model = MODELS.build(dict(model_cfg)).eval()
    model.load_state_dict(state_dict, strict=True)
    with torch.no_grad():
        return model(golden['images'], ~golden['padding_mask'], mode='tensor')


def differences(outputs: dict, golden: dict[str, torch.Tensor]) -> dict[str, float]:
    """max |diff| of the last layer's and the auxiliary (earlier layers') logits and boxes."""
    return dict(pred_logits=(outputs['logits'][-1] - golden['pred_logits']).abs().max().item(),
                pred_boxes=(outputs['boxes'][-1] - golden['pred_boxes']).abs().max().item(),
                aux_logits=(outputs['logits'][:-1] - golden['aux_logits']).abs().max().item(),
                aux_boxes=(outputs['boxes'][:-1] - golden['aux_boxes']).abs().max().item())


def test_the_tool_converts_the_release_into_their_outputs(tmp_path: Path, golden, capsys) -> None:
    output = tmp_path / 'detr.pth'
    assert load_tool('convert_checkpoint').main(['detr', str(STATE_DICT), str(output)]) == 0
    assert 'attention heads: 8' in capsys.readouterr().out
    state_dict, meta = read_checkpoint(output)
    assert meta['kind'] == 'detr' and meta['unmapped'] == [] and meta['encodings']
    assert meta['model']['backbone']['model_name'] == 'resnet18'
    assert max(differences(run(meta['model'], state_dict, golden), golden).values()) <= DETECTOR_TOLERANCE


def test_the_library_conversion_matches_theirs_step_by_step(released, golden) -> None:
    conversion = convert_state_dict('detr', released, str(STATE_DICT))
    assert conversion.model['num_classes'] == 7 and conversion.model['num_queries'] == 6
    assert conversion.model['encoder']['depth'] == conversion.model['decoder']['depth'] == 2
    assert conversion.model['backbone']['model_kwargs'] == dict(channels=(8, 16, 24, 32))
    model = MODELS.build(dict(conversion.model)).eval()
    model.load_state_dict(conversion.state_dict, strict=True)
    with torch.no_grad():
        features = model.backbone(golden['images'])
        valid = model.feature_mask(~golden['padding_mask'], features)
        positions = model.encoder.encoding.position_embedding(model.encoder.positions(features, valid))
    assert torch.equal(valid, ~golden['feature_padding_mask']) and not valid.all()
    assert (features - golden['features']).abs().max() <= 1e-5
    expected_pos = golden['pos'].flatten(2).transpose(1, 2)
    assert (positions - expected_pos).abs().max() <= 1e-5
    assert max(differences(run(conversion.model, conversion.state_dict, golden), golden).values()) \
        <= DETECTOR_TOLERANCE


def test_heads_are_not_in_the_shapes_and_matter(released, golden) -> None:
    """The golden model has 8 heads (the default); 4 heads load as well but compute otherwise; 5 do not divide 32."""
    conversion = convert_detr_state_dict(released, 'detr.pth', num_heads=4)
    assert conversion.model['encoder']['num_heads'] == 4
    assert differences(run(conversion.model, conversion.state_dict, golden), golden)['pred_logits'] > 1e-3
    with pytest.raises(ValueError, match=r'detr\.pth: num_heads=5 does not divide the width 32; give the heads'):
        convert_detr_state_dict(released, 'detr.pth', num_heads=5)


def test_a_shallower_decoder_gives_the_shallower_model(released) -> None:
    shallow = {key: value for key, value in released.items() if not key.startswith('transformer.decoder.layers.1.')}
    conversion = convert_state_dict('detr', shallow)
    assert conversion.model['decoder']['depth'] == 1 and conversion.model['encoder']['depth'] == 2
    assert load_problems(MODELS.build(dict(conversion.model)), conversion.state_dict) == []


def test_a_panoptic_file_converts_its_detector_and_lists_the_mask_head(released, golden) -> None:
    panoptic = {f'detr.{key}': value for key, value in released.items()}
    panoptic['mask_head.lay1.weight'] = torch.zeros(4, 4, 3, 3)
    conversion = convert_state_dict('detr', panoptic)
    assert conversion.unmapped == ['mask_head.lay1.weight']
    assert max(differences(run(conversion.model, conversion.state_dict, golden), golden).values()) \
        <= DETECTOR_TOLERANCE


@pytest.mark.parametrize('change, message', [
    (lambda sd: sd.update({'transformer.encoder.norm.weight': torch.ones(32)}), r'a pre-norm DETR'),
    (lambda sd: sd.update({'backbone.1.row_embed.weight': torch.ones(50, 16)}), r'learned position embedding'),
    (lambda sd: sd.update({'transformer.decoder.layers.0.cross_attn.in_proj_weight': torch.ones(96, 32)}),
     r"unknown DETR transformer key 'transformer\.decoder\.layers\.0\.cross_attn\.in_proj_weight'"),
    (lambda sd: sd.update({'bbox_embed.layers.3.weight': torch.ones(4, 32)}), r"not DETR's 3 layers"),
    (lambda sd: [sd.pop(k) for k in list(sd) if k.startswith('backbone.0.body.layer3.1.')],
     r'not a torchvision ResNet-18/34/50/101/152 \(found basic blocks \[2, 2, 1, 2\]'),
])
def test_what_vispe_does_not_compute_is_refused(released, change, message: str) -> None:
    state_dict = dict(released)
    change(state_dict)
    with pytest.raises(ValueError, match=rf'detr\.pth: .*{message}'):
        convert_detr_state_dict(state_dict, 'detr.pth')


def test_a_missing_tensor_does_not_load(released) -> None:
    state_dict = {key: value for key, value in released.items() if key != 'backbone.0.body.layer4.1.conv1.weight'}
    conversion = convert_detr_state_dict(state_dict, 'detr.pth')
    assert load_problems(MODELS.build(dict(conversion.model)), conversion.state_dict) == [
        'missing in the converted file: backbone.body.layer4.1.conv1.weight']


def released_r50_layout(dilated_family: bool = False) -> dict[str, torch.Tensor]:
    """Tensors (on the meta device: shapes only) under every key of DETR's released R50 (detr-r50-e632da11.pth)."""
    import torchvision
    with torch.device('meta'):
        resnet = torchvision.models.resnet50()
        state = {f'backbone.0.body.{key}': value for key, value in resnet.state_dict().items()
                 if not key.startswith('fc.') and not key.endswith('num_batches_tracked')}
        d, ffn = 256, 2048
        for part, modules in (('encoder', ('self_attn',)), ('decoder', ('self_attn', 'multihead_attn'))):
            for i in range(6):
                prefix = f'transformer.{part}.layers.{i}.'
                for module in modules:
                    state.update({prefix + module + '.in_proj_weight': torch.empty(3 * d, d),
                                  prefix + module + '.in_proj_bias': torch.empty(3 * d),
                                  prefix + module + '.out_proj.weight': torch.empty(d, d),
                                  prefix + module + '.out_proj.bias': torch.empty(d)})
                state.update({prefix + 'linear1.weight': torch.empty(ffn, d), prefix + 'linear1.bias': torch.empty(ffn),
                              prefix + 'linear2.weight': torch.empty(d, ffn), prefix + 'linear2.bias': torch.empty(d)})
                for norm in ('norm1', 'norm2') + (('norm3',) if part == 'decoder' else ()):
                    state.update({prefix + norm + '.weight': torch.empty(d), prefix + norm + '.bias': torch.empty(d)})
        state.update({'transformer.decoder.norm.weight': torch.empty(d),
                      'transformer.decoder.norm.bias': torch.empty(d),
                      'input_proj.weight': torch.empty(d, 2048, 1, 1), 'input_proj.bias': torch.empty(d),
                      'query_embed.weight': torch.empty(100, d), 'class_embed.weight': torch.empty(92, d),
                      'class_embed.bias': torch.empty(92)})
        for i, out in enumerate((d, d, 4)):
            state.update({f'bbox_embed.layers.{i}.weight': torch.empty(out, d),
                          f'bbox_embed.layers.{i}.bias': torch.empty(out)})
    return state


def test_the_released_r50_loads_into_the_evaluation_config() -> None:
    """DETR-R50's layout converts into configs/released/detr-r50_coco-val.py's model (91 category-id classes,
    100 queries, 6 + 6 layers of 256, ResNet-50) and into the model the converter infers, alike."""
    from vispe.engine import load_config
    conversion = convert_state_dict('detr', released_r50_layout(), 'detr-r50-e632da11.pth')
    assert any('category id' in note for note in conversion.notes)
    config = load_config(REPO_ROOT / 'configs' / 'released' / 'detr-r50_coco-val.py')
    assert config.test_evaluator.labels == 'category_id'
    for model_cfg in (config.model, conversion.model):
        with torch.device('meta'):
            model = MODELS.build(dict(model_cfg))
        assert load_problems(model, conversion.state_dict) == []
    assert conversion.model['backbone'] == dict(type='TimmFeatures', model_name='resnet50', out_index=-1,
                                                pretrained=False, frozen_bn=True)


def test_dc5_is_a_family_of_its_own() -> None:
    """The tensors of DETR-DC5 are those of DETR: `detr-dc5` builds the stride-16 backbone, `detr` notes the name."""
    layout = released_r50_layout()
    dc5 = convert_state_dict('detr-dc5', layout, 'detr-r50-dc5-f0fb7ef5.pth')
    assert dc5.model['backbone']['model_kwargs'] == dict(output_stride=16)
    with torch.device('meta'):
        backbone = MODELS.build(dict(dc5.model['backbone']))
    assert backbone.stride == 16
    plain = convert_state_dict('detr', layout, 'detr-r50-dc5-f0fb7ef5.pth')
    assert 'model_kwargs' not in plain.model['backbone'] and any('vispe convert detr-dc5' in n for n in plain.notes)
    with pytest.raises(ValueError, match=r'a dilated \(DC5\) resnet18: torchvision\'s basic blocks have no dilation'):
        convert_state_dict('detr-dc5', read_state_dict(STATE_DICT), 'small.pth')


def test_another_family_is_refused(tmp_path: Path, capsys) -> None:
    vit = {name: torch.zeros(2) for name in ('cls_token', 'pos_embed', 'patch_embed.proj.weight',
                                             'blocks.0.attn.qkv.weight', 'head.weight')}
    with pytest.raises(CheckpointFamilyError, match=r"vit\.pth is not a 'detr' checkpoint \(DETR"):
        convert_state_dict('detr', vit, 'vit.pth')
    source, output = tmp_path / 'vit.pth', tmp_path / 'out.pth'
    torch.save(dict(model=vit), source)
    assert load_tool('convert_checkpoint').main(['detr', str(source), str(output)]) == 1
    assert f"{source} is not a 'detr' checkpoint" in capsys.readouterr().err and not output.exists()


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'detr-r50-e632da11.pth', tmp_path / 'out.pth'
    data = STATE_DICT.read_bytes()
    source.write_bytes(data[:len(data) // 2])
    assert load_tool('convert_checkpoint').main(['detr', str(source), str(output)]) == 1
    assert str(source) in capsys.readouterr().err and not output.exists()

