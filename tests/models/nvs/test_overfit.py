"""A check of the pipeline: the SRT-style model with GTA overfits one scene until its target views exceed 30 dB PSNR,
which a model without position cannot (it paints one colour per view)."""
from __future__ import annotations

import pytest
import torch

from vispe.datasets import NVSScenes, nvs_collate
from vispe.datasets.mv_scenes.nvs import NVSConfig, convert_nvs
from vispe.evaluation.nvs_metric import view_quality
from vispe.models import NovelViewTransformer


def overfit(root, encoding: str, steps: int) -> float:
    """Best PSNR of the first target view (checked every 100 steps) while training on every ray of one scene."""
    torch.manual_seed(0)
    net = NovelViewTransformer(encoding, embed_dim=64, num_heads=2, encoder_depth=2, decoder_depth=2, mlp_dim=128,
                               cnn_channels=(16, 32, 32, 64))
    batch = nvs_collate([NVSScenes(root, 'train')[0]])
    optimizer = torch.optim.Adam(net.parameters(), lr=2e-3)
    best = 0.0
    for step in range(1, steps + 1):
        loss = net(batch['inputs'], mode='loss')['loss']
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 100 == 0:
            with torch.no_grad():
                [result] = net(batch['inputs'], batch['data_samples'], 'predict')
            best = max(best, view_quality(result['pred'][0], result['target'][0], result['objects'][0])['psnr'])
            if best > 30:
                break
    return best


@pytest.mark.slow
def test_gta_overfits_one_scene_beyond_30_db_and_no_position_cannot(tmp_path) -> None:
    root = tmp_path / 'one-scene'
    convert_nvs(root, train=1, val=1, test=0, config=NVSConfig(image_size=(24, 32)), progress=False)
    assert overfit(root, 'GTA', 800) > 30
    assert overfit(root, 'NoPE', 300) < 25
