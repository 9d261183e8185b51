"""Draw where a query attends, for a trained model, at several input sizes side by side.

    python tools/vis_attention.py configs/vit/vit-t2_lookhere_fmnist-28.py work_dirs/.../best.pth \\
        --image fmnist:0 --sizes 28 56 --layers -1 --query center --heads all --out attn.png

Images: ``fmnist:INDEX`` (Fashion-MNIST test split), ``skimage:NAME`` (a photo shipped in the
scikit-image wheel, e.g. astronaut, camera, coffee; needs scikit-image), or an image file. The image
goes through the config's test pipeline at each size. ``--query``: cls, center or ROW,COL (of the
training-size grid, scaled to each size). ``--rollout`` draws attention rollout over all layers.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch
from mmengine.config import Config

import vispe
from vispe.engine import named_unknown_types
from vispe.registry import DATASETS, MODELS
from vispe.visualization import attention_rollout, capture_attention, overlay, query_index, query_map


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--image', default='fmnist:0')
    parser.add_argument('--sizes', type=int, nargs='+', required=True)
    parser.add_argument('--layers', type=int, nargs='+', default=[-1], help='layer indices (negative from the end)')
    parser.add_argument('--query', default='center', help="'cls', 'center' or 'ROW,COL'")
    parser.add_argument('--heads', choices=['mean', 'all'], default='mean')
    parser.add_argument('--rollout', action='store_true', help='attention rollout over all layers instead')
    parser.add_argument('--out', type=Path, default=Path('attention.png'))
    return parser.parse_args()


def load_image(spec: str) -> np.ndarray:
    """uint8 (H, W) grey or (H, W, 3) RGB."""
    kind, _, name = spec.partition(':')
    if kind == 'fmnist' and name.isdigit():
        from vispe.datasets.fashion_mnist import default_root, read_idx
        images, _ = read_idx(default_root(), 'test')
        return images[int(name)].copy()
    if kind == 'skimage':
        try:
            import skimage.data
        except ImportError:
            raise ImportError('skimage:NAME images need scikit-image: pip install scikit-image') from None
        if not hasattr(skimage.data, name):
            raise ValueError(f'scikit-image has no image {name!r} (try astronaut, camera, coffee, chelsea).')
        return np.asarray(getattr(skimage.data, name)())
    path = Path(spec)
    if not path.is_file():
        raise FileNotFoundError(f"Image {spec!r}: not a file, and not 'fmnist:INDEX' or 'skimage:NAME'.")
    from PIL import Image
    return np.asarray(Image.open(path).convert('RGB'))


def to_model_input(image: np.ndarray, in_chans: int) -> torch.Tensor:
    """uint8 (C, H, W) with the model's channel count (grey by luminance, or grey repeated)."""
    tensor = torch.from_numpy(image)
    if tensor.ndim == 2:
        tensor = tensor[None]
    else:
        tensor = tensor[..., :3].permute(2, 0, 1)
    if in_chans == 1 and tensor.shape[0] == 3:
        weights = torch.tensor([0.299, 0.587, 0.114])[:, None, None]
        tensor = (tensor.float() * weights).sum(0, keepdim=True).round().clamp(0, 255).to(torch.uint8)
    elif in_chans == 3 and tensor.shape[0] == 1:
        tensor = tensor.expand(3, -1, -1)
    return tensor


def main() -> int:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    args = parse_args()
    cfg = Config.fromfile(args.config)
    with named_unknown_types():
        model = MODELS.build(cfg.model).eval()
    vispe.load_checkpoint(model, args.checkpoint)
    vit = getattr(model, 'backbone', model)
    raw = to_model_input(load_image(args.image), vit.in_chans)
    train_grid = vit.patch_embed.grid_size
    panels = []
    for size in args.sizes:
        dataset = DATASETS.build({**cfg.test_dataloader.dataset, 'image_size': size, 'subset': 10, 'train_augment': False})
        image = dataset.transform(raw)[None]
        maps = capture_attention(model, image)
        pos = vit.positions(image)
        query = args.query
        if ',' in query:  # a patch of the training grid, at the same place of this grid
            row, col = (int(p) for p in query.split(','))
            query = f'{row * pos.grid_size[0] // train_grid[0]},{col * pos.grid_size[1] // train_grid[1]}'
        index = query_index(query, pos.grid_size, pos.num_prefix_tokens)
        shown = image[0].mean(0).numpy()
        shown = (shown - shown.min()) / (shown.max() - shown.min() + 1e-12)
        if args.rollout:
            grids = {'rollout': query_map(attention_rollout(maps)[0], index, pos.grid_size, pos.num_prefix_tokens)}
        else:
            grids = {}
            for layer in args.layers:
                grid = query_map(maps[layer][0], index, pos.grid_size, pos.num_prefix_tokens)
                if args.heads == 'mean':
                    grids[f'layer {layer % len(maps)} mean'] = grid.mean(0)
                else:
                    grids.update({f'layer {layer % len(maps)} head {h}': g for h, g in enumerate(grid)})
        panels.append((size, shown, grids))
    columns = 1 + len(panels[0][2])
    figure, axes = plt.subplots(len(panels), columns, figsize=(2.2 * columns, 2.3 * len(panels)), squeeze=False)
    for row, (size, shown, grids) in enumerate(panels):
        axes[row, 0].imshow(shown, cmap='gray')
        axes[row, 0].set_title(f'{size}px input', fontsize=8)
        for col, (title, grid) in enumerate(grids.items(), start=1):
            axes[row, col].imshow(overlay(shown, grid))
            axes[row, col].set_title(title, fontsize=8)
        for axis in axes[row]:
            axis.axis('off')
    figure.suptitle(f'{Path(args.config).stem}: query {args.query}', fontsize=9)
    figure.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(args.out, dpi=120)
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    sys.exit(main())
