"""LookHere: directional attention masks with distance penalties (Fuller et al., NeurIPS 2024)."""
from __future__ import annotations

from itertools import groupby
from typing import Any, ClassVar, Sequence

import numpy as np
import torch

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, Search, closest_suggestion, model_facts
from vispe.flex_bias import OffsetBias, grid_offsets, kernel_option, use_flex
from vispe.geometry import Positions, grid_coords, pad_prefix, pairwise_offsets, relative_offsets
from vispe.registry import ENCODINGS

# The penalty of masked keys: the reference replaces +inf by the largest bfloat16 before negating.
MASKED_PENALTY = torch.finfo(torch.bfloat16).max

# Shorthands of GreenCUBIC/lookhere: four heads each, a head being the directions it combines.
SHORTHANDS: dict[str, tuple[tuple[str, ...], ...]] = {
    'none': ((),) * 4,
    'zero': (('zero',),) * 4,
    'none1zero3': ((),) + (('zero',),) * 3,
    'none2zero2': ((),) * 2 + (('zero',),) * 2,
    'none3zero1': ((),) * 3 + (('zero',),),
    'center': (('center',),) * 4,
    'halves': (('up',), ('down',), ('left',), ('right',)),
    'corners': (('up', 'left'), ('up', 'right'), ('down', 'left'), ('down', 'right')),
    'triangles': (('tri_up',), ('tri_down',), ('tri_left',), ('tri_right',)),
    'diagonals': (('diag_up_right',), ('diag_up_left',), ('diag_down_right',), ('diag_down_left',)),
    'eighths1': (('tri_up', 'left'), ('tri_down', 'left'), ('tri_left', 'up'), ('tri_right', 'up')),
    'eighths2': (('tri_up', 'right'), ('tri_down', 'right'), ('tri_left', 'down'), ('tri_right', 'down')),
    'zerohalves': (('zero', 'up'), ('zero', 'down'), ('zero', 'left'), ('zero', 'right')),
    'zerocorners': (('zero', 'up', 'left'), ('zero', 'up', 'right'), ('zero', 'down', 'left'),
                    ('zero', 'down', 'right')),
    'zerotriangles': (('zero', 'tri_up'), ('zero', 'tri_down'), ('zero', 'tri_left'), ('zero', 'tri_right')),
}
# vispe's names for the paper's fields of view (LH-180, LH-90, LH-45).
ALIASES = {'lh180': 'halves', 'lh90': 'corners', 'eighths': 'triangles-eighths1-eighths2',
           'lh45': 'triangles-eighths1-eighths2'}
# How the reference spreads shorthands over heads: (parts, heads) -> (part, how many of its 4 heads) per group.
HEAD_LAYOUTS: dict[tuple[int, int], tuple[tuple[int, int], ...]] = {
    (2, 6): ((0, 4), (1, 2)), (3, 6): ((0, 4), (1, 2)), (4, 6): ((0, 4), (1, 2)),
    (2, 12): ((0, 4), (0, 4), (1, 4)), (2, 16): ((0, 4), (0, 4), (1, 4), (1, 4)),
    (3, 12): ((0, 4), (1, 4), (2, 4)), (3, 16): ((0, 4), (0, 4), (1, 4), (2, 4)),
    (4, 16): ((0, 4), (1, 4), (2, 4), (3, 4)),
}
UNDIRECTED = ('zero', 'center', 'none')
DISTANCES = ('linear', 'sqrt', 'square')
FILLS = ('inf', 'zero', 'max')


