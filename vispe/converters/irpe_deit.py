"""DeiT with iRPE (Wu et al., "Rethinking and Improving Relative Position Encoding for Vision Transformer", ICCV 2021;
microsoft/Cream ``iRPE/DeiT-with-iRPE``) as a registered family: ``vispe convert irpe-deit``.

The released files (github.com/wkcn/iRPE-model-zoo releases, one per ``rpe_models.py`` model, e.g.
``deit_small_patch16_224_ctx_product_50_shared_k.pth``) hold ``{'model': state_dict}`` of their
``rpe_vision_transformer.VisionTransformer``: DeiT's timm names (``cls_token``, ``pos_embed``, ``patch_embed.proj``,
``blocks.N.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}``, ``norm``, ``head``) plus, per block and per side
q/k/v that carries iRPE, ``blocks.N.attn.rpe_<side>.lookup_table_weight`` (contextual: (heads|1, d, buckets) on q
and k, (heads|1, buckets, d) on v) or ``lookup_table_bias`` (bias: (heads|1, buckets)); the cross method splits
each into ``rp_rows.`` and ``rp_cols.``.

The converted model is :class:`vispe.models.VisionTransformer` (``TimmViT``) with
``encoding=[LearnedAPE, iRPE]``: DeiT's names load unchanged (``pos_embed`` into the LearnedAPE), the per-block
tables are stacked into ``encoding.encodings.1.lookup_<side>`` (depth, axes, heads|1, ...). Every key maps; none is
unmapped or derived.

Inferred from the tensors: width, depth, patch size, training size (the square ``pos_embed`` grid), MLP ratio, qkv
bias, classes, which of q/k/v carry tables, mode (weight: contextual; bias: bias), cross (rows/cols tables),
shared heads (a leading 1), the head size d (contextual tables; heads = width / d) and the bucket count. Not in the
tensors, and so taken from the authors' ``rpe_models.py`` by bucket count: the method and ratio (50 buckets:
product, ratio 1.9, every released model; 82: Euclidean, ratio 20; 134: quantised, ratio 33; cross with 82 per
axis: ratio 20). A count none of their configurations gives is refused (another ratio gives other bucket ids from
the same table shapes), and so are shared bias tables (the head count is then in no tensor), distilled models
(``dist_token``) and hybrid CNN stems. ``skip=1`` (the cls token's one extra bucket) is the only setting their
DeiT runs (it has a cls token; skip 0 would index the cls token as a patch).

vispe's iRPE computes the reference's terms exactly (parity with the pure-PyTorch path of their ``irpe.py`` is
tested in ``tests/converters/test_irpe_deit.py``). Two behaviours differ, both beyond the reference: vispe resamples
DeiT's ``pos_embed`` at other sizes (theirs has a fixed size, so their model runs at 224 only) and takes non-square
grids (their ``RPEAttention`` assumes h = w).
"""
from __future__ import annotations

import re
from typing import Any

import torch

from vispe.converters.deit import deit_config, pos_embed_img_size, require
from vispe.converters.registry import (CheckpointConverter, CheckpointFamilyError, Conversion, StateDict,
                                       register_converter)

FAMILY = 'irpe-deit'
LAYOUT = 'DeiT-with-iRPE checkpoint (rpe_vision_transformer.VisionTransformer of microsoft/Cream)'
TABLE = re.compile(r'^blocks\.(\d+)\.attn\.rpe_([qkv])\.(?:(rp_rows|rp_cols)\.)?lookup_table_(weight|bias)$')
# rpe_models.py's configurations by (cross, buckets per table): (method, ratio). skip=1 adds the cls bucket.
AUTHORS_CONFIGS = {(False, 50): ('product', 1.9), (False, 82): ('euclidean', 20.0), (False, 134): ('quant', 33.0),
                   (True, 82): ('cross', 20.0)}


