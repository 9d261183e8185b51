"""Point clouds on disk (``.ply``, ``.pcd``, ``.npy``) and open3d-backed helpers (voxel down-sampling, normals,
k nearest neighbours) that return torch tensors.

open3d reads many broken files without an error: an empty cloud for a bad header, uninitialised coordinates
for a truncated binary file or a ``.ply`` vertex element without ``y``. :func:`read_points` therefore checks
the header (x/y/z present, point count) and the data's size against it before open3d reads, and the number of
points open3d returns after; each error names the file and the fix.

In memory: xyz (N, 3) float32, colours (N, 3) float32 in [0, 1], normals (N, 3) float32. On disk:

* ``.ply`` / ``.pcd``: binary, xyz and normals float32, colours 8 bits (0..255), so a round trip rounds colours
  to the nearest multiple of 1/255. Reading takes 8- and 16-bit or float colours.
* ``.npy``: an (N, 3) xyz or (N, 6) xyz + rgb array of numbers, rgb in 0..255 (ScanNet's preprocessed
  ``<scene>_vert.npy`` layout), read with ``allow_pickle=False``; written as float32, rgb unrounded. rgb that is
  all <= 1 (and not all 0) is refused: it is 0..1 colours saved without the factor 255.

Writing goes to a temporary file in the target's folder, then ``os.replace``: the target is never half-written.
open3d is imported on first use.
"""
from __future__ import annotations

import math
import numbers
import os
import secrets
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence, Union

import numpy as np
import torch

from vispe.extras import import_extra

if TYPE_CHECKING:
    import open3d as o3d

__all__ = ['POINT_CLOUD_SUFFIXES', 'PointCloudFileError', 'colour_range_problem', 'estimate_normals', 'knn',
           'read_points', 'voxel_down_sample', 'write_points']

POINT_CLOUD_SUFFIXES = ('.npy', '.pcd', '.ply')
FEATURE_O3D = 'reading and writing .ply / .pcd point clouds (open3d)'
ArrayLike = Union[np.ndarray, torch.Tensor, Sequence[Sequence[float]]]

HEADER_LIMIT = 1 << 16  # bytes of a .ply / .pcd header
PLY_SIZES = {'char': 1, 'int8': 1, 'uchar': 1, 'uint8': 1, 'short': 2, 'int16': 2, 'ushort': 2, 'uint16': 2,
             'int': 4, 'int32': 4, 'uint': 4, 'uint32': 4, 'float': 4, 'float32': 4, 'double': 8, 'float64': 8}
PLY_BINARY = ('binary_little_endian', 'binary_big_endian')
REWRITE = 'write it again (vispe.geometry.point_cloud.write_points) or use another copy'


class PointCloudFileError(ValueError):
    """A point-cloud file that cannot be read as one: empty, truncated, corrupt, without x/y/z, or with NaN/inf."""


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in POINT_CLOUD_SUFFIXES:
        raise ValueError(f'{path}: unknown point-cloud extension {suffix or "(none)"!r}; vispe reads and writes '
                         f'{", ".join(POINT_CLOUD_SUFFIXES)}. Convert other formats first, e.g. with open3d: '
                         f'o3d.io.write_point_cloud("cloud.ply", o3d.io.read_point_cloud(path)).')
    return suffix


def _read_header(path: Path, kind: str, is_last: Callable[[list[str]], bool]) -> tuple[list[list[str]], int]:
    """The words of each header line up to the one ``is_last`` accepts, and the header's size in bytes."""
    lines, size = [], 0
    with open(path, 'rb') as handle:
        while size < HEADER_LIMIT:
            line = handle.readline(HEADER_LIMIT)
            if not line:
                break
            size += len(line)
            lines.append(line.decode('latin-1').split())
            if is_last(lines[-1]):
                return lines, size
    raise PointCloudFileError(f'{path} is not a {kind} file or its header is cut short (no end of header in its first '
                              f'{min(size, HEADER_LIMIT)} bytes); {REWRITE}.')


