"""The rate–distortion report of Gaussian bitstreams against their source scene: bytes and bits per Gaussian (per
section: centres, context model, each attribute group), each group's empirical entropy at the bitstream's base
steps, attribute PSNR per group, the times to encode and decode, and, given reference views, the rendered PSNR and
SSIM (vispe.gaussians.render_quality).

Attribute PSNR of a group: 10·log₁₀(1 / mean_j(MSE_j / range_j²)) over its columns j whose values vary (range_j
the column's max − min in the source); ∞ when every column is reproduced exactly. The mean over the attributes
pools every varying column the same way. Empirical entropy: per column, −Σ p log₂ p of the symbols round(x / Q)
at the group's base step Q (× the step scale), summed over the group's columns: what an ideal context-free coder
of those symbols would spend per Gaussian.
"""
from __future__ import annotations

import math
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

from vispe.gaussians.bitstream import UnverifiedSignatureWarning, read_bitstream
from vispe.gaussians.codec import BASE_STEPS, decompress
from vispe.gaussians.layout import AttributeGroups, encode_positions, quantize_positions
from vispe.gaussians.ply import GaussianCloud
from vispe.gaussians.render_quality import ReferenceViews

__all__ = ['attribute_psnr', 'bitstream_report', 'empirical_entropy']


def empirical_entropy(values: np.ndarray, step: float) -> float:
    """Bits per row of the symbols round(values / step), columns independent: Σ_j −Σ p log₂ p."""
    total = 0.0
    for column in np.atleast_2d(values.T):
        _, counts = np.unique(np.rint(column / step).astype(np.int64), return_counts=True)
        p = counts / counts.sum()
        total += float(-(p * np.log2(p)).sum())
    return total


def attribute_psnr(source: np.ndarray, decoded: np.ndarray) -> float:
    """PSNR over the varying columns of (N, W) attributes (see the module docstring); nan if none varies."""
    spread = source.max(0) - source.min(0)
    varying = spread > 0
    if not varying.any():
        return math.nan
    normalised = (((decoded - source)[:, varying] / spread[varying]) ** 2).mean(0).mean()
    return math.inf if normalised == 0 else float(-10 * math.log10(normalised))


def bitstream_report(source: GaussianCloud, path: str | Path, key: bytes | None = None,
                     views: ReferenceViews | None = None) -> dict[str, Any]:
    """One row of the report: ``source`` (the .ply that was compressed) against the bitstream at ``path`` (its
    signature verified under ``key`` when given), with the rendered quality against ``views`` (the source's renders)
    when given."""
    header, sections = read_bitstream(path, key)
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UnverifiedSignatureWarning)          # read_bitstream warned already
        decoded = decompress(Path(path).read_bytes(), str(path), key)
    decode_seconds = time.perf_counter() - start
    groups = AttributeGroups(source.f_rest.shape[2])
    original, centres = groups.matrix(source), source.xyz
    if header['codec'] != 'float16':
        grid = quantize_positions(source.xyz, np.array(header['low'], np.float32), np.array(header['high'], np.float32))
        order = encode_positions(grid)[0]
        original, centres = original[order], centres[order]
    again = groups.matrix(decoded)
    count, scale = len(source), float(header['config']['step_scale'])
    total_bytes = Path(path).stat().st_size
    row: dict[str, Any] = dict(file=str(path), codec=header['codec'], step_scale=scale if header['codec'] != 'float16'
                               else None, gaussians=count, bytes=total_bytes,
                               bits_per_gaussian=8 * total_bytes / count,
                               encode_seconds=header.get('encode_seconds'), decode_seconds=round(decode_seconds, 3),
                               psnr=attribute_psnr(original, again), centres_psnr=attribute_psnr(centres, decoded.xyz))
    row['section_bits'] = {name: 8 * len(part) / count for name, part in sections.items()}
    row['groups'] = {}
    for name, part in groups.slices().items():
        row['groups'][name] = dict(
            psnr=attribute_psnr(original[:, part], again[:, part]),
            coded_bits=row['section_bits'].get(f'group_{name}'),
            entropy_bits=empirical_entropy(original[:, part], BASE_STEPS[name] * scale)
            if header['codec'] != 'float16' else None)
    if views is not None:
        row.update(views.quality(decoded))
    return row
