"""Export a detector's network: ``torch.export`` programs and ONNX files checked with onnxruntime (docs/export.md).

A detector's ``forward`` takes data samples (dicts of cameras, targets, ids) and ends in post-processing (top-k
decoding, NMS) that is data-dependent by nature. What is exported is the network forward on plain tensors that
produces the raw predictions of the last decoder layer (:class:`PETRNetwork`, :class:`VDETRNetwork`,
:class:`DETRNetwork`); the post-processing runs on those outputs with vispe's own functions
(:func:`vispe.models.petr.box_coder.nms_free_decode`, :func:`vispe.models.vdetr.postprocess.detections`,
:meth:`vispe.models.detr.DETR.postprocess`).

ONNX files are written by torch.onnx's dynamo exporter from the ``torch.export`` program, at opset
:data:`ONNX_OPSET`, after one decomposition of vispe's own: ``scaled_dot_product_attention`` and its CPU kernel become
torch's math attention (:func:`attention_decompositions`; the exporter's own translation of the CPU kernel gives a
layout that the graph's later ``view`` of the attention output does not accept, in torch 2.14), and with a translation
of ``aten.grid_sampler_3d`` (VertexRPE's table lookup) to ONNX's volumetric ``GridSample``, which torch.onnx lacks.
Export on the CPU: the decomposition covers the CPU attention kernel.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch import nn

from vispe.extras import import_extra
from vispe.files import write_atomically
from vispe.models import DETR, VDETR, PETRDetector

__all__ = ['DETRNetwork', 'ONNX_OPSET', 'PETRNetwork', 'VDETRNetwork', 'attention_decompositions', 'detector_network',
           'example_inputs', 'export_onnx', 'export_program', 'onnx_translations', 'ring_cameras', 'run_onnx']

ONNX_OPSET = 20  # GridSample on volumes (VertexRPE's 10³ table) needs opset 20


class PETRNetwork(nn.Module):
    """A :class:`~vispe.models.PETRDetector`'s network forward on tensors: the cameras come as inputs, so one graph
    serves any rig of V cameras at the exported image size.

    Shapes: images (B, V, 3, H, W), intrinsics (B, V, 3, 3) of the (resized, padded) images in pixels, lidar2cam
    (B, V, 4, 4) rigid, last row (0, 0, 0, 1), masks (B, V, H, W) bool True on real pixels or None -> class logits
    (B, Q, K) (sigmoid scores) and box codes (B, Q, C) of the last decoder layer, centres in metres
    (``x, y, log l, log w, z, log h, sin yaw, cos yaw[, vx, vy]``); ``nms_free_decode`` gives the boxes.
    """

    input_names = ('images', 'intrinsics', 'lidar2cam', 'masks')
    output_names = ('logits', 'code')

    def __init__(self, detector: PETRDetector) -> None:
        super().__init__()
        self.detector = detector

    def forward(self, images: torch.Tensor, intrinsics: torch.Tensor, lidar2cam: torch.Tensor,
                masks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        size = tuple(images.shape[-2:])
        samples = [dict(intrinsics=intrinsics[index], lidar2cam=lidar2cam[index], pad_shape=size)
                   for index in range(images.shape[0])]
        outputs = self.detector(images, masks, samples, mode='tensor')
        return outputs['logits'][-1], outputs['code'][-1]


class VDETRNetwork(nn.Module):
    """A :class:`~vispe.models.VDETR`'s network forward: points (B, N, 3 + C) -> class logits (B, Q, K + 1) (the last
    is no-object) and boxes (B, Q, 7) (x, y, z, l, w, h, yaw) in metres of the last decoder layer (yaw 0 unless the
    detector has heading bins); 3DETR's per-class NMS (``vispe.models.vdetr.postprocess.detections``) gives the
    detections."""

    input_names = ('points',)
    output_names = ('logits', 'boxes')

    def __init__(self, detector: VDETR) -> None:
        super().__init__()
        self.detector = detector

    def forward(self, points: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = self.detector(points, mode='tensor')
        return outputs['logits'][-1], outputs['boxes'][-1]


class DETRNetwork(nn.Module):
    """A :class:`~vispe.models.DETR`'s network forward: images (B, 3, H, W), masks (B, H, W) bool True on real pixels
    or None -> class logits (B, Q, K + 1) (softmax, the last is no-object) and boxes (B, Q, 4), normalised
    (cx, cy, w, h), of the last decoder layer; ``DETR.postprocess`` scales them to the images."""

    input_names = ('images', 'masks')
    output_names = ('logits', 'boxes')

    def __init__(self, detector: DETR) -> None:
        super().__init__()
        self.detector = detector

    def forward(self, images: torch.Tensor, masks: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        outputs = self.detector(images, masks, mode='tensor')
        return outputs['logits'][-1], outputs['boxes'][-1]


NETWORKS: dict[type[nn.Module], type[nn.Module]] = {PETRDetector: PETRNetwork, VDETR: VDETRNetwork, DETR: DETRNetwork}


def detector_network(model: nn.Module) -> nn.Module:
    """The exportable network forward of a detector (:data:`NETWORKS`), in eval mode (the model is put in eval mode)."""
    for detector_type, network in NETWORKS.items():
        if isinstance(model, detector_type):
            return network(model.eval()).eval()
    names = ', '.join(detector_type.__name__ for detector_type in NETWORKS)
    raise TypeError(f'{type(model).__name__} has no exportable network forward; vispe exports the detectors {names} '
                    f'(for another model, pass a module whose forward takes and returns tensors to export_onnx).')


def ring_cameras(batch: int, views: int, image_size: tuple[int, int]) -> tuple[torch.Tensor, torch.Tensor]:
    """A valid example rig: ``views`` cameras 1.5 m above the scene origin, looking out horizontally at evenly spread
    headings, focal length W / 2 pixels, principal point at the image centre. Returns intrinsics (B, V, 3, 3) and
    lidar2cam (B, V, 4, 4) (scene frame x forward, y left, z up; camera frame OpenCV's)."""
    height, width = image_size
    intrinsics = torch.tensor([[width / 2, 0.0, width / 2], [0.0, width / 2, height / 2], [0.0, 0.0, 1.0]])
    transforms = []
    for index in range(views):
        yaw = 2 * math.pi * index / views
        rotation = torch.tensor([[math.sin(yaw), -math.cos(yaw), 0.0], [0.0, 0.0, -1.0],
                                 [math.cos(yaw), math.sin(yaw), 0.0]])
        transform = torch.eye(4)
        transform[:3, :3] = rotation
        transform[:3, 3] = rotation @ torch.tensor([0.0, 0.0, -1.5])
        transforms.append(transform)
    return intrinsics.expand(batch, views, 3, 3).clone(), torch.stack(transforms).expand(batch, views, 4, 4).clone()


def example_inputs(network: nn.Module, batch: int = 1, image_size: Sequence[int] | None = None,
                   views: int | None = None, points: int | None = None, seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Seeded inputs of the exported size for a :func:`detector_network`: images ~ N(0, 1) and, for PETR,
    :func:`ring_cameras`; for V-DETR, points uniform in a 4 × 4 × 2 m room with colours in [0, 1).

    Args:
        network: a :class:`PETRNetwork`, :class:`VDETRNetwork` or :class:`DETRNetwork`.
        batch: B.
        image_size: (H, W) of the images (PETR, DETR).
        views: V cameras (PETR).
        points: N points per scene (V-DETR).
    """
    generator = torch.Generator().manual_seed(seed)
    if isinstance(network, VDETRNetwork):
        if points is None:
            raise ValueError('A point detector is exported for a number of points per scene: give points.')
        xyz = torch.rand(batch, points, 3, generator=generator) * torch.tensor([4.0, 4.0, 2.0])
        colours = torch.rand(batch, points, network.detector.backbone.in_channels, generator=generator)
        return (torch.cat([xyz, colours], dim=-1),)
    if image_size is None or len(image_size) != 2:
        raise ValueError(f'An image detector is exported for one image size: give image_size (H, W); got '
                         f'{image_size}.')
    height, width = (int(side) for side in image_size)
    if isinstance(network, PETRNetwork):
        if views is None:
            raise ValueError('A multi-view detector is exported for a number of cameras: give views.')
        images = torch.randn(batch, views, 3, height, width, generator=generator)
        return (images, *ring_cameras(batch, views, (height, width)))
    if isinstance(network, DETRNetwork):
        return (torch.randn(batch, 3, height, width, generator=generator),)
    raise TypeError(f'No example inputs for {type(network).__name__}; give the inputs of your module yourself.')


def export_program(module: nn.Module, args: tuple[Any, ...]) -> torch.export.ExportedProgram:
    """``torch.export.export(module, args, strict=False)`` without gradients: a graph of the forward at the sizes of
    ``args`` (every size is fixed)."""
    with torch.no_grad():
        return torch.export.export(module, tuple(args), strict=False)


def attention_decompositions() -> dict[Any, Callable[..., Any]]:
    """``scaled_dot_product_attention`` and its CPU kernel -> torch's decompositions of them, which end in the math
    attention (matmul, softmax, matmul) that ONNX translates with the layout the graph expects."""
    table = torch.export.default_decompositions()
    operators = (torch.ops.aten.scaled_dot_product_attention.default,
                 torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default)
    return {operator: table[operator] for operator in operators}


def onnx_translations() -> dict[Callable[..., Any], Callable[..., Any]]:
    """ATen operators torch.onnx does not translate -> their ONNX Script translations (``custom_translation_table``)."""
    opset20 = import_extra('onnxscript', 'translating to ONNX').opset20

    def grid_sampler_3d(input: Any, grid: Any, interpolation_mode: int, padding_mode: int,
                        align_corners: bool) -> Any:
        """Volumetric ``grid_sample`` as ONNX's GridSample (opset 20: 5-D inputs)."""
        return opset20.GridSample(input, grid, align_corners=int(align_corners),
                                  mode=('linear', 'nearest', 'cubic')[interpolation_mode],
                                  padding_mode=('zeros', 'border', 'reflection')[padding_mode])

    return {torch.ops.aten.grid_sampler_3d.default: grid_sampler_3d}


def export_onnx(module: nn.Module, args: tuple[Any, ...], path: str | Path, input_names: Sequence[str] | None = None,
                output_names: Sequence[str] | None = None, optimize: bool = False) -> Path:
    """Write ``module``'s forward at the sizes of ``args`` to an ONNX file (atomically) and return its path.

    The graph comes from :func:`export_program` and :func:`attention_decompositions`; torch.onnx translates it at
    :data:`ONNX_OPSET` with :func:`onnx_translations`. Inputs and outputs take ``input_names`` and ``output_names``
    (default: the network's ``input_names`` and ``output_names`` where it has them); a ``None`` argument is no input.
    ``optimize`` runs onnxscript's graph optimiser before saving: off by default, since it takes minutes on long
    unrolled loops (V-DETR's farthest-point sampling: one step per sampled point) and onnxruntime optimises the graph
    when it loads it anyway.
    """
    import_extra('onnx', 'exporting to ONNX')   # torch.onnx's dynamo exporter needs onnx and onnxscript
    import_extra('onnxscript', 'exporting to ONNX')
    program = export_program(module, args).run_decompositions(attention_decompositions())
    inputs = [value for value in args if value is not None]
    names = list(input_names or getattr(module, 'input_names', ()))[:len(inputs)] or None
    onnx_program = torch.onnx.export(program, dynamo=True, opset_version=ONNX_OPSET, verbose=False, optimize=optimize,
                                     custom_translation_table=onnx_translations(), input_names=names,
                                     output_names=list(output_names or getattr(module, 'output_names', ())) or None)
    return write_atomically(Path(path), lambda temporary: onnx_program.save(str(temporary)))


def run_onnx(path: str | Path, args: Sequence[torch.Tensor | None]) -> list[np.ndarray]:
    """The outputs of an ONNX file on onnxruntime's CPU provider for the inputs ``args`` (``None`` skipped), in the
    order the file lists its inputs."""
    onnxruntime = import_extra('onnxruntime', 'running an ONNX file')
    session = onnxruntime.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    inputs = [value for value in args if value is not None]
    expected = session.get_inputs()
    if len(inputs) != len(expected):
        raise ValueError(f'{path} takes {len(expected)} inputs ({", ".join(item.name for item in expected)}); got '
                         f'{len(inputs)}.')
    return session.run(None, {item.name: value.detach().cpu().numpy() for item, value in zip(expected, inputs)})
