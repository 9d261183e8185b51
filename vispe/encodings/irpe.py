"""iRPE: image relative position encoding (Wu et al., ICCV 2021; microsoft/Cream iRPE)."""
from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, model_facts
from vispe.flex_bias import OffsetBias, grid_offsets, kernel_option, use_flex
from vispe.geometry import Positions, pad_prefix, pairwise_offsets, relative_offsets
from vispe.registry import ENCODINGS

METHOD_ALIASES = {'euclidean': 'euclidean', 'euc': 'euclidean', 'quant': 'quant', 'cross': 'cross',
                  'product': 'product'}
MODE_ALIASES = {'bias': 'bias', 'contextual': 'contextual', 'ctx': 'contextual'}


def piecewise_index(x: torch.Tensor, alpha: float, beta: float, gamma: float) -> torch.Tensor:
    """The piecewise index function g of iRPE (Eq. 18), as the reference computes it.

    ``g(x) = round(x)`` for |x| ≤ α, else ``sign(x)·min(β, round(α + ln(|x|/α)/ln(γ/α)·(β − α)))``;
    the result is cast to int64, which truncates, so the effective clip is int(β).
    """
    magnitude = x.abs()
    far = magnitude > alpha
    spread = alpha + torch.log(magnitude.float().clamp(min=alpha) / alpha) / math.log(gamma / alpha) * (beta - alpha)
    far_value = torch.sign(x) * spread.round().clamp(max=beta)
    near_value = x.round() if x.is_floating_point() else x
    return torch.where(far, far_value, near_value.to(far_value.dtype)).long()


def num_buckets(method: str, ratio: float, num_prefix_tokens: int) -> int:
    """Buckets of one table: (2·int(β)+1)² for product, 2·int(β)+1 otherwise, +1 for prefix tokens."""
    side = 2 * int(2 * ratio) + 1
    return (side * side if method == 'product' else side) + (1 if num_prefix_tokens > 0 else 0)


def offset_buckets(method: str, offsets: torch.Tensor, ratio: float) -> torch.Tensor:
    """Bucket of every offset (..., 2) = query − key (row, col), integer or real: (A, ...) int64, A = 2 for
    cross (rows, cols) else 1. Real offsets are rounded as the reference rounds its distances."""
    alpha, beta, gamma = ratio, 2 * ratio, 8 * ratio
    beta_int = int(beta)
    rows, cols = offsets[..., 0], offsets[..., 1]
    if method == 'product':
        ids = [(piecewise_index(rows, alpha, beta, gamma) + beta_int) * (2 * beta_int + 1)
               + piecewise_index(cols, alpha, beta, gamma) + beta_int]
    elif method == 'euclidean':
        distance = (rows.square() + cols.square()).float().sqrt().round()
        ids = [piecewise_index(distance, alpha, beta, gamma) + beta_int]
    elif method == 'quant':
        ids = [piecewise_index(rows.square() + cols.square(), alpha, beta, gamma) + beta_int]
    else:
        ids = [piecewise_index(rows, alpha, beta, gamma) + beta_int, piecewise_index(cols, alpha, beta, gamma) + beta_int]
    return torch.stack(ids)


def bucket_ids(method: str, grid_size: tuple[int, int], ratio: float, num_prefix_tokens: int,
               device: torch.device | str | None = None) -> torch.Tensor:
    """Bucket of every (query, key) pair, (A, prefix + N, prefix + N) int64, A = 2 for cross (rows,
    cols) else 1. Offsets are query − key; every pair involving a prefix token uses the last bucket."""
    ids = offset_buckets(method, relative_offsets(grid_size, device=device), ratio)
    extra = num_buckets(method, ratio, num_prefix_tokens) - 1
    return pad_prefix(ids, num_prefix_tokens, value=extra)


