"""timm's model contract on a small vispe ViT for every 2D encoding, as timm's own tests/test_models.py checks its
models: forward, backward (every parameter gets a gradient), gradient checkpointing, forward_intermediates,
``features_only`` and torch.fx (forward and backward through the traced graph); TorchScript is refused with a
message that names torch.export."""
from __future__ import annotations

from typing import Any

import pytest
import torch
from timm.models import create_feature_extractor, get_graph_node_names

import vispe
from vispe.registry import ENCODINGS

from ..helpers import max_diff

ARCH = dict(img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=2, num_classes=5)


def two_d_encodings() -> list[tuple[str, dict[str, Any]]]:
    """(name, config) of every registered encoding that needs nothing beyond the image grid, with its first
    example's options."""
    configs = []
    for info in vispe.list_encodings():
        cls = ENCODINGS.get(info.name)
        if getattr(cls, 'requires', ()) or getattr(cls, 'family', '') == 'stack':
            continue
        configs.append((info.name, dict(type=info.name, **(cls.examples[0] if cls.examples else {}))))
    return configs


ENCODINGS_2D = two_d_encodings()


def small_vit(cfg: dict[str, Any], **kwargs: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return vispe.create_vit('vit_tiny_patch16_224', encoding=cfg, **{**ARCH, **kwargs})


@pytest.mark.parametrize('name, cfg', ENCODINGS_2D, ids=[name for name, _ in ENCODINGS_2D])
def test_forward_backward_and_gradient_checkpointing(name, cfg) -> None:
    vit = small_vit(cfg).train()
    images = torch.randn(2, 3, 32, 40)
    torch.manual_seed(1)
    logits = vit(images)
    assert logits.shape == (2, 5) and torch.isfinite(logits).all()
    logits.mean().backward()
    without_grad = [n for n, p in vit.named_parameters() if p.requires_grad and p.grad is None]
    assert not without_grad, f'{name}: no gradient for {without_grad}'
    vit.eval()
    with torch.no_grad():
        plain = vit(images)
        vit.set_grad_checkpointing(True)
        assert max_diff(vit(images), plain) <= 1e-6


@pytest.mark.parametrize('name, cfg', ENCODINGS_2D, ids=[name for name, _ in ENCODINGS_2D])
def test_forward_intermediates_and_features_only(name, cfg) -> None:
    vit = small_vit(cfg).eval()
    images = torch.randn(2, 3, 32, 40)
    with torch.no_grad():
        final, intermediates = vit.forward_intermediates(images, indices=[0, 2])
        assert max_diff(final, vit.forward_features(images)) <= 1e-6
        assert [tuple(t.shape) for t in intermediates] == [(2, 32, 4, 5)] * 2
        features = small_vit(cfg, features_only=True, out_indices=(0, 2)).eval()
        assert type(features).__name__ == 'FeatureGetterNet' and features.feature_info.channels() == [32, 32]
        maps = features(images)
    assert len(maps) == 2 and all(max_diff(a, b) <= 1e-6 for a, b in zip(maps, intermediates))


@pytest.mark.parametrize('name, cfg', ENCODINGS_2D, ids=[name for name, _ in ENCODINGS_2D])
def test_torch_fx_forward_and_backward(name, cfg) -> None:
    vit = small_vit(cfg).eval()
    _, eval_nodes = get_graph_node_names(vit)
    traced = create_feature_extractor(vit, return_nodes=[eval_nodes[-1]])
    images = torch.randn(2, 3, 32, 40)
    with torch.no_grad():
        assert max_diff(traced(images)[eval_nodes[-1]], vit(images)) <= 1e-6
    vit.train()
    train_nodes, _ = get_graph_node_names(vit)
    traced = create_feature_extractor(vit, return_nodes=[train_nodes[-1]]).train()
    traced(images)[train_nodes[-1]].mean().backward()
    assert any(p.grad is not None for p in traced.parameters())


@pytest.mark.parametrize('name, cfg', ENCODINGS_2D[:1], ids=[name for name, _ in ENCODINGS_2D[:1]])
def test_torchscript_is_refused_naming_torch_export(name, cfg) -> None:
    with pytest.raises(RuntimeError, match='torch.export'):
        torch.jit.script(small_vit(cfg))
