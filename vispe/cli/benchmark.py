"""Speed and peak memory of every encoding at every resolution, as ratios in one run.

Model mode (default): a timm ViT architecture with each encoding, forward passes at each size; the
baselines are plain timm (``timm.create_model``, fused SDPA) and vispe with NoPE, run in the same
loop. Layer mode (``--layer``): one attention layer of the architecture (qkv, rotation, SDPA,
projection) with each rotary encoding, its tables built on every call, against the same layer with
no encoding ("plain SDPA") and, for ComRoPE, a dense formulation that materialises a d×d rotation
per token as the reference code does.

With ``--backward`` each step is a forward and a backward pass (sum of the logits, gradients of
every parameter), the cost of a training step without the optimizer; ``--passes forward backward`` times
both, as rows beside each other. ``--compile`` runs every model, the baselines included, through
``torch.compile`` (timed after its warm-up compiles). "params" counts each model's parameters, so an
encoding's own parameters are its difference to the NoPE row.

Timings are medians of interleaved repeats (every model once per round), so slow drifts of a shared
machine hit all of them alike. In model mode a ratio is the median over rounds of the model's time over
the baseline's in the same round, with the highest round's ratio in brackets (its upper spread), and a
control row (a second plain timm ViT, timed as a model) shows the spread of the run itself. Peak memory: on
CUDA, ``max_memory_allocated`` of one forward; on the CPU with ``--memory``, each model and size runs twice
more in a fresh process (a warm-up step, then the measured one) whose peak resident
memory (Linux ``VmHWM``, reset before the forward) is measured over its resident memory before the
forward. "tables MB" sums the grid tables an encoding keeps cached after the forwards.

    vispe benchmark --arch vit_small_patch16_224 --encodings all --sizes 224 512 --batch 8
    vispe benchmark --layer --sizes 224 --batch 8 --threads 1
    vispe benchmark --encodings RoPEMixed LookHere --sizes 224 --backward --out benchmarks/train
    vispe benchmark --encodings RoPEAxial --sizes 224 --passes forward backward --compile

Detector mode (``--detectors``): multi-view 3D detector configs (PETR / 3DPPE), each model's inference forward
on synthetic images and one fixed rig, its ratio to the first config's ("no 3D PE") and the encoding's share of
it, plus the per-forward camera work a rig-keyed cache could skip (:mod:`vispe.engine.benchmark_detector`).
Sizes are image heights (default: the first config's), the width keeps the config's aspect:

    vispe benchmark --detectors configs/petr/petr-r18_nope_mv-scenes.py \
        configs/petr/petr-r18_petr-lid_mv-scenes.py configs/petr/petr-r18_3dppe_mv-scenes.py \
        --sizes 90 126 --batch 1 --views 6 --out benchmarks/petr_mv-scenes

``--out PATH`` writes PATH.csv, PATH.json (with the command and the machine) and PATH.md (the table in markdown), each
naming the device (the GPU, or the CPU's model and cores); in detector mode PATH.json (command, machine, rig, rows)
and PATH.md.

Point-layer mode (``--point-layer``): one V-DETR decoder layer, Q box queries against P point tokens, with each point
encoding against the same layer without one (:mod:`vispe.engine.benchmark_points`), and that layer again as the
control row; ``--memory`` adds the peak memory of an 8-layer decoder's training step:

    vispe benchmark --point-layer --queries 256 --points 2048 --batch 2 --backward --memory

FPS mode (``--fps``): farthest-point sampling of B clouds of N points to M samples with the torch loop (the
baseline) and the fpsample library, and whether their indices are the same (:mod:`vispe.engine.benchmark_fps`):

    vispe benchmark --fps --batch 2 --points 20000 --samples 2048

View-stack mode (``--view-stack VxHxW ...``): four ViT-S-sized attention layers over V views of H×W tokens with GTA
(``on='qkvo'`` and ``'qk'``) against the same layers without an encoding, and those again as the control row
(:mod:`vispe.engine.benchmark_views`). In both layer modes a ratio is the median of the per-round ratios with the
highest in brackets, as in model mode:

    vispe benchmark --view-stack 2x14x14 4x32x32 --batch 1 --threads 1
"""
from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence

import timm
import torch
from tqdm import tqdm

