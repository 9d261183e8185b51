"""SeqPE: each patch's position written as digits and embedded by a small sequential encoder (Li et al., 2025)."""
from __future__ import annotations

import random
from typing import ClassVar

import torch
import torch.nn.functional as F
from timm.layers import trunc_normal_
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, Search, model_facts
from vispe.encodings.seqpe.encoder import SequentialPositionEncoder
from vispe.encodings.seqpe.losses import contrastive_loss, distillation_loss
from vispe.encodings.seqpe.samplers import contrastive_positions, distillation_positions
from vispe.encodings.seqpe.tokens import check_positions_fit, digit_tokens
from vispe.encodings.tables import TableCache
from vispe.geometry import Positions, grid_coords, to_2tuple
from vispe.geometry.checks import host_scalar
from vispe.geometry.device_constants import device_constant
from vispe.registry import ENCODINGS

APPLY_MODES = ('attn_mul', 'add')
PAPER_WIDTH = 384
EXTRAPOLATIONS = ('extend', 'interpolate')
EVAL_GRIDS = 4                   # grids kept for evaluation (sizes of a resolution sweep)


@ENCODINGS.register_module()
class SeqPE(PositionEncoding):
    """Sequential position encoding (Li et al., "SeqPE: Transformer with Sequential Position Encoding", 2025;
    ghrua/seqpe ``image_seqpe``).

    Patch (i, j) is written as the digits of i and then of j, each left-padded to ``max_digits``; a small causal
    transformer (:class:`~vispe.encodings.seqpe.encoder.SequentialPositionEncoder`) turns the digits into an
    embedding e(i, j) of the token width C, once per forward for the whole grid. How it enters the ViT (``method``):

    - ``'attn_mul'`` (the paper's ImageNet recipe): every layer l has its own linear map
      ``[m_q, m_k] = W_l e + b_l`` (C -> 2C), split into heads, and multiplies queries and keys elementwise,
      ``q ⊙ m_q``, ``k ⊙ m_k`` (values untouched); each prefix token has a learned position vector of its own that
      goes through the same maps;
    - ``'add'``: e is added to the patch tokens (the prefix tokens get their learned vectors).

    In training, with probability ``shift_rate`` a step encodes ``shift_grids`` copies of the grid moved to starts
    drawn from a pool of ``shift_pool`` starts in [0, 10^max_digits − h] × [0, 10^max_digits − w] (drawn once, at
    build, from torch's generator), image b reading copy b mod ``shift_grids``: positions the training grid never
    reaches get trained (these draws make a compiled training forward break its graph; eval compiles whole). Two
    regularisers, turned on by the classifier's ``encoding_losses``
    (:meth:`training_losses`): ``contrastive`` (embedding dot products ranking the nearest of K candidates first) and
    ``distillation`` (shifted windows' similarity structure pulled onto the training grid's; only after an unshifted
    step), :mod:`vispe.encodings.seqpe.samplers` and :mod:`~vispe.encodings.seqpe.losses`.

    At test time the grid simply grows (``extrapolation='extend'``, the paper's) up to 10^max_digits cells a side;
    ``'interpolate'`` resamples the training grid's embeddings bicubically instead (the reference's alternative).

    Args:
        embed_dim, num_heads, head_dim, depth, grid_size, num_prefix_tokens: the ViT's (model facts).
        method: ``'attn_mul'`` or ``'add'``.
        hidden_dim: the sequential encoder's width (None: 384, the paper's, or embed_dim if narrower).
        encoder_depth: its blocks (2).
        max_digits: digits per coordinate (2: positions up to 99).
        dropout: its residual dropout (0.1; the paper's ViT-B: 0.3).
        shift_rate, shift_grids, shift_pool: the training shift (0.1, 32, 320).
        contrastive_pivots, contrastive_candidates: per step (32, 64).
        distillation_windows, distillation_cells: per step (32; 64 or the grid's cells if fewer).
        extrapolation: test-time, see above.

    Shapes: rotate q (B, heads, prefix + N, d), k the same -> same; embed (B, prefix + N, C) -> same.
    """

    family: ClassVar[str] = 'sequential'
    paper: ClassVar[str] = 'Li et al., 2025 (SeqPE); ghrua/seqpe'
    loss_terms: ClassVar[tuple[str, ...]] = ('contrastive', 'distillation')
    examples: ClassVar[tuple[dict, ...]] = ({}, {'method': 'add'})
    options: ClassVar[dict[str, Option]] = {
        **model_facts('embed_dim', 'num_heads', 'head_dim', 'depth', 'grid_size', 'num_prefix_tokens'),
        'method': Option(str, choices=APPLY_MODES, doc="How the embedding enters: 'attn_mul' (per-layer maps multiply "
                                                      "queries and keys; the paper) or 'add' (added to the tokens)."),
        'hidden_dim': Option(int, ge=1, optional=True, doc='The sequential encoder\'s width; None: 384 (the paper\'s, '
                                                           'ViT-S and ViT-B) or embed_dim if narrower.'),
        'encoder_depth': Option(int, ge=1, doc='Blocks of the sequential encoder (2).'),
        'max_digits': Option(int, ge=2, le=6, doc='Digits per coordinate (2: up to 99 cells a side); it shapes the '
                                                  'encoder\'s index table.'),
        'dropout': Option(float, ge=0, lt=1, doc='Residual dropout of the sequential encoder (0.1).'),
        'shift_rate': Option(float, ge=0, le=1, doc='Share of training steps that encode shifted grids (0.1).'),
        'shift_grids': Option(int, ge=1, doc='Shifted grids per shifted step (32).'),
        'shift_pool': Option(int, ge=1, doc='Starts drawn at build for the shifted grids (320).'),
        'contrastive_pivots': Option(int, ge=1, doc='Pivots of the contrastive loss per step (32).'),
        'contrastive_candidates': Option(int, ge=2, doc='Candidates per pivot (64).'),
        'distillation_windows': Option(int, ge=1, doc='Shifted windows of the distillation loss per step (32).'),
        'distillation_cells': Option(int, ge=2, optional=True, doc='Cells per window (None: 64, or the grid\'s cells '
                                                                   'if fewer).'),
        'extrapolation': Option(str, choices=EXTRAPOLATIONS, test_time=True, search=Search(values=EXTRAPOLATIONS),
                                doc="Another grid: 'extend' (encode its positions; the paper) or 'interpolate' "
                                    "(resample the training grid's); no parameter depends on it."),
    }

    def __init__(self, embed_dim: int, num_heads: int, head_dim: int, depth: int, grid_size: int | tuple[int, int],
                 num_prefix_tokens: int = 1, method: str = 'attn_mul', hidden_dim: int | None = None,
                 encoder_depth: int = 2, max_digits: int = 2, dropout: float = 0.1, shift_rate: float = 0.1,
                 shift_grids: int = 32, shift_pool: int = 320, contrastive_pivots: int = 32,
                 contrastive_candidates: int = 64, distillation_windows: int = 32,
                 distillation_cells: int | None = None, extrapolation: str = 'extend') -> None:
        super().__init__()
        self.grid_size = to_2tuple(grid_size)
        check_positions_fit(max(self.grid_size) - 1, max_digits, 'SeqPE')
        if method == 'attn_mul' and num_heads * head_dim != embed_dim:
            raise ValueError(f"SeqPE method='attn_mul' splits the C={embed_dim} modulators into {num_heads} heads of "
                             f"{head_dim}; they do not add up. Use method='add' for this model.")
        cells = self.grid_size[0] * self.grid_size[1]
        distillation_cells = min(64, cells) if distillation_cells is None else distillation_cells
        if distillation_cells > cells:
            raise ValueError(f'SeqPE distillation_cells={distillation_cells} exceeds the {cells} cells of the '
                             f'training grid {self.grid_size}; choose at most {cells}.')
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, head_dim
        self.num_prefix_tokens, self.method, self.max_digits = num_prefix_tokens, method, max_digits
        self.shift_rate, self.shift_grids = shift_rate, shift_grids
        self.contrastive_pivots, self.contrastive_candidates = contrastive_pivots, contrastive_candidates
        self.distillation_windows, self.distillation_cells = distillation_windows, distillation_cells
        self.extrapolation = extrapolation
        hidden_dim = min(PAPER_WIDTH, embed_dim) if hidden_dim is None else hidden_dim
        self.encoder = SequentialPositionEncoder(2, max_digits, hidden_dim, embed_dim, depth=encoder_depth,
                                                 dropout=dropout)
        self.loss_heads = self.encoder.blocks[0].num_heads
        if embed_dim % self.loss_heads:
            raise ValueError(f'SeqPE\'s distillation loss splits the C={embed_dim} embeddings into the encoder\'s '
                             f'{self.loss_heads} heads (hidden_dim={hidden_dim} / 64); they do not divide. Choose a '
                             f'hidden_dim whose heads divide embed_dim.')
        self.prefix_embed = nn.Parameter(torch.zeros(1, num_prefix_tokens, embed_dim)) if num_prefix_tokens else None
        if self.prefix_embed is not None:
            trunc_normal_(self.prefix_embed, std=.02)
        self.modulators = nn.ModuleList(nn.Linear(embed_dim, 2 * embed_dim) for _ in range(depth)) \
            if method == 'attn_mul' else None
        if self.modulators is not None:
            for layer in self.modulators:
                trunc_normal_(layer.weight, std=.02)
                nn.init.zeros_(layer.bias)
        rows, cols = (10 ** max_digits - side + 1 for side in self.grid_size)
        chosen = torch.randperm(rows * cols)[:shift_pool]
        self.register_buffer('shift_starts', torch.stack([chosen // cols, chosen % cols], -1), persistent=False)
        self.last_step_shifted = False
        self._teacher: torch.Tensor | None = None
        self._eval_grids: dict[tuple, torch.Tensor] = {}

    def reaches_cross_attention(self) -> bool:
        """'add' does (its embedding goes to a decoder's memory keys); 'attn_mul' does not: a decoder's queries sit at
        continuous reference points, which have no digits."""
        return self.method == 'add'

    @property
    def active_hooks(self) -> frozenset[str]:
        return frozenset({'rotate'} if self.method == 'attn_mul' else {'embed'})

    def embeddings(self, positions: torch.Tensor) -> torch.Tensor:
        """(..., 2) integer (row, col) positions -> (..., C) embeddings."""
        flat = positions.reshape(-1, 2)
        return self.encoder(digit_tokens(flat, self.max_digits)).reshape(*positions.shape[:-1], -1)

    def grid_embeddings(self, grid_size: tuple[int, int], device: torch.device) -> torch.Tensor:
        """(h·w, C): the embeddings of a grid's cells from (0, 0), row-major. Outside training with gradients off
        (evaluation), kept for later forwards until a parameter of the encoder changes (the reference encodes the
        grid once per evaluation): the key holds every parameter's storage and version."""
        if self.training or torch.is_grad_enabled() or TableCache.tracing():
            return self.embeddings(grid_coords(grid_size, device=device).long())
        key = (tuple(grid_size), torch.device(device), torch.is_inference_mode_enabled(),
               tuple((p.data_ptr(), p._version, p.dtype) for p in self.encoder.parameters()))
        if key not in self._eval_grids:
            if len(self._eval_grids) >= EVAL_GRIDS:
                self._eval_grids.pop(next(iter(self._eval_grids)))
            self._eval_grids[key] = self.embeddings(grid_coords(grid_size, device=device).long())
        return self._eval_grids[key]

    def _grid_table(self, pos: Positions) -> torch.Tensor:
        """(S, N, C): this forward's embeddings of the grid (S shifted copies in a shifted training step)."""
        grid = pos.grid_size
        self.last_step_shifted, self._teacher = False, None
        if self.training and self.shift_rate > 0 and host_scalar(torch.rand((), device='cpu')) < self.shift_rate:
            check_positions_fit(max(grid) - 1, self.max_digits, 'SeqPE')
            choices = max(1, len(self.shift_starts) - self.shift_grids + 1)
            first = host_scalar(torch.randint(0, choices, (), device='cpu'))
            starts = self.shift_starts[first:first + self.shift_grids].to(pos.device)
            starts = torch.minimum(starts, device_constant([10 ** self.max_digits - side for side in grid], starts))
            self.last_step_shifted = True
            return self.embeddings(starts[:, None] + grid_coords(grid, device=pos.device).long())
        if tuple(grid) != self.grid_size and self.extrapolation == 'interpolate' and not self.training:
            trained = self.grid_embeddings(self.grid_size, pos.device)
            table = trained.T.reshape(1, -1, *self.grid_size)
            resized = F.interpolate(table, size=tuple(grid), mode='bicubic', align_corners=False)
            return resized.flatten(2).transpose(1, 2)
        check_positions_fit(max(grid) - 1, self.max_digits, 'SeqPE')
        table = self.grid_embeddings(grid, pos.device)[None]
        if self.training and tuple(grid) == self.grid_size:
            self._teacher = table[0].detach()
        return table

    def table(self, pos: Positions) -> torch.Tensor:
        """(S, prefix + N, C): the prefix vectors and the grid's embeddings, built once per forward."""
        def build() -> torch.Tensor:
            self.check_sequence(pos, self.num_prefix_tokens)
            grid = self._grid_table(pos)
            if self.prefix_embed is None:
                return grid
            return torch.cat([self.prefix_embed.expand(len(grid), -1, -1).to(grid.dtype), grid], dim=1)
        return self.cached_table('table', pos, build)

    def prepare(self, pos: Positions) -> None:
        self.table(pos)

    def position_embedding(self, pos: Positions) -> torch.Tensor | None:
        """(1, N, C): with ``method='add'``, the embedding of the grid's own positions (what a detector adds to its
        keys; the training shift applies only where tokens are embedded); None with ``'attn_mul'``, which adds
        nothing."""
        if self.method != 'add':
            return None
        def build() -> torch.Tensor:
            self.check_sequence(pos, pos.num_prefix_tokens)
            check_positions_fit(max(pos.grid_size) - 1, self.max_digits, 'SeqPE')
            return self.grid_embeddings(pos.grid_size, pos.device)[None]
        return self.cached_table('unshifted', pos, build)

    @staticmethod
    def per_image(table: torch.Tensor, batch: int) -> torch.Tensor:
        """Image b reads copy b mod S of an (S, ...) table."""
        if len(table) == 1:
            return table
        return table[torch.arange(batch, device=table.device) % len(table)]

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        if self.method != 'add':
            return x
        pos.check_tokens(x.shape[0], x.shape[1], 'SeqPE')
        return x + self.per_image(self.table(pos), len(x)).to(x.dtype)

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        if self.method != 'attn_mul':
            return q, k
        if pos_k is not pos_q:
            raise ValueError("SeqPE method='attn_mul' modulates the queries and keys of one token set (self-attention); "
                             "in cross-attention use method='add'.")
        if layer_idx >= len(self.modulators):
            raise IndexError(f'SeqPE has modulators for {len(self.modulators)} layers; layer {layer_idx} asked.')
        modulators = self.modulators[layer_idx](self.table(pos_q)).unflatten(-1, (2, self.num_heads, self.head_dim))
        scales = self.per_image(modulators, len(q)).to(q.dtype)
        scale_q, scale_k = scales.permute(2, 0, 3, 1, 4)                     # (B|1, heads, prefix + N, d) each
        return q * scale_q, k * scale_k

    def training_losses(self, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """The regularisers named (``contrastive``, ``distillation``), unweighted, from positions drawn with a
        generator seeded by torch's (and the process's rank, so that each process draws its own, as the reference
        seeds its samplers per rank); distillation is 0 after a shifted step (as the reference, which skips it), and
        its teachers are the training grid's embeddings of the step's forward (detached)."""
        rank = torch.distributed.get_rank() if torch.distributed.is_available() and \
            torch.distributed.is_initialized() else 0
        rng = random.Random(host_scalar(torch.randint(0, 2 ** 62, (), device='cpu')) + rank)
        device = self.encoder.out_proj.weight.device
        losses = {}
        if 'contrastive' in names:
            pivots, candidates, nearest = contrastive_positions(self.contrastive_pivots, self.contrastive_candidates,
                                                                self.max_digits, rng)
            embedded = self.embeddings(torch.cat([pivots[:, None], candidates], 1).to(device))
            losses['contrastive'] = contrastive_loss(embedded[:, 0], embedded[:, 1:], nearest.to(device))
        if 'distillation' in names:
            if self.last_step_shifted:
                losses['distillation'] = self.encoder.out_proj.weight.new_zeros(())
            else:
                students, teachers = distillation_positions(self.distillation_windows, self.distillation_cells,
                                                            self.grid_size, self.max_digits, rng)
                grid = self._teacher
                if grid is None:
                    grid = self.grid_embeddings(self.grid_size, device).detach()
                losses['distillation'] = distillation_loss(self.embeddings(students.to(device)),
                                                           grid[teachers.to(device)], self.loss_heads)
        return losses

    def no_weight_decay(self) -> set[str]:
        """The sequential encoder and the prefix vectors (the reference trains the encoder without decay)."""
        prefix = {'prefix_embed'} if self.prefix_embed is not None else set()
        return prefix | {f'encoder.{name}' for name, _ in self.encoder.named_parameters()}

    def extra_repr(self) -> str:
        return (f"method={self.method!r}, grid_size={self.grid_size}, max_digits={self.max_digits}, "
                f"extrapolation={self.extrapolation!r}")
