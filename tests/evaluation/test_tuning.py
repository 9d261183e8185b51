"""Test-time option search: the knobs an encoding declares, coordinate ascent that keeps the trained values on ties."""
from __future__ import annotations

import pytest

import vispe
from vispe.encodings.options import Search
from vispe.evaluation.tuning import applied, coordinate_search, tunable_knobs


def tiny_vit(encoding: dict) -> vispe.models.VisionTransformer:
    return vispe.create_vit('vit_tiny_patch16_224', img_size=28, patch_size=4, in_chans=1, embed_dim=32, depth=1,
                            num_heads=2, num_classes=3, encoding=encoding)


def test_knobs_of_nested_encodings_with_the_built_value_first() -> None:
    vit = tiny_vit(dict(type='RPE2D', base=dict(type='RoPEAxial', theta=50.0), max_grid=(28, 28)))
    knobs = {knob.path: knob.candidates for knob in tunable_knobs(vit)}
    assert knobs == {'encoding.eval_positions': ('expected', 'random', 'contiguous'),
                     'encoding.base.theta': (50.0, 25.0, 100.0, 200.0, 400.0),
                     'encoding.base.position_scale': (1.0, 1 / 3, 1 / 2, 2 / 3)}
    assert [knob.path for knob in tunable_knobs(tiny_vit(dict(type='LookHere')))] == ['encoding.global_slope']
    assert tunable_knobs(tiny_vit(dict(type='PEG'))) == []


def test_search_keeps_the_built_values_on_ties_and_finds_the_best() -> None:
    vit = tiny_vit(dict(type='RoPEAxial'))
    knobs = tunable_knobs(vit)
    encoding = vit.encoding
    flat = coordinate_search(knobs, lambda: 1.0)
    assert flat[0] == (100.0, 1.0) and flat[1] == flat[2] == 1.0
    best = coordinate_search(knobs, lambda: -abs(encoding.theta - 400) - abs(encoding.position_scale - 0.5))
    assert best[0] == (400.0, 0.5) and best[2] == -300.5 and best[1] == 0
    assert (encoding.theta, encoding.position_scale) == (100.0, 1.0)
    with applied(knobs, (200.0, 0.5)):
        assert (encoding.theta, encoding.position_scale) == (200.0, 0.5)
    assert encoding.theta == 100.0


def test_search_declarations_are_for_test_time_options_with_one_kind_of_candidate() -> None:
    with pytest.raises(TypeError, match='either values or factors'):
        Search()
    with pytest.raises(TypeError, match='for test-time options'):
        vispe.encodings.Option(float, search=Search(factors=(2.0,)))
    assert Search(factors=(0.5, 1.0, 2.0)).candidates(3.0) == (3.0, 1.5, 6.0)
