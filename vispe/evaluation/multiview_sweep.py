"""A multi-view 3D detector (PETR, Liu et al. ECCV 2022; 3DPPE, Shu et al. ICCV 2023) measured across camera
changes, for ``tools/eval_resolution.py``: the axes, the test set and nuScenes metric of each point, and runs
that differ only by their seed grouped as mean and spread.

A sweep point has three axes; images and intrinsics always change together (``MultiViewDetection`` updates
the cameras with every resize, crop and zoom):

- image size (H, W): ``--sizes`` are image heights; W = round(H · W0 / H0), rounded half up, with (H0, W0) the
  config's test ``image_size`` (PETR's mv-scenes configs: (90, 160), so 72 -> (72, 128), 126 -> (126, 224)).
- intrinsics scale s: ``MultiViewDetection(intrinsics_scale=s)`` zooms every view about its principal point
  (fx, fy times s, the image resampled with them; s > 1 zooms in).
- rig: ``'train'`` is split ``'test-rig1'`` (the training rig on held-out scenes), ``'other'`` is split ``'val'``
  (mv-scenes' second rig: other yaws, heights and focal lengths); without a rig the config's own test split is
  used. The metric evaluates the split the dataset reads.

Seed groups: work dirs named ``<name>_s<seed>`` (or ``-s<seed>``, ``_seed<seed>``) with the same model and test
set form one group ``<name>``; each metric is reported as the mean over the seeds and the spread, max - min.
"""
from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from mmengine.config import Config

from vispe.datasets.multiview_detection import MultiViewDetection
from vispe.engine.arguments import InvalidArgument
from vispe.evaluation.nuscenes_metric import NuScenesMetric
from vispe.models.petr import PETRDetector
from vispe.registry import DATASETS, METRICS, MODELS

__all__ = ['PRIMARY_METRIC', 'RIG_SPLITS', 'SPREAD', 'SeedGroup', 'SweepPoint', 'group_summary', 'image_size_for_height',
           'is_multiview_config', 'nuscenes_evaluator', 'rig_name', 'seed_groups', 'sweep_dataset_cfg',
           'sweep_evaluator_cfg', 'sweep_points']

RIG_SPLITS: dict[str, str] = {'train': 'test-rig1', 'other': 'val'}
CONFIG_RIG = 'config'  # the rig label of points on the config's own test split (no --rigs)
PRIMARY_METRIC = 'nusc/mAP'
SPREAD = 'max - min over seeds'
SEED_SUFFIX = re.compile(r'^(?P<group>.+?)(?:[_-]s|_seed)(?P<seed>\d+)$')


def rig_name(text: str) -> str:
    """argparse type: a rig, ``'train'`` (split test-rig1) or ``'other'`` (split val)."""
    if text not in RIG_SPLITS:
        choices = ', '.join(f'{name} (split {split})' for name, split in RIG_SPLITS.items())
        raise argparse.ArgumentTypeError(f'{text!r} is not a rig; give {choices}.')
    return text


def _registered(registry: Any, kind: Any) -> type | None:
    """The class a config's ``type`` names (a class, or a registered name with or without scope)."""
    found = kind if isinstance(kind, type) else registry.get(kind) if isinstance(kind, str) else None
    return found if isinstance(found, type) else None


def is_multiview_config(cfg: Config) -> bool:
    """Whether the config's model is a :class:`~vispe.models.petr.PETRDetector` (or a subclass)."""
    model = cfg.get('model')
    kind = _registered(MODELS, model.get('type')) if isinstance(model, Mapping) else None
    return kind is not None and issubclass(kind, PETRDetector)


def nuscenes_evaluator(cfg: Config, config_path: str | Path, option: str) -> dict[str, Any]:
    """A copy of the config's ``test_evaluator`` when it is one :class:`NuScenesMetric` (a dict, or a list of
    one); else :class:`InvalidArgument` naming ``option``, the config and what to set."""
    evaluator = cfg.get('test_evaluator')
    if isinstance(evaluator, (list, tuple)) and len(evaluator) == 1:
        evaluator = evaluator[0]
    kind = _registered(METRICS, evaluator.get('type')) if isinstance(evaluator, Mapping) else None
    if kind is None or not issubclass(kind, NuScenesMetric):
        seen = (evaluator.get('type') if isinstance(evaluator, Mapping) else
                [item.get('type') if isinstance(item, Mapping) else item for item in evaluator]
                if isinstance(evaluator, (list, tuple)) else evaluator)
        raise InvalidArgument(option, config_path, f'the config\'s test_evaluator is {seen!r}, not a NuScenesMetric',
                              'use a multi-view 3D config (configs/petr/), or set test_evaluator=dict('
                              'type=\'NuScenesMetric\', data_root=..., split=...) in the config')
    return dict(evaluator)


@dataclass(frozen=True)
class SweepPoint:
    """One evaluation setting: the rig (its name and split), the intrinsics scale and the image size (H, W)."""

    rig: str
    split: str
    intrinsics_scale: float
    image_size: tuple[int, int]

    @property
    def height(self) -> int:
        return self.image_size[0]

    @property
    def panel(self) -> tuple[str, str, float]:
        """(rig, split, intrinsics scale): the points that share a table row and a plot panel."""
        return self.rig, self.split, self.intrinsics_scale

    def record(self) -> dict[str, Any]:
        return dict(rig=self.rig, split=self.split, intrinsics_scale=self.intrinsics_scale,
                    height=self.image_size[0], width=self.image_size[1])


def image_size_for_height(height: int, reference: Sequence[int]) -> tuple[int, int]:
    """(H, W) at image height ``height`` with the aspect ratio of ``reference`` (H0, W0): W = round(H · W0 / H0),
    rounded half up."""
    reference_height, reference_width = reference
    return height, max(1, math.floor(height * reference_width / reference_height + 0.5))