def _ascii_rows(path: Path, skip: int, count: int, columns: int) -> np.ndarray:
    """The ``count`` rows of ``columns`` numbers after ``skip`` lines of an ASCII file, or a truncation error."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', UserWarning)  # numpy's "input contained no data"
            rows = np.loadtxt(path, dtype=np.float64, comments=None, skiprows=skip, max_rows=count, ndmin=2,
                              encoding='latin-1')
    except ValueError as exc:
        reason = str(exc).split('; use')[0]  # numpy's advice on usecols is not for this file's user
        raise PointCloudFileError(f'{path} is corrupt: its ASCII points are not rows of {columns} numbers ({reason}); '
                                  f'{REWRITE}.') from None
    if rows.shape != (count, columns):
        raise PointCloudFileError(f'{path} is truncated or corrupt: its header promises {count} points of {columns} '
                                  f'numbers, the file holds {rows.shape[0]} rows of {rows.shape[1]}; {REWRITE}.')
    return rows


def _check_ply(path: Path) -> int:
    """The number of vertices of ``path``, once its header and size are those of a readable point cloud."""
    lines, header = _read_header(path, 'PLY', lambda words: words == ['end_header'])
    elements: list[tuple[str, int, dict[str, str | None]]] = []  # name, count, property -> type (None: a list)
    try:
        if lines[0] != ['ply']:
            raise ValueError(f'it starts with {" ".join(lines[0])[:20]!r}, not "ply"')
        form = next(words[1] for words in lines if words[0:1] == ['format'])
        for words in lines:
            if words[0:1] == ['element']:
                elements.append((words[1], int(words[2]), {}))
            elif words[0:1] == ['property']:
                elements[-1][2][words[-1]] = None if words[1] == 'list' else words[1]
    except (ValueError, IndexError, StopIteration) as exc:
        raise PointCloudFileError(f'{path} is not a readable PLY file: its header is corrupt ({exc or "no format"}); '
                                  f'{REWRITE}.') from None
    names = [name for name, _, _ in elements]
    if 'vertex' not in names:
        raise PointCloudFileError(f'{path} has no vertex element (elements: {names or "none"}), so no points; '
                                  f'{REWRITE}.')
    index = names.index('vertex')
    count, props = elements[index][1:]
    if any(props.get(axis) not in PLY_SIZES for axis in 'xyz'):
        raise PointCloudFileError(f'{path}: its vertex element has properties {list(props)}, not the scalar x, y, z '
                                  f'coordinates of points (open3d would read nothing or garbage). Write the points '
                                  f'with x, y, z properties (write_points does).')
    if count == 0:
        raise PointCloudFileError(f'{path} holds no points (element vertex 0); {REWRITE}.')
    if form == 'ascii':
        rows = _ascii_rows(path, len(lines) + sum(n for _, n, _ in elements[:index]), count, len(props))
        if np.isinf(rows).any():
            raise PointCloudFileError(f'{path} has inf in {int(np.isinf(rows).any(1).sum())} vertex rows, which '
                                      f'open3d\'s ASCII PLY reader cannot read; write the cloud as binary PLY or .npy '
                                      f'(inf as NaN, and read it with drop_nonfinite=True).')
    elif form in PLY_BINARY:
        # Sizes are known when no element up to the vertices has a list property (faces come after vertices).
        if all(kind in PLY_SIZES for _, _, types in elements[:index + 1] for kind in types.values()):
            need = header + sum(n * sum(PLY_SIZES[kind] for kind in types.values())
                                for _, n, types in elements[:index + 1])
            if path.stat().st_size < need:
                raise PointCloudFileError(f'{path} is truncated: its header promises {count} points ({need} bytes up '
                                          f'to their end), the file has {path.stat().st_size} bytes; {REWRITE}.')
    else:
        raise PointCloudFileError(f'{path}: unknown PLY format {form!r} (ascii, {", ".join(PLY_BINARY)}); '
                                  f'{REWRITE}.')
    return count


def _check_pcd(path: Path) -> int:
    """The number of points of ``path``, once its header and size are those of a readable point cloud."""
    lines, header = _read_header(path, 'PCD', lambda words: words[0:1] == ['DATA'])
    fields = {words[0].upper(): words[1:] for words in lines if words and not words[0].startswith('#')}
    names = fields.get('FIELDS', [])
    try:
        count = int(fields['POINTS'][0])
        sizes = [int(size) for size in fields['SIZE']]
        counts = [int(value) for value in fields.get('COUNT', [1] * len(names))]
        data = fields['DATA'][0]
    except (KeyError, IndexError, ValueError) as exc:
        raise PointCloudFileError(f'{path} is not a readable PCD file: its header is corrupt (no valid {exc}); '
                                  f'{REWRITE}.') from None
    if not {'x', 'y', 'z'} <= set(names):
        raise PointCloudFileError(f'{path}: its fields are {names}, not x, y, z coordinates of points; write the '
                                  f'points with x, y, z fields (write_points does).')
    if count == 0:
        raise PointCloudFileError(f'{path} holds no points (POINTS 0); {REWRITE}.')
    if data == 'ascii':
        _ascii_rows(path, len(lines), count, sum(counts))
    elif data == 'binary':
        need = header + count * sum(size * value for size, value in zip(sizes, counts))
        if path.stat().st_size < need:
            raise PointCloudFileError(f'{path} is truncated: its header promises {count} points ({need} bytes up to '
                                      f'their end), the file has {path.stat().st_size} bytes; {REWRITE}.')
    elif data != 'binary_compressed':  # open3d returns no points for a damaged one: _read_open3d reports it
        raise PointCloudFileError(f'{path}: unknown PCD data {data!r} (ascii, binary, binary_compressed); '
                                  f'{REWRITE}.')
    return count


def _unit_colours(colours: np.ndarray) -> np.ndarray:
    """8- or 16-bit colours scaled to [0, 1]; float colours as they are."""
    if np.issubdtype(colours.dtype, np.unsignedinteger):
        return colours / np.iinfo(colours.dtype).max
    return colours


def colour_range_problem(colours: np.ndarray, top: float) -> str | None:
    """What is wrong with (N, 3) finite colours of a layout in ``0..top`` (1 or 255), or None when nothing is.

    Values outside ``0..top`` are wrong; with ``top`` 255, so are colours that are all at most 1 but not all 0:
    colours in 0..1 written where 0..255 are read, which would be taken as near-black. The text completes a
    sentence that starts with the file's or scene's name.
    """
    low, high = float(colours.min()), float(colours.max())
    if not (low >= 0 and high <= top):
        return f'has colours from {low:.4g} to {high:.4g}, outside 0..{top:g}; write them again in 0..{top:g}'
    if top == 255 and 0 < high <= 1:
        return (f'has colours from {low:.4g} to {high:.4g}: colours in 0..1 where 0..255 are read (they would be '
                f'near-black); write them again multiplied by 255 (rgb * 255)')
    return None


def _read_open3d(path: Path, count: int) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    o3d = import_extra('open3d', FEATURE_O3D)
    with o3d.utility.VerbosityContextManager(o3d.utility.VerbosityLevel.Error):
        cloud = o3d.t.io.read_point_cloud(str(path), remove_nan_points=False, remove_infinite_points=False)
    found = len(cloud.point.positions) if 'positions' in cloud.point else 0
    if found != count:
        raise PointCloudFileError(f'{path} is corrupt: open3d read {found} of the {count} points its header promises; '
                                  f'{REWRITE}.')
    colours = _unit_colours(cloud.point.colors.numpy()) if 'colors' in cloud.point else None
    normals = cloud.point.normals.numpy() if 'normals' in cloud.point else None
    return cloud.point.positions.numpy(), colours, normals


def _read_npy(path: Path) -> tuple[np.ndarray, np.ndarray | None, None]:
    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        if 'pickle' in str(exc) or 'Python objects' in str(exc):
            raise PointCloudFileError(f'{path} holds pickled (object) data, which vispe never unpickles: write it '
                                      f'again as a plain numeric array (np.save(path, array.astype(np.float32))).'
                                      ) from None
        raise PointCloudFileError(f'{path} is truncated or not a .npy file ({exc}); {REWRITE}.') from None
    except (EOFError, OSError) as exc:
        raise PointCloudFileError(f'{path} is truncated or not a .npy file ({type(exc).__name__}: {exc}); '
                                  f'{REWRITE}.') from None
    if (not isinstance(array, np.ndarray) or array.ndim != 2 or array.shape[1] not in (3, 6)
            or not (np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating))):
        layout = f'{array.shape} {array.dtype}' if isinstance(array, np.ndarray) else 'an .npz archive'
        raise PointCloudFileError(f'{path} holds {layout}, not an (N, 3) xyz or (N, 6) xyz + rgb (0..255) array of '
                                  f'numbers; save one of those (np.save(path, points[:, :6].astype(np.float32))).')
    if len(array) == 0:
        raise PointCloudFileError(f'{path} holds no points (shape {array.shape}); {REWRITE}.')
    return array[:, :3], (array[:, 3:] / 255 if array.shape[1] == 6 else None), None


def read_points(path: str | os.PathLike, drop_nonfinite: bool = False) -> dict[str, torch.Tensor | None]:
    """Read a point cloud from a ``.ply``, ``.pcd`` or ``.npy`` file (module docstring: layouts and colours).

    Args:
        path: the file.
        drop_nonfinite: drop the points with NaN or inf in any value (xyz, colours, normals), with a warning that
            counts them; by default they are an error. A cloud with no finite point is an error either way.

    Returns:
        ``{'xyz': (N, 3) float32, 'colors': (N, 3) float32 in [0, 1] or None, 'normals': (N, 3) float32 or None}``,
        CPU tensors.

    Raises:
        FileNotFoundError: no such file.
        ValueError: an extension other than ``.ply``, ``.pcd``, ``.npy``.
        PointCloudFileError: the file is empty, truncated or corrupt, lacks x/y/z, holds no points, holds NaN/inf
            (without ``drop_nonfinite``), colours out of range (or, in a ``.npy``, colours all <= 1: 0..1 colours
            in the 0..255 layout, see :func:`colour_range_problem`), or pickled data.
    """
    path = Path(os.fspath(path)).expanduser()
    suffix = _suffix(path)
    if not path.is_file():
        raise FileNotFoundError(f'Point cloud not found: {path}' + (' (it is a directory)' if path.is_dir() else '')
                                + '; check the path.')
    if path.stat().st_size == 0:
        raise PointCloudFileError(f'{path} is empty (0 bytes); {REWRITE}.')
    if suffix == '.npy':
        xyz, colours, normals = _read_npy(path)
    else:
        xyz, colours, normals = _read_open3d(path, _check_ply(path) if suffix == '.ply' else _check_pcd(path))
    values = {'xyz': xyz, 'colours': colours, 'normals': normals}
    finite = {name: np.isfinite(value).all(1) for name, value in values.items() if value is not None}
    names = [name for name, rows in finite.items() if not rows.all()]
    bad = ~np.logical_and.reduce(list(finite.values()))
    if bad.any():
        where = f'in {", ".join(names)}; the first is point {int(np.flatnonzero(bad)[0])}'
        if bad.all():
            raise PointCloudFileError(f'{path}: all {len(bad)} points have NaN or inf values ({where}), none is left '
                                      f'to read; {REWRITE}.')
        if not drop_nonfinite:
            raise PointCloudFileError(f'{path}: {int(bad.sum())} of {len(bad)} points have NaN or inf values '
                                      f'({where}); pass drop_nonfinite=True to drop them, or repair the file.')
        warnings.warn(f'{path}: dropped {int(bad.sum())} of {len(bad)} points with NaN or inf values ({where}); '
                      f'repair the file to keep them.', UserWarning, stacklevel=2)
        values = {name: None if value is None else value[~bad] for name, value in values.items()}
    colours, top = values['colours'], (1 if suffix != '.npy' else 255)
    problem = None if colours is None else colour_range_problem(colours * top, top)
    if problem:
        raise PointCloudFileError(f'{path} {problem}.')
    return {key: None if value is None else torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))
            for key, value in (('xyz', values['xyz']), ('colors', colours), ('normals', values['normals']))}


def _points(name: str, value: ArrayLike, count: int | None = None, allow_empty: bool = False) -> np.ndarray:
    """``value`` as a contiguous (N, 3) float64 array of finite numbers, N = ``count`` when given."""
    array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if array.ndim != 2 or array.shape[1:] != (3,) or not np.issubdtype(array.dtype, np.number) or (
            count is not None and len(array) != count) or (len(array) == 0 and not allow_empty):
        want = f'({count}, 3)' if count is not None else '(N, 3)' + ('' if allow_empty else ', N >= 1,')
        raise ValueError(f'{name} must be a {want} array of numbers; got {array.shape} ({array.dtype}).')
    bad = ~np.isfinite(array).all(1)
    if bad.any():
        raise ValueError(f'{name} has {int(bad.sum())} of {len(array)} rows with NaN or inf (the first is row '
                         f'{int(np.flatnonzero(bad)[0])}); drop them first (keep = torch.isfinite(xyz).all(-1)).')
    return np.ascontiguousarray(array, dtype=np.float64)


def _tensor(array: np.ndarray, like: ArrayLike, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """``array`` as a torch tensor on ``like``'s device (the CPU for numpy input)."""
    device = like.device if isinstance(like, torch.Tensor) else 'cpu'
    return torch.from_numpy(np.ascontiguousarray(array)).to(device=device, dtype=dtype)


