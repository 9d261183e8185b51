"""The `vdetr` converter against golden outputs of V-DETR's own code (tests/data/released/vdetr/README.md): a small
ModelVDETR (2 decoder layers, width 48) run from fixed backbone voxels; the converted VDETRHead must give the same
proposals, queries, logits and boxes of every stage."""
from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import torch

from vispe.converters import CheckpointFamilyError, convert_state_dict
from vispe.encodings.vertex_rpe import vertex_corners
from vispe.registry import MODELS

from ..helpers import load_tool

DATA = Path(__file__).parents[1] / 'data' / 'released' / 'vdetr'
TOLERANCE = 1e-4
# The golden model samples 64 of its 300 voxels per scene (the released preenc_npoints is 4096; no tensor says it).
GOLDEN_SAMPLES = 64


def released() -> dict[str, torch.Tensor]:
    return torch.load(DATA / 'state_dict.pt', weights_only=True)['model']


@pytest.fixture(scope='module')
def golden() -> dict[str, torch.Tensor]:
    return torch.load(DATA / 'golden.pt', weights_only=True)


def run(model_cfg: dict, state_dict: dict[str, torch.Tensor], golden: dict[str, torch.Tensor]) -> dict:
    model = MODELS.build(dict(model_cfg, num_samples=GOLDEN_SAMPLES)).eval()
    model.load_state_dict(state_dict, strict=True)
    with torch.no_grad():
        return model(golden['voxel_xyz'], golden['voxel_features'])


def check_golden(outputs: dict[str, torch.Tensor], golden: dict[str, torch.Tensor]) -> None:
    assert torch.equal(outputs['sample_index'], golden['seed_inds'])
    torch.testing.assert_close(outputs['xyz'], golden['seed_xyz'], rtol=0, atol=TOLERANCE)
    stages = [(outputs['proposal_logits'], outputs['proposal_boxes'])]
    stages += list(zip(outputs['logits'], outputs['boxes']))
    for index, (logits, boxes) in enumerate(stages):
        torch.testing.assert_close(logits, golden[f'stage{index}.sem_cls_logits'], rtol=0, atol=TOLERANCE)
        torch.testing.assert_close(boxes[..., :3], golden[f'stage{index}.center_unnormalized'], rtol=0,
                                   atol=TOLERANCE)
        torch.testing.assert_close(boxes[..., 3:6], golden[f'stage{index}.size_unnormalized'], rtol=0,
                                   atol=TOLERANCE)
        torch.testing.assert_close(boxes[..., 6], golden[f'stage{index}.angle_continuous'], rtol=0, atol=TOLERANCE)
        torch.testing.assert_close(vertex_corners(boxes), golden[f'stage{index}.corners_depth_frame'], rtol=0,
                                   atol=TOLERANCE)


def test_the_golden_data_checks_something(golden: dict[str, torch.Tensor]) -> None:
    """The heads' last layers (zero at init) were perturbed: boxes move off their anchors, logits differ."""
    assert bool(golden['fps_equal'])
    assert (golden['stage0.center_unnormalized'] - golden['seed_xyz']).abs().max() > 1e-2
    assert (golden['stage2.size_unnormalized'] - 1).abs().max() > 1e-2
    assert golden['stage1.sem_cls_logits'].std() > 0.1


def test_the_library_conversion_gives_their_outputs(golden: dict[str, torch.Tensor]) -> None:
    conversion = convert_state_dict('vdetr', released(), 'state_dict.pt')
    assert conversion.model['depth'] == 2 and conversion.model['embed_dim'] == 48
    assert conversion.model['num_heads'] == 4 and conversion.model['num_queries'] == 8
    assert conversion.model['encoding'] == dict(type='VertexRPE', hidden_dim=16, log_scale=512.0, max_value=4.0,
                                                table_size=10)
    assert conversion.derived == [f'decoder.layers.{i}.multihead_attn.relative_coords_table' for i in range(2)]
    assert all(key.startswith(('decoder.pointcls_heads.', 'decoder.mlp_heads.')) for key in conversion.unmapped)
    assert sum('angle_' in key for key in conversion.unmapped) == len(conversion.unmapped) - sum(
        key.startswith('decoder.pointcls_heads.') for key in conversion.unmapped)
    check_golden(run(conversion.model, conversion.state_dict, golden), golden)


