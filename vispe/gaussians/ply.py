"""3D Gaussian Splatting's ``.ply`` layout (Kerbl et al., SIGGRAPH 2023; graphdeco-inria/gaussian-splatting
``GaussianModel.save_ply``), read and written through ``plyfile``.

One ``vertex`` element, every property float32, in this order::

    x y z  nx ny nz  f_dc_0..2  f_rest_0..(3·M − 1)  opacity  scale_0..2  rot_0..3

``f_dc`` is the degree-0 spherical-harmonic coefficient of each colour channel; ``f_rest`` holds the M = (d+1)² − 1
higher coefficients of SH degree d, channel-major (property ``f_rest_{c·M + j}`` is channel c, basis function
j + 1); ``opacity`` is a logit (the renderer applies a sigmoid), ``scale_*`` are log-scales (exp), ``rot_*`` an
unnormalised quaternion (w, x, y, z). Normals are written as zeros by 3DGS and kept as read.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from vispe.extras import import_extra
from vispe.files import write_atomically

__all__ = ['GaussianCloud', 'ScaleConventionWarning', 'read_gaussians_ply', 'sh_degree_of', 'write_gaussians_ply']

# exp of a log-scale above this overflows float32; a quaternion below this norm is no rotation (the renderers'
# normalisation divides by at least 1e-12).
MAX_LOG_SCALE = float(np.log(np.finfo(np.float32).max))
MIN_QUATERNION_NORM = 1e-12
# The SH coefficient counts per colour channel beyond the DC term, by degree (3DGS renders degrees 0..3).
REST_COUNTS = {(degree + 1) ** 2 - 1: degree for degree in range(4)}


class ScaleConventionWarning(UserWarning):
    """Log-scales that look like linear scales (:meth:`GaussianCloud.scale_convention_note`)."""


def sh_degree_of(rest_per_channel: int) -> int:
    """The SH degree d of M = (d+1)² − 1 higher coefficients per channel; anything else is refused."""
    if rest_per_channel not in REST_COUNTS:
        counts = ', '.join(f'{3 * count} (degree {degree})' for count, degree in REST_COUNTS.items())
        raise ValueError(f'{3 * rest_per_channel} f_rest values per Gaussian are no SH degree: 3DGS stores '
                         f'3·((d+1)² − 1) of them, {counts}.')
    return REST_COUNTS[rest_per_channel]


@dataclass
class GaussianCloud:
    """N Gaussians in 3DGS's stored parametrisation (float32 numpy arrays).

    Attributes:
        xyz: (N, 3) centres.
        normals: (N, 3) as stored (zeros in 3DGS's files).
        f_dc: (N, 3) SH DC coefficient per colour channel.
        f_rest: (N, 3, M) higher SH coefficients, channel-major, M = (d+1)² − 1 (0 for degree 0).
        opacity: (N,) opacity logits.
        scale: (N, 3) log-scales (each below ~88.7, where exp overflows float32).
        rotation: (N, 4) quaternions (w, x, y, z), unnormalised but non-zero.

    Construction validates (:meth:`validate`: a ValueError naming the attribute, the first bad Gaussian's index and
    value, and the fix) and warns (:class:`ScaleConventionWarning`) when the log-scales look linear.
    """

    xyz: np.ndarray
    normals: np.ndarray
    f_dc: np.ndarray
    f_rest: np.ndarray
    opacity: np.ndarray
    scale: np.ndarray
    rotation: np.ndarray

    def __post_init__(self) -> None:
        for field in fields(self):
            given = getattr(self, field.name)
            try:
                if given is None:
                    raise TypeError('None')
                values = np.ascontiguousarray(given, dtype=np.float32)
            except (TypeError, ValueError) as error:
                raise TypeError(f'{field.name} of type {type(given).__name__} is not an array of numbers ({error}); '
                                f'give a numeric (float) array.') from None
            setattr(self, field.name, values)
        self.validate()
        note = self.scale_convention_note()
        if note:
            warnings.warn(note, ScaleConventionWarning, stacklevel=3)

    def __len__(self) -> int:
        return self.xyz.shape[0]

    @property
    def sh_degree(self) -> int:
        return sh_degree_of(self.f_rest.shape[2])

    def validate(self, source: str = '') -> None:
        """Shapes agree, the SH count is a degree, every value is finite, every log-scale has a finite exp, every
        quaternion is non-zero, and there is at least one Gaussian; errors start with ``source`` (a file's path)
        when given."""
        prefix = f'{source}: ' if source else ''
        if self.xyz.ndim != 2 or self.xyz.shape[1] != 3:
            raise ValueError(f'{prefix}xyz has shape {self.xyz.shape}; give the centres as an (N, 3) array.')
        count = self.xyz.shape[0]
        expected = dict(normals=(count, 3), f_dc=(count, 3), opacity=(count,), scale=(count, 3), rotation=(count, 4))
        for name, shape in expected.items():
            if getattr(self, name).shape != shape:
                raise ValueError(f'{prefix}{name} has shape {getattr(self, name).shape}, expected {shape} '
                                 f'(N = {count} Gaussians, from xyz).')
        if self.f_rest.ndim != 3 or self.f_rest.shape[:2] != (count, 3):
            raise ValueError(f'{prefix}f_rest has shape {self.f_rest.shape}, expected ({count}, 3, M), channel-major '
                             f'(a flat (N, 3·M) array of f_rest_* columns: reshape it to (N, 3, M)).')
        sh_degree_of(self.f_rest.shape[2])
        if count == 0:
            raise ValueError(f'{prefix}the scene holds no Gaussians: an empty scene has nothing to render or compress.')
        for field in fields(self):
            values = getattr(self, field.name)
            bad = ~np.isfinite(values)
            if bad.any():
                rows = np.unique(np.nonzero(bad)[0])
                what = 'non-finite log-scales' if field.name == 'scale' else 'NaN or infinite values'
                raise ValueError(f'{prefix}{field.name} has {what} in {len(rows)} Gaussian(s) (first: index '
                                 f'{rows[0]}, value {values[rows[0]].tolist()}); remove those Gaussians or repair '
                                 f'their values before saving or compressing.')
        too_large = np.nonzero((self.scale > MAX_LOG_SCALE).any(1))[0]
        if len(too_large):
            raise ValueError(f'{prefix}scale holds log-scales above {MAX_LOG_SCALE:.1f} in {len(too_large)} '
                             f'Gaussian(s) (first: index {too_large[0]}, value {self.scale[too_large[0]].tolist()}), '
                             f'whose exp overflows float32: 3DGS stores log-scales; store np.log of linear scales.')
        norms = np.linalg.norm(self.rotation.astype(np.float64), axis=1)
        zero = np.nonzero(norms < MIN_QUATERNION_NORM)[0]
        if len(zero):
            first = self.rotation[zero[0]].tolist()
            raise ValueError(f'{prefix}rotation holds {len(zero)} zero quaternion(s) (norm below '
                             f'{MIN_QUATERNION_NORM:g}; first: index {zero[0]}, value {first}), '
                             f'which are no rotation: replace them with unit quaternions (e.g. the identity '
                             f'[1, 0, 0, 0]) or drop those Gaussians.')

    def scale_convention_note(self) -> str | None:
        """A note when the log-scales look like linear scales: every one is ≥ 0 (no Gaussian below 1 unit on any
        axis) and the median Gaussian is over twice as wide as the centres' spacing if they filled the scene's box
        (extent / N^(1/3); a 3DGS Gaussian is about as wide as the spacing of its neighbours). None otherwise."""
        extent = float(np.ptp(self.xyz, axis=0).max())
        if len(self) < 2 or extent <= 0 or self.scale.min() < 0:
            return None
        median, spacing = float(np.exp(np.median(self.scale))), extent / len(self) ** (1 / 3)
        if median <= 2 * spacing:
            return None
        return (f'scale holds only log-scales >= 0 (min {self.scale.min():.4g}): the median Gaussian is '
                f'{median:.4g} units wide where {len(self)} centres in a scene {extent:.4g} units across are about '
                f'{spacing:.4g} apart; 3DGS stores log-scales, so these look like linear scales: store '
                f'np.log(scales) instead (or ignore this if the Gaussians are really that large).')

    def property_names(self) -> list[str]:
        """The vertex properties in 3DGS's order."""
        rest = 3 * self.f_rest.shape[2]
        return ['x', 'y', 'z', 'nx', 'ny', 'nz', *[f'f_dc_{i}' for i in range(3)],
                *[f'f_rest_{i}' for i in range(rest)], 'opacity', *[f'scale_{i}' for i in range(3)],
                *[f'rot_{i}' for i in range(4)]]

    def as_rows(self) -> np.ndarray:
        """(N, P) float32 in :meth:`property_names` order."""
        return np.concatenate([self.xyz, self.normals, self.f_dc, self.f_rest.reshape(len(self), -1),
                               self.opacity[:, None], self.scale, self.rotation], axis=1)


def write_gaussians_ply(path: str | os.PathLike, cloud: GaussianCloud) -> Path:
    """Write ``cloud`` as a binary little-endian 3DGS ``.ply``, atomically (temporary file, then rename)."""
    plyfile = import_extra('plyfile', 'writing Gaussian .ply files')
    PlyData, PlyElement = plyfile.PlyData, plyfile.PlyElement

    path = Path(path)
    cloud.validate()
    names = cloud.property_names()
    vertices = np.empty(len(cloud), dtype=[(name, '<f4') for name in names])
    rows = cloud.as_rows()
    for index, name in enumerate(names):
        vertices[name] = rows[:, index]
    return write_atomically(path, lambda temporary: PlyData([PlyElement.describe(vertices, 'vertex')]).write(
        str(temporary)))


def read_gaussians_ply(path: str | os.PathLike) -> GaussianCloud:
    """Read a 3DGS ``.ply``; a missing file, a file that is no ply or is cut short, missing properties, an SH count
    of no degree, non-finite values, overflowing log-scales and zero quaternions each raise a ValueError
    (FileNotFoundError) that names the file; log-scales that look linear warn (:class:`ScaleConventionWarning`)."""
    PlyData = import_extra('plyfile', 'reading Gaussian .ply files').PlyData

    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'No Gaussian .ply at {path}.')
    try:
        data = PlyData.read(str(path))
        vertex = data['vertex']
        table = vertex.data
    except KeyError:
        raise ValueError(f'{path}: no "vertex" element; a 3DGS .ply stores one vertex per Gaussian.') from None
    except Exception as error:
        raise ValueError(f'{path} is not a readable .ply (corrupt or cut short): {type(error).__name__}: '
                         f'{str(error).splitlines()[0] if str(error) else ""}') from error
    present = set(table.dtype.names or ())
    rest = sorted((name for name in present if name.startswith('f_rest_')), key=lambda name: int(name[7:]))
    if len(rest) % 3:
        raise ValueError(f'{path}: {len(rest)} f_rest properties; 3DGS stores 3·((d+1)² − 1), a multiple of 3.')
    required = ['x', 'y', 'z', *[f'f_dc_{i}' for i in range(3)], *[f'f_rest_{i}' for i in range(len(rest))],
                'opacity', *[f'scale_{i}' for i in range(3)], *[f'rot_{i}' for i in range(4)]]
    missing = [name for name in required if name not in present]
    if missing:
        raise ValueError(f'{path} lacks the 3DGS properties {", ".join(missing)} '
                         f'(found: {", ".join(sorted(present))}); is it a Gaussian-splatting .ply '
                         f'(x y z nx ny nz f_dc_* f_rest_* opacity scale_* rot_*)?')

    def columns(*names: str) -> np.ndarray:
        return np.stack([np.asarray(table[name], dtype=np.float32) for name in names], axis=1) if names else \
            np.zeros((len(table), 0), dtype=np.float32)

    normals = columns('nx', 'ny', 'nz') if {'nx', 'ny', 'nz'} <= present else np.zeros((len(table), 3), np.float32)
    try:
        sh_degree_of(len(rest) // 3)
        with warnings.catch_warnings():
            warnings.simplefilter('ignore', ScaleConventionWarning)       # warned below, naming the file
            cloud = GaussianCloud(xyz=columns('x', 'y', 'z'), normals=normals,
                                  f_dc=columns('f_dc_0', 'f_dc_1', 'f_dc_2'),
                                  f_rest=columns(*rest).reshape(len(table), 3, len(rest) // 3),
                                  opacity=columns('opacity')[:, 0], scale=columns('scale_0', 'scale_1', 'scale_2'),
                                  rotation=columns('rot_0', 'rot_1', 'rot_2', 'rot_3'))
    except ValueError as error:
        raise ValueError(f'{path}: {error}') from None
    note = cloud.scale_convention_note()
    if note:
        warnings.warn(f'{path}: {note}', ScaleConventionWarning, stacklevel=2)
    return cloud
