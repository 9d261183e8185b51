"""What the codecs code: Gaussian centres on a 16-bit grid within the scene's bounds (TC-GS's ``Quantize_anchor``),
sorted in Morton order and stored as zlib-compressed varint deltas, and the attribute vector of each Gaussian in
groups (colour DC, higher SH, opacity, scale, rotation)."""
from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

from vispe.gaussians.ply import GaussianCloud

__all__ = ['AttributeGroups', 'POSITION_BITS', 'decode_positions', 'encode_positions', 'quantize_positions']

POSITION_BITS = 16
GRID_MAX = (1 << POSITION_BITS) - 1


@dataclass(frozen=True)
class AttributeGroups:
    """The attribute columns of a cloud with ``rest`` higher SH coefficients per channel, in coding order."""

    rest: int

    @property
    def sizes(self) -> dict[str, int]:
        return {'f_dc': 3, 'f_rest': 3 * self.rest, 'opacity': 1, 'scale': 3, 'rotation': 4}

    @property
    def width(self) -> int:
        return sum(self.sizes.values())

    def slices(self) -> dict[str, slice]:
        out, start = {}, 0
        for name, size in self.sizes.items():
            out[name] = slice(start, start + size)
            start += size
        return out

    def group_index(self) -> np.ndarray:
        """(width,) the group number of each column."""
        return np.concatenate([np.full(size, i) for i, size in enumerate(self.sizes.values())])

    def matrix(self, cloud: GaussianCloud) -> np.ndarray:
        """(N, width) float32 attributes of ``cloud``."""
        return np.concatenate([cloud.f_dc, cloud.f_rest.reshape(len(cloud), -1), cloud.opacity[:, None], cloud.scale,
                               cloud.rotation], axis=1)

    def cloud(self, xyz: np.ndarray, attributes: np.ndarray) -> GaussianCloud:
        """A cloud from centres and an (N, width) attribute matrix (normals zero, as 3DGS writes them)."""
        parts = {name: attributes[:, part] for name, part in self.slices().items()}
        count = len(xyz)
        return GaussianCloud(xyz=xyz, normals=np.zeros((count, 3)), f_dc=parts['f_dc'],
                             f_rest=parts['f_rest'].reshape(count, 3, self.rest), opacity=parts['opacity'][:, 0],
                             scale=parts['scale'], rotation=parts['rotation'])


def quantize_positions(xyz: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """(N, 3) int64 grid coordinates: round((x − low) / (high − low) · (2^16 − 1))."""
    extent = np.where(high > low, high - low, 1.0).astype(np.float64)
    grid = np.rint((np.asarray(xyz, np.float64) - low) / extent * GRID_MAX)
    return np.clip(grid, 0, GRID_MAX).astype(np.int64)


def dequantize_positions(grid: np.ndarray, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """(N, 3) float32 centres of grid coordinates."""
    extent = np.where(high > low, high - low, 1.0).astype(np.float64)
    return (np.asarray(low, np.float64) + grid / GRID_MAX * extent).astype(np.float32)


def morton_codes(grid: np.ndarray) -> np.ndarray:
    """(N,) uint64 Morton codes of 16-bit (N, 3) grid coordinates (bits interleaved x, y, z)."""
    code = np.zeros(len(grid), np.uint64)
    for bit in range(POSITION_BITS):
        for axis in range(3):
            code |= ((grid[:, axis].astype(np.uint64) >> np.uint64(bit)) & np.uint64(1)) << np.uint64(3 * bit + axis)
    return code


def morton_grid(codes: np.ndarray) -> np.ndarray:
    """Inverse of :func:`morton_codes`: (N, 3) int64."""
    grid = np.zeros((len(codes), 3), np.int64)
    for bit in range(POSITION_BITS):
        for axis in range(3):
            grid[:, axis] |= ((codes >> np.uint64(3 * bit + axis)) & np.uint64(1)).astype(np.int64) << bit
    return grid


def _varints(values: np.ndarray) -> bytes:
    """Unsigned LEB128 of non-negative uint64 values."""
    out = bytearray()
    for value in values.tolist():
        while value >= 0x80:
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        out.append(value)
    return bytes(out)


def _read_varints(data: bytes, count: int) -> np.ndarray:
    values, value, shift = [], 0, 0
    for byte in data:
        value |= (byte & 0x7F) << shift
        if byte & 0x80:
            shift += 7
            continue
        values.append(value)
        value, shift = 0, 0
    if len(values) != count or shift:
        raise ValueError(f'the position stream holds {len(values)} complete values, the header says {count}.')
    return np.array(values, dtype=np.uint64)


def encode_positions(grid: np.ndarray) -> tuple[np.ndarray, bytes]:
    """Sort the grid points in Morton order; returns the order (indices into ``grid``) and the zlib-compressed
    varint deltas of their Morton codes."""
    codes = morton_codes(grid)
    order = np.argsort(codes, kind='stable')
    sorted_codes = codes[order]
    deltas = np.diff(sorted_codes, prepend=np.uint64(0))
    return order, zlib.compress(_varints(deltas), 9)


def decode_positions(data: bytes, count: int) -> np.ndarray:
    """(count, 3) int64 grid coordinates in Morton order from :func:`encode_positions`'s bytes."""
    deltas = _read_varints(zlib.decompress(data), count)
    return morton_grid(np.cumsum(deltas, dtype=np.uint64))
