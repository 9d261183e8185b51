"""RoPE-Axial and RoPE-Mixed: rope-vit's layout, timm parity, float32 angles, test-time options."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import timm
import torch

import vispe
from vispe.encodings import RoPEAxial, RoPEMixed
from vispe.geometry import Positions

from ..helpers import max_diff, tiny_vit


def test_axial_angles_by_hand() -> None:
    # head_dim 8, θ = 100: f = (1, 100^(-1/2)) = (1, 0.1); token (row 2, col 3), after one cls token.
    encoding = RoPEAxial(head_dim=8)
    cis = encoding.rotations(Positions((3, 4), num_prefix_tokens=1))
    assert cis.shape == (13, 4) and cis.dtype == torch.complex64
    assert torch.equal(cis[0], torch.ones(4, dtype=torch.complex64))
    token = 1 + 2 * 4 + 3
    assert torch.allclose(cis[token].angle(), torch.tensor([3.0 - 2 * math.pi * 0, 0.3, 2.0, 0.2]), atol=1e-6)


def test_pairs_are_interleaved_and_prefix_is_not_rotated() -> None:
    encoding = RoPEAxial(head_dim=4, theta=100.0)
    pos = Positions((1, 2), num_prefix_tokens=1)
    q = torch.tensor([1.0, 0.0, 1.0, 0.0]).expand(1, 1, 3, 4)
    rotated, _ = encoding.rotate(q, q, pos, pos, 0)
    assert torch.equal(rotated[0, 0, 0], q[0, 0, 0])
    # token (row 0, col 1): pair 0 turns by t_x·1 = 1 rad, pair 1 (y) by 0
    assert torch.allclose(rotated[0, 0, 2], torch.tensor([math.cos(1), math.sin(1), 1.0, 0.0]), atol=1e-6)


def test_mixed_with_zero_angles_has_the_axial_layout() -> None:
    pos = Positions((5, 7), num_prefix_tokens=1)
    mixed = RoPEMixed(head_dim=16, depth=2, num_heads=3, theta=100.0, random_angles=False)
    axial = RoPEAxial(head_dim=16, theta=100.0)
    for layer in range(2):
        assert torch.allclose(mixed.rotations(pos)[layer], axial.rotations(pos).expand(3, -1, -1), atol=1e-5)


def test_mixed_initialisation_is_rope_vits() -> None:
    mixed = RoPEMixed(head_dim=16, depth=2, num_heads=3)
    fx, fy = mixed.freqs.detach()
    magnitude = 10.0 ** (-torch.arange(0, 16, 4) / 16)
    first, second = fx[..., :4], fx[..., 4:]
    assert torch.allclose(first ** 2 + fy[..., :4] ** 2, magnitude.expand(2, 3, 4) ** 2, atol=1e-6)
    # the second half is the orthogonal direction: (cos(α+π/2), sin(α+π/2)) ⟂ (cos α, sin α)
    assert torch.allclose(first * second + fy[..., :4] * fy[..., 4:], torch.zeros(2, 3, 4), atol=1e-6)
    assert mixed.no_weight_decay() == {'freqs'}


def timm_parity_pair(timm_name: str, encoding: Any, path: Path) -> tuple[torch.nn.Module, torch.nn.Module]:
    """timm's RoPE ViT (its Eva class) and a vispe ViT that loads its checkpoint file with vispe.load_checkpoint,
    strictly and without renames (Eva's gamma_1/2 and rope.freqs are adopted)."""
    torch.manual_seed(0)
    theirs = timm.create_model(timm_name, pretrained=False, dynamic_img_size=True, num_classes=10).eval()
    ours = vispe.create_vit('vit_small_patch16_224', encoding=encoding, init_values=1e-5, num_classes=10).eval()
    state = {}
    for key, value in theirs.state_dict().items():
        if 'gamma' in key:
            value = torch.ones_like(value)  # layer scale 1e-5 would hide the encoding
        state[key] = value
    state['head.weight'] = torch.randn_like(state['head.weight']) / 20
    theirs.load_state_dict(state)
    torch.save(state, path)
    report = vispe.load_checkpoint(ours, path)
    assert report['missing'] == report['unexpected'] == [] and 'blocks.0.gamma_1 -> blocks.0.ls1.gamma' in report[
        'adopted']
    return theirs, ours


@pytest.mark.parametrize('timm_name, encoding', [
    ('vit_small_patch16_rope_mixed_224', dict(type='RoPEMixed')),
    ('vit_small_patch16_rope_224', dict(type='RoPEAxial')),
    ('vit_small_patch16_rope_mixed_ape_224', [dict(type='LearnedAPE', no_embed_class=True), dict(type='RoPEMixed')]),
], ids=['mixed', 'axial', 'mixed_ape'])
def test_timm_rope_vit_checkpoints_load_and_give_the_same_logits(timm_name, encoding, tmp_path) -> None:
    theirs, ours = timm_parity_pair(timm_name, encoding, tmp_path / 'timm.pth')
    for size in [(224, 224), (320, 320)]:
        images = torch.randn(2, 3, *size)
        with torch.no_grad():
            expected = theirs(images)
            assert expected.abs().max() > 0.5
            assert max_diff(ours(images), expected) <= 1e-5


def rotation_table(encoding: vispe.PositionEncoding, pos: Positions) -> torch.Tensor:
    if isinstance(encoding, vispe.encodings.RPE2D):
        return encoding.base.rotations(encoding.positions_for_base(pos))
    return encoding.rotations(pos)


@pytest.mark.parametrize('cfg', [dict(type='RoPEAxial'), dict(type='RoPEMixed'),
                                 dict(type='ComRoPE', variant='LD'),
                                 dict(type='RPE2D', base=dict(type='RoPEAxial'), max_grid=32)], ids=str)
def test_angles_stay_float32_under_bf16_autocast(cfg) -> None:
    vit = tiny_vit(cfg)
    images = torch.randn(1, 3, 56, 56)
    reference = rotation_table(vit.encoding, vit.positions(images))
    q = torch.randn(1, 4, 197, 16) * 4
    plain = vit.positions(images)
    expected, _ = vit.encoding.rotate(q, q, plain, plain, 0)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        pos = vit.positions(images)
        table = rotation_table(vit.encoding, pos)
        rotated, _ = vit.encoding.rotate(q.bfloat16(), q.bfloat16(), pos, pos, 0)
        output = vit(images)
    assert table.dtype == reference.dtype and table.dtype in (torch.complex64, torch.float32)
    assert torch.equal(table, reference)
    assert rotated.dtype == torch.bfloat16 and output.dtype == torch.bfloat16
    assert (rotated.float() - expected).abs().max() <= 0.02 * expected.abs().max()


def test_test_time_theta_and_position_scale() -> None:
    encoding = RoPEAxial(head_dim=8)
    pos = Positions((4, 4), num_prefix_tokens=1)
    base = encoding.rotations(pos)
    encoding.theta = 250.0
    assert not torch.allclose(encoding.rotations(pos), base)
    encoding.theta, encoding.position_scale = 100.0, 0.5
    assert torch.allclose(encoding.rotations(pos)[1:].angle(), (base[1:].angle() * 0.5), atol=1e-6)


def test_mixed_table_built_once_per_forward_and_checkpointing_gives_the_same_gradients() -> None:
    images = torch.randn(2, 3, 40, 56)
    grads = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        vit = tiny_vit('RoPEMixed').train()
        vit.set_grad_checkpointing(checkpointing)
        builds = []
        original = vit.encoding.build_cis
        vit.encoding.build_cis = lambda pos: builds.append(1) or original(pos)
        vit(images).square().mean().backward()
        assert len(builds) == 1
        grads.append(vit.encoding.freqs.grad.clone())
    assert torch.allclose(grads[0], grads[1], atol=1e-6)
