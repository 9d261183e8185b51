"""Writing the mv-scenes data set: plan the samples, render them (optionally in worker processes), write the
nuScenes tables, all into ``<root>.partial/`` that is renamed to ``<root>`` only when complete.

Splits (scene names from the devkit's ``nuscenes.utils.splits.create_splits_scenes()``):

* ``train``: rig 1 with per-sample jitter, names of the devkit's ``train`` list;
* ``val``: rig 2 (never seen in training), names of its ``val`` list, so the devkit's
  ``DetectionEval(..., eval_set='val')`` evaluates the second rig;
* ``test-rig1``: rig 1 with the same jitter on held-out layouts, names of its ``test`` list; a custom
  split for the devkit (``<root>/v1.0-trainval/splits.json``), so ``DetectionEval(...,
  eval_set='test-rig1')`` runs on it too.

A split of n samples uses the first ``min(n, len(list))`` names; the samples are spread over them as
evenly as possible (contiguous, 0.5 s apart). Every sample is an independent draw (ego pose, rig jitter,
layout), seeded by ``(seed, split, index)`` alone, so the files do not depend on the number of workers.

Empty-scene rule: a layout in which some object is seen by no camera pixel and no lidar return (fully
occluded), or that holds no object, is redrawn from the sample's random stream (same ego pose and rig),
up to ``max_redraws`` times; then :class:`EmptySceneError` names the scene.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import numpy as np
from PIL import Image

from vispe.datasets.output_folder import DatasetFolder, atomic_dataset_folder
from vispe.datasets.worker_pool import map_in_processes
from vispe.datasets.mv_scenes.errors import DegenerateBoxError, EmptySceneError
from vispe.datasets.mv_scenes.layout import LayoutConfig, points_in_boxes, sample_layout
from vispe.datasets.mv_scenes.meshes import CLASS_MESHES, CanonicalMesh, load_class_meshes
from vispe.datasets.mv_scenes.render import SceneRenderer
from vispe.datasets.mv_scenes.rigs import (LIDAR, LIDAR_CHANNEL, REFERENCE_SIZE, RIG1, RIG2, CameraCalibration,
                                           LidarSpec, Rig, calibrate, jitter_rig, pose_matrix)
from vispe.datasets.mv_scenes.tables import SAMPLE_PERIOD_US, SampleRecord, SensorRecord, TableBuilder, make_token
from vispe.extras import NUSCENES_DEVKIT_INSTALL

__all__ = ['INFO_FILE', 'PARTIAL_MARKER', 'SPLITS', 'VERSION', 'ConversionConfig', 'SampleSetup', 'SampleTask',
           'SplitPlan', 'convert', 'plan_tasks', 'render_task', 'sample_setup']

VERSION = 'v1.0-trainval'
INFO_FILE = 'mv-scenes.json'
PARTIAL_MARKER = '.mv-scenes-partial'
FOLDER = DatasetFolder(INFO_FILE, PARTIAL_MARKER, 'an mv-scenes', '--root')
FIRST_TIMESTAMP_US = 1_700_000_000_000_000
SCENE_PERIOD_US = 60_000_000
EGO_AREA = (200.0, 2800.0)


@dataclass(frozen=True)
class SplitPlan:
    """A split: its name, rig, the devkit scene list its names come from, and the scene description."""

    name: str
    code: int
    rig: Rig
    devkit_list: str
    description: str


SPLITS = (
    SplitPlan('train', 0, RIG1, 'train', 'mv-scenes train: rig1 (nuScenes-like) with per-sample jitter'),
    SplitPlan('val', 1, RIG2, 'val', 'mv-scenes val: rig2 (other yaws, heights, focal lengths), no jitter'),
    SplitPlan('test-rig1', 2, RIG1, 'test', 'mv-scenes test-rig1: rig1 with per-sample jitter, held-out layouts'),
)


@dataclass(frozen=True)
class ConversionConfig:
    """Everything that shapes the rendered files besides the sample counts."""

    seed: int = 0
    image_size: tuple[int, int] = REFERENCE_SIZE
    lidar: LidarSpec = LIDAR
    layout: LayoutConfig = LayoutConfig()
    max_depth: float = 60.0
    max_redraws: int = 10
    jpeg_quality: int = 95


@dataclass(frozen=True)
class SampleTask:
    """One sample to render: split, index in the split, scene name, position in the scene, timestamp (us)."""

    split: str
    index: int
    scene_name: str
    position: int
    timestamp: int

    @property
    def where(self) -> str:
        return f'{self.split} scene {self.scene_name} sample {self.position}'


def _devkit_scene_names() -> dict[str, list[str]]:
    try:
        from nuscenes.utils.splits import create_splits_scenes
    except ImportError as exc:
        raise ImportError(f'mv-scenes takes its scene names from nuscenes-devkit, which is not importable ({exc}); '
                          f'install it with `{NUSCENES_DEVKIT_INSTALL}`') from None
    return create_splits_scenes()


def plan_tasks(counts: dict[str, int]) -> list[SampleTask]:
    """The samples of each split of :data:`SPLITS` (``counts[name]`` each), in scene order."""
    names, tasks, scene_number = _devkit_scene_names(), [], 0
    for plan in SPLITS:
        count = counts.get(plan.name, 0)
        if count < 0:
            raise ValueError(f'split {plan.name!r}: the number of samples must be >= 0, got {count}')
        available = names[plan.devkit_list]
        scenes = min(count, len(available))
        index = 0
        for scene_name, size in zip(available, np.array_split(np.arange(count), scenes) if scenes else []):
            start = FIRST_TIMESTAMP_US + scene_number * SCENE_PERIOD_US
            for position in range(len(size)):
                tasks.append(SampleTask(plan.name, index, scene_name, position, start + position * SAMPLE_PERIOD_US))
                index += 1
            scene_number += 1
    return tasks


def _write_image(path: Path, image: np.ndarray, quality: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(image).save(path, format='JPEG', quality=quality)


def _write_depth(path: Path, depth: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.round(depth * 1000).astype(np.uint16)).save(path, format='PNG')


@dataclass(frozen=True, eq=False)
class SampleSetup:
    """The draws of a sample before its layout: ego pose (ego -> global translation (3,), quaternion (4,)),
    lidar -> ego and lidar -> global (4, 4), the cameras' calibrations, the lidar's azimuth phase, the ground
    height in the lidar frame, and ``rng``, the sample's random stream from which its layouts are drawn."""

    ego_translation: np.ndarray
    ego_rotation: np.ndarray
    lidar2ego: np.ndarray
    lidar2global: np.ndarray
    calibrations: tuple[CameraCalibration, ...]
    phase: float
    ground_z: float
    rng: np.random.Generator


