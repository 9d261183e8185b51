"""LearnedAPE: identity on the training grid, timm's bicubic resampling elsewhere."""
from __future__ import annotations

import pytest
import torch
from timm.layers import resample_abs_pos_embed

from vispe.encodings import LearnedAPE
from vispe.geometry import Positions


def test_resampling_an_unchanged_grid_is_the_identity() -> None:
    encoding = LearnedAPE(embed_dim=8, grid_size=(4, 6), num_prefix_tokens=1)
    assert encoding.resampled((4, 6)) is encoding.pos_embed
    x = torch.randn(2, 25, 8)
    assert torch.equal(encoding.embed(x, Positions((4, 6), num_prefix_tokens=1)), x + encoding.pos_embed)


def test_new_grid_uses_timm_resampling_and_keeps_the_prefix_row() -> None:
    encoding = LearnedAPE(embed_dim=8, grid_size=(4, 4), num_prefix_tokens=1)
    table = encoding.resampled((6, 3))
    expected = resample_abs_pos_embed(encoding.pos_embed, new_size=[6, 3], old_size=[4, 4], num_prefix_tokens=1)
    assert torch.equal(table, expected)
    assert torch.equal(table[:, 0], encoding.pos_embed[:, 0])
    assert table.shape == (1, 1 + 18, 8)


def test_no_embed_class_adds_to_patches_only() -> None:
    encoding = LearnedAPE(embed_dim=8, grid_size=(2, 2), num_prefix_tokens=2, no_embed_class=True)
    assert encoding.pos_embed.shape == (1, 4, 8)
    x = torch.randn(1, 6, 8)
    out = encoding.embed(x, Positions((2, 2), num_prefix_tokens=2))
    assert torch.equal(out[:, :2], x[:, :2])
    assert torch.equal(out[:, 2:], x[:, 2:] + encoding.pos_embed)


def test_init_is_timms_std_002() -> None:
    table = LearnedAPE(embed_dim=256, grid_size=(16, 16)).pos_embed
    assert abs(table.std().item() - 0.02) < 0.001


def test_prefix_count_mismatch_is_explained() -> None:
    encoding = LearnedAPE(embed_dim=8, grid_size=(2, 2), num_prefix_tokens=1)
    with pytest.raises(ValueError, match='num_prefix_tokens=2'):
        encoding.embed(torch.randn(1, 6, 8), Positions((2, 2), num_prefix_tokens=2))
