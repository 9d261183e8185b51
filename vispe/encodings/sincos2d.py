"""2D sin-cos absolute position embedding (MAE / DiT), recomputed for any grid."""
from __future__ import annotations

from typing import ClassVar, Sequence

import torch
import torch.nn.functional as F

from vispe.encodings.base import AbsoluteEncoding
from vispe.encodings.options import Option, Search, model_fact
from vispe.geometry import Positions, grid_coords, to_2tuple
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


RESIZE_MODES = ('extend', 'interpolate')


@ENCODINGS.register_module()
class SinCos2D(AbsoluteEncoding):
    """Fixed 2D sin-cos absolute embedding (MAE, He et al. CVPR 2022; DiT, Peebles & Xie ICCV 2023).

    The table is added to the patch tokens; prefix tokens get zero, as MAE's zero cls row. On a grid
    other than the training grid, ``resize`` (a test-time option) chooses the table:

    - ``'extend'`` (default, MAE/DiT code): the function evaluated at the patch positions 0…h−1 of the
      larger grid, so a larger grid reaches positions the model never saw;
    - ``'interpolate'``: the training grid's table resized bilinearly to the new grid, the protocol by
      which the LookHere paper (Fuller et al., NeurIPS 2024) evaluates 2D sin-cos at higher resolution.

    Tables on the integer grid are cached by grid size, device and mode; with per-image real grids
    (padded batches) ``'interpolate'`` resizes to each image's grid and leaves the padding at zero.

    Args:
        embed_dim: token width C (a multiple of 4).
        temperature: the frequency base (10000 in MAE/DiT).
        grid_size: the training grid (h, w), the source of ``'interpolate'``.
        resize: ``'extend'`` or ``'interpolate'`` (above).

    Shapes: embed (B, prefix + h·w, C) -> same; position_embedding (1|B, h·w, C).
    """

    paper: ClassVar[str] = 'MAE, He et al. CVPR 2022 / DiT, Peebles & Xie ICCV 2023'
    options: ClassVar[dict[str, Option]] = {
        'embed_dim': model_fact('embed_dim', multiple_of=4, doc='The token width C holds sin and cos for 2 axes, '
                                                               'so it must be a multiple of 4.'),
        'temperature': Option(float, gt=0, doc='The frequency base is positive (MAE and DiT use 10000); the trained '
                                               'model depends on the table, so it is fixed at build.'),
        'grid_size': model_fact('grid_size', optional=True,
                                doc="The training grid (h, w), positive: the table that 'interpolate' resizes."),
        'resize': Option(str, choices=RESIZE_MODES, test_time=True, search=Search(values=RESIZE_MODES),
                         doc="The table on another grid: 'extend' evaluates it at the new positions (MAE), "
                             "'interpolate' resizes the training grid's table bilinearly (LookHere's protocol)."),
    }

    def __init__(self, embed_dim: int, temperature: float = 10000., grid_size: int | Sequence[int] | None = None,
                 resize: str = 'extend') -> None:
        super().__init__()
        self.embed_dim = embed_dim
        self.temperature = temperature
        self.grid_size = None if grid_size is None else to_2tuple(grid_size)
        self.resize = resize

    def grid_table(self, grid_size: tuple[int, int], device: torch.device) -> torch.Tensor:
        """(h·w, C) float32 table of an h×w grid in the current ``resize`` mode."""
        if self.resize == 'extend' or tuple(grid_size) == self.grid_size:
            return sincos_2d_embedding(grid_coords(grid_size, device=device), self.embed_dim,
                                       self.temperature)
        if self.grid_size is None:
            raise ValueError("SinCos2D resize='interpolate' resizes the training grid's table, but this encoding "
                             'was built without grid_size: build it inside a model, or pass grid_size=(h, w).')
        source = sincos_2d_embedding(grid_coords(self.grid_size, device=device), self.embed_dim,
                                     self.temperature)
        source = source.reshape(1, *self.grid_size, -1).permute(0, 3, 1, 2)
        resized = F.interpolate(source, size=tuple(grid_size), mode='bilinear', align_corners=False)
        return resized.permute(0, 2, 3, 1).reshape(-1, self.embed_dim)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(1, h·w, C) or (B, h·w, C) float32 table for the patches of ``pos``."""
        if not pos.has_default_coords:
            coords = pos.patch_coords()
            table = sincos_2d_embedding(coords, self.embed_dim, self.temperature)
            return table if coords.ndim == 3 else table[None]
        table = self.cached_table('grid', pos, lambda: self.grid_table(pos.grid_size, pos.device)[None],
                                  across_forwards=True)
        sizes = pos.real_grid_sizes()
        if self.resize == 'extend' or sizes is None or bool((sizes == sizes.new_tensor(pos.grid_size)).all()):
            return table
        return self.per_image(sizes, pos)

    def per_image(self, sizes: torch.Tensor, pos: Positions) -> torch.Tensor:
        """(B, h·w, C): each image's table resized to its real grid (``sizes`` (B, 2)) in the top-left of the
        padded grid, zeros on padding; one table per distinct size."""
        height, width = pos.grid_size
        table = torch.zeros(len(sizes), height, width, self.embed_dim, device=pos.device)
        for rows, cols in torch.unique(sizes, dim=0).tolist():
            which = (sizes == sizes.new_tensor([rows, cols])).all(1)
            resized = self.cached_table('grid', pos, lambda: self.grid_table((rows, cols), pos.device),
                                        across_forwards=True, key=(rows, cols))
            table[which, :rows, :cols] = resized.reshape(rows, cols, -1)
        return table.flatten(1, 2)

    def extra_repr(self) -> str:
        return f'embed_dim={self.embed_dim}, temperature={self.temperature}, resize={self.resize!r}'
