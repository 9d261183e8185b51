"""A batch of calibrated cameras: B samples, each with its own rig of V views.

Conventions (docs/geometry.md): column vectors; the scene ("lidar") frame is x forward, y left, z up;
the camera frame is OpenCV's (x right, y down, z forward); pixel centres sit at integer (u, v).
Matrices are checked where the :class:`Cameras` is built from host tensors (the checks read values back, so they
follow :func:`vispe.geometry.checks.checking_values`: skipped while torch.compile, torch.export or torch.fx trace a
model and, by default, for tensors on a GPU; :meth:`Cameras.from_data_samples` checks the calibration on the CPU
before it moves the cameras); every projection runs in float32 or better with autocast off, inverses in float64
(``torch.linalg.inv_ex``: no error check that would wait for a GPU; singular matrices are refused where cameras
are built), and returns float32.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Callable, Generic, TypeVar

import torch
from kornia.geometry.linalg import inverse_transformation, transform_points

from vispe.geometry.checks import check_finite, checking_values, on_host, size_pair, tracing
from vispe.geometry.device_constants import host_to_device

__all__ = ['Cameras', 'tracing']

# Tolerance of the rigidity check of lidar2cam: max |R^T R - I| and |det R - 1|.
RIGID_ATOL = 1e-4
# An intrinsics matrix whose smallest singular value is below this fraction of its largest is singular.
SINGULAR_RTOL = 1e-9
# Depths below this are clamped before the perspective divide (DETR3D / PETR use the same eps).
DEPTH_EPS = 1e-5

Index = int | slice | Sequence[int] | torch.Tensor
T = TypeVar('T')


class cached_attribute(Generic[T]):
    """``functools.cached_property`` without its lock, which torch.compile cannot trace: the value is computed on
    first use and kept in the instance's ``__dict__`` under the attribute's name (so ``vars(cameras).pop(name)``
    drops it); while tracing it is computed in the traced code and not kept."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None:
            return self
        if tracing():
            return self.compute(instance)
        if self.name not in instance.__dict__:
            instance.__dict__[self.name] = self.compute(instance)
        return instance.__dict__[self.name]


def no_autocast(device: torch.device) -> torch.autocast:
    """A context in which autocast is off on ``device``, so geometry keeps its precision."""
    return torch.autocast(device_type=device.type, enabled=False)


def _unit_corner(size: int, like: torch.Tensor) -> torch.Tensor:
    """(size, size) zeros with 1 in the last corner, in ``like``'s dtype and device. Matrices are completed by adding
    it to a padded block rather than by writing into slices, which ONNX export of decomposed graphs mistranslates."""
    one = torch.ones(1, 1, dtype=like.dtype, device=like.device)
    return torch.nn.functional.pad(one, (size - 1, 0, size - 1, 0))


def viewpad(matrix: torch.Tensor) -> torch.Tensor:
    """(..., 3, 3) -> (..., 4, 4): the matrix in the top-left corner of a 4×4 identity."""
    return torch.nn.functional.pad(matrix, (0, 1, 0, 1)) + _unit_corner(4, matrix)


