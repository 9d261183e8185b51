"""Gaussian-splatting codecs: the tri-plane context codec (TC-GS's entropy model on 3DGS attributes) and two
baselines, each writing a ``.vgs`` container whose size is the coder's real output.

All three code the centres the same way (16 bits per axis within the scene's box, Morton order, varint deltas,
zlib; :mod:`vispe.gaussians.layout`) except ``float16``, and differ in the attributes:

- ``float16``: every value (centres included) as float16, zlib-compressed;
- ``factorized``: uniform quantisation with each group's step, one Gaussian per column (its mean and standard
  deviation over the scene), ANS-coded: a context-free entropy model;
- ``triplane``: steps and Gaussians per Gaussian and column from :class:`~vispe.gaussians.context.TriPlaneContext`
  at the decoded centre and its K − 1 nearest decoded centres, trained on the scene for ``steps`` steps to
  minimise bits + λ·squared error (λ = 6 / (ln 2 · Q²) per column: the high-rate optimum of the step is the
  group's base step Q), then stored in float16 with the bitstream.

Decoding rebuilds the same context: neighbours from the integer grid (exact distances, ties by index), the
model in float64 from the stored float16 weights, and the coder's parameters rounded to grids
(:func:`~vispe.gaussians.entropy.coding_parameters`); a hash of those parameters in the header turns any
remaining floating-point disagreement into an error instead of a wrong scene.
"""
from __future__ import annotations

import copy
import hashlib
import math
import sys
import time
import warnings
import zlib
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from tqdm import tqdm

from vispe.gaussians.bitstream import BitstreamError, pack, unpack
from vispe.gaussians.checks import (QuantisationWarning, check_centre_grid, check_collapse, check_float16,
                                    check_rotations)
from vispe.gaussians.context import TriPlaneContext
from vispe.gaussians.entropy import coding_parameters, decode_symbols, encode_symbols, gaussian_bits
from vispe.gaussians.layout import (AttributeGroups, decode_positions, dequantize_positions, encode_positions,
                                    quantize_positions)
from vispe.gaussians.ply import GaussianCloud

__all__ = ['BASE_STEPS', 'CODECS', 'CodecConfig', 'compress', 'decompress', 'model_size']

CODECS = ('float16', 'factorized', 'triplane')
# Base quantisation steps per group at step_scale 1: f_dc 0.02 is 0.0056 in RGB (1.4/255).
BASE_STEPS = {'f_dc': 0.02, 'f_rest': 0.02, 'opacity': 0.05, 'scale': 0.02, 'rotation': 0.01}
STEP_GRID = 16                     # the learned step factors on a 1/16 grid within [1/16, 2]
CHUNK = 32768


@dataclass
class CodecConfig:
    """How to compress. ``step_scale`` multiplies every base step (the rate point); the rest sets the tri-plane
    context model and its training. The model's size (``tri_channels``, ``tri_resolution``, ``hidden``) left at
    None follows the scene (:func:`model_size`)."""

    codec: str = 'triplane'
    step_scale: float = 1.0
    steps: int = 3000
    batch: int = 4096
    lr: float = 5e-3
    tri_channels: int | None = None
    tri_resolution: int | None = None
    knn: int = 4
    hidden: int | None = None
    seed: int = 0
    stats: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if self.codec not in CODECS:
            raise ValueError(f'Unknown codec {self.codec!r}; choose one of {", ".join(CODECS)}.')
        for name, example in (('step_scale', '0.5, 1 or 2'), ('lr', '5e-3')):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or value <= 0:
                raise ValueError(f'{name} {value!r} is not a finite number above 0; give e.g. {example}.')
        for name, minimum in INTEGER_MINIMUMS.items():
            value = getattr(self, name)
            if value is None and name in MODEL_OPTIONS:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
                raise ValueError(f'{name} {value!r} is not a whole number of at least {minimum}; give e.g. '
                                 f'{getattr(CodecConfig, name) or minimum}'
                                 f'{" (or None to size the model by the scene)" if name in MODEL_OPTIONS else ""}.')


