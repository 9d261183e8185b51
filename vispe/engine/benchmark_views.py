"""The multi-view attention benchmark of ``tools/benchmark.py --view-stack``: a stack of ViT-S-sized attention layers
(d 384, 6 heads, qkv, SDPA, projection) over the tokens of V views of an h×w grid each, with GTA (``on='qkvo'`` and
``'qk'``) against the same stack without an encoding ("plain SDPA"). Each step builds its positions anew, so the
encoding's per-forward tables (the views' cameras, the SO(2) rotations) are in the time.

    vispe benchmark --view-stack 2x14x14 4x32x32 --batch 1 --threads 1
"""
from __future__ import annotations

import argparse
from typing import Callable

import torch
from torch import nn

from vispe.attention import Attention
from vispe.encodings import build_encoding
from vispe.engine.benchmark_common import machine_description, measure, report_table, round_ratios
from vispe.geometry import CameraGeometry, Cameras, Positions

# label -> encoding config (None: no encoding); the first is the baseline, the second the same stack again (the
# control row: its ratio shows the run's own spread).
VIEW_ENCODINGS: dict[str, dict | None] = {
    'plain SDPA': None,
    'plain SDPA control': None,
    "GTA on='qkvo'": dict(type='GTA'),
    "GTA on='qk'": dict(type='GTA', on='qk'),
}
EMBED_DIM, NUM_HEADS, DEPTH = 384, 6, 4


def view_layout(text: str) -> tuple[int, int, int]:
    """argparse type: 'VxHxW' (views, grid rows, grid columns), each positive."""
    try:
        views, rows, cols = (int(part) for part in text.lower().split('x'))
    except ValueError:
        raise argparse.ArgumentTypeError(f'{text!r} is not VIEWSxROWSxCOLS (e.g. 2x14x14).') from None
    if min(views, rows, cols) < 1:
        raise argparse.ArgumentTypeError(f'{text!r}: views, rows and columns must be positive.')
    return views, rows, cols


def random_cameras(batch: int, views: int, grid: tuple[int, int], device: torch.device) -> Cameras:
    """Cameras of ``views`` views on a circle around the origin, looking at it, 16-pixel patches."""
    angles = torch.arange(views, dtype=torch.float64) * (2 * torch.pi / views)
    extrinsics = torch.eye(4, dtype=torch.float64).repeat(batch, views, 1, 1)
    cos, sin = angles.cos(), angles.sin()
    extrinsics[:, :, 0, 0], extrinsics[:, :, 0, 2] = cos, -sin
    extrinsics[:, :, 2, 0], extrinsics[:, :, 2, 2] = sin, cos
    extrinsics[:, :, 2, 3] = 4.0
    height, width = grid[0] * 16, grid[1] * 16
    intrinsics = torch.tensor([[width, 0.0, width / 2], [0.0, width, height / 2], [0.0, 0.0, 1.0]])
    return Cameras(intrinsics=intrinsics.expand(batch, views, 3, 3).to(device), lidar2cam=extrinsics.to(device),
                   image_size=(height, width))


class AttentionStack(nn.Module):
    """``depth`` attention layers with one encoding, residual; the encoding's tables built once per forward."""

    def __init__(self, encoding: dict | None, depth: int = DEPTH) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Attention(EMBED_DIM, NUM_HEADS, qkv_bias=True) for _ in range(depth))
        self.encoding = None if encoding is None else build_encoding(
            encoding, head_dim=EMBED_DIM // NUM_HEADS, depth=depth)

    def forward(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        if self.encoding is not None:
            self.encoding.prepare(pos)
        for index, layer in enumerate(self.layers):
            x = x + layer(x, pos, self.encoding, index)
        return x


def view_stack_runs(batch: int, layout: tuple[int, int, int], backward: bool,
                    device: torch.device) -> dict[str, Callable[[], object]]:
    """label -> one step of the stack over ``layout`` = (views, rows, cols), positions rebuilt per step."""
    views, rows, cols = layout
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(batch, views * rows * cols, EMBED_DIM, generator=generator).to(device)
    cameras = random_cameras(batch, views, (rows, cols), device)
    runs: dict[str, Callable[[], object]] = {}
    for label, encoding in VIEW_ENCODINGS.items():
        torch.manual_seed(0)
        stack = AttentionStack(encoding).to(device).train(backward)

        def run(stack: AttentionStack = stack) -> None:
            pos = Positions((rows, cols), num_views=views, camera=CameraGeometry(cameras), device=device)
            if backward:
                stack.zero_grad(set_to_none=True)
                stack(x, pos).sum().backward()
            else:
                with torch.inference_mode():
                    stack(x, pos)
        runs[label] = run
    return runs


def run_view_stack(args: argparse.Namespace, device: torch.device, command: str) -> None:
    """View-stack mode: time the attention stack per view layout and encoding, print the table, write <out>.*."""
    rows = []
    for views, grid_rows, grid_cols in args.view_stack:
        runs = view_stack_runs(args.batch, (views, grid_rows, grid_cols), args.backward, device)
        results = measure(runs, device, args.repeats, args.warmup)
        baseline = next(iter(results))
        rows += [dict(layout=f'{views} x {grid_rows}x{grid_cols}', model=label, **result,
                      **round_ratios(result, results[baseline])) for label, result in results.items()]
    title = (f"{DEPTH} attention layers (d {EMBED_DIM}, {NUM_HEADS} heads) over views x grid tokens, "
             f"{'forward + backward' if args.backward else 'forward'}, batch {args.batch}, {device}, "
             f'{torch.get_num_threads()} threads, torch {torch.__version__}, '
             f'median of {args.repeats} interleaved repeats; x: median of the per-round ratios (highest)')
    cells = [['views x grid', 'encoding', 'ms', 'x plain SDPA']]
    cells += [[row['layout'], row['model'], f"{row['seconds'] * 1e3:.1f}",
               f"{row['ratio']:.3f} ({row['ratio_high']:.3f})"] for row in rows]
    report_table(args.out, command, title, machine_description(device), rows, cells,
                 note=args.note)
