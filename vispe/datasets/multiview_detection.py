"""Multi-view 3D detection data (PETR, Liu et al. ECCV 2022; 3DPPE, Shu et al. ICCV 2023) from a nuScenes-format
root: six camera images per sample, their cameras after image augmentation, 3D boxes in the lidar frame and,
for 3DPPE, sparse (lidar) or dense depth in the augmented images.

Image pipeline (PETR's ``ResizeCropFlipImage``, one draw per sample, shared by the views): each view is
resized by ``max(H / h0, W / w0)`` (so it covers the output ``image_size`` = (H, W)) times a factor drawn from
``resize_range`` in training, cut to (H, W) (``crop='bottom'``: bottom rows, as mmdet3d's PETR with
``bot_pct_lim=(0, 0)``, centred columns; ``'center'``: centred both ways; random offsets in training), and
flipped horizontally with probability 0.5 in training (all views together; the scene is mirrored with them,
y -> -y and yaw -> -yaw, recorded as ``scene_transform``). ``intrinsics_scale`` s zooms every view about its
principal point (fx, fy times s; the image is resampled with it). The intrinsics follow every step
(:func:`vispe.geometry.resize_cameras`, :func:`~vispe.geometry.crop_cameras`, :func:`~vispe.geometry.hflip_cameras`,
:class:`~vispe.geometry.SceneTransform`), so boxes and points project to the same image content as before.
Pixels outside the source image are 0 after normalisation (as the padding of :func:`multiview_collate`).
"""
from __future__ import annotations

import difflib
import numbers
import random
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image
from torch.utils.data import Dataset

from vispe.datasets.coco_detection import IMAGENET_MEAN, IMAGENET_STD
from vispe.datasets.nuscenes_table_checks import check_camera_channels
from vispe.datasets.nuscenes_tables import (CAMERA_CHANNELS, DETECTION_NAMES, NuScenesTables, SensorFrame,
                                            load_points)
from vispe.datasets.options import check_bool, check_choice, check_normalisation, check_positive_int
from vispe.geometry import Cameras, SceneTransform, crop_cameras, hflip_cameras, resize_cameras
from vispe.registry import DATASETS, FUNCTIONS

CROP_MODES = ('bottom', 'center')
DEPTH_SOURCES = ('lidar', 'dense')
# Window of one view: the size it is resized to and the (top, left) of the output inside the resized image.
Window = tuple[tuple[int, int], int, int]


def _check_pair(owner: str, name: str, value: Any, integer: bool) -> tuple:
    """Two positive numbers (ints when ``integer``), e.g. an (H, W) size or a (low, high) range."""
    kind = 'ints' if integer else 'numbers'
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 2 or not all(
            isinstance(v, numbers.Integral if integer else numbers.Real) and not isinstance(v, bool) and v > 0
            for v in value):
        raise ValueError(f'{owner} {name} must be two positive {kind}; got {value!r}.')
    return tuple(int(v) if integer else float(v) for v in value)


def _offset(extra: int, fraction: float | None) -> int:
    """Offset of an output window in a dimension the resized image exceeds by ``extra`` (negative: pads):
    centred when ``fraction`` is None, else ``fraction`` of the way through the possible offsets."""
    if fraction is None:
        return extra // 2
    low, high = min(0, extra), max(0, extra)
    return low + int(round(fraction * (high - low)))


def _resample(image: torch.Tensor, window: Window, size: tuple[int, int], mode: str) -> torch.Tensor:
    """(C, h0, w0) -> (C, H, W): resize to ``window[0]`` (``align_corners=False`` sampling; bilinear with
    antialiasing, or 'nearest-exact'), then cut (H, W) at (top, left), zeros outside the image."""
    (height, width), top, left = window
    if (height, width) != tuple(image.shape[-2:]):
        if mode == 'bilinear':
            image = F.interpolate(image[None], (height, width), mode='bilinear', align_corners=False, antialias=True)[0]
        else:
            image = F.interpolate(image[None], (height, width), mode='nearest-exact')[0]
    out = image.new_zeros(image.shape[0], *size)
    rows = slice(max(0, top), min(height, top + size[0]))
    cols = slice(max(0, left), min(width, left + size[1]))
    out[:, rows.start - top:rows.stop - top, cols.start - left:cols.stop - left] = image[:, rows, cols]
    return out