# The least value of each integer option; a model size left at None follows the scene.
INTEGER_MINIMUMS = dict(steps=0, batch=1, knn=1, tri_channels=1, tri_resolution=2, hidden=1, seed=-2 ** 63)
MODEL_OPTIONS = ('tri_channels', 'tri_resolution', 'hidden')


# Context model sizes (C, R, hidden), largest first; the model is stored in float16 with the bitstream.
MODEL_SIZES = ((16, 32, 128), (8, 32, 64), (4, 16, 32))
MODEL_BUDGET_BITS = 12


def model_size(config: CodecConfig, count: int, width: int, groups: int) -> CodecConfig:
    """``config`` with its unset model size filled in: the largest of :data:`MODEL_SIZES` whose float16 weights
    cost at most 12 bits per Gaussian (the smallest if none does), so that the context pays for itself on small
    scenes too (on a 13.9k-Gaussian scene the largest costs 95 bits per Gaussian, more than it saves)."""
    chosen = next((size for size in MODEL_SIZES if 16 * weight_count(config.knn, width, groups, *size)
                   <= MODEL_BUDGET_BITS * count), MODEL_SIZES[-1])
    given = (config.tri_channels, config.tri_resolution, config.hidden)
    channels, resolution, hidden = (value if value is not None else default for value, default in zip(given, chosen))
    return replace(config, tri_channels=channels, tri_resolution=resolution, hidden=hidden)


def weight_count(knn: int, width: int, groups: int, channels: int, resolution: int, hidden: int) -> int:
    """The context model's weights: the planes and the MLP (see :class:`TriPlaneContext`)."""
    outputs = 2 * width + groups
    return 3 * channels * resolution ** 2 + (knn * 3 * channels + 4) * hidden + (hidden + 1) * outputs


def _check_model_options(config: CodecConfig, count: int, groups: AttributeGroups) -> None:
    """Refuse a context larger than the scene's neighbourhoods (``knn`` > N); warn when the float16 model alone
    outweighs the scene in float32 (the file cannot be smaller than the input)."""
    if config.knn > count:
        raise ValueError(f'knn {config.knn} exceeds the {count} Gaussian(s) of the scene: the context reads each '
                         f'Gaussian and its K − 1 nearest others; give knn of at most {count} (4 by default).')
    model_bytes = 2 * weight_count(config.knn, groups.width, len(groups.sizes), config.tri_channels,
                                   config.tri_resolution, config.hidden)
    scene_bytes = 4 * count * (3 + groups.width)
    if model_bytes > scene_bytes:
        warnings.warn(f'the context model (tri_channels {config.tri_channels}, tri_resolution '
                      f'{config.tri_resolution}, hidden {config.hidden}) stores {model_bytes} bytes, more than the '
                      f'{count} Gaussians take in float32 ({scene_bytes} bytes), so the file cannot be smaller than '
                      f'the input: make it smaller or leave the sizes to the scene (None).', QuantisationWarning,
                      stacklevel=3)


def grid_neighbours(grid: np.ndarray, k: int) -> np.ndarray:
    """(N, k) indices of each grid point's k nearest (itself first), by exact integer distances with ties broken
    by index, so that the encoder and the decoder agree."""
    from vispe.geometry.point_cloud import knn
    k = min(k, len(grid))
    candidates = knn(grid.astype(np.float32), grid.astype(np.float32), min(len(grid), k + 4))[0].numpy()
    distances = np.square(grid[candidates] - grid[:, None]).sum(-1)
    distances[candidates == np.arange(len(grid))[:, None]] = -1
    order = np.lexsort((candidates, distances), axis=1)[:, :k]
    return np.take_along_axis(candidates, order, axis=1)


