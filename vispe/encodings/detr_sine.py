"""DETR's 2D sine position embedding: normalised cumulative coordinates that respect the padding mask."""
from __future__ import annotations

import math
from typing import ClassVar

import torch

from vispe.encodings.base import AbsoluteEncoding
from vispe.encodings.options import Option, model_fact
from vispe.geometry import Positions
from vispe.registry import ENCODINGS


def detr_sine_embedding(valid_mask: torch.Tensor, dim: int, temperature: float = 10000., normalize: bool = True,
                        scale: float = 2 * math.pi, eps: float = 1e-6) -> torch.Tensor:
    """DETR's ``PositionEmbeddingSine`` as a function of the padding mask.

    Each real cell's position is the count of real cells above it (y) and to its left (x), 1-based;
    with ``normalize`` it is divided by the image's real height / width (the count in the last
    row / column, so padding does not stretch it) and multiplied by ``scale``. With F = dim/2 features
    per axis and τ_j = temperature^(2⌊j/2⌋/F), feature j of an axis is sin(p/τ_j) for even j and
    cos(p/τ_j) for odd j (interleaved); the y features come first, then the x features.

    Args:
        valid_mask: (B, h, w) bool, True on real cells.
        dim: output width C (even; DETR uses the transformer width, F = C/2 = 128).

    Returns:
        (B, h·w, C) float32.
    """
    if dim % 2:
        raise ValueError(f'DETRSine needs an even embedding width (y and x halves); got {dim}.')
    features = dim // 2
    real = valid_mask.to(torch.float32)
    y = real.cumsum(1)
    x = real.cumsum(2)
    if normalize:
        y = y / (y[:, -1:, :] + eps) * scale
        x = x / (x[:, :, -1:] + eps) * scale
    steps = torch.arange(features, dtype=torch.float32, device=valid_mask.device)
    inverse = temperature ** (2 * torch.div(steps, 2, rounding_mode='floor') / features)

    def axis(values: torch.Tensor) -> torch.Tensor:
        angles = values[..., None] / inverse
        return torch.stack([angles[..., 0::2].sin(), angles[..., 1::2].cos()], dim=-1).flatten(-2)
    return torch.cat([axis(y), axis(x)], dim=-1).flatten(1, 2)


@ENCODINGS.register_module()
class DETRSine(AbsoluteEncoding):
    """The 2D sine embedding of DETR (Carion et al., ECCV 2020; ``PositionEmbeddingSine``).

    Positions come from ``pos.valid_mask`` when the batch is padded (each image's real grid, as DETR
    does), else from the whole grid. In a ViT the table is added to the patch tokens once (prefix tokens
    get zero); vispe's DETR encoder adds it to the queries and keys of every layer, as DETR does.

    Args:
        embed_dim: token width C (even).
        temperature: frequency base (10000).
        normalize: divide by the real extent and scale to [0, ``scale``] (True in DETR).
        scale: 2π in DETR.

    Shapes: embed (B, prefix + h·w, C) -> same.
    """

    paper: ClassVar[str] = 'DETR, Carion et al. ECCV 2020'
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim', multiple_of=2, doc='The token width C holds y and x halves, so it must '
                                                               'be even.'),
        'temperature': Option(float, gt=0, doc='The frequency base is positive (DETR uses 10000); the trained model '
                                               'depends on the table, so it is fixed at build.'),
        'normalize': Option(bool, doc='Whether positions are divided by the real extent (True in DETR); the trained '
                                      'model depends on it, so it is fixed at build.'),
        'scale': Option(float, gt=0, doc='The extent of normalised positions is positive (DETR uses 2*pi); the '
                                         'trained model depends on it, so it is fixed at build.'),
    }

    def __init__(self, embed_dim: int, temperature: float = 10000., normalize: bool = True,
                 scale: float = 2 * math.pi) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.temperature = temperature
        self.normalize = normalize
        self.scale = scale

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(B, h·w, C) float32: the embedding of each image's real grid (``pos.valid_mask``)."""
        self.check_sequence(pos, pos.num_prefix_tokens)
        mask = pos.valid_mask
        if mask is None:
            mask = torch.ones(1, *pos.grid_size, dtype=torch.bool, device=pos.device)
        return self.cached_table('sine', pos, lambda: detr_sine_embedding(
            mask, self.embed_dim, self.temperature, self.normalize, self.scale))

    def extra_repr(self) -> str:
        return f'embed_dim={self.embed_dim}, temperature={self.temperature}, normalize={self.normalize}'
