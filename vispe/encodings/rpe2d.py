"""RPE-2D: randomized 2D positions fed to an underlying encoding (Liu, Hou et al., arXiv 2503.18719)."""
from __future__ import annotations

import contextlib
from typing import Any, ClassVar, Iterator, Sequence

import torch

from vispe.encodings.base import PositionEncoding
from vispe.encodings.builder import EncodingConfig, build_encoding
from vispe.encodings.learned_ape import LearnedAPE
from vispe.encodings.options import Option, Search, model_fact
from vispe.encodings.stack import EncodingStack
from vispe.geometry import Positions, to_2tuple
from vispe.geometry.device_constants import host_to_device
from vispe.registry import ENCODINGS

SUPPORTED_HOOKS = frozenset({'embed', 'rotate'})
EVAL_POSITIONS = ('expected', 'random', 'contiguous')


@ENCODINGS.register_module()
class RPE2D(PositionEncoding):
    """Randomized 2D positional encoding (no public code; the 1D method is Ruoss et al., ACL 2023).

    Training, at an h×w grid: rows ``sort(choice(H_max, h))`` and columns ``sort(choice(W_max, w))``
    are drawn independently (distinct, sorted) once per batch, and token (i, j) gets position
    (rows_i, cols_j); order and grid structure are kept while the spacing is random over
    [0, H_max) × [0, W_max). Evaluation (``eval_positions``), at any grid up to ``max_grid``:

    - ``'expected'`` (default): the expected value of each sorted draw, row i (0-based) at
      ``(i + 1)·(H_max + 1)/(h + 1) − 1``: deterministic, evenly spaced over the whole range, with the
      spacing the model saw in training at this grid size (rounded to cells for a ``LearnedAPE`` base);
    - ``'random'``: a fresh sorted draw per forward, as in training (the 1D reference evaluates so;
      ``tools/eval_resolution.py`` averages over the draws of its batches);
    - ``'contiguous'``: rows 0…h−1, a spacing H_max/h times denser than in training.

    The positions feed ``base``, an encoding that reads positions (``SinCos2D``, ``RoPEAxial``,
    ``RoPEMixed``, ``FourierFeatures``, or ``LearnedAPE`` with a ``max_grid`` table whose cells are
    read directly). Positions can be fixed from outside for reproducible runs: ``seed`` gives this
    encoding its own generator, :meth:`fixed_positions` sets them for the forwards inside it, and
    explicit ``Positions.coords`` are used as given.

    Args:
        base: the underlying encoding's config (model facts are passed on; ``grid_size`` becomes
            ``max_grid``).
        max_grid: (H_max, W_max).
        seed: seed of a private generator for the training draws (default: torch's global RNG).
        eval_positions: ``'expected'``, ``'random'`` or ``'contiguous'`` (above); a test-time option.

    Shapes: as the base encoding.
    """

    family: ClassVar[str] = 'position sampler'
    paper: ClassVar[str] = 'Liu, Hou et al., arXiv 2503.18719'
    examples: ClassVar[tuple[dict, ...]] = ({'base': {'type': 'RoPEAxial'}, 'max_grid': 32},
                                            {'base': {'type': 'LearnedAPE'}, 'max_grid': 32})
    options: ClassVar[dict[str, Option]] = {
        'base': Option(object, doc='The underlying encoding: a config dict, type name or instance of an encoding '
                                   'that uses embed or rotate (e.g. RoPEAxial); set its test-time options on .base.'),
        'max_grid': model_fact('grid_size', doc='The grid (H_max, W_max) the positions are drawn from, positive; the '
                                                'base encoding is built for it.'),
        'seed': Option(int, optional=True, doc='The seed of a private generator for the training draws (None: '
                                               "torch's global RNG); the generator is made at build."),
        'eval_positions': Option(str, choices=EVAL_POSITIONS, test_time=True, search=Search(values=EVAL_POSITIONS),
                                 doc="Positions in evaluation: 'expected' (the mean of the sorted draw, evenly spaced "
                                     "over max_grid), 'random' (a draw per forward) or 'contiguous' (0..h-1)."),
    }

    def __init__(self, base: EncodingConfig, max_grid: int | Sequence[int], seed: int | None = None,
                 eval_positions: str = 'expected', **context: Any) -> None:
        super().__init__()
        self.eval_positions = eval_positions
        self.max_grid = to_2tuple(max_grid)
        self.base = build_encoding(base, **{**context, 'grid_size': self.max_grid})
        if isinstance(self.base, EncodingStack) or not self.base.active_hooks <= SUPPORTED_HOOKS:
            raise ValueError(f'RPE2D feeds positions to one encoding that uses embed or rotate; '
                             f'{type(self.base).__name__} uses {sorted(self.base.active_hooks)}.')
        self.generator = None if seed is None else torch.Generator().manual_seed(seed)
        self._fixed: tuple[torch.Tensor, torch.Tensor] | None = None

    @property
    def active_hooks(self) -> frozenset[str]:
        return self.base.active_hooks

    def implements(self, method: str) -> bool:
        return self.base.implements(method)

    def sample_positions(self, grid_size: Sequence[int],
                         generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Sorted distinct rows in [0, H_max) and columns in [0, W_max) for an h×w grid."""
        self.check_grid(grid_size)
        generator = generator if generator is not None else self.generator
        rows = torch.randperm(self.max_grid[0], generator=generator)[:grid_size[0]].sort().values
        cols = torch.randperm(self.max_grid[1], generator=generator)[:grid_size[1]].sort().values
        return rows, cols

    def expected_positions(self, grid_size: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """The expected sorted draw: index i of n out of N at ``(i + 1)·(N + 1)/(n + 1) − 1`` (the mean of the
        (i+1)-th order statistic of n distinct values from 0…N−1), rounded for a table-reading base."""
        self.check_grid(grid_size)
        rows, cols = (self.expected_axis(n, torch.tensor([n]), limit)[0] for n, limit in zip(grid_size, self.max_grid))
        return rows, cols

    def expected_axis(self, cells: int, real: torch.Tensor, limit: int) -> torch.Tensor:
        """(B, cells) expected positions along one axis of ``limit`` for B images with ``real`` (B,) cells each;
        cells past an image's real extent continue its spacing, clamped to the range."""
        steps = torch.arange(1, cells + 1, dtype=torch.float64, device=real.device)
        positions = (steps * (limit + 1) / (real.double()[:, None] + 1) - 1).clamp(max=limit - 1).float()
        return positions.round() if isinstance(self.base, LearnedAPE) else positions

    def check_grid(self, grid_size: Sequence[int]) -> None:
        if grid_size[0] > self.max_grid[0] or grid_size[1] > self.max_grid[1]:
            raise ValueError(f'Grid {tuple(grid_size)} is larger than RPE2D max_grid {self.max_grid}: positions '
                             f'would leave the trained range. Build it with max_grid >= the largest test grid.')

    @contextlib.contextmanager
    def fixed_positions(self, rows: torch.Tensor, cols: torch.Tensor) -> Iterator[None]:
        """Use these row and column positions (1-D, length h and w) for the forwards inside the block."""
        self._fixed = (torch.as_tensor(rows), torch.as_tensor(cols))
        try:
            yield
        finally:
            self._fixed = None

    def rows_and_cols(self, grid_size: Sequence[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """This forward's row and column positions: fixed, sampled (training) or ``eval_positions``."""
        if self._fixed is not None:
            rows, cols = self._fixed
            if (len(rows), len(cols)) != tuple(grid_size):
                raise ValueError(f'Fixed positions have {len(rows)} rows and {len(cols)} columns; the grid is '
                                 f'{tuple(grid_size)}.')
            return rows, cols
        if self.training or self.eval_positions == 'random':
            return self.sample_positions(grid_size)
        if self.eval_positions == 'expected':
            return self.expected_positions(grid_size)
        self.check_grid(grid_size)
        return torch.arange(grid_size[0]), torch.arange(grid_size[1])

    def expected_positions_per_image(self, sizes: torch.Tensor, grid_size: Sequence[int]) -> torch.Tensor:
        """(B, h·w, 2) expected positions of a padded batch: each image's for its real grid ``sizes`` (B, 2) in its
        top-left cells, so that it sees what it sees alone; padding cells continue the spacing (clamped)."""
        self.check_grid(grid_size)
        rows, cols = (self.expected_axis(n, real, limit)
                      for n, limit, real in zip(grid_size, self.max_grid, sizes.unbind(1)))
        height, width = grid_size
        grid = torch.stack([rows[:, :, None].expand(-1, -1, width), cols[:, None, :].expand(-1, height, -1)], dim=-1)
        return grid.reshape(len(sizes), height * width, 2)

    def positions_for_base(self, pos: Positions) -> Positions:
        """The positions the base encoding sees in this forward (built once per forward)."""
        def build() -> Positions:
            if not pos.has_default_coords:
                return pos
            sizes = pos.real_grid_sizes()
            if not self.training and self._fixed is None and self.eval_positions == 'expected' and sizes is not None:
                coords = self.expected_positions_per_image(sizes, pos.grid_size)
            else:
                rows, cols = self.rows_and_cols(pos.grid_size)
                coords = torch.stack(torch.meshgrid(rows.float(), cols.float(), indexing='ij'), dim=-1).reshape(-1, 2)
            return pos.updated(coords=host_to_device(coords, pos.device))
        return self.cached_table('positions', pos, build, key=self.training)

    def prepare(self, pos: Positions) -> None:
        self.base.prepare(self.positions_for_base(pos))

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        return self.base.embed(x, self.positions_for_base(pos))

    def position_embedding(self, pos: Positions) -> torch.Tensor | None:
        return self.base.position_embedding(self.positions_for_base(pos))

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.base.rotate(q, k, self.positions_for_base(pos_q), self.positions_for_base(pos_k), layer_idx)

    def no_weight_decay(self) -> set[str]:
        return {f'base.{name}' for name in self.base.no_weight_decay()}

    def extra_repr(self) -> str:
        return f'max_grid={self.max_grid}, eval_positions={self.eval_positions!r}'