def scene_box(low: np.ndarray, high: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """The box the planes span: the scene's box about its centre, 1.2× as large (float64)."""
    centre, half = (low + high) / 2, np.maximum((high - low) / 2, 1e-6) * 1.2
    return torch.from_numpy(centre - half), torch.from_numpy(centre + half)


def _model_bytes(model: TriPlaneContext) -> bytes:
    return zlib.compress(b''.join(tensor.detach().half().numpy().tobytes() for tensor in _weights(model)), 9)


def _weights(model: TriPlaneContext) -> list[torch.Tensor]:
    return [model.planes, *model.mlp.parameters()]


def _load_model_bytes(model: TriPlaneContext, data: bytes) -> None:
    raw = np.frombuffer(zlib.decompress(data), dtype=np.float16)
    start = 0
    with torch.no_grad():
        for tensor in _weights(model):
            values = raw[start:start + tensor.numel()]
            if len(values) != tensor.numel():
                raise BitstreamError('the context model section is shorter than its configuration needs.')
            tensor.copy_(torch.from_numpy(values.astype(np.float32)).reshape(tensor.shape))
            start += tensor.numel()


def _build_model(header: dict, groups: AttributeGroups, stats: np.ndarray) -> TriPlaneContext:
    cfg = header['config']
    return TriPlaneContext(groups.width, len(groups.sizes), cfg['tri_channels'], cfg['tri_resolution'], cfg['knn'],
                           cfg['hidden'], torch.from_numpy(stats[0]), torch.from_numpy(stats[1]))


def _coding_model(model: TriPlaneContext, xyz: np.ndarray, neighbours: np.ndarray, low: torch.Tensor,
                  high: torch.Tensor) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Float64 means, scales and quantised step factors of every Gaussian, in chunks."""
    model64 = copy.deepcopy(model).double().eval()
    points = torch.from_numpy(xyz.astype(np.float64))
    outputs = []
    with torch.no_grad():
        for start in range(0, len(xyz), CHUNK):
            index = torch.from_numpy(neighbours[start:start + CHUNK])
            outputs.append([part.numpy() for part in model64(points[index], low, high)])
    mean, scale, factor = (np.concatenate(parts) for parts in zip(*outputs))
    return mean, scale, np.clip(np.rint(factor * STEP_GRID), 1, 2 * STEP_GRID) / STEP_GRID


def _train(model: TriPlaneContext, xyz: np.ndarray, neighbours: np.ndarray, attributes: np.ndarray,
           base_steps: np.ndarray, group_index: np.ndarray, low: torch.Tensor, high: torch.Tensor,
           config: CodecConfig, progress: bool = False) -> list[float]:
    """Fit the context model to the scene: uniform-noise quantisation, bits + λ·squared error per value; with
    ``progress`` a bar on stderr shows the steps and the bits per Gaussian."""
    generator = torch.Generator().manual_seed(config.seed)
    points = torch.from_numpy(xyz).float()
    neighbour_index = torch.from_numpy(neighbours)
    values = torch.from_numpy(attributes).float()
    steps = torch.from_numpy(base_steps).float()
    weights = 6 / (math.log(2) * steps ** 2)
    columns = torch.from_numpy(group_index)
    low32, high32 = low.float(), high.float()
    optimizer = torch.optim.Adam(model.parameters(), lr=config.lr)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, max(config.steps, 1))
    history = []
    bar = tqdm(range(config.steps), desc='training the context', unit='step', file=sys.stderr, disable=not progress)
    for _ in bar:
        index = torch.randint(len(xyz), (min(config.batch, len(xyz)),), generator=generator)
        mean, scale, factor = model(points[neighbour_index[index]], low32, high32)
        step = steps * factor[:, columns]
        noisy = values[index] + (torch.rand(step.shape, generator=generator) - 0.5) * step
        bits = gaussian_bits(noisy, mean, scale, step).sum(1).mean()
        error = ((noisy - values[index]).square() * weights).sum(1).mean()
        loss = (bits + error) / values.shape[1]
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        schedule.step()
        history.append(float(bits.detach()))
        bar.set_postfix_str(f'{history[-1]:.1f} bits per Gaussian', refresh=False)
    return history


def _base_steps(groups: AttributeGroups, step_scale: float) -> np.ndarray:
    """(W,) each column's base step: its group's :data:`BASE_STEPS` entry times ``step_scale``."""
    return np.array([BASE_STEPS[name] for name in groups.sizes], np.float64)[groups.group_index()] * step_scale


def _factorized_model(stats: np.ndarray, count: int,
                      groups: AttributeGroups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The context-free model: every Gaussian gets each column's mean and spread, and step factor 1."""
    shape = (count, groups.width)
    return (np.broadcast_to(stats[0].astype(np.float64), shape), np.broadcast_to(stats[1].astype(np.float64), shape),
            np.ones((count, len(groups.sizes))))


def _parameter_hash(means: np.ndarray, stds: np.ndarray, factors: np.ndarray) -> str:
    digest = hashlib.sha256()
    for array in (np.rint(means * 64).astype(np.int64), np.rint(np.log2(stds) * 16).astype(np.int64),
                  np.rint(factors * STEP_GRID).astype(np.int64)):
        digest.update(np.ascontiguousarray(array).tobytes())
    return digest.hexdigest()[:32]


def _group_columns(groups: AttributeGroups) -> list[tuple[str, list[int]]]:
    return [(name, list(range(part.start, part.stop))) for name, part in groups.slices().items()]


def compress(cloud: GaussianCloud, config: CodecConfig | None = None, key: bytes | None = None,
             progress: bool = False) -> bytes:
    """The ``.vgs`` bytes of ``cloud`` under ``config`` (training statistics in ``config.stats``; the model size
    it used in the header's ``config``), signed under ``key`` when given (:mod:`vispe.gaussians.bitstream`);
    ``progress`` shows the context model's training on stderr (minutes at the default 3000 steps).

    Refused (ValueError, before any training where possible): ``knn`` above the number of Gaussians, a step scale
    that quantises every attribute to one value, quaternions that would decode to zero, values beyond float16's
    range in the float16 codec. Warned (:class:`~vispe.gaussians.checks.QuantisationWarning`): a centre grid
    coarser than the Gaussians (e.g. one far outlier), a group quantised to one value, a model larger than the
    scene."""
    config = config or CodecConfig()
    cloud.validate()
    start = time.perf_counter()
    groups = AttributeGroups(cloud.f_rest.shape[2])
    config = model_size(config, len(cloud), groups.width, len(groups.sizes))
    header = dict(codec=config.codec, count=len(cloud), rest=groups.rest, config=asdict(config) | {'stats': None})
    if config.codec == 'float16':
        rows = np.concatenate([cloud.xyz, groups.matrix(cloud)], axis=1)
        names = cloud.property_names()
        check_float16(rows, names[:3] + names[6:])
        rows = rows.astype(np.float16)
        check_rotations(rows[:, -4:], cloud.rotation, np.arange(len(cloud)), 'float16')
        sections = {'rows': zlib.compress(rows.tobytes(), 9)}
        return pack(dict(header, encode_seconds=round(time.perf_counter() - start, 3)), sections, key)
    if config.codec == 'triplane':
        _check_model_options(config, len(cloud), groups)
    check_centre_grid(cloud.xyz, cloud.scale)
    low, high = cloud.xyz.min(0), cloud.xyz.max(0)
    grid = quantize_positions(cloud.xyz, low, high)
    order, position_bytes = encode_positions(grid)
    grid = grid[order]
    attributes = groups.matrix(cloud)[order].astype(np.float64)
    stats = np.stack([attributes.mean(0), np.maximum(attributes.std(0), 1e-6)]).astype(np.float32)
    base = _base_steps(groups, config.step_scale)
    header.update(low=low.tolist(), high=high.tolist())
    sections = {'positions': position_bytes, 'stats': stats.tobytes()}
    if config.codec == 'factorized':
        mean, scale, factors = _factorized_model(stats, len(cloud), groups)
    else:
        check_collapse(attributes, base / STEP_GRID, groups, config.step_scale, BASE_STEPS, refuse_only=True)
        xyz = dequantize_positions(grid, low, high)
        neighbours = grid_neighbours(grid, config.knn)
        box = scene_box(low.astype(np.float64), high.astype(np.float64))
        torch.manual_seed(config.seed)
        model = _build_model(header, groups, stats)
        config.stats['bits_history'] = _train(model, xyz, neighbours, attributes, base, groups.group_index(), *box,
                                              config, progress)
        sections['model'] = _model_bytes(model)
        _load_model_bytes(model, sections['model'])              # code with exactly what the decoder will read
        mean, scale, factors = _coding_model(model, xyz, neighbours, *box)
    step = base * factors[:, groups.group_index()]
    check_collapse(attributes, step, groups, config.step_scale, BASE_STEPS)
    symbols = np.rint(attributes / step).astype(np.int64)
    rotation = groups.slices()['rotation']
    check_rotations(symbols[:, rotation], attributes[:, rotation], order,
                    f'the rotation step {BASE_STEPS["rotation"] * config.step_scale:g} (step scale '
                    f'{config.step_scale:g}{", times the learned factors" if config.codec == "triplane" else ""})')
    means, stds = coding_parameters(mean, scale, step)
    header['ranges'] = np.stack([symbols.min(0), symbols.max(0)], axis=1).tolist()
    header['parameter_hash'] = _parameter_hash(means, stds, factors)
    for name, columns in _group_columns(groups):
        sections[f'group_{name}'] = encode_symbols(
            [(symbols[:, j], means[:, j], stds[:, j], *header['ranges'][j]) for j in columns]).tobytes()
    return pack(dict(header, encode_seconds=round(time.perf_counter() - start, 3)), sections, key)


def decompress(data: bytes, source: str = 'bitstream', key: bytes | None = None) -> GaussianCloud:
    """The Gaussians of ``.vgs`` bytes: centres in Morton order (the set of the input's, on the 16-bit grid),
    attributes dequantised; :class:`BitstreamError` naming ``source`` for anything that does not check out (see
    :mod:`vispe.gaussians.bitstream` for what that covers: damage always, tampering only with ``key``)."""
    header, sections = unpack(data, source, key)
    codec = header.get('codec')
    if codec not in CODECS:
        raise BitstreamError(f'{source} was written with codec {codec!r}; this vispe decodes {", ".join(CODECS)}: '
                             f'decode it with the program that wrote it (or a newer vispe), or compress the .ply '
                             f'again with tools/gaussians/compress.py.')
    try:
        return _decode(header, sections, codec, source)
    except BitstreamError:
        raise
    except Exception as error:
        message = str(error).splitlines()[0] if str(error) else ''
        raise BitstreamError(f'{source} passes its CRC-32 but does not decode ({type(error).__name__}: {message}): '
                             f'it was not written by this vispe\'s compress, or was edited and its CRC recomputed; '
                             f'compress the .ply again.') from error


def _decode(header: dict, sections: dict[str, bytes], codec: str, source: str) -> GaussianCloud:
    """The scene of an unpacked bitstream of ``codec`` (any inconsistency raises; :func:`decompress` names it)."""
    count, groups = int(header['count']), AttributeGroups(int(header['rest']))
    if codec == 'float16':
        rows = np.frombuffer(zlib.decompress(sections['rows']), np.float16).reshape(count, 3 + groups.width)
        return groups.cloud(rows[:, :3].astype(np.float32), rows[:, 3:].astype(np.float32))
    low, high = np.array(header['low'], np.float32), np.array(header['high'], np.float32)
    grid = decode_positions(sections['positions'], count)
    xyz = dequantize_positions(grid, low, high)
    stats = np.frombuffer(sections['stats'], np.float32).reshape(2, groups.width)
    base = _base_steps(groups, header['config']['step_scale'])
    if codec == 'factorized':
        mean, scale, factors = _factorized_model(stats, count, groups)
    else:
        model = _build_model(header, groups, stats.copy())
        _load_model_bytes(model, sections['model'])
        neighbours = grid_neighbours(grid, header['config']['knn'])
        mean, scale, factors = _coding_model(model, xyz, neighbours,
                                             *scene_box(low.astype(np.float64), high.astype(np.float64)))
    step = base * factors[:, groups.group_index()]
    means, stds = coding_parameters(mean, scale, step)
    if _parameter_hash(means, stds, factors) != header['parameter_hash']:
        raise BitstreamError(f'{source}: the context model gives other coding parameters here than where the file '
                             f'was written (a floating-point difference between the machines); the scene cannot '
                             f'be decoded safely.')
    attributes = np.empty((count, groups.width))
    for name, columns in _group_columns(groups):
        words = np.frombuffer(sections[f'group_{name}'], np.uint32)
        decoded = decode_symbols(words, [(means[:, j], stds[:, j], *header['ranges'][j]) for j in columns])
        for j, symbols in zip(columns, decoded):
            attributes[:, j] = symbols * step[:, j]
    return groups.cloud(xyz, attributes.astype(np.float32))
