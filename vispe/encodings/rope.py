"""2D rotary position embeddings for ViTs: RoPE-Axial and RoPE-Mixed (Heo et al., ECCV 2024)."""
from __future__ import annotations

from typing import ClassVar

import torch
from timm.layers.pos_embed_sincos import init_random_2d_freqs
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, Search, model_fact, model_facts
from vispe.encodings.rotary import angles_to_cis, rotate_pairs, rotation_ndim, with_identity_prefix, xy_positions
from vispe.geometry import Positions
from vispe.registry import ENCODINGS

HEAD_DIM = model_fact('head_dim', multiple_of=4, doc='The head width d rotates x and y channel pairs, so it must be '
                                                    'a multiple of 4: choose embed_dim / num_heads divisible by 4.')
POSITION_SCALE = Option(float, gt=0, test_time=True, search=Search(factors=(1 / 3, 1 / 2, 2 / 3)),
                        doc='The factor on positions is positive (1 in training, e.g. train_grid / test_grid to '
                            'interpolate); it only sets the rotation tables, so it may change at test time.')


@ENCODINGS.register_module()
class RoPEAxial(PositionEncoding):
    """Axial 2D RoPE (Heo et al., "Rotary Position Embedding for Vision Transformer", ECCV 2024).

    As naver-ai/rope-vit's ``compute_axial_cis``: with f_k = θ^(−4k/d), k = 0…d/4−1, the first d/4
    channel pairs of each head rotate by t_x·f_k and the last d/4 by t_y·f_k, where (t_x, t_y) =
    (column, row) in integer patch units. Pairs are interleaved (2k, 2k+1). Prefix tokens are not
    rotated. Angles are float32 whatever the autocast dtype. No parameters; tables are cached by grid.

    At a new resolution the positions extend (extrapolation). Test-time options, as the LookHere
    paper tunes per resolution: change ``theta`` (100/160/190/250/700/1250 for 224…1024 px) or
    multiply positions by ``position_scale`` (e.g. train_grid/test_grid interpolates instead).

    Args:
        head_dim: d, divisible by 4.
        theta: frequency base (100 in rope-vit).
        position_scale: factor on the positions.

    In cross-attention (a detector's decoder) queries rotate at their coordinates (reference points in
    patch units) and keys at theirs, so the logits depend on the query-key offset only.

    Shapes: rotate q (B, heads, Nq, d), k (B, heads, Nk, d) -> same.
    """

    family: ClassVar[str] = 'rotary'
    paper: ClassVar[str] = 'Heo et al., ECCV 2024 (rope-vit)'
    options: ClassVar[dict[str, Option]] = {
        'head_dim': HEAD_DIM,
        'theta': Option(float, gt=0, test_time=True, search=Search(factors=(0.5, 2, 4, 8)),
                        doc='The RoPE base is positive (rope-vit uses 100; the LookHere paper raises it with the '
                            'resolution); it only sets the rotation tables, so it may change at test time.'),
        'position_scale': POSITION_SCALE,
    }

    def __init__(self, head_dim: int, theta: float = 100.0, position_scale: float = 1.0) -> None:
        super().__init__()
        self.head_dim = head_dim
        self.theta = theta
        self.position_scale = position_scale

    def frequencies(self, device: torch.device | None = None) -> torch.Tensor:
        """f_k = θ^(−4k/d), (d/4,) float32."""
        return 1.0 / self.theta ** (torch.arange(0, self.head_dim, 4, device=device, dtype=torch.float32)
                                    / self.head_dim)

    def build_cis(self, pos: Positions) -> torch.Tensor:
        """(prefix + N, d/2) or (B, prefix + N, d/2) complex rotations, identity on prefix tokens."""
        freqs = self.frequencies(pos.device)
        t_x, t_y = xy_positions(pos)
        scale = self.position_scale
        angles = torch.cat([(t_x * scale).unsqueeze(-1) * freqs, (t_y * scale).unsqueeze(-1) * freqs], dim=-1)
        return with_identity_prefix(angles_to_cis(angles), pos.num_prefix_tokens)

    def prepare(self, pos: Positions) -> None:
        self.rotations(pos)

    def rotations(self, pos: Positions) -> torch.Tensor:
        """This forward's rotations of ``pos`` (:meth:`build_cis`): kept across forwards on the integer grid."""
        return self.cached_table('rotations', pos, lambda: self.build_cis(pos), across_forwards=pos.has_default_coords)

    def head_rotations(self, pos: Positions) -> torch.Tensor:
        """The rotations broadcastable against (B, heads, N, d/2): (N, d/2) or (B, 1, N, d/2)."""
        cis = self.rotations(pos)
        return cis.unsqueeze(1) if rotation_ndim(cis) == 3 else cis

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        cis_q = self.head_rotations(pos_q)
        cis_k = cis_q if pos_k is pos_q else self.head_rotations(pos_k)
        return rotate_pairs(q, cis_q), rotate_pairs(k, cis_k)

    def extra_repr(self) -> str:
        return f'head_dim={self.head_dim}, theta={self.theta}, position_scale={self.position_scale}'


