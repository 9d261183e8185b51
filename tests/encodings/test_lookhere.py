"""LookHere: every head attends only inside its directions; penalties; maps built once; reference rounding."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import vispe
from vispe.encodings import LookHere
from vispe.encodings.lookhere import head_layout, head_slopes
from vispe.geometry import Positions

VISIBLE = {  # key offset (dx, dy) = key − query, y downward: where each direction lets a head look
    'up': lambda dx, dy: dy <= 0, 'down': lambda dx, dy: dy >= 0,
    'left': lambda dx, dy: dx <= 0, 'right': lambda dx, dy: dx >= 0,
    'tri_up': lambda dx, dy: dy <= -abs(dx), 'tri_down': lambda dx, dy: dy >= abs(dx),
    'tri_left': lambda dx, dy: dx <= -abs(dy), 'tri_right': lambda dx, dy: dx >= abs(dy),
}
for _a in ('up', 'down'):
    for _b in ('left', 'right'):
        VISIBLE[f'diag_{_a}_{_b}'] = (lambda a, b: lambda dx, dy: VISIBLE[f'tri_{a}'](dx, dy)
                                      or VISIBLE[f'tri_{b}'](dx, dy))(_a, _b)


def visible_by_definition(spec: tuple[str, ...], grid: tuple[int, int]) -> torch.Tensor:
    height, width = grid
    cells = [(r, c) for r in range(height) for c in range(width)]
    out = torch.ones(len(cells), len(cells), dtype=torch.bool)
    for i, (ri, ci) in enumerate(cells):
        for j, (rj, cj) in enumerate(cells):
            out[i, j] = all(VISIBLE[d](cj - ci, rj - ri) for d in spec if d in VISIBLE)
    return out


@pytest.mark.parametrize('directions, heads', [('halves', 4), ('corners', 4), ('triangles', 4), ('diagonals', 4),
                                               ('triangles-eighths1-eighths2', 12), ('halves-zero', 6),
                                               ('zerocorners', 4)])
def test_no_attention_outside_each_heads_directions(directions, heads) -> None:
    grid = (5, 6)
    vit = vispe.create_vit('vit_tiny_patch16_224', img_size=grid[0] * 4, patch_size=4, depth=2, num_classes=2,
                           embed_dim=heads * 8, num_heads=heads,
                           encoding=dict(type='LookHere', directions=directions)).eval()
    maps = vispe.capture_attention(vit, torch.randn(2, 3, grid[0] * 4, grid[1] * 4))
    _, specs = head_layout(directions, heads)
    for probs in maps:
        assert torch.isfinite(probs).all()
        for head, spec in enumerate(specs):
            visible = visible_by_definition(spec, grid)
            patch_probs = probs[:, head, 1:, 1:]
            assert torch.all(patch_probs[:, ~visible] == 0), (directions, head, spec)
            assert torch.all(patch_probs[:, visible] > 0)
            assert torch.all(probs[:, head, :, 0] > 0) and torch.all(probs[:, head, 0, :] > 0)


def test_penalty_grows_with_distance_and_scales_with_slopes() -> None:
    encoding = LookHere(num_heads=4, depth=3, num_prefix_tokens=1, directions='halves', global_slope=2.0,
                        layer_slopes=(1.5, 0.5))
    bias = encoding.layer_bias(Positions((1, 6), num_prefix_tokens=1), 1)[0]
    right = bias[3, 1, 1:]  # head 'right' looking from column 0
    assert torch.all(right[1:] < right[:-1])
    # layer 1 of 3: s_l = 1.0; head 3 slope 0.5; g = 2 -> −1.0 per patch of distance
    assert torch.allclose(right, -torch.arange(6.0))
    encoding.global_slope = 1.0
    assert torch.allclose(encoding.layer_bias(Positions((1, 6), num_prefix_tokens=1), 1)[0, 3, 1, 1:], -0.5 * torch.arange(6.0))


def test_maps_are_built_once_per_grid_whatever_the_depth() -> None:
    vit = vispe.create_vit('vit_tiny_patch16_224', img_size=24, patch_size=4, depth=4, num_classes=2,
                           embed_dim=32, num_heads=4, encoding=dict(type='LookHere', directions='corners')).eval()
    with torch.no_grad():
        vit(torch.randn(1, 3, 24, 24))
        assert vit.encoding.table_cache.builds == 1
        vit(torch.randn(1, 3, 24, 24))
        assert vit.encoding.table_cache.builds == 1
        vit(torch.randn(1, 3, 24, 40))
        assert vit.encoding.table_cache.builds == 2


def reference_formula(directions: str, heads: int, depth: int, layer: int, grid: tuple[int, int],
                      global_slope: float, layer_slopes: tuple[float, float]) -> torch.Tensor:
    """The reference's maps, written from its definition: float64, slopes g·s_l·(s_h·D), +inf masked -> bf16
    max, cast to bfloat16, negated; prefix row and column 0."""
    names, specs = head_layout(directions, heads)
    slopes = head_slopes(names)
    height, width = grid
    cells = np.array([(r, c) for r in range(height) for c in range(width)], dtype=np.float64)
    distance = np.sqrt(((cells[:, None] - cells[None]) ** 2).sum(-1))
    s_l = np.linspace(*layer_slopes, depth)[layer]
    maps = []
    for head, spec in enumerate(specs):
        visible = visible_by_definition(spec, grid).numpy()
        lh = np.where(visible, slopes[head] * distance, np.inf)
        maps.append(np.nan_to_num(global_slope * s_l * lh, posinf=float(torch.finfo(torch.bfloat16).max)))
    rounded = (torch.tensor(np.stack(maps), dtype=torch.bfloat16) * -1.0).float()
    return torch.nn.functional.pad(rounded, (1, 0, 1, 0))


def test_reference_rounding_reproduces_the_bfloat16_maps() -> None:
    grid, depth = (5, 7), 4
    options = dict(num_heads=12, depth=depth, num_prefix_tokens=1, directions='triangles-eighths1-eighths2',
                   global_slope=0.9, layer_slopes=(1.5, 0.5))
    rounded = LookHere(reference_rounding=True, **options)
    exact = LookHere(**options)
    for layer in range(depth):
        expected = reference_formula('triangles-eighths1-eighths2', 12, depth, layer, grid, 0.9, (1.5, 0.5))
        ours = rounded.layer_bias(Positions(grid, num_prefix_tokens=1), layer)[0]
        assert torch.equal(ours, expected)
        full = exact.layer_bias(Positions(grid, num_prefix_tokens=1), layer)[0]
        finite = expected > -1e30
        assert torch.allclose(full[finite], expected[finite], rtol=2 ** -8, atol=0)
        assert not torch.equal(full, expected)


def test_head_layouts_and_slopes_of_the_reference() -> None:
    names, specs = head_layout('halves-zero', 6)
    assert specs == [('up',), ('down',), ('left',), ('right',), ('zero',), ('zero',)]
    assert head_slopes(names).tolist() == [0.5] * 4 + [0.25, 0.0625]
    names, _ = head_layout('halves', 12)
    assert head_slopes(names).tolist() == [0.5] * 4 + [0.25] * 4 + [0.125] * 4
    assert head_layout('eighths', 12) == head_layout('triangles-eighths1-eighths2', 12)
    with pytest.raises(ValueError, match='Unknown LookHere directions'):
        head_layout('sideways', 4)
    with pytest.raises(ValueError, match='in no reference layout'):
        head_layout('halves-zero', 8)


def test_fill_options() -> None:
    pos = Positions((3, 3), num_prefix_tokens=1)
    zero = LookHere(num_heads=4, depth=1, directions='halves', fill_with='zero', layer_slopes=(1, 1))
    bias = zero.layer_bias(pos, 0)[0]
    assert bias.min() > -10 and bias[0, 1, 9] == 0  # head 'up' from the top-left: bottom-right would be masked
    largest = LookHere(num_heads=4, depth=1, directions='halves', fill_with='max', layer_slopes=(1, 1))
    bias = largest.layer_bias(pos, 0)[0]
    assert math.isclose(bias[0, 1, 9].item(), -0.5 * math.sqrt(8), rel_tol=1e-6)


def test_issue_example_builds_for_vit_base() -> None:
    vit = vispe.create_vit('vit_base_patch16_224', encoding=dict(type='LookHere', directions='eighths',
                                                                 global_slope=1.0, layer_slopes=(1.5, 0.5)))
    assert vit.encoding.head_slopes.shape == (12,)