@ENCODINGS.register_module()
class iRPE(PositionEncoding):  # noqa: N801 (the paper's name)
    """Image relative position encoding, all methods and modes of microsoft/Cream's iRPE.

    Each (query i, key j) pair falls in a bucket b(i, j) of its offset pos_i − pos_j (method
    ``euclidean``: g(round(‖Δ‖)); ``quant``: g(Δr² + Δc²); ``cross``: g(Δr) and g(Δc) in two tables,
    summed; ``product``: (g(Δr), g(Δc)) jointly), with g the piecewise index function of α = r,
    β = 2r, γ = 8r for ``ratio`` r. Pairs with a prefix token use one extra bucket. Per layer, with
    s = d^-1/2 and tables zero-initialised as the reference:

    * on k: bias ``e_ij += b_k[b(i,j)]``; contextual ``e_ij += s·q_iᵀ r_k[b(i,j)]``;
    * on q: bias ``e_ij += b_q[b(j,i)]``; contextual ``e_ij += s·k_jᵀ r_q[b(j,i)]`` (reversed offset);
    * on v (contextual only): ``out_i += Σ_j a_ij r_v[b(i,j)]`` (needs the probabilities).

    q and k terms are additive logits and go to SDPA as its mask; the v term runs on the explicit
    path, aggregating probabilities per bucket (O(L²) memory, not the reference's O(L²·d)). Bucket
    ids are computed once per grid and cached; any grid shape works (the reference DeiT path assumes
    a square). iRPE adds no absolute embedding: DeiT-with-iRPE is ``['LearnedAPE', dict(type='iRPE')]``.

    Args:
        head_dim: d.
        num_heads: heads per layer.
        depth: layers (each has its own tables).
        num_prefix_tokens: prefix tokens of the model (one extra bucket if any).
        method: 'product', 'cross', 'euclidean' ('euc') or 'quant'.
        mode: 'contextual' ('ctx') or 'bias'.
        on: any of 'q', 'k', 'v', e.g. 'k', 'qk', 'qkv'.
        shared_head: one table for all heads.
        ratio: r (1.9 in the released models: 7×7 + 1 = 50 product buckets).
        kernel: 'auto', 'sdpa' or 'flex'. In bias mode the flex path (self-attention on the grid) reads each
            layer's bias from a (heads, 2h−1, 2w−1) table of offsets inside FlexAttention (:mod:`vispe.flex_bias`);
            no (heads, L, L) bias is built. 'auto' keeps SDPA, faster on the CPU at every size measured
            (``benchmarks/flex_1024_vit-s16_cpu1.md``). Contextual mode always runs SDPA.

    Shapes: logits_bias -> (B|1, heads|1, L, L); transform_out (B, heads, L, d) -> same.
    """

    family: ClassVar[str] = 'bias'
    paper: ClassVar[str] = 'Wu et al., ICCV 2021 (iRPE)'
    examples: ClassVar[tuple[dict, ...]] = (
        {'method': 'product', 'mode': 'contextual', 'on': 'qkv'},
        {'method': 'cross', 'mode': 'bias', 'on': 'qk', 'shared_head': False},
        {'method': 'euclidean', 'mode': 'contextual', 'on': 'k', 'ratio': 2.0},
    )
    options: ClassVar[dict[str, Option]] = {
        **model_facts('head_dim', 'num_heads', 'depth', 'num_prefix_tokens'),
        'method': Option(str, choices=tuple(METHOD_ALIASES), doc='How offsets fall into buckets (the released models: '
                                                                "'product'); it shapes the tables."),
        'mode': Option(str, choices=tuple(MODE_ALIASES), doc="'contextual' (query-dependent) or 'bias'; it shapes "
                                                             'the tables.'),
        'on': Option(str, doc="Which of q, k, v carry tables, e.g. 'k' or 'qkv'; it shapes the tables."),
        'shared_head': Option(bool, doc='One table for all heads (True in the released models); it shapes the '
                                        'tables.'),
        'ratio': Option(float, gt=0, doc='The bucket ratio r is positive (the released models use 1.9); it sets the '
                                         'number of buckets, so it shapes the tables.'),
        'kernel': kernel_option(),
    }
    # From how many tokens 'auto' takes the flex path (None: never; SDPA was faster on the CPU at 197 and 4097 tokens).
    flex_min_tokens: ClassVar[int | None] = None

    def __init__(self, head_dim: int, num_heads: int, depth: int, num_prefix_tokens: int = 1,
                 method: str = 'product', mode: str = 'contextual', on: str = 'k', shared_head: bool = True,
                 ratio: float = 1.9, kernel: str = 'auto') -> None:
        super().__init__()
        if not on or set(on) - set('qkv'):
            raise ValueError(f"iRPE 'on' is a combination of 'q', 'k', 'v' (e.g. 'qkv'); got {on!r}.")
        self.method, self.mode, self.on = METHOD_ALIASES[method], MODE_ALIASES[mode], ''.join(sorted(set(on)))
        if 'v' in self.on and self.mode == 'bias':
            raise ValueError("iRPE on values exists only in contextual mode (the reference has no bias on v): "
                             "use mode='contextual' or drop 'v' from on.")
        self.ratio = ratio
        self.kernel = kernel
        self.num_heads = num_heads
        self.depth = depth
        self.num_prefix_tokens = num_prefix_tokens
        self.scale = head_dim ** -0.5
        self.num_buckets = num_buckets(self.method, ratio, num_prefix_tokens)
        axes = 2 if self.method == 'cross' else 1
        table_heads = 1 if shared_head else num_heads
        nb = self.num_buckets
        for side in 'qkv':
            if side not in self.on:
                self.register_parameter(f'lookup_{side}', None)
                continue
            if side == 'v':
                shape = (depth, axes, table_heads, nb, head_dim)
            elif self.mode == 'bias':
                shape = (depth, axes, table_heads, nb)
            else:
                shape = (depth, axes, table_heads, head_dim, nb)
            setattr(self, f'lookup_{side}', nn.Parameter(torch.zeros(shape)))

    def bucket_ids(self, pos: Positions) -> torch.Tensor:
        """(A, L, L) bucket ids of this grid (cached by grid and device)."""
        self.check_sequence(pos, self.num_prefix_tokens)
        return self.cached_table('bucket_ids', pos, lambda: bucket_ids(self.method, pos.grid_size, self.ratio,
                                                                       self.num_prefix_tokens, pos.device),
                                 across_forwards=True)

    def pair_ids(self, pos_q: Positions, pos_k: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Buckets of query − key, (A, B'|1, Lq, Lk), and of key − query, (A, B'|1, Lk, Lq) (the q-side tables
        read the reversed offset). Self-attention on the grid: the cached grid table for both; otherwise built
        once per forward from the coordinates (cross-attention, explicit coordinates)."""
        if pos_q is pos_k and pos_q.has_default_coords:
            ids = self.bucket_ids(pos_q).unsqueeze(1)
            return ids, ids

        def build() -> tuple[torch.Tensor, torch.Tensor]:
            if self.num_prefix_tokens == 0 and (pos_q.num_prefix_tokens or pos_k.num_prefix_tokens):
                raise ValueError('iRPE was built without a prefix-token bucket (num_prefix_tokens=0) but the '
                                 'sequences have prefix tokens; build it with the model\'s num_prefix_tokens.')
            coords_q, coords_k = pos_q.patch_coords(), pos_k.patch_coords()
            extra = self.num_buckets - 1
            forward = offset_buckets(self.method, pairwise_offsets(coords_q, coords_k), self.ratio)
            backward = offset_buckets(self.method, pairwise_offsets(coords_k, coords_q), self.ratio)
            return (pad_prefix(forward, pos_q.num_prefix_tokens, extra, pos_k.num_prefix_tokens),
                    pad_prefix(backward, pos_k.num_prefix_tokens, extra, pos_q.num_prefix_tokens))
        return self.cached_table('pair_ids', pos_q, build, pos_k=pos_k)

    def prepare(self, pos: Positions) -> None:
        flex = self.mode == 'bias' and use_flex(self.kernel, pos.num_tokens, self.flex_min_tokens)
        if pos.has_default_coords and not flex:
            self.bucket_ids(pos)

    def _logit_term(self, table: torch.Tensor, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """Bias: table (heads|1, nb), ids (B'|1, L, L') -> (B'|1, heads|1, L, L'); contextual: table
        (heads|1, d, nb), x (B, H, L, d) -> (B, H, L, L') with entry [i, j] = s·x_i · table[:, :, ids[i, j]]."""
        if self.mode == 'bias':
            return table[:, ids].transpose(0, 1)
        lookup = (x * self.scale) @ table.to(x.dtype)
        return lookup.gather(-1, ids[:, None].expand(*lookup.shape[:-1], ids.shape[-1]))

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
                    layer_idx: int) -> torch.Tensor | None:
        if 'q' not in self.on and 'k' not in self.on:
            return None
        ids, reversed_ids = self.pair_ids(pos_q, pos_k)
        total = None
        for axis in range(ids.shape[0]):
            terms = []
            if self.lookup_k is not None:
                terms.append(self._logit_term(self.lookup_k[layer_idx, axis], q, ids[axis]))
            if self.lookup_q is not None:
                terms.append(self._logit_term(self.lookup_q[layer_idx, axis], k, reversed_ids[axis]).transpose(-1, -2))
            for term in terms:
                total = term if total is None else total + term
        return total

    def offset_ids(self, pos: Positions) -> tuple[torch.Tensor, torch.Tensor]:
        """Buckets of every grid offset for the flex path, (A, 2h−1, 2w−1) each: of query − key (the k tables) and
        of key − query (the q tables), at key − query offsets (cached by grid and device)."""
        self.check_sequence(pos, self.num_prefix_tokens)

        def build() -> tuple[torch.Tensor, torch.Tensor]:
            offsets = grid_offsets(pos.grid_size, pos.device).long()
            return offset_buckets(self.method, -offsets, self.ratio), offset_buckets(self.method, offsets, self.ratio)
        return self.cached_table('offset_ids', pos, build, across_forwards=True)

    def flex_bias(self, pos_q: Positions, pos_k: Positions, layer_idx: int) -> tuple[OffsetBias, None] | None:
        """This layer's bias-mode term as grid-offset tables (self-attention on the grid, kernel permitting)."""
        if (self.mode != 'bias' or pos_q is not pos_k or not pos_q.has_default_coords
                or not use_flex(self.kernel, pos_q.num_tokens, self.flex_min_tokens)):
            return None
        key_ids, query_ids = self.offset_ids(pos_q)
        values = prefix = None
        for table, ids in ((self.lookup_k, key_ids), (self.lookup_q, query_ids)):
            if table is None:
                continue
            for axis in range(ids.shape[0]):
                layer_table = table[layer_idx, axis].float().expand(self.num_heads, -1)
                term, extra = layer_table[:, ids[axis]], layer_table[:, -1]
                values = term if values is None else values + term
                prefix = extra if prefix is None else prefix + extra
        if not pos_q.num_prefix_tokens:
            prefix = torch.zeros_like(prefix)
        return OffsetBias(pos_q.grid_size, pos_q.num_prefix_tokens, values, prefix), None

    @property
    def active_hooks(self) -> frozenset[str]:
        """``logits_bias`` when on q or k, ``transform_out`` when on v."""
        return frozenset((('logits_bias',) if {'q', 'k'} & set(self.on) else ())
                         + (('transform_out',) if 'v' in self.on else ()))

    def needs_probs(self, layer_idx: int) -> bool:
        return self.lookup_v is not None

    def transform_out(self, out: torch.Tensor, pos_q: Positions, layer_idx: int,
                      probs: torch.Tensor | None = None, pos_k: Positions | None = None) -> torch.Tensor:
        if self.lookup_v is None:
            return out
        if probs is None:
            raise ValueError('iRPE on values needs the attention probabilities (needs_probs is True).')
        ids = self.pair_ids(pos_q, pos_q if pos_k is None else pos_k)[0]
        for axis in range(ids.shape[0]):
            index = ids[axis][:, None].expand_as(probs)
            per_bucket = probs.new_zeros(*probs.shape[:-1], self.num_buckets).scatter_add_(-1, index, probs)
            out = out + per_bucket @ self.lookup_v[layer_idx, axis].to(probs.dtype)
        return out

    def extra_repr(self) -> str:
        return (f'method={self.method!r}, mode={self.mode!r}, on={self.on!r}, ratio={self.ratio}, '
                f'num_buckets={self.num_buckets}')