def sparse_depth(points: torch.Tensor, cameras: Cameras, regions: torch.Tensor) -> torch.Tensor:
    """Sparse depth maps of lidar points: each pixel keeps its nearest point's camera depth, 0 = none.

    Args:
        points: (N, 3) points in the cameras' current scene frame.
        cameras: one sample (B = 1) of V views, image size (H, W).
        regions: (V, 4) int64 (top, bottom, left, right) pixel ranges of real image content per view; points
            outside (or in views with an empty region) are dropped.

    Returns:
        (V, H, W) float32 depth (metres), nearest point per pixel (pixel centres at integers).
    """
    height, width = cameras.image_size
    views = cameras.num_views
    pixels, depth = cameras.project(points[None].float())
    cols = torch.floor(pixels[0, ..., 0] + 0.5)
    rows = torch.floor(pixels[0, ..., 1] + 0.5)
    depth = depth[0]
    top, bottom, left, right = (regions[:, i, None] for i in range(4))
    keep = (depth > 0) & (rows >= top) & (rows < bottom) & (cols >= left) & (cols < right)
    view = torch.arange(views)[:, None].expand_as(depth)
    flat = (view[keep] * height + rows[keep].long()) * width + cols[keep].long()
    out = torch.full((views * height * width,), torch.inf)
    out.scatter_reduce_(0, flat, depth[keep], reduce='amin')
    return out.masked_fill_(torch.isinf(out), 0).view(views, height, width)


