"""Properties every registered image encoding must have inside a tiny ViT, beyond the contract of every encoding
(tests/encodings/test_contract.py): any grid shape, a listing, and hooks that are real.

New encodings are picked up from the registry, one model per entry of the class's ``examples``.
"""
from __future__ import annotations

import pytest
import torch

import vispe

from ..helpers import tiny_vit

EXAMPLES = [dict(type=name, **options) for name, cls in sorted(vispe.registry.ENCODINGS.module_dict.items())
            if isinstance(cls, type) and issubclass(cls, vispe.PositionEncoding) and not set(cls.requires) - {'grid'}
            for options in cls.examples]
IDS = [str(example) for example in EXAMPLES]
BUILT_IN = [info.name for info in vispe.list_encodings()]
GRIDS = [(14, 14), (6, 10), (1, 9), (20, 3)]


@pytest.mark.parametrize('config', EXAMPLES, ids=IDS)
def test_output_shape_at_square_non_square_and_line_grids(config) -> None:
    vit = tiny_vit(config)
    for rows, cols in GRIDS:
        with torch.no_grad():
            tokens = vit.forward_features(torch.randn(2, 3, rows * 4, cols * 4))
        assert tokens.shape == (2, 1 + rows * cols, 64), (rows, cols)
        assert torch.isfinite(tokens).all()


@pytest.mark.parametrize('name', BUILT_IN)
def test_listed_with_family_hooks_and_paper(name) -> None:
    info = next(info for info in vispe.list_encodings() if info.name == name)
    assert info.family and info.paper
    assert info.hooks == vispe.registry.ENCODINGS.get(name).hooks()


@pytest.mark.parametrize('config', EXAMPLES, ids=IDS)
def test_every_hook_an_encoding_lists_changes_the_logits(config) -> None:
    """The hooks an encoding uses are real: with its parameters randomised (many start at zero), putting the base
    class's no-op in place of any one of them changes the logits (a hook that is a no-op leaves them bit-equal)."""
    torch.manual_seed(0)
    vit = tiny_vit(config)
    with torch.no_grad():
        for parameter in vit.encoding.parameters():
            parameter.normal_()
    images = torch.randn(2, 3, 32, 48)
    with torch.no_grad():
        logits = vit(images)
    assert vit.encoding.active_hooks <= set(vit.encoding.hooks())
    for hook in vit.encoding.active_hooks:
        setattr(vit.encoding, hook, getattr(vispe.PositionEncoding, hook).__get__(vit.encoding))
        with torch.no_grad():
            without = vit(images)
        delattr(vit.encoding, hook)
        assert not torch.equal(logits, without), hook


def test_no_option_shadows_an_nn_module_member() -> None:
    """An option is kept as an attribute of the same name: one named like an nn.Module member (``apply``, ``train``,
    ``to``, ...) would replace it and break the model's own calls."""
    from torch import nn

    from vispe.encodings.builder import registered_encodings
    for name, cls in registered_encodings().items():
        shadowed = sorted(option for option in cls.options if hasattr(nn.Module, option))
        assert not shadowed, f'{name} declares options named like nn.Module members: {shadowed}'
