"""tools/eval_resolution.py and tools/vis_attention.py on point-cloud detectors (V-DETR), on a tiny pt-scenes set
and untrained tiny models: the sweep's rows and files (every scene scale x point density), the axes reaching the
data set, seed groups as mean and spread, the refusals, and a query's attention over the points."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
import torch
from mmengine.config import Config

from tests.conftest import REPO_ROOT
from tests.helpers import load_tool, untrained_work_dir
from tests.models.vdetr.test_overfit import SMALL_MODEL, TINY
from vispe.datasets.pt_scenes.conversion import convert
from vispe.engine.arguments import InvalidArgument
from vispe.evaluation import point_sweep
from vispe.models.vdetr import VDETR
from vispe.registry import DATASETS, MODELS
from vispe.reporting.result_tables import point_sweep_table
from vispe.visualization.point_attention import point_query_attention

VDETR_CONFIG = REPO_ROOT / 'configs' / 'vdetr' / 'vdetr-s_vertex-rpe_pt-scenes.py'
VIT_CONFIG = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'


def run_tool(name: str, argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, 'argv', [f'{name}.py', *argv])
    return load_tool(name).main()


@pytest.fixture(scope='module')
def rooms(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp('vdetr_sweep') / 'pt-scenes'
    convert(root, train=1, val=1, test=2, config=TINY, progress=False)
    return root


def tiny_config(data_root: Path) -> Config:
    """The VertexRPE pt-scenes config on ``data_root``: 1024 points per scene, the tests' small model, 1 layer."""
    cfg = Config.fromfile(str(VDETR_CONFIG))
    cfg.model.update(SMALL_MODEL)
    cfg.model.decoder.update(depth=1)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.update(data_root=str(data_root), num_points=1024)
        cfg[loader].batch_size = 2
    return cfg


def make_work_dir(parent: Path, name: str, cfg: Config, seed: int) -> Path:
    return untrained_work_dir(parent, name, cfg, seed, 'vdetr-tiny.py')


def test_axes_reach_the_dataset(rooms) -> None:
    cfg = tiny_config(rooms)
    assert point_sweep.POINTS.is_config(cfg) and not point_sweep.POINTS.is_config(Config.fromfile(str(VIT_CONFIG)))
    points = point_sweep.point_sweep_points([0.5, 2], [1, 1.5])
    assert [(p.scene_scale, p.point_density) for p in points] == [(1, 0.5), (1, 2), (1.5, 0.5), (1.5, 2)]
    base = DATASETS.build(point_sweep.point_dataset_cfg(cfg, point_sweep.PointSweepPoint(1.0, 1.0)))[0]
    swept = DATASETS.build(point_sweep.point_dataset_cfg(cfg, points[-1]))[0]
    assert base['inputs']['points'].shape[0] == 1024 and swept['inputs']['points'].shape[0] == 2048
    assert torch.allclose(swept['data_samples']['gt_boxes'][:, :6], 1.5 * base['data_samples']['gt_boxes'][:, :6])


@pytest.mark.slow
def test_sweep_writes_every_point_and_groups_seeds(rooms, tmp_path, monkeypatch, capsys) -> None:
    cfg = tiny_config(rooms)
    runs = [str(make_work_dir(tmp_path, f'tiny_s{seed}', cfg, seed)) for seed in (0, 1)]
    out = tmp_path / 'sweep'
    assert run_tool('eval_resolution', [*runs, '--point-density', '0.5', '1', '--scene-scale', '1', '2',
                                        '--group-seeds', '--out', str(out)], monkeypatch) == 0
    table = capsys.readouterr().out
    assert 'mAP50 @ density 0.5' in table and 'mAP25 @ density 1' in table
    assert [line.split()[:2] for line in table.splitlines()[2:4]] == [['tiny', '1'], ['tiny', '2']]
    rows = list(csv.DictReader(open(out.with_suffix('.csv'))))
    assert [(r['model'], float(r['scene_scale']), float(r['point_density'])) for r in rows] == [
        (f'tiny_s{seed}', scale, density) for seed in (0, 1) for scale in (1, 2) for density in (0.5, 1)]
    assert all(0 <= float(r['indoor/mAP25']) <= 1 for r in rows) and 'indoor/AP50_bunny' in rows[0]
    report = json.loads(out.with_suffix('.json').read_text())
    group = report['seed_groups'][0]
    assert group['label'] == 'tiny' and group['seeds'] == [0, 1] and len(group['results']) == 4
    first = [float(r['indoor/mAP25']) for r in rows if r['scene_scale'] == '1.0' and r['point_density'] == '0.5']
    assert group['results'][0]['mean']['indoor/mAP25'] == pytest.approx(sum(first) / 2, abs=1e-4)
    assert group['results'][0]['spread']['indoor/mAP25'] == pytest.approx(max(first) - min(first), abs=1e-4)
    assert out.with_suffix('.png').stat().st_size > 0 and out.with_suffix('.seeds.csv').is_file()


