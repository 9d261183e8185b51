"""Host fixtures of the encoding contract tests: one per ``requires`` set, each a small model that gives its positions
that geometry and calls the encoding the way vispe's hosts do.

* ``grid`` (and ``grid + pixels``): a tiny vispe ViT (images -> tokens);
* ``grid + cameras``: two camera views of a token grid with their cameras: ``embed``, a multi-view encoder with the
  attention hooks, and, for the camera protocol, ``encode_queries`` of 3D reference points and ``losses``;
* ``grid + cameras + crop boxes``: the crop-depth ViT (crops of a larger image, its intrinsics);
* ``points + bounds`` and ``points + boxes``: V-DETR's box-refinement decoder over point tokens.

Each fixture builds a model with an encoding config (``build``), makes seeded inputs of a dtype (``inputs``), and
runs the model on them to one tensor (``run``). ``without`` gives the same inputs with one geometry taken away.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch import nn

import vispe
from vispe.encodings import Host
from vispe.geometry import CameraGeometry, Cameras, Positions
from vispe.models import CropDepthViT
from vispe.models.multiview_encoder import MultiViewEncoder
from vispe.models.vdetr.transformer import BoxRefinementDecoder

EMBED_DIM, HEADS = 32, 4


class MultiViewHost(nn.Module):
    """Tokens of two views of a 3×4 grid with their cameras, through the encoding's hooks: ``embed`` (which encodes
    the features where the encoding does), a two-layer multi-view encoder with the attention hooks, and, where the
    encoding embeds 3D reference points (the camera protocol), those query embeddings and its losses."""

    def __init__(self, encoding: Any) -> None:
        super().__init__()
        self.encoding = vispe.build_encoding(encoding, embed_dim=EMBED_DIM, num_heads=HEADS,
                                             head_dim=EMBED_DIM // HEADS, depth=2, in_channels=EMBED_DIM)
        vispe.encodings.check_encoding_fits(self.encoding, CAMERA_HOST)
        self.encoder = MultiViewEncoder(EMBED_DIM, depth=2, num_heads=HEADS, mlp_dim=64)

    def forward(self, tokens: torch.Tensor, intrinsics: torch.Tensor, extrinsics: torch.Tensor,
                reference: torch.Tensor, geometry: bool = True) -> torch.Tensor:
        cameras = Cameras(intrinsics, extrinsics, (24, 32))
        pos = Positions((3, 4), num_views=2, patch_size=(8, 8), device=tokens.device,
                        camera=CameraGeometry(cameras) if geometry else None)
        self.encoding.prepare(pos)
        x = self.encoding.embed(tokens, pos)
        x = self.encoder(x, pos, self.encoding)
        if not self.encoding.implements('encode_queries'):
            return x
        queries = self.encoding.encode_queries(reference).to(x.dtype)
        return torch.cat([x, queries], dim=1)


CAMERA_HOST = Host('contract-test multi-view host', provides=('grid', 'cameras'), where='tests/encodings/contract.py')


def camera_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randn(2, 24, EMBED_DIM, generator=generator)
    yaw = torch.tensor([[0.0, 0.7], [0.3, -0.9]])
    extrinsics = torch.eye(4).repeat(2, 2, 1, 1)
    extrinsics[..., 0, 0], extrinsics[..., 0, 2] = yaw.cos(), yaw.sin()
    extrinsics[..., 2, 0], extrinsics[..., 2, 2] = -yaw.sin(), yaw.cos()
    extrinsics[..., :3, 3] = torch.randn(2, 2, 3, generator=generator)
    intrinsics = torch.tensor([[30.0, 0, 16], [0, 30.0, 12], [0, 0, 1]]).repeat(2, 2, 1, 1)
    intrinsics[..., :2, :] += torch.rand(2, 2, 2, 3, generator=generator) * intrinsics[..., :2, :] * 0.2
    reference = torch.rand(2, 5, 3, generator=generator)
    return tokens.to(dtype), intrinsics, extrinsics, reference.to(dtype)


def crop_inputs(dtype: torch.dtype) -> tuple[Any, ...]:
    generator = torch.Generator().manual_seed(4)
    inputs = dict(image=torch.rand(2, 3, 16, 16, generator=generator).to(dtype),
                  crop_box=torch.tensor([[0.0, 0, 31, 31], [40, 20, 71, 51]]),
                  intrinsics=torch.tensor([[100.0, 0, 63.5], [0, 100.0, 47.5], [0, 0, 1]]).repeat(2, 1, 1),
                  image_size=(96, 128))
    return (inputs,)


class CropHost(nn.Module):
    """The crop-depth ViT (tiny), returning its log-depth."""

    def __init__(self, encoding: Any) -> None:
        super().__init__()
        self.model = CropDepthViT(dict(type='TimmViT', model_name='vit_tiny_patch16_224', img_size=16, patch_size=4,
                                       embed_dim=EMBED_DIM, depth=2, num_heads=HEADS, num_classes=0,
                                       class_token=False, global_pool='avg', encoding=encoding))
        self.encoding = self.model.backbone.encoding

    def forward(self, inputs: dict[str, Any], geometry: bool = True) -> torch.Tensor:
        if geometry:
            return self.model.log_depth(inputs)
        backbone = self.model.backbone
        return backbone.embed_tokens(inputs['image'], backbone.positions(inputs['image']))


class PointHost(nn.Module):
    """V-DETR's box-refinement decoder over 64 point tokens, returning every layer's logits and boxes."""

    def __init__(self, encoding: Any) -> None:
        super().__init__()
        self.decoder = BoxRefinementDecoder(EMBED_DIM, num_classes=3, depth=2, num_heads=HEADS, mlp_dim=64,
                                            dropout=0.0, encoding=encoding)
        self.encoding = self.decoder.encoding

    def forward(self, tgt: torch.Tensor, memory: torch.Tensor, xyz: torch.Tensor, proposals: torch.Tensor,
                geometry: bool = True) -> torch.Tensor:
        xyz = xyz if geometry else xyz[..., :2]
        bounds = torch.stack([xyz.amin(1), xyz.amax(1)], dim=1)
        pos_k = Positions(coords=xyz, scene=vispe.geometry.SceneGeometry(bounds=bounds), device=xyz.device)
        out = self.decoder(tgt, memory, pos_k, proposals)
        return torch.cat([out['logits'].flatten(2), out['boxes'].flatten(2)], dim=-1)


def point_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(5)
    xyz = torch.rand(2, 64, 3, generator=generator) * torch.tensor([4.0, 3.0, 2.0]) - torch.tensor([2.0, 1.5, 0.0])
    centres = xyz[:, :6] + 0.1
    sizes = torch.rand(2, 6, 3, generator=generator) * 0.5 + 0.3
    yaw = torch.rand(2, 6, 1, generator=generator) * math.pi
    proposals = torch.cat([centres, sizes, yaw], dim=-1)
    tgt = torch.randn(2, 6, EMBED_DIM, generator=generator)
    memory = torch.randn(2, 64, EMBED_DIM, generator=generator)
    return tgt.to(dtype), memory.to(dtype), xyz.to(dtype), proposals.to(dtype)


class GridHost(nn.Module):
    """A tiny vispe ViT, returning its tokens."""

    def __init__(self, encoding: Any) -> None:
        super().__init__()
        self.vit = vispe.create_vit('vit_tiny_patch16_224', encoding=encoding, img_size=32, patch_size=8,
                                    embed_dim=EMBED_DIM, depth=2, num_heads=HEADS, num_classes=0)
        self.encoding = self.vit.encoding

    def forward(self, images: torch.Tensor, geometry: bool = True) -> torch.Tensor:
        if geometry:
            return self.vit.forward_features(images)
        return self.vit.embed_tokens(images, self.vit.positions(images).updated(image=None))


def grid_inputs(dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 24, 40, generator=torch.Generator().manual_seed(6)).to(dtype),)


@dataclass(frozen=True)
class Fixture:
    """A host for one ``requires`` set."""

    name: str
    model: Callable[[Any], nn.Module]
    inputs: Callable[[torch.dtype], tuple[Any, ...]]
    host: Host | None = None

    def build(self, encoding: Any, seed: int = 0) -> nn.Module:
        torch.manual_seed(seed)
        return self.model(encoding).eval()


FIXTURES = {
    frozenset(): Fixture('grid', GridHost, grid_inputs),
    frozenset({'grid'}): Fixture('grid', GridHost, grid_inputs),
    frozenset({'grid', 'pixels'}): Fixture('grid + pixels', GridHost, grid_inputs),
    frozenset({'grid', 'cameras'}): Fixture('grid + cameras', MultiViewHost, camera_inputs, CAMERA_HOST),
    frozenset({'grid', 'cameras', 'crop_boxes'}): Fixture('grid + cameras + crop boxes', CropHost, crop_inputs),
    frozenset({'points', 'bounds'}): Fixture('points + bounds', PointHost, point_inputs),
    frozenset({'points', 'boxes'}): Fixture('points + boxes', PointHost, point_inputs),
}


def fixture_for(encoding_class: type) -> Fixture:
    """The host fixture of an encoding class's ``requires``."""
    return FIXTURES[frozenset(encoding_class.requires)]
