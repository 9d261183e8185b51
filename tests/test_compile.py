"""A ViT with any 2D encoding exports: torch.export gives the same logits and the ONNX file of torch.onnx's exporter
gives them in onnxruntime (that every encoding compiles with no graph break is in tests/encodings/test_contract.py)."""
from __future__ import annotations

import warnings

import pytest
import torch

import vispe

from .helpers import max_diff


def example_id(cfg: dict) -> str:
    return '-'.join([cfg['type'], *(f'{key}={value}' for key, value in cfg.items() if key != 'type')])


def small_vit(encoding: dict) -> vispe.VisionTransformer:
    torch.manual_seed(0)
    return vispe.create_vit('vit_tiny_patch16_224', encoding=encoding, num_classes=5, depth=2, img_size=32,
                            patch_size=8).eval()


@pytest.mark.parametrize('encoding', [dict(type='RoPEMixed'), dict(type='iRPE', on='qkv'), dict(type='LookHere'),
                                      dict(type='ComRoPE', variant='LD', block_size=4)], ids=lambda cfg: cfg['type'])
def test_export_gives_the_same_logits(encoding) -> None:
    vit = small_vit(encoding)
    images = torch.randn(2, 3, 32, 40)
    exported = torch.export.export(vit, (images,), strict=False)
    assert max_diff(exported.module()(images), vit(images)) <= 1e-5


def first_examples() -> list[dict]:
    """The first example configuration of every image encoding, and ComRoPE's block rotation (b = 4)."""
    examples = [dict(type=info.name, **vispe.registry.ENCODINGS.get(info.name).examples[0])
                for info in vispe.list_encodings(image_only=True)]
    return [*examples, dict(type='ComRoPE', variant='LD', block_size=4)]


@pytest.mark.parametrize('encoding', first_examples(), ids=example_id)
def test_onnx_export_runs_in_onnxruntime(encoding, tmp_path) -> None:
    """torch.onnx (dynamo) writes the ViT and onnxruntime gives its logits. ComRoPE with b > 2 cannot: its rotation
    needs an eigendecomposition (or matrix exponential) of the learned generators, which ONNX has no operator for."""
    from vispe.export import export_onnx, run_onnx
    vit = small_vit(encoding)
    images = torch.randn(2, 3, 32, 40)
    if encoding.get('block_size', 2) > 2:
        with pytest.raises(torch.onnx.errors.OnnxExporterError, match='linalg_eigh'):
            export_onnx(vit, (images,), tmp_path / 'vit.onnx')
        return
    path = export_onnx(vit, (images,), tmp_path / 'vit.onnx')
    with torch.no_grad():
        assert max_diff(torch.from_numpy(run_onnx(path, [images])[0]), vit(images)) <= 1e-5


@pytest.mark.parametrize('encoding', [dict(type='RoPEAxial'), dict(type='PEG'), dict(type='LearnedAPE')],
                         ids=lambda cfg: cfg['type'])
def test_timm_fx_feature_extraction_returns_the_block_outputs(encoding) -> None:
    """timm's torch.fx feature extractor traces a vispe ViT (positions, token hooks and blocks are leaves)."""
    from timm.models import create_feature_extractor
    vit = small_vit(encoding)
    images = torch.randn(2, 3, 32, 40)
    extractor = create_feature_extractor(vit, return_nodes={'blocks.0': 'first', 'head': 'logits'})
    features = extractor(images)
    captured = []
    handle = vit.blocks[0].register_forward_hook(lambda module, args, out: captured.append(out))
    logits = vit(images)
    handle.remove()
    assert max_diff(features['first'], captured[0]) == 0.0 and max_diff(features['logits'], logits) == 0.0


def test_torchscript_is_refused_with_the_alternatives() -> None:
    vit = small_vit(dict(type='RoPEAxial'))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')  # torch.jit.script's own deprecation warning
        with pytest.raises(RuntimeError, match=r'do not support torch.jit.script .* torch.export.export\(model'):
            torch.jit.script(vit)
