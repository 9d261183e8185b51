"""LOOPE: a 1D sinusoidal encoding read along a learned patch order (Chowdhury et al., 2025)."""
from __future__ import annotations

import math
from typing import ClassVar, Sequence

import torch
import torch.nn.functional as F
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option, Search, model_facts
from vispe.geometry import Positions, to_2tuple
from vispe.geometry.gilbert import gilbert_order
from vispe.registry import ENCODINGS

EXTRAPOLATIONS = ('resample', 'hilbert')


def interleaved_sinusoid(positions: torch.Tensor, dim: int) -> torch.Tensor:
    """(..., N) real positions -> (..., N, dim): channel 2k = sin(x·ω_k), 2k + 1 = cos(x·ω_k), ω_k = 10000^(−2k/dim)
    (Vaswani et al.'s frequencies, sine and cosine interleaved as LOOPE's code lays them out)."""
    frequencies = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32, device=positions.device)
                            * (-math.log(10000.0) / dim))
    angles = positions.float()[..., None] * frequencies
    return torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(-2)


def order_offset_network(in_chans: int, patch_size: tuple[int, int], num_patches: int) -> nn.Sequential:
    """LOOPE's context network: image + 2 coordinate channels -> one value per patch -> (B, N) offsets in (−1, 1)
    before the final ``2·s − 1``. Convs 32-16-8-4-1 (the first one patch-sized at the patch stride, the others 5×5),
    GELU after each, BatchNorm of the one map, a bias-free N×N linear layer, sigmoid."""
    widths = (32, 16, 8, 4, 1)
    layers: list[nn.Module] = [nn.Conv2d(in_chans + 2, widths[0], patch_size, patch_size), nn.GELU()]
    for width_in, width_out in zip(widths, widths[1:]):
        layers += [nn.Conv2d(width_in, width_out, 5, 1, 2), nn.GELU()]
    layers += [nn.BatchNorm2d(1), nn.Flatten(), nn.Linear(num_patches, num_patches, bias=False), nn.Sigmoid()]
    return nn.Sequential(*layers)


