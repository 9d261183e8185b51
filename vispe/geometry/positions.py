"""The ``Positions`` object: where the tokens of one side of an attention are.

A model builds one per token set and forward (the image tokens of a ViT; a detector's memory tokens and
its object queries) and hands it to every block and hook. Self-attention passes the same object as the
query side and the key side; cross-attention passes two.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

import torch

from vispe.geometry.grid import grid_coords

T = TypeVar('T')


def _check_rank(name: str, tensor: torch.Tensor | None, ranks: tuple[int, ...], layout: str) -> None:
    if tensor is not None and tensor.ndim not in ranks:
        raise ValueError(f'Positions.{name} must be {layout}; got a tensor of rank {tensor.ndim} and shape '
                         f'{tuple(tensor.shape)}. Reshape it (one row per token after the prefix tokens).')


@dataclass(eq=False)
class Positions:
    """Where the tokens of one forward pass are: prefix tokens, then the positioned tokens.

    The sequence is ``num_prefix_tokens`` prefix tokens (cls, registers), which have no position,
    followed by ``num_positions`` positioned tokens. These are either the ``h·w`` cells of a grid,
    row-major, repeated for each of ``num_views`` views (view-major: token n is view n // (h·w)), or any
    set of tokens described by ``coords`` alone (object queries, 3D points). Everything here is
    per-token description; encodings read what they need:

    * ``grid_size`` (and ``patch_size``): the 2D encodings' tables (RoPE, iRPE, LookHere, ...);
    * ``coords`` (N, D) or (B, N, D), any D: explicit coordinates (randomized 2D positions, a decoder's
      reference points in patch units, 3D points of a point cloud or of camera rays);
    * ``valid_mask``: validity, (B, h, w) for a padded grid (each image in the top-left corner),
      (B, V, h, w) for views (a missing view is all False), (B, N) for other tokens;
    * ``cameras``: a typed batch of cameras (:class:`vispe.geometry.Cameras`) of the views;
    * ``depth`` (B, V, H, W): measured depth of the views' pixels in metres (LiDAR projected into the images),
      0 where unknown; 3DPPE reads it as ground truth;
    * ``boxes`` (B, N, 7): per-token 3D boxes (x, y, z, l, w, h, yaw), the per-layer state of a decoder
      whose queries refine boxes layer by layer (V-DETR); :meth:`updated` makes the next layer's object;
    * ``bounds`` (B, 2, D): the minimum and maximum corner of each scene's coordinates (a point cloud's extent),
      which absolute encodings of 3D points normalise by (3DETR's ``point_cloud_dims``);
    * ``crop_boxes`` (B, 4): where each sample's image was cropped from a larger one, (x0, y0, x1, y1) in pixels
      of that full image, whose intrinsics are ``cameras`` (KPE reads the viewing angles of the crop).

    Only shapes are checked here (ranks, token counts, views), never values, so building one costs no host
    synchronisation and traces under ``torch.compile``. Per-forward tables go through :meth:`memo`.

    Attributes:
        grid_size: (h, w) cells of each view's grid, or None for tokens without a grid.
        num_prefix_tokens: tokens before the positioned ones.
        patch_size: (ph, pw) pixels per cell (1 for feature maps given directly).
        device: device of the tokens.
        coords: optional coordinates of the positioned tokens; with a grid and D = 2 they are (row, col)
            in cell units and replace the integer grid.
        valid_mask: optional validity (see above), True on real tokens.
        num_views: views of the grid (1 for a single image).
        cameras: optional cameras of the views.
        boxes: optional (B, N, 7) boxes of the positioned tokens.
        depth: optional (B, V, H, W) measured pixel depth of the views (0 = unknown).
        bounds: optional (B, 2, D) minimum and maximum corner of each scene's coordinates.
        crop_boxes: optional (B, 4) crop of each image in its full image's pixels (x0, y0, x1, y1).
        num_positions: the positioned-token count when there is neither a grid nor coordinates.
    """

    grid_size: tuple[int, int] | None = None
    num_prefix_tokens: int = 0
    patch_size: tuple[int, int] = (1, 1)
    device: torch.device = field(default_factory=lambda: torch.device('cpu'))
    coords: torch.Tensor | None = None
    valid_mask: torch.Tensor | None = None
    num_views: int = 1
    cameras: Any = None
    boxes: torch.Tensor | None = None
    depth: torch.Tensor | None = None
    num_positions: int | None = None
    bounds: torch.Tensor | None = None
    crop_boxes: torch.Tensor | None = None
    _memo: dict[Hashable, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.grid_size is not None:
            self.grid_size = (int(self.grid_size[0]), int(self.grid_size[1]))
        self.device = torch.device(self.device)
        _check_rank('coords', self.coords, (2, 3), '(N, D) or (B, N, D)')
        _check_rank('boxes', self.boxes, (3,), '(B, N, 7)')
        _check_rank('depth', self.depth, (4,), '(B, V, H, W)')
        _check_rank('bounds', self.bounds, (3,), '(B, 2, D)')
        if self.crop_boxes is not None and (self.crop_boxes.ndim != 2 or self.crop_boxes.shape[-1] != 4):
            raise ValueError(f'Positions.crop_boxes must be (B, 4) boxes (x0, y0, x1, y1) in pixels of the full images; '
                             f'got shape {tuple(self.crop_boxes.shape)}.')
        if self.num_views < 1:
            raise ValueError(f'Positions.num_views must be at least 1; got {self.num_views}.')
        if self.num_positions is None:
            if self.grid_size is not None:
                self.num_positions = self.num_views * self.grid_size[0] * self.grid_size[1]
            elif self.coords is not None:
                self.num_positions = self.coords.shape[-2]
            else:
                raise ValueError('Positions needs a grid_size, coords or num_positions to know how many tokens it '
                                 'describes.')
        if self.coords is not None and self.coords.shape[-2] != self.num_positions:
            raise ValueError(f'Positions.coords has {self.coords.shape[-2]} rows but the sequence has '
                             f'{self.num_positions} positioned tokens{self._grid_words()}; give one row per token '
                             f'after the prefix tokens.')
        if self.boxes is not None and tuple(self.boxes.shape[1:]) != (self.num_positions, 7):
            raise ValueError(f'Positions.boxes must be (B, {self.num_positions}, 7) boxes (x, y, z, l, w, h, yaw) of '
                             f'the positioned tokens; got {tuple(self.boxes.shape)}.')
        if self.valid_mask is not None:
            self._check_valid_mask()
        cameras_views = getattr(self.cameras, 'num_views', None)
        if cameras_views is not None and cameras_views != self.num_views:
            raise ValueError(f'Positions has {self.num_views} views but its cameras have {cameras_views}; give one '
                             f'camera per view of the images.')

    def _grid_words(self) -> str:
        if self.grid_size is None:
            return ''
        views = f'{self.num_views} views of ' if self.num_views > 1 else ''
        return f' ({views}the {self.grid_size} grid)'

    def _check_valid_mask(self) -> None:
        layouts = []
        if self.grid_size is not None:
            layouts.append(self.grid_size if self.num_views == 1 else (self.num_views, *self.grid_size))
        layouts.append((self.num_positions,))
        if self.valid_mask.dtype != torch.bool or tuple(self.valid_mask.shape[1:]) not in layouts:
            shapes = ' or '.join(str(('B', *layout)) for layout in layouts)
            raise ValueError(f'Positions.valid_mask must be a bool tensor of shape {shapes} (True on real tokens); '
                             f'got {self.valid_mask.dtype} {tuple(self.valid_mask.shape)}.')

    @property
    def num_patches(self) -> int:
        """Positioned tokens (grid cells of all views, or coordinate rows)."""
        return self.num_positions

    @property
    def num_tokens(self) -> int:
        return self.num_prefix_tokens + self.num_positions

    @property
    def has_default_coords(self) -> bool:
        """True when the tokens sit on the integer grid (tables may be cached by grid size)."""
        return self.coords is None and self.grid_size is not None

    @property
    def coord_dim(self) -> int | None:
        """D of the coordinates (2 on a grid without explicit coordinates), None without any."""
        if self.coords is not None:
            return self.coords.shape[-1]
        return 2 if self.grid_size is not None else None

    def require_grid(self, user: str) -> tuple[int, int]:
        """The (h, w) grid of a single view, or an error that says ``user`` indexes one."""
        if self.grid_size is None or self.num_views != 1:
            what = 'tokens without a grid' if self.grid_size is None else f'{self.num_views} views'
            raise ValueError(f'{user} works on the 2D grid of one image; these positions describe {what}. Use it '
                             f'where tokens form one image grid (a ViT, a DETR encoder and its memory).')
        return self.grid_size

    def patch_coords(self) -> torch.Tensor:
        """(N, 2) or (B, N, 2) float32 (row, col) of the positioned tokens, in cell units."""
        if self.coords is not None:
            if self.coords.shape[-1] != 2:
                raise ValueError(f'A 2D encoding reads (row, col) coordinates; these positions have D = '
                                 f'{self.coords.shape[-1]}. Give 2D coordinates in cell units.')
            return self.coords
        grid = self.require_grid('patch_coords')
        return self.memo(('grid_coords',), lambda: grid_coords(grid, device=self.device))

    def real_grid_sizes(self) -> torch.Tensor | None:
        """(B, 2) int64 (h, w) of each image's real region (the top-left rectangle of a (B, h, w)
        ``valid_mask``), or None without one."""
        if self.valid_mask is None or self.valid_mask.ndim != 3 or self.grid_size is None:
            return None
        mask = self.valid_mask
        return self.memo(('real_grid_sizes',), lambda: torch.stack([mask.any(2).sum(1), mask.any(1).sum(1)], dim=1))

    def token_valid(self) -> torch.Tensor | None:
        """(B, N) bool validity of the positioned tokens, or None when all are valid."""
        return None if self.valid_mask is None else self.valid_mask.flatten(1)

    def view_ids(self) -> torch.Tensor:
        """(N,) int64 view of each positioned token of a grid (view-major layout)."""
        grid = self.grid_size
        if grid is None:
            raise ValueError('view_ids needs a grid: tokens without a grid have no view layout.')
        return self.memo(('view_ids',), lambda: torch.arange(self.num_views, device=self.device)
                         .repeat_interleave(grid[0] * grid[1]))

    def updated(self, **changes: Any) -> Positions:
        """A copy with some fields changed (e.g. the next decoder layer's ``boxes``) and an empty memo, since
        this forward's tables may depend on what changed."""
        return dataclasses.replace(self, _memo={}, **changes)

    def memo(self, key: Hashable, build: Callable[[], T]) -> T:
        """Build a per-forward table once: the first call stores ``build()`` under ``key``."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]