import vispe
from vispe.encodings import ComRoPE, PositionEncoding
from vispe.engine.arguments import (InvalidArgument, check_distinct, config_dict, existing_config, non_negative_int,
                                    positive_int, progress_wanted, recorded_command, reported_by, run_main,
                                    writable_output)
from vispe.engine.benchmark_common import (device_name, machine_description, machine_summary, markdown_table, measure,
                                           round_ratios, write_csv, write_text_atomically)
from vispe.engine.benchmark_detector import CAMERA_TABLE_NOTE, benchmark_detectors, detector_tables
from vispe.engine.benchmark_fps import check_fps_arguments, run_fps
from vispe.engine.benchmark_points import run_point_layer
from vispe.engine.benchmark_views import run_view_stack, view_layout
from vispe.geometry import Positions
from vispe.reporting.provenance import run_stamp
from vispe.text_table import aligned_table

VIT_ONLY = ('--arch', '--encodings', '--configs', '--timm-models', '--layer', '--memory', '--backward', '--passes',
            '--compile')
PASS_NAMES = {'forward': 'forward', 'backward': 'forward + backward'}
CONTROL = 'timm (plain ViT) control'


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe benchmark``."""
    parser = argparse.ArgumentParser(prog='vispe benchmark', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--arch', default=None, help='timm ViT architecture (default vit_small_patch16_224)')
    parser.add_argument('--encodings', nargs='+', default=None,
                        help="registered names (one row per example configuration), 'all' (default), or 'none'")
    parser.add_argument('--configs', nargs='+', default=[], type=config_dict,
                        help='encoding configs as JSON, e.g. \'{"type": "iRPE", "on": "k"}\'')
    parser.add_argument('--detectors', nargs='+', type=Path, default=[],
                        help='multi-view detector configs; the first is the baseline ("no 3D PE")')
    parser.add_argument('--views', type=positive_int, default=None, help='detector mode: cameras per sample (6)')
    parser.add_argument('--sizes', type=positive_int, nargs='+', default=None,
                        help='image sizes (default 224 512; detectors: heights, default the first config\'s)')
    parser.add_argument('--batch', type=positive_int, default=None, help='batch size (default 8; detectors: 1)')
    parser.add_argument('--repeats', type=positive_int, default=5)
    parser.add_argument('--warmup', type=non_negative_int, default=2)
    parser.add_argument('--threads', type=positive_int, default=None)
    parser.add_argument('--device', type=torch_device, default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--timm-models', nargs='*', default=[],
                        help='extra timm models to time alongside, e.g. vit_small_patch16_rope_mixed_224')
    parser.add_argument('--layer', action='store_true', help='benchmark single attention layers')
    parser.add_argument('--point-layer', action='store_true',
                        help='benchmark one point-detector decoder layer per point encoding')
    parser.add_argument('--queries', type=positive_int, default=256, help='point-layer mode: box queries (256)')
    parser.add_argument('--points', type=positive_int, default=None,
                        help='point-layer mode: point tokens (2048); FPS mode: points per cloud (20000)')
    parser.add_argument('--fps', action='store_true',
                        help='benchmark farthest-point sampling: the torch loop against the fpsample library')
    parser.add_argument('--samples', type=positive_int, default=2048, help='FPS mode: points kept per cloud (2048)')
    parser.add_argument('--view-stack', type=view_layout, nargs='+', default=None, metavar='VxHxW',
                        help='benchmark GTA over V views of HxW tokens (e.g. 2x14x14 4x32x32)')
    parser.add_argument('--memory', action='store_true', help='CPU: measure peak memory in fresh processes')
    parser.add_argument('--backward', action='store_true', help='time forward + backward instead of forward only')
    parser.add_argument('--passes', nargs='+', choices=tuple(PASS_NAMES), default=None,
                        help="ViT and layer modes: which passes to time, as rows beside each other ('forward', "
                             "'backward' = forward + backward; default: forward, or backward with --backward)")
    parser.add_argument('--compile', action='store_true',
                        help='ViT mode: torch.compile every model, the baselines included')
    parser.add_argument('--note', default=None, help='a line for the report, e.g. that the machine was shared')
    parser.add_argument('--out', type=Path, default=None,
                        help='write <out>.csv, <out>.json and <out>.md (detectors: <out>.json and <out>.md)')
    parser.add_argument('--quiet', action='store_true',
                        help='ViT and layer modes: no progress bar (none either when stderr is not a terminal)')
    parser.add_argument('--probe', default=None, help=argparse.SUPPRESS)
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless sizes, batch, repeats, threads and views
    are positive, warm-up is not negative, configs are JSON objects, detector configs exist (without the ViT-only
    options; --views only with them) and the output folder can be created."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        if args.out is not None:
            suffixes = ('.json', '.md') if args.detectors else ('.csv', '.json', '.md')
            writable_output(args.out, '--out', suffixes=suffixes)
        if args.detectors:
            check_detector_arguments(args)
            return args
        if args.point_layer:
            args.batch = args.batch or 2
            args.points = args.points or 2048
            return args
        if args.fps:
            check_fps_arguments(args)
            return args
        if args.view_stack:
            args.batch = args.batch or 1
            return args
        if args.views is not None:
            raise InvalidArgument('--views', args.views, 'counts the cameras of --detectors', 'leave it out of the ViT '
                                                                                              'and layer benchmarks')
        if args.passes is None:
            args.passes = ['backward'] if args.backward else ['forward']
        elif args.backward:
            raise InvalidArgument('--backward', True, 'is the same as --passes backward', 'give one of them')
        check_distinct('--passes', args.passes)
        if args.compile and args.layer:
            raise InvalidArgument('--compile', True, 'compiles the ViT models of model mode',
                                  'leave it out of --layer')
        args.arch = args.arch or 'vit_small_patch16_224'
        args.encodings = args.encodings or ['all']
        args.sizes = args.sizes or [224, 512]
        args.batch = args.batch or 8
        if not args.probe and not args.layer:
            patch = vispe.create_vit(args.arch, encoding='NoPE').patch_embed.patch_size[0]
            bad = [size for size in args.sizes if size % patch]
            if bad:
                raise InvalidArgument('--sizes', bad, f'not multiples of the patch size {patch} of {args.arch}',
                                      f'give multiples of {patch}')
    return args


def check_detector_arguments(args: argparse.Namespace) -> None:
    """Detector mode: configs exist, no ViT-only option, distinct sizes; batch 1 and 6 views by default."""
    given = [option for option in VIT_ONLY if getattr(args, option[2:].replace('-', '_')) not in (None, [], False)]
    if given:
        raise InvalidArgument('--detectors', given[0], f'{given[0]} is an option of the ViT and layer benchmarks, '
                                                       f'not of detector mode', f'leave {given[0]} out (detector mode '
                                                                                f'times each config\'s own model, '
                                                                                f'forward only)')
    args.detectors = [existing_config(path, '--detectors') for path in args.detectors]
    if args.sizes is not None:
        check_distinct('--sizes', args.sizes)
    args.batch = args.batch or 1
    args.views = args.views or 6


def torch_device(text: str) -> torch.device:
    """argparse type: a torch device name ('cpu', 'cuda', 'cuda:1')."""
    try:
        return torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f'{text!r} is not a torch device; give cpu, cuda or cuda:N.') from None


def encoding_configs(names: list[str]) -> dict[str, dict]:
    """One config per example of each named encoding, labelled by its options."""
    if names == ['all']:
        names = [info.name for info in vispe.list_encodings(image_only=True)]
    elif names == ['none']:
        names = []
    configs = {}
    for name in names:
        cls = vispe.registry.ENCODINGS.get(name)
        if cls is None:
            vispe.build_encoding(name)  # raises the unknown-name error with the closest match
        for options in cls.examples:
            label = name + ''.join(f' {k}={v["type"] if isinstance(v, dict) else v}' for k, v in options.items())
            configs[label] = dict(type=name, **options)
    return configs


def step(model: torch.nn.Module, images: torch.Tensor, backward: bool) -> None:
    """One forward pass without autograd, or a forward and backward pass through every parameter."""
    if not backward:
        with torch.inference_mode():
            model(images)
        return
    model.zero_grad(set_to_none=True)
    model(images).float().sum().backward()


def model_runs(args: argparse.Namespace, size: int, device: torch.device, models: dict[str, torch.nn.Module],
               backward: bool) -> dict[str, Callable[[], object]]:
    images = torch.randn(args.batch, 3, size, size, device=device)
    return {label: (lambda model=model: step(model, images, backward)) for label, model in models.items()}


def model_specs(args: argparse.Namespace) -> dict[str, dict | str]:
    """label -> what to build: an encoding config, or the name of a timm model."""
    specs: dict[str, dict | str] = {'timm (plain ViT)': args.arch, CONTROL: args.arch, 'NoPE': {'type': 'NoPE'}}
    for name in args.timm_models:
        specs[f'timm {name}'] = name
    patch = vispe.create_vit(args.arch, encoding='NoPE').patch_embed.patch_size[0]
    configs = encoding_configs(args.encodings)
    for cfg in args.configs:
        configs[cfg['type'] + ''.join(f' {k}={v}' for k, v in cfg.items() if k != 'type')] = cfg
    for label, cfg in configs.items():
        if cfg['type'] == 'RPE2D':
            cfg = dict(cfg, max_grid=max(args.sizes) // patch)
        specs.setdefault(label, cfg)
    return specs


def build_model(arch: str, spec: dict | str) -> torch.nn.Module:
    if isinstance(spec, str):
        return timm.create_model(spec, pretrained=False, dynamic_img_size=True)
    return vispe.create_vit(arch, encoding=spec)


def build_models(args: argparse.Namespace, device: torch.device) -> dict[str, torch.nn.Module]:
    """Every model in eval mode on the device; with ``--compile`` each wrapped by ``torch.compile``."""
    torch.manual_seed(0)
    models = {label: build_model(args.arch, spec).to(device).eval() for label, spec in model_specs(args).items()}
    return {label: torch.compile(model) for label, model in models.items()} if args.compile else models


def cached_table_bytes(model: torch.nn.Module) -> int:
    """Bytes of the tables the model's encodings keep across forwards."""
    return sum(module.table_cache.nbytes() for module in model.modules() if isinstance(module, vispe.PositionEncoding))


