"""pt-scenes (tools/dataset_converters/point_scenes.py) and its reader PointScenes: the written layout,
determinism, boxes against the replayed meshes, occlusion, the items, augmentation, point_density and
scene_scale, the collate, every bad-input error, and a hand-written real-ScanNet-layout folder."""
from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.spatial import cKDTree

from tests.helpers import load_tool
from vispe.datasets.mv_scenes import DatasetExistsError
from vispe.datasets.mv_scenes.layout import points_in_boxes, tight_box
from vispe.datasets.mv_scenes.meshes import load_class_meshes
from vispe.datasets.point_scenes import (MEAN_COLOR_RGB, SCANNET_CLASSES, PointScenes, augment_scene,
                                         pointscenes_collate, torch_seeded_rng)
from vispe.datasets.pt_scenes import (CLASS_MESHES, CLASSES, INFO_FILE, POINTS_DIR, SPLITS, ConversionConfig,
                                      RoomConfig, ScanConfig, convert, make_scene, sample_room, scan_room)
from vispe.datasets.pt_scenes import conversion as conversion_module
from vispe.registry import DATASETS, FUNCTIONS

# Small rooms scanned with 128 rays a turn (about 15k points a scene), 3-5 objects; 2 train, 1 val, 1 test scenes.
TINY = ConversionConfig(seed=5, room=RoomConfig(min_size=3.0, max_size=3.6, min_objects=3, max_objects=5,
                                                max_sensors=3), scan=ScanConfig(azimuths=128), min_object_points=20)
COUNTS = dict(train=2, val=1, test=1)
SUFFIXES = ('vert', 'ins_label', 'sem_label', 'bbox')
# Points lie on their mesh up to the range noise (3 sigma = 9 mm).
NOISE_MARGIN = 0.012


@pytest.fixture(scope='session')
def meshes():
    return load_class_meshes(CLASS_MESHES)


