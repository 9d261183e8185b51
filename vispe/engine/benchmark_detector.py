"""Inference speed of multi-view 3D detectors with different camera encodings (PETR, Liu et al. ECCV 2022; 3DPPE,
Shu et al. ICCV 2023), as ratios to the first detector ("no 3D PE") in one run: ``tools/benchmark.py --detectors``.

Each config's model is built (seeded, eval mode) and called under ``torch.no_grad`` in 'predict' mode (the
forward and the NMS-free decoding) on synthetic images (B, V, 3, H, W) ~ N(0, 1), with masks and data samples
from :func:`vispe.multiview_collate`. The rig is fixed, as a deployed detector sees it: the data sample of item 0
of the first config's test set (built at the benchmark's image size) when its ``data_root`` exists, else the
built-in training rig of mv-scenes (``RIG1``: six nuScenes-like cameras, intrinsics scaled to the image size).
Every call gets the same batch object; PETR caches its camera-independent frustum per feature and image size and
its MLP input (the frustum lifted by ``img2lidar``) per rig, while the detector rebuilds ``Cameras`` from the data
samples on every forward (and 3DPPE inverts ``img2lidar`` on every forward: its points follow the predicted depth).

Measured per size, interleaved across models (every run once per round):

- each model's median forward and its ratio to the first model;
- the encoding's part of those same forwards: ``encode_features`` (3DPPE: its depth net), ``key_embedding`` and
  ``encode_queries``, timed inside the forward (CUDA events on the GPU);
- the camera work a new rig costs, timed alone: ``Cameras.from_batch`` (every model, every forward), the float64
  ``img2lidar`` inverse (encodings that read it) and PETR's frustum points (lift of the cached frustum table by
  ``img2lidar`` and normalisation; PETR pays these two only when the rig changes); and how often the model's tables
  were built at that size.

The size is the image height; the width keeps the aspect of the first config's test ``image_size`` (16:9 without).
"""
from __future__ import annotations

import contextlib
import functools
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from mmengine.config import Config
from torch import nn

from vispe.datasets.multiview_detection import multiview_collate
from vispe.encodings import PositionEncoding, TableCache
from vispe.engine.arguments import InvalidArgument
from vispe.engine.benchmark_common import measure
from vispe.engine.runner import load_config, named_unknown_types
from vispe.geometry import Cameras, Positions
from vispe.registry import DATASETS, MODELS

__all__ = ['CAMERA_TABLE_NOTE', 'ENCODING_SECTIONS', 'EncodingTimer', 'FixedRig', 'benchmark_detectors',
           'builtin_rig', 'dataset_rig', 'detector_image_size', 'detector_tables', 'fixed_rig',
           'load_detector', 'synthetic_batch']

ENCODING_SECTIONS = ('encode_features', 'key_embedding', 'encode_queries')
DEFAULT_ASPECT = (9, 16)  # nuScenes' 900 x 1600 images
PER_VIEW_KEYS = ('intrinsics', 'lidar2cam', 'view_valid', 'depth')
CAMERA_RUNS = {'cameras', 'img2lidar'}  # rows of camera_work_runs beside the models


@dataclass
class FixedRig:
    """The data sample (cameras: ``intrinsics`` (V, 3, 3), ``lidar2cam`` (V, 4, 4), ``img_shape``, ``pad_shape``,
    ``view_valid`` (V,)) given with every image of the benchmark, and where it comes from."""

    sample: dict[str, Any]
    source: str

    @property
    def num_views(self) -> int:
        return len(self.sample['intrinsics'])


def evaluation_dataset(cfg: Config) -> dict[str, Any] | None:
    """The dataset of the config's test (else validation) dataloader, or None."""
    for key in ('test_dataloader', 'val_dataloader'):
        loader = cfg.get(key) or {}
        if loader.get('dataset'):
            return dict(loader['dataset'])
    return None


def evaluation_image_size(cfg: Config) -> tuple[int, int] | None:
    """(H, W) of the config's test set (an int is a square), or None."""
    size = (evaluation_dataset(cfg) or {}).get('image_size')
    if not size:
        return None
    return (int(size), int(size)) if isinstance(size, (int, float)) else (int(size[0]), int(size[1]))


