"""One sample of a multi-view detection config's data, loaded for the visualisation tools (PETR / 3DPPE configs).

:func:`load_sample` builds the config's test dataset (:class:`~vispe.datasets.MultiViewDetection`, no training
augmentation), picks sample N of a split and collates it as the detector's batch of one (inputs (1, V, 3, H, W),
masks (1, V, H, W), data_samples); :class:`Progress` prints what a tool is doing when a step may take seconds.
"""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from vispe.datasets.multiview_detection import MultiViewDetection, multiview_collate
from vispe.datasets.nuscenes_tables import CAMERA_CHANNELS, load_points
from vispe.engine.arguments import InvalidArgument
from vispe.geometry import Cameras
from vispe.registry import DATASETS

CONVERTER = 'vispe dataset multiview-scenes'


class Progress:
    """Step messages on stderr with the seconds since the tool started (``[ 3.1s] running the detector``)."""

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        self.start = time.perf_counter()

    def __call__(self, message: str) -> None:
        if self.enabled:
            print(f'[{time.perf_counter() - self.start:5.1f}s] {message}', file=sys.stderr, flush=True)


@dataclass
class MultiViewSample:
    """A collated batch of one sample and what the figures need besides the model's inputs.

    Attributes:
        batch: ``dict(inputs (1, V, 3, H, W), masks (1, V, H, W), data_samples [dict])`` (multiview_collate).
        cameras: the sample's cameras, built from its data sample as the detector builds them (B = 1).
        channels: the V camera names in view order.
        classes: the dataset's class names, in label order.
        index, split, sample_token, scene_name: which sample this is.
        lidar_points: (N, 3) float32 LIDAR_TOP points in the sample's scene frame.
        mean, std: (3,) the normalisation of the inputs (to show the images).
    """

    batch: dict[str, Any]
    cameras: Cameras
    channels: tuple[str, ...]
    classes: tuple[str, ...]
    index: int
    split: str
    sample_token: str
    scene_name: str
    lidar_points: np.ndarray
    mean: np.ndarray
    std: np.ndarray

    @property
    def data_sample(self) -> Mapping[str, Any]:
        return self.batch['data_samples'][0]

    @property
    def gt_boxes(self) -> torch.Tensor:
        """(G, 7) ground-truth boxes (x, y, z, l, w, h, yaw) in the scene frame."""
        return torch.as_tensor(self.data_sample['gt_boxes'], dtype=torch.float32).reshape(-1, 7)

    @property
    def gt_labels(self) -> torch.Tensor:
        return torch.as_tensor(self.data_sample['gt_labels'], dtype=torch.int64).reshape(-1)

    def images(self) -> np.ndarray:
        """(V, H, W, 3) float RGB in [0, 1], the normalisation undone."""
        inputs = self.batch['inputs'][0].permute(0, 2, 3, 1).numpy()
        return np.clip(inputs * self.std + self.mean, 0, 1)

    def describe(self) -> str:
        return f'{self.split} sample {self.index} ({self.scene_name}, token {self.sample_token[:8]})'


def check_data_root(data_root: str | Path, option: str = '--data-root') -> Path:
    """The data root must be a folder; otherwise say how to write it (or that a conversion is still writing it).
    ``option`` names where the root came from ('--data-root', or the config's ``data_root``)."""
    root = Path(data_root)
    if root.is_dir():
        return root
    partial = root.with_name(root.name + '.partial')
    if partial.is_dir():
        raise InvalidArgument(option, root, f'not written yet: a conversion is still writing {partial}',
                              'wait until it finishes (it renames the folder when complete)')
    raise InvalidArgument(option, root, 'no such data root', f'write mv-scenes there with `{CONVERTER}` (a real '
                          f'nuScenes config: extract nuScenes there), or pass --data-root with the folder that holds it')


def load_sample(dataset_cfg: Mapping[str, Any], index: int, split: str | None = None,
                data_root: str | Path | None = None, with_depth: bool | None = None) -> MultiViewSample:
    """Sample ``index`` of ``split`` (default: the dataset config's) of a multi-view detection dataset config.

    Args:
        dataset_cfg: the config's ``test_dataloader.dataset`` (a :class:`MultiViewDetection`).
        index: the sample's position in the split, from 0.
        split, data_root: override the config's.
        with_depth: load the LiDAR depth of the images (3DPPE's ground-truth depth); None keeps the config's.

    Raises:
        InvalidArgument: the data root is missing ('--data-root') or ``index`` is outside the split ('--scene').
    """
    cfg = dict(dataset_cfg)
    if cfg.get('type') not in ('MultiViewDetection', MultiViewDetection):
        raise InvalidArgument('config', cfg.get('type'), 'the test dataset is not a MultiViewDetection',
                              'give a multi-view 3D detection config (configs/petr/)')
    cfg.update(train_augment=False, subset=None)
    if split is not None:
        cfg['split'] = split
    if data_root is not None:
        cfg['data_root'] = str(data_root)
    if with_depth is not None:
        cfg['with_depth'] = with_depth
    check_data_root(cfg['data_root'], '--data-root' if data_root is not None else "the config's data_root")
    dataset: MultiViewDetection = DATASETS.build(cfg)
    if not 0 <= index < len(dataset):
        valid = f'give an index from 0 to {len(dataset) - 1}' if len(dataset) else 'choose another --split'
        raise InvalidArgument('--scene', index, f'split {dataset.split!r} of {dataset.data_root} has '
                              f'{len(dataset)} samples', valid)
    batch = multiview_collate([dataset[index]])
    sample = batch['data_samples'][0]
    token = sample['sample_token']
    points = load_points(dataset.tables.lidar_frame(token).path)[:, :3].astype(np.float32)
    return MultiViewSample(batch=batch, cameras=Cameras.from_batch(batch['data_samples']),
                           channels=CAMERA_CHANNELS, classes=tuple(dataset.classes), index=index, split=dataset.split,
                           sample_token=token, scene_name=dataset.tables.scene_name(token), lidar_points=points,
                           mean=dataset.mean.flatten().numpy(), std=dataset.std.flatten().numpy())
