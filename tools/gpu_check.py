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
   detectors. Then ``python tools/update_readme.py`` fills the docs' CUDA tables from them.

    make gpu-check                       # or: python tools/gpu_check.py [--skip-tests] [--skip-benchmarks]
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


def run(command: list[str]) -> int:
    print('$', shlex.join(command), flush=True)
    return subprocess.run(command, cwd=ROOT).returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--skip-tests', action='store_true')
    parser.add_argument('--skip-benchmarks', action='store_true')
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
    return next((code for code in failures if code), 0)


if __name__ == '__main__':
    sys.exit(main())