def _cross(u: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """(..., 3) cross products, written out (``torch.linalg.cross`` has no ONNX translation)."""
    return torch.stack([u[..., 1] * v[..., 2] - u[..., 2] * v[..., 1], u[..., 2] * v[..., 0] - u[..., 0] * v[..., 2],
                        u[..., 0] * v[..., 1] - u[..., 1] * v[..., 0]], dim=-1)


def inverse_3x3(matrix: torch.Tensor) -> torch.Tensor:
    """Inverse of (..., 3, 3) matrices in closed form, the adjugate over the determinant: its columns are the cross
    products of the rows. ONNX has no matrix inverse, so the cameras use this while a model is traced."""
    first, second, third = matrix.unbind(-2)
    adjugate = torch.stack([_cross(second, third), _cross(third, first), _cross(first, second)], dim=-1)
    determinant = (first * adjugate[..., 0]).sum(-1)
    return adjugate / determinant[..., None, None]


def affine_inverse(matrix: torch.Tensor) -> torch.Tensor:
    """Inverse of (..., n, n) matrices ``[[A, t], [0, 1]]`` in float64: ``[[A^-1, -A^-1 t], [0, 1]]``.

    The last row of the result is exactly (0, ..., 0, 1). ``A^-1`` is ``torch.linalg.inv_ex``'s, or, while a model is
    traced and A is 3×3, :func:`inverse_3x3`'s (every exporter has its operations).
    """
    matrix = matrix.double()
    linear = matrix[..., :-1, :-1]
    inv_a = inverse_3x3(linear) if tracing() and linear.shape[-1] == 3 else torch.linalg.inv_ex(linear).inverse
    top = torch.cat([inv_a, -(inv_a @ matrix[..., :-1, -1:])], dim=-1)
    return torch.nn.functional.pad(top, (0, 0, 0, 1)) + _unit_corner(matrix.shape[-1], matrix)


def rigid_inverse(matrix: torch.Tensor) -> torch.Tensor:
    """Inverse of (..., 4, 4) rigid transforms ``[[R, t], [0, 1]]``: ``[[Rᵀ, −Rᵀ t], [0, 1]]``, the values of kornia's
    ``inverse_transformation``, built without its writes into slices (which ONNX export of decomposed graphs
    mistranslates); the cameras use it while a model is traced."""
    rotation = matrix[..., :3, :3].transpose(-1, -2)
    top = torch.cat([rotation, torch.matmul(-rotation, matrix[..., :3, 3:])], dim=-1)
    return torch.nn.functional.pad(top, (0, 0, 0, 1)) + _unit_corner(4, matrix)


def _first_bad(bad: torch.Tensor) -> tuple[int, ...]:
    """Indices of the first True entry of a bool tensor (a validation-time sync)."""
    return tuple(int(i) for i in bad.nonzero()[0])


def _check_last_row(matrix: torch.Tensor, name: str, fix: str) -> None:
    n = matrix.shape[-1]
    expected = torch.zeros(n, dtype=matrix.dtype, device=matrix.device)
    expected[-1] = 1
    bad = (matrix[..., -1, :] - expected).abs().amax(-1) > 1e-6
    if bad.any():
        where = _first_bad(bad)
        row = [round(float(x), 6) for x in matrix[where][-1]]
        raise ValueError(f'{name}{list(where)} has last row {row}, expected {tuple(expected.int().tolist())}: {fix}')


@dataclass(frozen=True, eq=False, repr=False)
class Cameras:
    """Cameras of B samples × V views; sample b keeps its own rig.

    Attributes:
        intrinsics: (B, V, 3, 3) float32 ``K``, camera frame -> homogeneous pixels. After image
            augmentation it may hold flips: any invertible matrix whose last row is (0, 0, 1).
        lidar2cam: (B, V, 4, 4) float32 rigid transform, scene frame (as calibrated) -> camera frame.
        image_size: (H, W) of the (augmented, padded) images, shared by the batch.
        scene_transform: (B, 4, 4) float32 ``A`` applied to the scene since calibration (a global
            rotation / scale / flip / translation, see :class:`vispe.geometry.SceneTransform`); the
            scene frame of points and boxes is then ``A`` times the calibrated one. ``None`` means identity.

    Derived matrices (cached, float32) refer to the current scene frame and are computed in float64 from the
    inputs as given (float64 calibration keeps its precision until the final cast):
    ``extrinsics = lidar2cam @ A^-1``, ``lidar2img = viewpad(K) @ extrinsics``, ``img2lidar`` and
    ``cam2lidar`` their inverses (computed in float64).
    """

    intrinsics: torch.Tensor
    lidar2cam: torch.Tensor
    image_size: tuple[int, int]
    scene_transform: torch.Tensor | None = None

    def __post_init__(self) -> None:
        intrinsics, lidar2cam = self.intrinsics, self.lidar2cam
        for name, value in (('intrinsics', intrinsics), ('lidar2cam', lidar2cam)):
            if not isinstance(value, torch.Tensor):
                raise TypeError(f'{name} must be a torch.Tensor, got {type(value).__name__}; '
                                f'use Cameras.from_data_samples for numpy arrays or lists')
        if intrinsics.ndim != 4 or intrinsics.shape[-2:] != (3, 3):
            raise ValueError(f'intrinsics must have shape (B, V, 3, 3) (samples, views, 3×3 K), got '
                             f'{tuple(intrinsics.shape)}; a 4×4 cam2img goes through Cameras.from_data_samples')
        batch, views = intrinsics.shape[:2]
        if lidar2cam.shape != (batch, views, 4, 4):
            raise ValueError(f'lidar2cam must have shape (B, V, 4, 4) = {(batch, views, 4, 4)} to match intrinsics '
                             f'{tuple(intrinsics.shape)}, got {tuple(lidar2cam.shape)}')
        if batch == 0 or views == 0:
            raise ValueError(f'Cameras need at least one sample and one view, got B={batch}, V={views}')
        scene = self.scene_transform
        if scene is None:
            scene = torch.eye(4, device=intrinsics.device).expand(batch, 4, 4)
        if scene.shape != (batch, 4, 4):
            raise ValueError(f'scene_transform must have shape (B, 4, 4) = {(batch, 4, 4)}, got {tuple(scene.shape)}')
        for name, value in (('lidar2cam', lidar2cam), ('scene_transform', scene)):
            if value.device != intrinsics.device:
                raise ValueError(f'{name} is on {value.device} but intrinsics on {intrinsics.device}; '
                                 f'build Cameras from tensors on one device (then use .to(device))')
        size = size_pair(self.image_size, 'Cameras image_size', 'give the (H, W) of the (padded) images in whole '
                         'pixels, e.g. tuple(images.shape[-2:])')
        object.__setattr__(self, '_exact', (intrinsics.double(), lidar2cam.double(), scene.double()))
        object.__setattr__(self, 'intrinsics', intrinsics.to(torch.float32))
        object.__setattr__(self, 'lidar2cam', lidar2cam.to(torch.float32))
        object.__setattr__(self, 'scene_transform', scene.to(torch.float32).contiguous())
        object.__setattr__(self, 'image_size', size)
        if checking_values(intrinsics):
            with no_autocast(intrinsics.device):
                self._validate(intrinsics.double(), lidar2cam.double(), scene.double())

    @staticmethod
    def _validate(intrinsics: torch.Tensor, lidar2cam: torch.Tensor, scene: torch.Tensor) -> None:
        for name, value in (('intrinsics', intrinsics), ('lidar2cam', lidar2cam)):
            bad = ~torch.isfinite(value).flatten(2).all(-1)
            if bad.any():
                sample, view = _first_bad(bad)
                raise ValueError(f'{name} of sample {sample}, view {view} has non-finite entries (nan or inf); '
                                 f'fix the calibration of that camera or drop the sample')
        if not torch.isfinite(scene).all():
            raise ValueError('scene_transform has non-finite entries; build it from finite angles and scales')
        _check_last_row(intrinsics, 'intrinsics', 'set it to (0, 0, 1) so K maps a camera point to (u·z, v·z, z)')
        svals = torch.linalg.svdvals(intrinsics)
        bad = svals[..., -1] <= SINGULAR_RTOL * svals[..., 0]
        if bad.any():
            sample, view = _first_bad(bad)
            raise ValueError(f'intrinsics of sample {sample}, view {view} are singular (singular values '
                             f'{[float(s) for s in svals[sample, view]]}); a camera needs non-zero focal lengths: '
                             f'fix that K (e.g. a zero fx/fy or an image resized by 0)')
        _check_last_row(lidar2cam, 'lidar2cam', 'pass [[R, t], [0, 0, 0, 1]] for column vectors (transpose a '
                                                 'row-vector matrix, whose translation is in the last row)')
        rot = lidar2cam[..., :3, :3]
        eye = torch.eye(3, dtype=rot.dtype, device=rot.device)
        ortho_err = (rot.mT @ rot - eye).abs().amax((-2, -1))
        det = torch.linalg.det(rot)
        bad = (ortho_err > RIGID_ATOL) | ((det - 1).abs() > RIGID_ATOL)
        if bad.any():
            sample, view = _first_bad(bad)
            raise ValueError(
                f'lidar2cam of sample {sample}, view {view} is not rigid: its rotation has max |R^T R - I| = '
                f'{float(ortho_err[sample, view]):.3g} and det {float(det[sample, view]):.6g} (tolerance '
                f'{RIGID_ATOL}, det must be +1); pass the calibrated extrinsics (re-orthonormalise R) and put a '
                f'scene scale or flip in scene_transform (SceneTransform.apply_cameras)')
        _check_last_row(scene, 'scene_transform', 'build it with SceneTransform')
        if (torch.linalg.det(scene[..., :3, :3]).abs() < 1e-12).any():
            raise ValueError('scene_transform is singular; a scene scale must be non-zero')

    @classmethod
    def from_data_samples(cls, samples: Sequence[Mapping[str, Any]],
                          device: torch.device | str | None = None) -> Cameras:
        """Cameras of a batch of per-sample dicts; each sample keeps its own rig.

        Each dict holds ``intrinsics`` or ``cam2img`` (V, 3, 3) or (V, 4, 4) (a 4×4 must be
        ``viewpad(K)``), ``lidar2cam`` (V, 4, 4), ``pad_shape`` or ``img_shape`` ((H, W), (H, W, C),
        or one per view; ``pad_shape`` wins) and optionally ``scene_transform`` (4, 4). Values may be
        tensors, numpy arrays or lists. All samples must have the same number of views and image size. The
        cameras are built and checked where the values are (numpy arrays and lists: the CPU), then moved to
        ``device``.
        """
        if not samples:
            raise ValueError('from_data_samples needs at least one sample')
        intrinsics, lidar2cam, scenes, sizes = [], [], [], []
        for i, sample in enumerate(samples):
            key = 'intrinsics' if 'intrinsics' in sample else 'cam2img'
            if key not in sample or 'lidar2cam' not in sample:
                raise ValueError(f'sample {i} needs keys "intrinsics" (or "cam2img") and "lidar2cam"; '
                                 f'it has {sorted(sample)}')
            k = torch.as_tensor(sample[key], dtype=torch.float64)
            if k.ndim != 3 or k.shape[-2:] not in ((3, 3), (4, 4)):
                raise ValueError(f'sample {i}: {key} must have shape (V, 3, 3) or (V, 4, 4), got {tuple(k.shape)}')
            if k.shape[-1] == 4:
                off = torch.cat([k[:, :3, 3], k[:, 3, :3]], -1).abs().amax()
                if checking_values(k) and (off > 1e-6 or (k[:, 3, 3] - 1).abs().amax() > 1e-6):
                    raise ValueError(f'sample {i}: the 4×4 {key} is not viewpad(K) (its last row/column must be '
                                     f'(0, 0, 0, 1)); fold the extra translation into lidar2cam')
                k = k[:, :3, :3]
            ext = host_to_device(torch.as_tensor(sample['lidar2cam'], dtype=torch.float64), k.device)
            if ext.shape != (k.shape[0], 4, 4):
                raise ValueError(f'sample {i}: lidar2cam must have shape (V, 4, 4) = {(k.shape[0], 4, 4)} to match '
                                 f'its {key}, got {tuple(ext.shape)}')
            if intrinsics and k.shape[0] != intrinsics[0].shape[0]:
                raise ValueError(f'sample {i} has {k.shape[0]} cameras but sample 0 has {intrinsics[0].shape[0]}; '
                                 f'a batch needs the same views in every sample: batch samples of one rig layout '
                                 f'or drop/duplicate views')
            sizes.append(_image_size(sample, i))
            if sizes[-1] != sizes[0]:
                raise ValueError(f'sample {i} has image size {sizes[-1]} but sample 0 has {sizes[0]}; a batch shares '
                                 f'one padded image size: pad the images to a common size (and pass pad_shape)')
            scene = sample.get('scene_transform')
            scenes.append(torch.eye(4, dtype=torch.float64, device=k.device) if scene is None else
                          host_to_device(torch.as_tensor(scene, dtype=torch.float64), k.device))
            intrinsics.append(k)
            lidar2cam.append(ext)
        cameras = cls(torch.stack(intrinsics), torch.stack(lidar2cam), sizes[0], torch.stack(scenes))
        return cameras if device is None else cameras.to(device)

    @classmethod
    def from_batch(cls, samples: Sequence[Mapping[str, Any]] | None,
                   device: torch.device | str | None = None) -> Cameras | None:
        """The cameras a model's forward reads from its ``data_samples``: None when no sample carries a
        ``lidar2cam`` (a 2D task), :meth:`from_data_samples` when every sample does; a batch where only some
        do is refused."""
        if not samples:
            return None
        carrying = [index for index, sample in enumerate(samples)
                    if isinstance(sample, Mapping) and 'lidar2cam' in sample]
        if not carrying:
            return None
        if len(carrying) != len(samples):
            missing = next(index for index in range(len(samples)) if index not in carrying)
            raise ValueError(f'data sample {missing} has no cameras (lidar2cam) but sample {carrying[0]} has; every '
                             f'sample of a batch needs its own calibration (intrinsics and lidar2cam).')
        return cls.from_data_samples(samples, device)

    def __repr__(self) -> str:
        return (f'Cameras(num_samples={self.num_samples}, num_views={self.num_views}, '
                f'image_size={self.image_size}, device={self.device})')

    @property
    def num_samples(self) -> int:
        return self.intrinsics.shape[0]

    @property
    def num_views(self) -> int:
        return self.intrinsics.shape[1]

    @property
    def device(self) -> torch.device:
        return self.intrinsics.device

    def _extrinsics64(self) -> torch.Tensor:
        _, lidar2cam, scene = self._exact
        return lidar2cam @ affine_inverse(scene)[:, None]

    def _cam2lidar64(self) -> torch.Tensor:
        _, lidar2cam, scene = self._exact
        rigid = (rigid_inverse(lidar2cam) if tracing() else
                 inverse_transformation(lidar2cam.flatten(0, 1)).view_as(lidar2cam))
        return scene[:, None] @ rigid

    @cached_attribute
    def extrinsics(self) -> torch.Tensor:
        """(B, V, 4, 4) current scene frame -> camera frame: ``lidar2cam @ scene_transform^-1``."""
        with no_autocast(self.device):
            return self._extrinsics64().float()

    @cached_attribute
    def cam2lidar(self) -> torch.Tensor:
        """(B, V, 4, 4) camera frame -> current scene frame (inverse of :attr:`extrinsics`, in float64)."""
        with no_autocast(self.device):
            return self._cam2lidar64().float()

    @cached_attribute
    def lidar2img(self) -> torch.Tensor:
        """(B, V, 4, 4) scene frame -> homogeneous pixels ``(u·d, v·d, d, 1)``: ``viewpad(K) @ extrinsics``."""
        with no_autocast(self.device):
            return (viewpad(self._exact[0]) @ self._extrinsics64()).float()

    @cached_attribute
    def fingerprint(self) -> bytes:
        """The rig as bytes: B, V, the image size and the float64 intrinsics, lidar2cam and scene transform of every
        sample and view. Equal fingerprints mean equal cameras, so caches of tables that depend only on the rig
        (PETR's normalised frustum) key on it; computing it reads the matrices back to the host."""
        header = torch.tensor([self.num_samples, self.num_views, *self.image_size], dtype=torch.float64)
        matrices = [matrix.detach().reshape(-1).cpu() for matrix in self._exact]
        return torch.cat([header, *matrices]).numpy().tobytes()

    def host_fingerprint(self) -> bytes | None:
        """:attr:`fingerprint` where it costs no device wait (cameras on the CPU, or moved from it by :meth:`to`),
        else None (cameras built from GPU tensors; never while tracing)."""
        if tracing() or not (on_host(self.intrinsics) or 'fingerprint' in vars(self)):
            return None
        return self.fingerprint

    @cached_attribute
    def img2lidar(self) -> torch.Tensor:
        """(B, V, 4, 4) inverse of :attr:`lidar2img`, computed in float64 from the float64 ``lidar2img`` as PETR
        inverts it (``np.linalg.inv``), so the float32 result equals the reference's bit for bit. While a model is
        traced it is the affine inverse of that matrix (:func:`affine_inverse`: ``lidar2img`` is affine when the last
        row of ``lidar2cam`` is (0, 0, 0, 1)), whose operations every exporter has (ONNX has no matrix inverse)."""
        with no_autocast(self.device):
            lidar2img = viewpad(self._exact[0]) @ self._extrinsics64()
            return (affine_inverse(lidar2img) if tracing() else torch.linalg.inv_ex(lidar2img).inverse).float()

    def project(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Scene-frame points to pixels and depths.

        Args:
            points: (B, V, N, 3), or (B, N, 3) seen by every view.

        Returns:
            (B, V, N, 2) float32 (u, v) pixels and (B, V, N) float32 camera-frame depth z. Pixels are
            only meaningful where depth > 0; the divide uses ``max(depth, 1e-5)``.
        """
        points = self._per_view(points, 3, 'points')
        with no_autocast(self.device):
            hom = self._transform(self.lidar2img, points)
            depth = hom[..., 2]
            return hom[..., :2] / depth.clamp(min=DEPTH_EPS)[..., None], depth

    def unproject(self, pixels: torch.Tensor, depth: torch.Tensor) -> torch.Tensor:
        """Pixels at camera-frame depths to scene-frame points: ``img2lidar @ (u·d', v·d', d, 1)``.

        ``d' = max(d, 1e-5)`` as in PETR, so this inverts :meth:`project` wherever depth >= 1e-5.

        Args:
            pixels: (B, V, N, 2) (u, v), or (B, N, 2) used by every view.
            depth: (B, V, N) or (B, N), matching ``pixels``.

        Returns:
            (B, V, N, 3) float32 scene-frame points.
        """
        pixels = self._per_view(pixels, 2, 'pixels')
        if depth.shape not in (pixels.shape[:-1], (pixels.shape[0], pixels.shape[2])):
            raise ValueError(f'depth must have shape (B, V, N) = {tuple(pixels.shape[:-1])} or (B, N) to match the '
                             f'pixels, got {tuple(depth.shape)}')
        check_finite(depth, 'unproject depth', 'drop or mask the pixels without a depth before unprojecting')
        if depth.ndim == 2:
            depth = depth[:, None].expand(pixels.shape[:-1])
        with no_autocast(self.device):
            depth = depth.float()
            hom = torch.cat([pixels.float() * depth.clamp(min=DEPTH_EPS)[..., None], depth[..., None]], -1)
            return self._transform(self.img2lidar, hom)

    def _per_view(self, points: torch.Tensor, dim: int, name: str) -> torch.Tensor:
        """Check (B, V, N, dim) or (B, N, dim), finite (not while tracing), and return (B, V, N, dim)."""
        batch, views = self.num_samples, self.num_views
        if (points.ndim == 3 and points.shape[0] == batch or points.ndim == 4 and points.shape[:2] == (batch, views)) \
                and points.shape[-1] == dim:
            check_finite(points, name, 'drop or mask the non-finite entries first (a padded slot holds zeros, not NaN)')
            return points[:, None].expand(batch, views, *points.shape[1:]) if points.ndim == 3 else points
        raise ValueError(f'{name} must have shape (B, V, N, {dim}) = ({batch}, {views}, N, {dim}) or (B, N, {dim}) '
                         f'for these cameras, got {tuple(points.shape)}; reshape them to (samples, views, points, '
                         f'{dim})')

    @staticmethod
    def _transform(matrix: torch.Tensor, points: torch.Tensor) -> torch.Tensor:
        """(B, V, 4, 4) applied to (B, V, N, 3) with kornia, in float32."""
        batch, views, num, _ = points.shape
        out = transform_points(matrix.flatten(0, 1), points.float().reshape(batch * views, num, 3))
        return out.view(batch, views, num, 3)

    def check_images(self, images: torch.Tensor) -> None:
        """Refuse an image batch (B, V, C, H, W) that does not match these cameras."""
        if images.ndim != 5:
            raise ValueError(f'multi-view images must have shape (B, V, C, H, W), got {tuple(images.shape)}; '
                             f'stack the views of each sample on dim 1')
        batch, views = images.shape[:2]
        if (batch, views) != (self.num_samples, self.num_views):
            raise ValueError(f'the images have B={batch} samples × V={views} views but the cameras have '
                             f'B={self.num_samples} × V={self.num_views}; build the Cameras from the same batch '
                             f'(Cameras.from_data_samples of its samples) or select views with index_views')
        if tuple(images.shape[-2:]) != self.image_size:
            raise ValueError(f'the images are {tuple(images.shape[-2:])} (H, W) but the cameras expect '
                             f'{self.image_size}; update the cameras with every resize/crop/pad of the images '
                             f'(vispe.geometry.resize_cameras / crop_cameras)')

    def index_views(self, index: Index) -> Cameras:
        """The cameras of the selected views (dim 1), e.g. ``[0, 2]`` or a slice."""
        index = [index] if isinstance(index, int) else index
        intrinsics, lidar2cam, scene = self._exact
        return replace(self, intrinsics=intrinsics[:, index], lidar2cam=lidar2cam[:, index], scene_transform=scene)

    def index_samples(self, index: Index) -> Cameras:
        """The cameras of the selected samples (dim 0), e.g. a permutation of the batch."""
        index = [index] if isinstance(index, int) else index
        intrinsics, lidar2cam, scene = self._exact
        return replace(self, intrinsics=intrinsics[index], lidar2cam=lidar2cam[index], scene_transform=scene[index])

    def to(self, device: torch.device | str) -> Cameras:
        """The same cameras on ``device`` (checked again only where :func:`~vispe.geometry.checks.checking_values`
        allows; cameras moved from the host keep their host-computed :attr:`fingerprint`, so a GPU never waits for
        it)."""
        target = torch.device(device)
        if target.type == 'cuda' and target.index is None and torch.cuda.is_available():
            target = torch.device('cuda', torch.cuda.current_device())
        if target == self.device:
            return self
        intrinsics, lidar2cam, scene = self._exact
        moved = replace(self, intrinsics=host_to_device(intrinsics, target),
                        lidar2cam=host_to_device(lidar2cam, target), scene_transform=host_to_device(scene, target))
        if on_host(intrinsics) and not tracing():
            moved.__dict__['fingerprint'] = self.fingerprint
        return moved


def _image_size(sample: Mapping[str, Any], index: int) -> tuple[int, int]:
    """(H, W) of a sample from ``pad_shape`` or ``img_shape``: (H, W), (H, W, C) or one per view."""
    key = 'pad_shape' if 'pad_shape' in sample else 'img_shape'
    if key not in sample:
        raise ValueError(f'sample {index} needs "img_shape" (H, W) (or "pad_shape") of its images')
    shape = sample[key]
    per_view = [shape] if isinstance(shape[0], (int, float)) or getattr(shape[0], 'ndim', 1) == 0 else list(shape)
    fix = f'give each view\'s (H, W) of its (padded) image in whole pixels'
    sizes = {size_pair(tuple(s[:2]), f'sample {index} {key}', fix) for s in per_view}
    if len(sizes) != 1:
        raise ValueError(f'sample {index}: the views have different {key}s {sorted(sizes)}; pad the views to one '
                         f'size before batching')
    return sizes.pop()
