"""The ``Positions`` object: where the tokens of one side of an attention are.

A model builds one per token set and forward (the image tokens of a ViT; a detector's memory tokens and
its object queries) and hands it to every block and hook. Self-attention passes the same object as the
query side and the key side; cross-attention passes two.

Beyond the token layout (grid, prefix tokens, views, coordinates, validity), what a modality adds comes in a
group of its own: :class:`CameraGeometry` (the views' cameras, their measured depth, crop boxes) and
:class:`SceneGeometry` (a 3D scene's extent and per-token boxes). A new modality adds a group, not fields.
Encodings name what they read with the words of :data:`GEOMETRY` (their ``requires``), and read it through
:meth:`Positions.require`.
"""
from __future__ import annotations

import dataclasses
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, TypeVar

import torch

from vispe.geometry.checks import check_boxes, check_poses, positive_int, size_pair
from vispe.geometry.grid import grid_coords

T = TypeVar('T')

# The geometry an encoding may require and a host may provide, with where a Positions object carries it.
GEOMETRY: dict[str, str] = {
    'grid': 'tokens on 2D image grids (Positions(grid_size=(h, w)), or (row, col) coords in cell units)',
    'cameras': 'the cameras of the views (Positions(camera=CameraGeometry(cameras=Cameras(...))))',
    'depth': 'measured depth of the views\' pixels (CameraGeometry(depth=(B, V, H, W)))',
    'crop_boxes': 'where each image was cropped from its full image (CameraGeometry(crop_boxes=(B, 4)))',
    'points': '3D coordinates of the tokens (Positions(coords=(B, N, 3)))',
    'bounds': 'each 3D scene\'s extent (Positions(scene=SceneGeometry(bounds=(B, 2, 3))))',
    'boxes': '3D boxes of the tokens (Positions(scene=SceneGeometry(boxes=(B, N, 7))))',
    'pixels': 'the images the grid\'s tokens were cut from (Positions(image=ImageGeometry(pixels=(B, C, H, W))))',
    'poses': 'a rigid pose per token, scene frame -> the token\'s frame (Positions(scene=SceneGeometry(poses=(B, N, 4, '
             '4)))), e.g. a decoder\'s object queries placed at their 3D reference points',
}

# The keyword arguments of Positions in the order of vispe 0.1's positional signature, for the error that a
# positional call gets.
_OLD_POSITIONAL_ORDER = ('num_prefix_tokens', 'patch_size', 'device', 'coords', 'valid_mask', 'num_views', 'cameras',
                         'boxes', 'depth', 'num_positions', 'bounds', 'crop_boxes')


def _check_rank(name: str, tensor: torch.Tensor | None, ranks: tuple[int, ...], layout: str) -> None:
    if tensor is not None and tensor.ndim not in ranks:
        raise ValueError(f'{name} must be {layout}; got a tensor of rank {tensor.ndim} and shape '
                         f'{tuple(tensor.shape)}. Reshape it (one row per token after the prefix tokens).')


@dataclass(frozen=True, eq=False)
class CameraGeometry:
    """The cameras of a token set's views and what is measured with them.

    Attributes:
        cameras: a typed batch of cameras (:class:`vispe.geometry.Cameras`), one per view.
        depth: optional (B, V, H, W) measured depth of the views' pixels in metres (LiDAR projected into the
            images), 0 where unknown; 3DPPE reads it as ground truth.
        crop_boxes: optional (B, 4) where each sample's image was cropped from a larger one, (x0, y0, x1, y1) in
            pixels of that full image, whose intrinsics are ``cameras`` (KPE reads the viewing angles of the crop).
    """

    cameras: Any
    depth: torch.Tensor | None = None
    crop_boxes: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.cameras is None:
            raise ValueError('CameraGeometry needs the cameras (vispe.geometry.Cameras); depth and crop boxes are '
                             'measured with them.')
        _check_rank('CameraGeometry.depth', self.depth, (4,), '(B, V, H, W)')
        if self.crop_boxes is not None and (self.crop_boxes.ndim != 2 or self.crop_boxes.shape[-1] != 4):
            raise ValueError(f'CameraGeometry.crop_boxes must be (B, 4) boxes (x0, y0, x1, y1) in pixels of the full '
                             f'images; got shape {tuple(self.crop_boxes.shape)}.')
        samples, views = getattr(self.cameras, 'num_samples', None), getattr(self.cameras, 'num_views', None)
        if samples is None:
            return
        if self.depth is not None:
            expected = (samples, views, *self.cameras.image_size)
            if tuple(self.depth.shape) != expected:
                raise ValueError(f'CameraGeometry.depth must be (B, V, H, W) = {expected}: one map per sample and view '
                                 f'of the cameras, at their image size (H, W); got {tuple(self.depth.shape)}. Project '
                                 f'the depth into the images as augmented and padded (pad_shape), or update the '
                                 f'cameras with every resize/crop/pad.')
        if self.crop_boxes is not None and self.crop_boxes.shape[0] != samples:
            raise ValueError(f'CameraGeometry.crop_boxes has {self.crop_boxes.shape[0]} boxes but the cameras '
                             f'describe {samples} samples; give one crop box per sample.')


