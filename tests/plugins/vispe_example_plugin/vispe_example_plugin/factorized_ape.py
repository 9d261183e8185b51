"""A factorized learned position embedding, registered from outside vispe."""
from __future__ import annotations

import torch
from torch import nn

from vispe.encodings import AbsoluteEncoding
from vispe.geometry import Positions
from vispe.registry import ENCODINGS


@ENCODINGS.register_module()
class FactorizedAPE(AbsoluteEncoding):
    """A learned row table plus a learned column table, added to the patch tokens.

    Grids larger than the tables reuse the last row/column (clamped indices). As an absolute encoding it writes
    ``position_embedding`` (the table of the positioned tokens); ``embed`` adds it (vispe's AbsoluteEncoding), and
    decoders read it without tokens.

    Args:
        embed_dim: token width C (filled in by the model).
        max_grid: (rows, cols) of the tables.
    """

    paper = 'example plugin'

    def __init__(self, embed_dim: int, max_grid: tuple[int, int] = (32, 32)) -> None:
        super().__init__()
        self.rows = nn.Parameter(torch.randn(max_grid[0], embed_dim) * 0.02)
        self.cols = nn.Parameter(torch.randn(max_grid[1], embed_dim) * 0.02)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(1, h·w, C): row table + column table at each patch."""
        coords = pos.patch_coords().long()
        rows = coords[..., 0].clamp(max=self.rows.shape[0] - 1)
        cols = coords[..., 1].clamp(max=self.cols.shape[0] - 1)
        table = self.rows[rows] + self.cols[cols]
        return table if table.ndim == 3 else table[None]
