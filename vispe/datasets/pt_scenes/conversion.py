"""Writing pt-scenes in ScanNet's preprocessed layout (VoteNet / 3DETR / V-DETR), into ``<root>.partial/``
that is renamed to ``<root>`` only when complete (so a reader never sees a half-written set).

Layout (``<root>/``)::

    scannet_train_detection_data/<scene>_vert.npy       (N, 6) float32: x, y, z (m), r, g, b (0..255)
    scannet_train_detection_data/<scene>_ins_label.npy  (N,) int16: 0 floor and walls, i >= 1 object i
    scannet_train_detection_data/<scene>_sem_label.npy  (N,) int16: 0 floor and walls, else the class id
    scannet_train_detection_data/<scene>_bbox.npy       (K, 7) float64 (cx, cy, cz, dx, dy, dz, class id);
                                                        (K, 8) (cx, cy, cz, l, w, h, yaw, class id) with rotated
    meta_data/scannetv2_{train,val,test}.txt            scene names, one a line
    pt-scenes.json                                      arguments, classes, counts, box statistics

Box row k belongs to instance id k + 1. Objects with fewer than ``min_object_points`` scanned points get
no box (they are too hidden to annotate) but keep their points, with instance ids K + 1, K + 2, ... and
their class id as the semantic label. Scene names are ``scene<index:04d>_<split code:02d>`` (12
characters like ScanNet's, split codes 00 train, 01 val, 02 test).

Every scene is an independent draw seeded by ``(seed, split code, index)`` alone, so the files do not
depend on the number of workers. Empty-scene rule: a room with no scan position or no object with
``min_object_points`` points is redrawn from the scene's random stream, up to ``max_redraws`` times;
then :class:`~vispe.datasets.mv_scenes.errors.EmptySceneError` names the scene.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from vispe.datasets.output_folder import DatasetFolder, atomic_dataset_folder
from vispe.datasets.worker_pool import map_in_processes
from vispe.datasets.mv_scenes.errors import DegenerateBoxError, EmptySceneError
from vispe.datasets.mv_scenes.meshes import CanonicalMesh, load_class_meshes
from vispe.datasets.pt_scenes.classes import BACKGROUND_ID, CLASS_IDS, CLASS_MESHES
from vispe.datasets.pt_scenes.room import RoomConfig, sample_room
from vispe.datasets.pt_scenes.scan import ScanConfig, scan_room

__all__ = ['INFO_FILE', 'MAX_SCENES', 'PARTIAL_MARKER', 'POINTS_DIR', 'SPLITS', 'SPLIT_FILE', 'VERSION',
           'ConversionConfig', 'SceneArrays', 'SceneRecord', 'convert', 'make_scene', 'scene_name']

VERSION = 'pt-scenes-1.0'
INFO_FILE = 'pt-scenes.json'
PARTIAL_MARKER = '.pt-scenes-partial'
FOLDER = DatasetFolder(INFO_FILE, PARTIAL_MARKER, 'a pt-scenes', '--out')
POINTS_DIR = 'scannet_train_detection_data'
SPLIT_FILE = 'meta_data/scannetv2_{split}.txt'
SPLITS = ('train', 'val', 'test')
MAX_SCENES = 10_000


@dataclass(frozen=True)
class ConversionConfig:
    """Everything that shapes the files besides the scene counts."""

    seed: int = 0
    room: RoomConfig = RoomConfig()
    scan: ScanConfig = ScanConfig()
    min_object_points: int = 50
    max_redraws: int = 10


@dataclass(frozen=True, eq=False)
class SceneArrays:
    """The four arrays of a scene (see the module docstring), the redraws it took, its scan positions (S, 3),
    ``object_points`` (K,): the points of each boxed object, and ``dropped``: the objects left without a box."""

    vert: np.ndarray
    ins_label: np.ndarray
    sem_label: np.ndarray
    bbox: np.ndarray
    redraws: int
    sensors: np.ndarray
    object_points: np.ndarray
    dropped: int


@dataclass(frozen=True)
class SceneRecord:
    """What pt-scenes.json summarises of a scene: sizes (K, 3) are the bbox columns 3:6."""

    split: str
    name: str
    points: int
    class_ids: tuple[int, ...]
    sizes: tuple[tuple[float, float, float], ...]
    object_points: tuple[int, ...]
    dropped: int
    redraws: int
    sensors: int


def scene_name(split: str, index: int) -> str:
    """``scene<index:04d>_<split code:02d>``."""
    return f'scene{index:04d}_{SPLITS.index(split):02d}'


def make_scene(split: str, index: int, config: ConversionConfig, meshes: list[CanonicalMesh],
               nthreads: int = 0) -> SceneArrays:
    """Draw and scan scene ``index`` of ``split`` (seeded by ``(config.seed, split code, index)``)."""
    where = f'{split} scene {scene_name(split, index)}'
    rng = np.random.default_rng([config.seed, SPLITS.index(split), index])
    for redraw in range(config.max_redraws + 1):
        try:
            room = sample_room(rng, meshes, config.room)
        except DegenerateBoxError as exc:
            raise DegenerateBoxError(f'{where}: {exc}') from None
        if not room.objects or not len(room.sensors):
            continue
        scan = scan_room(room, rng, config.scan, nthreads, where)
        counts = np.bincount(scan.owner + 1, minlength=len(room.objects) + 1)[1:]
        boxed = np.flatnonzero(counts >= config.min_object_points)
        if len(boxed):
            break
    else:
        raise EmptySceneError(f'{where}: none of {config.max_redraws + 1} rooms had a scan position and an object '
                              f'with {config.min_object_points} scanned points; loosen the room (fewer objects, '
                              f'smaller sensor_clearance) or lower min_object_points')
    order = np.concatenate([boxed, np.flatnonzero(counts < config.min_object_points)])
    instance_of = np.zeros(len(room.objects) + 1, np.int16)         # indexed by owner + 1 (0: background)
    instance_of[order + 1] = np.arange(1, len(order) + 1)
    class_of = np.array([BACKGROUND_ID, *(CLASS_IDS[item.label] for item in room.objects)], np.int16)
    boxes = np.stack([room.objects[k].box for k in boxed])
    columns = boxes if config.room.rotated else boxes[:, :6]
    bbox = np.concatenate([columns, class_of[boxed + 1, None]], 1).astype(np.float64)
    return SceneArrays(scan.points, instance_of[scan.owner + 1], class_of[scan.owner + 1], bbox, redraw,
                       room.sensors, counts[boxed], len(room.objects) - len(boxed))


def _write_scene(folder: Path, split: str, index: int, config: ConversionConfig, meshes: list[CanonicalMesh],
                 nthreads: int = 0) -> SceneRecord:
    """Make scene ``index`` of ``split``, write its four arrays to ``folder``, return its record."""
    name = scene_name(split, index)
    arrays = make_scene(split, index, config, meshes, nthreads)
    for suffix in ('vert', 'ins_label', 'sem_label', 'bbox'):
        np.save(folder / f'{name}_{suffix}.npy', getattr(arrays, suffix), allow_pickle=False)
    bbox = arrays.bbox
    return SceneRecord(split, name, len(arrays.vert), tuple(int(v) for v in bbox[:, -1]),
                       tuple(tuple(round(float(v), 4) for v in row) for row in bbox[:, 3:6]),
                       tuple(int(v) for v in arrays.object_points),
                       arrays.dropped, arrays.redraws, len(arrays.sensors))


_WORKER: dict[str, Any] = {}


def _init_worker(config: ConversionConfig, roots: dict[str, Path | None] | None) -> None:
    """A worker process: one torch thread, the meshes read once."""
    import torch

    torch.set_num_threads(1)
    _WORKER.update(config=config, meshes=load_class_meshes(CLASS_MESHES, roots))


def _write_in_worker(task: tuple[str, int], folder: Path) -> SceneRecord:
    """:func:`_write_scene` of ``task`` = (split, index) in a worker (one open3d thread)."""
    return _write_scene(folder, task[0], task[1], _WORKER['config'], _WORKER['meshes'], nthreads=1)


def _write_all(tasks: list[tuple[str, int]], folder: Path, config: ConversionConfig, meshes: list[CanonicalMesh],
               workers: int, roots: dict[str, Path | None] | None) -> Iterator[SceneRecord]:
    """Write the scenes of ``tasks`` (in this process or in ``workers`` processes); their records in order."""
    if workers <= 1:
        for split, index in tasks:
            yield _write_scene(folder, split, index, config, meshes)
        return
    yield from map_in_processes(_write_in_worker, tasks, folder, workers=workers, module=__name__,
                                initializer=_init_worker, initargs=(config, roots))


def _spread(values: list[float]) -> dict[str, float]:
    """Mean, min and max of ``values`` (rounded to 4 decimals; empty for none)."""
    array = np.asarray(values, np.float64)
    return dict(mean=round(float(array.mean()), 4), min=round(float(array.min()), 4),
                max=round(float(array.max()), 4)) if len(array) else {}


@dataclass
class _Summary:
    """The records of a conversion, summarised for pt-scenes.json."""

    records: list[SceneRecord] = field(default_factory=list)

    def counts(self) -> dict[str, Any]:
        """Per split: scenes, boxes, objects left without a box, and points, boxes and positions per scene."""
        by_split: dict[str, Any] = {}
        for split in SPLITS:
            records = [r for r in self.records if r.split == split]
            if records:
                by_split[split] = dict(
                    scenes=len(records), objects=sum(len(r.class_ids) for r in records),
                    dropped_objects=sum(r.dropped for r in records),
                    points_per_scene=_spread([r.points for r in records]),
                    objects_per_scene=_spread([len(r.class_ids) for r in records]),
                    sensors_per_scene=_spread([r.sensors for r in records]))
        return by_split

    def classes(self, meshes: list[CanonicalMesh], size_names: list[str]) -> list[dict[str, Any]]:
        """Per class: id, label, mesh, base size, boxes per split, box size spread (``size_names``: the bbox
        columns 3:6) and points per box."""
        result = []
        for label, (spec, mesh, class_id) in enumerate(zip(CLASS_MESHES, meshes, CLASS_IDS)):
            rows = [(size, points, r.split) for r in self.records
                    for cid, size, points in zip(r.class_ids, r.sizes, r.object_points) if cid == class_id]
            sizes = np.array([row[0] for row in rows]).reshape(-1, 3)
            result.append(dict(
                id=class_id, label=label, name=spec.name, description=spec.category, package=spec.package,
                file=spec.file, base_size_lwh=[round(float(v), 4) for v in mesh.size],
                boxes={split: sum(row[2] == split for row in rows) for split in SPLITS},
                box_size={axis: _spread(sizes[:, column].tolist()) for column, axis in enumerate(size_names)},
                points_per_box=_spread([row[1] for row in rows])))
        return result


def convert(root: str | Path, train: int = 800, val: int = 100, test: int = 100, *,
            config: ConversionConfig = ConversionConfig(), workers: int = 1, overwrite: bool = False,
            progress: bool = True, roots: dict[str, Path | None] | None = None,
            command: str | None = None) -> dict[str, Any]:
    """Write pt-scenes into ``root`` (see the module docstring); returns what it writes to
    ``<root>/pt-scenes.json``.

    Args:
        root: output folder; written as ``<root>.partial`` and renamed when complete.
        train, val, test: scenes per split (``train`` and ``val`` at least 1, each at most 10000).
        config: seed, room, scan and the box rule.
        workers: processes writing scenes (1: in this process).
        overwrite: replace an existing pt-scenes root.
        progress: show a tqdm progress bar.
        roots: mesh folders per package (default: :func:`~vispe.datasets.mv_scenes.meshes.mesh_roots`).
        command: the command line, recorded in the summary.
    """
    from tqdm import tqdm

    counts = dict(train=train, val=val, test=test)
    if train < 1 or val < 1 or test < 0 or max(counts.values()) > MAX_SCENES:
        raise ValueError(f'need 1..{MAX_SCENES} train and val scenes and 0..{MAX_SCENES} test scenes, got {counts}')
    config.room.check()
    config.scan.check()
    root = Path(root)
    meshes = load_class_meshes(CLASS_MESHES, roots)
    with atomic_dataset_folder(root, overwrite, FOLDER) as partial:
        folder = partial / POINTS_DIR
        folder.mkdir()
        tasks = [(split, index) for split in SPLITS for index in range(counts[split])]
        summary = _Summary()
        for record in tqdm(_write_all(tasks, folder, config, meshes, workers, roots), total=len(tasks),
                           desc='pt-scenes', unit='scene', disable=not progress):
            summary.records.append(record)
        columns = (['cx', 'cy', 'cz', 'l', 'w', 'h', 'yaw', 'class_id'] if config.room.rotated else
                   ['cx', 'cy', 'cz', 'dx', 'dy', 'dz', 'class_id'])
        info = dict(generator='vispe.datasets.pt_scenes', version=VERSION, command=command,
                    config=json.loads(json.dumps(asdict(config))), rotated=config.room.rotated, box_columns=columns,
                    points_dir=POINTS_DIR, split_file=SPLIT_FILE, background_id=BACKGROUND_ID,
                    classes=summary.classes(meshes, columns[3:6]), splits=summary.counts(),
                    redrawn={r.name: r.redraws for r in summary.records if r.redraws})
        (partial / 'meta_data').mkdir()
        for split in SPLITS:
            names = [r.name for r in summary.records if r.split == split]
            (partial / SPLIT_FILE.format(split=split)).write_text(''.join(f'{name}\n' for name in names))
        (partial / INFO_FILE).write_text(json.dumps(info, indent=1))
    return info