def detector_image_size(cfg: Config, size: int) -> tuple[int, int]:
    """(H, W) of a benchmark size: H = size, W keeping the aspect of the config's test ``image_size``."""
    height, width = evaluation_image_size(cfg) or DEFAULT_ASPECT
    return size, max(1, round(size * width / height))


def dataset_rig(dataset_cfg: dict[str, Any], image_size: tuple[int, int]) -> FixedRig:
    """The data sample of item 0 of the dataset built from ``dataset_cfg`` at ``image_size``."""
    with named_unknown_types():
        dataset = DATASETS.build(dict(dataset_cfg, image_size=image_size))
    if len(dataset) == 0:
        raise ValueError(f'The test set of {dataset_cfg.get("data_root")} (split {dataset_cfg.get("split")!r}) is '
                         f'empty, so it gives no rig to benchmark with; convert the data set again or move the folder '
                         f'away to use the built-in rig.')
    sample = dict(dataset[0]['data_samples'])
    if 'intrinsics' not in sample or 'lidar2cam' not in sample:
        raise ValueError(f'{type(dataset).__name__} items have no cameras (intrinsics, lidar2cam) in their '
                         f'data_samples; a multi-view detector config needs a multi-view test set.')
    return FixedRig(sample, f'{dataset_cfg.get("data_root")} split {dataset_cfg.get("split")!r} sample '
                            f'{sample.get("sample_token")}')


def builtin_rig(image_size: tuple[int, int]) -> FixedRig:
    """mv-scenes' training rig (``RIG1``, no jitter) calibrated for ``image_size``, lidar frame as its converter."""
    from vispe.datasets.mv_scenes.rigs import LIDAR, RIG1, calibrate  # the package imports open3d: only when needed
    lidar2ego = np.eye(4)
    lidar2ego[:3, 3] = LIDAR.translation
    calibrations = [calibrate(mount, image_size) for mount in RIG1.cameras]
    intrinsics = np.stack([calibration.intrinsics for calibration in calibrations])
    lidar2cam = np.stack([np.linalg.inv(calibration.cam2ego) @ lidar2ego for calibration in calibrations])
    sample = dict(sample_token='builtin-rig1', intrinsics=torch.from_numpy(intrinsics).float(),
                  lidar2cam=torch.from_numpy(lidar2cam).float(), img_shape=image_size, pad_shape=image_size,
                  view_valid=torch.ones(len(calibrations), dtype=torch.bool))
    return FixedRig(sample, 'built-in mv-scenes RIG1 (vispe.datasets.mv_scenes.rigs), intrinsics scaled to the size')


def fixed_rig(cfg: Config, image_size: tuple[int, int], views: int) -> FixedRig:
    """The rig of ``cfg``'s test set when its data_root exists, else :func:`builtin_rig`; its first ``views``."""
    dataset_cfg = evaluation_dataset(cfg)
    root = dataset_cfg.get('data_root') if dataset_cfg else None
    rig = dataset_rig(dataset_cfg, image_size) if root and Path(root).exists() else builtin_rig(image_size)
    if views > rig.num_views:
        raise InvalidArgument('--views', views, f'the rig ({rig.source}) has {rig.num_views} cameras',
                              f'give --views {rig.num_views} or fewer')
    sample = {key: value[:views] if key in PER_VIEW_KEYS else value for key, value in rig.sample.items()}
    return FixedRig(sample, rig.source)


