"""MultiViewDetection on a tiny nuScenes-format root: the item contract, image augmentations that keep projections on
the same image content, sparse and dense depth, view validity, collate, and errors."""
from __future__ import annotations

import random
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from vispe.datasets.coco_detection import IMAGENET_MEAN, IMAGENET_STD
from vispe.datasets.multiview_detection import MultiViewDetection, multiview_collate
from vispe.datasets.nuscenes_tables import load_points
from vispe.geometry import Cameras, box_corners
from vispe.registry import DATASETS, FUNCTIONS

from .nuscenes_fixture import SOURCE_SIZE, load_table, save_table, token, write_nuscenes

CLASSES = ('car', 'pedestrian', 'barrier', 'traffic_cone', 'truck')
IMAGE_SIZE = (32, 80)
MIRROR = [1, 0, 3, 2, 5, 4, 7, 6]  # corner order of a mirrored box


@pytest.fixture(scope='module')
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_nuscenes(tmp_path_factory.mktemp('nuscenes') / 'root')


@pytest.fixture
def own_root(tmp_path: Path) -> Path:
    """A root a test may modify."""
    return write_nuscenes(tmp_path / 'root')


def _dataset(root: Path, **kwargs) -> MultiViewDetection:
    kwargs = dict(split='train', classes=CLASSES, image_size=IMAGE_SIZE) | kwargs
    return MultiViewDetection(str(root), **kwargs)


def test_item_follows_the_contract(root: Path) -> None:
    dataset = DATASETS.build(dict(type='MultiViewDetection', data_root=str(root), split='train', classes=CLASSES,
                                  image_size=IMAGE_SIZE))
    assert len(dataset) == 2 and dataset.metainfo == dict(classes=CLASSES)
    item = dataset[0]
    samples = item['data_samples']
    assert item['inputs'].shape == (6, 3, *IMAGE_SIZE) and item['inputs'].dtype == torch.float32
    assert samples['sample_token'] == dataset.sample_tokens[0]
    assert samples['intrinsics'].shape == (6, 3, 3) and samples['intrinsics'].dtype == torch.float32
    assert samples['lidar2cam'].shape == (6, 4, 4) and samples['lidar2cam'].dtype == torch.float32
    assert samples['lidar2global'].shape == (4, 4) and samples['lidar2global'].dtype == torch.float64
    assert samples['img_shape'] == samples['pad_shape'] == IMAGE_SIZE
    assert samples['view_valid'].dtype == torch.bool and samples['view_valid'].all()
    assert 'depth' not in samples and 'scene_transform' not in samples
    # the animal (no detection name) and the car without lidar points are dropped; labels index CLASSES
    assert samples['gt_boxes'].shape == (5, 7) and samples['gt_boxes'].dtype == torch.float32
    assert samples['gt_labels'].tolist() == [0, 1, 2, 3, 4] and samples['gt_labels'].dtype == torch.int64
    expected = dataset.tables.annotations(samples['sample_token']).boxes[:5].float()
    torch.testing.assert_close(samples['gt_boxes'], expected)
    # covering resize 96x54 -> 80x45 (x5/6), bottom 32 rows, centred columns: K' = P @ K
    source_k = torch.from_numpy(dataset.tables.camera_frames(samples['sample_token'])[0].intrinsics)
    scale = 80 / 96
    pixel_map = torch.tensor([[scale, 0, (scale - 1) / 2], [0, 45 / 54, (45 / 54 - 1) / 2 - 13], [0, 0, 1]],
                             dtype=torch.float64)
    torch.testing.assert_close(samples['intrinsics'][0].double(), pixel_map @ source_k, atol=1e-5, rtol=0)
    image = item['inputs'] * torch.tensor(IMAGENET_STD)[:, None, None] + torch.tensor(IMAGENET_MEAN)[:, None, None]
    assert torch.allclose(image[:, 2].mean((-1, -2)) * 255, 40.0 * torch.arange(6), atol=0.5)
    subset = _dataset(root, classes=('truck', 'car'), subset=1)
    assert len(subset) == 1 and subset[0]['data_samples']['gt_labels'].tolist() == [1, 0]
    everything = _dataset(root, min_points=0)[0]['data_samples']
    assert everything['gt_labels'].tolist() == [0, 1, 2, 3, 4, 0]


