"""Point-cloud 3D detection scenes in ScanNet's preprocessed layout (VoteNet / 3DETR / V-DETR): real ScanNet
and pt-scenes (:mod:`vispe.datasets.pt_scenes`), read with the same code.

Layout under ``data_root`` (``datasets/scannet`` or ``datasets/pt-scenes``; ``datasets/README.md``)::

    scannet_train_detection_data/<scene>_vert.npy       (N, >= 6) xyz (m), rgb 0..255 (extra columns ignored)
    scannet_train_detection_data/<scene>_ins_label.npy  (N,) integers, 0 = no instance
    scannet_train_detection_data/<scene>_sem_label.npy  (N,) integers (nyu40 ids / pt-scenes class ids)
    scannet_train_detection_data/<scene>_bbox.npy       (K, 7) (cx, cy, cz, dx, dy, dz, class id), axis-aligned,
                                                        or (K, 8) (cx, cy, cz, l, w, h, yaw, class id)
    meta_data/scannetv2_{train,val,test}.txt            scene names, one a line
    pt-scenes.json                                      pt-scenes only: its classes (ids, names)

The class mapping is ``pt-scenes.json``'s classes when that file exists, else the 18 nyu40 ids 3DETR detects
on ScanNet (cabinet = 3 ... garbagebin = 39 -> labels 0..17). Files are read with ``np.load(...,
allow_pickle=False)`` (never unpickled).
"""
from __future__ import annotations

import difflib
import json
import math
import numbers
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from vispe.datasets.options import check_bool, check_choice, check_non_negative_int, check_positive_int
from vispe.geometry import transform_boxes, wrap_angle
from vispe.geometry.point_cloud import colour_range_problem
from vispe.registry import DATASETS, FUNCTIONS

__all__ = ['MEAN_COLOR_RGB', 'SCANNET_CLASSES', 'SCANNET_CLASS_IDS', 'PointScene', 'PointScenes', 'augment_scene',
           'pointscenes_collate', 'torch_seeded_rng']

SCANNET_CLASS_IDS = (3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 16, 24, 28, 33, 34, 36, 39)
SCANNET_CLASSES = ('cabinet', 'bed', 'chair', 'sofa', 'table', 'door', 'window', 'bookshelf', 'picture', 'counter',
                   'desk', 'curtain', 'refrigerator', 'showercurtrain', 'toilet', 'sink', 'bathtub', 'garbagebin')
MEAN_COLOR_RGB = (109.8, 97.2, 83.8)     # 3DETR's colour normalisation: (rgb - mean) / 256
MAX_ROTATION = math.pi / 36              # 3DETR's ScanNet augmentation: uniform in +-5 degrees about +z
MIN_POINTS = 16
SUFFIXES = ('vert', 'ins_label', 'sem_label', 'bbox')
INFO_FILE = 'pt-scenes.json'
POLICIES = ('raise', 'drop')


@dataclass(frozen=True, eq=False)
class PointScene:
    """A checked scene, scaled by ``scene_scale``: ``points`` (N, 6) float32 (xyz m, rgb 0..255),
    ``instance``/``semantic`` (N,) int64, ``boxes`` (K, 7) float32 (x, y, z, l, w, h, yaw) in vispe's
    convention (yaw 0 when ``aligned``), ``labels`` (K,) int64 and ``rows`` (K,): each box's row in the file."""

    scene_id: str
    points: np.ndarray
    instance: np.ndarray
    semantic: np.ndarray
    boxes: np.ndarray
    labels: np.ndarray
    rows: np.ndarray
    aligned: bool