@pytest.fixture(scope='session')
def root(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp('pt') / 'pt-scenes'
    convert(path, **COUNTS, config=TINY, progress=False)
    return path


@pytest.fixture(scope='session')
def rotated(meshes):
    """The arrays of a rotated-box scene (not written)."""
    return make_scene('train', 0, replace(TINY, room=replace(TINY.room, rotated=True)), meshes)


def npy(root: Path, scene: str, suffix: str) -> np.ndarray:
    return np.load(root / POINTS_DIR / f'{scene}_{suffix}.npy', allow_pickle=False)


def scenes(root: Path) -> list[str]:
    return [name for split in SPLITS for name in (root / f'meta_data/scannetv2_{split}.txt').read_text().split()]


def aligned_boxes(bbox: np.ndarray) -> np.ndarray:
    """(K, 7) vispe boxes of a (K, 7) or (K, 8) bbox array."""
    return np.concatenate([bbox[:, :6], bbox[:, 6:7] if bbox.shape[1] == 8 else np.zeros((len(bbox), 1))], 1)


def copy_set(root: Path, target: Path) -> Path:
    shutil.copytree(root, target)
    return target


def test_written_layout_and_metadata(root):
    info = json.loads((root / INFO_FILE).read_text())
    assert [item['name'] for item in info['classes']] == list(CLASSES)
    assert [item['id'] for item in info['classes']] == list(range(1, 8))
    assert {split: info['splits'][split]['scenes'] for split in SPLITS} == COUNTS
    assert not (root.parent / 'pt-scenes.partial').exists()
    names = scenes(root)
    assert names == ['scene0000_00', 'scene0001_00', 'scene0000_01', 'scene0000_02']
    assert sorted(p.name for p in (root / POINTS_DIR).iterdir()) == sorted(
        f'{name}_{suffix}.npy' for name in names for suffix in SUFFIXES)
    total_boxes = 0
    for name in names:
        vert, ins, sem, bbox = (npy(root, name, suffix) for suffix in SUFFIXES)
        assert vert.dtype == np.float32 and vert.ndim == 2 and vert.shape[1] == 6 and len(vert) > 5000
        assert ins.shape == sem.shape == (len(vert),)
        colour = vert[:, 3:]
        assert np.array_equal(colour, np.round(colour)) and colour.min() >= 0 and colour.max() <= 255
        assert bbox.shape[1] == 7 and bbox.dtype == np.float64 and set(bbox[:, 6]) <= set(range(1, 8))
        assert ((ins == 0) == (sem == 0)).all()                       # background: floor and walls
        for row, box in enumerate(bbox):                               # box row k <-> instance k + 1, same class
            assert (ins == row + 1).sum() >= TINY.min_object_points
            assert set(sem[ins == row + 1]) == {int(box[6])}
        total_boxes += len(bbox)
    assert total_boxes == sum(info['splits'][split]['objects'] for split in SPLITS)
    assert sum(sum(item['boxes'].values()) for item in info['classes']) == total_boxes


def test_same_seed_gives_identical_files_whatever_the_counts(root, tmp_path):
    again = tmp_path / 'again'
    convert(again, train=1, val=1, test=0, config=TINY, progress=False)
    for name in ('scene0000_00', 'scene0000_01'):
        for suffix in SUFFIXES:
            path = f'{POINTS_DIR}/{name}_{suffix}.npy'
            assert (again / path).read_bytes() == (root / path).read_bytes(), path
    other = make_scene('train', 0, replace(TINY, seed=6), load_class_meshes(CLASS_MESHES))
    assert other.vert.shape != npy(root, 'scene0000_00', 'vert').shape


def test_boxes_are_the_tight_boxes_of_the_whole_meshes_and_hold_their_points(root, meshes):
    for split, index, name in (('train', 0, 'scene0000_00'), ('train', 1, 'scene0001_00'), ('val', 0, 'scene0000_01')):
        rng = np.random.default_rng([TINY.seed, SPLITS.index(split), index])
        room = sample_room(rng, meshes, TINY.room)                     # no redraw in these scenes
        assert name not in json.loads((root / INFO_FILE).read_text())['redrawn']
        vert, ins, bbox = npy(root, name, 'vert'), npy(root, name, 'ins_label'), npy(root, name, 'bbox')
        tight = {tuple(np.round(tight_box(item.vertices, 0.0)[:6], 6)) for item in room.objects}
        assert {tuple(np.round(box[:6], 6)) for box in bbox} <= tight
        inside = points_in_boxes(vert[:, :3], aligned_boxes(bbox), margin=NOISE_MARGIN)
        for row in range(len(bbox)):
            assert inside[row, ins == row + 1].all()
        assert abs(bbox[:, 2] - bbox[:, 5] / 2).max() < 1e-9           # standing on the floor


def test_rotated_boxes_have_a_yaw_and_hold_their_points(rotated):
    assert rotated.bbox.shape[1] == 8
    yaw = rotated.bbox[:, 6]
    assert (np.abs(np.sin(2 * yaw)) > 1e-3).any() and (np.abs(yaw) <= math.pi).all()
    inside = points_in_boxes(rotated.vert[:, :3], aligned_boxes(rotated.bbox), margin=NOISE_MARGIN)
    for row in range(len(rotated.bbox)):
        assert inside[row, rotated.ins_label == row + 1].all()


def test_scans_have_occlusion_and_density_falling_with_distance(root, meshes):
    import trimesh

    rng = np.random.default_rng([TINY.seed, 0, 0])
    room = sample_room(rng, meshes, TINY.room)
    scan = scan_room(room, rng, TINY.scan)
    assert np.array_equal(scan.points, npy(root, 'scene0000_00', 'vert'))   # the replay is the written scan
    unseen = []
    for index, item in enumerate(room.objects):
        surface, _ = trimesh.sample.sample_surface(trimesh.Trimesh(item.vertices, item.faces, process=False), 2000,
                                                   seed=index)
        own = scan.points[scan.owner == index, :3]
        distance = cKDTree(own).query(surface)[0] if len(own) else np.full(len(surface), np.inf)
        unseen.append(float((distance > 0.1).mean()))
    assert max(unseen) > 0.2 and np.mean(unseen) > 0.1                  # hidden sides, undersides
    single = scan_room(replace(room, sensors=room.sensors[:1]), np.random.default_rng(0), TINY.scan)
    floor = single.points[(single.owner < 0) & (np.abs(single.points[:, 2]) < 0.02), :2]
    grid = np.stack(np.meshgrid(*(np.arange(-h, h, 0.01) + 0.005 for h in room.half)), -1).reshape(-1, 2)
    distance = np.linalg.norm(floor - room.sensors[0, :2], axis=1)
    cells = np.linalg.norm(grid - room.sensors[0, :2], axis=1)
    density = [((distance >= low) & (distance < low + 0.5)).sum() / (((cells >= low) & (cells < low + 0.5)).sum()
                                                                      * 1e-4) for low in (0.5, 1.5)]
    assert density[0] > 2 * density[1] > 0                               # points per m² of floor


def test_items_shapes_and_fixed_samples(root):
    dataset = PointScenes(root, 'train', num_points=1000)
    assert len(dataset) == 2 and dataset.metainfo['classes'] == CLASSES
    item = dataset[0]
    points, sample = item['inputs']['points'], item['data_samples']
    bbox = npy(root, 'scene0000_00', 'bbox')
    assert points.shape == (1000, 3) and points.dtype == torch.float32
    assert sample['scene_id'] == 'scene0000_00'
    assert torch.equal(sample['gt_boxes'], torch.from_numpy(aligned_boxes(bbox)).float())
    assert torch.equal(sample['gt_labels'], torch.from_numpy(bbox[:, 6].astype(np.int64) - 1))
    assert torch.equal(sample['bounds'], torch.stack([points.amin(0), points.amax(0)]))
    assert torch.equal(dataset[0]['inputs']['points'], points)                      # fixed at evaluation
    vert = npy(root, 'scene0000_00', 'vert')
    assert len(np.unique(points.numpy(), axis=0)) == 1000 and np.isin(points[:, 0].numpy(), vert[:, 0]).all()
    coloured = PointScenes(root, 'train', num_points=1000, use_color=True)[0]['inputs']['points']
    assert torch.equal(coloured[:, :3], points)
    rows = [np.flatnonzero((vert[:, :3] == p[:3].numpy()).all(1))[0] for p in coloured[:5]]
    expected = (vert[rows, 3:] - np.array(MEAN_COLOR_RGB)) / 256
    assert np.allclose(coloured[:5, 3:].numpy(), expected, atol=1e-6)


def test_random_sampling_in_training_and_repeats_only_when_short(root):
    dataset = PointScenes(root, 'train', num_points=1000, random_sampling=True)
    first, second = dataset[0]['inputs']['points'], dataset[0]['inputs']['points']
    assert not torch.equal(first, second) and len(torch.unique(first, dim=0)) == 1000
    count = len(npy(root, 'scene0000_00', 'vert'))
    short = PointScenes(root, 'train', num_points=count + 100)
    indices = short.sample_indices('scene0000_00', count)
    assert len(indices) == count + 100 and set(indices[:count]) == set(range(count))


@pytest.mark.parametrize('aligned', [True, False])
def test_augmentation_keeps_points_inside_their_boxes(root, rotated, aligned):
    if aligned:
        scene = PointScenes(root, 'train').load_scene(0)
        points, boxes, instance = scene.points, scene.boxes, scene.instance
        instance_of_box = scene.rows + 1
    else:
        points, boxes, instance = rotated.vert, aligned_boxes(rotated.bbox).astype(np.float32), rotated.ins_label
        instance_of_box = np.arange(1, len(boxes) + 1)
    for flip_x, flip_y, angle in ((True, False, 0.05), (False, True, -0.087), (True, True, 0.087)):
        moved_points, moved = augment_scene(points, boxes, flip_x, flip_y, angle, aligned)
        inside = points_in_boxes(moved_points[:, :3], moved, margin=NOISE_MARGIN)
        for row, owner in enumerate(instance_of_box):
            assert inside[row, instance == owner].all()
        if aligned:
            assert (moved[:, 6] == 0).all() and (moved[:, 3:5] >= boxes[:, 3:5] - 1e-5).all()
        else:
            assert np.allclose(moved[:, 3:6], boxes[:, 3:6], atol=1e-5)
    _, flipped = augment_scene(points, boxes, False, True, 0.0, aligned)          # flip y: yaw -> -yaw
    assert np.allclose(np.cos(flipped[:, 6] - (0.0 if aligned else -boxes[:, 6])), 1.0, atol=1e-6)
    _, flipped = augment_scene(points, boxes, True, False, 0.0, aligned)          # flip x: yaw -> pi - yaw
    assert np.allclose(np.cos(flipped[:, 6] - (0.0 if aligned else math.pi - boxes[:, 6])), 1.0, atol=1e-6)


def test_train_augment_draws_3detrs_flips_and_rotation(root):
    dataset = PointScenes(root, 'train', num_points=500, train_augment=True, random_sampling=False)
    plain = PointScenes(root, 'train', num_points=500)[1]
    torch.manual_seed(3)
    item = dataset[1]
    torch.manual_seed(3)
    rng = torch_seeded_rng()
    flip_x, flip_y = rng.random() > 0.5, rng.random() > 0.5
    angle = rng.uniform(-math.pi / 36, math.pi / 36)
    points, boxes = augment_scene(plain['inputs']['points'].numpy(), plain['data_samples']['gt_boxes'].numpy(),
                                  flip_x, flip_y, angle, True)
    assert torch.allclose(item['inputs']['points'], torch.from_numpy(points))
    assert torch.allclose(item['data_samples']['gt_boxes'], torch.from_numpy(boxes))


def test_point_density_and_scene_scale(root):
    base = PointScenes(root, 'train', num_points=1000)[0]
    sparse = PointScenes(root, 'train', num_points=1000, point_density=0.5)[0]
    dense = PointScenes(root, 'train', num_points=1000, point_density=2.0)[0]
    assert sparse['inputs']['points'].shape == (500, 3) and dense['inputs']['points'].shape == (2000, 3)
    assert torch.equal(dense['inputs']['points'][:1000], base['inputs']['points'])  # nested samples
    assert torch.equal(sparse['inputs']['points'], base['inputs']['points'][:500])
    scaled = PointScenes(root, 'train', num_points=1000, scene_scale=2.0)[0]
    assert torch.allclose(scaled['inputs']['points'], 2 * base['inputs']['points'])
    assert torch.allclose(scaled['data_samples']['gt_boxes'][:, :6], 2 * base['data_samples']['gt_boxes'][:, :6])
    assert torch.allclose(scaled['data_samples']['bounds'], 2 * base['data_samples']['bounds'])
    fewest = min(len(npy(root, name, 'vert')) for name in scenes(root)[:2])
    with pytest.raises(ValueError, match='repeated points are not a denser cloud'):
        PointScenes(root, 'train', num_points=fewest, point_density=1.5)


def test_collate_and_registration(root):
    dataset = DATASETS.build(dict(type='PointScenes', data_root=str(root), split='train', num_points=256,
                                  use_color=True))
    collate = FUNCTIONS.get('pointscenes_collate')
    batch = collate([dataset[0], dataset[1]])
    assert batch['inputs']['points'].shape == (2, 256, 6)
    assert [sample['scene_id'] for sample in batch['data_samples']] == ['scene0000_00', 'scene0001_00']
    other = PointScenes(root, 'val', num_points=128)[0]
    with pytest.raises(ValueError, match='same num_points'):
        pointscenes_collate([dataset[0], other])


def break_file(root: Path, suffix: str, write) -> Path:
    path = root / POINTS_DIR / f'scene0000_00_{suffix}.npy'
    write(path)
    return path


@pytest.mark.parametrize('case, suffix, match', [
    ('truncated', 'vert', 'truncated'),
    ('pickled', 'bbox', 'never unpickles'),
    ('nan', 'vert', 'NaN'),
    ('few points', 'vert', 'fewer than 16'),
    ('zero size', 'bbox', 'not a box'),
    ('unknown class', 'bbox', r'class id\(s\) \[42\.0\]'),
    ('label length', 'ins_label', 'one per point'),
])
def test_bad_scene_files_are_refused_naming_the_file(root, tmp_path, case, suffix, match):
    copy = copy_set(root, tmp_path / 'copy')
    vert, bbox = npy(root, 'scene0000_00', 'vert'), npy(root, 'scene0000_00', 'bbox')
    writers = {
        'truncated': lambda p: p.write_bytes(p.read_bytes()[:1000]),
        'pickled': lambda p: np.save(p, np.array([{'box': 1}], dtype=object), allow_pickle=True),
        'nan': lambda p: np.save(p, np.where(np.arange(len(vert))[:, None] == 7, np.nan, vert).astype(np.float32)),
        'few points': lambda p: np.save(p, vert[:5]),
        'zero size': lambda p: np.save(p, np.concatenate([bbox, [[0, 0, 0, 0.5, 0, 0.5, 1]]])),
        'unknown class': lambda p: np.save(p, np.concatenate([bbox, [[0, 0, 0.5, 0.5, 0.5, 0.5, 42]]])),
        'label length': lambda p: np.save(p, np.zeros(3, np.int16)),
    }
    path = break_file(copy, suffix, writers[case])
    dataset = PointScenes(copy, 'train', num_points=256)
    with pytest.raises(ValueError, match=match) as error:
        dataset[0]
    assert str(path) in str(error.value) and 'vispe dataset point-scenes' in str(error.value)
    if case in ('zero size', 'unknown class'):
        option = 'invalid_boxes' if case == 'zero size' else 'unknown_classes'
        kept = PointScenes(copy, 'train', num_points=256, **{option: 'drop'})[0]['data_samples']['gt_boxes']
        assert len(kept) == len(bbox)


def test_missing_files_splits_and_bad_arguments(root, tmp_path):
    copy = copy_set(root, tmp_path / 'copy')
    (copy / POINTS_DIR / 'scene0001_00_sem_label.npy').unlink()
    with pytest.raises(FileNotFoundError, match='scene0001_00_sem_label.npy'):
        PointScenes(copy, 'train')
    with pytest.raises(FileNotFoundError, match=r"lists there: \['scannetv2_test.txt'"):
        PointScenes(root, 'minival')
    with pytest.raises(FileNotFoundError, match='vispe dataset point-scenes'):
        PointScenes(tmp_path / 'nothing')
    for kwargs, error, match in ((dict(num_points=0), ValueError, 'num_points'),
                                 (dict(point_density=0.0), ValueError, 'point_density'),
                                 (dict(scene_scale=float('nan')), ValueError, 'scene_scale'),
                                 (dict(classes=['bunyn']), ValueError, "Did you mean 'bunny'"),
                                 (dict(class_ids=[1, 99]), ValueError, 'name them with classes'),
                                 (dict(unknown_classes='skip'), ValueError, 'unknown_classes'),
                                 (dict(use_color='yes'), TypeError, 'use_color')):
        with pytest.raises(error, match=match):
            PointScenes(root, 'train', **kwargs)
    subset = PointScenes(root, 'train', classes=['spider', 'cow'])
    assert subset.metainfo == dict(classes=('spider', 'cow'), class_ids=(6, 2))
    labels = subset[0]['data_samples']['gt_labels']
    ids = npy(root, 'scene0000_00', 'bbox')[:, 6]
    assert sorted(labels.tolist()) == sorted([0] * int((ids == 6).sum()) + [1] * int((ids == 2).sum()))


def test_real_scannet_layout_with_nyu40_ids(tmp_path):
    rng = np.random.default_rng(0)
    data = tmp_path / 'scannet'
    (data / 'scannet_train_detection_data').mkdir(parents=True)
    (data / 'meta_data').mkdir()
    (data / 'meta_data' / 'scannetv2_val.txt').write_text('scene0011_00\nscene0011_01\n')
    for name, rows in (('scene0011_00', [[1.0, 2.0, 0.5, 0.6, 0.5, 1.0, 5], [3.0, 1.0, 0.4, 1.5, 0.8, 0.8, 7]]),
                       ('scene0011_01', [[0.0, 0.0, 0.3, 0.4, 0.4, 0.6, 39]])):
        points = np.concatenate([rng.uniform(0, 4, (300, 3)), rng.integers(0, 256, (300, 3))], 1)
        prefix = data / 'scannet_train_detection_data' / name
        np.save(f'{prefix}_vert.npy', points.astype(np.float32))
        np.save(f'{prefix}_ins_label.npy', np.zeros(300, np.uint32))
        np.save(f'{prefix}_sem_label.npy', np.zeros(300, np.uint32))
        np.save(f'{prefix}_bbox.npy', np.array(rows))
    dataset = PointScenes(data, 'val', num_points=200)
    assert dataset.metainfo['classes'] == SCANNET_CLASSES and len(dataset.classes) == 18
    first, second = dataset[0]['data_samples'], dataset[1]['data_samples']
    assert first['gt_labels'].tolist() == [2, 4] and second['gt_labels'].tolist() == [17]   # chair, table, bin
    assert torch.equal(first['gt_boxes'][:, :6], torch.tensor([[1.0, 2.0, 0.5, 0.6, 0.5, 1.0],
                                                                [3.0, 1.0, 0.4, 1.5, 0.8, 0.8]]))
    assert (first['gt_boxes'][:, 6] == 0).all()
    assert PointScenes(data, 'val', classes=['table'])[0]['data_samples']['gt_labels'].tolist() == [0]
    np.save(data / 'scannet_train_detection_data' / 'scene0011_01_bbox.npy', np.array([[0, 0, 1, 1, 1, 2, 1.0]]))
    with pytest.raises(ValueError, match='batch_load_scannet_data.py'):
        dataset[1]                                                                 # nyu40 id 1 = wall: unmapped


def test_cli_refuses_to_overwrite_and_an_interrupted_run_leaves_nothing(root, tmp_path, monkeypatch, capsys):
    tool = load_tool('dataset_converters/point_scenes')
    before = (root / INFO_FILE).read_bytes()
    assert tool.main(['--out', str(root), '--train', '1', '--val', '1', '--test', '0', '--quiet']) == 2
    assert 'already exists' in capsys.readouterr().err and (root / INFO_FILE).read_bytes() == before
    other = tmp_path / 'other'
    other.mkdir()
    with pytest.raises(DatasetExistsError, match='not a pt-scenes data set'):
        convert(other, train=1, val=1, test=0, config=TINY, progress=False, overwrite=True)
    calls = []

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return make_scene(*args, **kwargs)

    monkeypatch.setattr(conversion_module, 'make_scene', failing)
    target = tmp_path / 'interrupted'
    with pytest.raises(KeyboardInterrupt):
        convert(target, train=2, val=1, test=0, config=TINY, progress=False)
    assert not target.exists() and not (tmp_path / 'interrupted.partial').exists()
