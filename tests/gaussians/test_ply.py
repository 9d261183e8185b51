"""3DGS .ply IO: exact round trips at every SH degree, 3DGS's property order and channel-major f_rest, and bad files
(cut short, not a ply, missing properties, an SH count of no degree, NaN, non-finite scales, empty)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from plyfile import PlyData, PlyElement

from vispe.gaussians import GaussianCloud, read_gaussians_ply, write_gaussians_ply


def random_cloud(count: int = 50, degree: int = 3, seed: int = 0) -> GaussianCloud:
    rng = np.random.default_rng(seed)
    rest = (degree + 1) ** 2 - 1
    return GaussianCloud(xyz=rng.normal(size=(count, 3)), normals=np.zeros((count, 3)),
                         f_dc=rng.normal(size=(count, 3)), f_rest=rng.normal(size=(count, 3, rest)),
                         opacity=rng.normal(size=count), scale=rng.normal(size=(count, 3)) - 4,
                         rotation=rng.normal(size=(count, 4)))


@pytest.mark.parametrize('degree', [0, 1, 2, 3])
def test_round_trip_is_exact(tmp_path: Path, degree: int) -> None:
    cloud = random_cloud(degree=degree)
    path = write_gaussians_ply(tmp_path / 'scene.ply', cloud)
    again = read_gaussians_ply(path)
    assert again.sh_degree == degree and len(again) == 50
    for name in ('xyz', 'normals', 'f_dc', 'f_rest', 'opacity', 'scale', 'rotation'):
        assert np.array_equal(getattr(again, name), getattr(cloud, name)), name
    assert not list(tmp_path.glob('.*.tmp'))


def test_layout_is_3dgs_property_order_with_channel_major_rest(tmp_path: Path) -> None:
    cloud = random_cloud(count=2, degree=1)
    vertex = PlyData.read(str(write_gaussians_ply(tmp_path / 'scene.ply', cloud)))['vertex']
    names = [prop.name for prop in vertex.properties]
    assert names == ['x', 'y', 'z', 'nx', 'ny', 'nz', 'f_dc_0', 'f_dc_1', 'f_dc_2', *[f'f_rest_{i}' for i in range(9)],
                     'opacity', 'scale_0', 'scale_1', 'scale_2', 'rot_0', 'rot_1', 'rot_2', 'rot_3']
    assert all(prop.val_dtype in ('f4', 'float32') for prop in vertex.properties)
    # f_rest_{c·3 + j}: channel c (green = 1), basis function j + 1 (j = 2)
    assert vertex.data['f_rest_5'][1] == cloud.f_rest[1, 1, 2]


def write_raw(path: Path, columns: dict[str, np.ndarray]) -> Path:
    table = np.empty(len(next(iter(columns.values()))), dtype=[(name, '<f4') for name in columns])
    for name, values in columns.items():
        table[name] = values
    PlyData([PlyElement.describe(table, 'vertex')]).write(str(path))
    return path


def test_bad_files_are_named(tmp_path: Path) -> None:
    good = write_gaussians_ply(tmp_path / 'good.ply', random_cloud())
    cut = tmp_path / 'cut.ply'
    cut.write_bytes(good.read_bytes()[:-100])
    with pytest.raises(ValueError, match='cut.ply is not a readable .ply'):
        read_gaussians_ply(cut)
    text = tmp_path / 'notes.ply'
    text.write_text('hello')
    with pytest.raises(ValueError, match='notes.ply is not a readable'):
        read_gaussians_ply(text)
    with pytest.raises(FileNotFoundError, match='missing.ply'):
        read_gaussians_ply(tmp_path / 'missing.ply')
    points = write_raw(tmp_path / 'points.ply', {name: np.zeros(4) for name in ('x', 'y', 'z', 'red')})
    with pytest.raises(ValueError, match='lacks the 3DGS properties f_dc_0'):
        read_gaussians_ply(points)
    degree_zero = random_cloud(count=3, degree=0)
    columns = dict(zip(degree_zero.property_names(), degree_zero.as_rows().T))
    wrong = write_raw(tmp_path / 'wrong_sh.ply', columns | {f'f_rest_{i}': np.zeros(3) for i in range(6)})
    with pytest.raises(ValueError, match='wrong_sh.ply: 6 f_rest values per Gaussian are no SH degree'):
        read_gaussians_ply(wrong)


def test_non_finite_values_and_empty_scenes_are_refused(tmp_path: Path) -> None:
    cloud = random_cloud()
    cloud.opacity[7] = np.nan
    with pytest.raises(ValueError, match='opacity has NaN or infinite values in 1 Gaussian.*index 7'):
        cloud.validate()
    with pytest.raises(ValueError, match='opacity has NaN'):
        write_gaussians_ply(tmp_path / 'nan.ply', cloud)
    rows = random_cloud().as_rows()
    rows[3, -5] = np.inf                                    # scale_2
    names = random_cloud().property_names()
    path = write_raw(tmp_path / 'inf_scale.ply', {name: rows[:, i] for i, name in enumerate(names)})
    with pytest.raises(ValueError, match='inf_scale.ply: scale has non-finite log-scales in 1 Gaussian'):
        read_gaussians_ply(path)
    with pytest.raises(ValueError, match='no Gaussians'):
        random_cloud(count=0)
