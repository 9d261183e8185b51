"""The point detector fits two scanned rooms of pt-scenes to AP50 >= 0.9, axis-aligned and rotated (a check of the
pipeline: matching, losses, box and heading parameterisation, post-processing and the metric), and a config trains
and validates through mmengine."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import numpy as np
import pytest
import torch

from vispe.datasets import PointScenes, pointscenes_collate
from vispe.datasets.pt_scenes.conversion import ConversionConfig, convert
from vispe.datasets.pt_scenes.room import RoomConfig
from vispe.datasets.pt_scenes.scan import ScanConfig
from vispe.engine import build_runner, load_config
from vispe.evaluation import IndoorAP
from vispe.geometry import read_points, write_points
from vispe.models.vdetr import VDETR

from ...conftest import REPO_ROOT

TINY = ConversionConfig(seed=7, room=RoomConfig(min_size=3.0, max_size=3.6, min_objects=3, max_objects=4,
                                                max_sensors=3), scan=ScanConfig(azimuths=128), min_object_points=20)
SMALL_MODEL = dict(backbone=dict(in_channels=3, channels=(32, 64), num_samples=256, radius=0.25, group_size=16),
                   embed_dim=64, encoder=dict(depth=1, num_heads=4, mlp_dim=128, dropout=0.0), num_queries=24)


@pytest.fixture(scope='module')
def rooms(tmp_path_factory):
    root = tmp_path_factory.mktemp('vdetr') / 'pt-scenes'
    convert(root, train=2, val=1, test=1, config=TINY, progress=False)
    return root


@pytest.fixture(scope='module')
def rotated_rooms(tmp_path_factory):
    root = tmp_path_factory.mktemp('vdetr') / 'pt-scenes-rotated'
    convert(root, train=2, val=1, test=1, config=replace(TINY, room=replace(TINY.room, rotated=True)), progress=False)
    return root


@pytest.mark.slow
@pytest.mark.parametrize('rotated', [False, True], ids=['aligned', 'rotated'])
def test_two_rooms_are_fitted_to_ap50(rooms, rotated_rooms, rotated: bool) -> None:
    torch.manual_seed(0)
    dataset = PointScenes(rotated_rooms if rotated else rooms, split='train', num_points=2048, use_color=True)
    batch = pointscenes_collate([dataset[0], dataset[1]])
    if rotated:  # the scenes' objects really are turned, so an axis-aligned box would not reach IoU 0.5
        assert (batch['data_samples'][0]['gt_boxes'][:, 6].abs() > 0.2).any()
    model = VDETR(num_classes=7, decoder=dict(depth=2, num_heads=4, mlp_dim=128, dropout=0.0,
                                              encoding=dict(type='VertexRPE', box_frame=rotated)),
                  num_yaw_bins=12 if rotated else 0, **SMALL_MODEL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.0)
    for _ in range(400):
        loss = sum(model(batch['inputs'], batch['data_samples'], mode='loss').values())
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    model.eval()
    with torch.no_grad():
        predictions = model(batch['inputs'], batch['data_samples'], mode='predict')
    metric = IndoorAP(classes=dataset.classes, rotated=rotated)
    metric.process(batch, predictions)
    results = metric.compute_metrics(metric.results)
    present = {dataset.classes[label] for sample in batch['data_samples'] for label in sample['gt_labels'].tolist()}
    # 3DETR counts every predicted class, and per-class proposals predict all seven: average over those present.
    assert sum(results[f'AP50_{name}'] for name in present) / len(present) >= 0.9, results


@pytest.mark.slow
def test_config_trains_validates_and_keeps_the_best_checkpoint(rooms, tmp_path) -> None:
    overrides = {'train_dataloader.batch_size': 2, 'val_dataloader.batch_size': 2, 'num_points': 2048,
                 'train_cfg.max_epochs': 1, 'train_cfg.val_interval': 1, 'param_scheduler.1.end': 1,
                 'model.decoder.depth': 1}
    for loader in ('train', 'val', 'test'):
        overrides[f'{loader}_dataloader.dataset.data_root'] = str(rooms)
        overrides[f'{loader}_dataloader.dataset.num_points'] = 2048
    for key, value in SMALL_MODEL.items():
        overrides[f'model.{key}'] = value
    cfg = load_config(REPO_ROOT / 'configs' / 'vdetr' / 'vdetr-s_vertex-rpe_pt-scenes.py', overrides, tmp_path)
    runner = build_runner(cfg)
    runner.train()
    assert (tmp_path / 'best.pth').is_file()
    metrics = runner.test()
    assert 0.0 <= metrics['indoor/mAP50'] <= 1.0 and 'indoor/AP25_bunny' in metrics

    scene = np.load(next((rooms / 'scannet_train_detection_data').glob('*_vert.npy')), allow_pickle=False)
    scan = tmp_path / 'scan.ply'
    write_points(scan, torch.from_numpy(scene[:, :3] * 1000), torch.from_numpy(scene[:, 3:6] / 255))
    flat = {f'model.{key}.{name}': value for key, part in SMALL_MODEL.items() if isinstance(part, dict)
            for name, value in part.items()}
    flat.update({f'model.{key}': part for key, part in SMALL_MODEL.items() if not isinstance(part, dict)})
    flat.update({'model.decoder.depth': 1, 'test_dataloader.dataset.num_points': 2048})
    options = [f'{key}={json.dumps(value).replace(" ", "")}' for key, value in flat.items()]
    result = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'infer_points.py'), str(cfg.filename),
                             str(tmp_path / 'best.pth'), str(scan), '--units', '0.001', '--score-threshold', '0',
                             '--out', str(tmp_path / 'boxes'), '--cfg-options', *options],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    boxes = json.loads((tmp_path / 'boxes.json').read_text())['boxes']
    assert boxes and {'center', 'size', 'yaw', 'label', 'score'} <= set(boxes[0])
    assert max(abs(value) for box in boxes for value in box['center']) > 100  # back in the scan's millimetres
    assert len(read_points(tmp_path / 'boxes.ply')['xyz']) > len(scene)