def _content_errors(dataset: MultiViewDetection, index: int) -> tuple[list[float], bool]:
    """Project the item's box corners and centres with its cameras, read the source pixel the gradient image shows
    there, and compare it with the projection of the same corners of the annotation (as the reader gives it) in
    the source image through the source cameras."""
    item = dataset[index]
    samples = item['data_samples']
    token_ = samples['sample_token']
    cameras = Cameras.from_data_samples([samples])
    flipped = bool(samples.get('scene_transform', torch.eye(4))[1, 1] < 0)
    boxes = samples['gt_boxes'].double()
    points = torch.cat([box_corners(boxes).reshape(-1, 3), boxes[:, :3]])
    annotations = dataset.tables.annotations(token_)
    keep = torch.tensor([name in dataset.classes and count >= dataset.min_points
                         for name, count in zip(annotations.detection_names, annotations.num_points)])
    original = annotations.boxes[keep]
    corners = box_corners(original)[:, MIRROR if flipped else slice(None)]  # a mirror swaps left and right
    calibrated = torch.cat([corners.reshape(-1, 3), original[:, :3]])
    pixels, depth = cameras.project(points[None].float())
    image = item['inputs'] * torch.tensor(IMAGENET_STD)[:, None, None] + torch.tensor(IMAGENET_MEAN)[:, None, None]
    lidar2cam, _ = dataset.tables.lidar2cam(token_)
    errors = []
    height, width = samples['img_shape']
    for view, frame in enumerate(dataset.tables.camera_frames(token_)):
        uv, z = pixels[0, view], depth[0, view]
        inside = (z > 0.5) & (uv[:, 0] > 1) & (uv[:, 0] < width - 2) & (uv[:, 1] > 1) & (uv[:, 1] < height - 2)
        if not inside.any():
            continue
        grid = torch.stack([(2 * uv[inside, 0] + 1) / width - 1, (2 * uv[inside, 1] + 1) / height - 1], -1)
        colour = F.grid_sample(image[view][None], grid[None, None].float(), align_corners=False)[0, :, 0].T
        seen = torch.stack([colour[:, 0] * SOURCE_SIZE[1], colour[:, 1] * SOURCE_SIZE[0]], -1) - 0.5
        cam = (torch.from_numpy(lidar2cam[view]) @ torch.cat([calibrated[inside], torch.ones(int(inside.sum()), 1,
                                                              dtype=torch.float64)], 1).T)[:3]
        expected = (torch.from_numpy(frame.intrinsics) @ cam).T
        expected = expected[:, :2] / expected[:, 2:]
        ok = (expected[:, 0] > 1) & (expected[:, 0] < SOURCE_SIZE[1] - 2) & (expected[:, 1] > 1) & (
            expected[:, 1] < SOURCE_SIZE[0] - 2)
        errors += (seen - expected)[ok].norm(dim=-1).tolist()
    return errors, flipped


@pytest.mark.parametrize('options', [
    dict(), dict(intrinsics_scale=1.25), dict(intrinsics_scale=0.8), dict(crop='center', image_size=(40, 60)),
    dict(train_augment=True), dict(train_augment=True, crop='center', resize_range=(0.8, 1.3), intrinsics_scale=1.1),
])
def test_augmentations_keep_projections_on_the_same_image_content(root: Path, options: dict) -> None:
    dataset = _dataset(root, **options)
    flips = set()
    for seed in range(3 if dataset.train_augment else 1):
        random.seed(seed)
        for index in range(len(dataset)):
            errors, flipped = _content_errors(dataset, index)
            flips.add(flipped)
            assert len(errors) >= 8
            assert max(errors) < 0.6, (seed, index, max(errors))
    assert flips == ({False, True} if dataset.train_augment else {False})


def test_intrinsics_scale_zooms_about_the_principal_point(root: Path) -> None:
    plain = _dataset(root)[0]['data_samples']['intrinsics']
    zoomed = _dataset(root, intrinsics_scale=1.25)[0]['data_samples']['intrinsics']
    torch.testing.assert_close(zoomed[:, :2, :2], 1.25 * plain[:, :2, :2], rtol=0.02, atol=0)
    assert (zoomed[:, :2, 2] - plain[:, :2, 2]).abs().max() <= 0.6


