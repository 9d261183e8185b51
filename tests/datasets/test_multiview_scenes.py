"""mv-scenes (tools/dataset_converters/multiview_scenes.py): geometry of the rendered set checked with
independent ray casts and the nuScenes devkit, determinism, atomic writing and the error cases."""
from __future__ import annotations

import json
import math
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

pytest.importorskip('nuscenes', reason='mv-scenes takes scene names and is checked with nuscenes-devkit')

from tests.helpers import load_tool  # noqa: E402
from tests.datasets.mv_scenes_fixture import (TINY_CONFIG, TINY_COUNTS, cast_many, cast_one,  # noqa: E402
                                             independent_scene, replay, sensor_pose)
from vispe.datasets.mv_scenes import (CLASSES, RIG1, RIG2, DatasetExistsError, DegenerateBoxError,  # noqa: E402
                                      EmptySceneError, LayoutConfig, MeshFileError, RenderError, SceneRenderer,
                                      convert, detection_config, load_class_meshes, sample_layout)
from vispe.datasets.mv_scenes import conversion as convert_module  # noqa: E402
from vispe.datasets.mv_scenes.layout import footprint, footprints_overlap, place_object  # noqa: E402
from vispe.datasets.mv_scenes.meshes import CLASS_MESHES, ClassMesh, load_mesh, mesh_roots  # noqa: E402
from vispe.datasets.mv_scenes.rigs import calibrate, quaternion_matrix  # noqa: E402
from vispe.geometry import Cameras, box_corners  # noqa: E402
from nuscenes import NuScenes  # noqa: E402
from nuscenes.eval.detection.evaluate import DetectionEval  # noqa: E402
from nuscenes.utils.geometry_utils import points_in_box  # noqa: E402
from nuscenes.utils.splits import create_splits_scenes  # noqa: E402
from pyquaternion import Quaternion  # noqa: E402

SCHEMA = {  # the devkit's fields (docs/schema_nuscenes.md of nuscenes-devkit)
    'attribute': {'token', 'name', 'description'},
    'calibrated_sensor': {'token', 'sensor_token', 'translation', 'rotation', 'camera_intrinsic'},
    'category': {'token', 'name', 'description', 'index'},
    'ego_pose': {'token', 'translation', 'rotation', 'timestamp'},
    'instance': {'token', 'category_token', 'nbr_annotations', 'first_annotation_token', 'last_annotation_token'},
    'log': {'token', 'logfile', 'vehicle', 'date_captured', 'location'},
    'map': {'token', 'log_tokens', 'category', 'filename'},
    'sample': {'token', 'timestamp', 'scene_token', 'next', 'prev'},
    'sample_annotation': {'token', 'sample_token', 'instance_token', 'attribute_tokens', 'visibility_token',
                          'translation', 'size', 'rotation', 'num_lidar_pts', 'num_radar_pts', 'next', 'prev'},
    'sample_data': {'token', 'sample_token', 'ego_pose_token', 'calibrated_sensor_token', 'filename', 'fileformat',
                    'width', 'height', 'timestamp', 'is_key_frame', 'next', 'prev'},
    'scene': {'token', 'name', 'description', 'log_token', 'nbr_samples', 'first_sample_token', 'last_sample_token'},
    'sensor': {'token', 'channel', 'modality'},
    'visibility': {'token', 'level', 'description'},
}
TINY = dict(train=1, val=1, test=0, config=replace(TINY_CONFIG, image_size=(16, 24)), progress=False)


@pytest.fixture(scope='module')
def meshes():
    return load_class_meshes()


@pytest.fixture(scope='module')
def tiny_root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('mv') / 'mv-scenes'
    convert(root, TINY_COUNTS['train'], TINY_COUNTS['val'], TINY_COUNTS['test'], config=TINY_CONFIG, progress=False)
    return root


@pytest.fixture(scope='module')
def nusc(tiny_root):
    return NuScenes('v1.0-trainval', str(tiny_root), verbose=False)


