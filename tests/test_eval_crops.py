"""tools/eval_resolution.py on crop-depth models (KPE's task), on a tiny mv-crops-depth set and untrained tiny models:
one row per run (or seed group) and split, AbsRel per crop offset, the files, and the refusals."""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

import pytest
from mmengine.config import Config

from tests.conftest import REPO_ROOT
from tests.helpers import load_tool, untrained_work_dir
from vispe.datasets.mv_scenes.crops import CROPS_SPLITS, CropsConfig, convert_crops
from vispe.datasets.stereo_motorcycle import motorcycle_rgbd
from vispe.engine.arguments import InvalidArgument
from vispe.evaluation import crop_sweep

KPE_CONFIG = REPO_ROOT / 'configs' / 'crops' / 'vit-t4_kpe-dense_mv-crops-depth.py'
VIT_CONFIG = REPO_ROOT / 'configs' / 'vit' / 'vit-t4_ape_fmnist-28.py'


def run_tool(argv: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, 'argv', ['eval_resolution.py', *argv])
    return load_tool('eval_resolution').main()


@pytest.fixture(scope='module')
def work_dirs(tmp_path_factory) -> list[Path]:
    parent = tmp_path_factory.mktemp('crops_sweep')
    root = parent / 'mv-crops-depth'
    convert_crops(root, {split: 1 for split in CROPS_SPLITS}, config=CropsConfig(image_size=(24, 32)),
                  progress=False)
    cfg = Config.fromfile(str(KPE_CONFIG))
    cfg.model.backbone.update(depth=1)
    for loader in ('train_dataloader', 'val_dataloader', 'test_dataloader'):
        cfg[loader].dataset.update(data_root=str(root))
    return [untrained_work_dir(parent, f'tiny_s{seed}', cfg, seed, 'crops-tiny.py') for seed in (0, 1)]


def test_sweep_writes_every_split_and_groups_seeds(work_dirs, tmp_path, monkeypatch, capsys) -> None:
    assert crop_sweep.CROPS.is_config(Config.fromfile(str(KPE_CONFIG)))
    assert not crop_sweep.CROPS.is_config(Config.fromfile(str(VIT_CONFIG)))
    out = tmp_path / 'sweep'
    assert run_tool([*map(str, work_dirs), '--focal-splits', 'test', 'test-tele', '--crop-offsets', 'center',
                     'corner', '--group-seeds', '--out', str(out)], monkeypatch) == 0
    table = capsys.readouterr().out
    header = table.splitlines()[0].split()
    assert header[-3:] == ['absrel', 'absrel_center', 'absrel_corner'] and 'absrel_edge' not in header
    assert [line.split()[:2] for line in table.splitlines()[2:4]] == [['tiny', 'test'], ['tiny', 'test-tele']]
    assert '±' in table.splitlines()[2]
    rows = list(csv.DictReader(open(out.with_suffix('.csv'))))
    assert [(r['model'], r['split']) for r in rows] == [(f'tiny_s{seed}', split) for seed in (0, 1)
                                                        for split in ('test', 'test-tele')]
    assert all(float(r['depth/absrel']) > 0 and 'depth/delta1_edge' in r for r in rows)
    report = json.loads(out.with_suffix('.json').read_text())
    assert [result['split'] for result in report['runs'][0]['results']] == ['test', 'test-tele']
    assert report['seed_groups'][0]['members'] == ['tiny_s0', 'tiny_s1']
    assert out.with_suffix('.png').stat().st_size > 10_000 and out.with_suffix('.seeds.csv').is_file()


def test_options_of_other_kinds_are_refused(work_dirs, tmp_path, monkeypatch) -> None:
    with pytest.raises(InvalidArgument, match='--sizes'):
        run_tool([str(work_dirs[0]), '--sizes', '32', '--out', str(tmp_path / 'x')], monkeypatch)
    vit = untrained_work_dir(tmp_path, 'vit', Config.fromfile(str(VIT_CONFIG)), 0, 'vit.py')
    with pytest.raises(InvalidArgument, match='crop-depth runs'):
        run_tool([str(vit), '--sizes', '28', '--crop-offsets', 'center', '--out', str(tmp_path / 'y')], monkeypatch)


def test_vis_crop_depth_draws_set_images_and_the_real_stereo_pair(work_dirs, tmp_path, monkeypatch, capsys) -> None:
    tool = load_tool('vis_crop_depth')
    for image in ('test-tele:0', 'stereo-motorcycle'):
        out = tmp_path / f'{image.replace(":", "_")}.png'
        argv = ['vis_crop_depth.py', *map(str, work_dirs), '--image', image, '--out', str(out)]
        monkeypatch.setattr(sys, 'argv', argv)
        assert tool.main() == 0
        assert '9 crops, 2 runs' in capsys.readouterr().out and out.stat().st_size > 10_000
    depth, intrinsics = motorcycle_rgbd()[1:]
    assert 0.9 < (depth > 0).mean() < 0.95 and 2.0 < depth[depth > 0].min() < depth.max() < 5.1
    assert intrinsics[0, 0] == pytest.approx(994.978)
    monkeypatch.setattr(sys, 'argv', ['vis_crop_depth.py', str(work_dirs[0]), '--image', 'test:7', '--out',
                                      str(tmp_path / 'x.png')])
    with pytest.raises(InvalidArgument, match='beyond the 1 images'):
        tool.main()