@ENCODINGS.register_module()
class LOOPE(PositionEncoding):
    """Learnable patch order for a 1D sinusoidal absolute encoding (Chowdhury et al., "LOOPE: Learnable Optimal
    Patch Order in Positional Embeddings for Vision Transformers", 2025; code AbtahiMajeed144/LOOPE).

    Patch (i, j) of an image I gets the real position ``x = X_G(i, j) + X_C(I)(i, j)``: X_G is its 1-based step along
    the gilbert curve of the h×w grid (:func:`~vispe.geometry.gilbert.gilbert_order`) and X_C ∈ (−1, 1) an offset
    that a small network computes from the image and two coordinate maps (linspace(−1, 1) over rows and columns),
    so neighbours along the curve may move closer, apart or swap. The embedding is Vaswani's sinusoid of x with sine
    and cosine interleaved (:func:`interleaved_sinusoid`, positions not rescaled), added to the patch tokens; the
    prefix tokens get a learned vector each (zeros at init). The embedding depends on the image: (B, N, C).

    The authors' code is followed where it and the paper differ (each choice in docs/encodings.md): the offset is
    ``2·sigmoid(z) − 1``, the last linear layer has no bias, GELU follows every conv, the coordinate maps run over
    [−1, 1]. Its BatchNorm makes an image's offsets depend on its batch in training, as there.

    The network is built for one grid (its linear layer is N×N). The paper trains a model per resolution; on another
    grid ``extrapolation`` (test-time) says what happens:

    - ``'resample'``: the image resized to the training size (bilinear, antialiased) gives the training grid's
      embedding, resampled bicubically (antialiased) to the new grid as timm resamples a learned table;
    - ``'hilbert'``: the new grid's own gilbert curve without offsets (LOOPE's "Hilbert PE" baseline).

    Args:
        embed_dim: token width C (even).
        grid_size: the training grid (h, w).
        patch_size: pixels per patch (ph, pw).
        num_prefix_tokens: cls + register tokens.
        in_chans: image channels (the ViT's).
        extrapolation: what another grid gets (test-time).

    Shapes: embed (B, prefix + h·w, C) with the positions' images (B, in_chans, h·ph, w·pw) -> same;
    position_embedding (B, h·w, C).
    """

    family: ClassVar[str] = 'absolute'
    paper: ClassVar[str] = 'Chowdhury et al., 2025 (LOOPE); AbtahiMajeed144/LOOPE'
    requires: ClassVar[tuple[str, ...]] = ('grid', 'pixels')
    options: ClassVar[dict[str, Option]] = {
        **model_facts('embed_dim', 'grid_size', 'patch_size', 'num_prefix_tokens', 'in_chans'),
        'extrapolation': Option(str, choices=EXTRAPOLATIONS, test_time=True, search=Search(values=EXTRAPOLATIONS),
                                doc="What a grid other than the training one gets: 'resample' (the training grid's "
                                    "embedding of the resized image, resampled bicubically) or 'hilbert' (the new "
                                    "grid's curve, no offsets); no parameter depends on it."),
    }

    def __init__(self, embed_dim: int, grid_size: int | Sequence[int], patch_size: int | Sequence[int] = 16,
                 num_prefix_tokens: int = 1, in_chans: int = 3, extrapolation: str = 'resample') -> None:
        super().__init__()
        if embed_dim % 2:
            raise ValueError(f'LOOPE interleaves a sine and a cosine per frequency, so embed_dim must be even; got '
                             f'{embed_dim}.')
        self.embed_dim = embed_dim
        self.grid_size = to_2tuple(grid_size)
        self.patch_size = to_2tuple(patch_size)
        self.num_prefix_tokens = num_prefix_tokens
        self.in_chans = in_chans
        self.extrapolation = extrapolation
        height, width = self.grid_size
        self.offsets = order_offset_network(in_chans, self.patch_size, height * width)
        self.prefix_embed = nn.Parameter(torch.zeros(1, num_prefix_tokens, embed_dim))
        image_size = (height * self.patch_size[0], width * self.patch_size[1])
        coordinates = torch.meshgrid(torch.linspace(-1, 1, image_size[0]), torch.linspace(-1, 1, image_size[1]),
                                     indexing='ij')
        self.register_buffer('coordinate_maps', torch.stack(coordinates)[None], persistent=False)

    def curve(self, pos: Positions, grid_size: tuple[int, int]) -> torch.Tensor:
        """(h·w,) float32 gilbert steps of ``grid_size``, row-major (cached across forwards)."""
        return self.cached_table(f'gilbert{grid_size}', pos, across_forwards=True,
                                 build=lambda: gilbert_order(grid_size, pos.device).flatten().float())

    def context_offsets(self, pixels: torch.Tensor) -> torch.Tensor:
        """(B, h·w) offsets X_C in (−1, 1) of images (B, in_chans, h·ph, w·pw) at the training size."""
        maps = self.coordinate_maps.to(pixels.dtype).expand(len(pixels), -1, -1, -1)
        return 2 * self.offsets(torch.cat([pixels, maps], dim=1)) - 1

    def training_size_pixels(self, pixels: torch.Tensor, grid_size: tuple[int, int]) -> torch.Tensor:
        """The images at the training size: the grid's pixels (padding cut, or zeros added as the patch embedding
        pads) on the training grid; resized bilinearly (antialiased) on another."""
        if pixels.shape[1] != self.in_chans:
            raise ValueError(f'LOOPE reads images of {self.in_chans} channels; got {pixels.shape[1]}. Build it with '
                             f'in_chans={pixels.shape[1]}.')
        height, width = grid_size[0] * self.patch_size[0], grid_size[1] * self.patch_size[1]
        pixels = F.pad(pixels[..., :height, :width], (0, max(0, width - pixels.shape[-1]),
                                                      0, max(0, height - pixels.shape[-2])))
        if tuple(grid_size) == self.grid_size:
            return pixels
        size = self.coordinate_maps.shape[-2:]
        return F.interpolate(pixels, size=tuple(size), mode='bilinear', align_corners=False, antialias=True)

    def position_embedding(self, pos: Positions) -> torch.Tensor:
        """(B, h·w, C): this forward's embedding of the positioned tokens (built once per forward)."""
        self.check_sequence(pos, self.num_prefix_tokens)
        pos.require('pixels', user='LOOPE')
        return self.cached_table('embedding', pos, build=lambda: self._embedding(pos))

    def _embedding(self, pos: Positions) -> torch.Tensor:
        grid_size = pos.grid_size
        pixels = pos.image.pixels
        if tuple(grid_size) != self.grid_size and self.extrapolation == 'hilbert':
            curve = self.curve(pos, grid_size)
            return interleaved_sinusoid(curve, self.embed_dim)[None].expand(len(pixels), -1, -1)
        offsets = self.context_offsets(self.training_size_pixels(pixels, grid_size))
        embedding = interleaved_sinusoid(self.curve(pos, self.grid_size) + offsets, self.embed_dim)
        if tuple(grid_size) == self.grid_size:
            return embedding
        table = embedding.unflatten(1, self.grid_size).permute(0, 3, 1, 2)
        resized = F.interpolate(table, size=tuple(grid_size), mode='bicubic', align_corners=False, antialias=True)
        return resized.flatten(2).transpose(1, 2)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        pos.check_tokens(x.shape[0], x.shape[1], 'LOOPE')
        patches = self.position_embedding(pos).to(x.dtype)
        prefix = self.prefix_embed.to(x.dtype).expand(len(x), -1, -1)
        return x + torch.cat([prefix, patches], dim=1)

    def no_weight_decay(self) -> set[str]:
        return {'prefix_embed'}

    def extra_repr(self) -> str:
        return (f'grid_size={self.grid_size}, patch_size={self.patch_size}, in_chans={self.in_chans}, '
                f'extrapolation={self.extrapolation!r}')
