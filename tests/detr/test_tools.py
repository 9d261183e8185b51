"""eval_resolution and vis_attention on a (briefly) trained detector."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

import pytest
import torch
from torchvision.ops import box_convert

from vispe.engine import build_runner, load_config
from vispe.visualization import capture_cross_attention

from ..conftest import REPO_ROOT
from ..helpers import load_tool
from .conftest import data_overrides
from .test_training import SMALL


@pytest.fixture(scope='module')
def trained_detector(fmnist_det, tmp_path_factory):
    work_dir = tmp_path_factory.mktemp('detr-rope')
    config = REPO_ROOT / 'configs' / 'detr' / 'detr-r18_rope-axial_fmnist-det.py'
    cfg = load_config(config, {**data_overrides(fmnist_det), **SMALL}, work_dir)
    cfg.experiment_name = f'{config.stem}_tools'
    runner = build_runner(cfg)
    runner.train()
    return work_dir, runner.model.eval()


@pytest.mark.slow
def test_eval_resolution_gives_map_per_size_and_tunes_on_minival(trained_detector, tmp_path) -> None:
    work_dir, _ = trained_detector
    out = tmp_path / 'detr'
    result = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'eval_resolution.py'), str(work_dir),
                             '--sizes', '64', '96', '--tune', '--out', str(out)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr
    assert 'model (bbox_mAP)' in result.stdout
    report = json.loads(out.with_suffix('.json').read_text())
    assert [run['label'] for run in report['runs']] == [work_dir.name, f'{work_dir.name}+tuned']
    for run in report['runs']:
        assert set(run['results']) == {'64', '96'} and all(0 <= r['bbox_mAP'] <= 1 for r in run['results'].values())
    tuning = report['tuning'][work_dir.name]['96']
    assert tuning['held_out_set']['ann_file'].endswith('minival.json')
    assert out.with_suffix('.csv').read_text().startswith('model,size,bbox_mAP,')
    assert out.with_suffix('.png').is_file()


@pytest.mark.slow
def test_vis_attention_draws_decoder_and_encoder_maps(trained_detector, fmnist_det, tmp_path) -> None:
    work_dir, _ = trained_detector
    config = next(work_dir.glob('*.py'))
    for extra, name in ((['--decoder-query', '2', '--layers', '0'], 'decoder.png'), (['--query', 'center'], 'enc.png')):
        result = subprocess.run([sys.executable, str(REPO_ROOT / 'tools' / 'vis_attention.py'), str(config),
                                 str(work_dir / 'best.pth'), '--image', str(fmnist_det / 'val' / '000001.png'),
                                 '--sizes', '64', '96', '--out', str(tmp_path / name), *extra],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / name).stat().st_size > 0


@pytest.mark.slow
def test_cross_attention_sums_to_one_over_real_keys_and_capture_is_free(trained_detector) -> None:
    _, model = trained_detector
    images = torch.randn(2, 3, 64, 80)
    masks = torch.ones(2, 64, 80, dtype=torch.bool)
    masks[1, :, 48:] = False
    with torch.no_grad():
        plain = model(images, masks, mode='tensor')
    maps = capture_cross_attention(model, images, masks=masks)
    assert len(maps) == len(model.decoder.layers)
    stride = model.backbone.stride
    grid = (64 // stride, 80 // stride)
    torch.testing.assert_close(maps[0].sum(-1), torch.ones_like(maps[0].sum(-1)))
    padded_keys = maps[0][1].reshape(*maps[0].shape[1:3], *grid)[..., 48 // stride:]
    assert padded_keys.abs().max() == 0
    with torch.no_grad():
        again = model(images, masks, mode='tensor')
    torch.testing.assert_close(again['boxes'], plain['boxes'], atol=1e-6, rtol=0)
    assert all(layer.cross_attn.attn_probs is None for layer in model.decoder.layers)


class GroundTruthDetector(torch.nn.Module):
    """Predicts each image's own annotated boxes (score 1): AP 1 when scored against the data's annotations."""

    def test_step(self, batch: dict) -> list[dict]:
        outputs = []
        for sample in batch['data_samples']:
            height, width = sample['orig_size']
            boxes = box_convert(sample['boxes'], 'cxcywh', 'xyxy') * torch.tensor([width, height, width, height])
            outputs.append(dict(image_id=sample['image_id'], boxes=boxes, scores=torch.ones(len(boxes)),
                                labels=sample['labels']))
        return outputs


def test_tune_scores_on_the_validation_annotations(fmnist_det) -> None:
    """The held-out score of --tune is measured against the validation set's own annotations (it was once scored
    against the test set's json, whose image ids overlap minival's: mAP near 0 for every setting)."""
    eval_resolution = load_tool('eval_resolution')
    config = REPO_ROOT / 'configs' / 'detr' / 'detr-r18_rope-axial_fmnist-det.py'
    cfg = load_config(config, data_overrides(fmnist_det))
    args = argparse.Namespace(eval_mode='upsample', tune_subset=1000, workers=0)
    _, record = eval_resolution.tune_at_size(GroundTruthDetector(), cfg, [], 96, args, batch_size=4)
    assert record['held_out_score_built'] == pytest.approx(1.0)
    assert record['held_out_set']['ann_file'].endswith('minival.json')
