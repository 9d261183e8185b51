"""Relative biases on a patch grid as FlexAttention score and mask functions, never as dense (heads, L, L) tensors.

LookHere, 2D-ALiBi and iRPE in bias mode add to the logit of query i and key j a value that depends only on the
key − query offset on the grid (and, for LookHere's 'center' heads, on the key alone); LookHere also masks keys by
direction. :class:`OffsetBias` holds that as small tables: (heads, 2h−1, 2w−1) values per offset, (heads, L) values
per key, the masked offsets and one value per head for pairs with a prefix token. :func:`flex_offset_attention`
reads them inside ``torch.nn.attention.flex_attention``'s ``score_mod`` (and the masks as a block mask, so that
fully masked 128×128 tiles are skipped): the memory of attention stays that of the plain kernel, where the SDPA
path materialises the (heads, L, L) bias in every layer. :meth:`OffsetBias.dense` builds that dense bias, the
reference the flex path is tested against.

FlexAttention's fused kernels come from torch.compile: in eager mode one compiled kernel per input shape is built on
first use (seconds) and reused; inside a compiled model the call is traced with it. On the CPU (torch 2.14) the flex
path runs only for inference in eager mode (:func:`flex_supported`): FlexAttention has no CPU backward, and its CPU
kernel does not lower inside a larger compiled graph; there attention takes the SDPA path, with the same result.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention

from vispe.encodings.options import Option

KERNELS = ('auto', 'sdpa', 'flex')


def offset_index(grid_size: tuple[int, int], rows: torch.Tensor, cols: torch.Tensor, query: torch.Tensor,
                 key: torch.Tensor) -> torch.Tensor:
    """Flat index of the key − query offset into a (2h−1)·(2w−1) table; rows, cols (L,) of the tokens."""
    height, width = grid_size
    return (rows[key] - rows[query] + height - 1) * (2 * width - 1) + cols[key] - cols[query] + width - 1


@dataclasses.dataclass
class OffsetBias:
    """An additive logit bias of self-attention on an h×w grid with prefix tokens first.

    bias[head, i, j] for patches i, j at (row, col) grid cells = ``offset_values[head, r_j − r_i + h − 1,
    c_j − c_i + w − 1] + key_values[head, j]``; for pairs with a prefix token, ``prefix_values[head]``. Keys at
    offsets where ``masked`` is True are left out (their probability is 0), never prefix pairs.

    Attributes:
        grid_size: (h, w).
        num_prefix_tokens: P, the tokens before the patches.
        offset_values: (heads, 2h−1, 2w−1) float32.
        prefix_values: (heads,) float32.
        key_values: (heads, P + h·w) float32 or None.
        masked: (heads, 2h−1, 2w−1) bool or None.
    """

    grid_size: tuple[int, int]
    num_prefix_tokens: int
    offset_values: torch.Tensor
    prefix_values: torch.Tensor
    key_values: torch.Tensor | None = None
    masked: torch.Tensor | None = None

    @property
    def num_tokens(self) -> int:
        return self.num_prefix_tokens + self.grid_size[0] * self.grid_size[1]

    def cells(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(row, col, is_patch) of every token, (L,) each; prefix tokens sit at cell (0, 0)."""
        height, width = self.grid_size
        device = self.offset_values.device
        index = (torch.arange(self.num_tokens, device=device) - self.num_prefix_tokens).clamp(min=0)
        is_patch = torch.arange(self.num_tokens, device=device) >= self.num_prefix_tokens
        return index // width, index % width, is_patch

    def dense(self) -> torch.Tensor:
        """(1, heads, L, L) float32: the bias itself, −inf at masked keys."""
        rows, cols, is_patch = self.cells()
        tokens = torch.arange(self.num_tokens, device=rows.device)
        index = offset_index(self.grid_size, rows, cols, tokens[:, None], tokens[None, :])
        values = self.offset_values.flatten(1)[:, index]
        if self.key_values is not None:
            values = values + self.key_values[:, None, :]
        pairs = is_patch[:, None] & is_patch[None, :]
        bias = torch.where(pairs, values, self.prefix_values[:, None, None])
        if self.masked is not None:
            bias = bias.masked_fill(pairs & self.masked.flatten(1)[:, index], float('-inf'))
        return bias.unsqueeze(0)

    def score_mod(self) -> Callable[..., torch.Tensor]:
        """FlexAttention's ``score_mod`` adding this bias (its tables are captured tensors). The offset index is
        ``A[key] − A[query] + centre`` with A = row·(2w−1) + col per token: one gather per key."""
        height, width = self.grid_size
        rows, cols, _ = self.cells()
        flat = rows * (2 * width - 1) + cols
        centre = (height - 1) * (2 * width - 1) + width - 1
        num_prefix = self.num_prefix_tokens
        values, prefix_values = self.offset_values.flatten(1).contiguous(), self.prefix_values.contiguous()
        key_values = None if self.key_values is None else self.key_values.contiguous()

        def add_bias(score: torch.Tensor, batch: torch.Tensor, head: torch.Tensor, query: torch.Tensor,
                     key: torch.Tensor) -> torch.Tensor:
            value = values[head, flat[key] - flat[query] + centre]
            if key_values is not None:
                value = value + key_values[head, key]
            return score + torch.where((query >= num_prefix) & (key >= num_prefix), value, prefix_values[head])
        return add_bias

    def block_mask(self) -> BlockMask | None:
        """FlexAttention's block mask of the masked offsets (None when nothing is masked)."""
        if self.masked is None:
            return None
        rows, cols, is_patch = self.cells()
        grid_size, masked = self.grid_size, self.masked.flatten(1)

        def visible(batch: torch.Tensor, head: torch.Tensor, query: torch.Tensor, key: torch.Tensor) -> torch.Tensor:
            hidden = masked[head, offset_index(grid_size, rows, cols, query, key)]
            return ~(hidden & is_patch[query] & is_patch[key])
        build = create_block_mask if torch.compiler.is_compiling() else compiled('create_block_mask')
        return build(visible, None, masked.shape[0], self.num_tokens, self.num_tokens, device=masked.device)