def _proc_status_kb(field: str) -> int:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith(field + ':'):
            return int(line.split()[1])
    raise RuntimeError(f'/proc/self/status has no {field}: peak memory on the CPU needs Linux.')


def probe_memory(request: str) -> None:
    """In a fresh process: peak resident bytes of one step above the resident bytes before it, after a warm-up step
    (so that a kernel compiled on first use, FlexAttention's, is not counted; cached tables are in 'tables MB')."""
    spec = json.loads(request)
    model = build_model(spec['arch'], spec['spec']).eval()
    images = torch.randn(spec['batch'], 3, spec['size'], spec['size'])
    step(model, images, spec['backward'])
    ctypes.CDLL('libc.so.6').malloc_trim(0)
    before = _proc_status_kb('VmRSS')
    Path('/proc/self/clear_refs').write_text('5')
    step(model, images, spec['backward'])
    print(json.dumps(dict(peak_bytes=(_proc_status_kb('VmHWM') - before) * 1024)))


def measure_memory_in_subprocess(args: argparse.Namespace, spec: dict | str, size: int, backward: bool) -> float:
    request = json.dumps(dict(arch=args.arch, spec=spec, size=size, batch=args.batch, backward=backward))
    command = [sys.executable, '-m', 'vispe', 'benchmark', '--probe', request]
    if args.threads:
        command += ['--threads', str(args.threads)]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f'Memory probe for {spec} at {size} failed:\n{result.stderr}')
    return float(json.loads(result.stdout.strip().splitlines()[-1])['peak_bytes'])