def sample_setup(task: SampleTask, config: ConversionConfig) -> SampleSetup:
    """Ego pose, rig (jittered for rig 1) and lidar phase of ``task``, from its seed ``(seed, split, index)``;
    the next draws of ``setup.rng`` are its layouts (:func:`~vispe.datasets.mv_scenes.layout.sample_layout`)."""
    plan = next(plan for plan in SPLITS if plan.name == task.split)
    rng = np.random.default_rng([config.seed, plan.code, task.index])
    yaw = rng.uniform(-math.pi, math.pi)
    ego_translation = np.array([*rng.uniform(*EGO_AREA, 2), 0.0])
    ego_rotation = np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])
    rig = jitter_rig(plan.rig, rng)
    calibrations = tuple(calibrate(mount, config.image_size) for mount in rig.cameras)
    phase = float(rng.uniform(0, 2 * math.pi / config.lidar.azimuths))
    lidar2ego = pose_matrix(np.array(config.lidar.translation), np.array([1.0, 0.0, 0.0, 0.0]))
    lidar2global = pose_matrix(ego_translation, ego_rotation) @ lidar2ego
    return SampleSetup(ego_translation, ego_rotation, lidar2ego, lidar2global, calibrations, phase,
                       -config.lidar.translation[2], rng)


def render_task(task: SampleTask, config: ConversionConfig, meshes: list[CanonicalMesh], out_root: Path,
                nthreads: int = 0) -> SampleRecord:
    """Draw, render and write one sample under ``out_root``; returns its table record."""
    setup = sample_setup(task, config)
    cam2lidar = [np.linalg.inv(setup.lidar2ego) @ calibration.cam2ego for calibration in setup.calibrations]
    for redraw in range(config.max_redraws + 1):
        try:
            objects = sample_layout(setup.rng, meshes, setup.ground_z, config.layout)
        except DegenerateBoxError as exc:
            raise DegenerateBoxError(f'{task.where}: {exc}') from None
        if not objects:
            continue
        renderer = SceneRenderer(objects, setup.ground_z, setup.lidar2global, nthreads)
        cameras = [renderer.render_camera(calibration.intrinsics, matrix, config.image_size, config.max_depth,
                                          f'{task.where} {calibration.channel}')
                   for calibration, matrix in zip(setup.calibrations, cam2lidar)]
        lidar = renderer.render_lidar(config.lidar, setup.phase, f'{task.where} {LIDAR_CHANNEL}')
        pixels = np.sum([camera.visible for camera in cameras], 0)
        returns = np.bincount(lidar.geometry, minlength=len(objects) + 1)[1:]
        if ((pixels > 0) | (returns > 0)).all():
            break
    else:
        raise EmptySceneError(f'{task.where}: every one of {config.max_redraws + 1} layouts left an object unseen by '
                              f'all cameras and the lidar (or held no object); loosen the layout (fewer objects, '
                              f'larger max_distance) or raise max_redraws')
    sensors = []
    for calibration, camera in zip(setup.calibrations, cameras):
        token = make_token(config.seed, 'sample_data', task.split, task.scene_name, task.position, calibration.channel)
        filename = f'samples/{calibration.channel}/{token}.jpg'
        _write_image(out_root / filename, camera.image, config.jpeg_quality)
        _write_depth(out_root / 'depth' / calibration.channel / f'{token}.png', camera.depth)
        sensors.append(SensorRecord(calibration.channel, token, filename, calibration.translation,
                                    calibration.rotation, calibration.intrinsics, config.image_size))
    token = make_token(config.seed, 'sample_data', task.split, task.scene_name, task.position, LIDAR_CHANNEL)
    filename = f'samples/{LIDAR_CHANNEL}/{token}.pcd.bin'
    (out_root / filename).parent.mkdir(parents=True, exist_ok=True)
    lidar.points.tofile(out_root / filename)
    sensors.append(SensorRecord(LIDAR_CHANNEL, token, filename, setup.lidar2ego[:3, 3], np.array([1.0, 0, 0, 0])))
    boxes = np.stack([item.box for item in objects])
    inside = points_in_boxes(lidar.points[lidar.geometry > 0, :3], boxes)
    meets = np.sum([camera.meets for camera in cameras], 0)
    labels = np.array([item.label for item in objects])
    return SampleRecord(task.split, task.scene_name, task.position, task.timestamp, setup.ego_translation,
                        setup.ego_rotation, setup.lidar2global, tuple(sensors), boxes, labels, inside.sum(1),
                        pixels / np.maximum(meets, 1), redraw)


