"""2D sin-cos absolute position embedding (MAE / DiT), recomputed for any grid."""
from __future__ import annotations

from typing import ClassVar

import torch

from vispe.encodings.base import PositionEncoding, TableCache
from vispe.encodings.options import Option, model_fact
from vispe.geometry import Positions
from vispe.registry import ENCODINGS


def sincos_2d_embedding(coords: torch.Tensor, dim: int, temperature: float = 10000.) -> torch.Tensor:
    """The MAE/DiT 2D sin-cos table at arbitrary coordinates.

    With ω_k = temperature^(-k/(dim/4)), k = 0..dim/4-1, a position (row, col) maps to
    ``[sin(col·ω), cos(col·ω), sin(row·ω), cos(row·ω)]``: the first half encodes x (the column),
    as MAE's ``get_2d_sincos_pos_embed`` does (its ``meshgrid(grid_w, grid_h)`` puts w first).
    Computed in float64, returned in float32.

    Args:
        coords: (..., 2) float (row, col).
        dim: output width, a multiple of 4.

    Returns:
        (..., dim) float32.
    """
    if dim % 4 != 0:
        raise ValueError(f'SinCos2D needs an embedding width divisible by 4 (sin and cos for 2 axes); got {dim}.')
    quarter = dim // 4
    omega = 1.0 / temperature ** (torch.arange(quarter, device=coords.device, dtype=torch.float64) / quarter)
    rows, cols = coords.double().unbind(-1)
    angles_x = cols[..., None] * omega
    angles_y = rows[..., None] * omega
    table = torch.cat([angles_x.sin(), angles_x.cos(), angles_y.sin(), angles_y.cos()], dim=-1)
    return table.float()


@ENCODINGS.register_module()
class SinCos2D(PositionEncoding):
    """Fixed 2D sin-cos absolute embedding (MAE, He et al. CVPR 2022; DiT, Peebles & Xie ICCV 2023).

    The table is evaluated at the patch positions of the current grid (no interpolation) and added to
    the patch tokens; prefix tokens get zero, as MAE's zero cls row. Tables on the integer grid are
    cached by grid size and device.

    Args:
        embed_dim: token width C (a multiple of 4).
        temperature: the frequency base (10000 in MAE/DiT).

    Shapes: embed (B, prefix + h·w, C) -> same.
    """

    family: ClassVar[str] = 'absolute'
    paper: ClassVar[str] = 'MAE, He et al. CVPR 2022 / DiT, Peebles & Xie ICCV 2023'
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim', multiple_of=4, doc='The token width C holds sin and cos for 2 axes, '
                                                               'so it must be a multiple of 4.'),
        'temperature': Option(float, gt=0, doc='The frequency base is positive (MAE and DiT use 10000); the trained '
                                               'model depends on the table, so it is fixed at build.'),
    }

    def __init__(self, embed_dim: int, temperature: float = 10000.) -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.temperature = temperature
        self._cache = TableCache()

    def table(self, pos: Positions) -> torch.Tensor:
        """(h·w, C) or (B, h·w, C) float32 table for the patches of ``pos``."""
        if pos.has_default_coords:
            return self._cache.get(
                (pos.grid_size, pos.device),
                lambda: sincos_2d_embedding(pos.patch_coords(), self.embed_dim, self.temperature))
        return sincos_2d_embedding(pos.patch_coords(), self.embed_dim, self.temperature)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        prefix, patches = x[:, :pos.num_prefix_tokens], x[:, pos.num_prefix_tokens:]
        return torch.cat([prefix, patches + self.table(pos).to(x.dtype)], dim=1)

    def extra_repr(self) -> str:
        return f'embed_dim={self.embed_dim}, temperature={self.temperature}'
