"""NuScenesMetric on tiny nuScenes-format tables: vispe's numbers, the devkit's DetectionEval beside them, the
submission json and the errors."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from vispe.evaluation.nuscenes_metric import NuScenesMetric
from vispe.registry import METRICS

CLASSES = ('car', 'pedestrian', 'bicycle', 'traffic_cone', 'barrier')
VERSION = 'v1.0-trainval'
# LIDAR_TOP mounted as on the nuScenes car: 0.94 m ahead, 1.84 m up, turned -90 degrees about z.
LIDAR_TRANSLATION, LIDAR_YAW = (0.943713, 0.0, 1.84023), -math.pi / 2
# Boxes in each sample's lidar frame: (category, (x, y, z, l, w, h, yaw), num_lidar_pts). scene-0003 and
# scene-0012 are devkit 'val' scenes, scene-0001 a 'train' scene.
SCENES = {
    'scene-0003': [
        [('vehicle.car', (10, 0, 0, 4.5, 1.9, 1.6, 0.3), 20), ('vehicle.car', (-8, 6, 0.1, 4.2, 1.8, 1.5, 2.0), 12),
         ('human.pedestrian.adult', (5, -7, 0, 0.7, 0.6, 1.8, -1.0), 8),
         ('movable_object.barrier', (12, 8, -0.3, 0.5, 2.0, 1.0, 1.2), 30),
         ('movable_object.trafficcone', (6, 14, -0.5, 0.4, 0.4, 0.8, 0.0), 3),
         ('vehicle.car', (70, 3, 0, 4.5, 1.9, 1.6, 0.0), 2),  # beyond the car range (50 m)
         ('vehicle.car', (-15, -12, 0, 4.5, 1.9, 1.6, 0.5), 0),  # no lidar point
         ('static_object.bicycle_rack', (20, -5, 0, 3.0, 1.5, 1.2, 0.4), 50),
         ('vehicle.bicycle', (20, -5, 0, 1.7, 0.6, 1.2, 0.4), 9),  # parked in the rack
         ('animal', (-3, -20, 0, 1.0, 0.4, 0.8, 0.0), 4)],
        [('vehicle.car', (15, 4, 0, 4.6, 2.0, 1.7, -0.2), 25),
         ('human.pedestrian.adult', (-6, -3, 0, 0.8, 0.7, 1.7, 3.0), 6),
         ('human.pedestrian.child', (-6, 3, 0, 0.5, 0.5, 1.2, 1.4), 5),
         ('vehicle.bicycle', (9, -12, 0, 1.8, 0.6, 1.1, 2.5), 7),
         ('movable_object.trafficcone', (4, 12, -0.5, 0.4, 0.4, 0.8, 0.0), 2)],
    ],
    'scene-0012': [
        [('vehicle.car', (20, -10, 0, 4.4, 1.9, 1.5, 1.0), 40),
         ('movable_object.barrier', (-10, 8, -0.2, 0.6, 2.5, 1.0, -0.4), 11),
         ('human.pedestrian.adult', (3, 15, 0, 0.7, 0.6, 1.8, 0.8), 6)],
    ],
    'scene-0001': [[('vehicle.car', (5, 5, 0, 4.5, 1.9, 1.6, 0.0), 30)]],
}
EGO_POSES = {'scene-0003': [((601.2, 1647.5, 0.0), 0.7), ((604.8, 1650.1, 0.0), 0.72)],
             'scene-0012': [((1210.3, 880.4, 0.0), -2.1)], 'scene-0001': [((400.0, 1100.0, 0.0), 2.9)]}


def _yaw_quaternion(yaw: float) -> list[float]:
    return [math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)]


def _pose(translation, yaw: float) -> np.ndarray:
    matrix = np.eye(4)
    matrix[:2, :2] = [[math.cos(yaw), -math.sin(yaw)], [math.sin(yaw), math.cos(yaw)]]
    matrix[:3, 3] = translation
    return matrix


def write_tables(root: Path) -> dict[str, dict]:
    """Write the devkit's 13 tables (its field names) and a map mask; returns per sample token its lidar2global,
    scene and lidar-frame annotations."""
    tables = {name: [] for name in ('category', 'attribute', 'visibility', 'instance', 'sensor', 'calibrated_sensor',
                                    'ego_pose', 'log', 'scene', 'sample', 'sample_data', 'sample_annotation', 'map')}
    categories = sorted({category for samples in SCENES.values() for sample in samples for category, _, _ in sample})
    tables['category'] = [dict(token=f'cat-{name}', name=name, description='', index=i)
                          for i, name in enumerate(categories)]
    tables['visibility'] = [dict(token='4', level='v80-100', description='visibility of whole object is 80-100%')]
    tables['sensor'] = [dict(token='sensor-lidar', channel='LIDAR_TOP', modality='lidar')]
    tables['calibrated_sensor'] = [dict(token='calib-lidar', sensor_token='sensor-lidar',
                                        translation=list(LIDAR_TRANSLATION), rotation=_yaw_quaternion(LIDAR_YAW),
                                        camera_intrinsic=[])]
    tables['log'] = [dict(token='log-0', logfile='log-0', vehicle='n015', date_captured='2018-07-24',
                          location='singapore-onenorth')]
    tables['map'] = [dict(token='map-0', log_tokens=['log-0'], category='semantic_prior', filename='maps/map-0.png')]
    (root / 'maps').mkdir(parents=True)
    Image.fromarray(np.zeros((4, 4), dtype=np.uint8)).save(root / 'maps' / 'map-0.png')
    lidar2ego = _pose(LIDAR_TRANSLATION, LIDAR_YAW)
    samples, timestamp = {}, 1_532_402_927_647_951
    for scene_index, (scene, scene_samples) in enumerate(SCENES.items()):
        tokens = [f'sample-{scene}-{i}' for i in range(len(scene_samples))]
        tables['scene'].append(dict(token=f'scene-token-{scene_index}', log_token='log-0', nbr_samples=len(tokens),
                                    first_sample_token=tokens[0], last_sample_token=tokens[-1], name=scene,
                                    description=''))
        for i, (token, boxes) in enumerate(zip(tokens, scene_samples)):
            timestamp += 500_000
            translation, yaw = EGO_POSES[scene][i]
            tables['ego_pose'].append(dict(token=f'ego-{token}', timestamp=timestamp,
                                           translation=list(translation), rotation=_yaw_quaternion(yaw)))
            tables['sample'].append(dict(token=token, timestamp=timestamp, scene_token=f'scene-token-{scene_index}',
                                         prev=tokens[i - 1] if i else '',
                                         next=tokens[i + 1] if i + 1 < len(tokens) else ''))
            tables['sample_data'].append(dict(
                token=f'lidar-{token}', sample_token=token, ego_pose_token=f'ego-{token}',
                calibrated_sensor_token='calib-lidar', timestamp=timestamp, fileformat='pcd', is_key_frame=True,
                height=0, width=0, filename=f'samples/LIDAR_TOP/{token}.pcd.bin', prev='', next=''))
            lidar2global = _pose(translation, yaw) @ lidar2ego
            for j, (category, box, points) in enumerate(boxes):
                x, y, z, length, width, height, box_yaw = box
                centre = lidar2global @ np.array([x, y, z, 1.0])
                instance = f'instance-{token}-{j}'
                tables['instance'].append(dict(token=instance, category_token=f'cat-{category}', nbr_annotations=1,
                                               first_annotation_token=f'ann-{token}-{j}',
                                               last_annotation_token=f'ann-{token}-{j}'))
                tables['sample_annotation'].append(dict(
                    token=f'ann-{token}-{j}', sample_token=token, instance_token=instance, visibility_token='4',
                    attribute_tokens=[], translation=centre[:3].tolist(), size=[width, length, height],
                    rotation=_yaw_quaternion(box_yaw + yaw + LIDAR_YAW), prev='', next='', num_lidar_pts=points,
                    num_radar_pts=0))
            samples[token] = dict(lidar2global=lidar2global, scene=scene, boxes=boxes)
    (root / VERSION).mkdir(parents=True)
    for name, records in tables.items():
        (root / VERSION / f'{name}.json').write_text(json.dumps(records))
    return samples


@pytest.fixture(scope='module')
def nuscenes_root(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict]]:
    root = tmp_path_factory.mktemp('nuscenes')
    return root, write_tables(root)


def _val_samples(samples: dict[str, dict]) -> dict[str, dict]:
    return {token: sample for token, sample in samples.items() if sample['scene'] != 'scene-0001'}


def _detections(sample: dict, keep=lambda category, points: True) -> list[tuple[tuple, int]]:
    """(lidar box, label) of the sample's annotations of CLASSES that ``keep`` accepts."""
    names = {'vehicle.car': 'car', 'human.pedestrian.adult': 'pedestrian', 'human.pedestrian.child': 'pedestrian',
             'vehicle.bicycle': 'bicycle', 'movable_object.trafficcone': 'traffic_cone',
             'movable_object.barrier': 'barrier'}
    return [(box, CLASSES.index(names[category])) for category, box, points in sample['boxes']
            if category in names and keep(category, points)]


