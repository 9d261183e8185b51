"""mv-scenes for novel-view synthesis (multiview_scenes.py --task nvs): cameras look where they should, pixels agree
with independent ray casts, the set is seeded and written atomically, and the command line reports it."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import load_tool
from vispe.datasets.mv_scenes import DatasetExistsError, load_class_meshes
from vispe.datasets.mv_scenes.nvs import NVSConfig, convert_nvs, look_at, render_nvs_scene

TINY = NVSConfig(image_size=(24, 32))


@pytest.fixture(scope='module')
def tiny_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('nvs') / 'mv-scenes-nvs'
    convert_nvs(root, train=3, val=1, test=1, config=TINY, progress=False)
    return root


def load(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return dict(data)


def test_look_at_puts_the_target_on_the_optical_axis_with_the_ground_below() -> None:
    eye, target = np.array([4.0, -3.0, 2.0]), np.array([0.5, 0.2, 0.4])
    pose = look_at(eye, target)
    assert np.allclose(pose[:3, :3] @ pose[:3, :3].T, np.eye(3)) and np.isclose(np.linalg.det(pose[:3, :3]), 1)
    in_camera = np.linalg.inv(pose) @ np.append(target, 1.0)
    assert np.allclose(in_camera[:2], 0, atol=1e-9) and in_camera[2] > 0
    below = np.linalg.inv(pose) @ np.append(target - [0, 0, 1.0], 1.0)
    assert below[1] > 0                                   # image y points down


def test_scene_files_hold_inputs_then_targets_with_cameras(tiny_root) -> None:
    scene = load(tiny_root / 'train' / '00000.npz')
    views = TINY.input_views + TINY.target_views
    assert scene['images'].shape == (views, 24, 32, 3) and scene['images'].dtype == np.uint8
    assert scene['depth'].shape == scene['objects'].shape == (views, 24, 32)
    assert scene['intrinsics'].shape == (views, 3, 3) and scene['cam2world'].shape == (views, 4, 4)
    assert int(scene['num_inputs']) == TINY.input_views
    assert scene['objects'][:TINY.input_views].any()
    assert (scene['depth'][scene['objects']] > 0).all()
    centre = np.linalg.inv(scene['cam2world']) @ np.array([0.0, 0.0, 0.5, 1.0])
    pixels = np.einsum('vij,vj->vi', scene['intrinsics'].astype(np.float64), centre[:, :3])
    pixels = pixels[:, :2] / pixels[:, 2:]
    assert (np.abs(pixels - [15.5, 11.5]) < 6).all()       # the scene centre lies near the image centre


def test_pixels_unproject_onto_the_ground_and_the_objects(tiny_root) -> None:
    """Depth, intrinsics and poses agree: ground pixels unproject to z = 0, object pixels to heights within the
    objects' size, in every view."""
    scene = load(tiny_root / 'val' / '00000.npz')
    height, width = scene['depth'].shape[1:]
    rows, cols = np.mgrid[0:height, 0:width]
    pixels = np.stack([cols, rows, np.ones_like(rows)], -1).reshape(-1, 3).astype(np.float64)
    for view in range(len(scene['depth'])):
        depth = scene['depth'][view].reshape(-1).astype(np.float64)
        camera = (pixels @ np.linalg.inv(scene['intrinsics'][view].astype(np.float64)).T) * depth[:, None]
        world = camera @ scene['cam2world'][view][:3, :3].T + scene['cam2world'][view][:3, 3]
        objects = scene['objects'][view].reshape(-1)
        ground = (depth > 0) & ~objects
        assert ground.any() and np.abs(world[ground, 2]).max() < 1e-3
        assert (world[objects, 2] > -1e-3).all() and (world[objects, 2] < TINY.object_size * 1.16).all()
    assert all(np.array_equal(scene[key], value) for key, value in render_nvs_scene('val', 0, TINY,
                                                                                    load_class_meshes()).items())


def test_same_seed_gives_identical_files_in_worker_processes_and_another_seed_differs(tiny_root, tmp_path) -> None:
    again = tmp_path / 'again'
    convert_nvs(again, train=3, val=1, test=1, config=TINY, progress=False, workers=2)
    files = sorted(p.relative_to(tiny_root) for p in tiny_root.rglob('*.npz'))
    assert files == sorted(p.relative_to(again) for p in again.rglob('*.npz'))
    assert all((tiny_root / f).read_bytes() == (again / f).read_bytes() for f in files)
    other = render_nvs_scene('train', 0, replace(TINY, seed=5), load_class_meshes())
    assert not np.array_equal(other['images'], load(tiny_root / 'train' / '00000.npz')['images'])


def test_an_existing_set_is_replaced_only_on_request(tiny_root, tmp_path) -> None:
    root = tmp_path / 'nvs'
    convert_nvs(root, train=1, val=1, test=0, config=TINY, progress=False)
    with pytest.raises(DatasetExistsError, match='--overwrite'):
        convert_nvs(root, train=1, val=1, test=0, config=TINY, progress=False)
    convert_nvs(root, train=1, val=1, test=0, config=TINY, progress=False, overwrite=True)
    assert not root.with_name('nvs.partial').exists() and (root / 'mv-scenes-nvs.json').is_file()


def test_cli_writes_an_nvs_set_and_refuses_view_counts_without_it(tmp_path, capsys) -> None:
    tool = load_tool('dataset_converters/multiview_scenes')
    root = tmp_path / 'cli'
    status = tool.main(['--task', 'nvs', '--root', str(root), '--train', '1', '--val', '1', '--test', '0',
                        '--image-size', '16', '24', '--workers', '1', '--quiet'])
    assert status == 0 and 'input + 2 target views' in capsys.readouterr().out
    assert load(root / 'train' / '00000.npz')['images'].shape == (5, 16, 24, 3)
    with pytest.raises(SystemExit):
        tool.main(['--target-views', '4', '--root', str(tmp_path / 'x')])
    assert '--task nvs' in capsys.readouterr().err
