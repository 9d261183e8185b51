"""2D-ALiBi: per-head linear penalties on the 2D distance between patches (the LookHere paper's baseline)."""
from __future__ import annotations

from typing import ClassVar

import torch

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, Search, model_facts
from vispe.flex_bias import OffsetBias, grid_offsets, kernel_option, use_flex
from vispe.geometry import Positions, pad_prefix, pairwise_offsets, relative_offsets
from vispe.registry import ENCODINGS


def alibi_slopes(num_heads: int) -> torch.Tensor:
    """ALiBi's geometric slopes m_h = 2^(−8(h+1)/H), h = 0…H−1 (Press et al., ICLR 2022)."""
    return torch.exp2(-8.0 * torch.arange(1, num_heads + 1, dtype=torch.float64) / num_heads).float()


@ENCODINGS.register_module()
class ALiBi2D(PositionEncoding):
    """2D ALiBi: ``bias[h, i, j] = −m_h · distance_scale · ‖p_i − p_j‖`` with patch positions p in patch
    units and ALiBi's slopes m_h; prefix rows and columns are 0. The same bias serves every layer and
    is built once per forward from a distance table cached per grid.

    ``distance_scale`` is the test-time option: e.g. train_grid / test_grid keeps the penalty per
    image fraction constant at a larger resolution. In cross-attention (or with explicit coordinates)
    the distance is between the query's and the key's coordinates, computed per forward.

    ``kernel='flex'`` runs self-attention on the grid through FlexAttention with the bias read from a
    (heads, 2h−1, 2w−1) table of offsets (:mod:`vispe.flex_bias`): no (heads, L, L) tensor. 'auto' keeps SDPA, which
    was faster on the CPU at every size measured (``benchmarks/flex_1024_vit-s16_cpu1.md``).

    Args:
        num_heads, num_prefix_tokens: from the model.
        distance_scale: factor on the distances.
        kernel: 'auto', 'sdpa' or 'flex'.

    Shapes: logits_bias -> (1, heads, L, L) in self-attention on the grid, else (B|1, heads, Lq, Lk).
    """

    family: ClassVar[str] = 'bias'
    paper: ClassVar[str] = 'Press et al., ICLR 2022 (ALiBi), 2D baseline of Fuller et al., NeurIPS 2024'
    options: ClassVar[dict[str, Option]] = {
        **model_facts('num_heads', 'num_prefix_tokens'),
        'distance_scale': Option(float, ge=0, test_time=True, search=Search(factors=(1 / 3, 1 / 2, 2 / 3, 1.5)),
                                 doc='The factor on distances is >= 0 (1 in training, e.g. train_grid / test_grid at '
                                     'a larger size; negative would favour far keys); the bias is rebuilt every '
                                     'forward, so it may change at test time.'),
        'kernel': kernel_option(),
    }
    # From how many tokens 'auto' takes the flex path (None: never; SDPA was faster on the CPU at 197 and 4097 tokens).
    flex_min_tokens: ClassVar[int | None] = None

    def __init__(self, num_heads: int, num_prefix_tokens: int = 1, distance_scale: float = 1.0,
                 kernel: str = 'auto') -> None:
        super().__init__()
        self.num_prefix_tokens = num_prefix_tokens
        self.distance_scale = distance_scale
        self.kernel = kernel
        self.register_buffer('slopes', alibi_slopes(num_heads), persistent=False)

    def distances(self, pos: Positions) -> torch.Tensor:
        """(L, L) Euclidean patch distances, 0 on prefix rows and columns (cached per grid)."""
        self.check_sequence(pos, self.num_prefix_tokens)

        def build() -> torch.Tensor:
            offsets = relative_offsets(pos.grid_size, device=pos.device).float()
            return pad_prefix(offsets.square().sum(-1).sqrt(), pos.num_prefix_tokens)
        return self.cached_table('distances', pos, build, across_forwards=True)

    def bias(self, pos: Positions) -> torch.Tensor:
        """(1, heads, L, L), built once per forward."""
        def build() -> torch.Tensor:
            coef = -self.distance_scale * self.slopes.to(pos.device)
            return (self.distances(pos) * coef[:, None, None]).unsqueeze(0)
        return self.cached_table('bias', pos, build)

    def cross_bias(self, pos_q: Positions, pos_k: Positions) -> torch.Tensor:
        """(B|1, heads, Lq, Lk) between the coordinates of two token sets, 0 on prefix rows and columns."""
        def build() -> torch.Tensor:
            distance = pairwise_offsets(pos_q.patch_coords(), pos_k.patch_coords()).square().sum(-1).sqrt()
            coef = -self.distance_scale * self.slopes.to(distance.device)
            bias = distance[:, None] * coef[:, None, None]
            return pad_prefix(bias, pos_q.num_prefix_tokens, 0.0, pos_k.num_prefix_tokens)
        return self.cached_table('cross_bias', pos_q, build, pos_k=pos_k)

    def offset_bias(self, pos: Positions) -> OffsetBias:
        """The bias as grid-offset tables for FlexAttention, built once per forward."""
        self.check_sequence(pos, self.num_prefix_tokens)

        def build() -> OffsetBias:
            distance = grid_offsets(pos.grid_size, pos.device).square().sum(-1).sqrt()
            coef = -self.distance_scale * self.slopes.to(pos.device)
            return OffsetBias(pos.grid_size, pos.num_prefix_tokens, distance * coef[:, None, None],
                              torch.zeros_like(coef))
        return self.cached_table('offset_bias', pos, build)

    def flex_bias(self, pos_q: Positions, pos_k: Positions,
                  layer_idx: int) -> tuple[OffsetBias, None] | None:
        if pos_q is pos_k and pos_q.has_default_coords and use_flex(self.kernel, pos_q.num_tokens,
                                                                    self.flex_min_tokens):
            return self.offset_bias(pos_q), None
        return None

    def prepare(self, pos: Positions) -> None:
        if pos.has_default_coords and not use_flex(self.kernel, pos.num_tokens, self.flex_min_tokens):
            self.bias(pos)

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
                    layer_idx: int) -> torch.Tensor | None:
        if pos_q is pos_k and pos_q.has_default_coords:
            return self.bias(pos_q)
        return self.cross_bias(pos_q, pos_k)

    def extra_repr(self) -> str:
        return f'heads={len(self.slopes)}, distance_scale={self.distance_scale}, kernel={self.kernel!r}'