def synthetic_batch(rig: FixedRig, batch: int, image_size: tuple[int, int], device: torch.device,
                    seed: int = 0) -> dict[str, Any]:
    """``dict(inputs (B, V, 3, H, W) ~ N(0, 1), masks (B, V, H, W), data_samples)`` of ``rig`` (seeded)."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(batch, rig.num_views, 3, *image_size, generator=generator)
    collated = multiview_collate([dict(inputs=image, data_samples=rig.sample) for image in images])
    return dict(inputs=collated['inputs'].to(device), masks=collated['masks'].to(device),
                data_samples=collated['data_samples'])


def load_detector(path: str | Path, device: torch.device) -> nn.Module:
    """The config's model (seeded, eval mode, on ``device``), checked to be a multi-view detector whose
    ``encoding`` is a camera encoding."""
    cfg = load_config(path)
    if not isinstance(cfg.get('model'), dict):
        raise InvalidArgument('--detectors', str(path), 'the config defines no model', 'give PETR / 3DPPE detector '
                                                                                         'configs (configs/petr/)')
    torch.manual_seed(0)
    with named_unknown_types():
        model = MODELS.build(cfg.model)
    encoding = getattr(model, 'encoding', None)
    if not hasattr(model, 'memory_positions') or not isinstance(encoding, PositionEncoding) \
            or not encoding.implements('key_embedding'):
        raise InvalidArgument('--detectors', str(path), f'its model {type(model).__name__} is not a multi-view '
                              f'detector with a camera encoding', 'give PETR / 3DPPE detector configs '
                                                                  '(configs/petr/)')
    return model.to(device).eval()


class EncodingTimer:
    """Times a camera encoding's ``encode_features``, ``key_embedding`` and ``encode_queries`` inside the forwards
    of its detector (while entered, the instance's methods are wrapped; on exit the class's are back).

    On CUDA each call is bracketed by events on the current stream, so nothing extra synchronises the forward.
    :meth:`take` returns the seconds per method since the last take and their sum as ``'encoding'``.
    """

    def __init__(self, encoding: nn.Module, device: torch.device) -> None:
        self.encoding, self.device = encoding, device
        self._spans: dict[str, list[Any]] = {name: [] for name in ENCODING_SECTIONS}

    def __enter__(self) -> EncodingTimer:
        for name in ENCODING_SECTIONS:
            setattr(self.encoding, name, self._timed(name, getattr(self.encoding, name)))
        return self

    def __exit__(self, *exc_info: object) -> None:
        for name in ENCODING_SECTIONS:
            delattr(self.encoding, name)

    def _timed(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.device.type == 'cuda':
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                result = method(*args, **kwargs)
                end.record()
                self._spans[name].append((start, end))
                return result
            start_time = time.perf_counter()
            result = method(*args, **kwargs)
            self._spans[name].append(time.perf_counter() - start_time)
            return result
        return timed

    def take(self) -> dict[str, float]:
        """Seconds spent in each method (summed over its calls) since the last take, and ``'encoding'``."""
        if self.device.type == 'cuda':
            torch.cuda.synchronize(self.device)
            seconds = {name: sum(start.elapsed_time(end) for start, end in spans) / 1e3
                       for name, spans in self._spans.items()}
        else:
            seconds = {name: float(sum(spans)) for name, spans in self._spans.items()}
        for spans in self._spans.values():
            spans.clear()
        return dict(seconds, encoding=sum(seconds.values()))


def table_builds(model: nn.Module) -> int:
    """How many tables the model's :class:`~vispe.encodings.TableCache` s have built so far."""
    return sum(value.builds for module in model.modules() for value in vars(module).values()
               if isinstance(value, TableCache))


def probe_positions(model: nn.Module, data: dict[str, Any]) -> tuple[Positions, bool]:
    """The memory positions of one forward of ``model`` on ``data`` (fresh cameras) after its encoding ran, and
    whether the encoding read the cameras' ``img2lidar``."""
    inputs, masks, samples = data['inputs'], data['masks'], data['data_samples']
    with torch.no_grad():
        features = model.backbone(inputs.flatten(0, 1))
        pos = model.memory_positions(inputs.shape[0], inputs.shape[1], features.shape[-2:], masks,
                                     Cameras.from_batch(samples, inputs.device), model.depth_maps(samples,
                                                                                                  inputs.device))
        encoded = model.encoding.encode_features(features, pos)
        model.encoding.key_embedding(pos, inputs.shape[0], encoded.extras)
    return pos, 'img2lidar' in vars(pos.camera.cameras)