def test_tables_have_the_devkit_schema_and_load(tiny_root, nusc):
    for table, fields in SCHEMA.items():
        records = json.loads((tiny_root / 'v1.0-trainval' / f'{table}.json').read_text())
        assert all(set(record) == fields for record in records), table
        assert all(re.fullmatch('[0-9a-f]{32}', r['token']) for r in records) or table == 'visibility'
    assert len(nusc.sample) == 4 and len(nusc.sample_data) == 28 and len(nusc.sample_annotation) >= 4
    splits = json.loads((tiny_root / 'splits.json').read_text())
    assert splits == json.loads((tiny_root / 'v1.0-trainval' / 'splits.json').read_text())
    devkit = create_splits_scenes()
    assert splits == {'train': devkit['train'][:2], 'val': devkit['val'][:1], 'test-rig1': devkit['test'][:1]}
    descriptions = {scene['name']: scene['description'] for scene in nusc.scene}
    assert 'rig2' in descriptions[splits['val'][0]] and 'rig1' in descriptions[splits['test-rig1'][0]]
    assert sorted({c['name'] for c in nusc.category}) == sorted(spec.category for spec in CLASS_MESHES)
    for sample in nusc.sample:
        assert sample['timestamp'] > 1.6e15 and len(sample['data']) == 7
        for channel, token in sample['data'].items():
            record = nusc.get('sample_data', token)
            assert (tiny_root / record['filename']).is_file()
            if channel.startswith('CAM'):
                assert Image.open(tiny_root / record['filename']).size == (80, 45)


def test_dense_depth_equals_an_independent_cast_of_each_pixel_ray(tiny_root, nusc, meshes):
    rng = np.random.default_rng(0)
    on_objects = 0
    for sample in nusc.sample:
        replayed = replay(tiny_root, nusc, sample['token'], meshes)
        scene = independent_scene(replayed.objects, replayed.ground_z)
        vertices = np.concatenate([item.vertices for item in replayed.objects])
        for channel in [c for c in sample['data'] if c.startswith('CAM')]:
            record = nusc.get('sample_data', sample['data'][channel])
            intrinsics = np.array(nusc.get('calibrated_sensor', record['calibrated_sensor_token'])['camera_intrinsic'])
            cam2lidar = np.linalg.inv(replayed.lidar2ego) @ sensor_pose(nusc, record)
            depth = np.asarray(Image.open(tiny_root / 'depth' / channel / f'{Path(record["filename"]).stem}.png'))
            assert depth.dtype == np.uint16 and depth.shape == (45, 80)
            # pixels: random ones, and ones onto which object vertices project
            camera_points = (vertices - cam2lidar[:3, 3]) @ cam2lidar[:3, :3]
            front = camera_points[camera_points[:, 2] > 0.1]
            projected = np.round(front @ intrinsics.T / front[:, 2:]).astype(int)[:, :2]
            projected = projected[(projected >= 0).all(1) & (projected < (80, 45)).all(1)]
            pixels = np.concatenate([rng.integers((0, 0), (80, 45), (8, 2)),
                                     projected[rng.permutation(len(projected))[:8]]])
            lidar2cam = torch.from_numpy(np.linalg.inv(cam2lidar)).float()[None, None]
            cameras = Cameras(torch.from_numpy(intrinsics).float()[None, None], lidar2cam, (45, 80))
            for u, v in pixels:
                direction = cam2lidar[:3, :3] @ np.linalg.solve(intrinsics, [u, v, 1.0])
                t, geometry = cast_one(scene, cam2lidar[:3, 3], direction)
                expected = t if geometry >= 0 and t <= TINY_CONFIG.max_depth else 0.0
                assert abs(depth[v, u] / 1000 - expected) <= 1e-3, (channel, u, v, geometry)
                on_objects += geometry > 0
                if expected > 0:
                    point = cameras.unproject(torch.tensor([[[u, v]]], dtype=torch.float32),
                                              torch.tensor([[depth[v, u] / 1000]]))[0, 0, 0]
                    hit = cam2lidar[:3, 3] + t * direction
                    assert np.abs(point.numpy() - hit).max() < 2e-3
                    pixel, z = cameras.project(point[None, None])
                    assert torch.allclose(pixel[0, 0, 0], torch.tensor([u, v], dtype=torch.float32), atol=1e-2)
    assert on_objects >= 20


