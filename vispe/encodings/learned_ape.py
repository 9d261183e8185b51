"""Learned absolute position embedding, as timm's ViT has it, resampled bicubically to a new grid."""
from __future__ import annotations

import math
from typing import ClassVar, Mapping, Sequence

import torch
from timm.layers import resample_abs_pos_embed, trunc_normal_
import torch.nn.functional as F
from torch import nn

from vispe.encodings.base import PositionEncoding, add_to_positioned
from vispe.encodings.options import Option, Search, model_facts
from vispe.geometry import Positions, to_2tuple
from vispe.geometry.checks import checking_values
from vispe.registry import ENCODINGS

# F.interpolate modes for a 2D grid, and those that can antialias.
INTERPOLATIONS = ('nearest', 'nearest-exact', 'bilinear', 'bicubic', 'area')
ANTIALIASED = ('bilinear', 'bicubic')


def square_grid(num_patches: int, key: str) -> tuple[int, int]:
    """The (side, side) grid of a table of ``num_patches`` rows, or an error: a foreign table carries no grid size."""
    side = math.isqrt(num_patches)
    if side * side != num_patches:
        raise ValueError(f'{key}: {num_patches} patch rows is not a square grid, so the grid it was trained on cannot '
                         f'be inferred for resampling.')
    return side, side


