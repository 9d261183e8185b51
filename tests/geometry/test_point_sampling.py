"""Farthest-point sampling, ball query and grouping against brute force, as PointNet++'s ops define them."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from vispe.geometry.point_sampling import ball_query, farthest_point_sample, group_points


def brute_force_fps(points: np.ndarray, count: int) -> list[int]:
    chosen = [0]
    for _ in range(count - 1):
        distance = np.min(((points[:, None] - points[chosen][None]) ** 2).sum(-1), axis=1)
        chosen.append(int(np.argmax(distance)))
    return chosen


def test_fps_equals_brute_force_and_finds_the_extremes() -> None:
    generator = torch.Generator().manual_seed(0)
    xyz = torch.rand(2, 300, 3, generator=generator, dtype=torch.float64)
    chosen = farthest_point_sample(xyz, 20)
    for scene in range(2):
        assert chosen[scene].tolist() == brute_force_fps(xyz[scene].numpy(), 20)
    line = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [5, 0, 0], [2, 0, 0], [-3, 0, 0]]])
    assert farthest_point_sample(line, 3).tolist() == [[0, 2, 4]]


def test_ball_query_equals_brute_force_with_padding_and_nearest_fallback() -> None:
    generator = torch.Generator().manual_seed(1)
    xyz = torch.rand(1, 200, 3, generator=generator)
    centres = torch.cat([xyz[:, :5], torch.full((1, 1, 3), 10.0)], dim=1)
    groups = ball_query(0.2, 8, xyz, centres, chunk=4)
    distances = torch.cdist(centres, xyz)[0]
    for centre in range(5):
        inside = torch.nonzero(distances[centre] <= 0.2).flatten().tolist()
        expected = (inside + [inside[0]] * 8)[:8]
        assert groups[0, centre].tolist() == expected
    assert groups[0, 5].tolist() == [int(distances[5].argmin())] * 8
    assert ball_query(0.05, 300, xyz, centres[:, :1]).shape == (1, 1, 300)


def test_group_points_and_errors() -> None:
    features = torch.arange(12.0).reshape(1, 4, 3)
    assert group_points(features, torch.tensor([[[3, 0], [1, 1]]])).tolist() == [[[[9, 10, 11], [0, 1, 2]],
                                                                                 [[3, 4, 5], [3, 4, 5]]]]
    with pytest.raises(ValueError, match='asked for 5 samples of clouds of 4 points'):
        farthest_point_sample(torch.zeros(1, 4, 3), 5)
    with pytest.raises(ValueError, match=r'\(B, N, 3\)'):
        farthest_point_sample(torch.zeros(4, 3), 2)
    with pytest.raises(ValueError, match='radius > 0'):
        ball_query(0.0, 4, torch.zeros(1, 4, 3), torch.zeros(1, 1, 3))