def test_boxes_are_tight_and_contain_their_objects_lidar_points(tiny_root, nusc, meshes):
    for sample in nusc.sample:
        replayed = replay(tiny_root, nusc, sample['token'], meshes)
        record = nusc.get('sample_data', sample['data']['LIDAR_TOP'])
        points = np.fromfile(tiny_root / record['filename'], np.float32).reshape(-1, 5)
        assert len(points) > 1000 and set(np.unique(points[:, 4]).astype(int)) <= set(range(32))
        _, boxes, _ = nusc.get_sample_data(record['token'])          # devkit: global -> lidar frame
        assert len(boxes) == len(replayed.objects)
        scene = independent_scene(replayed.objects, replayed.ground_z)
        ranges = np.linalg.norm(points[:, :3].astype(np.float64), axis=1)
        rays = np.concatenate([np.zeros((len(points), 3)), points[:, :3] / ranges[:, None]], 1)
        t, owner = cast_many(scene, rays)                    # each point lies on the geometry its ray hits
        assert (owner >= 0).all() and np.abs(t - ranges).max() < 1e-3
        for number, (box, item) in enumerate(zip(boxes, replayed.objects), start=1):
            # the devkit's box (from the global tables) is the tight box of the object's vertices
            yaw = box.orientation.yaw_pitch_roll[0]
            ours = torch.tensor([*box.center, box.wlh[1], box.wlh[0], box.wlh[2], yaw], dtype=torch.float64)
            local = (torch.from_numpy(item.vertices) - ours[:3]) @ torch.tensor(
                [[math.cos(yaw), -math.sin(yaw), 0], [math.sin(yaw), math.cos(yaw), 0], [0, 0, 1]], dtype=torch.float64)
            half = ours[3:6] / 2
            assert (local.abs() <= half + 1e-6).all() and torch.allclose(local.abs().amax(0), half, atol=1e-6)
            corners = box_corners(ours)
            assert torch.allclose(corners.amin(0)[2], torch.tensor(replayed.ground_z, dtype=torch.float64))
            inside = points_in_box(box, points[:, :3].T, wlh_factor=1.01)
            own = owner == number
            assert inside[own].all()
            assert (inside & (owner > 0) & ~own).sum() <= 0.02 * max(own.sum(), 1)
            annotation = nusc.get('sample_annotation', box.token)
            assert abs(annotation['num_lidar_pts'] - own.sum()) <= max(1, 0.02 * own.sum())
            assert nusc.get('category', nusc.get('instance', annotation['instance_token'])['category_token'])[
                'name'] == CLASS_MESHES[item.label].category


@pytest.mark.parametrize('split', ['val', 'test-rig1'])
def test_devkit_detection_eval_of_the_true_boxes_gives_map_1(tiny_root, nusc, meshes, split, tmp_path):
    names = json.loads((tiny_root / 'splits.json').read_text())[split]
    detection = {spec.category: spec.name for spec in CLASS_MESHES}
    results = {}
    for sample in nusc.sample:
        if nusc.get('scene', sample['scene_token'])['name'] not in names:
            continue
        replayed = replay(tiny_root, nusc, sample['token'], meshes)
        record = nusc.get('sample_data', sample['data']['LIDAR_TOP'])
        ego = nusc.get('ego_pose', record['ego_pose_token'])
        lidar2global = Quaternion(ego['rotation']).transformation_matrix @ replayed.lidar2ego
        lidar2global[:3, 3] += ego['translation']
        results[sample['token']] = []
        for item, token in zip(replayed.objects, sample['anns']):   # predictions from the replayed layout
            if nusc.get('sample_annotation', token)['num_lidar_pts'] == 0:
                continue                                              # the devkit drops such ground truth
            x, y, z, length, width, height, yaw = item.box
            rotation = Quaternion(axis=[0, 0, 1], angle=yaw + math.atan2(lidar2global[1, 0], lidar2global[0, 0]))
            results[sample['token']].append(dict(
                sample_token=sample['token'], translation=(lidar2global @ [x, y, z, 1])[:3].tolist(),
                size=[width, length, height], rotation=rotation.elements.tolist(), velocity=[0.0, 0.0],
                detection_name=detection[CLASS_MESHES[item.label].category], detection_score=0.9, attribute_name=''))
    path = tmp_path / 'results.json'
    path.write_text(json.dumps(dict(meta=dict(use_camera=True, use_lidar=False, use_radar=False, use_map=False,
                                              use_external=False), results=results)))
    present = sorted({box['detection_name'] for boxes in results.values() for box in boxes})
    assert len(present) >= 2                      # a class without ground truth would count as AP 0
    config = detection_config(present)
    metrics, _ = DetectionEval(nusc, config, str(path), split, str(tmp_path), verbose=False).evaluate()
    summary = metrics.serialize()
    assert summary['mean_ap'] == pytest.approx(1.0)
    for error in ('trans_err', 'scale_err', 'orient_err'):
        assert summary['tp_errors'][error] < 1e-4
    assert summary['tp_errors']['vel_err'] == 1.0 and summary['tp_errors']['attr_err'] == 1.0  # no velocity/attributes
    assert summary['nd_score'] == pytest.approx(0.8)