@DATASETS.register_module()
class MultiViewDetection(Dataset):
    """Six-camera samples of a nuScenes-format root (:class:`~vispe.datasets.nuscenes_tables.NuScenesTables`) for
    PETR-style detectors; see the module docstring for the image pipeline.

    Items are ``dict(inputs=(V, 3, H, W) float32 normalised, data_samples=dict(sample_token, intrinsics (V, 3, 3)
    float32 after augmentation, lidar2cam (V, 4, 4) float32 rigid, img_shape (H, W), pad_shape (H, W), gt_boxes
    (N, 7) float32 (x, y, z, l, w, h, yaw) lidar frame, gt_labels (N,) int64 index in ``classes``, gt_velocities
    (N, 2) float32 (vx, vy) m/s in the lidar frame (the devkit's rule; 0 where unknown, as mmdet3d), lidar2global
    (4, 4) float64, view_valid (V,) bool, depth (V, H, W) float32 metres with ``with_depth``, scene_transform
    (4, 4) float32 when flips are on in training))``. V = 6 in :data:`CAMERA_CHANNELS` order. A view without a
    key-frame record (or dropped by ``view_dropout``) is zeros with ``view_valid`` False; a missing one gets
    placeholder cameras (identity lidar2cam, focal W at the image centre). A camera channel missing from the
    sensor table (e.g. renamed) is warned about at construction: its view would be missing from every sample.

    Args:
        data_root: nuScenes-format root (``<root>/<version>/*.json``, ``samples/``, ``depth/``).
        split: a split of ``<root>/splits.json``, or of the nuScenes devkit (``'train'``, ``'val'``, ...).
        classes: detection names to keep (nuScenes' ten or a subset); the label is the index here. Annotations
            of other classes are dropped.
        image_size: (H, W) of the output images.
        train_augment: random resize, crop offsets, flip and view dropout.
        resize_range: (low, high) factor on the covering resize, drawn in training.
        crop: 'bottom' or 'center' (see the module docstring).
        flip: horizontal flip (with the mirrored scene) in training.
        with_depth: add ``depth``; ``depth_source`` 'lidar' projects the sample's LIDAR_TOP points (nearest
            per pixel), 'dense' reads ``depth/<CHANNEL>/<image stem>.png`` (uint16 millimetres of camera depth z,
            0 = none) and resamples it nearest-neighbour.
        view_dropout: probability of dropping each view in training (one view is always kept).
        version: the table folder.
        mean, std: normalisation of [0, 1] RGB.
        subset: keep the first N samples of the split.
        intrinsics_scale: zoom s about the principal point (1.25 zooms in): fx, fy times s, images resampled.
        min_points: drop annotations with fewer lidar + radar points (the devkit's evaluation drops boxes with
            none; 0 keeps all).
    """

    def __init__(self, data_root: str, split: str, classes: Sequence[str] = DETECTION_NAMES,
                 image_size: Sequence[int] = (320, 800), train_augment: bool = False,
                 resize_range: Sequence[float] = (0.9, 1.1), crop: str = 'bottom', flip: bool = True,
                 with_depth: bool = False, depth_source: str = 'lidar', view_dropout: float = 0.0,
                 version: str = 'v1.0-trainval', mean: Sequence[float] = IMAGENET_MEAN,
                 std: Sequence[float] = IMAGENET_STD, subset: int | None = None, intrinsics_scale: float = 1.0,
                 min_points: int = 1) -> None:
        owner = 'MultiViewDetection'
        self.classes = self._check_classes(classes)
        self.image_size = _check_pair(owner, 'image_size', image_size, integer=True)
        self.resize_range = _check_pair(owner, 'resize_range', resize_range, integer=False)
        if self.resize_range[0] > self.resize_range[1]:
            raise ValueError(f'{owner} resize_range must have low ≤ high; got {resize_range!r}.')
        self.train_augment = check_bool(owner, 'train_augment', train_augment)
        self.crop = check_choice(owner, 'crop', crop, CROP_MODES)
        self.flip = check_bool(owner, 'flip', flip)
        self.with_depth = check_bool(owner, 'with_depth', with_depth)
        self.depth_source = check_choice(owner, 'depth_source', depth_source, DEPTH_SOURCES)
        if not (isinstance(view_dropout, numbers.Real) and 0 <= view_dropout < 1):
            raise ValueError(f'{owner} view_dropout must be a probability in [0, 1); got {view_dropout!r}.')
        self.view_dropout = float(view_dropout)
        if not (isinstance(intrinsics_scale, numbers.Real) and intrinsics_scale > 0):
            raise ValueError(f'{owner} intrinsics_scale must be > 0 (1 = no zoom, 1.25 zooms in); got '
                             f'{intrinsics_scale!r}.')
        self.intrinsics_scale = float(intrinsics_scale)
        check_normalisation(owner, mean, std, channels=3)
        self.mean = torch.tensor(mean, dtype=torch.float32)[:, None, None]
        self.std = torch.tensor(std, dtype=torch.float32)[:, None, None]
        if isinstance(min_points, bool) or not isinstance(min_points, numbers.Integral) or min_points < 0:
            raise ValueError(f'{owner} min_points must be an int ≥ 0; got {min_points!r}.')
        self.min_points = int(min_points)
        self.data_root = Path(data_root)
        self.split = split
        self.tables = NuScenesTables(data_root, version)
        check_camera_channels(self.tables.tables['sensor'], self.tables.table_root / 'sensor.json', CAMERA_CHANNELS)
        self.sample_tokens = self.tables.sample_tokens(split)
        if subset is not None:
            check_positive_int(owner, 'subset', subset)
            if subset > len(self.sample_tokens):
                raise ValueError(f'{owner} subset={subset} is larger than split {split!r} ({len(self.sample_tokens)} '
                                 f'samples): choose a subset of at most {len(self.sample_tokens)}.')
            self.sample_tokens = self.sample_tokens[:subset]

    @staticmethod
    def _check_classes(classes: Sequence[str]) -> tuple[str, ...]:
        if isinstance(classes, str) or not isinstance(classes, Sequence) or not classes:
            raise ValueError(f'MultiViewDetection classes must be a non-empty list of nuScenes detection names; got '
                             f'{classes!r}.')
        for name in classes:
            if name not in DETECTION_NAMES:
                close = difflib.get_close_matches(str(name), DETECTION_NAMES, n=1)
                hint = f' Did you mean {close[0]!r}?' if close else ''
                raise ValueError(f'MultiViewDetection class {name!r} is not a nuScenes detection name '
                                 f'{DETECTION_NAMES}.{hint}')
        if len(set(classes)) != len(classes):
            raise ValueError(f'MultiViewDetection classes {list(classes)} name a class twice.')
        return tuple(classes)

    @property
    def metainfo(self) -> dict[str, Any]:
        """The class names in label order (mmengine's dataset meta)."""
        return dict(classes=self.classes)

    def __len__(self) -> int:
        return len(self.sample_tokens)

    def load_image(self, frame: SensorFrame, sample_token: str) -> torch.Tensor:
        """uint8 (3, h, w) image of a camera record; errors name the file, the sample and the fix."""
        try:
            with Image.open(frame.path) as image:
                array = np.array(image.convert("RGB"))
        except FileNotFoundError:
            raise FileNotFoundError(f'Image {frame.path} ({frame.channel} of sample {sample_token}) not found '
                                    f'(data_root={self.data_root}): extract the nuScenes samples there, or write the '
                                    f'data set again.') from None
        except OSError as exc:
            raise RuntimeError(f'Image {frame.path} ({frame.channel} of sample {sample_token}) is corrupt or '
                               f'unreadable ({exc}): replace the file.') from None
        if frame.image_size is not None and array.shape[:2] != frame.image_size:
            raise ValueError(f'Image {frame.path} is {array.shape[:2]} (H, W) but its sample_data record says '
                             f'{frame.image_size}; its intrinsics refer to the recorded size: replace the image.')
        return torch.from_numpy(array).permute(2, 0, 1)

    def load_dense_depth(self, frame: SensorFrame, size: tuple[int, int]) -> torch.Tensor:
        """(1, h, w) float32 metres from ``depth/<CHANNEL>/<image stem>.png`` (uint16 millimetres)."""
        path = self.data_root / 'depth' / frame.channel / f'{frame.path.stem}.png'
        if not path.is_file():
            raise FileNotFoundError(f'Dense depth {path} not found: depth_source="dense" needs the depth/ folder of '
                                    f'mv-scenes (write it again), or use depth_source="lidar".')
        with Image.open(path) as image:
            mode = image.mode
            array = np.asarray(image)
        if mode not in ('I;16', 'I;16B', 'I') or array.ndim != 2 or array.min(initial=0) < 0 or \
                array.max(initial=0) > 65535:
            raise RuntimeError(f'Dense depth {path} is a {mode} image of {array.dtype}: it must be a single-channel '
                               f'16-bit PNG of millimetres (0 = none); write it again.')
        if array.shape != size:
            raise ValueError(f'Dense depth {path} is {array.shape} (H, W) but its image is {size}; write it again at '
                             f'the image size.')
        return torch.from_numpy(array.astype(np.float32) / 1000)[None]

    def _draw(self) -> tuple[float, tuple[float, float] | None, bool, torch.Tensor]:
        """One augmentation per sample: resize factor, crop fractions (None = centred), flip, dropped views."""
        views = len(CAMERA_CHANNELS)
        if not self.train_augment:
            return 1.0, None, False, torch.zeros(views, dtype=torch.bool)
        factor = random.uniform(*self.resize_range)
        fractions = (random.random(), random.random())
        flip = self.flip and random.random() < 0.5
        dropped = torch.tensor([random.random() < self.view_dropout for _ in range(views)])
        if dropped.all():
            dropped[random.randrange(views)] = False
        return factor, fractions, flip, dropped

    def _window(self, source: tuple[int, int], intrinsics: np.ndarray, factor: float,
                fractions: tuple[float, float] | None) -> Window:
        """Resized size and (top, left) of one view (see the module docstring)."""
        (height, width), (src_h, src_w) = self.image_size, source
        scale = factor * max(height / src_h, width / src_w)
        size = (max(1, round(src_h * scale)), max(1, round(src_w * scale)))
        row_fraction, col_fraction = (None, None) if fractions is None else fractions
        top = size[0] - height if self.crop == 'bottom' else _offset(size[0] - height, row_fraction)
        left = _offset(size[1] - width, col_fraction)
        if self.intrinsics_scale == 1:
            return size, top, left
        zoomed = (max(1, round(src_h * scale * self.intrinsics_scale)),
                  max(1, round(src_w * scale * self.intrinsics_scale)))
        # principal point (exact resize: c' = s (c + 0.5) - 0.5) of the unzoomed window, kept by the zoomed one
        centre = [(size[i] / source[i] * (intrinsics[1 - i, 2] + 0.5) - 0.5) - offset for i, offset in
                  enumerate((top, left))]
        zoom_top, zoom_left = (int(round(zoomed[i] / source[i] * (intrinsics[1 - i, 2] + 0.5) - 0.5 - centre[i]))
                               for i in range(2))
        return zoomed, zoom_top, zoom_left

    def _placeholder_intrinsics(self) -> torch.Tensor:
        height, width = self.image_size
        return torch.tensor([[width, 0, (width - 1) / 2], [0, width, (height - 1) / 2], [0, 0, 1]],
                            dtype=torch.float64)

    def _load_views(self, token: str, frames: list[SensorFrame | None], lidar2cam: torch.Tensor, factor: float,
                    fractions: tuple[float, float] | None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor,
                                                                    torch.Tensor]:
        """Resampled views of one sample: images (V, 3, H, W), dense depth (V, 1, H, W) (zeros unless read),
        (V, 4) (top, bottom, left, right) of the real image content, and (V, 3, 3) float64 intrinsics."""
        height, width = self.image_size
        images = torch.zeros(len(frames), 3, height, width)
        dense = torch.zeros(len(frames), 1, height, width)
        regions = torch.zeros(len(frames), 4, dtype=torch.int64)
        intrinsics = self._placeholder_intrinsics().repeat(len(frames), 1, 1)
        groups: dict[tuple, list[tuple[int, int, int]]] = defaultdict(list)  # views resized alike
        for view, frame in enumerate(frames):
            if frame is None:
                continue
            image = self.load_image(frame, token)
            source = tuple(image.shape[-2:])
            window = self._window(source, frame.intrinsics, factor, fractions)
            image = (image.float() / 255 - self.mean) / self.std
            images[view] = _resample(image, window, self.image_size, 'bilinear')
            if self.with_depth and self.depth_source == 'dense':
                dense[view] = _resample(self.load_dense_depth(frame, source), window, self.image_size, 'nearest-exact')
            (resized_h, resized_w), top, left = window
            regions[view] = torch.tensor([max(0, -top), min(height, resized_h - top), max(0, -left),
                                          min(width, resized_w - left)])
            intrinsics[view] = torch.from_numpy(frame.intrinsics)
            groups[(source, window[0])].append((view, top, left))
        for (source, resized), members in groups.items():
            views, tops, lefts = (torch.tensor(column) for column in zip(*members))
            cameras = Cameras(intrinsics[views][None], lidar2cam[views][None], source)
            cameras = crop_cameras(resize_cameras(cameras, resized), tops[None], lefts[None], self.image_size)
            intrinsics[views] = cameras.intrinsics[0].double()
        return images, dense, regions, intrinsics

    def __getitem__(self, index: int) -> dict[str, Any]:
        token = self.sample_tokens[index]
        frames = self.tables.camera_frames(token)
        lidar2cam, view_valid = self.tables.lidar2cam(token)
        lidar2cam = torch.from_numpy(lidar2cam)
        view_valid = torch.from_numpy(view_valid)
        factor, fractions, flip, dropped = self._draw()
        images, dense, regions, intrinsics = self._load_views(token, frames, lidar2cam, factor, fractions)
        width = self.image_size[1]
        cameras = Cameras(intrinsics[None], lidar2cam[None], self.image_size)
        annotations = self.tables.annotations(token)
        keep = [name in self.classes and points >= self.min_points
                for name, points in zip(annotations.detection_names, annotations.num_points)]
        kept = torch.tensor(keep, dtype=torch.bool)
        boxes = annotations.boxes[kept].reshape(-1, 7)
        velocities = torch.from_numpy(annotations.velocities)[kept].reshape(-1, 2).nan_to_num(0.0)
        labels = torch.tensor([self.classes.index(name) for name, ok in zip(annotations.detection_names, keep) if ok],
                              dtype=torch.int64)
        scene = None
        if flip:
            images, dense = images.flip(-1), dense.flip(-1)
            regions[:, 2:] = width - regions[:, [3, 2]]
            scene = SceneTransform.flip(y=True)
            cameras = scene.apply_cameras(hflip_cameras(cameras, True))
            boxes = scene.apply_boxes(boxes[None])[0]
            velocities = velocities @ scene.matrix[0, :2, :2].T
        view_valid &= ~dropped
        images[~view_valid] = 0
        samples = dict(sample_token=token, intrinsics=cameras.intrinsics[0], lidar2cam=cameras.lidar2cam[0],
                       img_shape=self.image_size, pad_shape=self.image_size, gt_boxes=boxes.float(), gt_labels=labels,
                       gt_velocities=velocities.float(),
                       lidar2global=torch.from_numpy(self.tables.lidar2global(token)), view_valid=view_valid)
        if self.train_augment and self.flip:
            samples['scene_transform'] = cameras.scene_transform[0]
        if self.with_depth:
            if self.depth_source == 'lidar':
                points = torch.from_numpy(load_points(self.tables.lidar_frame(token).path)[:, :3])
                if scene is not None:
                    points = scene.apply_points(points[None])[0]
                regions[~view_valid] = 0
                depth = sparse_depth(points, cameras, regions)
            else:
                depth = dense[:, 0]
            samples['depth'] = depth.masked_fill_(~view_valid[:, None, None], 0)
        return dict(inputs=images, data_samples=samples)


