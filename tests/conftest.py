"""Shared fixtures: offline hub, seeded RNG, and a tiny ViT configuration that runs fast on 2 CPU cores."""
from __future__ import annotations

import os
import random
from pathlib import Path

import numpy as np
import pytest
import torch

os.environ.setdefault('HF_HUB_OFFLINE', '1')
# One thread per test process, and in the tools the tests start: results then do not depend on the machine's
# core count (BLAS reductions split by thread), and `make test` spreads the tests over the cores with
# pytest-xdist instead (a second thread only waits on these tiny models).
os.environ['OMP_NUM_THREADS'] = '1'
torch.set_num_threads(1)

REPO_ROOT = Path(__file__).resolve().parents[1]

# A small timm ViT: 14x14 grid at 56 px with patch 4, 2 blocks, 4 heads of width 16.
TINY_VIT = dict(model_name='vit_tiny_patch16_224', img_size=56, patch_size=4, embed_dim=64, depth=2, num_heads=4,
                num_classes=10)


@pytest.fixture(autouse=True)
def _seed() -> None:
    random.seed(0)
    np.random.seed(0)
    torch.manual_seed(0)


@pytest.fixture
def repo_root() -> Path:
    return REPO_ROOT
