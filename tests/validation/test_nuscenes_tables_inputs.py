"""nuScenes-format tables whose mistakes would silently drop data: a renamed camera channel (its view missing from
every sample), a renamed category (its boxes never targets), unknown channels asked for, and records that refer to
samples or scenes that do not exist or repeat a key frame. Each warns or raises naming the file, the value seen and
the fix."""
from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from vispe.datasets import MultiViewDetection
from vispe.datasets.nuscenes_tables import CAMERA_CHANNELS, NuScenesTables

from ..datasets.nuscenes_fixture import load_table, save_table, token, write_nuscenes


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return write_nuscenes(tmp_path / 'root')


def rename(root: Path, table: str, key: str, old: str, new: str) -> None:
    records = load_table(root, table)
    for record in records:
        if record[key] == old:
            record[key] = new
    save_table(root, table, records)


def dataset(root: Path) -> MultiViewDetection:
    return MultiViewDetection(str(root), split='train', classes=('car', 'pedestrian'), image_size=(32, 64))


def no_user_warnings(build) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter('error', UserWarning)
        build()


@pytest.mark.parametrize('old, new, hint', [
    ('CAM_BACK', 'cam_back', r"'cam_back' -> 'CAM_BACK'"),
    ('CAM_FRONT_LEFT', 'CAM_FRONT_LFT', r"'CAM_FRONT_LFT' -> 'CAM_FRONT_LEFT'"),
    ('CAM_BACK_RIGHT', 'REAR_CAMERA', r'case-sensitive\)'),
])
def test_a_renamed_camera_channel_is_warned_about(root: Path, old: str, new: str, hint: str) -> None:
    rename(root, 'sensor', 'channel', old, new)
    with pytest.warns(UserWarning, match=rf"sensor\.json has camera channels \['{new}'\], which are not nuScenes "
                                         rf"channels, and no \['{old}'\]: .* every sample lacks the view\(s\) "
                                         rf"\['{old}'\]\. Rename the channels in sensor\.json .*{hint}"):
        data = dataset(root)
    assert not data[0]['data_samples']['view_valid'][CAMERA_CHANNELS.index(old)]


def test_a_missing_camera_without_a_stand_in_is_warned_about(root: Path) -> None:
    save_table(root, 'sensor', [r for r in load_table(root, 'sensor') if r['channel'] != 'CAM_BACK'])
    save_table(root, 'calibrated_sensor', [r for r in load_table(root, 'calibrated_sensor')
                                           if r['sensor_token'] != token('sensor', 'CAM_BACK')])
    save_table(root, 'sample_data', [r for r in load_table(root, 'sample_data')
                                     if r['calibrated_sensor_token'] != token('calib', 'CAM_BACK')])
    with pytest.warns(UserWarning, match=r"sensor\.json has no \['CAM_BACK'\]: .*case-sensitive\), or ignore this "
                                         r'warning if the rig has no such camera'):
        dataset(root)


def test_the_six_cameras_and_a_lidar_only_table_load_without_a_warning(root: Path) -> None:
    no_user_warnings(lambda: dataset(root))
    save_table(root, 'sensor', [r for r in load_table(root, 'sensor') if r['channel'] == 'LIDAR_TOP'])
    save_table(root, 'calibrated_sensor', [r for r in load_table(root, 'calibrated_sensor')
                                           if r['sensor_token'] == token('sensor', 'LIDAR_TOP')])
    save_table(root, 'sample_data', [r for r in load_table(root, 'sample_data')
                                     if r['calibrated_sensor_token'] == token('calib', 'LIDAR_TOP')])
    no_user_warnings(lambda: NuScenesTables(root))  # the metric reads boxes and poses only


def test_channels_asked_for_must_exist(root: Path) -> None:
    tables = NuScenesTables(root)
    first = tables.sample_tokens()[0]
    with pytest.raises(ValueError, match=r"channels \['CAM_FRONT_WIDE'\] are not in .*sensor\.json \(its channels: "
                                         r"\['CAM_BACK', .*'LIDAR_TOP'\]\); pass channels from those"):
        tables.camera_frames(first, ['CAM_FRONT', 'CAM_FRONT_WIDE'])
    with pytest.raises(ValueError, match=r"channels \['cam_front'\]"):
        tables.lidar2cam(first, ['cam_front'])
    with pytest.raises(TypeError, match=r"got the string 'CAM_FRONT'; pass \['CAM_FRONT'\]"):
        tables.camera_frames(first, 'CAM_FRONT')
    assert tables.camera_frames(first, ['LIDAR_TOP'])[0].channel == 'LIDAR_TOP'


@pytest.mark.parametrize('new, hint', [
    ('car', r"'car' -> 'vehicle\.car'"),
    ('Vehicle.Car', r"'Vehicle\.Car' -> 'vehicle\.car'"),
    ('vehicle.carr', r"'vehicle\.carr' -> 'vehicle\.car'"),
])
def test_a_renamed_category_is_warned_about(root: Path, new: str, hint: str) -> None:
    rename(root, 'category', 'name', 'vehicle.car', new)
    with pytest.warns(UserWarning, match=rf"category\.json has categories \['{new}'\] that are not nuScenes "
                                         rf'categories: their boxes get no detection name and are left out of '
                                         rf'training and evaluation\. Rename them to the nuScenes categories '
                                         rf"\({hint}\); those with a detection name are \['human"):
        tables = NuScenesTables(root)
    assert None in tables.annotations(tables.sample_tokens()[0]).detection_names


def test_nuscenes_categories_without_a_detection_name_are_known(root: Path) -> None:
    rename(root, 'category', 'name', 'movable_object.barrier', 'static_object.bicycle_rack')
    no_user_warnings(lambda: NuScenesTables(root))


def test_two_key_frames_of_one_channel_are_refused(root: Path) -> None:
    records = load_table(root, 'sample_data')
    twin = next(dict(r, token='twin') for r in records if r['calibrated_sensor_token'] == token('calib', 'CAM_FRONT')
                and r['is_key_frame'])
    save_table(root, 'sample_data', records + [twin])
    with pytest.raises(ValueError, match=r'has two key-frame CAM_FRONT records in .*sample_data\.json \(.* and '
                                         r'twin\): a sample has one key frame a sensor; set is_key_frame false'):
        NuScenesTables(root)


@pytest.mark.parametrize('table, key, referrer', [
    ('sample', 'scene_token', 'sample'), ('sample_annotation', 'sample_token', 'sample_annotation'),
    ('sample_data', 'sample_token', 'sample_data'),
])
def test_records_referring_to_missing_samples_or_scenes_are_refused(root: Path, table: str, key: str,
                                                                    referrer: str) -> None:
    records = load_table(root, table)
    target = 'scene' if key == 'scene_token' else 'sample'
    broken = next(r for r in reversed(records) if r.get('is_key_frame', True))  # sweeps are never read
    broken[key] = 'gone'
    save_table(root, table, records)
    with pytest.raises(ValueError, match=rf"{referrer} {broken['token']} refers to {target} token 'gone', which "
                                         rf'is not in .*{target}\.json: the tables are inconsistent'):
        NuScenesTables(root)
