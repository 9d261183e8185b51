"""The point-decoder benchmark of ``tools/benchmark.py --point-layer``: one V-DETR decoder layer (self-attention,
cross-attention from Q box queries to P point tokens, FFN; d = 256, 4 heads, one shared key/value head) with each
point encoding, against the same layer without one; and the peak memory of an 8-layer decoder's training step,
measured in a fresh process (CPU: Linux ``VmHWM``).

    vispe benchmark --point-layer --queries 256 --points 2048 --batch 2 [--backward] [--memory]
"""
from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import torch

from vispe.engine.benchmark_common import machine_description, measure, report_table, round_ratios
from vispe.geometry import Positions, SceneGeometry
from vispe.models.vdetr.transformer import BoxRefinementDecoder

# label -> encoding config; the first is the baseline.
POINT_ENCODINGS: dict[str, dict] = {
    'no position (NoPE)': dict(type='NoPE'),
    'NoPE control': dict(type='NoPE'),
    'FourierXYZ': dict(type='FourierXYZ'),
    'SinCosXYZ': dict(type='SinCosXYZ'),
    'VertexRPE (table)': dict(type='VertexRPE'),
}
EMBED_DIM, NUM_HEADS, MLP_DIM = 256, 4, 256


def point_scene(batch: int, queries: int, points: int, device: torch.device,
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, Positions]:
    """Query features (B, Q, d), point features (B, P, d), query boxes (B, Q, 7) and the points' positions, in a
    6 × 6 × 3 m room."""
    generator = torch.Generator().manual_seed(seed)
    room = torch.tensor([6.0, 6.0, 3.0])
    xyz = torch.rand(batch, points, 3, generator=generator) * room
    centres = torch.rand(batch, queries, 3, generator=generator) * room
    sizes = 0.2 + torch.rand(batch, queries, 3, generator=generator)
    boxes = torch.cat([centres, sizes, torch.zeros(batch, queries, 1)], dim=-1)
    tgt = torch.randn(batch, queries, EMBED_DIM, generator=generator)
    memory = torch.randn(batch, points, EMBED_DIM, generator=generator)
    bounds = torch.stack([torch.zeros(batch, 3), room.expand(batch, 3)], dim=1)
    pos_k = Positions(coords=xyz.to(device), scene=SceneGeometry(bounds=bounds.to(device)), device=device)
    return tgt.to(device), memory.to(device), boxes.to(device), pos_k


def build_decoder(encoding: dict, depth: int, device: torch.device) -> BoxRefinementDecoder:
    torch.manual_seed(0)
    return BoxRefinementDecoder(EMBED_DIM, num_classes=18, depth=depth, num_heads=NUM_HEADS, mlp_dim=MLP_DIM,
                                dropout=0.0, encoding=encoding).to(device)


def point_layer_runs(batch: int, queries: int, points: int, backward: bool,
                     device: torch.device) -> dict[str, Callable[[], object]]:
    """label -> one decoder layer's step (with the encoding's per-forward work: key table, query embedding, bias)."""
    tgt, memory, boxes, pos_k = point_scene(batch, queries, points, device)
    runs: dict[str, Callable[[], object]] = {}
    for label, encoding in POINT_ENCODINGS.items():
        decoder = build_decoder(encoding, 1, device).train(backward)
        runs[label] = (lambda decoder=decoder: decoder(tgt, memory, pos_k, boxes)['logits'].sum().backward()) \
            if backward else (lambda decoder=decoder: torch.inference_mode()(decoder)(tgt, memory, pos_k, boxes))
    return runs


def _status_kb(field: str) -> int:
    for line in Path('/proc/self/status').read_text().splitlines():
        if line.startswith(field + ':'):
            return int(line.split()[1])
    raise RuntimeError(f'/proc/self/status has no {field}: peak memory on the CPU needs Linux.')


def probe_decoder_memory(request: str) -> None:
    """In a fresh process: peak resident bytes of one training step (forward and backward) of a decoder."""
    spec = json.loads(request)
    device = torch.device('cpu')
    tgt, memory, boxes, pos_k = point_scene(spec['batch'], spec['queries'], spec['points'], device)
    decoder = build_decoder(spec['encoding'], spec['depth'], device).train()
    tgt.requires_grad_(True)
    ctypes.CDLL('libc.so.6').malloc_trim(0)
    before = _status_kb('VmRSS')
    Path('/proc/self/clear_refs').write_text('5')
    decoder(tgt, memory, pos_k, boxes)['logits'].sum().backward()
    print(json.dumps(dict(peak_bytes=(_status_kb('VmHWM') - before) * 1024)))


def decoder_training_peak(encoding: dict, depth: int, batch: int, queries: int, points: int,
                          threads: int | None) -> float:
    """Peak bytes above the baseline of an ``depth``-layer decoder's training step, in a fresh process."""
    request = json.dumps(dict(encoding=encoding, depth=depth, batch=batch, queries=queries, points=points))
    command = [sys.executable, '-m', 'vispe.engine.benchmark_points', request]
    if threads:
        command.append(str(threads))
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f'Memory probe of the {depth}-layer decoder with {encoding} failed:\n{result.stderr}')
    return float(json.loads(result.stdout.strip().splitlines()[-1])['peak_bytes'])


if __name__ == '__main__':
    if len(sys.argv) > 2:
        torch.set_num_threads(int(sys.argv[2]))
    probe_decoder_memory(sys.argv[1])


def run_point_layer(args: argparse.Namespace, device: torch.device, command: str) -> None:
    """Point-layer mode: time one decoder layer per point encoding, print the table, write <out>.*."""
    runs = point_layer_runs(args.batch, args.queries, args.points, args.backward, device)
    results = measure(runs, device, args.repeats, args.warmup)
    baseline = next(iter(results))
    rows = []
    for label, result in results.items():
        row = dict(model=label, queries=args.queries, points=args.points, **result,
                   **round_ratios(result, results[baseline]))
        if args.memory and device.type == 'cpu':
            row['decoder8_train_peak_bytes'] = decoder_training_peak(POINT_ENCODINGS[label], 8, args.batch,
                                                                     args.queries, args.points, args.threads)
        rows.append(row)
    title = (f"point-detector decoder layer (d 256, 4 heads, 1 key/value head), "
             f"{'forward + backward' if args.backward else 'forward'}, batch {args.batch}, Q {args.queries}, "
             f'P {args.points}, {device}, {torch.get_num_threads()} threads, torch {torch.__version__}, median of '
             f'{args.repeats} interleaved repeats; x: median of the per-round ratios (highest)')
    cells = [['encoding', 'ms', f'x {baseline}', '8-layer train step peak MB']]
    cells += [[row['model'], f"{row['seconds'] * 1e3:.1f}", f"{row['ratio']:.2f} ({row['ratio_high']:.2f})",
               f"{row['decoder8_train_peak_bytes'] / 2**20:.0f}" if 'decoder8_train_peak_bytes' in row else '-']
              for row in rows]
    report_table(args.out, command, title, machine_description(device), rows, cells,
                 note=args.note)
