"""Learnable Fourier features + MLP position embedding (Li et al., NeurIPS 2021)."""
from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from vispe.encodings.base import AbsoluteEncoding
from vispe.encodings.options import Option, model_facts
from vispe.geometry import Positions
from vispe.geometry.device_constants import device_constant
from vispe.registry import ENCODINGS


@ENCODINGS.register_module()
class FourierFeatures(AbsoluteEncoding):
    """Learnable Fourier features for multi-dimensional positions (Li et al., NeurIPS 2021, Algorithm 1).

    For a patch-centre position p = (row + 0.5, col + 0.5) (patch units; divided by (h, w) when
    ``normalize``)::

        F(p)  = [cos(p W_rᵀ), sin(p W_rᵀ)] / sqrt(fourier_dim)        W_r: (fourier_dim/2, 2)
        PE(p) = W_2 · GELU(W_1 F(p) + b_1) + b_2                       added to the patch tokens

    W_r is drawn from N(0, γ⁻²), i.e. std 1/γ, as the paper's Algorithm 1 states (the unofficial
    port draws std γ⁻²). Prefix tokens get no embedding. The authors released no code.

    Args:
        embed_dim: token width C.
        fourier_dim: number of Fourier features F (even); defaults to ``embed_dim``.
        hidden_dim: MLP hidden width.
        gamma: γ, the inverse std of W_r.
        normalize: normalise positions to (0, 1) by the grid size (interpolation at a new
            resolution) instead of patch units (extrapolation).

    Shapes: embed (B, prefix + h·w, C) -> same; position_embedding (1|B, h·w, C).
    """

    paper: ClassVar[str] = 'Li et al., NeurIPS 2021'
    options: ClassVar[dict[str, Option]] = {
        **model_facts('embed_dim'),
        'fourier_dim': Option(int, ge=1, multiple_of=2, optional=True,
                              doc='The number of Fourier features F (cos and sin halves, so even); None takes '
                                  'embed_dim. It shapes W_r and the MLP, so it is fixed at build.'),
        'hidden_dim': Option(int, ge=1, doc='The MLP hidden width (32 by default); it shapes the MLP.'),
        'gamma': Option(float, gt=0, doc='W_r is drawn with std 1/gamma, so gamma is positive (10 by default); '
                                         'used only at initialisation.'),
        'normalize': Option(bool, doc='Whether positions are divided by the grid size; the MLP is trained on one '
                                      'range, so it is fixed at build.'),
    }

    def __init__(
            self,
            embed_dim: int,
            fourier_dim: int | None = None,
            hidden_dim: int = 32,
            gamma: float = 10.0,
            normalize: bool = False,
    ) -> None:
        super().__init__()
        fourier_dim = embed_dim if fourier_dim is None else fourier_dim
        if fourier_dim % 2 != 0:
            raise ValueError(f'FourierFeatures takes fourier_dim = embed_dim by default, which must then be even (cos '
                             f'and sin halves); got embed_dim={embed_dim}. Pass an even fourier_dim.')
        self.fourier_dim = fourier_dim
        self.gamma = gamma
        self.normalize = normalize
        self.freqs = nn.Linear(2, fourier_dim // 2, bias=False)
        self.mlp = nn.Sequential(nn.Linear(fourier_dim, hidden_dim), nn.GELU(), nn.Linear(hidden_dim, embed_dim))
        nn.init.normal_(self.freqs.weight, std=1.0 / gamma)

    def positions(self, pos: Positions) -> torch.Tensor:
        """(N, 2) or (B, N, 2) (row, col) patch centres fed to the features."""
        centres = pos.patch_coords() + 0.5
        if self.normalize:
            sizes = pos.real_grid_sizes()
            extent = device_constant(pos.grid_size, centres) if sizes is None else sizes[:, None, :].to(centres.dtype)
            centres = centres / extent
        return centres

    def encode(self, positions: torch.Tensor) -> torch.Tensor:
        """PE for (..., 2) positions -> (..., C)."""
        projected = self.freqs(positions.to(self.freqs.weight.dtype))
        features = torch.cat([projected.cos(), projected.sin()], dim=-1) / math.sqrt(self.fourier_dim)
        return self.mlp(features)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        embedding = self.encode(self.positions(pos))
        return embedding if embedding.ndim == 3 else embedding[None]

    def extra_repr(self) -> str:
        return f'fourier_dim={self.fourier_dim}, gamma={self.gamma}, normalize={self.normalize}'
