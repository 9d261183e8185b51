"""tools/benchmark.py --detectors: multi-view detectors timed against the first, the encoding's share, the camera
work per forward; the rig from the config's test set or the built-in one; refusals."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from vispe.datasets.multiview_detection import MultiViewDetection
from vispe.engine.arguments import InvalidArgument
from vispe.engine.benchmark_detector import (ENCODING_SECTIONS, EncodingTimer, benchmark_detectors, builtin_rig,
                                             detector_image_size, fixed_rig, forward_run, load_detector,
                                             synthetic_batch)
from vispe.geometry import Cameras
from vispe.reporting.provenance import run_stamp

from .datasets.nuscenes_fixture import write_nuscenes
from .helpers import load_tool

CPU = torch.device('cpu')
RANGE = (-30.0, -30.0, -4.0, 30.0, 30.0, 4.0)
ENCODINGS = {
    'nope': dict(type='MultiViewSine'),
    'petr': dict(type='PETR', depth_num=4, position_range=RANGE),
    'ppe3d': dict(type='PPE3D', depth_num=4, position_range=RANGE, mid_channels=16, context_channels=16,
                  with_dcn=False, with_aspp=False),
}


def tiny_config(folder: Path, name: str, data_root: Path) -> Path:
    """A PETR detector of width 32 with one decoder layer on a ResNet-18 to stride 16, and a test set."""
    model = dict(type='PETRDetector', num_classes=2, num_queries=8, embed_dim=32, code_size=8,
                 backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-2, pretrained=False),
                 pc_range=(-28.0, -28.0, -3.0, 28.0, 28.0, 2.0), decoder=dict(depth=1, num_heads=2, mlp_dim=64),
                 encoding=ENCODINGS[name])
    dataset = dict(type='MultiViewDetection', data_root=str(data_root), split='train',
                   classes=('car', 'pedestrian'), image_size=(32, 80))
    path = folder / f'tiny_{name}.py'
    path.write_text(f'model = {model!r}\ntest_dataloader = dict(dataset={dataset!r})\n')
    return path


def run_tool(repo_root: Path, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, str(repo_root / 'tools' / 'benchmark.py'), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, cwd=repo_root)


@pytest.mark.slow
def test_detector_mode_writes_ratios_shares_and_camera_work(repo_root: Path, tmp_path: Path) -> None:
    configs = [tiny_config(tmp_path, name, tmp_path / 'no-such-root') for name in ('nope', 'petr')]
    out = tmp_path / 'bench' / 'petr'
    result = run_tool(repo_root, '--detectors', *map(str, configs), '--sizes', '32', '--batch', '1', '--repeats',
                      '1', '--warmup', '0', '--threads', '1', '--note', 'shared machine', '--out', str(out))
    assert result.returncode == 0, result.stderr
    document = json.loads(out.with_suffix('.json').read_text())
    assert document['baseline'] == 'tiny_nope' and document['note'] == 'shared machine'
    assert document['date'] and document['commit'] == run_stamp(repo_root)['commit']
    assert document['command'].startswith('python tools/benchmark.py --detectors')
    assert document['machine']['threads'] == 1 and document['machine']['torch'] == torch.__version__
    assert 'built-in' in document['rigs']['32']
    nope, petr = document['rows']
    assert [nope['model'], petr['model']] == ['tiny_nope', 'tiny_petr'] and nope['image_size'] == [32, 80]
    assert nope['ratio_to_baseline'] == 1.0 and petr['ratio_to_baseline'] == petr['seconds'] / nope['seconds']
    for row in (nope, petr):
        assert 0 < row['encoding_share'] < 1 and row['key_embedding_seconds'] > 0
        assert row['encoding_seconds'] == pytest.approx(sum(row[f'{name}_seconds'] for name in ENCODING_SECTIONS))
        assert row['cameras_seconds'] > 0 and row['peak_bytes'] is None
    # PETR reads img2lidar and lifts its frustum on a new rig; at this size it builds its frustum table and the
    # fixed rig's MLP input once each, then every forward hits the cache. The 2D sine reads neither.
    assert petr['img2lidar_seconds'] > 0 and petr['frustum_seconds'] > 0 and petr['table_builds'] == 2
    assert nope['img2lidar_seconds'] == nope['frustum_seconds'] == 0 and nope['table_builds'] == 0
    assert petr['params'] > nope['params']
    markdown = out.with_suffix('.md').read_text()
    assert f"`{document['command']}`" in markdown and 'note: shared machine' in markdown
    assert '| 32x80 | tiny_petr |' in markdown and markdown.count('| size | model |') == 2
    assert not out.with_suffix('.csv').exists() and not list(out.parent.glob('.*.tmp'))


@pytest.mark.parametrize('options, message', [
    (['--layer'], '--detectors --layer: --layer is an option of the ViT and layer benchmarks, not of detector mode'),
    (['--encodings', 'RoPEAxial'], '--encodings is an option of the ViT and layer benchmarks'),
    (['--sizes', '32', '32'], '--sizes 32 32'),
])
def test_detector_mode_refuses_bad_arguments(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture, options: list[str], message: str) -> None:
    tool = load_tool('benchmark')
    config = tiny_config(tmp_path, 'nope', tmp_path / 'no-such-root')
    monkeypatch.setattr(sys, 'argv', ['benchmark.py', '--detectors', str(config), *options])
    with pytest.raises(SystemExit) as exit_info:
        tool.parse_args()
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_detector_mode_refuses_a_missing_config(repo_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture) -> None:
    tool = load_tool('benchmark')
    monkeypatch.setattr(sys, 'argv', ['benchmark.py', '--detectors', str(tmp_path / 'missing.py')])
    with pytest.raises(SystemExit):
        tool.parse_args()
    assert 'missing.py' in capsys.readouterr().err


def test_rig_of_the_test_set_and_a_depth_net_encoding(tmp_path: Path) -> None:
    root = write_nuscenes(tmp_path / 'root')
    configs = [tiny_config(tmp_path, name, root) for name in ('nope', 'ppe3d')]
    cfg = Config.fromfile(str(configs[0]))
    assert detector_image_size(cfg, 40) == (40, 100)
    rig = fixed_rig(cfg, (40, 100), views=6)
    item = MultiViewDetection(str(root), 'train', classes=('car', 'pedestrian'), image_size=(40, 100))[0]
    assert str(root) in rig.source and item['data_samples']['sample_token'] in rig.source
    assert torch.equal(rig.sample['intrinsics'], item['data_samples']['intrinsics'])
    assert torch.equal(rig.sample['lidar2cam'], item['data_samples']['lidar2cam'])
    two = fixed_rig(cfg, (40, 100), views=2)
    assert two.num_views == 2 and torch.equal(two.sample['lidar2cam'], rig.sample['lidar2cam'][:2])
    with pytest.raises(InvalidArgument, match='--views 7: the rig .* has 6 cameras'):
        fixed_rig(cfg, (40, 100), views=7)
    result = benchmark_detectors(configs, [32], batch=2, views=3, repeats=1, warmup=0, device=CPU)
    nope, ppe3d = result['rows']
    assert str(root) in result['rigs'][32]
    # 3DPPE's depth net is its encode_features; its points read img2lidar but have no rig-only frustum.
    assert ppe3d['encode_features_seconds'] > nope['encode_features_seconds']
    assert ppe3d['img2lidar_seconds'] > 0 and ppe3d['frustum_seconds'] == 0 and ppe3d['table_builds'] == 0


def test_builtin_rig_sees_ahead_with_the_front_camera() -> None:
    rig = builtin_rig((90, 160))
    cameras = Cameras.from_batch([rig.sample])
    ahead = torch.tensor([[[10.0, 0.0, 0.0]]])  # lidar frame: 10 m ahead at the lidar's height
    pixels, depth = cameras.project(ahead)
    assert pixels[0, 0, 0, 0].item() == pytest.approx((160 - 1) / 2, abs=1e-3)
    assert depth[0, 0, 0].item() == pytest.approx(10.0 + 0.94 - 1.70, abs=1e-4)  # lidar and camera mount x
    assert depth[0, 3, 0].item() < 0  # CAM_BACK looks the other way
    assert rig.sample['intrinsics'][0, 0, 0].item() == pytest.approx(252.0 * 160 / 320)


def test_encoding_timer_times_the_three_calls_and_unwraps(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, 'petr', tmp_path / 'no-such-root')
    model = load_detector(config, CPU)
    data = synthetic_batch(builtin_rig((32, 80)), 1, (32, 80), CPU)
    run = forward_run(model, data)
    with EncodingTimer(model.encoding, CPU) as timer:
        assert all(name in vars(model.encoding) for name in ENCODING_SECTIONS)
        run()
        seconds = timer.take()
        assert timer.take() == dict.fromkeys((*ENCODING_SECTIONS, 'encoding'), 0.0)
    assert not any(name in vars(model.encoding) for name in ENCODING_SECTIONS)
    assert all(seconds[name] > 0 for name in ENCODING_SECTIONS)
    assert seconds['encoding'] == pytest.approx(sum(seconds[name] for name in ENCODING_SECTIONS))
    assert len(run()) == 1  # predictions of the one sample, after the wrappers are gone


def test_sizes_below_the_backbone_stride_are_refused(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, 'nope', tmp_path / 'no-such-root')
    with pytest.raises(InvalidArgument, match='--sizes 8: tiny_nope reduces images by 16, and 8x20 is smaller'):
        benchmark_detectors([config], [8], batch=1, views=6, repeats=1, warmup=0, device=CPU)
    with pytest.raises(InvalidArgument, match='would label two rows'):
        benchmark_detectors([config, config], [32], batch=1, views=6, repeats=1, warmup=0, device=CPU)
