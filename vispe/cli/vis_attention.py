"""Draw where a query attends, for a trained model, at several input sizes side by side.

    vispe vis-attention configs/vit/vit-t4_lookhere_fmnist-28.py work_dirs/.../best.pth \\
        --image fmnist:0 --sizes 28 56 --layers -1 --query center --heads all --out attn.png

Images: ``fmnist:INDEX`` (Fashion-MNIST test split), ``skimage:NAME`` (a photo shipped in the
scikit-image wheel, e.g. astronaut, camera, coffee; needs scikit-image), or an image file. The image
goes through the config's test pipeline at each size. ``--query``: cls, center or ROW,COL (of the
training-size grid, scaled to each size). ``--rollout`` draws attention rollout over all layers.

Detectors (DETR configs): without ``--decoder-query`` the maps are the encoder's self-attention of
``--query`` over the feature grid; with ``--decoder-query Q`` they are the cross-attention of object
query Q over the encoder tokens, per decoder layer, with the box that query predicts drawn on top:

    vispe vis-attention configs/detr/detr-r18_sine_fmnist-det.py work_dirs/.../best.pth \
        --image datasets/fmnist-det/val/000001.png --sizes 128 256 --decoder-query 3 --layers 0 -1

Multi-view 3D detectors (PETR / 3DPPE configs): sample ``--scene N`` of the config's test split (or ``--split``)
goes through the detector with its decoder's cross-attention captured; per layer of ``--layers`` (and per head with
``--heads all`` or head indices) the six camera images show the attention of object query ``--decoder-query Q``
over their feature cells (one colour scale for the six, each titled with its share), with the box the query
predicts (its last layer) projected where it is in front of the camera, beside a bird's-eye view of the
ground-truth boxes, the predicted box and the query's reference point. Without ``--decoder-query`` the
highest-scoring query is drawn:

    vispe vis-attention configs/petr/petr-r18_petr-lid_mv-scenes.py work_dirs/.../best.pth \
        --scene 0 --decoder-query 5 --layers 0 -1 --out petr_attention.png

Point-cloud 3D detectors (V-DETR configs): scene ``--scene N`` of the config's test split (or ``--split``) goes
through the detector with its decoder's cross-attention captured; per layer of ``--layers`` (and per head with
``--heads all`` or head indices) a 3D view and a top view show the scene's points in grey, the point tokens coloured
by the attention of object query ``--decoder-query Q`` (the most confident query without it), the ground-truth
boxes in green and the box the query predicts at that layer in red:

    vispe vis-attention configs/vdetr/vdetr-s_vertex-rpe_pt-scenes.py work_dirs/.../best.pth \
        --scene 0 --decoder-query 3 --layers 0 -1 --out vdetr_attention.png
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from mmengine.config import Config

import vispe
from vispe.attention import Attention
from vispe.engine import load_config, named_unknown_types
from vispe.engine.arguments import (InvalidArgument, check_indices, check_query, existing_config, grid_query,
                                    non_negative_int, positive_int, reported_by, run_main, writable_output)
from vispe.datasets.coco_detection import IMAGENET_MEAN, IMAGENET_STD, detection_image, load_coco
from vispe.extras import import_extra
from vispe.models.detr import DETR
from vispe.models.petr import PETRDetector
from vispe.models.vdetr import VDETR
from vispe.registry import DATASETS, MODELS
from vispe.visualization import (attention_rollout, capture_attention, capture_cross_attention, overlay, query_index,
                                 query_map)
from vispe.visualization.multiview import (box_segments, camera_colors, draw_bev_boxes, draw_bev_cameras,
                                           draw_segments, heat_overlay, panel_views, save_figure, setup_bev,
                                           show_image)
from vispe.visualization.multiview_attention import QueryAttention, query_attention
from vispe.visualization.multiview_scene import MultiViewSample, Progress, load_sample
from vispe.visualization.point_attention import draw_point_attention, point_query_attention

Panel = tuple[int, np.ndarray, dict[str, torch.Tensor], list[tuple[str, list[float]]]]
Heads = str | list[int]
LIDAR_SHOWN = 6000  # LiDAR points drawn at most in the bird's-eye view


def head_choice(text: str) -> str | int:
    """argparse type: 'mean', 'all' or a head index (a whole number from 0)."""
    if text in ('mean', 'all'):
        return text
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a head choice; give 'mean', 'all' or head indices from 0.")
    return int(text)


def heads_option(values: list[str | int]) -> Heads:
    """--heads values -> 'mean', 'all' or a list of head indices."""
    words = [value for value in values if isinstance(value, str)]
    if words and len(values) > 1:
        raise InvalidArgument('--heads', values, f"'{words[0]}' cannot be combined with other values",
                              "give 'mean', 'all' or only head indices")
    return words[0] if words else list(values)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``vispe vis-attention``."""
    parser = argparse.ArgumentParser(prog='vispe vis-attention', description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument('config')
    parser.add_argument('checkpoint')
    parser.add_argument('--image', default=None, help="ViT / DETR: the image (default 'fmnist:0')")
    parser.add_argument('--sizes', type=positive_int, nargs='+', default=None, help='ViT / DETR: input sizes')
    parser.add_argument('--layers', type=int, nargs='+', default=[-1], help='layer indices (negative from the end)')
    parser.add_argument('--query', type=grid_query, default='center', help="'cls', 'center' or 'ROW,COL'")
    parser.add_argument('--heads', type=head_choice, nargs='+', default=['mean'],
                        help="'mean', 'all' or head indices")
    parser.add_argument('--rollout', action='store_true', help='attention rollout over all layers instead')
    parser.add_argument('--decoder-query', type=non_negative_int, default=None,
                        help='detectors: draw the decoder cross-attention of this object query (PETR: default the '
                             'highest-scoring one)')
    parser.add_argument('--scene', type=non_negative_int, default=None,
                        help='PETR / V-DETR: sample index in the split (0)')
    parser.add_argument('--split', default=None, help="PETR / V-DETR: data split (default: the config's test split)")
    parser.add_argument('--data-root', type=Path, default=None, help="PETR / V-DETR: default the config's data_root")
    parser.add_argument('--out', type=Path, default=Path('attention.png'))
    return parser


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The command line, refused with a message naming the argument unless sizes are positive, the query
    is well formed and the output folder can be created (the model-dependent ranges: :func:`check_model`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    with reported_by(parser):
        args.heads = heads_option(args.heads)
        args.config = existing_config(args.config, 'config')
        writable_output(args.out, '--out')
    return args


def check_model(args: argparse.Namespace, model: torch.nn.Module) -> None:
    """--layers, --decoder-query and --query against the built model, before any image is processed
    (a DETR encoder's ROW,COL depends on each size's feature grid: checked per size)."""
    if isinstance(model, (PETRDetector, VDETR)):
        check_multiview(args, model)
        return
    for option, value in (('--scene', args.scene), ('--split', args.split), ('--data-root', args.data_root)):
        if value is not None:
            raise InvalidArgument(option, value, 'this option picks a sample of a multi-view data set (PETR configs)',
                                  f'leave out {option} and give --image')
    if args.sizes is None:
        raise InvalidArgument('--sizes', '(none)', 'ViT and DETR configs draw the attention at given input sizes',
                              'give them, e.g. --sizes 28 56')
    check_heads(args.heads, model)
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


def check_heads(heads: Heads, model: torch.nn.Module) -> None:
    """Head indices within the model's attention heads."""
    if isinstance(heads, list):
        num_heads = next(module for module in model.modules() if isinstance(module, Attention)).num_heads
        check_indices('--heads', heads, num_heads, 'attention heads', negative=False)


def check_multiview(args: argparse.Namespace, model: PETRDetector | VDETR) -> None:
    """The options of a 3D detector (multi-view or point cloud): its decoder's queries, layers and heads; no
    2D-only option."""
    for option, value in (('--sizes', args.sizes), ('--image', args.image), ('--rollout', args.rollout or None)):
        if value is not None:
            raise InvalidArgument(option, value, f'a 3D detector ({type(model).__name__}) draws a sample of its data '
                                  f'set as the config reads it', f'leave out {option} and pick the sample with --scene')
    if args.decoder_query is not None:
        check_indices('--decoder-query', [args.decoder_query], model.num_queries,
                      'object queries', negative=False)
    check_indices('--layers', args.layers, len(model.decoder.layers), 'decoder layers')
    check_heads(args.heads, model.decoder)


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
        skimage_data = import_extra('skimage.data', f'--image {spec}')
        if not hasattr(skimage_data, name):
            raise ValueError(f'scikit-image has no image {name!r} (try astronaut, camera, coffee, chelsea).')
        return np.asarray(getattr(skimage_data, name)())
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


def layer_grids(grid: torch.Tensor, layer: int, num_layers: int, heads: Heads) -> dict[str, torch.Tensor]:
    """(heads, ...) attention of one layer -> its panels (the head mean, each head, or the chosen heads)."""
    name = f'layer {layer % num_layers}'
    if heads == 'mean':
        return {f'{name} mean': grid.mean(0)}
    chosen = range(len(grid)) if heads == 'all' else heads
    return {f'{name} head {h}': grid[h] for h in chosen}


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
    save_figure(figure, out)
    plt.close(figure)


def attention_blocks(found: QueryAttention, heads: Heads) -> list[tuple[str, torch.Tensor]]:
    """(name, (V, h, w) map) per drawn layer: the head mean, or each chosen head."""
    blocks = []
    for layer, maps in found.maps.items():
        if heads == 'mean':
            blocks.append((f'layer {layer}', maps.mean(0)))
        else:
            blocks += [(f'layer {layer} head {h}', maps[h]) for h in (range(len(maps)) if heads == 'all' else heads)]
    return blocks


def draw_bev(axis, sample: MultiViewSample, found: QueryAttention, shares: torch.Tensor, colors: np.ndarray) -> None:
    """Ground truth (green), the query's box (red), its reference point and anchor, the cameras with their shares."""
    lidar = sample.lidar_points[::max(1, len(sample.lidar_points) // LIDAR_SHOWN)]
    points = [sample.gt_boxes[:, :2], found.box[None, :2], found.anchor[None, :2], torch.tensor([[10.0, 10.0]])]
    extent = float(torch.cat(points).abs().max()) * 1.1
    lidar = lidar[(np.abs(lidar[:, :2]) <= extent).all(1)]
    axis.scatter(lidar[:, 1], lidar[:, 0], s=0.3, color='0.7', linewidths=0)
    draw_bev_boxes(axis, sample.gt_boxes, 'tab:green', [sample.classes[int(label)] for label in sample.gt_labels])
    draw_bev_boxes(axis, found.box[None], 'tab:red', linewidth=1.5)
    draw_bev_cameras(axis, found.cameras, colors, labels=[f'{share:.0%}' for share in shares.tolist()])
    axis.plot(float(found.anchor[1]), float(found.anchor[0]), '+', color='tab:blue', markersize=6,
              label='reference (pc_range)')
    if found.reference is not None:
        axis.plot(float(found.reference[1]), float(found.reference[0]), 'x', color='tab:purple', markersize=5,
                  label='reference (position_range)')
    axis.legend(fontsize=5, loc='lower right')
    setup_bev(axis, (-extent, -extent, extent, extent), "bird's-eye view")


def draw_multiview(sample: MultiViewSample, found: QueryAttention, heads: Heads, config: str, out: Path) -> None:
    """Per layer (and head): the six cameras with the query's attention and box, its camera shares and a BEV."""
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    from matplotlib.gridspec import GridSpec

    blocks = attention_blocks(found, heads)
    images = sample.images()
    colors = camera_colors(len(sample.channels))
    views = panel_views(sample.channels)
    segments = {view: box_segments(found.cameras, view, found.box[None])[0] for view in views}
    figure = plt.figure(figsize=(13, 4.0 * len(blocks)))
    grid_spec = GridSpec(2 * len(blocks), 4, figure=figure, width_ratios=[1, 1, 1, 1.15])
    for block, (name, grid) in enumerate(blocks):
        shares = grid.flatten(1).sum(-1)
        vmax = float(grid.max())
        for panel, view in enumerate(views):
            axis = figure.add_subplot(grid_spec[2 * block + panel // 3, panel % 3])
            show_image(axis, heat_overlay(images[view], grid[view], vmax),
                       f'{name}: {sample.channels[view]} {float(shares[view]):.0%}')
            draw_segments(axis, segments[view], 'tab:red', 1.2)
        bev = figure.add_subplot(grid_spec[2 * block:2 * block + 2, 3])
        draw_bev(bev, sample, found, shares, colors)
        bev.set_title(f'{name}: camera shares (sum {float(shares.sum()):.3f})\ngreen: ground truth, red: the '
                      f'query\'s box', fontsize=7)
    label = sample.classes[found.label] if found.label < len(sample.classes) else f'label {found.label}'
    chosen = ', the highest-scoring query' if found.chosen else ''
    figure.suptitle(f'{config}: decoder query {found.query}{chosen}: {label} {found.score:.2f} '
                    f'(box of the last layer, red)\n{sample.describe()}; {found.feat_size[0]}x{found.feat_size[1]} '
                    f'cells per camera, colour scale shared by the six cameras of a row pair', fontsize=9)
    figure.tight_layout()
    save_figure(figure, out)
    plt.close(figure)


def multiview_figure(args: argparse.Namespace, cfg: Config, model: PETRDetector) -> None:
    """A PETR / 3DPPE config: the sample (checked before the weights load), the query's attention, the figure."""
    progress = Progress()
    progress(f'loading sample {args.scene or 0}')
    sample = load_sample(cfg.test_dataloader.dataset, args.scene or 0, args.split, args.data_root)
    vispe.load_checkpoint(model, args.checkpoint)
    progress(f'running the detector on {sample.describe()} with its cross-attention captured')
    found = query_attention(model, sample.batch, args.layers, args.decoder_query)
    progress('drawing')
    draw_multiview(sample, found, args.heads, Path(args.config).stem, args.out)
    name = sample.classes[found.label] if found.label < len(sample.classes) else f'label {found.label}'
    print(f'decoder query {found.query}{" (the highest-scoring query)" if found.chosen else ""}: {name} '
          f'{found.score:.3f}, box (x, y, z, l, w, h, yaw) {[round(v, 2) for v in found.box.tolist()]}')


def point_figure(args: argparse.Namespace, cfg: Config, model: VDETR) -> None:
    """A V-DETR config: the scene (checked before the weights load), the query's attention, the figure."""
    from vispe.datasets.point_scenes import pointscenes_collate
    dataset_cfg = dict(cfg.test_dataloader.dataset, train_augment=False)
    for option, key in (('--split', 'split'), ('--data-root', 'data_root')):
        value = getattr(args, key)
        if value is not None:
            dataset_cfg[key] = str(value)
    with named_unknown_types():
        dataset = DATASETS.build(dataset_cfg)
    scene = args.scene or 0
    check_indices('--scene', [scene], len(dataset), f'scenes of split {dataset_cfg.get("split")!r}', negative=False)
    batch = pointscenes_collate([dataset[scene]])
    vispe.load_checkpoint(model, args.checkpoint)
    found = point_query_attention(model, batch['inputs']['points'], args.layers, args.decoder_query)
    sample = batch['data_samples'][0]
    classes = dataset.metainfo.get('classes', ())
    name = classes[found.label] if found.label < len(classes) else f'label {found.label}'
    title = (f'{Path(args.config).stem}: scene {sample["scene_id"]}, decoder query {found.query}'
             f'{" (the most confident)" if found.chosen else ""}: {name} {found.score:.3f}')
    draw_point_attention(found, batch['inputs']['points'][0], sample['gt_boxes'], args.heads, title, args.out)
    last = found.boxes[max(found.boxes)]
    print(f'decoder query {found.query}{" (the most confident query)" if found.chosen else ""}: {name} '
          f'{found.score:.3f}, box (x, y, z, l, w, h, yaw) {[round(v, 2) for v in last.tolist()]}')


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    cfg = load_config(args.config)
    with named_unknown_types():
        model = MODELS.build(cfg.model).eval()
    check_model(args, model)
    if isinstance(model, (PETRDetector, VDETR)):
        (multiview_figure if isinstance(model, PETRDetector) else point_figure)(args, cfg, model)
        print(f'wrote {args.out}')
        return 0
    vispe.load_checkpoint(model, args.checkpoint)
    image = load_image(args.image or 'fmnist:0')
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
