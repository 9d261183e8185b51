"""ComRoPE: rotary embeddings with trainable commuting angle matrices (Yu et al., CVPR 2025)."""
from __future__ import annotations

from typing import ClassVar

import torch
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, model_facts
from vispe.encodings.rotary import angles_to_cis, rotate_pairs
from vispe.encodings.tables import TableCache
from vispe.geometry import Positions
from vispe.geometry.checks import checking_values
from vispe.geometry.device_constants import device_constant
from vispe.registry import ENCODINGS

VARIANTS = ('AP', 'LD')
# One forward's rotations: complex angles, (angles in the eigenbasis, the basis), or real matrices.
RotationTable = torch.Tensor | tuple[torch.Tensor, torch.Tensor]
# A spectrum whose eigenvalues come closer than this (relative to its largest) has no stable eigenbasis; the
# decomposition runs in float64, so nearer pairs than this still give float32-exact rotations and gradients.
SPECTRAL_GAP = 1e-6


def skew_eigenbasis(skew: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The real eigenbasis of skew-symmetric matrices of even size b.

    Args:
        skew: (..., b, b) real skew-symmetric S.

    Returns:
        basis (..., b, b) orthogonal Q whose columns (2k, 2k+1) span the k-th invariant plane, and rates
        (..., b/2) μ_k, with Qᵀ·S·Q = diag([[0, μ_k], [−μ_k, 0]]). From the Hermitian −i·S (``eigh``, whose
        gradient is exact while the μ are distinct): an eigenvector a + i·c of eigenvalue μ > 0 gives the
        plane (√2·a, √2·c). Decomposed in double precision (the matrices are few and small).
    """
    half = skew.shape[-1] // 2
    values, vectors = torch.linalg.eigh(skew.to(torch.complex128) * -1j)
    positive = vectors[..., half:]
    basis = torch.stack([positive.real, positive.imag], dim=-1).flatten(-2) * 2 ** 0.5
    return basis.to(skew.dtype), values[..., half:].to(skew.dtype)


def spectral_gap(skew: torch.Tensor) -> torch.Tensor:
    """The smallest distance between eigenvalues ±μ of the skew-symmetric blocks (..., b, b), relative to the
    largest |μ| (at least 1): 0 when a spectrum is degenerate."""
    values = torch.linalg.eigvalsh(skew.to(torch.complex128) * -1j)
    return values.diff(dim=-1).min() / values.abs().max().clamp(min=1.0)


def block_diagonal(blocks: torch.Tensor) -> torch.Tensor:
    """(..., n, b, b) -> (..., n·b, n·b) with the blocks on the diagonal."""
    count = blocks.shape[-3]
    eye = torch.eye(count, dtype=blocks.dtype, device=blocks.device).view(count, 1, count, 1)
    return (blocks.unsqueeze(-2) * eye).flatten(-4, -3).flatten(-2)


@ENCODINGS.register_module()
class ComRoPE(PositionEncoding):
    """ComRoPE, variants AP (axis-partitioned) and LD (linearly dependent), as Longin-Yu/ComRoPE.

    Each head's channels split into d/b blocks of size b. Block j of head h in layer l rotates by
    ``R(p) = exp(Σ_a p_a A_a)`` with skew-symmetric b×b generators built from a parameter P_{l,h,j}
    (``S = P − Pᵀ``):

    * AP: A_a = S if a = j mod 2 else 0, i.e. even blocks follow the row, odd blocks the column;
    * LD: A_a = θ_{l,a,j} · S, multipliers θ shared across heads.

    In both, the generator of a block is one scalar t(p) times S, so the A_a commute and
    ``R(x)ᵀR(y) = R(y − x)``. The reference materialises a dense d×d matrix exponential per token; vispe
    never does. For b = 2 the rotation is by angle t·(P₁₀ − P₀₁), applied like RoPE. For even b > 2 every
    token of a block shares S's orthogonal eigenbasis: S = Q·diag([[0, μ_k], [−μ_k, 0]])·Qᵀ, so
    ``exp(t·S) = Q·rot(−t·μ)·Qᵀ``, one d×d change of basis per head (computed once per forward by
    :func:`skew_eigenbasis`), a RoPE rotation by angles −t·μ_k, and the change back: the cost of RoPE plus two
    matrix products per head, not a ``matrix_exp`` per token. When a block's spectrum is degenerate (repeated or
    zero μ, e.g. ``init_std=0``) the eigenbasis and its gradient are not defined, and that forward uses
    ``torch.linalg.matrix_exp`` per token instead (the same rotation); odd b always does.

    Positions as the reference: (row, col) normalised to (i + 0.5)/n per axis, so a larger grid
    interpolates inside (0, 1); prefix tokens sit at (cls_position, cls_position), the image centre,
    and are rotated. Training perturbation (off by default; the paper's Table 1 uses 1): each patch
    position moves by clamp(N(0, 1)·intensity/2, ±1/2) patch units before normalisation. The
    reference scales q before rotating; rotation is linear, so scaling inside SDPA is the same. In
    cross-attention the queries' coordinates are normalised by the keys' grid.

    Args:
        head_dim: d, divisible by ``block_size`` (and by 2·block_size for AP).
        depth: number of layers (each has its own generators).
        num_heads: heads per layer.
        variant: 'AP' or 'LD'.
        block_size: b.
        init_std: std of the generator parameters P (the reference default 1.0).
        perturbation: training-time position jitter intensity.
        cls_position: normalised position of prefix tokens on both axes.

    Shapes: rotate q, k (B, heads, N, d) -> same.
    """

    family: ClassVar[str] = 'rotary'
    paper: ClassVar[str] = 'Yu et al., CVPR 2025 (ComRoPE)'
    examples: ClassVar[tuple[dict, ...]] = ({'variant': 'AP'}, {'variant': 'LD'}, {'variant': 'LD', 'block_size': 4})
    options: ClassVar[dict[str, Option]] = {
        **model_facts('head_dim', 'depth', 'num_heads'),
        'variant': Option(str, choices=VARIANTS, doc="'AP' (axis-partitioned) or 'LD' (linearly dependent); it "
                                                    'shapes the parameters.'),
        'block_size': Option(int, ge=1, doc='The block size b of the rotations (the paper uses 2 to 8); head_dim '
                                            'must be divisible by b (by 2b for AP). It shapes the parameters.'),
        'init_std': Option(float, ge=0, doc='The std of the generator parameters at initialisation is >= 0 (the '
                                            'reference uses 1); it only matters at build.'),
        'perturbation': Option(float, ge=0, doc='The intensity of the training-time position jitter is >= 0 (0 '
                                                'off; the paper uses 1); it has no effect in evaluation.'),
        'cls_position': Option(float, doc='The normalised position of prefix tokens on both axes (0.5, the image '
                                          'centre); the trained rotations depend on it, so it is fixed at build.'),
    }

    def __init__(self, head_dim: int, depth: int, num_heads: int, variant: str = 'AP', block_size: int = 2,
                 init_std: float = 1.0, perturbation: float = 0.0, cls_position: float = 0.5) -> None:
        super().__init__()
        multiple = 2 * block_size if variant == 'AP' else block_size
        if head_dim % multiple != 0:
            raise ValueError(f'ComRoPE-{variant} needs head_dim divisible by {multiple} (block_size={block_size}); '
                             f'got {head_dim}.')
        self.variant = variant
        self.block_size = block_size
        self.depth = depth
        self.perturbation = perturbation
        self.cls_position = cls_position
        num_blocks = head_dim // block_size
        self.freqs = nn.Parameter(torch.randn(depth, num_heads, num_blocks, block_size, block_size) * init_std)
        self._separated: bool | None = None
        if variant == 'LD':
            self.multiplier = nn.Parameter(torch.randn(depth, 2, num_blocks))
        else:
            self.register_buffer('axis_of_block', torch.arange(num_blocks) % 2, persistent=False)

    def positions(self, pos: Positions, extent_of: Positions | None = None) -> torch.Tensor:
        """(prefix + N, 2) or (B, prefix + N, 2) normalised (row, col) positions of all tokens of ``pos``,
        normalised by the grid of ``extent_of`` (default ``pos``; a decoder's queries use the keys' grid)."""
        extent_of = pos if extent_of is None else extent_of
        coords = pos.patch_coords().float()
        if self.training and self.perturbation > 0:
            coords = coords + (torch.randn_like(coords) * self.perturbation * 0.5).clamp(-0.5, 0.5)
        sizes = extent_of.real_grid_sizes()
        if sizes is None:
            extent = device_constant(extent_of.require_grid('ComRoPE'), coords)
        else:
            extent = sizes[:, None, :].to(coords.dtype)
        normalised = (coords + 0.5) / extent
        prefix = normalised.new_full((*normalised.shape[:-2], pos.num_prefix_tokens, 2), self.cls_position)
        return torch.cat([prefix, normalised], dim=-2)

    def skew(self) -> torch.Tensor:
        """S = P − Pᵀ, (depth, heads, d/b, b, b)."""
        return self.freqs - self.freqs.transpose(-1, -2)

    def block_scalars(self, positions: torch.Tensor) -> torch.Tensor:
        """t(p) per layer and block: (depth, [B,] N, d/b); the generator of block j is t·S_j."""
        if self.variant == 'AP':
            scalars = positions[..., self.axis_of_block]
            return scalars.expand(self.depth, *scalars.shape)
        theta = self.multiplier.float()
        theta = theta.view(self.depth, 2, *([1] * (positions.ndim - 1)), theta.shape[-1])
        rows, cols = positions[..., 0:1], positions[..., 1:2]
        return rows * theta[:, 0] + cols * theta[:, 1]

    def generators(self, pos: Positions, extent_of: Positions | None = None) -> torch.Tensor:
        """Σ_a p_a A_a per block: (depth, [B,] heads, N, d/b, b, b)."""
        scalars = self.block_scalars(self.positions(pos, extent_of)).unsqueeze(-3)
        skew = self.skew().float()
        if scalars.ndim == 5:
            skew = skew.unsqueeze(1)
        return scalars[..., None, None] * skew.unsqueeze(-4)

    def build_table(self, pos: Positions, extent_of: Positions | None = None) -> RotationTable:
        """The per-forward rotations of every layer, indexed by layer.

        b = 2: complex (depth, [B,] heads, N, d/2). Even b > 2: (complex angles (depth, [B,] heads, N, d/2) in the
        eigenbasis, the basis (depth, heads, d, d)). Odd b or a degenerate spectrum: real
        (depth, [B,] heads, N, d/b, b, b) matrix exponentials.
        """
        scalars = self.block_scalars(self.positions(pos, extent_of)).unsqueeze(-3)
        skew = self.skew().float()
        if self.block_size == 2:
            rates = skew[..., 1, 0]
            if scalars.ndim == 5:
                rates = rates.unsqueeze(1)
            return angles_to_cis(scalars * rates.unsqueeze(-2))
        if self.block_size % 2 == 0 and self.has_eigenbasis(skew):
            basis, rates = skew_eigenbasis(skew)
            if scalars.ndim == 5:
                rates = rates.unsqueeze(1)
            angles = -scalars.unsqueeze(-1) * rates.unsqueeze(-3)
            return angles_to_cis(angles.flatten(-2)), block_diagonal(basis)
        return torch.linalg.matrix_exp(self.generators(pos, extent_of))

    def has_eigenbasis(self, skew: torch.Tensor) -> bool:
        """Whether every block's spectrum is separated (see :func:`spectral_gap`), read where reading is free: on
        the host, and remembered for the parameters' version. On a GPU (a read would make the host wait; see
        :func:`~vispe.geometry.checks.checking_values`) the answer last read on the host stands — a degenerate
        spectrum keeps ``matrix_exp`` — and an answer of True becomes a device-side assertion; while torch.compile
        or torch.export trace the model, the same assertion is in the graph."""
        gap = spectral_gap(skew.detach())
        if checking_values(skew) and not TableCache.tracing():
            self._separated = bool(gap > SPECTRAL_GAP)
            return self._separated
        if self._separated is False and not TableCache.tracing():
            return False
        torch._assert_async(gap > SPECTRAL_GAP, 'ComRoPE: a block has repeated or zero rotation rates, whose '
                                                'eigenbasis is undefined; compile or run the model on a GPU only '
                                                'with separated rates (vispe.set_value_checks("always") checks them)')
        return True

    def prepare(self, pos: Positions) -> None:
        self.rotations(pos)

    def rotations(self, pos: Positions, extent_of: Positions | None = None) -> RotationTable:
        """This forward's rotations of ``pos`` (normalised by the grid of ``extent_of``, default ``pos``)."""
        if extent_of is None or extent_of is pos:
            return self.cached_table('rotations', pos, lambda: self.build_table(pos))
        return self.cached_table('rotations', pos, lambda: self.build_table(pos, extent_of), pos_k=extent_of)

    @staticmethod
    def layer_rotation(table: RotationTable, layer_idx: int) -> RotationTable:
        """One layer's entry of a table from :meth:`build_table`."""
        if isinstance(table, tuple):
            return tuple(part[layer_idx] for part in table)
        return table[layer_idx]

    def apply_rotation(self, x: torch.Tensor, rotation: RotationTable) -> torch.Tensor:
        """Rotate x (B, heads, N, d) by one layer's rotation."""
        if isinstance(rotation, tuple):
            cis, basis = rotation
            in_basis = x.float() @ basis
            return (rotate_pairs(in_basis, cis) @ basis.transpose(-1, -2)).to(x.dtype)
        if self.block_size == 2:
            return rotate_pairs(x, rotation)
        blocks = x.float().unflatten(-1, (-1, self.block_size))
        return torch.einsum('...kab,...kb->...ka', rotation, blocks).flatten(-2).to(x.dtype)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        if layer_idx >= self.depth:
            raise IndexError(f'ComRoPE has generators for {self.depth} layers; layer {layer_idx} asked.')
        rotation_q = self.layer_rotation(self.rotations(pos_q, pos_k), layer_idx)
        rotation_k = rotation_q if pos_k is pos_q else self.layer_rotation(self.rotations(pos_k), layer_idx)
        return self.apply_rotation(q, rotation_q), self.apply_rotation(k, rotation_k)

    def no_weight_decay(self) -> set[str]:
        return {'freqs', 'multiplier'} if self.variant == 'LD' else {'freqs'}

    def extra_repr(self) -> str:
        return (f'variant={self.variant!r}, block_size={self.block_size}, freqs={tuple(self.freqs.shape)}, '
                f'perturbation={self.perturbation}')
