"""No NaN or infinity at a 64×64 grid (ViT/16 at 1024 px) for the bias and conditional encodings."""
from __future__ import annotations

import pytest
import torch

import vispe

CONFIGS = [dict(type='LookHere', directions='corners'), dict(type='ALiBi2D'), dict(type='PEG'),
           dict(type='iRPE', method='product', mode='contextual', on='qkv'),
           dict(type='iRPE', method='euclidean', mode='bias', on='qk', shared_head=False)]


@pytest.mark.slow
@pytest.mark.parametrize('cfg', CONFIGS, ids=str)
def test_finite_at_64x64(cfg) -> None:
    vit = vispe.create_vit('vit_tiny_patch16_224', img_size=64, patch_size=4, embed_dim=32, num_heads=4, depth=1,
                           num_classes=3, reg_tokens=1, encoding=cfg).eval()
    with torch.no_grad():
        tokens = vit.forward_features(torch.randn(1, 3, 256, 256))
    assert tokens.shape == (1, 2 + 64 * 64, 32)
    assert torch.isfinite(tokens).all()