def test_same_seed_gives_identical_files(tiny_root, tmp_path):
    again = tmp_path / 'again'
    convert(again, TINY_COUNTS['train'], TINY_COUNTS['val'], TINY_COUNTS['test'], config=TINY_CONFIG, progress=False)
    files = sorted(p.relative_to(tiny_root) for p in tiny_root.rglob('*') if p.is_file())
    assert files == sorted(p.relative_to(again) for p in again.rglob('*') if p.is_file())
    assert all((tiny_root / f).read_bytes() == (again / f).read_bytes() for f in files)
    other = tmp_path / 'other'
    convert(other, 1, 1, 0, config=replace(TINY_CONFIG, seed=4), progress=False)
    assert sorted(p.name for p in (other / 'samples' / 'CAM_FRONT').iterdir()) != sorted(
        p.name for p in (tiny_root / 'samples' / 'CAM_FRONT').iterdir())


@pytest.mark.slow
def test_worker_processes_write_the_same_files(tiny_root, tmp_path):
    parallel = tmp_path / 'parallel'
    convert(parallel, TINY_COUNTS['train'], TINY_COUNTS['val'], TINY_COUNTS['test'], config=TINY_CONFIG, workers=2,
            progress=False)
    files = sorted(p.relative_to(tiny_root) for p in tiny_root.rglob('*') if p.is_file())
    assert files == sorted(p.relative_to(parallel) for p in parallel.rglob('*') if p.is_file())
    assert all((tiny_root / f).read_bytes() == (parallel / f).read_bytes() for f in files)