class DenseComRoPE(PositionEncoding):
    """ComRoPE rotated the dense way: each token's blocks scattered into a d×d matrix, then R @ x."""

    def __init__(self, encoding: ComRoPE) -> None:
        super().__init__()
        self.encoding = encoding

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        blocks = torch.linalg.matrix_exp(self.encoding.generators(pos_q)[layer_idx])
        heads, tokens, num_blocks, b, _ = blocks.shape
        dense = q.new_zeros(heads, tokens, num_blocks * b, num_blocks * b)
        for j in range(num_blocks):
            dense[..., j * b:(j + 1) * b, j * b:(j + 1) * b] = blocks[:, :, j]
        dense = dense.expand(q.shape[0], -1, -1, -1, -1)
        return (dense @ q.unsqueeze(-1)).squeeze(-1), (dense @ k.unsqueeze(-1)).squeeze(-1)


def layer_runs(args: argparse.Namespace, size: int, device: torch.device,
               backward: bool) -> dict[str, Callable[[], object]]:
    """One attention layer of the architecture (qkv, rotation, SDPA, projection), tables built per call."""
    probe = vispe.create_vit(args.arch, encoding='NoPE')
    attention = probe.blocks[0].attn.to(device).eval()
    heads, head_dim = attention.num_heads, attention.head_dim
    grid = (size // probe.patch_embed.patch_size[0],) * 2
    x = torch.randn(args.batch, 1 + grid[0] * grid[1], probe.embed_dim, device=device)
    context = dict(head_dim=head_dim, depth=1, num_heads=heads)
    runs: dict[str, Callable[[], object]] = {'plain SDPA': lambda: attention(x)}
    for label, cfg in [('RoPEAxial', dict(type='RoPEAxial')), ('RoPEMixed', dict(type='RoPEMixed')),
                       ('ComRoPE AP b=2', dict(type='ComRoPE', variant='AP')),
                       ('ComRoPE LD b=2', dict(type='ComRoPE', variant='LD')),
                       ('ComRoPE LD b=8', dict(type='ComRoPE', variant='LD', block_size=8))]:
        encoding = vispe.build_encoding(cfg, **context).to(device).eval()
        runs[label] = lambda encoding=encoding: attention(x, Positions(grid, num_prefix_tokens=1, device=device),
                                                          encoding, 0)
        if isinstance(encoding, ComRoPE):
            dense = DenseComRoPE(encoding)
            runs[f'{label} dense d×d'] = lambda dense=dense: attention(
                x, Positions(grid, num_prefix_tokens=1, device=device), dense, 0)
    if backward:
        x.requires_grad_(True)
        return {label: (lambda run=run: run().sum().backward()) for label, run in runs.items()}
    return {label: (lambda run=run: torch.inference_mode()(run)()) for label, run in runs.items()}


def table_cells(rows: list[dict], baselines: list[str]) -> list[list[str]]:
    """The header and one line of formatted cells per row."""
    def megabytes(value: float | None) -> str:
        return '-' if value is None or value != value else f'{value / 2**20:.1f}'

    def millions(value: int | None) -> str:
        return '-' if value is None else f'{value / 1e6:.3f}M'
    lines = [['size', 'pass', 'model', 'ms', *[f'x {b}' for b in baselines], 'peak MB', 'tables MB', 'params']]
    for row in rows:
        lines.append([str(row['size']), row['pass'], row['model'], f"{row['seconds'] * 1e3:.1f}",
                      *[f"{row[f'ratio_{b}']:.3f} ({row[f'ratio_{b}_high']:.3f})" for b in baselines],
                      megabytes(row['peak_bytes']), megabytes(row.get('tables_bytes')), millions(row.get('params'))])
    return lines


def run_detectors(args: argparse.Namespace, device: torch.device, command: str) -> None:
    """Detector mode: time the configs, print the tables, write <out>.json and <out>.md."""
    machine = machine_description(device)
    result = benchmark_detectors(args.detectors, args.sizes, args.batch, args.views, args.repeats, args.warmup, device)
    machine['load_average_1min_after'] = machine_description(device)['load_average_1min']
    title = (f"multi-view detectors, inference forward (mode='predict', no_grad), batch {args.batch} x {args.views} "
             f"views, {device}, {torch.get_num_threads()} threads, torch {torch.__version__}, median of "
             f'{args.repeats} interleaved repeats')
    speed, camera = detector_tables(result)
    rigs = '; '.join(f'{size}: {source}' for size, source in result['rigs'].items())
    lines = [title, f'`{command}`', machine_summary(machine),
             f'rig (the same data samples every call; synthetic N(0, 1) images): {rigs}',
             *([f'note: {args.note}'] if args.note else [])]
    print('\n'.join(lines))
    print(aligned_table(speed))
    print(f'\n{CAMERA_TABLE_NOTE}')
    print(aligned_table(camera))
    if args.out:
        document = dict(command=command, **run_stamp(), title=title, device=device_name(machine), machine=machine,
                        note=args.note, **result)
        write_text_atomically(args.out.with_suffix('.json'), json.dumps(document, indent=1, allow_nan=False) + '\n')
        write_text_atomically(args.out.with_suffix('.md'), '\n\n'.join([*lines, markdown_table(speed),
                                                                         CAMERA_TABLE_NOTE, markdown_table(camera)])
                              + '\n')


def size_rows(args: argparse.Namespace, size: int, pass_name: str, results: dict[str, dict], baselines: list[str],
              models: dict[str, torch.nn.Module] | None, specs: dict[str, dict | str] | None,
              device: torch.device) -> list[dict]:
    """One row per model of one size and pass: times, per-round ratios to each baseline (median and highest),
    cached tables, parameters and (``--memory`` on the CPU) peak memory."""
    rows = []
    for label, result in results.items():
        row = dict(size=size, model=label, **{'pass': PASS_NAMES[pass_name]}, **result)
        if models is not None:
            row['tables_bytes'] = cached_table_bytes(models[label])
            row['params'] = sum(p.numel() for p in models[label].parameters())
            if args.memory and device.type == 'cpu':
                row['peak_bytes'] = measure_memory_in_subprocess(args, specs[label], size, pass_name == 'backward')
        for baseline in baselines:
            ratio = round_ratios(result, results[baseline])
            row[f'ratio_{baseline}'], row[f'ratio_{baseline}_high'] = ratio['ratio'], ratio['ratio_high']
        rows.append(row)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.probe:
        probe_memory(args.probe)
        return 0
    device = torch.device(args.device)
    command = recorded_command('benchmark', argv, 'tools/benchmark.py')
    if args.detectors:
        run_detectors(args, device, command)
        return 0
    if args.point_layer:
        run_point_layer(args, device, command)
        return 0
    if args.fps:
        run_fps(args, device, command)
        return 0
    if args.view_stack:
        run_view_stack(args, device, command)
        return 0
    baselines = ['plain SDPA'] if args.layer else ['timm (plain ViT)', 'NoPE']
    models = None if args.layer else build_models(args, device)
    specs = None if args.layer else model_specs(args)
    machine = machine_description(device)
    rows = []
    steps = [(size, pass_name) for size in args.sizes for pass_name in args.passes]
    with tqdm(steps, unit='step', desc='benchmark', file=sys.stderr, disable=not progress_wanted(args.quiet)) as bar:
        for size, pass_name in bar:
            bar.set_postfix_str(f'{size} px {pass_name}')
            backward = pass_name == 'backward'
            runs = (layer_runs(args, size, device, backward) if args.layer
                    else model_runs(args, size, device, models, backward))
            rows += size_rows(args, size, pass_name, measure(runs, device, args.repeats, args.warmup), baselines,
                              models, specs, device)
    machine['load_average_1min_after'] = machine_description(device)['load_average_1min']
    what = 'attention layer' if args.layer else args.arch + (' (torch.compile)' if args.compile else '')
    passes = ' and '.join(PASS_NAMES[name] for name in args.passes)
    title = (f"{what}, {passes}, batch {args.batch}, {args.device}, {torch.get_num_threads()} threads, torch "
             f'{torch.__version__}, median of {args.repeats} interleaved repeats; x: median of the per-round ratios '
             f'(highest round)')
    cells = table_cells(rows, baselines)
    print(title)
    print(machine_summary(machine))
    print(aligned_table(cells))
    if args.out:
        write_csv(args.out.with_suffix('.csv'), rows, device_name(machine))
        note = dict(note=args.note) if args.note else {}
        document = dict(command=command, **run_stamp(), title=title, device=device_name(machine), machine=machine,
                        **note, rows=rows)
        write_text_atomically(args.out.with_suffix('.json'), json.dumps(document, indent=1))
        note_line = f'note: {args.note}\n\n' if args.note else ''
        write_text_atomically(args.out.with_suffix('.md'), f'{title}\n\n`{command}`\n\n{machine_summary(machine)}\n\n'
                                                           f'{note_line}{markdown_table(cells)}\n')
    return 0


if __name__ == '__main__':
    run_main(main)