@FUNCTIONS.register_module()
def multiview_collate(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack multi-view items, padding the views to the largest height and width of the batch (bottom and right,
    zeros; ``depth`` likewise, and ``pad_shape`` becomes the padded size).

    Returns ``dict(inputs (B, V, 3, H, W), masks (B, V, H, W) bool True on real pixels of valid views,
    data_samples list)``. Use it as ``collate_fn=dict(type='vispe.multiview_collate')``.
    """
    if not batch:
        raise ValueError('multiview_collate needs at least one item')
    views = {tuple(item['inputs'].shape[:2]) for item in batch}
    if len(views) != 1 or any(item['inputs'].ndim != 4 for item in batch):
        raise ValueError(f'multiview_collate needs (V, C, H, W) inputs with the same V and C in every item; got '
                         f'{sorted(views)}: batch samples of one rig layout.')
    height = max(item['inputs'].shape[-2] for item in batch)
    width = max(item['inputs'].shape[-1] for item in batch)
    first = batch[0]['inputs']
    inputs = first.new_zeros(len(batch), *first.shape[:2], height, width)
    masks = torch.zeros(len(batch), first.shape[0], height, width, dtype=torch.bool)
    samples = []
    for index, item in enumerate(batch):
        h, w = item['inputs'].shape[-2:]
        inputs[index, ..., :h, :w] = item['inputs']
        sample = dict(item['data_samples'], pad_shape=(height, width))
        valid = torch.as_tensor(sample.get('view_valid', torch.ones(first.shape[0], dtype=torch.bool)))
        masks[index, valid, :h, :w] = True
        if 'depth' in sample:
            sample['depth'] = F.pad(sample['depth'], (0, width - w, 0, height - h))
        samples.append(sample)
    Cameras.from_batch(samples)  # the calibrations checked where they enter, on the host (a forward on a GPU skips it)
    return dict(inputs=inputs, masks=masks, data_samples=samples)
