"""The nuScenes-format reader on a tiny root in the real table format: geometry against pyquaternion and the
devkit, key frames, splits, and errors that name the file."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from pyquaternion import Quaternion

from vispe.datasets.nuscenes_tables import (CAMERA_CHANNELS, NuScenesTables, category_to_detection_name,
                                            load_points)

from .nuscenes_fixture import VERSION, load_table, save_table, token, write_nuscenes

# The nuScenes category list (v1.0) and the detection name the benchmark gives each.
NUSCENES_CATEGORIES = {
    'animal': None, 'human.pedestrian.adult': 'pedestrian', 'human.pedestrian.child': 'pedestrian',
    'human.pedestrian.construction_worker': 'pedestrian', 'human.pedestrian.personal_mobility': None,
    'human.pedestrian.police_officer': 'pedestrian', 'human.pedestrian.stroller': None,
    'human.pedestrian.wheelchair': None, 'movable_object.barrier': 'barrier', 'movable_object.debris': None,
    'movable_object.pushable_pullable': None, 'movable_object.trafficcone': 'traffic_cone',
    'static_object.bicycle_rack': None, 'vehicle.bicycle': 'bicycle', 'vehicle.bus.bendy': 'bus',
    'vehicle.bus.rigid': 'bus', 'vehicle.car': 'car', 'vehicle.construction': 'construction_vehicle',
    'vehicle.emergency.ambulance': None, 'vehicle.emergency.police': None, 'vehicle.motorcycle': 'motorcycle',
    'vehicle.trailer': 'trailer', 'vehicle.truck': 'truck',
}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_nuscenes(tmp_path / 'nuscenes')


def _pose(record: dict) -> np.ndarray:
    matrix = Quaternion(record['rotation']).transformation_matrix
    matrix[:3, 3] = record['translation']
    return matrix


def _independent_geometry(root: Path, sample_token: str) -> tuple[np.ndarray, np.ndarray, dict]:
    """lidar2global, (V, 4, 4) global2cam and (V, 3, 3) K of a sample, with pyquaternion from the json tables."""
    tables = {name: {r['token']: r for r in load_table(root, name)} for name in
              ('sample_data', 'calibrated_sensor', 'ego_pose', 'sensor')}
    frames = {}
    for record in tables['sample_data'].values():
        calibration = tables['calibrated_sensor'][record['calibrated_sensor_token']]
        channel = tables['sensor'][calibration['sensor_token']]['channel']
        if record['sample_token'] == sample_token and record['is_key_frame']:
            frames[channel] = (_pose(tables['ego_pose'][record['ego_pose_token']]), _pose(calibration),
                               np.array(calibration['camera_intrinsic']))
    lidar_ego, lidar_calib, _ = frames['LIDAR_TOP']
    lidar2global = lidar_ego @ lidar_calib
    global2cam = np.stack([np.linalg.inv(frames[c][0] @ frames[c][1]) for c in CAMERA_CHANNELS])
    return lidar2global, global2cam, {c: frames[c][2] for c in CAMERA_CHANNELS}


def test_lidar2cam_matches_pyquaternion(root: Path) -> None:
    tables = NuScenesTables(root)
    for sample_token in tables.sample_tokens():
        lidar2global, global2cam, _ = _independent_geometry(root, sample_token)
        lidar2cam, valid = tables.lidar2cam(sample_token)
        assert valid.all() and lidar2cam.dtype == np.float64
        np.testing.assert_allclose(tables.lidar2global(sample_token), lidar2global, atol=1e-9)
        np.testing.assert_allclose(lidar2cam, global2cam @ lidar2global, atol=1e-9)
        # the two ego poses differ (cameras fire at their own timestamps), so they must both be in lidar2cam
        single_pose = [np.linalg.inv(f.sensor2ego) @ tables.lidar_frame(sample_token).sensor2ego
                       for f in tables.camera_frames(sample_token)]
        assert np.abs(np.stack(single_pose) - lidar2cam).max() > 1e-3


def test_box_centres_project_like_the_global_boxes(root: Path) -> None:
    tables = NuScenesTables(root)
    annotations = {r['token']: r for r in load_table(root, 'sample_annotation')}
    for sample_token in tables.sample_tokens():
        _, global2cam, intrinsics = _independent_geometry(root, sample_token)
        lidar2cam, _ = tables.lidar2cam(sample_token)
        boxes = tables.annotations(sample_token)
        assert len(boxes.tokens) == 7 and boxes.boxes.shape == (7, 7)
        for view, channel in enumerate(CAMERA_CHANNELS):
            centre_global = np.array([annotations[t]['translation'] + [1.0] for t in boxes.tokens])
            expected = (intrinsics[channel] @ (global2cam[view] @ centre_global.T)[:3]).T
            centre_lidar = np.concatenate([boxes.boxes[:, :3].numpy(), np.ones((7, 1))], 1)
            got = (intrinsics[channel] @ (lidar2cam[view] @ centre_lidar.T)[:3]).T
            np.testing.assert_allclose(got[:, 2], expected[:, 2], atol=1e-6)
            np.testing.assert_allclose(got[:, :2] / got[:, 2:], expected[:, :2] / expected[:, 2:], atol=1e-6)


def test_boxes_sizes_names_and_key_frames_match_the_devkit(root: Path) -> None:
    nuscenes = pytest.importorskip('nuscenes')
    from nuscenes.eval.common.utils import quaternion_yaw
    from nuscenes.eval.detection.utils import category_to_detection_name as devkit_name
    devkit = nuscenes.NuScenes(version=VERSION, dataroot=str(root), verbose=False)
    tables = NuScenesTables(root)
    for name, detection in NUSCENES_CATEGORIES.items():
        assert category_to_detection_name(name) == devkit_name(name) == detection
    for sample_token in tables.sample_tokens():
        sample = devkit.get('sample', sample_token)
        frames = tables.camera_frames(sample_token)
        assert [f.token for f in frames] == [sample['data'][c] for c in CAMERA_CHANNELS]
        _, devkit_boxes, _ = devkit.get_sample_data(sample['data']['LIDAR_TOP'])
        ours = tables.annotations(sample_token)
        assert [b.token for b in devkit_boxes] == ours.tokens
        assert ours.category_names == [b.name for b in devkit_boxes]
        for box, row in zip(devkit_boxes, ours.boxes.numpy()):
            np.testing.assert_allclose(row[:3], box.center, atol=1e-9)
            np.testing.assert_allclose(row[[4, 3, 5]], box.wlh, atol=1e-12)
            assert abs(np.sin(row[6] - quaternion_yaw(box.orientation))) < 1e-9
        assert ours.detection_names[5] is None and ours.num_points[6] == 0
        _, _, intrinsic = devkit.get_sample_data(sample['data']['CAM_FRONT'])
        np.testing.assert_allclose(frames[0].intrinsics, intrinsic)


def test_splits_from_the_devkit_and_from_splits_json(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip('nuscenes')
    tables = NuScenesTables(root)
    assert len(tables.sample_tokens('train')) == 2 and len(tables.sample_tokens('val')) == 1
    assert tables.scene_name(tables.sample_tokens('val')[0]) == 'scene-0003'
    with pytest.raises(ValueError, match="split 'mini_train' has no samples"):
        tables.sample_tokens('mini_train')
    with pytest.raises(ValueError, match="split 'training' is not defined in nuscenes.utils.splits"):
        tables.sample_tokens('training')
    (root / 'splits.json').write_text(json.dumps({'rig1': ['scene-0001', 'scene-0003'], 'rig2': ['scene-0003']}))
    assert tables.sample_tokens('rig1')[:2] == tables.sample_tokens()[:2] and len(tables.sample_tokens('rig1')) == 3
    with pytest.raises(ValueError, match=r"split 'train' is not defined in .*splits.json; the splits are \['rig1'"):
        tables.sample_tokens('train')
    (root / 'splits.json').unlink()
    (root / VERSION / 'splits.json').write_text(json.dumps({'rig2': ['scene-0003']}))  # the devkit's custom splits
    assert tables.sample_tokens('rig2') == tables.sample_tokens('val') and len(tables.sample_tokens('train')) == 2
    monkeypatch.setitem(sys.modules, 'nuscenes.utils.splits', None)
    assert len(tables.sample_tokens('rig2')) == 1
    with pytest.raises(ImportError, match='pip install nuscenes-devkit'):
        tables.sample_tokens('train')
    (root / 'splits.json').write_text('{"rig1": ["scene-0001"')
    with pytest.raises(RuntimeError, match=r'splits\.json is truncated or not json'):
        tables.sample_tokens('rig1')


def test_missing_camera_record_is_an_invalid_view(root: Path) -> None:
    first = NuScenesTables(root).sample_tokens()[0]
    records = [r for r in load_table(root, 'sample_data') if r['token'] != token('sample_data', first, 'CAM_BACK')]
    save_table(root, 'sample_data', records)
    tables = NuScenesTables(root)
    frames = tables.camera_frames(first)
    assert frames[3] is None and all(f is not None for i, f in enumerate(frames) if i != 3)
    lidar2cam, valid = tables.lidar2cam(first)
    assert valid.tolist() == [True, True, True, False, True, True] and np.array_equal(lidar2cam[3], np.eye(4))


@pytest.mark.parametrize('table', ['ego_pose', 'sample_annotation', 'category'])
def test_missing_and_truncated_tables_name_the_file(root: Path, table: str) -> None:
    path = root / VERSION / f'{table}.json'
    text = path.read_text()
    path.write_text(text[:len(text) // 2])
    with pytest.raises(RuntimeError, match=rf'{table}\.json is truncated or not json'):
        NuScenesTables(root)
    path.unlink()
    with pytest.raises(FileNotFoundError, match=rf'{table}\.json not found.*Extract the nuScenes metadata'):
        NuScenesTables(root)


def test_missing_version_folder_names_the_folders_there(root: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"v1.0-mini not found \(folders in .*: \['depth', 'maps', 'samples', "
                                                r"'v1.0-trainval'\]\)"):
        NuScenesTables(root, version='v1.0-mini')


def test_inconsistent_tables_name_the_token_and_file(root: Path) -> None:
    records = load_table(root, 'instance')
    save_table(root, 'instance', records[1:])
    tables = NuScenesTables(root)
    with pytest.raises(ValueError, match=rf"refers to instance token '{records[0]['token']}', which is not in "
                                         rf".*instance\.json"):
        tables.annotations(tables.sample_tokens()[0])
    records = load_table(root, 'sample_data')
    del records[0]['filename']
    save_table(root, 'sample_data', records)
    with pytest.raises(ValueError, match=r"sample_data record .* has no field 'filename'"):
        NuScenesTables(root).camera_frames(records[0]['sample_token'])


@pytest.mark.parametrize('size', [[0.0, 4.0, 1.5], [1.8, float('nan'), 1.5], [1.8, -4.0, 1.5],
                                  [1.8, 4.0, float('inf')]])
def test_bad_box_size_names_the_annotation_and_file(root: Path, size: list[float]) -> None:
    records = load_table(root, 'sample_annotation')
    records[4]['size'] = size
    save_table(root, 'sample_annotation', records)
    with pytest.raises(ValueError, match=rf"annotation {records[4]['token']} in .*sample_annotation\.json has size"):
        NuScenesTables(root)


def test_lidar_points_truncated_or_nan(tmp_path: Path) -> None:
    points = np.random.default_rng(0).normal(size=(10, 5)).astype(np.float32)
    path = tmp_path / 'points.pcd.bin'
    points.tofile(path)
    np.testing.assert_array_equal(load_points(path), points)
    path.write_bytes(points.tobytes()[:-4])
    with pytest.raises(RuntimeError, match=r'points\.pcd\.bin has 196 bytes, not a multiple of 20'):
        load_points(path)
    points[3, 1] = np.nan
    points.tofile(path)
    with pytest.raises(RuntimeError, match=r'points\.pcd\.bin has 1 points with non-finite'):
        load_points(path)
    with pytest.raises(FileNotFoundError, match='missing.pcd.bin not found'):
        load_points(tmp_path / 'missing.pcd.bin')


def test_velocities_follow_the_devkits_box_velocity_in_the_lidar_frame(root: Path) -> None:
    nuscenes = pytest.importorskip('nuscenes')
    annotations = load_table(root, 'sample_annotation')
    timestamps = {record['token']: record['timestamp'] for record in load_table(root, 'sample')}
    by_instance: dict[str, list[dict]] = {}
    for record in annotations:
        by_instance.setdefault(record['instance_token'], []).append(record)
    for records in by_instance.values():
        records.sort(key=lambda record: timestamps[record['sample_token']])
        for previous, following in zip(records, records[1:]):
            previous['next'], following['prev'] = following['token'], previous['token']
    save_table(root, 'sample_annotation', annotations)
    devkit = nuscenes.NuScenes(version=VERSION, dataroot=str(root), verbose=False)
    tables = NuScenesTables(root)
    linked = 0
    for sample_token in tables.sample_tokens():
        ours = tables.annotations(sample_token)
        global2lidar = np.linalg.inv(tables.lidar2global(sample_token))
        for annotation_token, velocity in zip(ours.tokens, ours.velocities):
            expected = global2lidar[:3, :3] @ devkit.box_velocity(annotation_token)
            np.testing.assert_allclose(velocity, expected[:2], atol=1e-9)
            linked += bool(np.isfinite(velocity).all())
    assert linked > 0
