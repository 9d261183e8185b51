"""DETR configs through mmengine's Runner (sine, a rotary and a bias encoding), and the COCO configs build."""
from __future__ import annotations

import json

import pytest
import torch

import vispe
from vispe.engine import build_runner, load_config
from vispe.registry import DATASETS, MODELS

from ..conftest import REPO_ROOT
from .conftest import data_overrides

SMALL = {'model.num_queries': 8, 'model.embed_dim': 32, 'model.encoder.depth': 1, 'model.encoder.num_heads': 4,
         'model.encoder.mlp_dim': 64, 'model.decoder.depth': 1, 'model.decoder.num_heads': 4,
         'model.decoder.mlp_dim': 64, 'train_dataloader.batch_size': 8, 'val_dataloader.batch_size': 8,
         'train_cfg.max_epochs': 1, 'train_cfg.val_interval': 1, 'default_hooks.logger.interval': 1,
         'log_level': 'WARNING'}


@pytest.mark.slow
@pytest.mark.parametrize('encoding', ['sine', 'rope-axial', 'irpe-ctx'])
def test_a_few_runner_iterations_write_a_checkpoint(encoding, fmnist_det, tmp_path) -> None:
    config = REPO_ROOT / 'configs' / 'detr' / f'detr-r18_{encoding}_fmnist-det.py'
    cfg = load_config(config, {**data_overrides(fmnist_det), **SMALL}, tmp_path)
    cfg.experiment_name = f'{config.stem}_{tmp_path.name}'
    runner = build_runner(cfg)
    runner.train()
    assert runner.iter == 3  # 24 images, batch 8
    best = torch.load(tmp_path / 'best.pth', weights_only=True)
    assert 'coco/bbox_mAP' in best['meta']['metrics']
    fresh = MODELS.build(cfg.model)
    vispe.load_checkpoint(fresh, tmp_path / 'best.pth')
    assert torch.equal(fresh.encoder.layers[0].attn.qkv.weight, runner.model.encoder.layers[0].attn.qkv.weight)


def write_fake_coco(root) -> None:
    """Two images and boxes in COCO's layout, with two of COCO's category ids."""
    from PIL import Image
    (root / 'annotations').mkdir(parents=True)
    for split in ('train2017', 'val2017'):
        (root / split).mkdir()
        for index in (1, 2):
            Image.new('RGB', (64, 48), (index * 60, 10, 10)).save(root / split / f'{index:012d}.jpg')
        coco = dict(images=[dict(id=i, file_name=f'{i:012d}.jpg', width=64, height=48) for i in (1, 2)],
                    annotations=[dict(id=1, image_id=1, category_id=1, bbox=[4, 4, 20, 30], area=600, iscrowd=0),
                                 dict(id=2, image_id=2, category_id=90, bbox=[10, 8, 30, 20], area=600, iscrowd=0)],
                    categories=[dict(id=1, name='person'), dict(id=90, name='toothbrush')])
        (root / 'annotations' / f'instances_{split}.json').write_text(json.dumps(coco))


@pytest.mark.parametrize('config', sorted((REPO_ROOT / 'configs' / 'detr').glob('detr-r50_*_coco.py')),
                         ids=lambda p: p.stem)
def test_coco_configs_build_model_and_data(config, tmp_path) -> None:
    write_fake_coco(tmp_path / 'coco')
    root = str(tmp_path / 'coco') + '/'
    overrides = {'model.backbone.pretrained': False, 'model.num_classes': 2}
    for loader, split in (('train', 'train2017'), ('val', 'val2017')):
        overrides[f'{loader}_dataloader.dataset.ann_file'] = f'{root}annotations/instances_{split}.json'
        overrides[f'{loader}_dataloader.dataset.data_root'] = root + split
    cfg = load_config(config, overrides, tmp_path / 'work')
    model = MODELS.build(cfg.model).eval()
    assert model.backbone.stride == 32 and len(model.encoder.layers) == 6 and model.query_embed.num_embeddings == 100
    train = DATASETS.build(cfg.train_dataloader.dataset)
    item = train[0]
    assert min(item['inputs'].shape[-2:]) in range(480, 801, 32)
    val = DATASETS.build(cfg.val_dataloader.dataset)
    assert val[1]['inputs'].shape[-2:] == (800, 1066) and val[1]['data_samples']['labels'].tolist() == [1]
    batch = vispe.registry.FUNCTIONS.get('detr_collate')([val[0], val[1]])
    with torch.no_grad():
        predictions = model(batch['inputs'][:, :, :256, :320], batch['masks'][:, :256, :320], batch['data_samples'],
                            mode='predict')
    assert predictions[0]['boxes'].shape == (100, 4)
