"""Gaussian entropy models of quantised attributes (HAC / TC-GS ``Entropy_gaussian``) and their exact coding with
constriction's ANS coder.

A value x quantised with step Q is coded as the integer k = round(x / Q) under a Gaussian N(μ, σ²) integrated over
its bin: P(k) = Φ((kQ + Q/2 − μ)/σ) − Φ((kQ − Q/2 − μ)/σ), so its cost is −log₂ P(k) bits (clamped at
P ≥ 1e-6 in training, as the reference). For the coder the model is expressed in symbol units (mean μ/Q, std σ/Q)
and rounded to a grid (:func:`coding_parameters`): the decoder recomputes the parameters from its own float maths,
and rounding makes tiny floating-point differences (another thread count, another machine) land on the same grid
point, so the coder's probabilities agree bit for bit.
"""
from __future__ import annotations

import numpy as np
import torch

from vispe.extras import import_extra

__all__ = ['MEAN_GRID', 'STD_GRID', 'coding_parameters', 'decode_symbols', 'encode_symbols', 'gaussian_bits']

MEAN_GRID = 64          # symbol-unit means on a 1/64 grid
STD_GRID = 16           # symbol-unit standard deviations on a 2^(1/16) grid
STD_RANGE = (2.0 ** -3, 2.0 ** 14)


def gaussian_bits(x: torch.Tensor, mean: torch.Tensor, scale: torch.Tensor, step: torch.Tensor | float,
                  min_probability: float = 1e-6, x_mean: torch.Tensor | None = None) -> torch.Tensor:
    """Bits of each (quantised or noisy) value ``x`` under N(mean, scale²) integrated over [x − Q/2, x + Q/2]:
    ``−log₂ max(|Φ(upper) − Φ(lower)|, min_probability)``, elementwise, as the reference's ``Entropy_gaussian``:
    x is first clamped to ``x_mean ± 15000·Q`` (``x_mean`` the mean of ``x`` unless given) and the scale at 1e-9.
    The floor passes no gradient below it, as the reference's ``Low_bound``."""
    step = torch.as_tensor(step, dtype=x.dtype, device=x.device)
    centre = (x.mean() if x_mean is None else x_mean).detach()
    x = torch.minimum(torch.maximum(x, (centre - 15_000 * step).detach()), (centre + 15_000 * step).detach())
    scale = scale.clamp_min(1e-9)
    upper = torch.special.ndtr((x + step / 2 - mean) / scale)
    lower = torch.special.ndtr((x - step / 2 - mean) / scale)
    return -torch.log2((upper - lower).abs().clamp_min(min_probability))


def coding_parameters(mean: np.ndarray, scale: np.ndarray, step: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The coder's (means, stds) in symbol units, float64, on the grids: mean/Q rounded to 1/64, std/Q to the
    nearest power of 2^(1/16) within [1/8, 2^14]."""
    symbol_mean = np.rint(np.asarray(mean, np.float64) / step * MEAN_GRID) / MEAN_GRID
    log_std = np.log2(np.clip(np.asarray(scale, np.float64) / step, *STD_RANGE))
    return symbol_mean, np.exp2(np.rint(log_std * STD_GRID) / STD_GRID)


def _model(low: int, high: int):
    constriction = import_extra('constriction', 'entropy coding of Gaussian attributes')
    return constriction.stream.model.QuantizedGaussian(int(low), int(high))


def encode_symbols(columns: list[tuple[np.ndarray, np.ndarray, np.ndarray, int, int]]) -> np.ndarray:
    """ANS-code several columns of integer symbols, each ``(symbols, means, stds, low, high)`` with symbols in
    [low, high] (a column with low = high costs nothing); returns the compressed words (uint32). Decode with
    :func:`decode_symbols` and the same parameters, in the same column order."""
    constriction = import_extra('constriction', 'entropy coding of Gaussian attributes')
    coder = constriction.stream.stack.AnsCoder()
    for symbols, means, stds, low, high in reversed(columns):
        if len(symbols) and (symbols.min() < low or symbols.max() > high):
            raise ValueError(f'symbols span [{symbols.min()}, {symbols.max()}] outside the model range '
                             f'[{low}, {high}].')
        if len(symbols) == 0 or low == high:
            continue                                            # nothing to code: every symbol is ``low``
        coder.encode_reverse(symbols.astype(np.int32), _model(low, high), np.ascontiguousarray(means, np.float64),
                             np.ascontiguousarray(stds, np.float64))
    return coder.get_compressed()


def decode_symbols(words: np.ndarray, columns: list[tuple[np.ndarray, np.ndarray, int, int]]) -> list[np.ndarray]:
    """Inverse of :func:`encode_symbols`: ``columns`` are ``(means, stds, low, high)``; returns the symbols."""
    constriction = import_extra('constriction', 'entropy coding of Gaussian attributes')
    coder = constriction.stream.stack.AnsCoder(np.ascontiguousarray(words, dtype=np.uint32))
    out = []
    for means, stds, low, high in columns:
        if len(means) == 0 or low == high:
            out.append(np.full(len(means), low, np.int64))
            continue
        out.append(coder.decode(_model(low, high), np.ascontiguousarray(means, np.float64),
                                np.ascontiguousarray(stds, np.float64)).astype(np.int64))
    return out
