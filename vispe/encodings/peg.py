"""PEG: the conditional position encoding generator of CPVT (Chu et al., ICLR 2023; Twins PosCNN)."""
from __future__ import annotations

import math
from typing import ClassVar, Sequence

import torch
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, model_facts
from vispe.geometry import Positions
from vispe.registry import ENCODINGS


@ENCODINGS.register_module()
class PEG(PositionEncoding):
    """Positional encoding generator: a depthwise conv with zero padding on the token grid, plus a residual.

    After each block in ``after_blocks`` the patch tokens, laid out as their h×w grid, become
    ``x + DWConv_k×k(x)`` (bias on, zero padding k//2), as Twins' ``PosCNN`` with stride 1 (timm's
    ``twins.PosConv``); prefix tokens bypass the conv (CPVT on DeiT). Position comes from the zero
    padding at the borders, so the conv runs unchanged at any grid. In a padded batch
    (``pos.valid_mask``) padded cells are zeroed before the conv, so each image sees the zero padding of
    its own border. Init as CPVTv2: weights
    N(0, 2/fan_out) with fan_out = k·k (depthwise), bias 0.

    Args:
        embed_dim: token width C.
        depth: number of blocks (to check ``after_blocks``).
        after_blocks: blocks after which a PEG is inserted (CPVT: (0,); "CPVT 0-5": (0, 1, 2, 3, 4)).
        kernel_size: k (3 in CPVT and Twins).

    Shapes: between_blocks (B, prefix + h·w, C) -> same.
    """

    family: ClassVar[str] = 'conditional'
    paper: ClassVar[str] = 'Chu et al., ICLR 2023 (CPVT)'
    examples: ClassVar[tuple[dict, ...]] = ({}, {'after_blocks': (0, 1)})
    options: ClassVar[dict[str, Option]] = {
        **model_facts('embed_dim', 'depth'),
        'after_blocks': Option(int, ge=0, sequence=True, doc='The blocks followed by a PEG, 0..depth-1 (CPVT: (0,)); '
                                                             'each has its own conv.'),
        'kernel_size': Option(int, ge=1, doc='The odd conv size k (3 in CPVT and Twins); it shapes the convs.'),
    }

    def __init__(self, embed_dim: int, depth: int, after_blocks: Sequence[int] = (0,), kernel_size: int = 3) -> None:
        super().__init__()
        blocks = sorted(set(after_blocks))
        if not blocks or blocks[-1] >= depth:
            raise ValueError(f'PEG after_blocks must name blocks 0..{depth - 1}; got {tuple(after_blocks)}.')
        if kernel_size % 2 != 1:
            raise ValueError(f'PEG needs an odd kernel_size (same-size zero padding); got {kernel_size}.')
        self.after_blocks = tuple(blocks)
        self.convs = nn.ModuleList(
            nn.Conv2d(embed_dim, embed_dim, kernel_size, padding=kernel_size // 2, groups=embed_dim)
            for _ in blocks)
        for conv in self.convs:
            nn.init.normal_(conv.weight, std=math.sqrt(2.0 / (kernel_size * kernel_size)))
            nn.init.zeros_(conv.bias)
        self._conv_of_block = {block: index for index, block in enumerate(blocks)}

    def between_blocks(self, x: torch.Tensor, pos: Positions, layer_idx: int) -> torch.Tensor:
        index = self._conv_of_block.get(layer_idx)
        if index is None:
            return x
        pos.check_tokens(x.shape[0], x.shape[1], 'PEG')
        prefix, patches = x[:, :pos.num_prefix_tokens], x[:, pos.num_prefix_tokens:]
        height, width = pos.require_grid('PEG')
        grid = patches.transpose(1, 2).reshape(x.shape[0], x.shape[-1], height, width)
        if pos.valid_mask is not None:
            grid = grid * pos.valid_mask[:, None].to(grid.dtype)
        patches = patches + self.convs[index](grid).flatten(2).transpose(1, 2)
        return torch.cat([prefix, patches], dim=1)

    def no_weight_decay(self) -> set[str]:
        """Every conv weight and bias: Twins' ``CPVTV2.no_weight_decay`` keeps all of ``pos_block`` out of decay."""
        return {name for name, _ in self.named_parameters()}

    def extra_repr(self) -> str:
        return f'after_blocks={self.after_blocks}'
