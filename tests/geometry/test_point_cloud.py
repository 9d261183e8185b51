"""Point-cloud files (round trips, atomic writes, every broken file named with its fix) and the open3d helpers."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from vispe.geometry.point_cloud import (PointCloudFileError, estimate_normals, knn, read_points, voxel_down_sample,
                                        write_points)

ASCII_HEADER = 'ply\nformat ascii 1.0\nelement vertex {count}\n{properties}end_header\n'


def random_cloud(count: int = 50) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    xyz = torch.randn(count, 3, generator=generator) * 3
    colours = torch.rand(count, 3, generator=generator)
    normals = torch.nn.functional.normalize(torch.randn(count, 3, generator=generator), dim=-1)
    return xyz, colours, normals


def ascii_ply(path: Path, names: str, rows: str) -> Path:
    properties = ''.join(f'property float {name}\n' for name in names.split())
    path.write_text(ASCII_HEADER.format(count=len(rows.splitlines()), properties=properties) + rows)
    return path


def binary_ply(path: Path, xyz: np.ndarray) -> Path:
    header = ASCII_HEADER.format(count=len(xyz), properties='property float x\nproperty float y\nproperty float z\n')
    path.write_bytes(header.replace('ascii', 'binary_little_endian').encode() + xyz.astype('<f4').tobytes())
    return path


@pytest.mark.parametrize('suffix', ['.ply', '.pcd', '.npy'])
@pytest.mark.parametrize('with_colours', [False, True])
def test_round_trip(tmp_path: Path, suffix: str, with_colours: bool) -> None:
    xyz, colours, normals = random_cloud()
    normals = None if suffix == '.npy' else normals
    path = write_points(tmp_path / f'cloud{suffix}', xyz, colours if with_colours else None, normals)
    cloud = read_points(path)
    assert cloud['xyz'].dtype == torch.float32 and torch.equal(cloud['xyz'], xyz)
    if with_colours:
        # .ply / .pcd keep 8-bit colours (rounded), .npy floats 0..255
        assert (cloud['colors'] - colours).abs().max() <= (0.5 / 255 + 1e-6 if suffix != '.npy' else 1e-6)
    else:
        assert cloud['colors'] is None
    assert cloud['normals'] is None if normals is None else torch.allclose(cloud['normals'], normals)
    assert [item.name for item in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_npy_reads_scannet_vert_layout(tmp_path: Path) -> None:
    vert = np.array([[0, 1, 2, 255, 0, 51], [3, 4, 5, 0, 102, 255]], dtype=np.float32)
    np.save(tmp_path / 'scene0000_00_vert.npy', vert)
    cloud = read_points(tmp_path / 'scene0000_00_vert.npy')
    assert cloud['xyz'].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert torch.allclose(cloud['colors'], torch.tensor([[1, 0, 0.2], [0, 0.4, 1]]))
    np.save(tmp_path / 'bright.npy', vert * [1, 1, 1, 2, 2, 2])
    with pytest.raises(PointCloudFileError, match=r'colours from 0 to 510, outside 0\.\.255'):
        read_points(tmp_path / 'bright.npy')
    np.save(tmp_path / 'wide.npy', np.zeros((4, 4), np.float32))
    with pytest.raises(PointCloudFileError, match=r'holds \(4, 4\) float32, not an \(N, 3\) xyz or \(N, 6\)'):
        read_points(tmp_path / 'wide.npy')


def test_write_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import open3d as o3d
    xyz, colours, _ = random_cloud()
    target = write_points(tmp_path / 'scene.ply', xyz, colours)
    before = target.read_bytes()

    def half_write(path: str, *args: object, **kwargs: object) -> bool:
        Path(path).write_bytes(before[:40])
        raise RuntimeError('disk full')

    monkeypatch.setattr(o3d.t.io, 'write_point_cloud', half_write)
    for name in ('scene.ply', 'new.pcd'):
        with pytest.raises(RuntimeError, match='disk full'):
            write_points(tmp_path / name, xyz[:10])
    monkeypatch.setattr(o3d.t.io, 'write_point_cloud', lambda *args, **kwargs: False)
    with pytest.raises(OSError, match=r'open3d could not write .*scene\.ply'):
        write_points(target, xyz[:10])
    monkeypatch.setattr(np, 'save', lambda handle, *args, **kwargs: handle.write(b'\x93NUMPY') / 0)
    with pytest.raises(ZeroDivisionError):
        write_points(tmp_path / 'scene.npy', xyz)
    assert [item.name for item in tmp_path.iterdir()] == ['scene.ply'] and target.read_bytes() == before


def test_write_refuses_bad_input(tmp_path: Path) -> None:
    xyz, colours, normals = random_cloud(4)
    with pytest.raises(ValueError, match=r'colors must be in \[0, 1\]; got .* \(divide 0\.\.255 colours by 255\)'):
        write_points(tmp_path / 'a.ply', xyz, colours * 255)
    with pytest.raises(ValueError, match='write normals to a .ply or .pcd file'):
        write_points(tmp_path / 'a.npy', xyz, normals=normals)
    with pytest.raises(ValueError, match=r'xyz has 1 of 4 rows with NaN or inf \(the first is row 2\)'):
        write_points(tmp_path / 'a.ply', xyz.index_fill(0, torch.tensor([2]), math.nan))
    with pytest.raises(ValueError, match=r'colors must be a \(4, 3\) array'):
        write_points(tmp_path / 'a.pcd', xyz, colours[:3])
    with pytest.raises(FileNotFoundError, match='does not exist; create it first'):
        write_points(tmp_path / 'missing' / 'a.ply', xyz)
    with pytest.raises(ValueError, match=r"unknown point-cloud extension '\.xyz'.*\.npy, \.pcd, \.ply"):
        write_points(tmp_path / 'a.xyz', xyz)
    assert list(tmp_path.iterdir()) == []


def test_missing_unknown_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r'Point cloud not found: .*nothing\.ply; check the path'):
        read_points(tmp_path / 'nothing.ply')
    with pytest.raises(ValueError, match=r"unknown point-cloud extension '\.obj'; vispe reads and writes \.npy, "):
        read_points(tmp_path / 'mesh.obj')
    (tmp_path / 'empty.ply').touch()
    with pytest.raises(PointCloudFileError, match=r'empty\.ply is empty \(0 bytes\)'):
        read_points(tmp_path / 'empty.ply')
    ascii_ply(tmp_path / 'none.ply', 'x y z', '')
    with pytest.raises(PointCloudFileError, match=r'holds no points \(element vertex 0\)'):
        read_points(tmp_path / 'none.ply')
    (tmp_path / 'text.pcd').write_text('hello\n')
    with pytest.raises(PointCloudFileError, match='is not a PCD file or its header is cut short'):
        read_points(tmp_path / 'text.pcd')


def test_ply_without_coordinates(tmp_path: Path) -> None:
    # open3d returns no points for the first and uninitialised y for the second, without an error
    for names in ('a b c', 'x b z'):
        path = ascii_ply(tmp_path / 'bad.ply', names, '1 2 3\n4 5 6\n')
        with pytest.raises(PointCloudFileError, match=rf"properties \[{', '.join(map(repr, names.split()))}\], "
                                                      rf"not the scalar x, y, z"):
            read_points(path)
    (tmp_path / 'fields.pcd').write_text('VERSION 0.7\nFIELDS a b c\nSIZE 4 4 4\nTYPE F F F\nCOUNT 1 1 1\nWIDTH 1\n'
                                         'HEIGHT 1\nPOINTS 1\nDATA ascii\n1 2 3\n')
    with pytest.raises(PointCloudFileError, match=r"fields are \['a', 'b', 'c'\], not x, y, z"):
        read_points(tmp_path / 'fields.pcd')


@pytest.mark.parametrize('suffix', ['.ply', '.pcd'])
def test_truncated_files(tmp_path: Path, suffix: str) -> None:
    xyz, colours, _ = random_cloud()
    path = write_points(tmp_path / f'cut{suffix}', xyz, colours)
    path.write_bytes(path.read_bytes()[:-7])  # open3d fills the missing values with garbage, without an error
    with pytest.raises(PointCloudFileError, match=r'is truncated: its header promises 50 points \(\d+ bytes up to '
                                                  r'their end\), the file has \d+ bytes'):
        read_points(path)
    path = ascii_ply(tmp_path / 'cut_ascii.ply', 'x y z', '1 2 3\n4 5 6\n7 8')
    with pytest.raises(PointCloudFileError, match=r'cut_ascii\.ply is corrupt: its ASCII points are not rows of 3'):
        read_points(path)
    path.write_text(path.read_text().replace('element vertex 3', 'element vertex 4').replace('7 8', '7 8 9'))
    with pytest.raises(PointCloudFileError, match='header promises 4 points of 3 numbers, the file holds 3 rows'):
        read_points(path)


def test_non_finite_points(tmp_path: Path) -> None:
    xyz = np.arange(15, dtype=np.float32).reshape(5, 3)
    xyz[1, 2] = np.nan
    xyz[3, 0] = np.inf
    np.save(tmp_path / 'nan.npy', xyz)
    for path in (tmp_path / 'nan.npy', binary_ply(tmp_path / 'nan.ply', xyz)):
        with pytest.raises(PointCloudFileError, match=r'2 of 5 points have NaN or inf values \(in xyz; the first is '
                                                      r'point 1\); pass drop_nonfinite=True'):
            read_points(path)
        with pytest.warns(UserWarning, match=r'dropped 2 of 5 points with NaN or inf values \(in xyz; the first is '
                                             r'point 1\); repair the file'):
            assert read_points(path, drop_nonfinite=True)['xyz'].tolist() == [[0, 1, 2], [6, 7, 8], [12, 13, 14]]
    np.save(tmp_path / 'all.npy', np.full((3, 6), np.nan, np.float32))
    with pytest.raises(PointCloudFileError, match=r'all 3 points have NaN or inf values \(in xyz, colours;'):
        read_points(tmp_path / 'all.npy', drop_nonfinite=True)
    ascii_ply(tmp_path / 'inf.ply', 'x y z', '1 2 3\n1 inf 2\n')  # open3d stops at inf and leaves garbage
    with pytest.raises(PointCloudFileError, match="open3d's ASCII PLY reader cannot read"):
        read_points(tmp_path / 'inf.ply', drop_nonfinite=True)


def test_npy_never_unpickles(tmp_path: Path) -> None:
    np.save(tmp_path / 'objects.npy', np.array([[{'x': 1}, 2, 3]], dtype=object), allow_pickle=True)
    with pytest.raises(PointCloudFileError, match=r'holds pickled \(object\) data, which vispe never unpickles'):
        read_points(tmp_path / 'objects.npy')
    (tmp_path / 'cut.npy').write_bytes((tmp_path / 'objects.npy').read_bytes()[:20])
    with pytest.raises(PointCloudFileError, match=r'cut\.npy is truncated or not a \.npy file'):
        read_points(tmp_path / 'cut.npy')


def test_knn() -> None:
    ref = torch.tensor([[0.0, 0, 0], [1, 0, 0], [3, 0, 0], [0, 2, 0]])
    indices, distances = knn(torch.tensor([[0.9, 0, 0], [0, 1.9, 0]]), ref, 2)
    assert indices.dtype == torch.int64 and indices.tolist() == [[1, 0], [3, 0]]
    assert torch.allclose(distances, torch.tensor([[0.1, 0.9], [0.1, 1.9]]))
    assert knn(np.zeros((0, 3)), ref, 4)[0].shape == (0, 4)
    with pytest.raises(ValueError, match='asked for k=5 neighbours in a reference cloud of 4 points; ask for 1 to 4'):
        knn(ref, ref, 5)
    with pytest.raises(ValueError, match=r'knn: ref_xyz must be a \(N, 3\), N >= 1, array of numbers; got \(4, 2\)'):
        knn(ref, ref[:, :2], 1)


def test_voxel_down_sample_and_normals() -> None:
    xyz = torch.tensor([[2.0, 0, 0], [0, 0, 0], [0.1, 0, 0], [0.95, 0, 0], [1.05, 0, 0]])
    colours = torch.tensor([[0.5, 0.5, 0.5], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]])
    down, down_colours = voxel_down_sample(xyz, 1.0, colours)  # voxels [-0.5, 0.5), [0.5, 1.5), [1.5, 2.5)
    assert torch.allclose(down, torch.tensor([[0.05, 0, 0], [1, 0, 0], [2, 0, 0]]))
    assert torch.allclose(down_colours, torch.tensor([[0.5, 0.5, 0], [0.5, 0.5, 1], [0.5, 0.5, 0.5]]))
    assert voxel_down_sample(xyz.numpy(), 10.0)[1] is None
    with pytest.raises(ValueError, match='voxel_size must be a finite number > 0'):
        voxel_down_sample(xyz, 0.0)
    plane = torch.rand(60, 3)
    plane[:, 2] = plane[:, 0]  # the plane z = x
    normals = estimate_normals(plane, radius=0.5, max_nn=20)
    assert torch.allclose(normals, torch.tensor([-1, 0, 1]) / math.sqrt(2), atol=1e-5)
    assert torch.allclose(estimate_normals(plane, 0.5, direction=(0, 0, -1)), -normals, atol=1e-5)
    with pytest.raises(ValueError, match='max_nn must be an integer >= 3'):
        estimate_normals(plane, 0.5, max_nn=2)