_WORKER: dict[str, Any] = {}


def _init_worker(config: ConversionConfig, roots: dict[str, Path | None] | None) -> None:
    import torch

    torch.set_num_threads(1)
    _WORKER.update(config=config, meshes=load_class_meshes(roots=roots))


def _render_in_worker(task: SampleTask, out_root: Path) -> SampleRecord:
    return render_task(task, _WORKER['config'], _WORKER['meshes'], out_root, nthreads=1)


def _render_all(tasks: list[SampleTask], config: ConversionConfig, meshes: list[CanonicalMesh], out_root: Path,
                workers: int, roots: dict[str, Path | None] | None) -> Iterator[SampleRecord]:
    if workers <= 1:
        for task in tasks:
            yield render_task(task, config, meshes, out_root)
        return
    yield from map_in_processes(_render_in_worker, tasks, out_root, workers=workers, module=__name__,
                                initializer=_init_worker, initargs=(config, roots))


@dataclass
class _Summary:
    """Counts per split written to mv-scenes.json, and the samples whose layout was redrawn (by token)."""

    samples: dict[str, int] = field(default_factory=dict)
    scenes: dict[str, int] = field(default_factory=dict)
    objects: dict[str, int] = field(default_factory=dict)
    without_lidar_points: dict[str, int] = field(default_factory=dict)
    redraws: int = 0
    redrawn: dict[str, int] = field(default_factory=dict)

    def add(self, record: SampleRecord, first_of_scene: bool, seed: int) -> None:
        split = record.split
        self.samples[split] = self.samples.get(split, 0) + 1
        self.scenes[split] = self.scenes.get(split, 0) + int(first_of_scene)
        self.objects[split] = self.objects.get(split, 0) + len(record.labels)
        self.without_lidar_points[split] = (self.without_lidar_points.get(split, 0)
                                            + int((record.num_lidar_pts == 0).sum()))
        self.redraws += record.redraws
        if record.redraws:
            self.redrawn[make_token(seed, 'sample', split, record.scene_name, record.position)] = record.redraws


