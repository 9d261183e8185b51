"""timm's private names that vispe imports (vispe/models/vit_features.py) are still there, with the signatures vispe
calls. When timm moves one, this test fails first: update vit_features.py and the timm pin in pyproject.toml."""
from __future__ import annotations

import inspect
import tomllib

import timm
import torch

from vispe.models import vit_features


def test_the_private_names_keep_their_signatures() -> None:
    assert list(inspect.signature(vit_features.feature_take_indices).parameters)[:2] == ['num_features', 'indices']
    assert vit_features.feature_take_indices(4, 2) == ([2, 3], 3)
    assert 'out_indices' in inspect.signature(vit_features.FeatureGetterNet).parameters
    cfg = vit_features.pretrained_cfg_for_features({'num_classes': 10, 'classifier': 'head', 'mean': (0.5,)})
    assert 'num_classes' not in cfg and cfg['mean'] == (0.5,)


def test_timm_is_pinned_below_its_next_minor_version(repo_root) -> None:
    dependencies = tomllib.loads((repo_root / 'pyproject.toml').read_text())['project']['dependencies']
    pin = next(dependency for dependency in dependencies if dependency.startswith('timm'))
    major, minor = (int(part) for part in timm.__version__.split('.')[:2])
    assert f'<{major}.{minor + 1}' in pin, pin


def test_features_only_extractor_returns_block_maps() -> None:
    import vispe
    extractor = vispe.create_vit('vit_tiny_patch16_224', encoding='RoPEAxial', img_size=32, patch_size=8,
                                 embed_dim=32, depth=3, num_heads=4, features_only=True, out_indices=2)
    maps = extractor(torch.randn(1, 3, 32, 40))
    assert [tuple(m.shape) for m in maps] == [(1, 32, 4, 5), (1, 32, 4, 5)]
    assert extractor.pretrained_cfg is not None
