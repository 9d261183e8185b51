"""Farthest-point sampling, ball query and grouping against brute force, as PointNet++'s ops define them; the fpsample
and torch backends of farthest-point sampling give the same indices."""
from __future__ import annotations

import sys

import numpy as np
import pytest
import torch

from vispe.extras import MissingExtraError
from vispe.geometry import fpsample_backend, point_sampling
from vispe.geometry.point_sampling import ball_query, farthest_point_sample, group_points


def brute_force_fps(points: np.ndarray, count: int) -> list[int]:
    """O(N * count), written out: after each pick, every point's squared distance to it (in the points' dtype, summed
    x, y, z in order) lowers the point's distance to the picked set; the first point of the largest comes next."""
    nearest = [np.inf] * len(points)
    chosen = [0]
    while len(chosen) < count:
        latest = points[chosen[-1]]
        for index, point in enumerate(points):
            squared = (point[0] - latest[0]) ** 2 + (point[1] - latest[1]) ** 2 + (point[2] - latest[2]) ** 2
            nearest[index] = min(nearest[index], squared)
        farthest = 0
        for index in range(len(points)):
            if nearest[index] > nearest[farthest]:
                farthest = index
        chosen.append(farthest)
    return chosen


def tied_cloud(batch: int, seed: int) -> torch.Tensor:
    """(batch, 600, 3) float32 points on a 6 × 6 × 6 lattice, each lattice point several times: distances tie."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 6, (batch, 600, 3), generator=generator).float() * 0.25


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


@pytest.fixture
def without_fpsample(monkeypatch):
    """fpsample hidden from import (a None entry in sys.modules), as where it is not installed."""
    monkeypatch.setitem(sys.modules, 'fpsample', None)
    fpsample_backend.fpsample_importable.cache_clear()
    yield
    fpsample_backend.fpsample_importable.cache_clear()


@pytest.fixture
def fpsample_calls(monkeypatch) -> list[tuple[int, ...]]:
    """The shapes of the clouds that farthest_point_sample hands to fpsample."""
    calls: list[tuple[int, ...]] = []

    def recorded(xyz: torch.Tensor, num_samples: int) -> torch.Tensor:
        calls.append(tuple(xyz.shape))
        return fpsample_backend.fpsample_farthest_points(xyz, num_samples)
    monkeypatch.setattr(point_sampling, 'fpsample_farthest_points', recorded)
    return calls


def test_torch_backend_equals_brute_force_on_ties_and_duplicates() -> None:
    xyz = tied_cloud(2, seed=4)[:, :150]
    chosen = farthest_point_sample(xyz, 40, backend='torch')
    for scene in range(2):
        assert chosen[scene].tolist() == brute_force_fps(xyz[scene].numpy(), 40)
    line = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [-1, 0, 0], [0, 1, 0]]])
    assert farthest_point_sample(line, 4, backend='torch').tolist() == [[0, 1, 2, 3]]


@pytest.mark.parametrize('seed', [0, 1, 2])
def test_fpsample_equals_torch_on_random_clouds(seed: int) -> None:
    pytest.importorskip('fpsample')
    generator = torch.Generator().manual_seed(seed)
    xyz = torch.randn(3, 2000, 3, generator=generator) * torch.tensor([4.0, 4.0, 1.0])
    fast = farthest_point_sample(xyz, 512, backend='fpsample')
    assert fast.dtype == torch.int64 and fast.shape == (3, 512) and fast.device == xyz.device
    assert torch.equal(fast, farthest_point_sample(xyz, 512, backend='torch'))
    assert fast[:, 0].tolist() == [0, 0, 0] and all(len(set(row.tolist())) == 512 for row in fast)
    channels_first = xyz.transpose(1, 2).contiguous().transpose(1, 2)  # the same points, strided
    assert not channels_first.is_contiguous()
    assert torch.equal(farthest_point_sample(channels_first, 512, backend='fpsample'), fast)


@pytest.mark.parametrize('seed', [0, 1])
def test_fpsample_breaks_ties_at_the_lowest_index_as_torch(seed: int) -> None:
    fpsample = pytest.importorskip('fpsample')
    xyz = tied_cloud(2, seed)
    fast = farthest_point_sample(xyz, 216, backend='fpsample')  # every lattice point once, ties at every step
    assert torch.equal(fast, farthest_point_sample(xyz, 216, backend='torch'))
    assert fast[0, :60].tolist() == brute_force_fps(xyz[0].numpy(), 60)
    line = torch.tensor([[[0.0, 0, 0], [1, 0, 0], [-1, 0, 0], [0, 1, 0]]])
    assert farthest_point_sample(line, 4, backend='fpsample').tolist() == [[0, 1, 2, 3]]
    # fpsample 0.3.3 and 1.0.1+ take the highest of equally far points; vispe hands their clouds over reversed.
    raw = fpsample.fps_sampling(line[0].numpy(), 4, start_idx=0).tolist()
    assert raw == ([0, 3, 2, 1] if fpsample_backend.fpsample_ties_to_highest() else [0, 1, 2, 3])


@pytest.mark.parametrize('backend', ['torch', 'fpsample', 'auto'])
def test_every_backend_equals_brute_force_on_small_clouds(backend: str) -> None:
    if backend == 'fpsample':
        pytest.importorskip('fpsample')
    generator = torch.Generator().manual_seed(5)
    xyz = torch.rand(2, 200, 3, generator=generator)
    xyz[:, 150:] = xyz[:, 50:100]  # duplicated points
    chosen = farthest_point_sample(xyz, 30, backend=backend)
    for scene in range(2):
        assert chosen[scene].tolist() == brute_force_fps(xyz[scene].numpy(), 30)


def test_auto_takes_fpsample_for_float32_cpu_clouds_only(fpsample_calls: list) -> None:
    pytest.importorskip('fpsample')
    generator = torch.Generator().manual_seed(6)
    xyz = torch.rand(2, 100, 3, generator=generator)
    assert torch.equal(farthest_point_sample(xyz, 10), farthest_point_sample(xyz, 10, backend='torch'))
    assert fpsample_calls == [(2, 100, 3)]
    farthest_point_sample(xyz.double(), 10)  # float64: the torch loop, in float64
    with_nan = xyz.clone()
    with_nan[1, 7, 2] = torch.nan
    farthest_point_sample(with_nan, 10)  # non-finite: the torch loop, as before
    assert fpsample_calls == [(2, 100, 3)]


def test_auto_takes_torch_while_traced(fpsample_calls: list, monkeypatch) -> None:
    pytest.importorskip('fpsample')
    monkeypatch.setattr(point_sampling, 'checking_values', lambda xyz: False)
    xyz = torch.rand(1, 50, 3, generator=torch.Generator().manual_seed(7))
    farthest_point_sample(xyz, 5)
    assert fpsample_calls == []
    with pytest.raises(RuntimeError, match="cannot trace; use backend='torch'"):
        farthest_point_sample(xyz, 5, backend='fpsample')


def test_without_fpsample_auto_takes_torch_and_fpsample_names_the_extra(without_fpsample: None) -> None:
    xyz = torch.rand(1, 50, 3, generator=torch.Generator().manual_seed(8))
    assert farthest_point_sample(xyz, 6).tolist() == [brute_force_fps(xyz[0].numpy(), 6)]
    with pytest.raises(MissingExtraError, match=r'pip install "vispe\[3d\]".*backend=\'torch\''):
        farthest_point_sample(xyz, 6, backend='fpsample')


def test_backend_errors_name_the_fix() -> None:
    xyz = torch.rand(1, 20, 3, generator=torch.Generator().manual_seed(9))
    with pytest.raises(ValueError, match="unknown backend 'cuda'; choose 'auto'.*'fpsample' or 'torch'"):
        farthest_point_sample(xyz, 4, backend='cuda')
    with pytest.raises(ValueError, match="samples CPU tensors; xyz is on meta. Use backend='torch'"):
        farthest_point_sample(xyz.to('meta'), 4, backend='fpsample')
    with pytest.raises(ValueError, match=r"computes in float32; xyz is torch.float64.*give xyz.float\(\)"):
        farthest_point_sample(xyz.double(), 4, backend='fpsample')
    with pytest.raises(ValueError, match='asked for 21 samples'):
        farthest_point_sample(xyz, 21, backend='fpsample')


def test_fpsample_refuses_non_finite_points() -> None:
    pytest.importorskip('fpsample')
    xyz = torch.rand(1, 20, 3, generator=torch.Generator().manual_seed(10))
    xyz[0, 3, 1] = torch.inf
    with pytest.raises(ValueError, match=r"xyz must be finite .*got inf at index \[0, 3, 1\].*backend='torch'"):
        farthest_point_sample(xyz, 4, backend='fpsample')