def _run(metric: NuScenesMetric, samples: dict[str, dict], predict) -> dict[str, float]:
    """Feed one batch per sample through process() as the runner does, then evaluate."""
    for token, sample in samples.items():
        boxes, scores, labels = predict(token, sample)
        data_batch = dict(data_samples=[dict(sample_token=token,
                                             lidar2global=torch.from_numpy(sample['lidar2global']))])
        metric.process(data_batch, [dict(sample_token=token,
                                         boxes_3d=torch.as_tensor(boxes, dtype=torch.float32).reshape(-1, 7),
                                         scores=torch.as_tensor(scores, dtype=torch.float32),
                                         labels_3d=torch.as_tensor(labels, dtype=torch.int64))])
    return metric.evaluate(len(samples))


def _perfect(shift=(0.0, 0.0)):
    def predict(token, sample):
        found = _detections(sample, keep=lambda category, points: points > 0)
        boxes = np.array([box for box, _ in found], dtype=np.float64)
        boxes[:, :2] += shift
        return boxes, np.linspace(0.9, 0.5, len(found)), [label for _, label in found]
    return predict


def test_perfect_predictions_score_one_in_vispe_and_the_devkit(nuscenes_root) -> None:
    root, samples = nuscenes_root
    metric = NuScenesMetric(str(root), classes=CLASSES, use_devkit=True)
    metrics = _run(metric, _val_samples(samples), _perfect())
    assert metrics['nusc/mAP'] == pytest.approx(1.0, abs=1e-12)
    assert metrics['nusc/devkit/mAP'] == pytest.approx(1.0, abs=1e-12)
    # float32 lidar-frame boxes: errors of order 1e-7.
    assert metrics['nusc/NDS'] == pytest.approx(1.0, abs=1e-5)
    assert metrics['nusc/devkit/NDS'] == pytest.approx(1.0, abs=1e-5)
    for key in ('mATE', 'mASE', 'mAOE'):
        assert metrics[f'nusc/{key}'] == pytest.approx(0.0, abs=1e-5)
        assert metrics[f'nusc/devkit/{key}'] == pytest.approx(0.0, abs=1e-5)
    # The devkit's official NDS counts velocity and attribute errors, 1 on static attribute-free ground truth.
    assert metrics['nusc/devkit/NDS_official'] == pytest.approx((5 + 3) / 10, abs=1e-5)