def write_points(path: str | os.PathLike, xyz: ArrayLike, colors: ArrayLike | None = None,
                 normals: ArrayLike | None = None) -> Path:
    """Write a point cloud to a ``.ply``, ``.pcd`` or ``.npy`` file that :func:`read_points` reads back.

    The data goes to a temporary file next to ``path``, which then replaces ``path``: on any failure ``path``
    is left as it was and the temporary file is removed.

    Args:
        path: the target file; its folder must exist.
        xyz: (N, 3) finite coordinates, N >= 1.
        colors: (N, 3) colours in [0, 1] (8 bits in .ply / .pcd; 0..255 unrounded in .npy).
        normals: (N, 3) normals (.ply / .pcd only).

    Returns:
        ``path``.
    """
    path = Path(os.fspath(path)).expanduser()
    suffix = _suffix(path)
    points = _points('write_points: xyz', xyz)
    colours = None if colors is None else _points('write_points: colors', colors, len(points))
    if colours is not None and not (colours.min() >= 0 and colours.max() <= 1):
        raise ValueError(f'write_points: colors must be in [0, 1]; got {colours.min():.4g} to {colours.max():.4g} '
                         f'(divide 0..255 colours by 255).')
    normals = None if normals is None else _points('write_points: normals', normals, len(points))
    if suffix == '.npy' and normals is not None:
        raise ValueError(f'{path}: a .npy point cloud holds xyz and rgb only; write normals to a .ply or .pcd file.')
    if not path.parent.is_dir():
        raise FileNotFoundError(f'{path}: the folder {path.parent} does not exist; create it first.')
    temporary = path.with_name(f'.{path.name}.{secrets.token_hex(4)}.tmp{suffix}')
    os.close(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
    try:
        if suffix == '.npy':
            table = points if colours is None else np.concatenate([points, colours * 255], axis=1)
            with open(temporary, 'wb') as handle:
                np.save(handle, table.astype(np.float32), allow_pickle=False)
        else:
            _write_open3d(temporary, path, points, colours, normals)
        with open(temporary, 'rb+') as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def _write_open3d(temporary: Path, path: Path, points: np.ndarray, colours: np.ndarray | None,
                  normals: np.ndarray | None) -> None:
    o3d = import_extra('open3d', FEATURE_O3D)
    cloud = o3d.t.geometry.PointCloud(o3d.core.Tensor(points.astype(np.float32)))
    if colours is not None:
        cloud.point.colors = o3d.core.Tensor(np.round(colours * 255).astype(np.uint8))
    if normals is not None:
        cloud.point.normals = o3d.core.Tensor(normals.astype(np.float32))
    with o3d.utility.VerbosityContextManager(o3d.utility.VerbosityLevel.Error):
        written = o3d.t.io.write_point_cloud(str(temporary), cloud, write_ascii=False, compressed=False)
    if not written:
        raise OSError(f'open3d could not write {path} (through {temporary.name}); check the free space and the '
                      f'folder\'s permissions.')


def _legacy_cloud(xyz: np.ndarray, colours: np.ndarray | None = None) -> o3d.geometry.PointCloud:
    o3d = import_extra('open3d', FEATURE_O3D)
    cloud = o3d.geometry.PointCloud(o3d.utility.Vector3dVector(xyz))
    if colours is not None:
        cloud.colors = o3d.utility.Vector3dVector(colours)
    return cloud


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f'{name} must be a finite number > 0 (metres); got {value!r}.')
    return float(value)