def test_interrupted_conversion_leaves_no_root_and_a_rerun_starts_clean(tmp_path, monkeypatch):
    root, partial = tmp_path / 'mv', tmp_path / 'mv.partial'
    calls = []
    real = convert_module.render_task

    def failing(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(convert_module, 'render_task', failing)
    with pytest.raises(KeyboardInterrupt):
        convert(root, **TINY)
    assert not root.exists() and not partial.exists()
    monkeypatch.setattr(convert_module, 'render_task', real)
    partial.mkdir()                                     # as a killed run leaves it
    (partial / convert_module.PARTIAL_MARKER).write_text('')
    (partial / 'half-written.jpg').write_text('')
    convert(root, **TINY)
    assert not partial.exists() and not (root / 'half-written.jpg').exists()
    assert not (root / convert_module.PARTIAL_MARKER).exists() and (root / 'v1.0-trainval' / 'sample.json').is_file()
    with pytest.raises(DatasetExistsError, match='--overwrite'):
        convert(root, **TINY)
    convert(root, **TINY, overwrite=True)
    foreign = tmp_path / 'foreign.partial'
    foreign.mkdir()
    with pytest.raises(DatasetExistsError, match='not left by an mv-scenes conversion'):
        convert(tmp_path / 'foreign', **TINY)


def _no_output(tmp_path: Path) -> bool:
    return not any(tmp_path.iterdir())


def test_nan_camera_is_refused_naming_scene_and_camera(tmp_path, monkeypatch, meshes):
    real = convert_module.calibrate

    def broken(mount, image_size):
        calibration = real(mount, image_size)
        if mount.channel == 'CAM_BACK':
            calibration.intrinsics[0, 0] = np.nan
        return calibration

    monkeypatch.setattr(convert_module, 'calibrate', broken)
    with pytest.raises(RenderError, match=r'train scene scene-\d+ sample 0 CAM_BACK.*NaN'):
        convert(tmp_path / 'mv', **TINY)
    assert _no_output(tmp_path)
    objects = sample_layout(np.random.default_rng(0), meshes, -1.84)
    renderer = SceneRenderer(objects, -1.84, np.eye(4))
    calibration = calibrate(RIG1.cameras[0], (8, 8))
    with pytest.raises(RenderError, match='scene-x CAM_FRONT.*singular'):
        renderer.render_camera(calibration.intrinsics * [[0], [1], [1]], np.eye(4), (8, 8), 60.0, 'scene-x CAM_FRONT')


def test_zero_size_boxes_are_refused(tmp_path, monkeypatch, meshes):
    flat = tmp_path / 'flat.obj'
    flat.write_text('v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 0\nf 1 2 3\nf 2 4 3\n')
    spec = ClassMesh('car', 'vehicle.car', 'assimp-testmodels', 'flat.obj', '+x', '+z', 'length', 4.0)
    with pytest.raises(DegenerateBoxError, match='flat.obj.*zero side'):
        load_mesh(spec, flat)
    with pytest.raises(DegenerateBoxError, match='below 0.001 m'):
        place_object(meshes[0], 0, 1e-6, 0.0, (5.0, 0.0), -1.84, np.ones(3))
    real_layout = convert_module.sample_layout

    def tiny_objects(rng, meshes_, ground_z, config):
        return [place_object(meshes_[0], 0, 1e-6, 0.0, (5.0, 0.0), ground_z, np.ones(3))] + real_layout(
            rng, meshes_, ground_z, config)

    monkeypatch.setattr(convert_module, 'sample_layout', tiny_objects)
    output = tmp_path / 'out'
    output.mkdir()
    with pytest.raises(DegenerateBoxError, match=r'train scene scene-\d+ sample 0: .*below'):
        convert(output / 'mv', **TINY)
    assert _no_output(output)


def test_empty_scene_is_redrawn_then_refused(tmp_path, monkeypatch, meshes):
    calls = []

    def hidden(rng, meshes_, ground_z, config):
        calls.append(1)
        if len(calls) % 2:
            return []                                                    # no object placed
        item = place_object(meshes_[1], 1, 1.0, 0.0, (10.0, 0.0), ground_z - 10.0, np.ones(3))   # under ground
        return [item]

    monkeypatch.setattr(convert_module, 'sample_layout', hidden)
    with pytest.raises(EmptySceneError, match=r'train scene scene-\d+ sample 0: every one of 11 layouts'):
        convert(tmp_path / 'mv', **TINY)
    assert len(calls) == 11 and _no_output(tmp_path)


def test_missing_meshes_name_the_path_and_the_install_command(tmp_path):
    with pytest.raises(MeshFileError, match=r'models-absent/OBJ/WusonOBJ.obj.*apt-get install assimp-testmodels'):
        load_class_meshes(roots={'pymeshlab': tmp_path, 'assimp-testmodels': tmp_path / 'assimp/models-absent'})
    with pytest.raises(MeshFileError, match='pip install pymeshlab'):
        load_class_meshes(CLASS_MESHES[1:2], roots={'pymeshlab': None, 'assimp-testmodels': tmp_path})
    with pytest.raises(MeshFileError, match=r'cow.obj.*pip install pymeshlab'):
        convert(tmp_path / 'mv', **TINY, roots={**mesh_roots(), 'pymeshlab': tmp_path})
    assert not (tmp_path / 'mv').exists() and not (tmp_path / 'mv.partial').exists()


def test_layouts_rest_on_the_ground_without_overlap(meshes):
    config = LayoutConfig()
    for seed in range(20):
        objects = sample_layout(np.random.default_rng(seed), meshes, -1.84, config)
        assert config.min_objects <= len(objects) <= config.max_objects
        rectangles = [footprint(item.box) for item in objects]
        for i, item in enumerate(objects):
            assert item.vertices[:, 2].min() == pytest.approx(-1.84)
            assert config.min_distance <= np.hypot(*item.box[:2]) <= config.max_distance
            assert not any(footprints_overlap(rectangles[i], other) for other in rectangles[i + 1:])
            scale = item.box[3:6] / meshes[item.label].size
            assert np.allclose(scale, scale[0]) and 0.85 <= scale[0] <= 1.15


def _hue(rgb: np.ndarray) -> float:
    """Hue in [0, 1) of an RGB colour (HSV)."""
    high, low = rgb.max(), rgb.min()
    red, green, blue = rgb
    if high == red:
        sector = ((green - blue) / (high - low)) % 6
    elif high == green:
        sector = (blue - red) / (high - low) + 2
    else:
        sector = (red - green) / (high - low) + 4
    return sector / 6


def test_class_hues_put_each_class_in_its_own_band_and_can_be_switched_off(meshes):
    config = LayoutConfig(min_objects=6, max_objects=6)
    labels, distances = [], []
    for seed in range(30):
        for item in sample_layout(np.random.default_rng(seed), meshes, -1.84, config):
            offset = (_hue(item.albedo) - item.label / len(meshes) + 0.5) % 1 - 0.5     # signed, on the circle
            labels.append(item.label)
            distances.append(abs(offset))
    assert set(labels) == set(range(len(meshes))) and max(distances) <= config.hue_band / 2 + 1e-9
    free = [_hue(item.albedo) for seed in range(30) for item in
            sample_layout(np.random.default_rng(seed), meshes, -1.84, replace(config, class_hues=False))]
    assert max(free) - min(free) > 0.8
    with pytest.raises(ValueError, match=r'hue_band must lie in \(0, 1 / classes = 0.200\]'):
        sample_layout(np.random.default_rng(0), meshes, -1.84, replace(config, hue_band=0.3))


def test_rigs_cover_every_bearing_and_rig2_is_outside_the_training_jitter():
    for rig in (RIG1, RIG2):
        bearings = np.deg2rad(np.arange(0, 360, 0.5))
        rays = np.stack([np.cos(bearings), np.sin(bearings), np.zeros_like(bearings)], 1)
        seen = np.zeros(len(bearings), bool)
        for mount in rig.cameras:
            calibration = calibrate(mount, (180, 320))
            camera = rays @ quaternion_matrix(calibration.rotation)          # ego direction -> camera frame
            pixels = camera @ calibration.intrinsics.T
            u = pixels[:, 0] / np.maximum(camera[:, 2], 1e-9)
            seen |= (camera[:, 2] > 0) & (u >= -0.5) & (u <= 319.5)
        assert seen.all(), rig.name
    jitter = RIG1.jitter
    for first, second in zip(RIG1.cameras, RIG2.cameras):
        assert first.channel == second.channel
        assert abs((second.yaw - first.yaw + 180) % 360 - 180) > 2 * jitter.yaw
        assert second.translation[2] - first.translation[2] > 2 * jitter.height
        assert abs(second.focal / first.focal - 1) > jitter.focal


def test_cli_writes_a_set_and_reports_its_size(tmp_path, capsys):
    main = load_tool('dataset_converters/multiview_scenes').main
    root = tmp_path / 'cli'
    arguments = ['--root', str(root), '--train', '1', '--val', '1', '--test', '0', '--image-size', '16', '24',
                 '--lidar-azimuths', '90', '--workers', '1', '--quiet']
    assert main(arguments) == 0
    assert 'MiB in' in capsys.readouterr().out
    assert main(arguments) == 2
    assert 'already exists: pass --overwrite' in capsys.readouterr().err
    assert json.loads((root / 'mv-scenes.json').read_text())['command'].endswith('--quiet')
    assert CLASSES == tuple(spec.name for spec in CLASS_MESHES)