@ENCODINGS.register_module()
class RoPEMixed(PositionEncoding):
    """RoPE-Mixed: learnable 2D frequencies per layer and head (Heo et al., ECCV 2024).

    Channel pair k of head h in layer l rotates by t_x·fx[l,h,k] + t_y·fy[l,h,k]. The frequencies are
    initialised as rope-vit's ``init_random_2d_freqs`` (timm's implementation is used): magnitudes
    θ^(−4k/d) with θ = 10, a random angle α per layer and head for the first d/4 pairs and α + π/2 for
    the last d/4. With ``random_angles=False`` (α = 0) the layout is RoPE-Axial's. Parameter
    ``freqs`` (2, depth, heads, d/2), excluded from weight decay, as in timm's
    ``RotaryEmbeddingMixed``. Prefix tokens are not rotated; angles are float32. The table of all
    layers is built once per forward.

    Args:
        head_dim: d, divisible by 4.
        depth: number of layers.
        num_heads: heads per layer.
        theta: frequency base of the initialisation.
        random_angles: draw α per layer and head (rope-vit); False gives the axial layout.
        position_scale: test-time factor on the positions.

    Shapes: rotate q, k (B, heads, N, d) -> same.
    """

    family: ClassVar[str] = 'rotary'
    foreign_names: ClassVar[dict[str, str]] = {'freqs': 'rope.freqs'}  # timm's vit_*_rope_mixed_* (Eva)
    paper: ClassVar[str] = 'Heo et al., ECCV 2024 (rope-vit)'
    options: ClassVar[dict[str, Option]] = {
        'head_dim': HEAD_DIM,
        **model_facts('depth', 'num_heads'),
        'theta': Option(float, gt=0, doc='The base of the initial frequencies is positive (rope-vit uses 10); the '
                                         'learned frequencies replace it, so it only matters at build.'),
        'random_angles': Option(bool, doc='Whether each layer and head draws its angle at initialisation (rope-vit: '
                                          'True); it only matters at build.'),
        'position_scale': POSITION_SCALE,
    }

    def __init__(self, head_dim: int, depth: int, num_heads: int, theta: float = 10.0, random_angles: bool = True,
                 position_scale: float = 1.0) -> None:
        super().__init__()
        self.depth = depth
        self.init_theta = theta
        self.position_scale = position_scale
        self.freqs = nn.Parameter(init_random_2d_freqs(head_dim, depth, num_heads, temperature=theta,
                                                       rotate=random_angles))

    def build_cis(self, pos: Positions) -> torch.Tensor:
        """(depth, heads, prefix + N, d/2), or (depth, B, heads, prefix + N, d/2) for per-sample positions."""
        t_x, t_y = xy_positions(pos)
        freqs = self.freqs.float()
        freqs_x, freqs_y = freqs[0].unsqueeze(-2), freqs[1].unsqueeze(-2)
        if t_x.ndim == 2:
            freqs_x, freqs_y = freqs_x.unsqueeze(1), freqs_y.unsqueeze(1)
            t_x, t_y = t_x.unsqueeze(1), t_y.unsqueeze(1)
        scale = self.position_scale
        angles = (t_x * scale).unsqueeze(-1) * freqs_x + (t_y * scale).unsqueeze(-1) * freqs_y
        return with_identity_prefix(angles_to_cis(angles), pos.num_prefix_tokens)

    def prepare(self, pos: Positions) -> None:
        self.rotations(pos)

    def rotations(self, pos: Positions) -> torch.Tensor:
        """This forward's rotations of ``pos`` (:meth:`build_cis`; the frequencies are learned: per forward)."""
        return self.cached_table('rotations', pos, lambda: self.build_cis(pos))

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        if layer_idx >= self.depth:
            raise IndexError(f'RoPEMixed has frequencies for {self.depth} layers; layer {layer_idx} asked.')
        cis_q = self.rotations(pos_q)[layer_idx]
        cis_k = cis_q if pos_k is pos_q else self.rotations(pos_k)[layer_idx]
        return rotate_pairs(q, cis_q), rotate_pairs(k, cis_k)

    def no_weight_decay(self) -> set[str]:
        return {'freqs'}

    def extra_repr(self) -> str:
        return f'freqs={tuple(self.freqs.shape)}, init_theta={self.init_theta}, position_scale={self.position_scale}'
