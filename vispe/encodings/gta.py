"""GTA: Geometric Transform Attention (Miyato, Jaeger, Welling, Geiger; ICLR 2024; autonomousvision/gta).

Each head's channels split as ``triv | se3 | so2``. The trivial channels pass unchanged. The SE(3) channels
form homogeneous 4-vectors that the camera of the token's view acts on: with ``E`` the view's extrinsics
(scene -> camera), ``P = E⁻¹`` and ``s·`` scaling a matrix's translation column by the layer's learnable
``trans_coeff`` s (0.01 at start)::

    q' = (sE_q)ᵀ q     k' = (sP_k) k     v' = (sP_k) v     o = (sE_q) · SDPA(q', k', v')

so the logit of a query and a key is qᵀ s(E_q E_k⁻¹) k and each value reaches the output through the same
relative transform. The SO(2) channels are pairs rotated by the token's image coordinates c = (row / H,
col / W) ∈ [0, 1)²: pair p = 2f + a (frequency-major, then axis) turns by θ = 2π·m_a·ω_f·c_a with
ω_f = 2^(f+1−F), f = 0…F−1, and m = ``max_freq``; values turn with the key and the output turns back by the
query's angle. All of it is block-diagonal (4×4 and 2×2 blocks around an ordinary SDPA), O(N·d) per layer.

``on='qk'`` transforms queries and keys only (the rotary-only variant, the reference's ``v_transform=False``).

Positions: the tokens of V views, view-major (token n belongs to view n // (N / V)), with ``cameras`` (one
per view; :attr:`vispe.geometry.Cameras.extrinsics`). Image coordinates: a grid's cell (i, j) sits at
((i + ½)/h, (j + ½)/w) (the reference's token centres ``coord[4::8, 4::8]`` of a stride-8 grid); tokens
given by ``coords`` alone (a decoder's target rays) carry (row, col) in pixels of the view's image, divided
by ``cameras.image_size`` (the reference's ``make_2dcoord``: pixel index / size). Prefix tokens are not
transformed. Only relative transforms enter, so the loaders' canonical frame (every E right-multiplied by
the first input view's E⁻¹) changes nothing but rounding.
"""
from __future__ import annotations

import math
from typing import ClassVar

import torch
from torch import nn

from vispe.encodings.base import PositionEncoding, TableCache
from vispe.encodings.options import Option, model_fact
from vispe.encodings.rotary import angles_to_cis, rotate_pairs
from vispe.geometry import Positions
from vispe.geometry.grid import grid_coords
from vispe.registry import ENCODINGS

__all__ = ['GTA', 'so2_angles']


def so2_angles(coords: torch.Tensor, num_freqs: int, max_freq: tuple[float, float] = (1.0, 1.0)) -> torch.Tensor:
    """GTA's SO(2) angles of (..., 2) image coordinates (row, col) in [0, 1): (..., 2F), pair p = 2f + a holds
    2π·max_freq[a]·2^(f+1−F)·coords[a] (the reference's ``make_SO2mats`` order)."""
    freqs = 2.0 ** (torch.arange(num_freqs, dtype=torch.float32, device=coords.device) + 1 - num_freqs)
    scale = torch.tensor(max_freq, dtype=torch.float32, device=coords.device) * (2 * math.pi)
    return (coords.float()[..., None, :] * scale * freqs[:, None]).flatten(-2)


def _scaled_translation(matrices: torch.Tensor, trans_coeff: torch.Tensor) -> torch.Tensor:
    """(..., 4, 4) rigid transforms with the translation column multiplied by ``trans_coeff`` (the reference's
    ``scale_mask``)."""
    column_scale = torch.cat([trans_coeff.reshape(1).expand(3), trans_coeff.new_ones(1)]).unsqueeze(-1)
    return torch.cat([matrices[..., :3], matrices[..., 3:] * column_scale], dim=-1)