def test_a_0p7_m_shift_gives_the_ap_the_thresholds_imply(nuscenes_root) -> None:
    root, samples = nuscenes_root
    metric = NuScenesMetric(str(root), classes=CLASSES, use_devkit=True)
    # 0.7 m along the lidar x axis: a miss at 0.5 m, a hit at 1, 2 and 4 m, so AP = 3/4 for every class.
    metrics = _run(metric, _val_samples(samples), _perfect(shift=(0.7, 0.0)))
    for name in CLASSES:
        assert metrics[f'nusc/{name}_AP'] == pytest.approx(0.75, abs=1e-9)
    assert metrics['nusc/mAP'] == pytest.approx(0.75, abs=1e-9)
    assert metrics['nusc/mATE'] == pytest.approx(0.7, abs=1e-5)
    assert metrics['nusc/NDS'] == pytest.approx((5 * 0.75 + 0.3 + 1 + 1) / 8, abs=1e-5)
    assert metrics['nusc/devkit/mAP'] == pytest.approx(0.75, abs=1e-9)


def _turned(angle: float):
    def predict(token, sample):
        boxes, scores, labels = _perfect()(token, sample)
        boxes[:, 6] += angle
        return boxes, scores, labels
    return predict


def test_per_class_orientation_errors_and_yaw_symmetry(nuscenes_root) -> None:
    """Boxes turned by a half turn: AOE π for every class with an orientation, 0 for a class declared symmetric
    under a half turn; cones (no AOE) have no ``_AOE`` key; the devkit keeps its own rules."""
    root, samples = nuscenes_root
    metrics = _run(NuScenesMetric(str(root), classes=CLASSES, use_devkit=False), _val_samples(samples),
                   _turned(math.pi))
    oriented = [name for name in CLASSES if name not in ('traffic_cone', 'barrier')]
    for name in oriented:
        assert metrics[f'nusc/{name}_AOE'] == pytest.approx(math.pi, abs=1e-4)
    assert 'nusc/traffic_cone_AOE' not in metrics
    symmetric = NuScenesMetric(str(root), classes=CLASSES, use_devkit=False, yaw_symmetry={oriented[0]: 2})
    metrics = _run(symmetric, _val_samples(samples), _turned(math.pi))
    assert metrics[f'nusc/{oriented[0]}_AOE'] == pytest.approx(0.0, abs=1e-4)
    with pytest.raises(ValueError, match='not nuScenes detection names'):
        NuScenesMetric(str(root), classes=CLASSES, yaw_symmetry={'spider': 4})


