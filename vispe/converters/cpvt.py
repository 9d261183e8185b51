"""CPVT on DeiT (Chu et al., "Conditional Positional Encodings for Vision Transformers", ICLR 2023) as a registered
family: ``vispe convert cpvt``.

Meituan-AutoML/CPVT holds only a README (no code, no checkpoint link); the PEG's code is Twins' ``gvt.PosCNN``
(Meituan-AutoML/Twins): ``proj.0``, a depthwise k×k conv with bias and zero padding, added to its input (stride 1).
CPVT replaces DeiT's absolute embedding by PEGs: one after the first block, or ("CPVT 0-5", the models of the
README's Table 5) one after each of the first five blocks; the cls token bypasses them (CPVT-GAP: no cls token,
global average pooling after the final norm). The layout converted here is that DeiT in timm's names with the PEGs
under Twins' name: ``cls_token`` (absent with GAP), ``patch_embed.proj``, ``blocks.N.*``, ``norm``, ``head``, and
either ``pos_block.proj.0.{weight,bias}`` (one PEG, after block 0) or ``pos_block.I.proj.0.{weight,bias}`` for
I = 0..n-1 (n PEGs, after blocks 0..n-1, the paper's placement: the file does not record it); plus ``pos_embed`` when
the model keeps an absolute embedding beside the PEGs. No such file is published: the authors released no CPVT-on-DeiT
weights (their README links none; Twins' model zoo holds only the pyramid models).

The converted model is :class:`vispe.models.VisionTransformer` (``TimmViT``) with ``encoding=PEG(after_blocks=...)``
(``[LearnedAPE, PEG]`` with ``pos_embed``): PEG I becomes ``encoding.convs.I.*`` (``encoding.encodings.1.convs.I.*``
beside an APE), every other key keeps its name; none is unmapped or derived. GAP models become ``class_token=False,
global_pool='avg', fc_norm=False`` (timm's final norm on every token, then the mean: CPVT's and Twins' order).

Inferred from the tensors: width, depth, patch size, MLP ratio, qkv bias, classes, the number of PEGs and their
kernel size, the cls token or GAP, and the training size when there is a ``pos_embed`` (without one the model takes
any size; the config says 224, the CPVT models' size). Not in the tensors: the number of heads (a DeiT's qkv weight
is (3C, C) whatever the heads) -- DeiT's head size 64 is assumed (Ti 3, S 6, B 12 heads) and a width that is not a
multiple of 64 is refused; and the PEG's stride (CPVT and Twins use 1; stride 2 drops the residual), which vispe's
PEG fixes at 1.

Twins' pyramid models (PCPVT, ALTGVT = Twins-SVT: ``patch_embeds.S``, ``blocks.S.N``, one ``pos_block.S`` per stage,
spatial-reduction or grouped attention) are not a vispe architecture and are refused, naming the pyramid keys found.
"""
from __future__ import annotations

import re
from typing import Any

import torch

from vispe.converters.deit import deit_config, heads_of_width, pos_embed_img_size
from vispe.converters.registry import (CheckpointConverter, CheckpointFamilyError, Conversion, StateDict,
                                       register_converter)

FAMILY = 'cpvt'
PEG_KEY = re.compile(r'^pos_block\.(?:(\d+)\.)?proj\.0\.(weight|bias)$')
PYRAMID = re.compile(r'^(patch_embeds\.\d+\.|blocks\.\d+\.\d+\.|pos_drops\.\d+)')
LAYOUT = 'CPVT-on-DeiT checkpoint (DeiT in timm names with pos_block.proj.0.* or pos_block.I.proj.0.*)'


def refuse_pyramid(state_dict: StateDict, source: str) -> None:
    """Refuse Twins' pyramid models (PCPVT / ALTGVT), naming the pyramid keys found."""
    pyramid = [key for key in state_dict if PYRAMID.match(key)]
    if pyramid:
        pyramid += [key for key in state_dict if re.match(r'^pos_block\.\d+\.', key)]
        shown = ', '.join(pyramid[:6]) + (f', ... ({len(pyramid)} in all)' if len(pyramid) > 6 else '')
        raise CheckpointFamilyError(
            f"{source} is a Twins pyramid model (PCPVT / ALTGVT = Twins-SVT: {shown}): its stages of different "
            f'widths, with a PEG per stage and spatial-reduction or grouped attention, match no vispe architecture. '
            f'vispe converts CPVT on a plain ViT (DeiT with PEGs pos_block.proj.0.* or pos_block.I.proj.0.*).')


