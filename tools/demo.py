"""vispe's demo: every registered encoding in a small ViT, at the training size and at 2x and 4x.

Prints one row per encoding: parameters, the output shape at each size, and the forward time as a
ratio to NoPE at the same size, measured in this run (median of interleaved repeats).

    python tools/demo.py [--arch vit_tiny_patch16_224] [--img-size 112] [--scales 1 2 4]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import vispe


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('--arch', default='vit_tiny_patch16_224', help='timm ViT architecture')
    parser.add_argument('--img-size', type=int, default=112, help='training size (sets learned tables)')
    parser.add_argument('--scales', type=float, nargs='+', default=[1, 2, 4], help='test sizes as multiples')
    parser.add_argument('--encodings', nargs='+', default=None, help='registered names (default: all)')
    parser.add_argument('--batch', type=int, default=4)
    parser.add_argument('--repeats', type=int, default=5, help='timed forwards per model and size')
    parser.add_argument('--threads', type=int, default=None, help='torch threads (default: torch decides)')
    return parser.parse_args()


def time_forward(model: torch.nn.Module, images: torch.Tensor) -> float:
    start = time.perf_counter()
    model(images)
    return time.perf_counter() - start


@torch.inference_mode()
def main() -> None:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    wanted = args.encodings or [info.name for info in vispe.list_encodings()]
    configs = {'NoPE': {'type': 'NoPE'}}
    patch = vispe.create_vit(args.arch, encoding='NoPE', img_size=args.img_size).patch_embed.patch_size[0]
    sizes = [int(round(args.img_size * scale / patch)) * patch for scale in args.scales]
    for name in wanted:
        cls = vispe.registry.ENCODINGS.get(name)
        for options in cls.examples:
            if 'max_grid' in options:
                options = dict(options, max_grid=max(sizes) // patch)
            label = name + ''.join(f' {key}={value}' for key, value in options.items() if key != 'max_grid'
                                   and not isinstance(value, dict))
            label += ''.join(f' {key}={value["type"]}' for key, value in options.items() if isinstance(value, dict))
            configs[label] = dict(type=name, **options)
    torch.manual_seed(0)
    models = {label: vispe.create_vit(args.arch, encoding=cfg, img_size=args.img_size, num_classes=10).eval()
              for label, cfg in configs.items()}

    shapes: dict[str, dict[int, tuple[int, ...]]] = {name: {} for name in models}
    times: dict[str, dict[int, list[float]]] = {name: {size: [] for size in sizes} for name in models}
    for size in sizes:
        images = torch.randn(args.batch, 3, size, size)
        for name, model in models.items():
            shapes[name][size] = tuple(model(images).shape)
        for _ in range(args.repeats):
            for name, model in models.items():
                times[name][size].append(time_forward(model, images))

    print(f'{args.arch} trained-size {args.img_size}px, batch {args.batch}, torch {torch.__version__}, '
          f'{torch.get_num_threads()} threads; time = median forward / NoPE median at the same size')
    header = ['encoding', 'params (M)', 'encoding params']
    header += [f'out @{size}' for size in sizes] + [f'time/NoPE @{size}' for size in sizes]
    rows = []
    for name, model in models.items():
        row = [name, f'{sum(p.numel() for p in model.parameters()) / 1e6:.3f}',
               str(sum(p.numel() for p in model.encoding.parameters()))]
        row += [str(shapes[name][size]) for size in sizes]
        row += [f'{statistics.median(times[name][size]) / statistics.median(times["NoPE"][size]):.2f}'
                for size in sizes]
        rows.append(row)
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ['-' * w for w in widths], *rows]:
        print('  '.join(cell.ljust(width) for cell, width in zip(row, widths)))


if __name__ == '__main__':
    main()