def repeat_block(matrices: torch.Tensor, count: int) -> torch.Tensor:
    """(..., 4, 4) -> (..., 4·count, 4·count) block-diagonal with ``count`` copies (kron(I_count, M))."""
    eye = torch.eye(count, dtype=matrices.dtype, device=matrices.device)
    blocks = torch.einsum('ij,...ac->...iajc', eye, matrices)
    return blocks.reshape(*matrices.shape[:-2], 4 * count, 4 * count)


def inverse_rotations(cis: torch.Tensor) -> torch.Tensor:
    """The inverse of rotation tables: the complex conjugate, or (cos, −sin) in the real form (..., 2) that the tables
    take while a model is traced (:func:`~vispe.encodings.rotary.angles_to_cis`)."""
    if cis.is_complex():
        return cis.conj()
    return torch.stack([cis[..., 0], -cis[..., 1]], dim=-1)


def rotate_pairs_into(target: torch.Tensor, source: torch.Tensor, cis: torch.Tensor) -> None:
    """Write the channel pairs of ``source`` rotated by ``cis`` into ``target`` (same shape); without a temporary
    when ``target`` is float32 and no gradient is recorded (``out=`` products are not differentiable)."""
    recording = torch.is_grad_enabled() and (source.requires_grad or cis.requires_grad or target.requires_grad)
    if target.dtype != torch.float32 or recording:
        target.copy_(rotate_pairs(source, cis))
        return
    source = source.float()
    if source.stride(-1) != 1 or any(stride % 2 for stride in source.stride()[:-1]) or source.storage_offset() % 2:
        source = source.contiguous()
    torch.mul(torch.view_as_complex(source.unflatten(-1, (-1, 2))), cis,
              out=torch.view_as_complex(target.unflatten(-1, (-1, 2))))


