"""Draw where a query attends, for a trained model, at several input sizes side by side.

    python tools/vis_attention.py configs/vit/vit-t2_lookhere_fmnist-28.py work_dirs/.../best.pth \\
        --image fmnist:0 --sizes 28 56 --layers -1 --query center --heads all --out attn.png

Images: ``fmnist:INDEX`` (Fashion-MNIST test split), ``skimage:NAME`` (a photo shipped in the
scikit-image wheel, e.g. astronaut, camera, coffee; needs scikit-image), or an image file. The image
goes through the config's test pipeline at each size. ``--query``: cls, center or ROW,COL (of the
training-size grid, scaled to each size). ``--rollout`` draws attention rollout over all layers.

Detectors (DETR configs): without ``--decoder-query`` the maps are the encoder's self-attention of
``--query`` over the feature grid; with ``--decoder-query Q`` they are the cross-attention of object
query Q over the encoder tokens, per decoder layer, with the box that query predicts drawn on top:

    python tools/vis_attention.py configs/detr/detr-r18_sine_fmnist-det.py work_dirs/.../best.pth \
        --image datasets/fmnist-det/val/000001.png --sizes 128 256 --decoder-query 3 --layers 0 -1
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from mmengine.config import Config

import vispe
from vispe.attention import Attention
from vispe.engine import load_config, named_unknown_types
from vispe.engine.arguments import (InvalidArgument, check_indices, check_query, existing_file, grid_query,
                                    non_negative_int, positive_int, reported_by, run_main, writable_output)
from vispe.datasets.coco_detection import IMAGENET_MEAN, IMAGENET_STD, detection_image, load_coco
from vispe.models.detr import DETR
from vispe.registry import DATASETS, MODELS
from vispe.visualization import (attention_rollout, capture_attention, capture_cross_attention, overlay, query_index,
                                 query_map)

Panel = tuple[int, np.ndarray, dict[str, torch.Tensor], list[tuple[str, list[float]]]]


def parse_args() -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless sizes are positive, the query
    is well formed and the output folder can be created (the model-dependent ranges: :func:`check_model`)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--image', default='fmnist:0')
    parser.add_argument('--sizes', type=positive_int, nargs='+', required=True)
    parser.add_argument('--layers', type=int, nargs='+', default=[-1], help='layer indices (negative from the end)')
    parser.add_argument('--query', type=grid_query, default='center', help="'cls', 'center' or 'ROW,COL'")
    parser.add_argument('--heads', choices=['mean', 'all'], default='mean')
    parser.add_argument('--rollout', action='store_true', help='attention rollout over all layers instead')
    parser.add_argument('--decoder-query', type=non_negative_int, default=None,
                        help='detectors: draw the decoder cross-attention of this object query')
    parser.add_argument('--out', type=Path, default=Path('attention.png'))
    args = parser.parse_args()
    with reported_by(parser):
        existing_file(args.config, 'config')
        writable_output(args.out, '--out')
    return args


def check_model(args: argparse.Namespace, model: torch.nn.Module) -> None:
    """--layers, --decoder-query and --query against the built model, before any image is processed
    (a DETR encoder's ROW,COL depends on each size's feature grid: checked per size)."""
    if isinstance(model, DETR):
        if args.decoder_query is not None:
            check_indices('--decoder-query', [args.decoder_query], model.query_embed.num_embeddings, 'object queries',
                          negative=False)
            check_indices('--layers', args.layers, len(model.decoder.layers), 'decoder layers')
            return
        check_query('--query', args.query, None, 0)
    else:
        if args.decoder_query is not None:
            raise InvalidArgument('--decoder-query', args.decoder_query, 'this model is a classifier and the option is '
                                  'for detectors (DETR configs)', 'leave out --decoder-query')
        vit = getattr(model, 'backbone', model)
        check_query('--query', args.query, vit.patch_embed.grid_size, vit.num_prefix_tokens, 'training grid')
    depth = len(model.encoder.layers) if isinstance(model, DETR) else sum(
        isinstance(module, Attention) for module in model.modules())
    check_indices('--layers', args.layers, depth, 'attention layers')


def load_image(spec: str) -> np.ndarray:
    """uint8 (H, W) grey or (H, W, 3) RGB."""
    kind, _, name = spec.partition(':')
    if kind == 'fmnist' and name.isdigit():
        from vispe.datasets.fashion_mnist import default_root, read_idx
        images, _ = read_idx(default_root(), 'test')
        if int(name) >= len(images):
            raise ValueError(f'--image {spec}: the Fashion-MNIST test split has {len(images)} images; give an index '
                             f'from 0 to {len(images) - 1}.')
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
    return np.array(Image.open(path).convert('RGB'))


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


def normalised_for_display(image: torch.Tensor) -> np.ndarray:
    shown = image[0].mean(0).numpy()
    return (shown - shown.min()) / (shown.max() - shown.min() + 1e-12)


def layer_grids(grid: torch.Tensor, layer: int, num_layers: int, heads: str) -> dict[str, torch.Tensor]:
    """(heads, h, w) attention of one layer -> its panels (the head mean, or each head)."""
    name = f'layer {layer % num_layers}'
    if heads == 'mean':
        return {f'{name} mean': grid.mean(0)}
    return {f'{name} head {h}': g for h, g in enumerate(grid)}


def classifier_panels(args: argparse.Namespace, cfg: Config, model: torch.nn.Module, image: np.ndarray) -> list[Panel]:
    vit = getattr(model, 'backbone', model)
    raw = to_model_input(image, vit.in_chans)
    train_grid = vit.patch_embed.grid_size
    panels = []
    for size in args.sizes:
        dataset = DATASETS.build({**cfg.test_dataloader.dataset, 'image_size': size, 'subset': 10, 'train_augment': False})
        inputs = dataset.transform(raw)[None]
        maps = capture_attention(model, inputs)
        pos = vit.positions(inputs)
        query = args.query
        if ',' in query:  # a patch of the training grid, at the same place of this grid
            row, col = (int(p) for p in query.split(','))
            query = f'{row * pos.grid_size[0] // train_grid[0]},{col * pos.grid_size[1] // train_grid[1]}'
        index = query_index(query, pos.grid_size, pos.num_prefix_tokens)
        if args.rollout:
            grids = {'rollout': query_map(attention_rollout(maps)[0], index, pos.grid_size, pos.num_prefix_tokens)}
        else:
            grids = {}
            for layer in args.layers:
                grid = query_map(maps[layer][0], index, pos.grid_size, pos.num_prefix_tokens)
                grids.update(layer_grids(grid, layer, len(maps), args.heads))
        panels.append((size, normalised_for_display(inputs), grids, []))
    return panels


@torch.no_grad()
def detector_panels(args: argparse.Namespace, cfg: Config, model: DETR, image: np.ndarray) -> list[Panel]:
    dataset = cfg.test_dataloader.dataset
    raw = to_model_input(image, 3)
    names = {}
    if Path(dataset.get('ann_file', '')).is_file():  # class names from the test annotations, when present
        coco = load_coco(dataset.ann_file)
        names = {label: coco.cats[cat_id]['name'] for label, cat_id in enumerate(sorted(coco.getCatIds()))}
    panels = []
    for size in args.sizes:
        inputs = detection_image(raw, size, dataset.get('max_size'), dataset.get('mean', IMAGENET_MEAN),
                                 dataset.get('std', IMAGENET_STD))[None]
        grid_size = tuple(model.backbone(inputs).shape[-2:])
        grids, boxes = {}, []
        if args.decoder_query is None:
            check_query('--query', args.query, grid_size, 0, f'feature grid at {size} px')
            maps = capture_attention(model, inputs)
            index = query_index(args.query, grid_size, 0)
            for layer in args.layers:
                grids.update(layer_grids(query_map(maps[layer][0], index, grid_size, 0), layer, len(maps), args.heads))
        else:
            maps = capture_cross_attention(model, inputs)
            query = args.decoder_query
            for layer in args.layers:
                grid = maps[layer][0, :, query].reshape(-1, *grid_size)
                grids.update(layer_grids(grid, layer, len(maps), args.heads))
            outputs = model(inputs, mode='tensor')
            probs = outputs['logits'][-1, 0, query].softmax(-1)
            score, label = probs[:-1].max(-1)
            cx, cy, w, h = outputs['boxes'][-1, 0, query].tolist()
            height, width = inputs.shape[-2:]
            boxes.append((f'{names.get(int(label), f"label {int(label)}")} {score:.2f}', [(cx - w / 2) * width, (cy - h / 2) * height,
                                                                 w * width, h * height]))
        panels.append((size, normalised_for_display(inputs), grids, boxes))
    return panels


def draw(panels: list[Panel], title: str, out: Path) -> None:
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle
    columns = 1 + len(panels[0][2])
    figure, axes = plt.subplots(len(panels), columns, figsize=(2.2 * columns, 2.3 * len(panels)), squeeze=False)
    for row, (size, shown, grids, boxes) in enumerate(panels):
        axes[row, 0].imshow(shown, cmap='gray')
        axes[row, 0].set_title(f'{size}px input', fontsize=8)
        for col, (name, grid) in enumerate(grids.items(), start=1):
            axes[row, col].imshow(overlay(shown, grid))
            axes[row, col].set_title(name, fontsize=8)
        for axis in axes[row]:
            for text, (x, y, w, h) in boxes:
                axis.add_patch(Rectangle((x - 0.5, y - 0.5), w, h, fill=False, edgecolor='cyan', linewidth=1))
                axis.text(x, y - 1, text, color='cyan', fontsize=6)
            axis.axis('off')
    figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=120)
    plt.close(figure)


def main() -> int:
    args = parse_args()
    cfg = load_config(args.config)
    with named_unknown_types():
        model = MODELS.build(cfg.model).eval()
    check_model(args, model)
    vispe.load_checkpoint(model, args.checkpoint)
    image = load_image(args.image)
    if isinstance(model, DETR):
        panels = detector_panels(args, cfg, model, image)
        what = f'decoder query {args.decoder_query}' if args.decoder_query is not None else f'encoder query {args.query}'
    else:
        panels = classifier_panels(args, cfg, model, image)
        what = f'query {args.query}'
    draw(panels, f'{Path(args.config).stem}: {what}', args.out)
    print(f'wrote {args.out}')
    return 0


if __name__ == '__main__':
    run_main(main)
