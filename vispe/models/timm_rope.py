"""timm's ports of naver-ai/rope-vit (``vit_{small,base,large}_patch16_rope[_mixed][_ape]_224``, timm's Eva class) as
vispe ViTs.

Each of these names is a timm ``VisionTransformer`` architecture with a RoPE encoding and LayerScale: RoPE-Axial
(theta 100) or RoPE-Mixed (theta 10, learned per-layer frequencies), ``_ape`` adding a learned APE table that does
not cover the class token. :func:`timm_rope_equivalent` says which; :func:`vispe.create_vit` builds them under these
names, and loads their timm weights with ``pretrained=True`` (Eva's names are adopted by
:func:`vispe.checkpoint.adopt_foreign_entries`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import timm
from timm.models import model_entrypoint

NAVER_ROPE = re.compile(r'^vit_(?P<size>small|base|large)_patch16_rope(?P<mixed>_mixed)?(?P<ape>_ape)?_224$')
# The LayerScale init of every rope-vit model (their DeiT-III recipe).
ROPE_VIT_INIT_VALUES = 1e-5


@dataclass(frozen=True)
class TimmRoPEEquivalent:
    """The vispe form of a timm RoPE ViT name: timm's ``VisionTransformer`` architecture ``base``, the encoding
    config and the extra timm arguments (LayerScale)."""

    base: str
    encoding: Any
    timm_kwargs: dict[str, Any]


def timm_rope_equivalent(name: str) -> TimmRoPEEquivalent | None:
    """The vispe equivalent of timm's rope-vit port ``name`` (a pretrained tag after a dot is allowed); None for
    other names."""
    architecture = name.split('.', 1)[0]
    match = NAVER_ROPE.match(architecture)
    if match is None:
        return None
    rope = dict(type='RoPEMixed') if match.group('mixed') else dict(type='RoPEAxial')
    encoding = [dict(type='LearnedAPE', no_embed_class=True), rope] if match.group('ape') else rope
    return TimmRoPEEquivalent(f'vit_{match.group("size")}_patch16_224', encoding,
                              dict(init_values=ROPE_VIT_INIT_VALUES))


def check_vision_transformer_name(name: str) -> None:
    """Refuse a timm model name that is not a ``VisionTransformer`` architecture (e.g. timm's Eva-class RoPE ViTs
    other than the rope-vit ports), saying how to load such a model."""
    module = model_entrypoint(name.split('.', 1)[0]).__module__
    if module == 'timm.models.vision_transformer':
        return
    family = module.rsplit('.', 1)[-1]
    rope_names = ', '.join(sorted(n for n in timm.list_models('vit_*rope*') if timm_rope_equivalent(n)))
    raise ValueError(
        f'{name!r} is a timm {family!r} model, not a plain VisionTransformer (patch embedding, then blocks) that vispe '
        f'can give an encoding. Load it with timm.create_model({name!r}); or pick a VisionTransformer name '
        f'(timm.list_models("vit_*") from timm.models.vision_transformer). timm\'s RoPE ViTs that vispe builds as '
        f'themselves: {rope_names}.')
