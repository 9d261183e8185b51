"""Padding: every encoding in DETR's encoder sees each image's real grid, and padded cells change nothing.

A feature map padded to a larger size (with its mask) must give, on the real tokens, the encoder output of
the unpadded map. This holds for absolute encodings only if they use each image's real extent (DETR's sine
normalises by it, LearnedAPE resamples to it, ComRoPE / Fourier normalise by it) and for relative ones only
if padded keys are never attended.
"""
from __future__ import annotations

import math

import pytest
import torch

import vispe
from vispe.encodings import detr_sine_embedding
from vispe.models.detr import DETREncoder

ENCODINGS = [
    dict(type='DETRSine'), dict(type='RoPEAxial'), dict(type='RoPEMixed'),
    dict(type='iRPE', method='product', mode='contextual', on='k'),
    dict(type='iRPE', method='cross', mode='contextual', on='qkv'),
    dict(type='LookHere'), dict(type='ALiBi2D'), dict(type='SinCos2D'), dict(type='LearnedAPE'),
    dict(type='FourierFeatures', normalize=True), dict(type='ComRoPE'), dict(type='ComRoPE', variant='LD', block_size=4),
    dict(type='PEG'), dict(type='RPE2D', base=dict(type='RoPEAxial'), max_grid=16), dict(type='NoPE'),
]


@pytest.mark.parametrize('encoding', ENCODINGS, ids=lambda cfg: '-'.join(str(v) for v in cfg.values()))
def test_padded_batch_equals_each_image_alone(encoding) -> None:
    encoder = DETREncoder(embed_dim=32, depth=2, num_heads=4, mlp_dim=64, dropout=0.0, encoding=encoding,
                          grid_size=6, stride=16).eval()
    sizes = [(5, 6), (3, 4)]
    images = [torch.randn(1, 32, h, w) for h, w in sizes]
    padded = torch.randn(2, 32, 7, 8) * 3
    mask = torch.zeros(2, 7, 8, dtype=torch.bool)
    for index, ((h, w), image) in enumerate(zip(sizes, images)):
        padded[index, :, :h, :w] = image[0]
        mask[index, :h, :w] = True
    with torch.no_grad():
        batch = encoder(padded, mask).reshape(2, 7, 8, 32)
        for index, ((h, w), image) in enumerate(zip(sizes, images)):
            alone = encoder(image).reshape(h, w, 32)
            torch.testing.assert_close(batch[index, :h, :w], alone, atol=2e-5, rtol=1e-5)


def test_detr_sine_golden_values() -> None:
    """dim 8: F = 4 features per axis, τ = (1, 1, 100, 100); y then x, each [sin, cos, sin, cos]."""
    table = detr_sine_embedding(torch.ones(1, 2, 3, dtype=torch.bool), 8).reshape(2, 3, 8)
    y, x = 2 * math.pi * 2 / 2, 2 * math.pi * 1 / 3  # cell (row 1, col 0): cumulative 2 of 2 rows, 1 of 3 columns
    expected = [math.sin(y), math.cos(y), math.sin(y / 100), math.cos(y / 100),
                math.sin(x), math.cos(x), math.sin(x / 100), math.cos(x / 100)]
    torch.testing.assert_close(table[1, 0], torch.tensor(expected), atol=1e-5, rtol=0)


def test_detr_sine_normalises_by_the_real_extent() -> None:
    full = detr_sine_embedding(torch.ones(1, 2, 2, dtype=torch.bool), 16).reshape(2, 2, 16)
    mask = torch.zeros(1, 4, 5, dtype=torch.bool)
    mask[:, :2, :2] = True
    padded = detr_sine_embedding(mask, 16).reshape(4, 5, 16)
    torch.testing.assert_close(padded[:2, :2], full)


def registered_examples() -> list[dict]:
    return [dict(type=info.name, **options) for info in vispe.list_encodings(image_only=True)
            for options in vispe.registry.ENCODINGS.get(info.name).examples]


@pytest.mark.parametrize('encoding', registered_examples(), ids=lambda cfg: '-'.join(str(v) for v in cfg.values()))
def test_every_registered_encoding_plugs_into_the_encoder(encoding) -> None:
    encoder = DETREncoder(embed_dim=32, depth=2, num_heads=4, mlp_dim=64, dropout=0.0, encoding=encoding,
                          grid_size=6, stride=16).eval()
    mask = torch.ones(2, 7, 8, dtype=torch.bool)
    mask[1, 5:] = False
    with torch.no_grad():
        memory = encoder(torch.randn(2, 32, 7, 8), mask)
    assert memory.shape == (2, 56, 32) and torch.isfinite(memory).all()
