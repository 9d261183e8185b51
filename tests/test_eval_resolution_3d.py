"""tools/eval_resolution.py on multi-view 3D runs and tools/test.py --format-only, on a tiny mv-scenes set and an
untrained tiny PETR: the sweep's rows and files (every rig x intrinsics scale x height), the axes reaching the data
set and the metric, seed groups as mean and spread, a submission json the devkit loads, and the refusals."""
from __future__ import annotations

import csv
import json
import math
import shutil
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

pytest.importorskip('nuscenes', reason='mv-scenes takes scene names from nuscenes-devkit')

from tests.conftest import REPO_ROOT  # noqa: E402
from tests.helpers import load_tool, untrained_work_dir  # noqa: E402
from tests.datasets.mv_scenes_fixture import TINY_CONFIG  # noqa: E402
from vispe.datasets.mv_scenes import convert  # noqa: E402
from vispe.engine.arguments import InvalidArgument  # noqa: E402
from vispe.evaluation import multiview_sweep as sweep  # noqa: E402
from vispe.evaluation.sweep import group_summary, seed_groups  # noqa: E402
from vispe.registry import DATASETS, METRICS, MODELS  # noqa: E402

PETR_CONFIG = REPO_ROOT / 'configs' / 'petr' / 'petr-r18_petr-lid_mv-scenes.py'
VIT_CONFIG = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'
IMAGE_SIZE = (45, 80)  # the tiny set's images; the config's test size, so 36 -> (36, 64)
def run_tool(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, 'argv', [f'{name}.py', *argv])
    return load_tool(name).main()


def tiny_petr_config(data_root: Path) -> Config:
    """The PETR-LID mv-scenes config on ``data_root`` at 45 x 80, with a tiny model: timm's test_resnet, width 32,
    one decoder layer, 12 queries, 8 depth bins."""
    cfg = Config.fromfile(str(PETR_CONFIG))
    cfg.model.backbone.update(model_name='test_resnet', out_index=-2)
    cfg.model.update(embed_dim=32, num_queries=12)
    cfg.model.decoder.update(depth=1, num_heads=2, mlp_dim=64)
    cfg.model.encoding.update(depth_num=8)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.update(data_root=str(data_root), image_size=IMAGE_SIZE)
    for evaluator in ('val_evaluator', 'test_evaluator'):
        cfg[evaluator].data_root = str(data_root)
    return cfg


def make_petr_work_dir(parent: Path, name: str, cfg: Config, seed: int) -> Path:
    return untrained_work_dir(parent, name, cfg, seed, 'petr-tiny.py')


@pytest.fixture(scope='module')
def mv_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """mv-scenes with 2 samples in each of train, val (rig 2) and test-rig1 (rig 1), 45 x 80 images."""
    root = tmp_path_factory.mktemp('mv3d') / 'mv-scenes'
    convert(root, 2, 2, 2, config=TINY_CONFIG, progress=False)
    return root