def augment_scene(points: np.ndarray, boxes: np.ndarray, flip_x: bool, flip_y: bool, angle: float,
                  aligned: bool) -> tuple[np.ndarray, np.ndarray]:
    """3DETR's ScanNet augmentation with given draws: flip x (mirror in the yz-plane), flip y, then turn by
    ``angle`` about +z, on (N, C) points (xyz first) and (K, 7) boxes.

    ``aligned`` boxes stay axis-aligned (yaw 0): each becomes the axis-aligned box of its moved box (3DETR's
    ``rotate_aligned_boxes``), so it still holds its points; otherwise the boxes move exactly and their yaw
    follows vispe's convention (:func:`vispe.geometry.transform_boxes`: flip x -> pi - yaw, flip y -> -yaw).
    Returns new float32 arrays.
    """
    cos, sin = math.cos(angle), math.sin(angle)
    matrix = np.array([[cos, -sin, 0.0], [sin, cos, 0.0], [0.0, 0.0, 1.0]]) @ np.diag(
        [-1.0 if flip_x else 1.0, -1.0 if flip_y else 1.0, 1.0])
    points = points.astype(np.float32, copy=True)
    points[:, :3] = points[:, :3] @ matrix.T.astype(np.float32)
    if aligned:
        moved = boxes.astype(np.float64, copy=True)
        moved[:, :3] = moved[:, :3] @ matrix.T
        moved[:, 3:6] = moved[:, 3:6] @ np.abs(matrix).T
        moved[:, 6] = 0.0
        return points, moved.astype(np.float32)
    affine = torch.eye(4, dtype=torch.float64)
    affine[:3, :3] = torch.from_numpy(matrix)
    moved = transform_boxes(torch.from_numpy(boxes).double()[None], affine[None])[0]
    return points, moved.float().numpy()


def _npy(path: Path, fix: str, mmap: bool = False) -> np.ndarray:
    """``np.load(path, allow_pickle=False)`` with errors that name the file and ``fix``."""
    if not path.is_file():
        raise FileNotFoundError(f'{path} not found: {fix}.')
    try:
        return np.load(path, allow_pickle=False, mmap_mode='r' if mmap else None)
    except ValueError as exc:
        if 'pickle' in str(exc) or 'Python objects' in str(exc):
            raise ValueError(f'{path} holds pickled (object) data, which vispe never unpickles: write it again as a '
                             f'plain numeric array (np.save(path, array.astype(np.float32))), or {fix}.') from None
        raise ValueError(f'{path} is truncated or not a .npy file ({exc}): {fix}.') from None
    except (EOFError, OSError) as exc:
        raise ValueError(f'{path} is empty, truncated or unreadable ({type(exc).__name__}: {exc}): {fix}.') from None


def torch_seeded_rng() -> np.random.Generator:
    """A numpy generator seeded from torch's random stream, which PyTorch seeds differently in each DataLoader
    worker (numpy's global state would be copied into every forked worker) and ``torch.manual_seed`` fixes."""
    return np.random.default_rng(int(torch.randint(2 ** 62, ()).item()))