def _expected_sparse_depth(samples: dict, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Nearest point per pixel from a float64 numpy projection, and the pixels a point lands near the edge of."""
    views = samples['intrinsics'].shape[0]
    height, width = IMAGE_SIZE
    expected = np.full((views, height, width), np.inf)
    ambiguous = np.zeros((views, height, width), dtype=bool)
    scene = samples.get('scene_transform', torch.eye(4)).double().numpy()
    moved = (scene @ np.concatenate([points, np.ones((len(points), 1))], 1).T)
    for view in range(views):
        extrinsics = samples['lidar2cam'][view].double().numpy() @ np.linalg.inv(scene)
        cam = (extrinsics @ moved)[:3]
        hom = samples['intrinsics'][view].double().numpy() @ cam
        for u, v, z in zip(hom[0] / hom[2], hom[1] / hom[2], cam[2]):
            col, row = int(np.floor(u + 0.5)), int(np.floor(v + 0.5))
            if z <= 0 or not (0 <= col < width and 0 <= row < height) or not samples['view_valid'][view]:
                continue
            expected[view, row, col] = min(expected[view, row, col], z)
            if max(abs((u + 0.5) % 1 - 0.5), abs((v + 0.5) % 1 - 0.5)) > 0.499:
                ambiguous[view, max(0, row - 1):row + 2, max(0, col - 1):col + 2] = True
    expected[np.isinf(expected)] = 0
    return expected, ambiguous


@pytest.mark.parametrize('options', [dict(), dict(train_augment=True, resize_range=(0.7, 0.8))])
def test_sparse_depth_is_the_nearest_projected_lidar_point(root: Path, options: dict) -> None:
    dataset = _dataset(root, with_depth=True, **options)
    for seed in range(2):
        random.seed(seed)
        item = dataset[0]
        samples = item['data_samples']
        depth = samples['depth']
        assert depth.shape == (6, *IMAGE_SIZE) and depth.dtype == torch.float32
        points = load_points(dataset.tables.lidar_frame(samples['sample_token']).path)[:, :3].astype(np.float64)
        expected, ambiguous = _expected_sparse_depth(samples, points)
        if dataset.train_augment:  # pixels outside the resized image carry no content and no depth
            content = item['inputs'].abs().sum(1) > 0
            assert (~content).any()
            expected[~content.numpy()] = 0
        clear = ~ambiguous
        np.testing.assert_allclose(depth.numpy()[clear], expected[clear], rtol=1e-5, atol=1e-5)
        assert (depth > 0).sum() > 300
    # CAM_FRONT holds pairs of points on one ray (depths t and 1.6 t, written last): the nearer one wins
    item = _dataset(root, with_depth=True)[0]['data_samples']
    points = load_points(dataset.tables.lidar_frame(item['sample_token']).path)[:, :3].astype(np.float64)
    near, _ = _expected_sparse_depth(item, points[-60:-30])
    far, _ = _expected_sparse_depth(item, points[-30:])
    hit = near[0] > 0
    assert hit.sum() >= 20 and np.allclose(far[0][hit] / near[0][hit], 1.6, rtol=1e-3)
    assert (item['depth'][0].numpy()[hit] <= near[0][hit] + 1e-5).all()


@pytest.mark.parametrize('options', [dict(), dict(intrinsics_scale=0.8)])
def test_dense_depth_is_resampled_nearest_neighbour(root: Path, options: dict) -> None:
    dataset = _dataset(root, with_depth=True, depth_source='dense', **options)
    samples = dataset[1]['data_samples']
    height, width = IMAGE_SIZE
    rows, cols = np.mgrid[0:height, 0:width]
    for view, frame in enumerate(dataset.tables.camera_frames(samples['sample_token'])):
        source = np.asarray(Image.open(root / 'depth' / frame.channel / f'{frame.path.stem}.png')).astype(np.float64)
        back = frame.intrinsics @ np.linalg.inv(samples['intrinsics'][view].double().numpy())
        u = back[0, 0] * cols + back[0, 2]
        v = back[1, 1] * rows + back[1, 2]
        col, row = np.floor(u + 0.5).astype(int), np.floor(v + 0.5).astype(int)
        inside = (col >= 0) & (col < SOURCE_SIZE[1]) & (row >= 0) & (row < SOURCE_SIZE[0])
        expected = np.where(inside, source[row.clip(0, SOURCE_SIZE[0] - 1), col.clip(0, SOURCE_SIZE[1] - 1)], 0) / 1000
        clear = (np.abs((u + 0.5) % 1 - 0.5) < 0.49) & (np.abs((v + 0.5) % 1 - 0.5) < 0.49)
        np.testing.assert_allclose(samples['depth'][view].numpy()[clear], expected[clear], rtol=1e-6)
        assert clear.mean() > 0.5 and inside.any()
        assert (samples['depth'][view].numpy()[~inside] == 0).all() and inside.all() == (not options)


def test_missing_camera_record_and_view_dropout_give_invalid_views(own_root: Path) -> None:
    first = _dataset(own_root).sample_tokens[0]
    records = load_table(own_root, 'sample_data')
    save_table(own_root, 'sample_data', [r for r in records if r['token'] != token('sample_data', first, 'CAM_BACK')])
    dataset = _dataset(own_root, with_depth=True)
    item, other = dataset[0], dataset[1]
    samples = item['data_samples']
    assert samples['view_valid'].tolist() == [True, True, True, False, True, True]
    assert not item['inputs'][3].any() and not samples['depth'][3].any() and samples['depth'][2].any()
    batch = multiview_collate([item, other])
    assert not batch['masks'][0, 3].any() and batch['masks'][0, 2].all() and batch['masks'][1].all()
    Cameras.from_batch(batch['data_samples'])  # placeholder cameras of the missing view are valid
    dropping = _dataset(own_root, train_augment=True, view_dropout=0.7, with_depth=True)
    random.seed(0)
    for _ in range(6):
        drawn = dropping[1]
        valid = drawn['data_samples']['view_valid']
        assert valid.any() and not valid.all()
        assert not drawn['inputs'][~valid].any() and not drawn['data_samples']['depth'][~valid].any()


def test_collate_pads_views_and_masks_real_pixels(root: Path) -> None:
    small = _dataset(root, with_depth=True)[0]
    large = _dataset(root, image_size=(40, 96), with_depth=True)[1]
    collate = FUNCTIONS.get('multiview_collate')
    batch = collate([small, large])
    assert batch['inputs'].shape == (2, 6, 3, 40, 96) and batch['masks'].shape == (2, 6, 40, 96)
    assert batch['masks'].dtype == torch.bool
    assert batch['masks'][0, :, :32, :80].all() and not batch['masks'][0, :, 32:].any()
    assert not batch['masks'][0, :, :, 80:].any() and batch['masks'][1].all()
    assert torch.equal(batch['inputs'][0, :, :, :32, :80], small['inputs'])
    assert not batch['inputs'][0, :, :, 32:].any()
    assert [s['pad_shape'] for s in batch['data_samples']] == [(40, 96), (40, 96)]
    assert small['data_samples']['pad_shape'] == IMAGE_SIZE
    assert batch['data_samples'][0]['depth'].shape == (6, 40, 96)
    cameras = Cameras.from_batch(batch['data_samples'])
    assert cameras.image_size == (40, 96) and cameras.num_samples == 2
    with pytest.raises(ValueError, match='same V'):
        collate([small, dict(small, inputs=small['inputs'][:5])])


def test_bad_input_names_the_problem(own_root: Path) -> None:
    dataset = _dataset(own_root, with_depth=True)
    frame = dataset.tables.camera_frames(dataset.sample_tokens[1])[2]
    frame.path.unlink()
    message = rf'Image {re.escape(str(frame.path))} \(CAM_FRONT_LEFT of sample .*\) not found'
    with pytest.raises(FileNotFoundError, match=message):
        dataset[1]
    lidar = dataset.tables.lidar_frame(dataset.sample_tokens[0]).path
    points = np.fromfile(lidar, dtype=np.float32).reshape(-1, 5)
    points[7, 2] = np.nan
    points.tofile(lidar)
    with pytest.raises(RuntimeError, match=r'LIDAR_TOP.*pcd\.bin has 1 points with non-finite \(NaN/inf\)'):
        dataset[0]
    _dataset(own_root)[0]  # without depth the lidar file is not read
    dense = _dataset(own_root, with_depth=True, depth_source='dense')
    dense_path = own_root / 'depth' / 'CAM_FRONT'
    for path in dense_path.iterdir():
        Image.fromarray(np.zeros(SOURCE_SIZE, np.uint8)).save(path)
    with pytest.raises(RuntimeError, match='must be a single-channel 16-bit PNG of millimetres'):
        dense[0]
    records = load_table(own_root, 'sample_annotation')
    records[2]['size'] = [1.0, 0.0, 1.0]
    save_table(own_root, 'sample_annotation', records)
    with pytest.raises(ValueError, match=rf"annotation {records[2]['token']} in .*sample_annotation\.json"):
        _dataset(own_root)


@pytest.mark.parametrize('options, message', [
    (dict(classes=('cars',)), "'cars' is not a nuScenes detection name.*Did you mean 'car'"),
    (dict(image_size=320), 'image_size must be two positive ints'),
    (dict(crop='bottm'), "Did you mean 'bottom'"),
    (dict(view_dropout=1.0), r'view_dropout must be a probability in \[0, 1\)'),
    (dict(intrinsics_scale=0), 'intrinsics_scale must be > 0'),
    (dict(resize_range=(1.1, 0.9)), 'low ≤ high'),
    (dict(subset=3), 'subset=3 is larger than split'),
])
def test_bad_options_are_refused(root: Path, options: dict, message: str) -> None:
    with pytest.raises((ValueError, TypeError), match=message):
        _dataset(root, **options)