def camera_work_runs(models: dict[str, nn.Module], data: dict[str, Any]) -> tuple[dict[str, Callable[[], object]],
                                                                                 dict[str, bool]]:
    """Runs of the per-forward camera work (``cameras``, ``img2lidar``, ``<label> frustum`` for encodings with a
    ``frustum``) and, per model, whether its encoding reads ``img2lidar``."""
    samples, device = data['data_samples'], data['inputs'].device
    cameras = Cameras.from_batch(samples, device)

    def invert() -> torch.Tensor:
        vars(cameras).pop('img2lidar', None)  # a functools.cached_property: drop the value to time the inverse
        return cameras.img2lidar

    runs: dict[str, Callable[[], object]] = {'cameras': lambda: Cameras.from_batch(samples, device),
                                             'img2lidar': invert}
    reads_img2lidar = {}
    for label, model in models.items():
        pos, reads_img2lidar[label] = probe_positions(model, data)
        if callable(getattr(model.encoding, 'frustum', None)):
            runs[f'{label} frustum'] = functools.partial(frustum_points, model.encoding, pos)
    return runs, reads_img2lidar


def frustum_points(encoding: nn.Module, pos: Positions) -> torch.Tensor:
    """PETR's per-forward frustum points of ``pos`` (its cameras' ``img2lidar`` already computed)."""
    with torch.no_grad():
        return encoding.frustum(pos)


def forward_run(model: nn.Module, data: dict[str, Any]) -> Callable[[], object]:
    """One inference call of the detector on ``data`` (the same objects every time)."""
    def run() -> object:
        with torch.no_grad():
            return model(data['inputs'], data['masks'], data['data_samples'], mode='predict')
    return run


def check_size(label: str, model: nn.Module, size: int, image_size: tuple[int, int]) -> None:
    """Images at least one backbone stride a side, or an error naming the smallest size."""
    stride = model.backbone.stride
    if min(image_size) < stride:
        smallest = math.ceil(stride * max(1.0, image_size[0] / image_size[1]))
        raise InvalidArgument('--sizes', size, f'{label} reduces images by {stride}, and {image_size[0]}x'
                                               f'{image_size[1]} is smaller than that', f'give sizes of at least '
                                                                                        f'{smallest}')


def size_rows(size: int, image_size: tuple[int, int], models: dict[str, nn.Module], results: dict[str, dict],
              reads_img2lidar: dict[str, bool], builds: dict[str, int]) -> list[dict[str, Any]]:
    """One row per model of one size (see :func:`benchmark_detectors`)."""
    baseline = results[next(iter(models))]['seconds']
    cameras, img2lidar = results['cameras']['seconds'], results['img2lidar']['seconds']
    rows = []
    for label, model in models.items():
        result = results[label]
        frustum = results.get(f'{label} frustum', {}).get('seconds', 0.0)
        own_img2lidar = img2lidar if reads_img2lidar[label] else 0.0
        peak = result['peak_bytes']
        rows.append(dict(
            size=size, image_size=list(image_size), model=label, encoding=type(model.encoding).__name__,
            seconds=result['seconds'], ratio_to_baseline=result['seconds'] / baseline,
            encoding_seconds=result['encoding_seconds'], encoding_share=result['encoding_seconds'] / result['seconds'],
            **{f'{name}_seconds': result[f'{name}_seconds'] for name in ENCODING_SECTIONS},
            cameras_seconds=cameras, img2lidar_seconds=own_img2lidar, frustum_seconds=frustum,
            camera_work_share=(cameras + own_img2lidar + frustum) / result['seconds'], table_builds=builds[label],
            peak_bytes=None if math.isnan(peak) else peak, params=sum(p.numel() for p in model.parameters())))
    return rows


