"""A user's own scan: colours in the wrong range, a scan in the wrong units, bad numeric options and empty, NaN or
too sparse clouds get an error or a warning that names the value seen and the fix (tools/infer_points.py,
vispe.geometry.read_points, PointScenes)."""
from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from vispe.datasets import PointScenes
from vispe.engine import load_config
from vispe.geometry import read_points, write_points
from vispe.geometry.point_cloud import PointCloudFileError, colour_range_problem
from vispe.registry import MODELS

from ..conftest import REPO_ROOT
from ..helpers import load_tool

CONFIG = REPO_ROOT / 'configs' / 'vdetr' / 'vdetr-s_vertex-rpe_pt-scenes.py'
SMALL = {'model.backbone.channels': [16, 32], 'model.backbone.num_samples': 64, 'model.backbone.group_size': 8,
         'model.embed_dim': 32, 'model.encoder.depth': 1, 'model.encoder.mlp_dim': 32, 'model.decoder.depth': 1,
         'model.decoder.mlp_dim': 32, 'model.num_queries': 16, 'test_dataloader.dataset.num_points': 512}
OPTIONS = [f'{key}={json.dumps(value).replace(" ", "")}' for key, value in SMALL.items()]


def room(count: int = 3000, size: tuple[float, float] = (5.0, 4.0), seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Points spread over a room of ``size`` metres, 2.5 m high, and their colours in 0..1."""
    rng = np.random.default_rng(seed)
    xyz = rng.uniform(0, 1, (count, 3)) * np.array([*size, 2.5])
    return xyz, rng.uniform(0, 1, (count, 3))


@pytest.fixture(scope='module')
def checkpoint(tmp_path_factory) -> Path:
    """An untrained tiny V-DETR's weights for the config with OPTIONS (the checks do not depend on training)."""
    cfg = load_config(CONFIG, SMALL)
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp('scan') / 'tiny.pth'
    torch.save(MODELS.build(cfg.model).state_dict(), path)
    return path


def infer(monkeypatch: pytest.MonkeyPatch, checkpoint: Path, scan: Path, *options: str,
          cfg_options: tuple[str, ...] = ()) -> list[str]:
    """Run tools/infer_points.py in-process; the texts of the UserWarnings it gave."""
    tool = load_tool('infer_points')
    argv = ['infer_points.py', str(CONFIG), str(checkpoint), str(scan), '--out', str(scan.with_name('boxes')),
            *options, '--cfg-options', *OPTIONS, *cfg_options]
    monkeypatch.setattr(sys, 'argv', argv)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        assert tool.main() == 0
    return [str(item.message) for item in caught if issubclass(item.category, UserWarning)]


def test_a_millimetre_scan_read_as_metres_is_warned_about(monkeypatch, checkpoint, tmp_path) -> None:
    xyz, colours = room()
    write_points(tmp_path / 'mm.ply', xyz * 1000, colours)
    messages = infer(monkeypatch, checkpoint, tmp_path / 'mm.ply', '--voxel-size', '20')
    assert any('the scan is 4912 m across (at --units 1), more than 4x larger than the largest scene the model was '
               'trained on (4 to 7 m): its boxes would be meaningless' in m
               and '--units 0.001 makes it 4.91 m across' in m for m in messages), messages


def test_a_metre_scan_given_units_1000_is_warned_about(monkeypatch, checkpoint, tmp_path) -> None:
    xyz, colours = room()
    write_points(tmp_path / 'm.ply', xyz, colours)
    messages = infer(monkeypatch, checkpoint, tmp_path / 'm.ply', '--units', '1000', '--voxel-size', '20')
    assert any('m across (at --units 1000)' in m and '--units 1 makes it' in m for m in messages), messages


def test_a_scan_in_range_gets_no_extent_warning(monkeypatch, checkpoint, tmp_path) -> None:
    xyz, colours = room(size=(3.0, 2.0))
    write_points(tmp_path / 'ok.ply', xyz, colours)
    assert not [m for m in infer(monkeypatch, checkpoint, tmp_path / 'ok.ply') if 'across' in m]
    assert (tmp_path / 'boxes.json').is_file()


def test_scene_scale_moves_the_training_range(monkeypatch, checkpoint, tmp_path) -> None:
    xyz, colours = room(size=(60.0, 40.0))
    write_points(tmp_path / 'big.ply', xyz, colours)
    assert [m for m in infer(monkeypatch, checkpoint, tmp_path / 'big.ply', '--voxel-size', '0.3') if 'across' in m]
    scaled = infer(monkeypatch, checkpoint, tmp_path / 'big.ply', '--voxel-size', '0.3',
                   cfg_options=('test_dataloader.dataset.scene_scale=10',))
    assert not [m for m in scaled if 'across' in m]


def test_a_shrunk_scan_too_sparse_for_the_model_names_the_units(monkeypatch, checkpoint, tmp_path) -> None:
    xyz, colours = room()
    write_points(tmp_path / 'm.ply', xyz, colours)
    with pytest.raises(ValueError, match=r'has \d+ points after 0\.02 m voxels; the model samples 64: the scan is '
                                         r'0\.0049\d* m across \(at --units 0\.001\), more than 4x smaller than the '
                                         r'smallest .* --units 1 makes it'):
        infer(monkeypatch, checkpoint, tmp_path / 'm.ply', '--units', '0.001')


def test_a_config_without_scene_extent_says_the_extent_is_not_checked(monkeypatch, checkpoint, tmp_path) -> None:
    xyz, colours = room()
    write_points(tmp_path / 'm.ply', xyz, colours)
    messages = infer(monkeypatch, checkpoint, tmp_path / 'm.ply', cfg_options=('scene_extent=None',))
    assert any('does not give scene_extent' in m and 'add scene_extent = (smallest, largest)' in m
               for m in messages), messages


@pytest.mark.parametrize('value', ['[7,4]', '[0,4]', '[4]', "['a','b']"])
def test_a_bad_scene_extent_in_the_config_is_refused(monkeypatch, checkpoint, tmp_path, value) -> None:
    xyz, colours = room()
    write_points(tmp_path / 'm.ply', xyz, colours)
    with pytest.raises(ValueError, match=r'scene_extent must be \(smallest, largest\) .* E\.g\. scene_extent'):
        infer(monkeypatch, checkpoint, tmp_path / 'm.ply', cfg_options=(f'scene_extent={value}',))


def test_the_config_range_matches_the_pt_scenes_generator() -> None:
    from vispe.datasets.pt_scenes import RoomConfig
    cfg = load_config(CONFIG)
    assert tuple(cfg.scene_extent) == (RoomConfig().min_size, RoomConfig().max_size)


@pytest.mark.parametrize('option, value, words', [
    ('--score-threshold', 'nan', 'not a number from 0 to 1'),
    ('--score-threshold', 'inf', 'not a number from 0 to 1'),
    ('--score-threshold', '-0.1', 'not a number from 0 to 1'),
    ('--score-threshold', '1.5', 'not a number from 0 to 1'),
    ('--units', '0', 'not a positive number'),
    ('--units', '-1', 'not a positive number'),
    ('--units', 'nan', 'not a positive number'),
    ('--units', 'inf', 'not a positive number'),
    ('--voxel-size', '0', 'not a positive number'),
    ('--voxel-size', 'nan', 'not a positive number'),
    ('--voxel-size', 'x', 'not a positive number'),
])
def test_bad_numeric_options_are_refused(monkeypatch, capsys, checkpoint, tmp_path, option, value, words) -> None:
    write_points(tmp_path / 'm.ply', *room())
    tool = load_tool('infer_points')
    monkeypatch.setattr(sys, 'argv', ['infer_points.py', str(CONFIG), str(checkpoint), str(tmp_path / 'm.ply'),
                                      option, value, '--out', str(tmp_path / 'boxes')])
    with pytest.raises(SystemExit) as exit_:
        tool.main()
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f'argument {option}' in error and repr(value) in error and words in error and 'give a' in error
    assert not (tmp_path / 'boxes.json').exists()


@pytest.mark.parametrize('case, match', [
    ('empty', r'holds no points \(shape \(0, 6\)\)'),
    ('all nan', r'all 4 points have NaN or inf values'),
    ('too few', r'has 20 points after 0\.02 m voxels; the model samples 64: give a denser scan or a smaller '
                r'--voxel-size'),
    ('unit colours', r'colours in 0\.\.1 where 0\.\.255 are read .* multiplied by 255'),
])
def test_empty_nan_sparse_and_miscoloured_scans_are_refused(monkeypatch, checkpoint, tmp_path, case, match) -> None:
    xyz, colours = room()
    arrays = {'empty': np.zeros((0, 6)), 'all nan': np.full((4, 6), np.nan),
              'too few': np.concatenate([xyz[:20] * 0 + np.arange(20)[:, None], colours[:20] * 255], 1),
              'unit colours': np.concatenate([xyz, colours], 1)}
    np.save(tmp_path / 'scan.npy', arrays[case])
    with pytest.raises(ValueError, match=match):
        infer(monkeypatch, checkpoint, tmp_path / 'scan.npy')


def test_nan_points_are_dropped_with_a_count(monkeypatch, checkpoint, tmp_path) -> None:
    xyz, colours = room()
    xyz[[3, 9]] = np.nan
    np.save(tmp_path / 'scan.npy', np.concatenate([xyz, colours * 255], 1))
    messages = infer(monkeypatch, checkpoint, tmp_path / 'scan.npy')
    assert any('dropped 2 of 3000 points with NaN or inf values (in xyz; the first is point 3)' in m
               for m in messages), messages


@pytest.mark.parametrize('rgb, match', [
    (lambda c: c, r'colours from 0 to 0\.99\d*: colours in 0\.\.1 where 0\.\.255 are read'),
    (lambda c: (c > 0.5).astype(np.float64), r'colours from 0 to 1: colours in 0\.\.1'),
    (lambda c: c * 300, r'colours from 0 to 29\d\.?\d*, outside 0\.\.255; write them again in 0\.\.255'),
    (lambda c: c * 255 - 10, r'colours from -\d+\.?\d*.*outside 0\.\.255'),
])
def test_npy_colours_out_of_their_range_are_refused(tmp_path, rgb, match) -> None:
    xyz, colours = room(count=50)
    colours[0] = 0
    np.save(tmp_path / 'scan.npy', np.concatenate([xyz, rgb(colours)], 1))
    with pytest.raises(PointCloudFileError, match=match):
        read_points(tmp_path / 'scan.npy')


def test_black_and_dark_npy_colours_are_read() -> None:
    assert colour_range_problem(np.zeros((5, 3)), 255) is None
    assert colour_range_problem(np.full((5, 3), 2.0), 255) is None
    assert colour_range_problem(np.full((5, 3), 0.5), 1) is None


def test_nan_colours_are_refused_or_dropped(tmp_path) -> None:
    xyz, colours = room(count=10)
    colours[4, 1] = np.nan
    np.save(tmp_path / 'scan.npy', np.concatenate([xyz, colours * 255], 1))
    with pytest.raises(PointCloudFileError, match=r'1 of 10 points have NaN or inf values \(in colours; the first is '
                                                  r'point 4\); pass drop_nonfinite=True'):
        read_points(tmp_path / 'scan.npy')
    with pytest.warns(UserWarning, match=r'dropped 1 of 10 points .* repair the file to keep them'):
        assert len(read_points(tmp_path / 'scan.npy', drop_nonfinite=True)['xyz']) == 9


def test_a_dataset_scene_with_unit_colours_is_refused(tmp_path) -> None:
    xyz, colours = room(count=200)
    points_dir = tmp_path / 'scannet_train_detection_data'
    points_dir.mkdir()
    (tmp_path / 'meta_data').mkdir()
    (tmp_path / 'meta_data' / 'scannetv2_train.txt').write_text('scene0000_00\n')
    np.save(points_dir / 'scene0000_00_vert.npy', np.concatenate([xyz, colours], 1).astype(np.float32))
    np.save(points_dir / 'scene0000_00_ins_label.npy', np.zeros(200, np.int16))
    np.save(points_dir / 'scene0000_00_sem_label.npy', np.zeros(200, np.int16))
    np.save(points_dir / 'scene0000_00_bbox.npy', np.array([[1.0, 1, 1, 0.5, 0.5, 0.5, 3]]))
    with pytest.raises(ValueError, match=r'scene0000_00_vert\.npy has colours from .* colours in 0\.\.1 where 0\.\.255 '
                                         r'are read .* multiplied by 255 \(rgb \* 255\), or preprocess the scene'):
        PointScenes(tmp_path, 'train', num_points=64)[0]