def test_vispe_convert_writes_a_checkpoint_that_gives_their_outputs(tmp_path: Path,
                                                                    golden: dict[str, torch.Tensor]) -> None:
    """The released layout: weights under 'model' next to the optimizer, the epoch and argparse's Namespace; the
    sparse backbone's keys are listed as unmapped."""
    source, output = tmp_path / 'scannet_540ep.pth', tmp_path / 'vispe.pth'
    weights = dict(released(), **{'pre_encoder.conv1.kernel': torch.zeros(27, 3, 64)})
    torch.save(dict(model=weights, optimizer=dict(state={}, param_groups=[]), epoch=539,
                    args=argparse.Namespace(hard_anchor=True, preenc_npoints=4096), best_val_metrics={}), source)
    assert load_tool('convert_checkpoint').main(['vdetr', str(source), str(output)]) == 0
    saved = torch.load(output, weights_only=True)
    assert saved['meta']['encodings'] == ['VertexRPE'] and 'pre_encoder.conv1.kernel' in saved['meta']['unmapped']
    check_golden(run(saved['meta']['model'], saved['state_dict'], golden), golden)


def test_a_shallower_decoder_gives_a_shallower_model() -> None:
    kept = {key: value for key, value in released().items()
            if not key.startswith(('decoder.layers.1.', 'decoder.mlp_heads.2.', 'decoder.query_pos_projection.1.'))}
    conversion = convert_state_dict('vdetr', kept, 'shallow.pth')
    assert conversion.model['depth'] == 1
    MODELS.build(conversion.model).load_state_dict(conversion.state_dict, strict=True)


def test_a_width_mismatch_is_refused_naming_expected_and_found(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'mixed.pth', tmp_path / 'out.pth'
    weights = released()
    weights['encoder_to_decoder_projection.layers.0.weight'] = torch.zeros(64, 32, 1)
    torch.save(dict(model=weights), source)
    assert load_tool('convert_checkpoint').main(['vdetr', str(source), str(output)]) == 1
    error = capsys.readouterr().err
    assert 'gives width 64' in error and 'should be (64, 64)' in error and 'found (48, 48)' in error
    assert not output.exists()


@pytest.mark.parametrize('change, message', [
    (lambda w: w.update({'decoder.mlp_heads.1.angle_cls_head.layers.8.weight': torch.zeros(12, 48, 1)}),
     'predicts 12 heading bins'),
    (lambda w: w.update({'decoder.key_pos_projection.0.position_embedding_head.0.weight': torch.zeros(48, 3, 1)}),
     'belong to no part of V-DETR that vispe maps'),
    (lambda w: w.pop('decoder.query_embed.weight'), "q_content='random'"),
])
def test_variants_vispe_does_not_compute_are_refused(change, message: str) -> None:
    weights = released()
    change(weights)
    with pytest.raises(CheckpointFamilyError, match=message):
        convert_state_dict('vdetr', weights, 'variant.pth')


def test_another_family_is_refused_and_nothing_written(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'vit.pth', tmp_path / 'out.pth'
    torch.save({name: torch.zeros(2) for name in ('cls_token', 'pos_embed', 'patch_embed.proj.weight',
                                                  'blocks.0.attn.qkv.weight', 'head.weight')}, source)
    assert load_tool('convert_checkpoint').main(['vdetr', str(source), str(output)]) == 1
    assert f"{source} is not a 'vdetr' checkpoint" in capsys.readouterr().err
    assert not output.exists()


def test_a_truncated_file_is_refused_naming_it(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'truncated.pth', tmp_path / 'out.pth'
    source.write_bytes((DATA / 'state_dict.pt').read_bytes()[:5000])
    assert load_tool('convert_checkpoint').main(['vdetr', str(source), str(output)]) == 1
    error = capsys.readouterr().err
    assert str(source) in error and 'corrupt or truncated' in error
    assert not output.exists()