@pytest.fixture(scope='module')
def petr_runs(mv_root: Path, tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two seeds of the same tiny PETR: petr-tiny_s0 and petr-tiny_s1."""
    parent = tmp_path_factory.mktemp('runs')
    cfg = tiny_petr_config(mv_root)
    return [make_petr_work_dir(parent, f'petr-tiny_s{seed}', cfg, seed) for seed in (0, 1)]


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path) as handle:
        return list(csv.DictReader(handle))


def independent_metrics(work_dir: Path, split: str, image_size: tuple[int, int], scale: float) -> dict[str, float]:
    """The nuScenes metrics of a work dir's model at one point, computed here without the tool."""
    cfg = Config.fromfile(str(work_dir / 'petr-tiny.py'))
    model = MODELS.build(cfg.model).eval()
    model.load_state_dict(torch.load(work_dir / 'best.pth', weights_only=True)['state_dict'])
    dataset = DATASETS.build(dict(cfg.test_dataloader.dataset, split=split, image_size=image_size,
                                  intrinsics_scale=scale))
    metric = METRICS.build(dict(cfg.test_evaluator, split=split))
    from vispe.datasets.multiview_detection import multiview_collate
    with torch.inference_mode():
        batch = multiview_collate([dataset[i] for i in range(len(dataset))])
        metric.process(batch, model.test_step(batch))
    return metric.evaluate(len(dataset))


def test_sweep_evaluates_every_rig_zoom_and_size(petr_runs, tmp_path, monkeypatch, capsys) -> None:
    evaluation = load_tool('eval_sweeps_3d')  # the multi-view sweep of eval-resolution
    seen = []
    original = evaluation.evaluate

    def spy(model, cfg, dataset, batch_size, progress, metric=None):
        item = dataset[0]
        seen.append((dataset.split, metric.split, dataset.intrinsics_scale, tuple(item['inputs'].shape[-2:]),
                     tuple(item['data_samples']['img_shape'])))
        return original(model, cfg, dataset, batch_size, progress, metric)

    monkeypatch.setattr(evaluation, 'evaluate', spy)
    out = tmp_path / 'results' / 'sweep'
    assert run_tool('eval_resolution', [str(petr_runs[0]), '--sizes', '36', '45', '--intrinsics-scale', '0.8', '1.25',
                                        '--rigs', 'train', 'other', '--out', str(out)], monkeypatch) == 0
    points = [(rig, split, scale, height, width) for rig, split in (('train', 'test-rig1'), ('other', 'val'))
              for scale in (0.8, 1.25) for height, width in ((36, 64), (45, 80))]
    assert seen == [(split, split, scale, (height, width), (height, width)) for _, split, scale, height, width in points]
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ['model', '(nusc/mAP)', 'rig', 'split', 'zoom', '36x64', '45x80']
    assert [line.split()[:4] for line in table[2:6]] == [['petr-tiny_s0', 'train', 'test-rig1', '0.8'],
                                                         ['petr-tiny_s0', 'train', 'test-rig1', '1.25'],
                                                         ['petr-tiny_s0', 'other', 'val', '0.8'],
                                                         ['petr-tiny_s0', 'other', 'val', '1.25']]
    rows = read_csv(out.with_suffix('.csv'))
    assert [(r['rig'], r['split'], float(r['intrinsics_scale']), int(r['height']), int(r['width'])) for r in rows] == points
    for name in ('nusc/mAP', 'nusc/NDS', 'nusc/mATE', 'nusc/mASE', 'nusc/mAOE', 'nusc/car_AP', 'nusc/pedestrian_AP',
                 'nusc/devkit/mAP', 'nusc/devkit/NDS_official', 'nusc/devkit/mAOE'):
        assert all(r[name] != '' for r in rows), name
    report = json.loads(out.with_suffix('.json').read_text())
    assert report['axes']['rigs'] == {'train': 'test-rig1', 'other': 'val'} and report['metric'] == 'nusc/mAP'
    assert report['date'][:2] == '20' and (report['commit'] is None or len(report['commit']) == 40)
    run = report['runs'][0]
    assert run['label'] == 'petr-tiny_s0' and len(run['checkpoint_sha256']) == 64 and run['train_size'] == [45, 80]
    assert [(r['rig'], r['split'], r['intrinsics_scale'], r['height'], r['width']) for r in run['results']] == points
    for row, result in zip(rows, run['results']):
        assert float(row['nusc/NDS']) == pytest.approx(result['metrics']['nusc/NDS'], abs=5e-5)
    # the reported numbers are the metric's on that point, computed independently
    expected = independent_metrics(petr_runs[0], 'val', (36, 64), 1.25)
    assert run['results'][6]['metrics'] == pytest.approx(expected, abs=1e-12)
    assert out.with_suffix('.png').read_bytes()[:4] == b'\x89PNG'
    assert not out.with_suffix('.seeds.csv').exists()
    assert sorted(p.name for p in out.parent.iterdir()) == ['sweep.csv', 'sweep.json', 'sweep.png']


def test_seed_groups_report_mean_and_spread(petr_runs, tmp_path, monkeypatch, capsys) -> None:
    out = tmp_path / 'seeds'
    assert run_tool('eval_resolution', [*map(str, petr_runs), '--sizes', '45', '--rigs', 'other', '--group-seeds',
                                        '--out', str(out)], monkeypatch) == 0
    table = capsys.readouterr().out.splitlines()
    assert 'mean±spread, spread = max - min over seeds' in table[0]
    assert len(table) == 4 and table[2].split()[:4] == ['petr-tiny', 'other', 'val', '1']
    assert table[3].startswith('wrote ') and str(out.with_suffix('.seeds.csv')) in table[3]
    report = json.loads(out.with_suffix('.json').read_text())
    per_run = [run['results'][0]['metrics'] for run in report['runs']]
    assert [run['label'] for run in report['runs']] == ['petr-tiny_s0', 'petr-tiny_s1']
    group = report['seed_groups'][0]
    assert group['label'] == 'petr-tiny' and group['seeds'] == [0, 1] and group['spread'] == 'max - min over seeds'
    for name in ('nusc/mAP', 'nusc/NDS', 'nusc/devkit/mAP', 'nusc/car_AP'):
        values = [metrics[name] for metrics in per_run]
        assert group['results'][0]['mean'][name] == pytest.approx(sum(values) / 2, abs=1e-12)
        assert group['results'][0]['spread'][name] == pytest.approx(max(values) - min(values), abs=1e-12)
    rows = read_csv(out.with_suffix('.seeds.csv'))
    assert len(rows) == 1 and rows[0]['group'] == 'petr-tiny' and rows[0]['members'] == 'petr-tiny_s0 petr-tiny_s1'
    assert float(rows[0]['nusc/mAP_mean']) == pytest.approx(group['results'][0]['mean']['nusc/mAP'], abs=5e-5)
    assert (rows[0]['rig'], rows[0]['height'], rows[0]['width']) == ('other', '45', '80')


def test_format_only_writes_a_submission_the_devkit_loads(petr_runs, mv_root, tmp_path, monkeypatch, capsys) -> None:
    from nuscenes.eval.common.loaders import load_prediction
    from nuscenes.eval.detection.data_classes import DetectionBox

    work_dir = petr_runs[0]
    out = tmp_path / 'submission' / 'results_nusc.json'
    argv = [str(work_dir / 'petr-tiny.py'), str(work_dir / 'best.pth'), '--format-only', '--out', str(out),
            '--work-dir', str(tmp_path / 'wd'), '--cfg-options', 'log_level=WARNING',
            'experiment_name=format_only_3d']
    assert run_tool('test', argv, monkeypatch) == 0
    assert f'nuScenes submission written to {out}' in capsys.readouterr().out
    boxes, meta = load_prediction(str(out), 500, DetectionBox)
    split_tokens = DATASETS.build(dict(Config.fromfile(str(work_dir / 'petr-tiny.py')).test_dataloader.dataset)
                                  ).sample_tokens
    assert sorted(boxes.sample_tokens) == sorted(split_tokens) and meta['use_camera'] and not meta['use_lidar']
    assert all(box.detection_name in ('car', 'truck', 'bicycle', 'pedestrian', 'traffic_cone') for box in boxes.all)
    assert [p.name for p in out.parent.iterdir()] == ['results_nusc.json']


def test_sizes_follow_the_aspect_ratio_and_every_combination_is_a_point(petr_runs) -> None:
    assert [sweep.image_size_for_height(h, (90, 160)) for h in (72, 90, 126)] == [(72, 128), (90, 160), (126, 224)]
    assert sweep.image_size_for_height(5, (2, 1)) == (5, 3)  # 2.5 rounds half up
    cfg = Config.fromfile(str(petr_runs[0] / 'petr-tiny.py'))
    points = sweep.sweep_points(cfg, [36, 45, 54], [0.8, 1.0], ['other', 'train'])
    assert len(points) == 12 and len(set(points)) == 12
    assert points[0] == sweep.SweepPoint('other', 'val', 0.8, (36, 64))
    assert points[-1] == sweep.SweepPoint('train', 'test-rig1', 1.0, (54, 96))
    assert {p.split for p in sweep.sweep_points(cfg, [45], [1.0], None)} == {'test-rig1'}


def test_seed_groups_refuse_repeated_seeds_and_different_configs(petr_runs) -> None:
    cfg = Config.fromfile(str(petr_runs[0] / 'petr-tiny.py'))
    other = Config.fromfile(str(petr_runs[0] / 'petr-tiny.py'))
    other.model.decoder.depth = 2
    configs = {'a_s0': cfg, 'a_s1': cfg, 'a-s1': cfg, 'b_seed3': cfg, 'c': cfg, 'a_s2': other}
    groups = seed_groups(['a_s0', 'b_seed3', 'a_s1', 'c'], configs)
    assert [(g.label, g.members, g.seeds) for g in groups] == [('a', ('a_s0', 'a_s1'), (0, 1)),
                                                               ('b', ('b_seed3',), (3,)), ('c', ('c',), (None,))]
    with pytest.raises(InvalidArgument, match=r"--group-seeds a_s1 a-s1: these runs of 'a' repeat a seed"):
        seed_groups(['a_s1', 'a-s1'], configs)
    with pytest.raises(InvalidArgument, match=r"a_s0 a_s2: they group as seeds of 'a' but their configs differ at "
                                              r'model\.decoder\.depth; group only seeds of one config'):
        seed_groups(['a_s0', 'a_s2'], configs)
    point = sweep.SweepPoint('train', 'test-rig1', 1.0, (45, 80))
    results = {'a_s0': {point: {'m': 0.2, 'n': math.nan}}, 'a_s1': {point: {'m': 0.5, 'n': 1.0}}}
    summary = group_summary(groups[0], results)[point]
    assert summary['m'] == pytest.approx((0.35, 0.3)) and all(math.isnan(v) for v in summary['n'])


@pytest.mark.parametrize('argv, fragments', [
    (['--rigs', 'third'], ["argument --rigs: 'third' is not a rig; give train (split test-rig1), other (split val)"]),
    (['--intrinsics-scale', '0'], ["argument --intrinsics-scale: '0' is not a positive number"]),
    (['--intrinsics-scale', '-1.25'], ["argument --intrinsics-scale: '-1.25' is not a positive number"]),
    (['--intrinsics-scale', '1', '1'], ['--intrinsics-scale 1.0 1.0: 1.0 given more than once']),
    (['--rigs', 'train', 'train'], ['--rigs train train: train given more than once']),
])
def test_eval_resolution_refuses_bad_axes(argv, fragments, petr_runs, tmp_path, monkeypatch, capsys) -> None:
    with pytest.raises(SystemExit) as exited:
        run_tool('eval_resolution', [str(petr_runs[0]), '--sizes', '45', *argv, '--out', str(tmp_path / 'o')],
                 monkeypatch)
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert all(fragment in error for fragment in fragments), error
    assert list(tmp_path.iterdir()) == []


def test_eval_resolution_refuses_what_the_runs_cannot_do(petr_runs, mv_root, tmp_path, monkeypatch) -> None:
    run = str(petr_runs[0])
    vit = f'{VIT_CONFIG}::{tmp_path / "none.pth"}'
    cases = [([vit, '--sizes', '28', '--rigs', 'other'], '--rigs is for multi-view 3D runs'),
             ([vit, '--sizes', '28', '--intrinsics-scale', '2'], '--intrinsics-scale is for multi-view 3D runs'),
             ([vit, run, '--sizes', '28'], 'petr-tiny_s0 are multi-view 3D detectors and the others are not'),
             ([run, '--sizes', '45', '--subset', '1'], '--subset 1: the nuScenes metric needs every sample'),
             ([run, '--sizes', '45', '--eval-mode', 'canvas'], '--eval-mode canvas: multi-view 3D runs resize'),
             ([run, run, '--sizes', '45'], 'petr-tiny_s0 given more than once'),
             ([run, '--sizes', '8'], "image size (8, 14) is smaller than the backbone's stride 16")]
    for argv, message in cases:
        with pytest.raises(InvalidArgument) as refused:
            run_tool('eval_resolution', [*argv, '--out', str(tmp_path / 'out' / 'o')], monkeypatch)
        assert message in str(refused.value), (argv, str(refused.value))
    # a data root without the rig's split
    root = tmp_path / 'no-rig1'
    shutil.copytree(mv_root, root)
    splits = json.loads((root / 'splits.json').read_text())
    (root / 'splits.json').write_text(json.dumps({k: v for k, v in splits.items() if k != 'test-rig1'}))
    work_dir = make_petr_work_dir(tmp_path, 'petr-norig', tiny_petr_config(root), 0)
    with pytest.raises(InvalidArgument, match=r"--rigs train: petr-norig: split 'test-rig1' is not defined in .*"
                                              r'the rigs are splits of mv-scenes \(train: test-rig1, other: val\)'):
        run_tool('eval_resolution', [str(work_dir), '--sizes', '45', '--rigs', 'other', 'train',
                                     '--out', str(tmp_path / 'out' / 'o')], monkeypatch)
    assert not (tmp_path / 'out' / 'o.csv').exists()


def test_format_only_refuses_other_configs_and_a_stray_out(tmp_path, monkeypatch, capsys) -> None:
    test = load_tool('test')
    monkeypatch.setattr(test, 'build_runner', lambda cfg: pytest.fail('the runner was built'))
    with pytest.raises(InvalidArgument, match=r"--format-only .*vit-t4_ape_fmnist-28\.py: the config's test_evaluator "
                                              r"is 'Accuracy', not a NuScenesMetric; use a multi-view 3D config "
                                              r'\(configs/petr/\)'):
        run_tool('test', [str(VIT_CONFIG), 'x.pth', '--format-only', '--out', str(tmp_path / 'r.json'),
                          '--work-dir', str(tmp_path / 'wd')], monkeypatch)
    for extra, fragment in ((['--out', str(tmp_path / 'r.json')], 'names the submission json of --format-only; add '
                                                                   '--format-only'),
                            (['--format-only', '--out', str(tmp_path / 'r.txt')], 'is not a .json file; give a path '
                                                                                  'ending in .json')):
        with pytest.raises(SystemExit) as exited:
            run_tool('test', [str(PETR_CONFIG), 'x.pth', *extra], monkeypatch)
        assert exited.value.code == 2 and fragment in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