def benchmark_detectors(config_paths: Sequence[str | Path], sizes: Sequence[int] | None, batch: int, views: int,
                        repeats: int, warmup: int, device: torch.device) -> dict[str, Any]:
    """Time the detectors of ``config_paths`` at each size (image heights; None: the first config's test height);
    the first config is the baseline.

    Returns:
        ``dict(baseline, rigs {size: source}, rows)``, a row per size and model with its forward ``seconds``,
        ``ratio_to_baseline``, ``encoding_seconds`` (and per method) and ``encoding_share`` of the forward,
        ``cameras_seconds`` / ``img2lidar_seconds`` / ``frustum_seconds`` (the camera work a new rig costs it; 0
        where its encoding does not do it), ``camera_work_share`` (their sum over its forward), ``table_builds`` at
        that size (warm-up, probe and timed calls: PETR builds 2, its frustum and its rig's MLP input), ``peak_bytes``
        (CUDA, else None) and ``params``.
    """
    labels = [Path(path).stem for path in config_paths]
    clashes = sorted({label for label in labels if labels.count(label) > 1} | (CAMERA_RUNS & set(labels)))
    if clashes:
        raise InvalidArgument('--detectors', [str(path) for path in config_paths], f'rows are labelled by the config '
                              f'file name, and {", ".join(clashes)} would label two rows', 'rename the config')
    models = {label: load_detector(path, device) for label, path in zip(labels, config_paths)}
    first_cfg = load_config(config_paths[0])
    if sizes is None:
        if evaluation_image_size(first_cfg) is None:
            raise InvalidArgument('--detectors', str(config_paths[0]), 'its test set names no image_size to take the '
                                                                       'benchmark size from', 'give --sizes')
        sizes = [evaluation_image_size(first_cfg)[0]]
    rows, rigs = [], {}
    for size in sizes:
        image_size = detector_image_size(first_cfg, size)
        for label, model in models.items():
            check_size(label, model, size, image_size)
        rig = fixed_rig(first_cfg, image_size, views)
        rigs[size] = rig.source
        data = synthetic_batch(rig, batch, image_size, device)
        builds = {label: table_builds(model) for label, model in models.items()}
        runs, reads_img2lidar = camera_work_runs(models, data)
        timers = {label: EncodingTimer(model.encoding, device) for label, model in models.items()}
        with contextlib.ExitStack() as stack:
            for timer in timers.values():
                stack.enter_context(timer)
            forwards = {label: forward_run(model, data) for label, model in models.items()}
            results = measure({**forwards, **runs}, device, repeats, warmup,
                              sections={label: timer.take for label, timer in timers.items()})
        builds = {label: table_builds(model) - builds[label] for label, model in models.items()}
        rows += size_rows(size, image_size, models, results, reads_img2lidar, builds)
    return dict(baseline=next(iter(models)), rigs=rigs, rows=rows)


def _ms(seconds: float) -> str:
    return f'{seconds * 1e3:.2f}'


def detector_tables(result: dict[str, Any]) -> tuple[list[list[str]], list[list[str]]]:
    """The speed table (forward, ratio, encoding share, per method, params, CUDA peak) and the camera-work table
    of :func:`benchmark_detectors`' result, as header + formatted cells."""
    rows, baseline = result['rows'], result['baseline']
    cuda = any(row['peak_bytes'] is not None for row in rows)
    speed = [['size', 'model', 'ms', f'x {baseline}', 'encoding ms', 'encoding %', 'features ms', 'keys ms',
              'queries ms', 'params', *(['peak MB'] if cuda else [])]]
    camera = [['size', 'model', 'cameras ms', 'img2lidar ms', 'frustum ms', 'camera work %', 'table builds']]
    for row in rows:
        size = f"{row['image_size'][0]}x{row['image_size'][1]}"
        speed.append([size, row['model'], _ms(row['seconds']), f"{row['ratio_to_baseline']:.3f}",
                      _ms(row['encoding_seconds']), f"{100 * row['encoding_share']:.1f}",
                      *[_ms(row[f'{name}_seconds']) for name in ENCODING_SECTIONS], f"{row['params'] / 1e6:.3f}M",
                      *([f"{row['peak_bytes'] / 2**20:.1f}"] if cuda else [])])
        camera.append([size, row['model'], _ms(row['cameras_seconds']),
                       _ms(row['img2lidar_seconds']) if row['img2lidar_seconds'] else '-',
                       _ms(row['frustum_seconds']) if row['frustum_seconds'] else '-',
                       f"{100 * row['camera_work_share']:.1f}", str(row['table_builds'])])
    return speed, camera


CAMERA_TABLE_NOTE = ("Camera work a new rig costs, each part timed alone: 'cameras' builds Cameras from the data "
                     "samples (every model, every forward), 'img2lidar' the float64 inverse (encodings that read "
                     "it), 'frustum' PETR's points (the cached frustum table lifted by img2lidar, normalised; PETR "
                     "caches its MLP input per rig, so with this fixed rig its timed forwards skip img2lidar and "
                     "frustum); 'camera work %' is their sum over the model's forward; 'table builds' counts the "
                     "encoding's table builds over the size's warm-up, probe and timed calls (PETR: its frustum "
                     "table and its rig's MLP input, 2 when both are built once, then cached).")