@ENCODINGS.register_module()
class LearnedAPE(PositionEncoding):
    """Learned absolute position embedding (Dosovitskiy et al., ICLR 2021; timm ``VisionTransformer``).

    A table ``pos_embed`` of shape (1, [prefix +] h·w, C) for the training grid h×w is added to the
    tokens. At another grid the patch part is resampled with timm's ``resample_abs_pos_embed``
    (bicubic, antialiased, ``align_corners=False``), exactly as timm's ``dynamic_img_size`` path does;
    the prefix rows are kept. In a padded batch (a ``valid_mask``) each image's table is resampled to its
    own real grid, without reading the sizes back to the host (:meth:`per_image`), and is zero on
    padding. Explicit integer positions (RPE-2D) read their cells of the table
    instead. The parameter is saved as ``pos_embed``, timm's name, so timm ViT checkpoints load
    unchanged.

    Args:
        embed_dim: token width C.
        grid_size: training grid (h, w).
        num_prefix_tokens: cls + register tokens of the model.
        no_embed_class: the table has no prefix rows and is added to patches only (DeiT-III, rope-vit
            "+APE" variants); otherwise it has one row per prefix token (original ViT/DeiT).
        interpolation: ``F.interpolate`` mode for resampling (test-time).
        antialias: antialias when downsampling with a bilinear or bicubic ``interpolation`` (test-time;
            the other modes have no antialiasing).
    """

    family: ClassVar[str] = 'absolute'
    paper: ClassVar[str] = 'Dosovitskiy et al., ICLR 2021 (ViT); timm'
    timm_names: ClassVar[dict[str, str]] = {'pos_embed': 'pos_embed'}
    options: ClassVar[dict[str, Option]] = {
        **model_facts('embed_dim', 'grid_size', 'num_prefix_tokens'),
        'no_embed_class': Option(bool, doc='Whether the table has no prefix rows (DeiT-III); it shapes the table.'),
        'interpolation': Option(str, choices=INTERPOLATIONS, test_time=True,
                                search=Search(values=('bicubic', 'bilinear', 'nearest')),
                                doc='How the table is resampled to another grid (timm: bicubic); no parameter '
                                    'depends on it, so it may change at test time.'),
        'antialias': Option(bool, test_time=True,
                            doc='Antialias when resampling down with bilinear or bicubic (timm: True); no '
                                'parameter depends on it, so it may change at test time.'),
    }

    def __init__(
            self,
            embed_dim: int,
            grid_size: int | Sequence[int],
            num_prefix_tokens: int = 1,
            no_embed_class: bool = False,
            interpolation: str = 'bicubic',
            antialias: bool = True,
    ) -> None:
        super().__init__()
        self.grid_size = to_2tuple(grid_size)
        self.num_prefix_tokens = num_prefix_tokens
        self.no_embed_class = no_embed_class
        self.interpolation = interpolation
        self.antialias = antialias
        table_prefix = 0 if no_embed_class else num_prefix_tokens
        length = table_prefix + self.grid_size[0] * self.grid_size[1]
        self.pos_embed = nn.Parameter(torch.zeros(1, length, embed_dim))
        trunc_normal_(self.pos_embed, std=.02)

    @property
    def table_prefix_tokens(self) -> int:
        return 0 if self.no_embed_class else self.num_prefix_tokens

    def resampled(self, grid_size: Sequence[int]) -> torch.Tensor:
        """The table for ``grid_size`` (the parameter itself at the training grid)."""
        return resample_abs_pos_embed(
            self.pos_embed,
            new_size=list(grid_size),
            old_size=list(self.grid_size),
            num_prefix_tokens=self.table_prefix_tokens,
            interpolation=self.interpolation,
            antialias=self.antialias and self.interpolation in ANTIALIASED,
        )

    def axis_resamplers(self, length: int, old_length: int, device: torch.device) -> torch.Tensor:
        """(length, length, old_length) float32: entry n − 1 the matrix that resamples ``old_length`` cells of one
        axis to n ≤ ``length`` (this encoding's mode and antialiasing, as :meth:`resampled` does it), zero rows
        below n. Interpolating is linear and separable, so each is ``F.interpolate`` of the identity, along the
        width (torch's antialiased kernels give another answer along a height whose width is 1)."""
        identity = torch.eye(old_length, device=device)[:, None, None, :]           # one basis row per image
        matrices = torch.zeros(length, length, old_length, device=device)
        for size in range(1, length + 1):
            resampled = F.interpolate(identity, size=(1, size), mode=self.interpolation,
                                      antialias=self.antialias and self.interpolation in ANTIALIASED)
            matrices[size - 1, :size] = resampled[:, 0, 0, :].T
        return matrices

    def per_image(self, sizes: torch.Tensor, pos: Positions) -> torch.Tensor:
        """(B, [prefix +] h·w, C): each image's table resampled to its real grid (``sizes`` (B, 2), on the device)
        and placed in the top-left of the padded grid (zeros on padding). Each image picks its row and column
        resampling matrices by its size on the device, so nothing is read back to the host; the matrices depend
        only on the padded grid and are kept across forwards."""
        prefix = self.table_prefix_tokens
        height, width = pos.grid_size
        rows, cols = self.cached_table(
            'axis_resamplers', pos, across_forwards=True, key=tuple(self.grid_size),
            build=lambda: (self.axis_resamplers(height, self.grid_size[0], pos.device),
                           self.axis_resamplers(width, self.grid_size[1], pos.device)))
        cells = self.pos_embed[0, prefix:].float().reshape(*self.grid_size, -1)
        grid = torch.einsum('bhi,ijc,bwj->bhwc', rows[sizes[:, 0] - 1], cells, cols[sizes[:, 1] - 1])
        grid = grid.flatten(1, 2).to(self.pos_embed.dtype)
        return torch.cat([self.pos_embed[:, :prefix].expand(len(sizes), -1, -1), grid], dim=1)

    def gathered(self, coords: torch.Tensor) -> torch.Tensor:
        """Rows of the table at explicit integer (row, col) cells of its grid (RPE-2D positions).

        Args:
            coords: (N, 2) or (B, N, 2) integer-valued (row, col) inside ``grid_size``.

        Returns:
            (1 | B, [prefix +] N, C): the prefix rows (if any) followed by the gathered cells.
        """
        cells = coords.round().long()
        rows, cols = cells[..., 0], cells[..., 1]
        if checking_values(coords):
            self.check_cells(coords, cells)
        prefix = self.table_prefix_tokens
        table = self.pos_embed[0, prefix + rows * self.grid_size[1] + cols]
        if table.ndim == 2:
            table = table.unsqueeze(0)
        if prefix:
            table = torch.cat([self.pos_embed[:, :prefix].expand(table.shape[0], -1, -1), table], dim=1)
        return table

    def check_cells(self, coords: torch.Tensor, cells: torch.Tensor) -> None:
        """Refuse explicit positions off the integer cells or outside the table. Where
        :func:`~vispe.geometry.checks.checking_values` allows only: the checks read the values on the host, which a
        traced graph cannot and a GPU should not wait for (RPE-2D, the one caller, makes integer cells in range)."""
        if not torch.equal(cells.to(coords.dtype), coords):
            raise ValueError('LearnedAPE reads explicit positions only at integer cells of its table; use an '
                             'encoding that evaluates coordinates (SinCos2D, FourierFeatures, RoPE) for others.')
        rows, cols = cells[..., 0], cells[..., 1]
        if rows.min() < 0 or cols.min() < 0 or rows.max() >= self.grid_size[0] or cols.max() >= self.grid_size[1]:
            raise ValueError(f'Positions reach row {int(rows.max())}, column {int(cols.max())}, outside the '
                             f'{self.grid_size} table of LearnedAPE: build it with a larger grid_size.')

    def table(self, pos: Positions) -> torch.Tensor:
        """(1|B, [prefix +] N, C): this forward's table, its prefix rows first when it has them."""
        self.check_sequence(pos, self.num_prefix_tokens, integer_grid=False)
        sizes = pos.real_grid_sizes()
        if pos.has_default_coords and sizes is not None:
            return self.per_image(sizes, pos)
        if pos.has_default_coords:
            return self.resampled(pos.grid_size)
        return self.gathered(pos.patch_coords())

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(1|B, N, C): the table's rows of the positioned tokens (its prefix rows, if any, go to prefix tokens)."""
        return self.table(pos)[:, self.table_prefix_tokens:]

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        pos.check_tokens(x.shape[0], x.shape[1], 'LearnedAPE')
        table = self.table(pos)
        return add_to_positioned(x, pos, table) if self.no_embed_class else x + table

    def no_weight_decay(self) -> set[str]:
        return {'pos_embed'}

    def adopt_state_dict(self, state_dict: dict[str, torch.Tensor], keys: Mapping[str, str]) -> list[str]:
        """Resample a checkpoint's table of another (square) grid to this one, bicubic as timm's
        ``resample_abs_pos_embed``; a table of another width or prefix layout is left to the key check."""
        adopted = super().adopt_state_dict(state_dict, keys)
        key = keys['pos_embed']
        table = state_dict.get(key)
        prefix = self.table_prefix_tokens
        if (table is None or table.shape == self.pos_embed.shape or table.ndim != 3
                or table.shape[-1] != self.pos_embed.shape[-1] or table.shape[1] <= prefix):
            return adopted
        old_grid = square_grid(table.shape[1] - prefix, key)
        state_dict[key] = resample_abs_pos_embed(table, new_size=list(self.grid_size), old_size=list(old_grid),
                                                 num_prefix_tokens=prefix)
        return [*adopted, f'{key} resampled {old_grid[0]}x{old_grid[1]} -> {self.grid_size[0]}x{self.grid_size[1]}']

    def extra_repr(self) -> str:
        return (f'grid_size={self.grid_size}, num_prefix_tokens={self.num_prefix_tokens}, '
                f'no_embed_class={self.no_embed_class}')