def test_rotated_sweep_reports_the_heading_error(rooms, tmp_path, monkeypatch, capsys) -> None:
    cfg = tiny_config(rooms)
    cfg.model.num_yaw_bins = 12
    cfg.test_evaluator.rotated = True
    run = str(make_work_dir(tmp_path, 'tiny-rotated_s0', cfg, 0))
    out = tmp_path / 'rotated'
    assert run_tool('eval_resolution', [run, '--point-density', '1', '--scene-scale', '1', '--group-seeds',
                                        '--out', str(out)], monkeypatch) == 0
    report = json.loads(out.with_suffix('.json').read_text())
    assert report['metrics'] == ['indoor/mAP25', 'indoor/mAP50', 'indoor/mAOE25']
    table = point_sweep_table(report)
    assert 'mAOE25 @ 1×' in table.splitlines()[0]
    result = report['seed_groups'][0]['results'][0]
    cell = table.splitlines()[2].split('|')[-2].strip()
    assert cell == ('–' if 'indoor/mAOE25' not in result['mean'] else f"{result['mean']['indoor/mAOE25']:.3f}"
                    f" ± {result['spread']['indoor/mAOE25']:.3f}")
    result['mean'].pop('indoor/mAOE25', None)  # no true positive: no heading error, a dash
    assert point_sweep_table(report).splitlines()[2].split('|')[-2].strip() == '–'


def test_refusals(rooms, tmp_path, monkeypatch) -> None:
    cfg = tiny_config(rooms)
    run = str(make_work_dir(tmp_path, 'tiny', cfg, 0))
    with pytest.raises(InvalidArgument, match='--sizes'):
        run_tool('eval_resolution', [run, '--sizes', '28'], monkeypatch)
    with pytest.raises(InvalidArgument, match='--tune'):
        run_tool('eval_resolution', [run, '--tune'], monkeypatch)
    vit = tmp_path / 'vit'
    vit.mkdir()
    Config.fromfile(str(VIT_CONFIG)).dump(str(vit / 'vit.py'))
    (vit / 'best.pth').write_bytes(b'')
    with pytest.raises(InvalidArgument, match='point-cloud detectors and the others are not'):
        run_tool('eval_resolution', [run, str(vit), '--point-density', '1'], monkeypatch)
    with pytest.raises(InvalidArgument, match='--point-density is for point-cloud runs'):
        run_tool('eval_resolution', [str(vit), '--point-density', '1', '--sizes', '28'], monkeypatch)
    with pytest.raises(InvalidArgument, match='--sizes'):
        run_tool('eval_resolution', [str(vit)], monkeypatch)


def test_query_attention_over_points_sums_to_one_and_draws(rooms, tmp_path, monkeypatch, capsys) -> None:
    cfg = tiny_config(rooms)
    torch.manual_seed(0)
    model = MODELS.build(cfg.model).eval()
    assert isinstance(model, VDETR)
    dataset = DATASETS.build(dict(cfg.test_dataloader.dataset))
    points = dataset[0]['inputs']['points'][None]
    found = point_query_attention(model, points, layers=[-1], query=5)
    outputs = model.predict_sets(points)
    assert found.query == 5 and not found.chosen and list(found.maps) == [0]
    assert found.maps[0].shape == (4, model.backbone.num_samples)
    assert torch.allclose(found.maps[0].sum(-1), torch.ones(4), atol=1e-5)
    assert torch.allclose(found.tokens, outputs['xyz'][0]) and torch.allclose(found.boxes[0], outputs['boxes'][0, 0, 5])
    work_dir = make_work_dir(tmp_path, 'vis', cfg, 0)
    out = tmp_path / 'attention.png'
    assert run_tool('vis_attention', [str(work_dir / 'vdetr-tiny.py'), str(work_dir / 'best.pth'), '--scene', '1',
                                      '--heads', 'all', '--out', str(out)], monkeypatch) == 0
    assert 'the most confident query' in capsys.readouterr().out and out.stat().st_size > 0
    with pytest.raises(InvalidArgument, match='--scene'):
        run_tool('vis_attention', [str(work_dir / 'vdetr-tiny.py'), str(work_dir / 'best.pth'), '--scene', '9'],
                 monkeypatch)
    with pytest.raises(InvalidArgument, match='--sizes'):
        run_tool('vis_attention', [str(work_dir / 'vdetr-tiny.py'), str(work_dir / 'best.pth'), '--sizes', '28'],
                 monkeypatch)