def _random_predictions(seed: int):
    rng = np.random.default_rng(seed)

    def predict(token, sample):
        found = [(box, label) for box, label in _detections(sample) if rng.random() < 0.8]
        found += [(box, label) for box, label in found if rng.random() < 0.25]  # duplicates
        boxes = np.array([box for box, _ in found], dtype=np.float64).reshape(-1, 7)
        boxes[:, :2] += rng.normal(0, 0.7, (len(boxes), 2))
        boxes[:, 3:6] *= rng.uniform(0.7, 1.3, (len(boxes), 3))
        boxes[:, 6] += rng.normal(0, 0.3, len(boxes)) + np.where(rng.random(len(boxes)) < 0.2, math.pi, 0)
        false = int(rng.integers(1, 4))
        false_boxes = np.concatenate([rng.uniform(-35, 35, (false, 2)), np.zeros((false, 1)),
                                      rng.uniform(0.5, 4, (false, 3)), rng.uniform(-3, 3, (false, 1))], 1)
        labels = [label for _, label in found] + list(rng.integers(0, len(CLASSES), false))
        return np.concatenate([boxes, false_boxes]), rng.random(len(labels)), labels
    return predict


def test_vispe_equals_the_devkit_detection_eval(nuscenes_root, tmp_path: Path) -> None:
    pytest.importorskip('nuscenes.eval.detection.evaluate')
    from vispe.evaluation.nuscenes_devkit import run_detection_eval
    root, samples = nuscenes_root
    metric = NuScenesMetric(str(root), classes=CLASSES, use_devkit=True, outfile_prefix=str(tmp_path / 'results'))
    metrics = _run(metric, _val_samples(samples), _random_predictions(0))
    assert 0.1 < metrics['nusc/mAP'] < 0.9
    keys = ['mAP', 'NDS', 'mATE', 'mASE', 'mAOE'] + [f'{name}_AP' for name in CLASSES]
    for key in keys:
        assert metrics[f'nusc/{key}'] == pytest.approx(metrics[f'nusc/devkit/{key}'], abs=1e-6), key
    # The same numbers straight from the devkit's DetectionEval on the written submission.
    devkit = run_detection_eval(root, VERSION, 'val', tmp_path / 'results.json', CLASSES, required=True)
    assert devkit.method == 'DetectionEval'
    assert devkit.mean_ap == pytest.approx(metrics['nusc/mAP'], abs=1e-6)
    assert devkit.tp_errors['orient_err'] == pytest.approx(metrics['nusc/mAOE'], abs=1e-6)