_COMPILED: dict[str, Callable[..., object]] = {}


def compiled(name: str) -> Callable[..., object]:
    """torch.compile of ``flex_attention`` or ``create_block_mask``, made on first use."""
    if name not in _COMPILED:
        _COMPILED[name] = torch.compile({'flex_attention': flex_attention,
                                         'create_block_mask': create_block_mask}[name], dynamic=False)
    return _COMPILED[name]


def flex_offset_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: OffsetBias, scale: float,
                          block_mask: BlockMask | None = None, enable_gqa: bool = False) -> torch.Tensor:
    """softmax(q·kᵀ·scale + bias)·v with FlexAttention; q (B, heads, L, d), k and v (B, heads|kv_heads, L, d).

    ``block_mask`` is ``bias.block_mask()``, passed in so that callers build it once per grid, not per layer.
    """
    kernel = flex_attention if torch.compiler.is_compiling() else compiled('flex_attention')
    return kernel(q.contiguous(), k.contiguous(), v.contiguous(), score_mod=bias.score_mod(), block_mask=block_mask,
                  scale=scale, enable_gqa=enable_gqa)


def flex_supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether FlexAttention can run on these inputs here. On the CPU (torch 2.14) it has no backward, and its
    kernel fails to lower inside a larger compiled graph; there the SDPA path runs (the same result)."""
    if q.device.type != 'cpu':
        return True
    needs_grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    return not needs_grad and not torch.compiler.is_compiling()


def use_flex(kernel: str, num_tokens: int, min_tokens: int | None) -> bool:
    """Whether an encoding with ``kernel`` option ('auto', 'sdpa', 'flex') runs the flex path at this length;
    'auto' does from ``min_tokens`` (None: never, where flex was measured slower)."""
    return kernel == 'flex' or (kernel == 'auto' and min_tokens is not None and num_tokens >= min_tokens)


def grid_offsets(grid_size: tuple[int, int], device: torch.device | str | None = None) -> torch.Tensor:
    """(2h−1, 2w−1, 2) float32 key − query offsets (Δrow, Δcol) of an h×w grid, the layout of
    :attr:`OffsetBias.offset_values`."""
    rows = torch.arange(1 - grid_size[0], grid_size[0], device=device, dtype=torch.float32)
    cols = torch.arange(1 - grid_size[1], grid_size[1], device=device, dtype=torch.float32)
    return torch.stack(torch.meshgrid(rows, cols, indexing='ij'), dim=-1)


def kernel_option() -> Option:
    """The ``kernel`` option of the encodings with an offset-table bias."""
    return Option(str, choices=KERNELS, test_time=True,
                  doc="The attention kernel: 'sdpa' (a dense bias per layer), 'flex' (FlexAttention reading the "
                      "grid-offset tables, no (heads, L, L) tensor) or 'auto' (flex where it was measured faster); "
                      'the results are the same, so it may change at test time.')
