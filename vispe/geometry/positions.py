"""The ``Positions`` object a model builds once per forward and hands to every block and hook."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

import torch

from vispe.geometry.grid import grid_coords

T = TypeVar('T')


@dataclass(eq=False)
class Positions:
    """Where the tokens of one forward pass are.

    The sequence is ``num_prefix_tokens`` prefix tokens (cls, registers) followed by the
    ``h·w`` patch tokens of the grid in row-major order. Encodings read what they need from here;
    per-forward tables go through :meth:`memo`, so they are built once per forward whatever the
    number of layers.

    Attributes:
        grid_size: (h, w), patches.
        num_prefix_tokens: tokens before the patches.
        patch_size: (ph, pw), pixels per patch (1 for feature maps given directly).
        device: device of the tokens.
        coords: optional (N, 2) or (B, N, 2) float (row, col) patch positions that replace the
            integer grid (randomized positions, crops); ``None`` means the integer grid.
        valid_mask: optional (B, h, w) bool, True on real (not padded) patches: a padded batch of
            images of different sizes, each in the top-left corner. Encodings that depend on the extent of
            the grid (normalised or resampled positions) use each image's real grid.
        cameras, points, boxes: optional 3D context for camera- or point-aware encodings.
    """

    grid_size: tuple[int, int]
    num_prefix_tokens: int = 0
    patch_size: tuple[int, int] = (1, 1)
    device: torch.device = field(default_factory=lambda: torch.device('cpu'))
    coords: torch.Tensor | None = None
    valid_mask: torch.Tensor | None = None
    cameras: Any = None
    points: torch.Tensor | None = None
    boxes: torch.Tensor | None = None
    _memo: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.grid_size = (int(self.grid_size[0]), int(self.grid_size[1]))
        self.device = torch.device(self.device)
        if self.coords is not None and self.coords.shape[-2:] != (self.num_patches, 2):
            raise ValueError(f'coords must have shape (N, 2) or (B, N, 2) with N = {self.num_patches} patches of '
                             f'the {self.grid_size} grid; got {tuple(self.coords.shape)}')

    @property
    def num_patches(self) -> int:
        return self.grid_size[0] * self.grid_size[1]

    @property
    def num_tokens(self) -> int:
        return self.num_prefix_tokens + self.num_patches

    @property
    def has_default_coords(self) -> bool:
        """True when patches sit on the integer grid (tables may be cached by grid size)."""
        return self.coords is None

    def patch_coords(self) -> torch.Tensor:
        """(N, 2) or (B, N, 2) float32 (row, col) of the patches, in patch units."""
        if self.coords is not None:
            return self.coords
        return self.memo(('grid_coords',), lambda: grid_coords(self.grid_size, device=self.device))

    def real_grid_sizes(self) -> torch.Tensor | None:
        """(B, 2) int64 (h, w) of each image's real region (the top-left rectangle of ``valid_mask``), or
        None without a mask."""
        if self.valid_mask is None:
            return None
        return self.memo(('real_grid_sizes',), lambda: torch.stack(
            [self.valid_mask.any(2).sum(1), self.valid_mask.any(1).sum(1)], dim=1))

    def memo(self, key: Hashable, build: Callable[[], T]) -> T:
        """Build a per-forward table once: the first call stores ``build()`` under ``key``."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]
