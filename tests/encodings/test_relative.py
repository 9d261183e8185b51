"""The defining property of rotary encodings: logits depend only on the offset between positions.

Every token carries the same content, so any dependence of the logits on where the tokens are comes
from the encoding. Shifting all positions by one offset must leave the logits unchanged for RoPE and
ComRoPE, and must change them for an absolute encoding (so this test can fail).
"""
from __future__ import annotations

import pytest
import torch

import vispe
from vispe.geometry import Positions, grid_coords

HEADS, HEAD_DIM = 2, 16
CONTEXT = dict(embed_dim=HEADS * HEAD_DIM, num_heads=HEADS, head_dim=HEAD_DIM, depth=1, grid_size=(12, 12),
               num_prefix_tokens=0)


def logits_at(encoding: vispe.PositionEncoding, coords: torch.Tensor) -> torch.Tensor:
    torch.manual_seed(5)
    projection = torch.nn.Linear(HEADS * HEAD_DIM, 2 * HEADS * HEAD_DIM)
    pos = Positions((3, 4), coords=coords)
    x = torch.randn(1, 1, HEADS * HEAD_DIM).expand(1, 12, -1)
    encoding.prepare(pos)
    x = encoding.embed(x, pos)
    q, k = projection(x).reshape(1, 12, 2, HEADS, HEAD_DIM).permute(2, 0, 3, 1, 4).unbind(0)
    q, k = encoding.rotate(q, k, pos, pos, 0)
    return q @ k.transpose(-1, -2)


ROTARY = [dict(type='RoPEAxial'), dict(type='RoPEMixed'), dict(type='ComRoPE', variant='AP'),
          dict(type='ComRoPE', variant='LD'), dict(type='ComRoPE', variant='AP', block_size=4),
          dict(type='ComRoPE', variant='LD', block_size=4)]


@pytest.mark.parametrize('cfg', ROTARY, ids=str)
@pytest.mark.parametrize('offset', [(2.0, 5.0), (7.0, 0.0), (0.5, -0.25)])
def test_rotary_logits_depend_only_on_offsets(cfg, offset) -> None:
    encoding = vispe.build_encoding(cfg, **CONTEXT).eval()
    coords = grid_coords((3, 4))
    before = logits_at(encoding, coords)
    after = logits_at(encoding, coords + torch.tensor(offset))
    assert (before - after).abs().max() <= 1e-5
    assert before.std() > 1e-3


def test_the_same_check_fails_for_an_absolute_encoding() -> None:
    encoding = vispe.build_encoding('LearnedAPE', **CONTEXT)
    coords = grid_coords((3, 4))
    assert (logits_at(encoding, coords) - logits_at(encoding, coords + torch.tensor([2.0, 5.0]))).abs().max() > 1e-3
