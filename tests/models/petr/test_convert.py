"""Released PETR / 3DPPE checkpoints into vispe: every head key of the reference (names and shapes recorded from the
authors' modules, tests/data/petr*_checkpoint_keys.json) lands on a vispe parameter of the same shape, the box code is
re-expressed exactly, and the tool reports what it cannot map."""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from vispe.models.petr import PETRDetector, convert_petr_state_dict, decode_boxes
from vispe.models.petr.convert import legacy_regression_rows

from ...conftest import REPO_ROOT
from ...helpers import load_tool

DATA = REPO_ROOT / 'tests' / 'data'


def reference_state_dict(name: str) -> dict[str, torch.Tensor]:
    """Random tensors under every key and shape of a released checkpoint (seeded)."""
    keys = json.loads((DATA / name).read_text())
    generator = torch.Generator().manual_seed(0)
    return {key: torch.randn(shape, generator=generator) for section in ('img_backbone', 'img_neck', 'pts_bbox_head')
            for key, shape in keys[section].items()}


def nuscenes_head(encoding: dict) -> PETRDetector:
    """A detector with PETR's nuScenes head (256 wide, 900 queries, 10 classes, code with velocity) on a small
    backbone whose 256 channels stand in for the reference's FPN output."""
    return PETRDetector(backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-2), num_classes=10,
                        encoding=encoding, num_queries=900, embed_dim=256, code_size=10,
                        decoder=dict(depth=6, num_heads=8, mlp_dim=2048))


def check_head(conversion, model: PETRDetector) -> None:
    expected = model.state_dict()
    head = {key: value for key, value in conversion.state_dict.items() if not key.startswith('backbone.')}
    assert head.keys() <= expected.keys(), sorted(head.keys() - expected.keys())[:5]
    for key, value in head.items():
        assert value.shape == expected[key].shape, key
    missing = [key for key in expected if not key.startswith('backbone.') and key not in head]
    assert missing == [], missing[:5]
    model.load_state_dict({**expected, **head})


def test_every_petr_head_key_maps_onto_the_detector() -> None:
    conversion = convert_petr_state_dict(reference_state_dict('petr_checkpoint_keys.json'))
    check_head(conversion, nuscenes_head(dict(type='PETR')))
    assert conversion.derived == ['pts_bbox_head.code_weights']
    assert all(key.startswith('img_neck.') or '.conv_offset.' in key for key in conversion.unmapped)
    assert any(key.startswith('img_neck.') for key in conversion.unmapped)


def test_every_3dppe_head_key_maps_onto_the_detector() -> None:
    conversion = convert_petr_state_dict(reference_state_dict('petr_depth_checkpoint_keys.json'))
    model = nuscenes_head(dict(type='PPE3D', mid_channels=256, context_channels=256))
    check_head(conversion, model)
    assert torch.equal(model.encoding.query_embedding[0].weight, model.encoding.position_encoder[0].weight)
    assert sorted(conversion.derived) == ['pts_bbox_head.code_weights', 'pts_bbox_head.project']


def test_converted_regression_rows_decode_the_same_boxes() -> None:
    torch.manual_seed(0)
    weight, bias, hidden = torch.randn(10, 32), torch.randn(10), torch.randn(5, 32)
    legacy = hidden @ weight.T + bias
    code = hidden @ legacy_regression_rows(weight).T + legacy_regression_rows(bias)
    # mmdet3d 0.x: (x, y, log w, log l, z, log h, sin r, cos r, vx, vy) with r = -yaw - pi/2.
    r = torch.atan2(legacy[:, 6], legacy[:, 7])
    expected = torch.stack([legacy[:, 0], legacy[:, 1], legacy[:, 4], legacy[:, 3].exp(), legacy[:, 2].exp(),
                            legacy[:, 5].exp(), -r - math.pi / 2], -1)
    boxes = decode_boxes(code)
    torch.testing.assert_close(boxes[:, :6], expected[:, :6])
    torch.testing.assert_close(torch.sin(boxes[:, 6] - expected[:, 6]), torch.zeros(5), atol=1e-6, rtol=0)
    torch.testing.assert_close(code[:, 8:], legacy[:, 8:])


def test_the_tool_writes_the_converted_checkpoint_and_lists_what_it_left(tmp_path: Path, capsys) -> None:
    source, output = tmp_path / 'petr_official.pth', tmp_path / 'vispe.pth'
    released = reference_state_dict('petr_checkpoint_keys.json')
    backbone = [key for key in released if key.startswith('img_backbone.')]
    keep = {key: value for key, value in released.items() if key not in backbone[4:] or '.conv_offset.' in key}
    torch.save(dict(state_dict=keep, meta=dict(epoch=24)), source)
    assert load_tool('convert_checkpoint').main(['petr', str(source), str(output)]) == 0
    printed = capsys.readouterr().out
    assert 'img_neck.lateral_convs.0.conv.weight' in printed and 'caffe-style' in printed
    written = torch.load(output, weights_only=True)
    assert 'decoder.layers.5.cross_attn.qkv.weight' in written['state_dict']
    assert 'img_neck.fpn_convs.0.conv.bias' in written['meta']['unmapped']