def collect_tables(state_dict: StateDict, depth: int, source: str) -> dict[str, dict[tuple[int, int], torch.Tensor]]:
    """The lookup tables per side: {side: {(block, axis): table}}, axis 0 = rows (or the only table), 1 = columns."""
    tables: dict[str, dict[tuple[int, int], torch.Tensor]] = {}
    kinds = set()
    for key, value in state_dict.items():
        match = TABLE.match(key)
        if match:
            block, side, axis, kind = match.groups()
            tables.setdefault(side, {})[int(block), int(axis == 'rp_cols')] = value
            kinds.add((kind, axis is not None))
    if not kinds:
        raise CheckpointFamilyError(f'{source} has no iRPE tables (blocks.N.attn.rpe_<q|k|v>.lookup_table_*); a '
                                    f'{LAYOUT} has them.')
    if len(kinds) != 1:
        raise CheckpointFamilyError(f'{source} mixes iRPE table kinds {sorted(kinds)} (weight: contextual, bias: '
                                    f'bias; rp_rows/rp_cols: cross); their build_rpe gives every side one kind.')
    axes = 2 if next(iter(kinds))[1] else 1
    for side, found in tables.items():
        missing = [f'blocks.{b}.attn.rpe_{side}' + ('.rp_' + ('cols' if a else 'rows') if axes == 2 else '')
                   for b in range(depth) for a in range(axes) if (b, a) not in found]
        if missing or len(found) != depth * axes:
            raise CheckpointFamilyError(f'{source}: iRPE on {side} has tables in {len(found)} of {depth * axes} '
                                        f'places (missing {", ".join(missing[:4]) or "none"}); their model puts '
                                        f'one in every block. The file is incomplete.')
        shapes = {tuple(table.shape) for table in found.values()}
        if len(shapes) != 1:
            raise CheckpointFamilyError(f'{source}: the iRPE tables on {side} differ in shape across blocks '
                                        f'({sorted(shapes)}); their model gives every block the same table.')
    return tables


def infer_irpe(tables: dict[str, dict[tuple[int, int], torch.Tensor]], width: int, source: str) -> dict[str, Any]:
    """The iRPE config (method, mode, on, shared_head, ratio) and the head count from the tables' shapes:
    ``dict(encoding=..., num_heads=...)``."""
    first = {side: next(iter(found.values())) for side, found in tables.items()}
    contextual = next(iter(first.values())).ndim == 3
    cross = any(axis == 1 for found in tables.values() for _, axis in found)
    head_dims, buckets, table_heads = set(), set(), set()
    for side, table in first.items():
        if contextual:
            dim, count = (table.shape[2], table.shape[1]) if side == 'v' else (table.shape[1], table.shape[2])
            head_dims.add(dim)
        else:
            count = table.shape[1]
        buckets.add(count)
        table_heads.add(table.shape[0])
    if len(buckets) != 1 or len(table_heads) != 1 or len(head_dims) > 1:
        raise CheckpointFamilyError(f'{source}: the iRPE tables disagree (buckets {sorted(buckets)}, heads '
                                    f'{sorted(table_heads)}, head sizes {sorted(head_dims)}); their build_rpe gives '
                                    f'q, k and v one configuration.')
    count, heads_in_table = buckets.pop(), table_heads.pop()
    shared = heads_in_table == 1
    if head_dims:
        head_dim = head_dims.pop()
        if width % head_dim or (not shared and heads_in_table * head_dim != width):
            raise CheckpointFamilyError(f'{source}: iRPE tables of head size {head_dim} and {heads_in_table} heads '
                                        f'do not divide the width {width}.')
        num_heads = width // head_dim
    elif shared:
        raise CheckpointFamilyError(f'{source}: shared-head bias tables (1, {count}) do not give the number of '
                                    f'heads, and no other tensor of a DeiT does; vispe converts bias-mode iRPE with '
                                    f'one table per head (shared_head=False) and contextual iRPE.')
    else:
        num_heads = heads_in_table
    if (cross, count) not in AUTHORS_CONFIGS:
        known = ', '.join(f'{n} ({"cross " if c else ""}{m}, ratio {r})' for (c, n), (m, r) in AUTHORS_CONFIGS.items())
        raise CheckpointFamilyError(f'{source}: {count} buckets per iRPE table is none of the configurations of '
                                    f"the authors' rpe_models.py ({known}); the method and ratio are in no tensor "
                                    f'(other ratios give other buckets for the same table shape), so vispe cannot '
                                    f'say which it is.')
    method, ratio = AUTHORS_CONFIGS[cross, count]
    config = dict(type='iRPE', method=method, mode='contextual' if contextual else 'bias',
                  on=''.join(side for side in 'qkv' if side in tables), shared_head=shared, ratio=ratio)
    return dict(encoding=config, num_heads=num_heads)