def _positive_float(owner: str, name: str, value: Any) -> float:
    """``value`` as a float if it is a finite number > 0, else a ValueError naming ``owner``'s option ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (math.isfinite(value) and value > 0):
        raise ValueError(f'{owner} {name} must be a finite number > 0; got {value!r}. Use 1 for the data as stored.')
    return float(value)


@DATASETS.register_module()
class PointScenes(Dataset):
    """Scenes of ScanNet's preprocessed layout (see the module docstring) as the point-cloud detectors consume them.

    Items are ``dict(inputs=dict(points=(M, 3) or (M, 6) float32), data_samples=dict(gt_boxes=(K, 7) float32
    (x, y, z, l, w, h, yaw), gravity centre, yaw 0 for axis-aligned sets; gt_labels=(K,) int64 in 0..C-1;
    bounds=(2, 3) float32, the minimum and maximum corner of the M points (3DETR's point_cloud_dims);
    scene_id=str))`` with M = ``round(num_points * point_density)`` points of the scene.

    Args:
        data_root: the folder holding ``points_dir`` and the split lists.
        split: the split list to read (``train``, ``val``, ``test``: ``split_file`` with it filled in).
        classes: names to detect, in label order, from the data set's mapping (pt-scenes.json's classes, else
            ScanNet's 18); boxes of the mapping's other classes are left out. Default: all of them.
        class_ids: bbox class ids to detect, in label order (custom data), named by ``classes`` or the mapping.
        num_points: the point budget of a scene (3DETR: 40000 on ScanNet). Training (``random_sampling``)
            draws it at random without replacement (:func:`torch_seeded_rng`); otherwise a fixed sample seeded by
            ``seed`` and the scene id is taken: the first M of a fixed permutation, so a sparser sample is part of
            a denser one. A scene with fewer points gives all its points once plus random repeats (3DETR samples
            with replacement then).
        use_color: points (M, 6): xyz then 3DETR's colour ``(rgb - (109.8, 97.2, 83.8)) / 256``; else (M, 3).
        train_augment: 3DETR's ScanNet augmentation (:func:`augment_scene`): flip x and flip y with
            probability 0.5 each, a rotation uniform in +-5 degrees about +z (RandomCuboid is not applied),
            drawn with :func:`torch_seeded_rng`.
        random_sampling: draw the budget at random per item (default: ``train_augment``).
        point_density: scales the budget (0.5 / 2: a sparser / denser cloud of the same scene). Above 1 every
            scene must hold M points (checked from the file headers at construction): repeats are not density.
        scene_scale: multiplies point coordinates and box centres and sizes (a larger room, larger objects).
        unknown_classes: 'raise' for a box whose class id is not in the mapping, or 'drop' to skip it.
        invalid_boxes: 'raise' for a box with a non-finite value or a size <= 0, or 'drop' to skip it.
        points_dir, split_file: the layout's names (VoteNet's; pt-scenes writes the same).
        seed: of the fixed samples.
    """

    def __init__(self, data_root: str | Path, split: str = 'train', classes: Sequence[str] | None = None,
                 class_ids: Sequence[int] | None = None, num_points: int = 40000, use_color: bool = False,
                 train_augment: bool = False, random_sampling: bool | None = None, point_density: float = 1.0,
                 scene_scale: float = 1.0, unknown_classes: str = 'raise', invalid_boxes: str = 'raise',
                 points_dir: str = 'scannet_train_detection_data',
                 split_file: str = 'meta_data/scannetv2_{split}.txt', seed: int = 0) -> None:
        owner = 'PointScenes'
        self.num_points = check_positive_int(owner, 'num_points', num_points)
        self.use_color = check_bool(owner, 'use_color', use_color)
        self.train_augment = check_bool(owner, 'train_augment', train_augment)
        self.random_sampling = train_augment if random_sampling is None else check_bool(
            owner, 'random_sampling', random_sampling)
        self.point_density = _positive_float(owner, 'point_density', point_density)
        self.scene_scale = _positive_float(owner, 'scene_scale', scene_scale)
        self.unknown_classes = check_choice(owner, 'unknown_classes', unknown_classes, POLICIES)
        self.invalid_boxes = check_choice(owner, 'invalid_boxes', invalid_boxes, POLICIES)
        self.seed = check_non_negative_int(owner, 'seed', seed)
        self.budget = round(self.num_points * self.point_density)
        if self.budget < MIN_POINTS:
            raise ValueError(f'PointScenes num_points * point_density = {self.budget} points a scene; give at '
                             f'least {MIN_POINTS}.')
        self.data_root = Path(data_root)
        if not self.data_root.is_dir():
            raise FileNotFoundError(f'PointScenes data_root {self.data_root} does not exist. Write pt-scenes with '
                                    f'`vispe dataset point-scenes`, or preprocess ScanNet '
                                    f'into datasets/scannet (see datasets/README.md).')
        self.is_pt_scenes = (self.data_root / INFO_FILE).is_file()
        self.fix = ('write the set again: the command recorded in its pt-scenes.json '
                    f'(vispe dataset point-scenes) with --out {self.data_root} --overwrite'
                    if self.is_pt_scenes else
                    "preprocess the scene again with VoteNet's scannet/batch_load_scannet_data.py (datasets/README.md)")
        self.points_dir = self.data_root / points_dir
        self.split = split
        self.scene_ids = self._read_split(split, split_file)
        self.known, self.class_ids, self.classes = self._mapping(classes, class_ids)
        self.label_of = {class_id: label for label, class_id in enumerate(self.class_ids)}
        self._check_files()

    def _read_split(self, split: str, split_file: str) -> list[str]:
        """The scene names of the split list ``split_file`` with ``split`` filled in."""
        if not isinstance(split, str) or '{split}' not in split_file:
            raise ValueError(f'PointScenes split must be a name such as "train" and split_file a pattern with '
                             f'{{split}}; got {split!r}, {split_file!r}.')
        path = self.data_root / split_file.format(split=split)
        if not path.is_file():
            pattern = split_file.format(split='*')
            found = sorted(p.name for p in self.data_root.glob(pattern))
            raise FileNotFoundError(f'PointScenes split list {path} not found (lists there: {found or "none"}). '
                                    f'Choose one of those splits, or {self.fix}.')
        names = [line.strip() for line in path.read_text().splitlines() if line.strip()]
        if not names:
            raise ValueError(f'PointScenes split list {path} names no scene; choose another split, or {self.fix}.')
        return names

    def _mapping(self, classes: Sequence[str] | None,
                 class_ids: Sequence[int] | None) -> tuple[dict[int, str], tuple[int, ...], tuple[str, ...]]:
        """(the data set's id -> name, the selected ids and names in label order)."""
        known = dict(zip(SCANNET_CLASS_IDS, SCANNET_CLASSES))
        if self.is_pt_scenes:
            path = self.data_root / INFO_FILE
            try:
                known = {int(item['id']): str(item['name']) for item in json.loads(path.read_text())['classes']}
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f'{path} is corrupt or lacks its classes list of {{"id", "name"}} ({exc!r}): '
                                 f'{self.fix}.') from None
        for name, values, kind in (('classes', classes, str), ('class_ids', class_ids, numbers.Integral)):
            if values is not None and (isinstance(values, (str, bytes)) or not isinstance(values, Sequence)
                                       or not values or len(set(values)) != len(values)
                                       or not all(isinstance(v, kind) and not isinstance(v, bool) for v in values)):
                raise ValueError(f'PointScenes {name} must be a non-empty sequence of distinct '
                                 f'{"names" if kind is str else "ints"}; got {values!r}.')
        if class_ids is None:
            ids_of = {name: class_id for class_id, name in known.items()}
            for name in classes or ():
                if name not in ids_of:
                    close = difflib.get_close_matches(name, list(ids_of), n=1)
                    raise ValueError(f'PointScenes classes: {name!r} is not a class of {self.data_root} '
                                     f'({sorted(ids_of)}).' + (f' Did you mean {close[0]!r}?' if close else ''))
            ids = tuple(ids_of[name] for name in classes) if classes else tuple(known)
        else:
            ids = tuple(int(v) for v in class_ids)
            if classes is None and not set(ids) <= set(known):
                raise ValueError(f'PointScenes class_ids {sorted(set(ids) - set(known))} are not in the data set\'s '
                                 f'mapping {sorted(known)}: name them with classes=[...] (same length).')
            if classes is not None and len(classes) != len(ids):
                raise ValueError(f'PointScenes classes and class_ids must have the same length; got {len(classes)} '
                                 f'and {len(ids)}.')
        names = tuple(classes) if classes is not None else tuple(known[i] for i in ids)
        return {**known, **dict(zip(ids, names))}, ids, names

    def _path(self, scene_id: str, suffix: str) -> Path:
        """``<points_dir>/<scene_id>_<suffix>.npy``."""
        return self.points_dir / f'{scene_id}_{suffix}.npy'

    def _check_files(self) -> None:
        """Every scene of the split has its four files (and, for point_density > 1, the points for the budget)."""
        missing = [self._path(s, suffix) for s in self.scene_ids for suffix in SUFFIXES
                   if not self._path(s, suffix).is_file()]
        if missing:
            raise FileNotFoundError(f'PointScenes {self.split}: {len(missing)} file(s) of the split list are missing, '
                                    f'first {missing[0]}; {self.fix}.')
        if self.point_density > 1:
            counts = {s: len(_npy(self._path(s, 'vert'), self.fix, mmap=True)) for s in self.scene_ids}
            fewest = min(counts, key=counts.get)
            if counts[fewest] < self.budget:
                raise ValueError(f'PointScenes point_density={self.point_density} asks for {self.budget} points a '
                                 f'scene but {fewest} holds {counts[fewest]} ({self._path(fewest, "vert")}); repeated '
                                 f'points are not a denser cloud: use point_density <= '
                                 f'{counts[fewest] / self.num_points:.3g} or a smaller num_points.')

    @property
    def metainfo(self) -> dict[str, Any]:
        """The class names in label order and their bbox class ids (mmengine's dataset meta)."""
        return dict(classes=self.classes, class_ids=self.class_ids)

    def __len__(self) -> int:
        return len(self.scene_ids)

    def load_scene(self, index: int) -> PointScene:
        """Scene ``index`` of the split, checked (errors name the file and the fix) and scaled by ``scene_scale``."""
        scene_id = self.scene_ids[index]
        vert, instance, semantic, bbox = (_npy(self._path(scene_id, suffix), self.fix) for suffix in SUFFIXES)
        path = self._path(scene_id, 'vert')
        if vert.ndim != 2 or vert.shape[1] < 6 or not np.issubdtype(vert.dtype, np.number):
            raise ValueError(f'{path} has shape {vert.shape} ({vert.dtype}), not (N, 6) numbers (xyz, rgb); '
                             f'{self.fix}.')
        if len(vert) < MIN_POINTS:
            raise ValueError(f'{path} holds {len(vert)} points, fewer than {MIN_POINTS}: the scene is empty or cut; '
                             f'{self.fix}, or remove {scene_id} from the split list.')
        bad = ~np.isfinite(vert[:, :6]).all(1)
        if bad.any():
            raise ValueError(f'{path} has {int(bad.sum())} points with NaN or inf values (first: row '
                             f'{int(np.flatnonzero(bad)[0])}); {self.fix}.')
        problem = colour_range_problem(vert[:, 3:6], 255)
        if problem:
            raise ValueError(f'{path} {problem}, or {self.fix}.')
        for suffix, labels in (('ins_label', instance), ('sem_label', semantic)):
            if labels.shape != (len(vert),) or not np.issubdtype(labels.dtype, np.integer):
                raise ValueError(f'{self._path(scene_id, suffix)} has shape {labels.shape} ({labels.dtype}), not '
                                 f'({len(vert)},) integers, one per point of {path.name}; {self.fix}.')
        boxes, labels, rows = self._boxes(scene_id, bbox)
        points = vert[:, :6].astype(np.float32)
        points[:, :3] *= self.scene_scale
        boxes[:, :6] *= self.scene_scale
        return PointScene(scene_id, points, instance.astype(np.int64), semantic.astype(np.int64), boxes, labels, rows,
                          aligned=bbox.shape[1] == 7)

    def _boxes(self, scene_id: str, bbox: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(K, 7) float32 boxes, (K,) labels and their rows of a (K, 7) / (K, 8) bbox array, checked."""
        path = self._path(scene_id, 'bbox')
        if bbox.ndim != 2 or bbox.shape[1] not in (7, 8) or not np.issubdtype(bbox.dtype, np.number):
            raise ValueError(f'{path} has shape {bbox.shape} ({bbox.dtype}), not (K, 7) (cx, cy, cz, dx, dy, dz, '
                             f'class id) or (K, 8) with the yaw before the class id; {self.fix}.')
        values = bbox.astype(np.float64)
        class_ids = values[:, -1]
        keep = np.ones(len(values), bool)
        invalid = ~np.isfinite(values).all(1) | ~(values[:, 3:6] > 0).all(1)
        if invalid.any() and self.invalid_boxes == 'raise':
            row = int(np.flatnonzero(invalid)[0])
            raise ValueError(f'{path} row {row} is not a box: {values[row].round(4).tolist()} (a size <= 0 or a NaN); '
                             f'{int(invalid.sum())} such row(s). Drop them with invalid_boxes="drop", or {self.fix}.')
        keep &= ~invalid
        unknown = keep & ~np.isin(class_ids, list(self.known))
        if unknown.any() and self.unknown_classes == 'raise':
            raise ValueError(f'{path} has class id(s) {sorted(set(class_ids[unknown].tolist()))} that are not in the '
                             f'mapping {sorted(self.known)}; pass the right classes / class_ids, drop those boxes with '
                             f'unknown_classes="drop", or {self.fix}.')
        keep &= np.isin(class_ids, list(self.label_of))
        rows = np.flatnonzero(keep)
        boxes = np.zeros((len(rows), 7), np.float32)
        boxes[:, :6] = values[rows, :6]
        if bbox.shape[1] == 8:
            boxes[:, 6] = wrap_angle(torch.from_numpy(values[rows, 6])).numpy()
        labels = np.array([self.label_of[int(c)] for c in class_ids[rows]], np.int64)
        return boxes, labels, rows

    def sample_indices(self, scene_id: str, count: int) -> np.ndarray:
        """(budget,) indices into a scene's ``count`` points (see ``num_points``): a random draw
        (:func:`torch_seeded_rng`) with ``random_sampling``, else the scene's fixed sample."""
        if self.random_sampling:
            rng = torch_seeded_rng()
        else:
            rng = np.random.default_rng([self.seed, zlib.crc32(scene_id.encode())])
        order = rng.permutation(count)
        extra = rng.choice(count, max(self.budget - count, 0))
        return np.concatenate([order[:self.budget], extra])

    def __getitem__(self, index: int) -> dict[str, Any]:
        scene = self.load_scene(index)
        points = scene.points[self.sample_indices(scene.scene_id, len(scene.points))]
        boxes = scene.boxes
        if self.train_augment:
            rng = torch_seeded_rng()
            flip_x, flip_y = bool(rng.random() > 0.5), bool(rng.random() > 0.5)
            angle = float(rng.uniform(-MAX_ROTATION, MAX_ROTATION))
            points, boxes = augment_scene(points, boxes, flip_x, flip_y, angle, scene.aligned)
        if self.use_color:
            points[:, 3:6] = (points[:, 3:6] - np.array(MEAN_COLOR_RGB, np.float32)) / 256
        else:
            points = points[:, :3]
        bounds = np.stack([points[:, :3].min(0), points[:, :3].max(0)])
        return dict(inputs=dict(points=torch.from_numpy(np.ascontiguousarray(points))), data_samples=dict(
            gt_boxes=torch.from_numpy(boxes), gt_labels=torch.from_numpy(scene.labels),
            bounds=torch.from_numpy(bounds), scene_id=scene.scene_id))


@FUNCTIONS.register_module()
def pointscenes_collate(batch: list[dict[str, Any]]) -> dict[str, Any]:
    """Stack the points of a batch of :class:`PointScenes` items into ``inputs=dict(points=(B, M, C))`` and keep
    ``data_samples`` as a list. Use it as ``collate_fn=dict(type='vispe.pointscenes_collate')``."""
    shapes = sorted({tuple(item['inputs']['points'].shape) for item in batch})
    if len(shapes) != 1:
        raise ValueError(f'pointscenes_collate needs the same number of points and channels in every scene; got '
                         f'{shapes}. Give the datasets of a batch the same num_points, point_density and use_color.')
    return dict(inputs=dict(points=torch.stack([item['inputs']['points'] for item in batch])),
                data_samples=[item['data_samples'] for item in batch])