def reference_size(cfg: Config) -> tuple[int, int]:
    """The config's test ``image_size`` (H0, W0) (the training one when the test set has none)."""
    for loader in ('test_dataloader', 'train_dataloader'):
        size = cfg.get(loader, {}).get('dataset', {}).get('image_size')
        if isinstance(size, Sequence) and len(size) == 2:
            return int(size[0]), int(size[1])
    raise ValueError('A multi-view config sets test_dataloader.dataset.image_size = (H, W); this one has none, so '
                     '--sizes (heights) have no aspect ratio to follow. Add image_size to its test dataset.')


def sweep_points(cfg: Config, heights: Sequence[int], scales: Sequence[float],
                 rigs: Sequence[str] | None) -> list[SweepPoint]:
    """Every combination of rig, intrinsics scale and height, in that nesting order; without ``rigs`` the
    config's test split (rig ``'config'``)."""
    reference = reference_size(cfg)
    rig_splits = ([(rig, RIG_SPLITS[rig]) for rig in rigs] if rigs else
                  [(CONFIG_RIG, cfg.test_dataloader.dataset.get('split'))])
    return [SweepPoint(rig, split, float(scale), image_size_for_height(height, reference))
            for rig, split in rig_splits for scale in scales for height in heights]


def check_multiview_dataset(cfg: Config, label: str) -> None:
    """The test set must be a :class:`MultiViewDetection` (its image_size, intrinsics_scale and split are the axes)."""
    kind = _registered(DATASETS, cfg.test_dataloader.dataset.get('type'))
    if kind is None or not issubclass(kind, MultiViewDetection):
        raise ValueError(f'{label}: the test dataset is {cfg.test_dataloader.dataset.get("type")!r}; the 3D axes '
                         f'(image size, intrinsics scale, rig) need a MultiViewDetection test set. Evaluate a '
                         f'config of configs/petr/ or set test_dataloader.dataset.type=\'MultiViewDetection\'.')


def sweep_dataset_cfg(cfg: Config, point: SweepPoint) -> dict[str, Any]:
    """The config's test set at ``point``: its image size, intrinsics scale and split, without augmentation."""
    dataset = dict(cfg.test_dataloader.dataset)
    dataset.update(image_size=point.image_size, intrinsics_scale=point.intrinsics_scale, split=point.split,
                   train_augment=False)
    return dataset


def sweep_evaluator_cfg(evaluator: Mapping[str, Any], split: str) -> dict[str, Any]:
    """A NuScenesMetric config (:func:`nuscenes_evaluator`) on ``split``, computing metrics (never format-only)."""
    return dict(evaluator, split=split, format_only=False, outfile_prefix=None)


@dataclass(frozen=True)
class SeedGroup:
    """Runs that differ only by their seed: the group's label, its members' labels and their seeds."""

    label: str
    members: tuple[str, ...]
    seeds: tuple[int | None, ...]


def _first_difference(a: Any, b: Any, where: str = '') -> str | None:
    """The first key path (``decoder.depth``) where two config values differ, or None."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in sorted(set(a) | set(b), key=str):
            inner = f'{where}.{key}' if where else str(key)
            if key not in a or key not in b:
                return inner
            found = _first_difference(a[key], b[key], inner)
            if found is not None:
                return found
        return None
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)) and len(a) == len(b):
        return next((found for i, (x, y) in enumerate(zip(a, b))
                     if (found := _first_difference(x, y, f'{where}[{i}]')) is not None), None)
    return None if a == b else (where or '<root>')


def seed_groups(labels: Sequence[str], configs: Mapping[str, Config]) -> list[SeedGroup]:
    """Group runs whose labels differ only by a seed suffix (``_s0``, ``-s1``, ``_seed2``), in first-seen order;
    a label without one is a group of its own.

    Raises:
        InvalidArgument: two runs of a group have the same seed, or their models or test sets differ.
    """
    members: dict[str, list[tuple[str, int | None]]] = {}
    for label in labels:
        match = SEED_SUFFIX.match(label)
        group, seed = (match.group('group'), int(match.group('seed'))) if match else (label, None)
        members.setdefault(group, []).append((label, seed))
    groups = []
    for group, items in members.items():
        seeds = [seed for _, seed in items]
        if len(items) > 1 and len(set(seeds)) != len(seeds):
            raise InvalidArgument('--group-seeds', [label for label, _ in items],
                                  f'these runs of {group!r} repeat a seed', 'give each seed of a group once')
        first = items[0][0]
        for label, _ in items[1:]:
            for part in ('model', 'test_dataloader'):
                difference = _first_difference(configs[first].get(part), configs[label].get(part))
                if difference is not None:
                    raise InvalidArgument('--group-seeds', [first, label],
                                          f'they group as seeds of {group!r} but their configs differ at '
                                          f'{part}.{difference}', 'group only seeds of one config (rename the work '
                                          'dirs), or leave out --group-seeds')
        groups.append(SeedGroup(group, tuple(label for label, _ in items), tuple(seeds)))
    return groups


def group_summary(group: SeedGroup, results: Mapping[str, Mapping[SweepPoint, Mapping[str, float]]]
                  ) -> dict[SweepPoint, dict[str, tuple[float, float]]]:
    """Per point and metric (mean, max - min) over the group's runs; NaN when any run's value is NaN."""
    first = results[group.members[0]]
    summary = {}
    for point, metrics in first.items():
        summary[point] = {}
        for name in metrics:
            values = [float(results[label][point].get(name, math.nan)) for label in group.members]
            if any(math.isnan(value) for value in values):
                summary[point][name] = (math.nan, math.nan)
            else:
                summary[point][name] = (sum(values) / len(values), max(values) - min(values))
    return summary
