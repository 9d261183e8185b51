"""Registries are children of mmengine's roots; unknown names get the closest match."""
from __future__ import annotations

import mmengine.registry as mm
import pytest
import torch

import vispe
from vispe import registry
from vispe.registry import ENCODINGS, MODELS, UnknownTypeError


def test_every_mmengine_root_has_a_vispe_child() -> None:
    roots = [name for name in dir(mm) if name.isupper() and isinstance(getattr(mm, name), mm.Registry)]
    assert len(roots) >= 23
    for name in roots:
        child = getattr(registry, name)
        assert child.parent is getattr(mm, name), name
        assert child.scope == 'vispe'
        assert getattr(mm, name).children['vispe'] is child


def test_encodings_build_through_mmengine_scopes() -> None:
    built = mm.MODELS.build(dict(type='vispe.SinCos2D', embed_dim=8))
    assert isinstance(built, vispe.encodings.SinCos2D)
    with mm.DefaultScope.overwrite_default_scope('vispe'):
        assert isinstance(mm.MODELS.build(dict(type='NoPE')), vispe.encodings.NoPE)


def test_list_encodings_table() -> None:
    table = vispe.list_encodings()
    names = [info.name for info in table]
    assert {'NoPE', 'LearnedAPE', 'SinCos2D', 'FourierFeatures'} <= set(names)
    assert 'TimmViT' not in names and 'VisionTransformer' not in names
    ape = next(info for info in table if info.name == 'LearnedAPE')
    assert ape.hooks == ('embed',) and ape.family == 'absolute'
    text = str(table)
    assert text.splitlines()[0].split() == ['name', 'family', 'hooks', 'requires', 'options', 'paper']
    assert "| `SinCos2D` | absolute | embed | grid | temperature=10000.0, resize='extend' (test-time) |" in table.markdown()


def test_unknown_encoding_names_closest_and_lists_registered() -> None:
    with pytest.raises(UnknownTypeError) as info:
        vispe.build_encoding(dict(type='SinCos'))
    message = str(info.value)
    assert "Did you mean 'SinCos2D' or 'SinCosXYZ'?" in message
    assert 'LOOPE, LearnedAPE, LookHere, MultiViewSine, NoPE, PEG, PETR, PPE3D, RPE2D, RoPEAxial, RoPEMixed, SeqPE, ' \
        'SinCos2D, SinCosXYZ, TriPlane, VertexRPE, iRPE' in message
    assert 'custom_imports' in message


def test_unknown_type_in_vispe_registry_build() -> None:
    with pytest.raises(UnknownTypeError, match="Did you mean 'TimmViT'"):
        MODELS.build(dict(type='TimViT'))


def test_a_model_is_not_an_encoding() -> None:
    with pytest.raises(TypeError, match="'TimmViT' is registered but is not an encoding: it is "
                                        "vispe.models.vit_factory.create_vit, not a subclass of vispe.PositionEncoding"):
        vispe.build_encoding(dict(type='TimmViT'))


def test_a_registered_class_that_is_not_an_encoding_is_named_as_such() -> None:
    class NotAnEncoding(torch.nn.Module):
        pass

    ENCODINGS.register_module(module=NotAnEncoding)
    try:
        with pytest.raises(TypeError, match="'NotAnEncoding' is registered but is not an encoding: it is "
                                            ".*NotAnEncoding, not a subclass of vispe.PositionEncoding. An "
                                            "encoding derives from it"):
            vispe.build_encoding(dict(type='NotAnEncoding'))
    finally:
        ENCODINGS.module_dict.pop('NotAnEncoding')


def test_build_encoding_forms() -> None:
    assert isinstance(vispe.build_encoding('NoPE'), vispe.encodings.NoPE)
    instance = vispe.encodings.SinCos2D(embed_dim=8)
    assert vispe.build_encoding(instance) is instance
    stack = vispe.build_encoding(['NoPE', dict(type='SinCos2D')], embed_dim=8, num_heads=2)
    assert isinstance(stack, vispe.encodings.EncodingStack) and len(stack.encodings) == 2
    with pytest.raises(TypeError, match='It accepts: embed_dim, temperature'):
        vispe.build_encoding(dict(type='SinCos2D', embed_dim=8, temprature=1.0))
    with pytest.raises(TypeError, match='dict with a "type" key'):
        vispe.build_encoding(dict(embed_dim=8))


def test_registering_a_new_encoding_in_process() -> None:
    @ENCODINGS.register_module(force=True)
    class ShiftPE(vispe.PositionEncoding):
        def embed(self, x, pos):
            return x + 1

    try:
        encoding = vispe.build_encoding('ShiftPE')
        assert encoding.hooks() == ('embed',)
        assert torch.equal(encoding.embed(torch.zeros(1, 2, 3), None), torch.ones(1, 2, 3))
    finally:
        ENCODINGS.module_dict.pop('ShiftPE')


def test_vispe_builds_ignore_a_foreign_default_scope() -> None:
    with mm.DefaultScope.overwrite_default_scope('mmengine'):
        model = MODELS.build(dict(type='ImageClassifier', backbone=dict(
            type='TimmViT', model_name='vit_tiny_patch16_224', img_size=16, patch_size=8, depth=1, num_classes=2)))
    assert isinstance(model.backbone, vispe.VisionTransformer)
