"""Depth from crops: the rendered images (multiview_scenes.py --task crops) put depth, pose and K together right and
keep each split's field of view; CropDepth cuts the crops it says, with boxes in KPE's convention, and refuses what
it cannot read."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.helpers import load_tool
from vispe.datasets import CropDepth, crop_depth_collate
from vispe.datasets.crop_depth import grid_crops
from vispe.datasets.mv_scenes import load_class_meshes
from vispe.datasets.mv_scenes.crops import CROPS_SPLITS, CropsConfig, convert_crops, render_crops_image

TINY = CropsConfig(image_size=(24, 32))


@pytest.fixture(scope='module')
def tiny_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('crops') / 'mv-crops-depth'
    convert_crops(root, {split: 2 for split in CROPS_SPLITS}, config=TINY, progress=False)
    return root


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return dict(data)


def test_ground_pixels_unproject_to_the_ground_and_each_split_keeps_its_field_of_view(tiny_root) -> None:
    for split in CROPS_SPLITS:
        image = load(tiny_root / split / '00001.npz')
        height, width = image['depth'].shape
        rows, cols = np.mgrid[0:height, 0:width]
        pixels = np.stack([cols, rows, np.ones_like(rows)], -1).reshape(-1, 3).astype(np.float64)
        depth = image['depth'].reshape(-1).astype(np.float64)
        camera = pixels @ np.linalg.inv(image['intrinsics'].astype(np.float64)).T * depth[:, None]
        world = camera @ image['cam2world'][:3, :3].T + image['cam2world'][:3, 3]
        known = depth > 0
        assert known.mean() > 0.3 and (world[known, 2] > -1e-3).all()
        assert (np.abs(world[known, 2]) < 1e-3).mean() > 0.3              # most of what is seen is ground
        hfov = math.degrees(2 * math.atan(width / 2 / float(image['intrinsics'][0, 0])))
        low, high = TINY.hfov_degrees[split]
        assert low - 1e-3 <= hfov <= high + 1e-3, (split, hfov)
        pitch = math.degrees(math.asin(-image['cam2world'][2, 2]))          # the optical axis below the horizon
        assert TINY.pitch_degrees[0] - 1e-6 <= pitch <= TINY.pitch_degrees[1] + 1e-6


def test_images_are_seeded_by_split_and_index(tiny_root) -> None:
    again = render_crops_image('test-wide', 1, TINY, load_class_meshes())
    assert all(np.array_equal(again[key], value) for key, value in load(tiny_root / 'test-wide' / '00001.npz').items())
    other = render_crops_image('test-wide', 1, replace(TINY, seed=3), load_class_meshes())
    assert not np.array_equal(other['image'], again['image'])


def test_grid_crops_cover_centre_edges_and_corners() -> None:
    crops = grid_crops(96, 128, 48)
    assert [bin_ for *_, bin_ in crops].count('center') == 1 and [b for *_, b in crops].count('corner') == 4
    assert crops[0] == (0, 0, 'corner') and crops[4] == (40, 24, 'center') and crops[8] == (80, 48, 'corner')
    assert crops[1][2] == crops[3][2] == 'edge'
    with pytest.raises(ValueError, match='eval_side'):
        grid_crops(24, 32, 30)


def test_evaluation_crops_are_the_image_pixels_with_inclusive_boxes(tiny_root) -> None:
    dataset = CropDepth(tiny_root, 'test', crop_size=12, eval_side=0.5)
    assert len(dataset) == 2 * 9
    item = dataset[4]                                                          # image 0, the centre crop
    image = load(tiny_root / 'test' / '00000.npz')
    x0, y0, x1, y1 = item['inputs']['crop_box'].tolist()
    assert (x0, y0, x1, y1) == (10, 6, 21, 17) and item['data_samples']['offset_bin'] == 'center'
    expected = torch.from_numpy(image['image'][6:18, 10:22]).permute(2, 0, 1).float() / 255
    assert torch.allclose(item['inputs']['image'], expected)
    assert torch.equal(item['data_samples']['depth'], torch.from_numpy(image['depth'][6:18, 10:22]))
    assert torch.equal(item['inputs']['intrinsics'], torch.from_numpy(image['intrinsics']))
    assert item['inputs']['image_size'].tolist() == [24, 32]


def test_random_training_crops_lie_inside_and_are_resized(tiny_root) -> None:
    torch.manual_seed(0)
    dataset = CropDepth(tiny_root, 'train', crop_size=8, crops_per_image=3)
    assert len(dataset) == 6 and dataset.random_crops
    batch = crop_depth_collate([dataset[index] for index in range(len(dataset))])
    boxes = batch['inputs']['crop_box']
    sides = boxes[:, 2] - boxes[:, 0] + 1
    assert torch.equal(sides, boxes[:, 3] - boxes[:, 1] + 1)
    assert (sides >= 8).all() and (sides <= 16).all() and (boxes[:, :2] >= 0).all()
    assert (boxes[:, 2] <= 31).all() and (boxes[:, 3] <= 23).all()
    assert batch['inputs']['image'].shape == (6, 3, 8, 8) and batch['inputs']['depth'].shape == (6, 8, 8)
    assert {sample['offset_bin'] for sample in batch['data_samples']} == {'random'}


def test_bad_options_and_files_are_named(tiny_root, tmp_path) -> None:
    with pytest.raises(ValueError, match='split'):
        CropDepth(tiny_root, 'tests')
    with pytest.raises(ValueError, match='side_range'):
        CropDepth(tiny_root, 'train', side_range=(0.5, 0.2))
    with pytest.raises(FileNotFoundError, match='--task crops'):
        CropDepth(tmp_path / 'missing', 'val')
    broken = tmp_path / 'broken'
    (broken / 'val').mkdir(parents=True)
    (broken / 'val' / '00000.npz').write_bytes(b'not a zip')
    with pytest.raises(ValueError, match=r'00000\.npz is not a readable crops image'):
        CropDepth(broken, 'val')[0]


def test_cli_writes_the_crops_set(tmp_path, capsys) -> None:
    tool = load_tool('dataset_converters/multiview_scenes')
    root = tmp_path / 'cli'
    status = tool.main(['--task', 'crops', '--root', str(root), '--train', '1', '--val', '1', '--test', '1',
                        '--image-size', '16', '24', '--workers', '1', '--quiet'])
    assert status == 0 and "'test-tele': 1" in capsys.readouterr().out
    assert load(root / 'test-tele' / '00000.npz')['image'].shape == (16, 24, 3)