@dataclass(frozen=True, eq=False)
class ImageGeometry:
    """The images a token grid was cut from, for encodings that read the image itself (LOOPE's order offsets).

    Attributes:
        pixels: (B, C, H, W) the model's input images as its patch embedding receives them; cell (i, j) of the grid
            covers pixels [i·ph, (i+1)·ph) × [j·pw, (j+1)·pw) for the positions' patch size (ph, pw).
    """

    pixels: torch.Tensor

    def __post_init__(self) -> None:
        _check_rank('ImageGeometry.pixels', self.pixels, (4,), '(B, C, H, W)')


@dataclass(frozen=True, eq=False)
class SceneGeometry:
    """Where a token set lies in a 3D scene, beyond its coordinates.

    Attributes:
        bounds: optional (B, 2, D) the minimum and maximum corner of each scene's coordinates (a point cloud's
            extent), which absolute encodings of 3D points normalise by (3DETR's ``point_cloud_dims``).
        poses: optional (B, N, 4, 4) a rigid transform per token from the scene frame to the token's own frame
            (``[[R, t], [0, 1]]`` for column vectors, as camera extrinsics): tokens that are not pixels of a camera
            but have a place and a heading in the scene, as a 3D detector's object queries at their reference points
            (GTA relates them to camera tokens by ``E_query · E_camera⁻¹``). Checked to be finite and rigid (not
            while a model is traced) unless ``check_values`` is False.
        boxes: optional (B, N, 7) per-token 3D boxes (x, y, z, l, w, h, yaw), the per-layer state of a decoder whose
            queries refine boxes layer by layer (V-DETR); :meth:`Positions.updated` makes the next layer's object.
            Their values are checked (finite, sizes l, w, h > 0; not while a model is traced), unless
            ``check_values`` is False.
        check_values: False skips the value checks of ``boxes`` and ``poses`` (and their host synchronisation): for a
            host whose boxes or poses are valid by construction (V-DETR's decoder: sizes are exponentials of clamped
            log-scales, every layer; PETR's query poses: a translation and no rotation).
    """

    bounds: torch.Tensor | None = None
    boxes: torch.Tensor | None = None
    poses: torch.Tensor | None = None
    check_values: bool = field(default=True, kw_only=True, repr=False)

    def __post_init__(self) -> None:
        _check_rank('SceneGeometry.bounds', self.bounds, (3,), '(B, 2, D)')
        _check_rank('SceneGeometry.boxes', self.boxes, (3,), '(B, N, 7)')
        _check_rank('SceneGeometry.poses', self.poses, (4,), '(B, N, 4, 4)')
        if self.boxes is not None and self.boxes.shape[-1] == 7 and self.check_values:
            check_boxes(self.boxes, 'SceneGeometry.boxes')
        if self.poses is not None and self.poses.shape[-2:] == (4, 4) and self.check_values:
            check_poses(self.poses, 'SceneGeometry.poses')


