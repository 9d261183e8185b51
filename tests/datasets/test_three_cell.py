"""The Three Cell Experiment's data: hand-worked answers, the images' defining property (three pure cells on black),
the sampler's guarantees (non-collinear, inside the grid, distinct cells, a third of draws with equal distances), the
splits, and the score: an oracle scores 100, a model that cannot see position (NoPE) answers every arrangement of the
same cells alike while a positional one does not."""
from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import vispe
from vispe.datasets import ThreeCells
from vispe.datasets.three_cell import (offsets_by_squared_radius, render_three_cells, sample_three_cells,
                                       three_cell_labels, three_cell_set)
from vispe.evaluation.three_cell_metric import three_cell_scores


@pytest.mark.parametrize('cells, answers', [
    (((0, 0), (0, 3), (2, 0)), [1, 0, 0, 0, 0, 0]),     # d² 9 > 4; Δ = −6; both trapezia flat (a tie); sums 2, 3
    (((3, 3), (5, 6), (6, 2)), [1, 0, 0, 1, 0, 1]),     # d² 13 > 10; Δ = −11; areas 18 > 15; sums 14, 11 > 6
    (((0, 0), (1, 0), (0, 1)), [0, 0, 1, 0, 0, 0]),     # equal distances; G below R, B right of R: counter-clockwise
    (((6, 6), (2, 6), (5, 1)), [0, 1, 1, 1, 0, 1]),     # d² 16 < 26; Δ = (−4)(−5) = 20; areas 48 > 7; sums 13, 13
])
def test_answers_worked_by_hand(cells, answers) -> None:
    assert three_cell_labels(*cells, grid=7) == answers


def test_images_are_three_pure_cells_on_black() -> None:
    cells = np.array([[1, 2], [4, 0], [6, 6]])
    image = render_three_cells(cells, grid=7, cell_size=4)
    assert image.shape == (3, 28, 28)
    for (row, col), channel in zip(cells, range(3)):
        block = image[:, 4 * row:4 * row + 4, 4 * col:4 * col + 4]
        assert bool((block[channel] == 1).all()) and float(block.sum()) == 16.0
    assert float(image.sum()) == 48.0


@pytest.mark.parametrize('grid', [5, 7, 14])
def test_the_sampler_draws_three_distinct_non_collinear_cells_inside_the_grid(grid) -> None:
    rng = random.Random(0)
    ties = 0
    for _ in range(600):
        red, green, blue = sample_three_cells(rng, grid)
        assert len({red, green, blue}) == 3
        assert all(0 <= value < grid for cell in (red, green, blue) for value in cell)
        assert (green[0] - red[0]) * (blue[1] - red[1]) != (green[1] - red[1]) * (blue[0] - red[0])
        ties += (green[0] - red[0]) ** 2 + (green[1] - red[1]) ** 2 == (blue[0] - red[0]) ** 2 + (blue[1] - red[1]) ** 2
    assert 0.25 < ties / 600 < 0.37                  # one mode in three draws equal distances (fewer after rejection)


def test_offsets_cover_the_radii_of_the_grid() -> None:
    groups = offsets_by_squared_radius(14)
    assert 0 not in groups and max(groups) == 338 and len(groups) == 125
    assert set(groups[25]) >= {(3, 4), (-4, 3), (5, 0), (0, -5)}


def test_splits_are_disjoint_parts_of_one_seeded_draw() -> None:
    splits = {name: ThreeCells(name, grid=7, cell_size=2, count=200, seed=3) for name in ('train', 'val', 'test')}
    assert [len(splits[name]) for name in ('train', 'val', 'test')] == [160, 20, 20]
    cells, labels = three_cell_set(200, 7, 3)
    assert torch.equal(splits['val'].cells, torch.from_numpy(cells[160:180]))
    item = splits['test'][0]
    assert item['inputs'].shape == (3, 14, 14) and item['label'].tolist() == labels[180].tolist()
    other = ThreeCells('train', grid=7, cell_size=2, count=200, seed=4)
    assert not torch.equal(other.cells, splits['train'].cells)
    with pytest.raises(ValueError, match='grid'):
        ThreeCells('train', grid=2)


def test_scores_of_an_oracle_and_of_always_no() -> None:
    _, labels = three_cell_set(300, 7, 0)
    labels = torch.from_numpy(labels).float()
    assert three_cell_scores(labels * 20 - 10, labels) == {'distance': 100.0, 'orientation': 100.0, 'area': 100.0,
                                                           'vector_sum': 100.0, 'average': 100.0}
    never = three_cell_scores(torch.full_like(labels, -1.0), labels)
    assert never['orientation'] == pytest.approx(100 * float((labels[:, 2] == 0).double().mean()))
    assert never['distance'] == pytest.approx(100 * float((labels[:, :2] == 0).double().mean()))


def vit(encoding: str) -> torch.nn.Module:
    torch.manual_seed(0)
    return vispe.create_vit('vit_tiny_patch16_224', encoding=dict(type=encoding), img_size=28, patch_size=4,
                            embed_dim=32, depth=2, num_heads=2, num_classes=6, global_pool='avg',
                            class_token=False).eval()


def test_nope_cannot_tell_arrangements_apart_and_a_positional_encoding_can() -> None:
    first = render_three_cells(np.array([[0, 0], [0, 3], [2, 0]]), 7, 4)
    moved = render_three_cells(np.array([[5, 6], [1, 1], [3, 4]]), 7, 4)   # the same three cells elsewhere
    images = torch.stack([first, moved])
    with torch.no_grad():
        nope, sincos = vit('NoPE')(images), vit('SinCos2D')(images)
    nope_gap, sincos_gap = (nope[0] - nope[1]).abs().max(), (sincos[0] - sincos[1]).abs().max()
    assert nope_gap < 1e-6 and sincos_gap > 1e-5 and sincos_gap > 100 * nope_gap
