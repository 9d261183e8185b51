"""LearnedAPE: identity on the training grid, timm's bicubic resampling elsewhere, and in a padded batch each
image's table resampled to its own size without reading the sizes back to the host."""
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


@pytest.mark.parametrize('interpolation', ['bicubic', 'bilinear', 'nearest', 'nearest-exact', 'area'])
@pytest.mark.parametrize('antialias', [True, False])
def test_a_padded_batch_resamples_each_image_to_its_size(interpolation: str, antialias: bool) -> None:
    torch.manual_seed(0)
    encoding = LearnedAPE(embed_dim=8, grid_size=(7, 9), num_prefix_tokens=1, interpolation=interpolation,
                          antialias=antialias)
    sizes = [(11, 6), (5, 3), (7, 6), (11, 2), (1, 1)]
    mask = torch.zeros(len(sizes), 11, 6, dtype=torch.bool)
    for image, (rows, cols) in enumerate(sizes):
        mask[image, :rows, :cols] = True
    table = encoding.table(Positions((11, 6), num_prefix_tokens=1, valid_mask=mask))
    for image, (rows, cols) in enumerate(sizes):
        alone = encoding.resampled((rows, cols))
        torch.testing.assert_close(table[image, 0], alone[0, 0], atol=0, rtol=0)
        cells = table[image, 1:].reshape(11, 6, -1)
        torch.testing.assert_close(cells[:rows, :cols], alone[0, 1:].reshape(rows, cols, -1), atol=1e-6, rtol=0)
        assert not cells[rows:].any() and not cells[:, cols:].any()
