"""PEG: timm's PosConv maths, translation equivariance, prefix tokens untouched."""
from __future__ import annotations

import pytest
import torch
from timm.models.twins import PosConv

from vispe.encodings import PEG
from vispe.geometry import Positions

from ..helpers import tiny_vit


def test_equals_timms_posconv() -> None:
    peg = PEG(embed_dim=8, depth=2)
    reference = PosConv(8, 8)
    reference.proj[0].load_state_dict(peg.convs[0].state_dict())
    x = torch.randn(2, 1 + 5 * 7, 8)
    out = peg.between_blocks(x, Positions((5, 7), num_prefix_tokens=1), 0)
    assert torch.allclose(out[:, 1:], reference(x[:, 1:], (5, 7)), atol=1e-6)
    assert torch.equal(out[:, 0], x[:, 0])


def test_translation_equivariance_away_from_the_borders() -> None:
    peg = PEG(embed_dim=4, depth=1)
    grid = torch.randn(1, 4, 10, 12)
    shifted = torch.roll(grid, shifts=(2, 3), dims=(2, 3))
    pos = Positions((10, 12))

    def run(image):
        out = peg.between_blocks(image.flatten(2).transpose(1, 2), pos, 0)
        return out.transpose(1, 2).reshape(1, 4, 10, 12)
    out, out_shifted = run(grid), run(shifted)
    assert torch.allclose(out_shifted[..., 3:-1, 4:-1], out[..., 1:-3, 1:-4], atol=1e-6)
    assert not torch.allclose(out_shifted[..., 2, :], torch.roll(out, (2, 3), (2, 3))[..., 2, :], atol=1e-3)


def test_only_after_the_chosen_blocks_and_any_grid() -> None:
    peg = PEG(embed_dim=4, depth=4, after_blocks=(1, 3))
    x = torch.randn(1, 2 + 3 * 1, 4)
    assert torch.equal(peg.between_blocks(x, Positions((3, 1), num_prefix_tokens=2), 0), x)
    changed = peg.between_blocks(x, Positions((3, 1), num_prefix_tokens=2), 3)
    assert torch.equal(changed[:, :2], x[:, :2]) and not torch.equal(changed, x)
    with pytest.raises(ValueError, match='blocks 0..3'):
        PEG(embed_dim=4, depth=4, after_blocks=(4,))


def test_init_as_cpvt() -> None:
    peg = PEG(embed_dim=256, depth=1)
    assert abs(peg.convs[0].weight.std().item() - (2 / 9) ** 0.5) < 0.03
    assert torch.equal(peg.convs[0].bias, torch.zeros(256))


def test_weight_decay_spares_every_peg_parameter_as_twins() -> None:
    """Twins (CPVTV2.no_weight_decay) keeps all of pos_block out of weight decay; so does vispe's ViT."""
    vit = tiny_vit(dict(type='PEG', after_blocks=(0, 1)))
    assert vit.encoding.no_weight_decay() == {'convs.0.weight', 'convs.0.bias', 'convs.1.weight', 'convs.1.bias'}
    names = dict(vit.named_parameters())
    spared = {name for name in vit.no_weight_decay() if name in names}
    assert spared == {'cls_token'} | {f'encoding.{name}' for name in vit.encoding.no_weight_decay()}