def head_layout(directions: str, num_heads: int) -> tuple[list[str], list[tuple[str, ...]]]:
    """(shorthand name per head, directions per head) for a config string such as 'halves-zero'."""
    directions = ALIASES.get(directions, directions)
    parts = directions.split('-')
    unknown = [part for part in parts if part not in SHORTHANDS]
    if unknown:
        raise ValueError(f'Unknown LookHere directions {unknown} in {directions!r}.'
                         f'{closest_suggestion(unknown[0], [*SHORTHANDS, *ALIASES])} Known: {sorted(SHORTHANDS)} and '
                         f'aliases {sorted(ALIASES)}, joined with "-".')
    if len(parts) == 1:
        # the reference: heads divisible by 4; vispe extends it to any count (the first heads of the cycle)
        groups = ((0, 4),) * (num_heads // 4) + (((0, num_heads % 4),) if num_heads % 4 else ())
    elif (len(parts), num_heads) in HEAD_LAYOUTS:
        groups = HEAD_LAYOUTS[(len(parts), num_heads)]
    else:
        raise ValueError(f'LookHere spreads {len(parts)} shorthands over {num_heads} heads in no reference '
                         f'layout; supported (parts, heads): one part with any heads, {sorted(HEAD_LAYOUTS)}.')
    names, specs = [], []
    for part, count in groups:
        names += [parts[part]] * count
        specs += list(SHORTHANDS[parts[part]][:count])
    return names, specs


def head_slopes(names: list[str]) -> np.ndarray:
    """Per-head slopes as the reference, per run of heads with the same shorthand (n heads):
    directional runs 2^-(1..n/4), each repeated 4 times; zero, center and none runs
    [1/4, 1/16, 1/64, 1/256] for n = 4 (first two for n = 2, each repeated n/4 times for n = 4k).
    Runs of other lengths (vispe's extension to any head count) take the first n of the same sequences."""
    slopes = []
    for name, group in groupby(names):
        count = len(list(group))
        if any(word in name for word in UNDIRECTED):
            base = np.array([0.25, 0.0625, 0.015625, 0.00390625])
            slopes.append(base[:2] if count == 2 else np.repeat(base, -(-count // 4))[:count])
        else:
            slopes.append(np.repeat(np.exp2(-np.arange(1, -(-count // 4) + 1)), 4)[:count])
    return np.concatenate(slopes)


def direction_masks(offsets: torch.Tensor, tokens: set[str]) -> dict[str, torch.Tensor]:
    """Masked keys (True) of each direction token asked for, for (..., 2) offsets key − query (dy, dx).

    y grows downward. Half-planes are strict (a head sees its own row or column), 90° cones
    (tri_*) include their diagonals, diag_a_b is the union of the cones a and b.
    """
    dy, dx = offsets[..., 0], offsets[..., 1]
    rules = {'right': lambda: dx < 0, 'left': lambda: dx > 0, 'up': lambda: dy > 0, 'down': lambda: dy < 0,
             'tri_up': lambda: dy > -dx.abs(), 'tri_down': lambda: dy < dx.abs(),
             'tri_right': lambda: dx < dy.abs(), 'tri_left': lambda: dx > -dy.abs()}
    masks: dict[str, torch.Tensor] = {}
    for token in sorted(tokens):
        if token in rules:
            masks[token] = rules[token]()
        elif token.startswith('diag_'):
            _, first, second = token.split('_')
            masks[token] = rules[f'tri_{first}']() & rules[f'tri_{second}']()
    return masks


@ENCODINGS.register_module()
class LookHere(PositionEncoding):
    """LookHere (Fuller et al., "LookHere: Vision Transformers with Directed Attention Generalize and
    Extrapolate", NeurIPS 2024; GreenCUBIC/lookhere).

    Head h of layer l looks only in its directions and pays for distance::

        bias[l, h, i, j] = −g · s_l · s_h · D_h[i, j]     for visible keys,
                         = −3.39e38 (the largest bfloat16) for masked keys (fill_with='inf')

    with D the Euclidean patch distance (``distance``: linear, sqrt or square; 'center' heads use the
    key's distance to the image centre, 'zero' heads no distance), g = ``global_slope``,
    s_l = linspace(*layer_slopes, depth)[l] and s_h the reference's per-head slopes. Directions:
    half-planes (up/down/left/right, strict, so the query's own row/column and itself stay
    visible), 90° cones (tri_*), their unions (diag_*), and the shorthands of the reference
    (halves, corners, triangles, diagonals, eighths1/2, zero*, none*, center), joined with '-' and
    spread over heads as the reference does. Prefix rows and columns are 0. No row is ever fully
    masked (the query sees itself).

    Memory: the grid's distance map and per-head masks (bool) are built once per grid and cached;
    each layer's bias is one ``where`` over them, since layers differ only by the scalar s_l (the
    reference stores depth × heads float32 maps: 9.7 GB for ViT-B at 1024 px). By default biases
    are full float32; ``reference_rounding=True`` reproduces the reference's bfloat16 rounding
    (it computes in float64 and stores bfloat16 maps: up to 2⁻⁸ relative error).

    Args:
        num_heads, depth, num_prefix_tokens: from the model.
        directions: config string, e.g. 'halves', 'corners', 'triangles-eighths1-eighths2' (alias
            'eighths'), 'halves-zero' (6 heads).
        global_slope: g (a test-time option: the paper lowers it at higher resolution).
        layer_slopes: (first, last) of the linear layer schedule.
        distance: 'linear', 'sqrt' or 'square'.
        fill_with: what masked keys get: 'inf' (masked), 'zero' (no mask) or 'max' (the head's largest penalty).
            A 'zero' head (no distance) has largest penalty 0, so with 'zero' or 'max' it adds nothing, as in the
            reference ('zerotriangles' with fill_with='max' is no encoding at all).
        reference_rounding: round biases to bfloat16 exactly as the reference.
        kernel: 'auto', 'sdpa' or 'flex'. The flex path (self-attention on the grid, ``reference_rounding=False``)
            reads per-head tables of grid offsets inside FlexAttention and skips the 128×128 tiles a head cannot
            see (:mod:`vispe.flex_bias`); no (heads, L, L) bias is built. 'auto' takes it from 2048 tokens: on the
            CPU it was slower than SDPA at 512 px and faster at 1024 px (``benchmarks/flex_1024_vit-s16_cpu1.md``,
            ``benchmarks/perf_512_vit-s16_cpu1.md``).

    In cross-attention (or with explicit coordinates) directions and distances are those from the query's
    coordinates to the key's, and 'center' heads use the keys' grid centre; those tables are built per
    forward.

    Shapes: logits_bias -> (1, heads, L, L) in self-attention on the grid, else (B|1, heads, Lq, Lk).
    """

    family: ClassVar[str] = 'bias'
    paper: ClassVar[str] = 'Fuller et al., NeurIPS 2024 (LookHere)'
    examples: ClassVar[tuple[dict, ...]] = ({'directions': 'halves'}, {'directions': 'corners', 'distance': 'sqrt'},
                                            {'directions': 'triangles', 'fill_with': 'max'})
    options: ClassVar[dict[str, Option]] = {
        **model_facts('num_heads', 'depth', 'num_prefix_tokens'),
        'directions': Option(str, doc="The heads' fields of view: shorthands such as 'halves', 'corners', "
                                      "'eighths' joined with '-'; the trained heads depend on them."),
        'global_slope': Option(float, ge=0, test_time=True, search=Search(factors=(0.25, 0.5, 0.75, 1.5)),
                               doc='The global distance penalty g is >= 0 (1 in training; the paper lowers it at '
                                   'higher resolution); it scales the bias per call, so it may change at test time.'),
        'layer_slopes': Option(float, ge=0, sequence=True, length=2,
                               doc='The (first, last) layer penalties are >= 0 (the paper uses (1.5, 0.5)); the '
                                   'trained layers depend on them, so they are fixed at build.'),
        'distance': Option(str, choices=DISTANCES, doc='How the penalty grows with distance; the trained heads '
                                                       'depend on it.'),
        'fill_with': Option(str, choices=FILLS, doc="What masked keys get ('inf' masks them); the trained heads "
                                                    'depend on it.'),
        'reference_rounding': Option(bool, test_time=True,
                                     doc="Whether biases are rounded to bfloat16 as the reference's are; numerics "
                                         'only, and the tables are cached per setting, so it may change at test '
                                         'time.'),
        'kernel': kernel_option(),
    }
    # From how many tokens 'auto' takes the flex path (ViT-S/16 on one CPU thread: slower than SDPA at 1025 tokens,
    # 512 px; faster at 4097, 1024 px).
    flex_min_tokens: ClassVar[int | None] = 2048
    # Its grid tables hold (heads, L, L) maps: few are kept.
    table_cache_size: ClassVar[int] = 2

    def __init__(self, num_heads: int, depth: int, num_prefix_tokens: int = 1, directions: str = 'halves',
                 global_slope: float = 1.0, layer_slopes: Sequence[float] = (1.5, 0.5), distance: str = 'linear',
                 fill_with: str = 'inf', reference_rounding: bool = False, kernel: str = 'auto') -> None:
        super().__init__()
        self.head_names, self.head_directions = head_layout(directions, num_heads)
        self.head_slopes = head_slopes(self.head_names)
        self.directions = directions
        self.depth = depth
        self.num_prefix_tokens = num_prefix_tokens
        self.global_slope = global_slope
        self.layer_slopes = tuple(layer_slopes)
        self.distance = distance
        self.fill_with = fill_with
        self.reference_rounding = reference_rounding
        self.kernel = kernel

    def layer_slope(self, layer_idx: int) -> float:
        """s_l = linspace(first, last, depth)[l], computed as numpy's linspace does (float64, the last exact),
        in plain Python so that tracing sees a constant."""
        first, last = (float(value) for value in self.layer_slopes)
        if self.depth == 1:
            return first
        if layer_idx == self.depth - 1:
            return last
        return first + layer_idx * ((last - first) / (self.depth - 1))

    def build_maps(self, offsets: torch.Tensor, to_centre: torch.Tensor, num_prefix_q: int,
                   num_prefix_k: int) -> dict[str, torch.Tensor]:
        """The tables of one pair of token sets from offsets key − query (B', Lq, Lk, 2) and each key's
        distance to the centre of its image (B'|1, 1|Lq, Lk): ``base`` (K, B', Lq, Lk) distance maps,
        ``kind`` (heads,) index into them, ``masks`` (heads, B', Lq, Lk) bool, ``max`` (heads, B') largest
        base value per head, ``slopes`` (heads, 1) the per-head slopes; prefix rows and columns padded."""
        distance = offsets.square().sum(-1).sqrt()
        if self.distance == 'sqrt':
            distance = distance.sqrt()
        elif self.distance == 'square':
            distance = distance.square()
        candidates = {'dist': lambda: distance, 'center': lambda: to_centre.expand_as(distance),
                      'zero': lambda: torch.zeros_like(distance)}
        kinds = []
        for spec in self.head_directions:
            undirected = [token for token in spec if token in ('center', 'zero')]
            kinds.append(undirected[-1] if undirected else 'dist')
        used = sorted(set(kinds), key=list(candidates).index)
        directional = direction_masks(offsets, {token for spec in self.head_directions for token in spec})
        masks = torch.zeros(len(kinds), *distance.shape, dtype=torch.bool, device=offsets.device)
        for head, spec in enumerate(self.head_directions):
            for token in spec:
                if token in directional:
                    masks[head] |= directional[token]
        base = torch.stack([candidates[kind]() for kind in used])
        kind_index = torch.tensor([used.index(kind) for kind in kinds], device=offsets.device)
        return dict(base=pad_prefix(base, num_prefix_q, 0, num_prefix_k), kind=kind_index,
                    masks=pad_prefix(masks, num_prefix_q, False, num_prefix_k),
                    max=base.amax(dim=(-1, -2))[kind_index], slopes=base.new_tensor(self.head_slopes)[:, None])

    def grid_maps(self, grid_size: tuple[int, int], device: torch.device) -> dict[str, torch.Tensor]:
        """The tables of self-attention on a grid (B' = 1)."""
        dtype = torch.float64 if self.reference_rounding else torch.float32
        offsets = -relative_offsets(grid_size, device=device).to(dtype)
        return self.build_maps(offsets.unsqueeze(0), self.centre_distances(grid_coords(grid_size, device=device, dtype=dtype),
                                                                           grid_size), self.num_prefix_tokens,
                               self.num_prefix_tokens)

    @staticmethod
    def centre_distances(coords: torch.Tensor, grid_size: tuple[int, int]) -> torch.Tensor:
        """(B'|1, 1, Lk) distance of each key (coords (Lk, 2) or (B, Lk, 2)) to the centre of its grid."""
        height, width = grid_size
        centre = coords.new_tensor([(height - 1) / 2, (width - 1) / 2])
        distance = (coords - centre).square().sum(-1).sqrt()
        return distance.reshape(-1, 1, distance.shape[-1])

    def maps(self, pos_q: Positions, pos_k: Positions) -> dict[str, torch.Tensor]:
        """Self-attention on the grid: cached per grid. Otherwise (cross-attention, explicit coordinates):
        built once per forward from the coordinates."""
        if pos_q is pos_k and pos_q.has_default_coords:
            self.check_sequence(pos_q, self.num_prefix_tokens)
            return self.cached_table('grid_maps', pos_q, lambda: self.grid_maps(pos_q.grid_size, pos_q.device),
                                     across_forwards=True)

        def build() -> dict[str, torch.Tensor]:
            dtype = torch.float64 if self.reference_rounding else torch.float32
            coords_k = pos_k.patch_coords().to(dtype)
            offsets = -pairwise_offsets(pos_q.patch_coords(), coords_k).to(dtype)
            to_centre = self.centre_distances(coords_k, pos_k.require_grid('LookHere'))
            return self.build_maps(offsets, to_centre, pos_q.num_prefix_tokens, pos_k.num_prefix_tokens)
        return self.cached_table('maps', pos_q, build, pos_k=pos_k)

    def prepare(self, pos: Positions) -> None:
        if pos.has_default_coords and not self.takes_flex(pos):
            self.maps(pos, pos)

    def takes_flex(self, pos: Positions) -> bool:
        """Whether self-attention on this grid runs the flex path."""
        return (not self.reference_rounding and pos.has_default_coords
                and use_flex(self.kernel, pos.num_tokens, self.flex_min_tokens))

    def offset_maps(self, pos: Positions) -> dict[str, Any]:
        """The grid's tables for the flex path (cached per grid): ``base`` (heads, 2h−1, 2w−1) distance of each
        offset for 'dist' heads (0 otherwise), ``keys`` (heads, L) distance of each key to the centre for 'center'
        heads (or None), ``masks`` (heads, 2h−1, 2w−1) bool (or None), ``max`` (heads,) largest penalty base, ``slopes``
        (heads,) the per-head slopes and ``block_mask`` (FlexAttention's, or None)."""
        self.check_sequence(pos, self.num_prefix_tokens)

        def build() -> dict[str, Any]:
            offsets = grid_offsets(pos.grid_size, pos.device)
            distance = offsets.square().sum(-1).sqrt()
            if self.distance == 'sqrt':
                distance = distance.sqrt()
            elif self.distance == 'square':
                distance = distance.square()
            centre = self.centre_distances(grid_coords(pos.grid_size, device=pos.device), pos.grid_size)[0, 0]
            centre = torch.cat([centre.new_zeros(pos.num_prefix_tokens), centre])
            kinds = [self.head_kind(spec) for spec in self.head_directions]
            base = torch.stack([distance if kind == 'dist' else torch.zeros_like(distance) for kind in kinds])
            keys = torch.stack([centre if kind == 'center' else torch.zeros_like(centre) for kind in kinds])
            directional = direction_masks(offsets, {token for spec in self.head_directions for token in spec})
            masks = torch.zeros(base.shape, dtype=torch.bool, device=pos.device)
            for head, spec in enumerate(self.head_directions):
                for token in spec:
                    if token in directional:
                        masks[head] |= directional[token]
            largest = torch.maximum(base.amax(dim=(-1, -2)), keys.amax(dim=-1))
            has_keys = 'center' in kinds
            has_masks = any(token in directional for spec in self.head_directions for token in spec)
            maps: dict[str, Any] = dict(base=base, keys=keys if has_keys else None, masks=masks if has_masks else None,
                                        max=largest, slopes=base.new_tensor(self.head_slopes), block_mask=None)
            if has_masks and self.fill_with == 'inf':
                maps['block_mask'] = OffsetBias(pos.grid_size, pos.num_prefix_tokens, base, largest,
                                                masked=masks).block_mask()
            return maps
        return self.cached_table('offset_maps', pos, build, across_forwards=True)

    @staticmethod
    def head_kind(spec: tuple[str, ...]) -> str:
        """'center', 'zero' (the last undirected token of the head) or 'dist'."""
        undirected = [token for token in spec if token in ('center', 'zero')]
        return undirected[-1] if undirected else 'dist'

    def flex_bias(self, pos_q: Positions, pos_k: Positions,
                  layer_idx: int) -> tuple[OffsetBias, Any] | None:
        """This layer's bias as grid-offset tables (self-attention on the grid, when :meth:`takes_flex`)."""
        if pos_q is not pos_k or not self.takes_flex(pos_q):
            return None
        maps = self.offset_maps(pos_q)
        layer_scale = self.global_slope * self.layer_slope(layer_idx)
        coef = maps['slopes'] * -layer_scale
        values = maps['base'] * coef[:, None, None]
        keys = None if maps['keys'] is None else maps['keys'] * coef[:, None]
        masked = maps['masks'] if self.fill_with == 'inf' else None
        if maps['masks'] is not None and self.fill_with != 'inf':
            fill = maps['max'] * coef if self.fill_with == 'max' else torch.zeros_like(coef)
            values = torch.where(maps['masks'], fill[:, None, None], values)
        bias = OffsetBias(pos_q.grid_size, pos_q.num_prefix_tokens, values, torch.zeros_like(coef), keys, masked)
        return bias, maps['block_mask']

    def layer_bias(self, pos_q: Positions, layer_idx: int, pos_k: Positions | None = None) -> torch.Tensor:
        """(B'|1, heads, Lq, Lk) float32 bias of one layer (``pos_k`` defaults to ``pos_q``: self-attention)."""
        maps = self.maps(pos_q, pos_q if pos_k is None else pos_k)
        layer_scale = self.global_slope * self.layer_slope(layer_idx)
        slopes = maps['slopes']
        base = maps['base'][0] if maps['base'].shape[0] == 1 else maps['base'][maps['kind']]
        if self.fill_with == 'inf':
            fill = torch.full_like(maps['max'], MASKED_PENALTY)
        elif self.fill_with == 'zero':
            fill = torch.zeros_like(maps['max'])
        else:
            fill = layer_scale * (slopes * maps['max'])
        if self.reference_rounding:
            # the reference's order of operations in float64, then its bfloat16 maps, negated
            penalty = torch.where(maps['masks'], fill[..., None, None], layer_scale * (slopes[..., None, None] * base))
            return (penalty.to(torch.bfloat16) * -1.0).float().transpose(0, 1)
        coef = -layer_scale * slopes
        return torch.where(maps['masks'], -fill[..., None, None], base * coef[..., None, None]).transpose(0, 1)

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
                    layer_idx: int) -> torch.Tensor | None:
        return self.layer_bias(pos_q, layer_idx, pos_k)

    def extra_repr(self) -> str:
        return (f'directions={self.directions!r}, global_slope={self.global_slope}, layer_slopes={self.layer_slopes}, '
                f'distance={self.distance!r}, fill_with={self.fill_with!r}, '
                f'reference_rounding={self.reference_rounding}')
