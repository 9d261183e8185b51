"""A factorized learned position embedding, registered from outside vispe."""
from __future__ import annotations

import torch
from torch import nn

from vispe.encodings import PositionEncoding
from vispe.geometry import Positions
from vispe.registry import ENCODINGS


@ENCODINGS.register_module()
class FactorizedAPE(PositionEncoding):
    """A learned row table plus a learned column table, added to the patch tokens.

    Grids larger than the tables reuse the last row/column (clamped indices).

    Args:
        embed_dim: token width C (filled in by the model).
        max_grid: (rows, cols) of the tables.
    """

    family = 'absolute'
    paper = 'example plugin'

    def __init__(self, embed_dim: int, max_grid: tuple[int, int] = (32, 32)) -> None:
        super().__init__()
        self.rows = nn.Parameter(torch.randn(max_grid[0], embed_dim) * 0.02)
        self.cols = nn.Parameter(torch.randn(max_grid[1], embed_dim) * 0.02)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        coords = pos.patch_coords().long()
        rows = coords[:, 0].clamp(max=self.rows.shape[0] - 1)
        cols = coords[:, 1].clamp(max=self.cols.shape[0] - 1)
        table = self.rows[rows] + self.cols[cols]
        prefix, patches = x[:, :pos.num_prefix_tokens], x[:, pos.num_prefix_tokens:]
        return torch.cat([prefix, patches + table], dim=1)
