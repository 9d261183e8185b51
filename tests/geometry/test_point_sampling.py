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


def test_fps_takes_the_corners_of_a_cube_first() -> None:
    generator = torch.Generator().manual_seed(2)
    xyz = 0.2 + 0.6 * torch.rand(1, 40, 3, generator=generator)  # inside the cube, > 0.2 from each corner
    corners = torch.tensor([[x, y, z] for x in (0.0, 1.0) for y in (0.0, 1.0) for z in (0.0, 1.0)])
    slots = [0, 3, 9, 14, 20, 27, 31, 38]
    xyz[0, slots] = corners
    chosen = farthest_point_sample(xyz, 9)[0].tolist()
    assert chosen[:2] == [0, 38] and sorted(chosen[:8]) == slots and chosen[8] not in slots


def brute_force_ball_query(points: np.ndarray, centres: np.ndarray, radius: float, size: int) -> np.ndarray:
    groups = np.zeros((len(centres), size), dtype=np.int64)
    for row, centre in enumerate(centres):
        distance = np.sqrt(((points - centre) ** 2).sum(-1))
        inside = [index for index in range(len(points)) if distance[index] < radius][:size]
        inside = inside or [int(np.argmin(distance))]
        groups[row] = inside + [inside[0]] * (size - len(inside))
    return groups


def test_ball_query_equals_numpy_brute_force() -> None:
    generator = torch.Generator().manual_seed(3)
    xyz = torch.rand(2, 500, 3, generator=generator, dtype=torch.float64)
    centres = torch.cat([xyz[:, :30], torch.rand(2, 10, 3, generator=generator, dtype=torch.float64) * 3], dim=1)
    groups = ball_query(0.15, 16, xyz, centres, chunk=7)
    assert groups.dtype == torch.int64 and groups.shape == (2, 40, 16)
    for scene in range(2):
        expected = brute_force_ball_query(xyz[scene].numpy(), centres[scene].numpy(), 0.15, 16)
        assert np.array_equal(groups[scene].numpy(), expected)


def test_ball_query_equals_brute_force_with_padding_and_nearest_fallback() -> None:
    generator = torch.Generator().manual_seed(1)
    xyz = torch.rand(1, 200, 3, generator=generator)
    centres = torch.cat([xyz[:, :5], torch.full((1, 1, 3), 10.0)], dim=1)
    groups = ball_query(0.2, 8, xyz, centres, chunk=4)
    distances = torch.cdist(centres, xyz)[0]
    for centre in range(5):
        inside = torch.nonzero(distances[centre] < 0.2).flatten().tolist()
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
    with pytest.raises(ValueError, match=r'centres \(2, 1, 3\) and xyz \(1, 4, 3\) must have the same batch size'):
        ball_query(0.5, 4, torch.zeros(1, 4, 3), torch.zeros(2, 1, 3))
    with pytest.raises(ValueError, match=r'int64 index \(B, M, k\) with the same B; got \(1, 4, 3\) and \(1, 2, 2\) '
                                         r'torch.int32'):
        group_points(torch.zeros(1, 4, 3), torch.zeros(1, 2, 2, dtype=torch.int32))
