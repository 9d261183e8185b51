"""`make gpu-check`: vispe on a CUDA device, in one command (a checkout's developer tool).

Refuses to run without CUDA. Otherwise it runs, in order, and goes on after a failure so that one run gives every
answer (the exit status is the first failure's):

1. the CUDA suite, ``pytest -m cuda tests/cuda``: every encoding in its host forward and backward equal to the
   CPU's, bf16 autocast, torch.compile with no graph break, FlexAttention equal to SDPA, no forward that waits for
   the host (``torch.cuda.set_sync_debug_mode('error')``) for every encoding and the DETR, PETR and V-DETR configs,
   20 AMP training steps and a one-process NCCL run of ``tools/dist_train.sh``;
2. the benchmark rows, each written to ``benchmarks/cuda_*`` (JSON, CSV and markdown naming the GPU): ViT-S/16 at
   224, 512 and 1024 px for every encoding (forward and forward + backward, peak memory, control row), LookHere,
   ALiBi2D and iRPE with FlexAttention and SDPA at 1024 px, the V-DETR point layer, GTA's view stack and the PETR
   detectors. Then ``python tools/update_readme.py`` fills the docs' CUDA tables from them;
3. the Gaussian codec's rendered quality with gsplat (``vispe[render]``): the real stereo pair's fitted Gaussians,
   compressed at three step scales and as float16, rendered from its held-out cameras on the GPU, the report written
   to ``benchmarks/cuda_gaussians_motorcycle-fit``, beside the same rows of ``models/gaussians_motorcycle-fit.json``
   that vispe's PyTorch rasterizer gave (gsplat's float32 kernels with a fast exp may flip a rare pixel at a
   threshold; the CUDA suite bounds how many).

    make gpu-check           # or: python tools/gpu_check.py [--skip-tests] [--skip-benchmarks] [--skip-gaussians]
"""
from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
PETR = [f'configs/petr/petr-r18_{name}_mv-scenes.py' for name in ('nope', 'petr-lid', '3dppe', 'gta')]
FLEX = [f'{{"type":"{name}","kernel":"{kernel}"}}' for name in ('LookHere', 'ALiBi2D', 'iRPE')
        for kernel in ('flex', 'sdpa')]
BENCHMARKS = {
    'cuda_all_vit-s16': ['--encodings', 'all', '--sizes', '224', '512', '1024', '--batch', '8', '--passes',
                         'forward', 'backward'],
    'cuda_flex_1024_vit-s16': ['--encodings', 'none', '--configs', *FLEX, '--sizes', '1024', '--batch', '8'],
    'cuda_vdetr_point_layer': ['--point-layer', '--queries', '256', '--points', '2048', '--batch', '2',
                               '--backward'],
    'cuda_gta_view_stack': ['--view-stack', '2x14x14', '4x32x32', '6x20x50', '--batch', '1'],
    'cuda_petr_mv-scenes': ['--detectors', *PETR, '--sizes', '90', '180', '--batch', '1', '--views', '6'],
}


GAUSSIANS = 'work_dirs/gpu-check/gaussians'
SCENE, CAMERAS = f'{GAUSSIANS}/motorcycle_fit.ply', f'{GAUSSIANS}/motorcycle.cameras.json'
CODECS = {f'factorized_s{scale}': ['--codec', 'factorized', '--step-scale', scale] for scale in ('0.5', '1', '2')} | {
    'float16': ['--codec', 'float16']}


def gaussian_steps() -> list[list[str]]:
    """The commands of step 3 (the module docstring)."""
    vispe = [sys.executable, '-m', 'vispe']
    return [[*vispe, 'gaussians-from-points', 'stereo-motorcycle', SCENE, '--fit', 'neighbours', '--cameras', CAMERAS],
            *[[*vispe, 'compress', SCENE, f'{GAUSSIANS}/motorcycle_fit_{name}.vgs', *options, '--quiet']
              for name, options in CODECS.items()],
            [*vispe, 'gaussians-report', SCENE, *[f'{GAUSSIANS}/motorcycle_fit_{name}.vgs' for name in CODECS],
             '--cameras', CAMERAS, '--device', 'cuda', '--renderer', 'gsplat',
             '--out', 'benchmarks/cuda_gaussians_motorcycle-fit']]


def run(command: list[str]) -> int:
    print('$', shlex.join(command), flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--skip-tests', action='store_true')
    parser.add_argument('--skip-benchmarks', action='store_true')
    parser.add_argument('--skip-gaussians', action='store_true')
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f'gpu-check needs a CUDA device, and torch {torch.__version__} sees none (torch.cuda.is_available() is '
              f'False; CUDA build: {torch.version.cuda or "no"}). Run it on a machine with an NVIDIA GPU and a CUDA '
              f'build of torch; the CPU tests are `make test`.', file=sys.stderr)
        return 2
    print(f'gpu-check on {torch.cuda.get_device_name()} (torch {torch.__version__}, CUDA {torch.version.cuda})')
    failures = []
    if not args.skip_tests:
        failures.append(run([sys.executable, '-m', 'pytest', '-m', 'cuda', 'tests/cuda', '-p', 'no:cacheprovider']))
    if not args.skip_benchmarks:
        for name, options in BENCHMARKS.items():
            failures.append(run([sys.executable, 'tools/benchmark.py', *options, '--device', 'cuda',
                                 '--out', f'benchmarks/{name}']))
    if not args.skip_gaussians:
        for command in gaussian_steps():
            code = run(command)
            failures.append(code)
            if code:
                break
    return next((code for code in failures if code), 0)


if __name__ == '__main__':
    sys.exit(main())