@dataclass(eq=False, init=False)
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
    * ``camera``: the views' cameras, measured depth and crop boxes (:class:`CameraGeometry`);
    * ``scene``: a 3D scene's extent and per-token boxes (:class:`SceneGeometry`);
    * ``image``: the images a grid was cut from (:class:`ImageGeometry`).

    Only the grid size is positional; everything else is a keyword: ``Positions((14, 14), num_prefix_tokens=1)``.
    Only shapes, sizes and counts are checked here (ranks, grid and patch sizes, token counts, views, each sample's
    geometry against the cameras), never tensor values (the one exception: :class:`SceneGeometry` checks the boxes
    a user gives), so building one costs no host synchronisation and traces under ``torch.compile``. The tokens an
    encoding or the attention gets are checked against it with :meth:`check_tokens`. Per-forward tables go through
    :meth:`memo`.

    Attributes:
        grid_size: (h, w) cells of each view's grid, or None for tokens without a grid.
        num_prefix_tokens: tokens before the positioned ones.
        patch_size: (ph, pw) pixels per cell (1 for feature maps given directly; an int s means (s, s)): the
            stride at which encodings that read images or depth maps per cell sample them.
        device: device of the tokens.
        coords: optional coordinates of the positioned tokens; with a grid and D = 2 they are (row, col)
            in cell units and replace the integer grid.
        valid_mask: optional validity (see above), True on real tokens.
        num_views: views of the grid (1 for a single image).
        num_positions: the positioned-token count (from the grid or the coordinates when not given).
        camera: optional :class:`CameraGeometry` of the views.
        scene: optional :class:`SceneGeometry` of the tokens.
        image: optional :class:`ImageGeometry`, the images of the grid.
    """

    grid_size: tuple[int, int] | None
    num_prefix_tokens: int
    patch_size: tuple[int, int]
    device: torch.device
    coords: torch.Tensor | None
    valid_mask: torch.Tensor | None
    num_views: int
    num_positions: int
    camera: CameraGeometry | None
    scene: SceneGeometry | None
    image: ImageGeometry | None
    _memo: dict[Hashable, Any] = field(repr=False)

    def __init__(self, grid_size: tuple[int, int] | None = None, *args: Any, num_prefix_tokens: int = 0,
                 patch_size: tuple[int, int] = (1, 1), device: torch.device | str | None = None,
                 coords: torch.Tensor | None = None, valid_mask: torch.Tensor | None = None, num_views: int = 1,
                 num_positions: int | None = None, camera: CameraGeometry | None = None,
                 scene: SceneGeometry | None = None, image: ImageGeometry | None = None,
                 _memo: dict[Hashable, Any] | None = None) -> None:
        if args:
            named = ', '.join(f'{name}={value!r}' for name, value in zip(_OLD_POSITIONAL_ORDER, args))
            raise TypeError(f'Positions takes only the grid size positionally; pass the rest by keyword: '
                            f'Positions({grid_size!r}, {named}). Cameras, depth and crop boxes go in '
                            f'camera=CameraGeometry(...), bounds and boxes in scene=SceneGeometry(...).')
        for name, value, kind in (('camera', camera, CameraGeometry), ('scene', scene, SceneGeometry),
                                  ('image', image, ImageGeometry)):
            if value is not None and not isinstance(value, kind):
                raise TypeError(f'Positions.{name} must be a {kind.__name__} (or None); got {type(value).__name__}. '
                                f'Wrap the tensors: {name}={kind.__name__}(...).')
        self.grid_size = None if grid_size is None else size_pair(
            grid_size, 'Positions grid_size', 'give the (h, w) cells of the token grid, or grid_size=None for tokens '
                                              'without a grid')
        self.num_prefix_tokens = positive_int(num_prefix_tokens, 'Positions num_prefix_tokens', 'give the tokens '
                                              'before the positioned ones (cls, registers), 0 for none', minimum=0)
        square = isinstance(patch_size, numbers.Real) or getattr(patch_size, 'ndim', None) == 0
        self.patch_size = size_pair((patch_size, patch_size) if square else patch_size, 'Positions patch_size',
                                    'give the (ph, pw) image pixels per cell, (1, 1) for feature maps given directly')
        self.device = torch.device('cpu' if device is None else device)
        self.coords = coords
        self.valid_mask = valid_mask
        self.camera = camera
        self.scene = scene
        self.image = image
        self._memo = {} if _memo is None else _memo
        _check_rank('Positions.coords', coords, (2, 3), '(N, D) or (B, N, D)')
        self.num_views = positive_int(num_views, 'Positions num_views', 'give the number of views (1 for a single '
                                                                        'image)')
        if num_positions is None:
            if self.grid_size is not None:
                num_positions = self.num_views * self.grid_size[0] * self.grid_size[1]
            elif coords is not None:
                num_positions = coords.shape[-2]
            else:
                raise ValueError('Positions needs a grid_size, coords or num_positions to know how many tokens it '
                                 'describes.')
        self.num_positions = positive_int(num_positions, 'Positions num_positions',
                                          'give the positioned-token count', minimum=0)
        self._check_shapes()

    def _check_shapes(self) -> None:
        if self.coords is not None and self.coords.shape[-2] != self.num_positions:
            raise ValueError(f'Positions.coords has {self.coords.shape[-2]} rows but the sequence has '
                             f'{self.num_positions} positioned tokens{self._grid_words()}; give one row per token '
                             f'after the prefix tokens.')
        boxes = None if self.scene is None else self.scene.boxes
        if boxes is not None and tuple(boxes.shape[1:]) != (self.num_positions, 7):
            raise ValueError(f'SceneGeometry.boxes must be (B, {self.num_positions}, 7) boxes (x, y, z, l, w, h, yaw) '
                             f'of the positioned tokens; got {tuple(boxes.shape)}.')
        poses = None if self.scene is None else self.scene.poses
        if poses is not None and tuple(poses.shape[1:]) != (self.num_positions, 4, 4):
            raise ValueError(f'SceneGeometry.poses must be (B, {self.num_positions}, 4, 4), one rigid transform per '
                             f'positioned token; got {tuple(poses.shape)}.')
        if self.valid_mask is not None:
            self._check_valid_mask()
        cameras_views = None if self.camera is None else getattr(self.camera.cameras, 'num_views', None)
        if cameras_views is not None and cameras_views != self.num_views:
            raise ValueError(f'Positions has {self.num_views} views but its cameras have {cameras_views}; give one '
                             f'camera per view of the images.')

    def sample_counts(self) -> dict[str, int]:
        """The sample count (dim 0) of each per-sample geometry these positions carry: the cameras, their depth and
        crop boxes, the scene's bounds and boxes (shapes only: no host synchronisation)."""
        counts = {}
        if self.camera is not None:
            samples = getattr(self.camera.cameras, 'num_samples', None)
            if samples is not None:
                counts['cameras'] = samples
            for name in ('depth', 'crop_boxes'):
                if getattr(self.camera, name) is not None:
                    counts[name] = getattr(self.camera, name).shape[0]
        if self.scene is not None:
            for name in ('bounds', 'boxes', 'poses'):
                if getattr(self.scene, name) is not None:
                    counts[name] = getattr(self.scene, name).shape[0]
        if self.image is not None:
            counts['pixels'] = self.image.pixels.shape[0]
        return counts

    def check_tokens(self, batch: int, count: int | None, user: str) -> None:
        """Refuse tokens that these positions do not describe, naming ``user`` (who reads them) and the fix: a sequence
        of ``count`` tokens other than :attr:`num_tokens` (None: not checked), or a batch of ``batch`` samples whose
        per-sample geometry (:meth:`sample_counts`) has another sample count; geometry of one sample is never
        broadcast over a batch. A check of shapes only (no host synchronisation)."""
        if count is not None and count != self.num_tokens:
            raise ValueError(f'{user}: got {count} tokens but its Positions describe {self.num_tokens}: '
                             f'{self.num_prefix_tokens} prefix + {self.num_positions} positioned'
                             f'{self._grid_words()}; build the Positions of this sequence (grid_size, num_views, '
                             f'num_prefix_tokens) or pass the tokens they describe.')
        for name, samples in self.sample_counts().items():
            if samples != batch:
                raise ValueError(f'{user}: the {name} of its positions describe {samples} samples but the tokens have '
                                 f'a batch of {batch}; give the geometry of every sample of the batch (one rig, depth '
                                 f'map, crop box or scene per sample, e.g. Cameras.from_data_samples of the batch\'s '
                                 f'samples, or Cameras.index_samples).')

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

    def layout_key(self) -> tuple[Any, ...]:
        """What a table that depends only on the token layout is keyed by: grid, views, prefix tokens, patch size,
        positioned-token count and device (never coordinates, validity or geometry)."""
        return (self.grid_size, self.num_views, self.num_prefix_tokens, tuple(self.patch_size), self.num_positions,
                self.device)

    def has(self, name: str) -> bool:
        """Whether these positions carry the geometry ``name`` (a key of :data:`GEOMETRY`)."""
        if name == 'grid':
            return self.grid_size is not None or (self.coords is not None and self.coords.shape[-1] == 2)
        if name == 'points':
            return self.coords is not None and self.coords.shape[-1] == 3
        if name in ('cameras', 'depth', 'crop_boxes'):
            return self.camera is not None and getattr(self.camera, name) is not None
        if name in ('bounds', 'boxes', 'poses'):
            return self.scene is not None and getattr(self.scene, name) is not None
        if name == 'pixels':
            return self.image is not None
        raise KeyError(f'Unknown geometry {name!r}; the geometry positions carry: {", ".join(GEOMETRY)}.')

    def geometry(self) -> tuple[str, ...]:
        """The names of :data:`GEOMETRY` these positions carry."""
        return tuple(name for name in GEOMETRY if self.has(name))

    def require(self, *names: str, user: str) -> None:
        """Raise a ValueError naming what ``user`` (an encoding's name) needs and these positions lack, and how to
        give it, unless they carry every geometry of ``names``."""
        missing = [name for name in names if not self.has(name)]
        if missing:
            have = ', '.join(self.geometry()) or 'only a token count'
            needs = '; '.join(f'{name}: {GEOMETRY[name]}' for name in missing)
            raise ValueError(f'{user} needs {", ".join(missing)} in its positions, which carry {have}. Give {needs}. '
                             f'vispe.list_hosts() names the models that provide them.')

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
        """A copy with some fields changed (e.g. the next decoder layer's ``scene``) and an empty memo, since
        this forward's tables may depend on what changed."""
        return dataclasses.replace(self, _memo={}, **changes)

    def memo(self, key: Hashable, build: Callable[[], T]) -> T:
        """Build a per-forward table once: the first call stores ``build()`` under ``key``."""
        if key not in self._memo:
            self._memo[key] = build()
        return self._memo[key]