def stack_tables(found: dict[tuple[int, int], torch.Tensor], depth: int, axes: int) -> torch.Tensor:
    """One side's per-block tables as vispe's parameter (depth, axes, heads|1, ...)."""
    return torch.stack([torch.stack([found[block, axis] for axis in range(axes)]) for block in range(depth)])


def convert_irpe_deit(state_dict: StateDict, source: str = 'the checkpoint') -> Conversion:
    """Convert a DeiT-with-iRPE state dict (their key names) into a ``TimmViT`` with ``[LearnedAPE, iRPE]``.

    Raises:
        CheckpointFamilyError: a file without DeiT's keys, incomplete or inconsistent tables, or a configuration
            the tensors do not determine (the message says which).
    """
    for key, what in (('cls_token', 'the class token'), ('pos_embed', "DeiT's learned absolute embedding")):
        require(state_dict, key, source, what, LAYOUT)
    depth = 1 + max((int(match.group(1)) for match in map(TABLE.match, state_dict) if match), default=-1)
    tables = collect_tables(state_dict, depth, source)
    irpe: dict[str, Any] = {}

    def heads_of_width(width: int) -> int:
        irpe.update(infer_irpe(tables, width, source))
        return irpe['num_heads']

    model = deit_config(state_dict, source, LAYOUT, heads_of_width)
    if model['depth'] != depth:
        raise CheckpointFamilyError(f'{source} has {model["depth"]} blocks but iRPE tables in {depth}; their model '
                                    f'puts tables in every block.')
    model['img_size'] = pos_embed_img_size(state_dict, 1, source, ' (their RPEAttention assumes h = w)')
    model['encoding'] = [dict(type='LearnedAPE'), irpe['encoding']]
    axes = 2 if irpe['encoding']['method'] == 'cross' else 1
    converted = {key: value for key, value in state_dict.items() if not TABLE.match(key)}
    for side, found in tables.items():
        converted[f'encoding.encodings.1.lookup_{side}'] = stack_tables(found, depth, axes)
    method, ratio = irpe['encoding']['method'], irpe['encoding']['ratio']
    notes = [f'iRPE method {method!r} with ratio {ratio} is read off the bucket count, as the configuration of '
             f"the authors' rpe_models.py with that count (the tensors do not hold the method or ratio)."]
    return Conversion(converted, model=model, notes=notes)


IRPE_DEIT = register_converter(CheckpointConverter(
    name=FAMILY,
    convert=convert_irpe_deit,
    summary='DeiT with iRPE (microsoft/Cream iRPE/DeiT-with-iRPE, Wu et al. ICCV 2021) -> TimmViT with '
            '[LearnedAPE, iRPE]; every key maps',
    signature=(r'^blocks\.\d+\.attn\.rpe_[qkv]\.(rp_rows\.|rp_cols\.)?lookup_table_(weight|bias)$',),
    keys_described='keys (DeiT names with blocks.N.attn.rpe_<q|k|v>.lookup_table_weight)',
    released='the README model zoo of microsoft/Cream iRPE/DeiT-with-iRPE (github.com/wkcn/iRPE-model-zoo '
             'releases 1.0: DeiT-Ti k, DeiT-S k/qk/qkv, DeiT-B k/qkv, contextual product, 50 shared buckets)',
    license='Apache-2.0 (the LICENSE of microsoft/Cream iRPE/DeiT-with-iRPE)',
))