def voxel_down_sample(xyz: ArrayLike, voxel_size: float,
                      colors: ArrayLike | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """open3d's voxel down-sampling: one point per occupied voxel, the mean of its points (and of their colours).

    The voxel grid starts half a voxel below the cloud's minimum corner (open3d's). The points come out sorted by
    x, then y, then z.

    Args:
        xyz: (N, 3) finite points.
        voxel_size: the voxel's edge (> 0).
        colors: (N, 3) colours (or any 3 features) averaged with the points, or None.

    Returns:
        xyz (V, 3) float32 and colours (V, 3) float32 or None, on ``xyz``'s device (CPU for numpy).
    """
    points = _points('voxel_down_sample: xyz', xyz)
    colours = None if colors is None else _points('voxel_down_sample: colors', colors, len(points))
    down = _legacy_cloud(points, colours).voxel_down_sample(_positive('voxel_down_sample: voxel_size', voxel_size))
    centres = np.asarray(down.points)
    order = np.lexsort(centres.T[::-1])
    return _tensor(centres[order], xyz), None if colours is None else _tensor(np.asarray(down.colors)[order], xyz)


def estimate_normals(xyz: ArrayLike, radius: float, max_nn: int = 30,
                     direction: Sequence[float] = (0.0, 0.0, 1.0)) -> torch.Tensor:
    """Unit normals by open3d (the smallest principal axis of each point's neighbourhood: its ``max_nn`` nearest
    points within ``radius``), flipped to point along ``direction`` (their sign is otherwise arbitrary). A point
    with fewer than 3 neighbours gets (0, 0, 1).

    Args:
        xyz: (N, 3) finite points.
        radius: neighbourhood radius (> 0).
        max_nn: at most this many neighbours (>= 3).
        direction: (3,) the side the normals face.

    Returns:
        (N, 3) float32 normals, on ``xyz``'s device (CPU for numpy).
    """
    o3d = import_extra('open3d', FEATURE_O3D)
    points = _points('estimate_normals: xyz', xyz)
    if isinstance(max_nn, bool) or not isinstance(max_nn, numbers.Integral) or max_nn < 3:
        raise ValueError(f'estimate_normals: max_nn must be an integer >= 3 (a plane needs 3 points); got {max_nn!r}.')
    cloud = _legacy_cloud(points)
    cloud.estimate_normals(o3d.geometry.KDTreeSearchParamHybrid(_positive('estimate_normals: radius', radius),
                                                                int(max_nn)))
    cloud.orient_normals_to_align_with_direction(np.asarray(direction, dtype=np.float64))
    return _tensor(np.asarray(cloud.normals), xyz)


def knn(query_xyz: ArrayLike, ref_xyz: ArrayLike, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``k`` nearest points of ``ref_xyz`` to each query point, by open3d's nearest-neighbour search.

    Args:
        query_xyz: (M, 3) finite query points (M may be 0).
        ref_xyz: (N, 3) finite reference points.
        k: neighbours per query, 1 to N.

    Returns:
        indices (M, k) int64 into ``ref_xyz`` and Euclidean distances (M, k) float32, nearest first (the order of
        equally distant points is open3d's), on ``query_xyz``'s device (CPU for numpy).
    """
    o3d = import_extra('open3d', FEATURE_O3D)
    query = _points('knn: query_xyz', query_xyz, allow_empty=True)
    ref = _points('knn: ref_xyz', ref_xyz)
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or not 1 <= k <= len(ref):
        raise ValueError(f'knn: asked for k={k!r} neighbours in a reference cloud of {len(ref)} points; ask for 1 to '
                         f'{len(ref)}, or give more reference points.')
    search = o3d.core.nns.NearestNeighborSearch(o3d.core.Tensor(ref))
    search.knn_index()
    indices, squared = search.knn_search(o3d.core.Tensor(query), int(k))
    return (_tensor(indices.numpy().reshape(len(query), k), query_xyz, torch.int64),
            _tensor(np.sqrt(squared.numpy()).reshape(len(query), k), query_xyz))
