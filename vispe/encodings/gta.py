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
per view; :attr:`vispe.geometry.Cameras.extrinsics`); or tokens with a pose each (``SceneGeometry.poses``
(B, N, 4, 4), scene -> token frame, used as E): a detector's object queries at their 3D reference points, which
then read camera tokens through ``E_query · E_camera⁻¹`` in cross-attention. Posed tokens have no image
coordinates: their SO(2) pairs stay unturned (angle 0), so a key's SO(2) turn enters as it is.

Image coordinates: a grid's cell (i, j) sits at ((i + ½)/h, (j + ½)/w) (the reference's token centres
``coord[4::8, 4::8]`` of a stride-8 grid); tokens given by ``coords`` alone (a decoder's target rays) carry (row,
col) in pixels of the view's image, divided by ``cameras.image_size`` (the reference's ``make_2dcoord``: pixel index
/ size). Prefix tokens are not transformed. Only relative transforms enter, so the loaders' canonical frame (every E
right-multiplied by the first input view's E⁻¹) changes nothing but rounding.
"""
from __future__ import annotations

import math
from typing import ClassVar, NamedTuple

import torch
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, model_fact
from vispe.encodings.rotary import angles_to_cis, rotate_pairs
from vispe.encodings.tables import TableCache
from vispe.geometry import Positions
from vispe.geometry.cameras import rigid_inverse
from vispe.geometry.device_constants import device_constant
from vispe.geometry.grid import grid_coords
from vispe.registry import ENCODINGS

__all__ = ['GTA', 'so2_angles']


def so2_angles(coords: torch.Tensor, num_freqs: int, max_freq: tuple[float, float] = (1.0, 1.0)) -> torch.Tensor:
    """GTA's SO(2) angles of (..., 2) image coordinates (row, col) in [0, 1): (..., 2F), pair p = 2f + a holds
    2π·max_freq[a]·2^(f+1−F)·coords[a] (the reference's ``make_SO2mats`` order)."""
    freqs = 2.0 ** (torch.arange(num_freqs, dtype=torch.float32, device=coords.device) + 1 - num_freqs)
    scale = device_constant([value * 2 * math.pi for value in max_freq], coords, torch.float32)
    return (coords.float()[..., None, :] * scale * freqs[:, None]).flatten(-2)


def translation_split(matrices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(..., 4, 4) rigid transforms as (rotation part, translation part): the first with the translation column
    zeroed, the second holding only it, so that ``rotation + s·translation`` is the transform with its translation
    scaled by s (the reference's ``scale_mask``), exactly."""
    column = torch.zeros_like(matrices)
    column[..., :3, 3] = matrices[..., :3, 3]
    return matrices - column, column


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


class GTATables(NamedTuple):
    """One token set's per-forward tables (cameras and coordinates only, no parameters).

    ``rotation``, ``translation``: (3, B, V, g, g) per role — queries sT(E), output sT(E)ᵀ, keys and values sT(P)ᵀ
    in row-vector form — as kron(I_{g/4}, ·) blocks, split so that a layer's blocks are ``rotation + s·translation``
    for its scale s. ``cis``, ``cis_inverse``: the SO(2) rotations, tokens-major ((N, 1, 2F) or per sample
    (B, N, 1, 2F), broadcasting over the heads; the real form with a trailing (cos, sin) axis while traced), or None.
    """

    rotation: torch.Tensor
    translation: torch.Tensor
    cis: torch.Tensor | None
    cis_inverse: torch.Tensor | None


ROLES = {'q': 0, 'out': 1, 'kv': 2}


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
    requires: ClassVar[tuple[str, ...]] = ('grid', 'cameras')
    reads_poses: ClassVar[bool] = True
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
        if pos.has('poses') and not pos.has('cameras'):
            return pos.num_positions
        if not pos.has('cameras'):
            have = ', '.join(pos.geometry()) or 'only a token count'
            raise ValueError(f'GTA needs the cameras of image tokens (Positions(camera=CameraGeometry(cameras=...))) '
                             f'or a pose per token (Positions(scene=SceneGeometry(poses=(B, N, 4, 4))), e.g. a '
                             f'decoder\'s object queries); these positions carry {have}.')
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
            return (pos.coords.float() + 0.5) / device_constant(pos.grid_size, pos.coords, torch.float32)
        if pos.coords is None or pos.coords.shape[-1] != 2:
            got = 'none' if pos.coords is None else f'D = {pos.coords.shape[-1]}'
            raise ValueError(f'GTA needs image coordinates: a grid, or Positions.coords (row, col) in pixels of the '
                             f'view\'s image; got {got}.')
        size = device_constant(pos.camera.cameras.image_size, pos.coords, torch.float32)
        return pos.coords.float() / size

    def tables(self, pos: Positions) -> GTATables:
        """This forward's :class:`GTATables` of one token set, built once per :class:`Positions`."""
        def build() -> GTATables:
            self._views(pos)
            posed = not pos.has('cameras')
            if posed:
                poses = pos.scene.poses.float()
                extrinsics, inverse = poses, rigid_inverse(poses)
            else:
                extrinsics, inverse = pos.camera.cameras.extrinsics.float(), pos.camera.cameras.cam2lidar.float()
            split_e, split_p = translation_split(extrinsics), translation_split(inverse)
            rotation, translation = (torch.stack([e, e.transpose(-2, -1), p.transpose(-2, -1)])
                                     for e, p in zip(split_e, split_p))
            group = self.block_group
            cis = cis_inverse = None
            if self.so2_freqs:
                coords = (torch.zeros(pos.num_positions, 2, device=pos.device) if posed
                          else self.image_coords(pos))
                angles = so2_angles(coords, self.so2_freqs, self.max_freq)
                cis = angles_to_cis(angles.unsqueeze(-2))
                cis_inverse = inverse_rotations(cis)
            return GTATables(repeat_block(rotation, group), repeat_block(translation, group), cis, cis_inverse)
        return self.cached_table('tables', pos, build)

    @property
    def block_group(self) -> int:
        """SE(3) blocks per block-diagonal product: 4 (16×16 products; on the CPU about twice as fast as 32×32 and
        five times as fast as 4×4), or the largest count under it that divides se3_dim / 4."""
        return next(count for count in (4, 3, 2, 1) if (self.se3_dim // 4) % count == 0)

    def prepare(self, pos: Positions) -> None:
        self.tables(pos)

    def _blocks(self, tables: GTATables, role: str, layer_idx: int) -> torch.Tensor | None:
        """(B, V, g, g): this layer's block-diagonal SE(3) factor of ``role``, its translations scaled by s (None
        without SE(3) channels)."""
        if layer_idx >= self.depth:
            raise IndexError(f'GTA has a translation scale for {self.depth} layers; layer {layer_idx} asked. '
                             f'Build it with depth >= {layer_idx + 1}.')
        if not self.se3_dim:
            return None
        index = ROLES[role]
        return torch.addcmul(tables.rotation[index], tables.translation[index], self.trans_coeff[layer_idx].float())

    @staticmethod
    def _se3_products(channels: torch.Tensor, blocks: torch.Tensor) -> torch.Tensor:
        """channels (B, N, heads, se3) tokens-major, view-major tokens, each 4-channel block right-multiplied by its
        view's matrix from ``blocks`` (B|1, V, g, g): one (tokens·heads·se3/g × g) @ (g × g) product per sample and
        view, in float32."""
        rows = channels.float().reshape(channels.shape[0], blocks.shape[1], -1, blocks.shape[-1])
        return (rows @ blocks).view(channels.shape)

    def _se3_products_into(self, out: torch.Tensor, tokens: torch.Tensor, blocks: torch.Tensor) -> None:
        """:meth:`_se3_products` of float32 ``tokens`` (B, N, heads, d) written straight into ``out`` (B, N, heads,
        d), contiguous: one product per g-channel group, its rows (the tokens·heads of a sample and view) at the stride
        of a head, so no temporary beyond the copy that strided inputs (q, k, v of a fused qkv) take into rows."""
        triv, se3, group = self.triv_dim, self.se3_dim, blocks.shape[-1]
        batch_views = out.shape[0] * blocks.shape[1]
        blocks = blocks.expand(out.shape[0], -1, -1, -1).reshape(batch_views, group, group)
        rows_in = tokens[..., triv:triv + se3].reshape(batch_views, -1, se3)
        rows_out = out.view(batch_views, -1, out.shape[-1])[..., triv:triv + se3]
        for start in range(0, se3, group):
            torch.bmm(rows_in[..., start:start + group], blocks, out=rows_out[..., start:start + group])

    def _transform(self, x: torch.Tensor, pos: Positions, blocks: torch.Tensor | None,
                   cis: torch.Tensor | None) -> torch.Tensor:
        """x (B, heads, prefix + N, d) with the SE(3) blocks right-multiplied by ``blocks`` (B|1, V, g, g) (row-vector
        form) and the SO(2) pairs rotated by ``cis``. Works tokens-major — (B, N, heads, d), where all heads and
        tokens of a view share its matrix — and returns a (B, heads, N, d) view of a new (B, N, heads, d) tensor:
        the layout that SDPA's output has and the attention's output projection reads without a copy. Without
        autograd the parts are written into it (``out=`` products); with autograd, and while a model is traced
        (exporters translate writes into slices of a new tensor unreliably), they are concatenated."""
        pos.check_tokens(x.shape[0], x.shape[2], 'GTA')
        prefix, triv, se3, dim = pos.num_prefix_tokens, self.triv_dim, self.se3_dim, self.head_dim
        tokens = x[:, :, prefix:].transpose(1, 2)
        recording = torch.is_grad_enabled() and (x.requires_grad or (blocks is not None and blocks.requires_grad))
        if TableCache.tracing() or recording or x.dtype != torch.float32:
            parts = [tokens[..., :triv]] if triv else []
            if se3:
                parts.append(self._se3_products(tokens[..., triv:triv + se3], blocks).to(x.dtype))
            if cis is not None:
                parts.append(rotate_pairs(tokens[..., triv + se3:dim], cis))
            out = torch.cat(parts, dim=-1)
            if prefix:
                out = torch.cat([x[:, :, :prefix].transpose(1, 2), out], dim=1)
            return out.transpose(1, 2)
        out = torch.empty(x.shape[0], x.shape[2], x.shape[1], dim, dtype=x.dtype, device=x.device)
        if prefix:
            out[:, :prefix] = x[:, :, :prefix].transpose(1, 2)
        target = out[:, prefix:]
        if triv:
            target[..., :triv] = tokens[..., :triv]
        if se3 and prefix:
            target[..., triv:triv + se3] = self._se3_products(tokens[..., triv:triv + se3], blocks)
        elif se3:
            self._se3_products_into(out, tokens, blocks)
        if cis is not None:
            rotate_pairs_into(target[..., triv + se3:dim], tokens[..., triv + se3:dim], cis)
        return out.transpose(1, 2)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        tables_q, tables_k = self.tables(pos_q), self.tables(pos_k)
        q = self._transform(q, pos_q, self._blocks(tables_q, 'q', layer_idx), tables_q.cis)
        k = self._transform(k, pos_k, self._blocks(tables_k, 'kv', layer_idx), tables_k.cis)
        return q, k

    def transform_v(self, v: torch.Tensor, pos_k: Positions, layer_idx: int) -> torch.Tensor:
        tables = self.tables(pos_k)
        return self._transform(v, pos_k, self._blocks(tables, 'kv', layer_idx), tables.cis)

    def transform_out(self, out: torch.Tensor, pos_q: Positions, layer_idx: int,
                      probs: torch.Tensor | None = None, pos_k: Positions | None = None) -> torch.Tensor:
        tables = self.tables(pos_q)
        return self._transform(out, pos_q, self._blocks(tables, 'out', layer_idx), tables.cis_inverse)

    def no_weight_decay(self) -> set[str]:
        return {'trans_coeff'}

    def extra_repr(self) -> str:
        return (f'channels triv {self.triv_dim} | se3 {self.se3_dim} | so2 {4 * self.so2_freqs} of {self.head_dim}, '
                f'max_freq={self.max_freq}, on={self.on!r}, depth={self.depth}')

