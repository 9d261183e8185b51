"""What an encoding does, without training data: similarity of absolute tables, logits of relative ones."""
from __future__ import annotations

from typing import Sequence

import torch
import torch.nn.functional as F

from vispe.encodings import PositionEncoding
from vispe.geometry import Positions


@torch.no_grad()
def embedding_similarity(encoding: PositionEncoding, grid_size: Sequence[int], query: int,
                         embed_dim: int) -> torch.Tensor:
    """Cosine similarity between the embedding added at patch ``query`` and at every patch, (h, w).

    For encodings with a ``position_embedding`` (LearnedAPE, SinCos2D, FourierFeatures, ...) that depends on the
    positions alone (LOOPE's depends on the image too: refused).
    """
    if 'pixels' in encoding.required_geometry():
        raise ValueError(f'{type(encoding).__name__}\'s embedding depends on the image as well as the position, so it '
                         f'has no map of its own; look at it in a model on images (vispe vis-attention).')
    pos = Positions(tuple(grid_size))
    encoding.prepare(pos)
    table = encoding.position_embedding(pos)
    if table is None:
        raise ValueError(f'{type(encoding).__name__} has no position_embedding to compare between patches; the '
                         f'similarity map is for absolute encodings (LearnedAPE, SinCos2D, FourierFeatures, ...).')
    table = table[0].expand(pos.num_patches, embed_dim)
    return F.cosine_similarity(table[query][None], table, dim=-1).reshape(*grid_size)


@torch.no_grad()
def relative_logits(encoding: PositionEncoding, grid_size: Sequence[int], query: int, num_heads: int,
                    head_dim: int, layer_idx: int = 0, seed: int = 0) -> torch.Tensor:
    """Attention logits of patch ``query`` to every patch when every token has the same content, (heads, h, w).

    The same random q and k vector sit at every position, so all variation comes from the encoding:
    rotations (RoPE, ComRoPE) and logit biases (iRPE, LookHere, ALiBi2D). Masked keys show as −inf.
    """
    pos = Positions(tuple(grid_size))
    encoding.prepare(pos)
    generator = torch.Generator().manual_seed(seed)
    q = torch.randn(1, num_heads, 1, head_dim, generator=generator).expand(1, num_heads, pos.num_patches, head_dim)
    k = torch.randn(1, num_heads, 1, head_dim, generator=generator).expand(1, num_heads, pos.num_patches, head_dim)
    q, k = encoding.rotate(q.contiguous(), k.contiguous(), pos, pos, layer_idx)
    logits = (q @ k.transpose(-1, -2)) * head_dim ** -0.5
    bias = encoding.logits_bias(q, k, pos, pos, layer_idx)
    if bias is not None:
        logits = logits + bias
    logits = logits.masked_fill(logits < -1e30, float('-inf'))
    return logits[0, :, query].reshape(num_heads, *grid_size)