def convert(root: str | Path, train: int = 2000, val: int = 300, test: int | None = None, *,
            config: ConversionConfig = ConversionConfig(), workers: int = 1, overwrite: bool = False,
            progress: bool = True, roots: dict[str, Path | None] | None = None,
            command: str | None = None) -> dict[str, Any]:
    """Render mv-scenes into ``root`` (see the module docstring); returns the summary written to
    ``<root>/mv-scenes.json``.

    Args:
        root: output folder; written as ``<root>.partial`` and renamed when complete.
        train, val, test: samples of ``train`` (rig 1), ``val`` (rig 2) and ``test-rig1`` (rig 1; default:
            as many as ``val``).
        config: seed, image size, lidar, layout and depth range.
        workers: processes rendering samples (1: in this process).
        overwrite: replace an existing mv-scenes root.
        progress: show a tqdm progress bar.
        roots: mesh folders per package (default: :func:`~vispe.datasets.mv_scenes.meshes.mesh_roots`).
        command: the command line, recorded in the summary.
    """
    from tqdm import tqdm

    root = Path(root)
    counts = {'train': train, 'val': val, 'test-rig1': val if test is None else test}
    if counts['train'] < 1 or counts['val'] < 1:
        raise ValueError(f'need at least one train and one val sample, got train={train}, val={val}')
    meshes = load_class_meshes(roots=roots)
    tasks = plan_tasks(counts)
    with atomic_dataset_folder(root, overwrite, FOLDER) as partial:
        builder = TableBuilder(config.seed, tuple(spec.category for spec in CLASS_MESHES),
                               {plan.name: plan.description for plan in SPLITS})
        summary, splits = _Summary(), {plan.name: [] for plan in SPLITS}
        records: Iterable[SampleRecord] = _render_all(tasks, config, meshes, partial, workers, roots)
        for record in tqdm(records, total=len(tasks), desc='mv-scenes', unit='sample', disable=not progress):
            builder.add(record)
            summary.add(record, record.position == 0, config.seed)
            if record.position == 0:
                splits[record.split].append(record.scene_name)
        builder.write(partial / VERSION)
        splits_text = json.dumps(splits, indent=1)
        (partial / 'splits.json').write_text(splits_text)
        (partial / VERSION / 'splits.json').write_text(splits_text)
        info = dict(generator='vispe.datasets.mv_scenes', version=VERSION, command=command,
                    config=json.loads(json.dumps(asdict(config))), splits={p.name: p.description for p in SPLITS},
                    classes=[dict(name=spec.name, category=spec.category, package=spec.package, file=spec.file,
                                  size_lwh=[round(float(v), 4) for v in mesh.size])
                             for spec, mesh in zip(CLASS_MESHES, meshes)],
                    **asdict(summary))
        (partial / INFO_FILE).write_text(json.dumps(info, indent=1))
    return info