def peg_tensors(state_dict: StateDict, source: str) -> list[dict[str, torch.Tensor]]:
    """The PEGs' {'weight', 'bias'} in order: one (``pos_block.proj.0``) or n (``pos_block.0..n-1.proj.0``)."""
    found: dict[int | None, dict[str, torch.Tensor]] = {}
    for key, value in state_dict.items():
        match = PEG_KEY.match(key)
        if match:
            found.setdefault(None if match.group(1) is None else int(match.group(1)), {})[match.group(2)] = value
    listed = sorted(index for index in found if index is not None)
    if not found or (None in found and listed) or listed != list(range(len(listed))):
        named = ', '.join(sorted(key for key in state_dict if key.startswith('pos_block.'))[:6]) or 'none'
        raise CheckpointFamilyError(f'{source}: its PEG keys ({named}) are neither one pos_block.proj.0.* nor '
                                    f'pos_block.0..n-1.proj.0.*; CPVT puts its PEGs after the first blocks in turn.')
    pegs = [found[None]] if None in found else [found[index] for index in listed]
    for index, peg in enumerate(pegs):
        if set(peg) != {'weight', 'bias'}:
            raise CheckpointFamilyError(f'{source}: PEG {index} has {sorted(peg)} of its conv; Twins\' PosCNN has a '
                                        f'weight and a bias.')
    return pegs


def vit_config(state_dict: StateDict, pegs: list[dict[str, torch.Tensor]], source: str) -> dict[str, Any]:
    """The TimmViT config of a CPVT DeiT from its tensors (heads by DeiT's head size 64)."""
    sizes = 'vispe converts DeiT sizes (Ti 3, S 6, B 12 heads).'
    config = deit_config(state_dict, source, LAYOUT, lambda width: heads_of_width(width, source, sizes))
    width = config['embed_dim']
    kernels = {tuple(peg['weight'].shape) for peg in pegs}
    conv = next(iter(kernels))
    if len(kernels) != 1 or conv[:2] != (width, 1) or conv[-1] != conv[-2] or conv[-1] % 2 == 0:
        raise CheckpointFamilyError(f'{source}: the PEG convs are {sorted(kernels)}; a PEG on width {width} is a '
                                    f'depthwise conv of odd square kernel, ({width}, 1, k, k), the same in each.')
    if config['depth'] < len(pegs):
        raise CheckpointFamilyError(f'{source} has {config["depth"]} blocks and {len(pegs)} PEGs; CPVT puts one PEG '
                                    f'after each of the first blocks, so it needs at least as many blocks.')
    peg = dict(type='PEG', after_blocks=tuple(range(len(pegs))), kernel_size=conv[-1])
    prefix = 1 if 'cls_token' in state_dict else 0
    if not prefix:
        config.update(class_token=False, global_pool='avg', fc_norm=False)
    if 'pos_embed' in state_dict:
        config['img_size'] = pos_embed_img_size(state_dict, prefix, source)
        config['encoding'] = [dict(type='LearnedAPE'), peg]
    else:
        config['encoding'] = peg
    return config


def convert_cpvt(state_dict: StateDict, source: str = 'the checkpoint') -> Conversion:
    """Convert a CPVT-on-DeiT state dict (timm's DeiT names + Twins' ``pos_block``) into a ``TimmViT`` with PEGs
    after its first blocks.

    Raises:
        CheckpointFamilyError: a Twins pyramid model (PCPVT / ALTGVT), a file without a DeiT's or the PEGs' keys, or
            a width the assumed head size 64 does not divide.
    """
    refuse_pyramid(state_dict, source)
    pegs = peg_tensors(state_dict, source)
    model = vit_config(state_dict, pegs, source)
    prefix = 'encoding.encodings.1.convs' if 'pos_embed' in state_dict else 'encoding.convs'
    converted = {key: value for key, value in state_dict.items() if not PEG_KEY.match(key)}
    for index, peg in enumerate(pegs):
        converted.update({f'{prefix}.{index}.{name}': value for name, value in peg.items()})
    heads = model['num_heads']
    notes = [f'{heads} head{"s" if heads != 1 else ""}: a DeiT\'s tensors do not hold the head count; DeiT\'s head '
             f'size 64 is assumed.']
    if len(pegs) > 1:
        notes.append(f'{len(pegs)} PEGs, placed after blocks 0..{len(pegs) - 1} (CPVT\'s placement; the file does '
                     f'not record it).')
    if 'pos_embed' not in state_dict:
        notes.append('no absolute embedding: the model takes any image size (img_size 224 only names the CPVT '
                     'training size).')
    return Conversion(converted, model=model, notes=notes)


CPVT = register_converter(CheckpointConverter(
    name=FAMILY,
    convert=convert_cpvt,
    summary='CPVT on DeiT (Chu et al. ICLR 2023; PEG = Meituan-AutoML/Twins PosCNN) -> TimmViT with PEGs after its '
            'first blocks (cls token or GAP); Twins pyramid models are refused',
    signature=(r'^pos_block\.',),
    keys_described='keys (DeiT names with pos_block.proj.0.weight or pos_block.I.proj.0.weight, the PEGs)',
    released='none: the CPVT README (Meituan-AutoML/CPVT) links no weights; Twins (Meituan-AutoML/Twins) releases '
             'only its pyramid models, which vispe does not convert',
    license='Apache-2.0 for the code (the LICENSE of Meituan-AutoML/Twins); no weights released',
))