@ENCODINGS.register_module()
class GTA(PositionEncoding):
    """Geometric Transform Attention: SE(3) of the views' cameras and SO(2) of the image coordinates, applied
    to queries, keys, values and (inverted) to the output around SDPA.

    Args:
        head_dim: d, filled in by the model.
        depth: layers with their own ``trans_coeff``, filled in by the model.
        se3_dim: SE(3) channels per head, a multiple of 4 (default: half the head, rounded down to a multiple
            of 4; CLEVR-TR: 32 of 64).
        so2_freqs: SO(2) frequencies F, each taking 4 channels (default: what the head has left after
            ``se3_dim``, CLEVR-TR: 8); the remaining channels are trivial.
        max_freq: (m_row, m_col), the reference's ``max_freq_h``, ``max_freq_w`` (1, 1).
        trans_coeff: the initial translation scale s of every layer (learned, per layer; 0.01).
        on: ``'qkvo'`` (the paper) or ``'qk'`` (queries and keys only).

    Shapes: rotate q (B, heads, Nq, d), k (B, heads|1, Nk, d); transform_v v (B, heads|1, Nk, d);
    transform_out (B, heads, Nq, d); each -> same.
    """

    family: ClassVar[str] = 'rotary'
    paper: ClassVar[str] = 'Miyato et al., ICLR 2024 (autonomousvision/gta)'
    requires: ClassVar[tuple[str, ...]] = ('cameras',)
    examples: ClassVar[tuple[dict, ...]] = ({}, {'on': 'qk'})
    options: ClassVar[dict[str, Option]] = {
        'head_dim': model_fact('head_dim', multiple_of=4,
                               doc='The head width d holds 4-channel SE(3) blocks and SO(2) pairs: choose '
                                   'embed_dim / num_heads divisible by 4.'),
        'depth': model_fact('depth'),
        'se3_dim': Option(int, ge=0, multiple_of=4, optional=True,
                          doc='SE(3) channels per head, a multiple of 4 at most head_dim (None: half the head).'),
        'so2_freqs': Option(int, ge=0, optional=True,
                            doc='SO(2) frequencies F, 4 channels each, fitting beside se3_dim (None: the rest).'),
        'max_freq': Option(float, gt=0, sequence=True, length=2, scalar_ok=True,
                           doc='The largest SO(2) frequency per image axis (row, col), in turns per image (1, 1).'),
        'trans_coeff': Option(float, gt=0, doc='The initial scale of the cameras\' translations (0.01 in the paper); '
                                               'each layer learns its own.'),
        'on': Option(str, choices=('qkvo', 'qk'), doc="What the transforms act on: 'qkvo' (the paper: queries, keys, "
                                                      "values and the output) or 'qk' (rotary-only)."),
    }

    def __init__(self, head_dim: int, depth: int, se3_dim: int | None = None, so2_freqs: int | None = None,
                 max_freq: tuple[float, float] = (1.0, 1.0), trans_coeff: float = 0.01, on: str = 'qkvo') -> None:
        super().__init__()
        se3 = head_dim // 8 * 4 if se3_dim is None else se3_dim
        freqs = (head_dim - se3) // 4 if so2_freqs is None else so2_freqs
        if se3 + 4 * freqs > head_dim:
            raise ValueError(f'GTA: se3_dim {se3} + 4·so2_freqs {4 * freqs} channels exceed head_dim {head_dim}; '
                             f'lower se3_dim or so2_freqs (their sum at most the head width).')
        self.head_dim = head_dim
        self.depth = depth
        self.se3_dim = se3
        self.so2_freqs = freqs
        self.max_freq = tuple(max_freq)
        self.on = on
        self.triv_dim = head_dim - se3 - 4 * freqs
        self.trans_coeff = nn.Parameter(torch.full((depth,), float(trans_coeff)))

    @property
    def active_hooks(self) -> frozenset[str]:
        hooks = frozenset(self.hooks())
        return hooks if self.on == 'qkvo' else hooks - {'transform_v', 'transform_out'}

    def _views(self, pos: Positions) -> int:
        cameras = pos.cameras
        if cameras is None or not hasattr(cameras, 'extrinsics'):
            raise ValueError('GTA transforms tokens by the cameras of their views: give Positions.cameras '
                             '(vispe.geometry.Cameras, one per view) on both sides of the attention.')
        if pos.num_positions % pos.num_views:
            raise ValueError(f'GTA reads tokens view-major: {pos.num_positions} positioned tokens do not split into '
                             f'{pos.num_views} views of equal size; give each view the same number of tokens.')
        return pos.num_views

    def image_coords(self, pos: Positions) -> torch.Tensor:
        """(N, 2) or (B, N, 2) image coordinates (row / H, col / W) of the positioned tokens."""
        if pos.grid_size is not None:
            if pos.coords is None:
                cells = grid_coords(pos.grid_size, device=pos.device, offset=0.5, normalize=True)
                return cells.repeat(pos.num_views, 1)
            return (pos.coords.float() + 0.5) / torch.tensor(pos.grid_size, dtype=torch.float32, device=pos.device)
        if pos.coords is None or pos.coords.shape[-1] != 2:
            got = 'none' if pos.coords is None else f'D = {pos.coords.shape[-1]}'
            raise ValueError(f'GTA needs image coordinates: a grid, or Positions.coords (row, col) in pixels of the '
                             f'view\'s image; got {got}.')
        size = torch.tensor(pos.cameras.image_size, dtype=torch.float32, device=pos.device)
        return pos.coords.float() / size

    def tables(self, pos: Positions) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
        """This forward's (E, P, cis) of one token set: extrinsics and their inverses (B, V, 4, 4), and the
        SO(2) rotations (N, 2F) or, for per-sample coordinates, (B, 1, N, 2F) complex, broadcasting over the heads
        (None without SO(2) channels; while a model is traced, the real form with a trailing (cos, sin) axis)."""
        def build() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
            self._views(pos)
            cis = None
            if self.so2_freqs:
                angles = so2_angles(self.image_coords(pos), self.so2_freqs, self.max_freq)
                # The head axis goes on the angles, so the table needs no reshape in either form.
                cis = angles_to_cis(angles.unsqueeze(1) if angles.ndim == 3 else angles)
            return pos.cameras.extrinsics, pos.cameras.cam2lidar, cis
        return pos.memo(('gta', id(self)), build)

    def prepare(self, pos: Positions) -> None:
        self.tables(pos)

    @staticmethod
    def _se3_blocks(channels: torch.Tensor, right: torch.Tensor) -> torch.Tensor:
        """channels (B, heads, N, se3) of V views' tokens (view-major) with each 4-channel block right-multiplied by
        its view's ``right`` (B, V, 4, 4), in float32."""
        # All 4-channel blocks of a view share its matrix: one (tokens x se3) @ kron(I, M) product per sample, head
        # and view (a per-view block-diagonal, never per token), about twice as fast on the CPU as batched 4 x 4
        # products.
        blocks = channels.float().unflatten(2, (right.shape[1], -1))
        return (blocks @ repeat_block(right, channels.shape[-1] // 4)[:, None]).flatten(2, 3)

    def _transform(self, x: torch.Tensor, pos: Positions, right: torch.Tensor,
                   cis: torch.Tensor | None) -> torch.Tensor:
        """x (B, heads, prefix + N, d) with each view's SE(3) blocks right-multiplied by ``right`` (B, V, 4, 4)
        (row-vector form) and the SO(2) pairs rotated by ``cis``, written into one new tensor (concatenated from its
        parts while a model is traced: exporters translate writes into slices of a new tensor unreliably)."""
        prefix, triv, se3 = pos.num_prefix_tokens, self.triv_dim, self.se3_dim
        tokens = x[..., prefix:, :]
        if TableCache.tracing():
            parts = [tokens[..., :triv]] if triv else []
            if se3:
                parts.append(self._se3_blocks(tokens[..., triv:triv + se3], right).to(x.dtype))
            if cis is not None:
                parts.append(rotate_pairs(tokens[..., triv + se3:self.head_dim], cis))
            transformed = torch.cat(parts, dim=-1)
            return torch.cat([x[..., :prefix, :], transformed], dim=-2) if prefix else transformed
        out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
        if prefix:
            out[..., :prefix, :] = x[..., :prefix, :]
        target = out[..., prefix:, :]
        if triv:
            target[..., :triv] = tokens[..., :triv]
        if se3:
            target[..., triv:triv + se3] = self._se3_blocks(tokens[..., triv:triv + se3], right)
        if cis is not None:
            rotate_pairs_into(target[..., triv + se3:self.head_dim], tokens[..., triv + se3:self.head_dim], cis)
        return out

    def _check_layer(self, layer_idx: int) -> torch.Tensor:
        if layer_idx >= self.depth:
            raise IndexError(f'GTA has a translation scale for {self.depth} layers; layer {layer_idx} asked. '
                             f'Build it with depth >= {layer_idx + 1}.')
        return self.trans_coeff[layer_idx].float()

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        scale = self._check_layer(layer_idx)
        extrinsics_q, _, cis_q = self.tables(pos_q)
        _, inverse_k, cis_k = self.tables(pos_k)
        q = self._transform(q, pos_q, _scaled_translation(extrinsics_q, scale), cis_q)
        k = self._transform(k, pos_k, _scaled_translation(inverse_k, scale).transpose(-2, -1), cis_k)
        return q, k

    def transform_v(self, v: torch.Tensor, pos_k: Positions, layer_idx: int) -> torch.Tensor:
        scale = self._check_layer(layer_idx)
        _, inverse_k, cis_k = self.tables(pos_k)
        return self._transform(v, pos_k, _scaled_translation(inverse_k, scale).transpose(-2, -1), cis_k)

    def transform_out(self, out: torch.Tensor, pos_q: Positions, layer_idx: int,
                      probs: torch.Tensor | None = None, pos_k: Positions | None = None) -> torch.Tensor:
        scale = self._check_layer(layer_idx)
        extrinsics_q, _, cis_q = self.tables(pos_q)
        return self._transform(out, pos_q, _scaled_translation(extrinsics_q, scale).transpose(-2, -1),
                               None if cis_q is None else inverse_rotations(cis_q))

    def no_weight_decay(self) -> set[str]:
        return {'trans_coeff'}

    def extra_repr(self) -> str:
        return (f'channels triv {self.triv_dim} | se3 {self.se3_dim} | so2 {4 * self.so2_freqs} of {self.head_dim}, '
                f'max_freq={self.max_freq}, on={self.on!r}, depth={self.depth}')