def test_scene_list_split_uses_the_devkit_accumulate_path(nuscenes_root, tmp_path: Path) -> None:
    pytest.importorskip('nuscenes.eval.detection.evaluate')
    root, samples = nuscenes_root
    one_scene = {token: sample for token, sample in samples.items() if sample['scene'] == 'scene-0003'}
    metric = NuScenesMetric(str(root), split=['scene-0003'], classes=CLASSES, use_devkit=True)
    metrics = _run(metric, one_scene, _random_predictions(1))
    for key in ('mAP', 'NDS', 'mATE', 'mASE', 'mAOE'):
        assert metrics[f'nusc/{key}'] == pytest.approx(metrics[f'nusc/devkit/{key}'], abs=1e-6), key


def test_format_only_writes_a_submission_the_devkit_loads(nuscenes_root, tmp_path: Path) -> None:
    pytest.importorskip('nuscenes.eval.detection.evaluate')
    from nuscenes.eval.common.loaders import load_prediction
    from nuscenes.eval.detection.data_classes import DetectionBox
    root, samples = nuscenes_root
    metric = NuScenesMetric(str(root), classes=CLASSES, format_only=True, outfile_prefix=str(tmp_path / 'sub' / 'res'))
    val = _val_samples(samples)
    assert _run(metric, val, _perfect()) == {}
    path = tmp_path / 'sub' / 'res.json'
    assert sorted(p.name for p in path.parent.iterdir()) == ['res.json']  # no temporary file left
    boxes, meta = load_prediction(str(path), 500, DetectionBox)
    assert meta['use_camera'] and not meta['use_lidar']
    assert list(boxes.sample_tokens) == list(val)
    token = next(iter(val))
    first = json.loads(path.read_text())['results'][token][0]
    assert sorted(first) == ['attribute_name', 'detection_name', 'detection_score', 'rotation', 'sample_token', 'size',
                             'translation', 'velocity']
    # The highest-scoring box is the first car of the sample, back in the global frame with (w, l, h) sizes.
    x, y, z, length, width, height, yaw = val[token]['boxes'][0][1]
    assert first['translation'] == pytest.approx((val[token]['lidar2global'] @ [x, y, z, 1])[:3].tolist(), abs=1e-4)
    assert first['size'] == pytest.approx([width, length, height], abs=1e-6)
    assert first['velocity'] == [0.0, 0.0] and first['detection_name'] == 'car'


def test_errors_name_the_problem(nuscenes_root) -> None:
    root, samples = nuscenes_root
    val = _val_samples(samples)
    metric = NuScenesMetric(str(root), classes=CLASSES, use_devkit=False)
    first = dict(list(val.items())[:1])
    with pytest.raises(ValueError,
                       match=r"2 of the 3 samples of split 'val' have no predictions .*sample-scene-0003-1"):
        _run(metric, first, _perfect())
    with pytest.raises(ValueError, match=r"unknown: \['lorry'\]"):
        NuScenesMetric(str(root), classes=('car', 'lorry'))
    with pytest.raises(ValueError, match='not finite'):
        _run(NuScenesMetric(str(root), classes=CLASSES), first,
             lambda token, sample: ([[1, 2, float('nan'), 4, 2, 1.5, 0]], [0.5], [0]))
    with pytest.raises(ValueError, match='labels_3d must index classes'):
        _run(NuScenesMetric(str(root), classes=CLASSES), first,
             lambda token, sample: ([[1, 2, 0, 4, 2, 1.5, 0]], [0.5], [7]))
    with pytest.raises(ValueError, match='outfile_prefix'):
        NuScenesMetric(str(root), format_only=True)
    with pytest.raises(ValueError, match='velocity and attribute errors do not apply'):
        NuScenesMetric(str(root), tp_metrics=('trans_err', 'vel_err'))


def test_registered_and_devkit_keys_absent_without_devkit(nuscenes_root) -> None:
    root, samples = nuscenes_root
    metric = METRICS.build(dict(type='NuScenesMetric', data_root=str(root), classes=CLASSES, use_devkit=False))
    metrics = _run(metric, _val_samples(samples), _perfect())
    assert set(metrics) == {'nusc/mAP', 'nusc/NDS', 'nusc/mATE', 'nusc/mASE', 'nusc/mAOE'} | {
        f'nusc/{name}_AP' for name in CLASSES} | {f'nusc/{name}_AOE' for name in CLASSES if name != 'traffic_cone'}
