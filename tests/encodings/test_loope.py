"""LOOPE: the gilbert order (the authors' values, a path of 4-neighbours on any grid), parity with the authors' ArtPE
(tests/data/README_parity.md), hand values of the sinusoid along the curve, offsets bounded by one step and read
from the image, the two ways to another grid, and the refusals."""
from __future__ import annotations

import math

import pytest
import torch

import vispe
from vispe.encodings import LOOPE
from vispe.encodings.loope import interleaved_sinusoid
from vispe.geometry import ImageGeometry, Positions
from vispe.geometry.gilbert import gilbert_order

from ..conftest import REPO_ROOT

GOLDEN = torch.load(REPO_ROOT / 'tests' / 'data' / 'loope_parity.pt', weights_only=True)


def positions(images: torch.Tensor, grid: tuple[int, int], patch: int = 16, prefix: int = 1) -> Positions:
    return Positions(grid, num_prefix_tokens=prefix, patch_size=patch, image=ImageGeometry(images))


@pytest.mark.parametrize('name, size', [('gilbert_14', (14, 14)), ('gilbert_24', (24, 24)),
                                        ('gilbert_6x10', (6, 10))])
def test_gilbert_order_equals_the_authors(name, size) -> None:
    assert torch.equal(gilbert_order(size), GOLDEN[name])


@pytest.mark.parametrize('size', [(1, 1), (1, 7), (5, 1), (2, 2), (3, 5), (10, 7), (13, 17), (14, 14), (32, 8)])
def test_gilbert_order_visits_every_cell_once_stepping_to_a_neighbour(size) -> None:
    order = gilbert_order(size)
    assert sorted(order.flatten().tolist()) == list(range(1, size[0] * size[1] + 1))
    cells = torch.stack(torch.meshgrid(torch.arange(size[0]), torch.arange(size[1]), indexing='ij'), -1)
    path = cells.flatten(0, 1)[order.flatten().argsort()]
    assert path[0].tolist() == [0, 0]
    assert bool(((path[1:] - path[:-1]).abs().sum(-1) == 1).all())


def test_hilbert_on_powers_of_two() -> None:
    """2×2: the U of Hilbert's first order, along the columns first."""
    assert gilbert_order((2, 2)).tolist() == [[1, 4], [2, 3]]


def test_parity_with_the_authors_art_pe_in_training_and_eval() -> None:
    encoding = LOOPE(embed_dim=16, grid_size=4, patch_size=16)
    encoding.load_state_dict(GOLDEN['state_dict'])
    images = GOLDEN['images']
    for mode in ('train', 'eval'):
        encoding.train(mode == 'train')
        with torch.no_grad():
            out = encoding.embed(torch.zeros(2, 17, 16), positions(images, (4, 4)))
        torch.testing.assert_close(out, GOLDEN[f'embedding_{mode}'], atol=1e-5, rtol=0)


def test_without_offsets_it_is_the_sinusoid_along_the_curve() -> None:
    """The last linear layer at zero gives X_C = 2·sigmoid(0) − 1 = 0: cell (0, 0) is step 1, so channels 0 and 1
    are sin 1 and cos 1; cell (1, 0) is step 2 on a 2×2 grid."""
    encoding = LOOPE(embed_dim=4, grid_size=2, patch_size=4, num_prefix_tokens=0).eval()
    torch.nn.init.zeros_(encoding.offsets[-2].weight)
    embedding = encoding.position_embedding(positions(torch.randn(3, 3, 8, 8), (2, 2), patch=4, prefix=0))
    frequency = 10000 ** (-2 / 4)
    expected = [[math.sin(step), math.cos(step), math.sin(step * frequency), math.cos(step * frequency)]
                for step in (1, 4, 2, 3)]
    torch.testing.assert_close(embedding, torch.tensor(expected).expand(3, -1, -1))


def test_offsets_move_each_patch_less_than_one_step_and_depend_on_the_image() -> None:
    torch.manual_seed(0)
    encoding = LOOPE(embed_dim=8, grid_size=(3, 4), patch_size=8).eval()
    images = torch.randn(2, 3, 24, 32)
    offsets = encoding.context_offsets(images)
    assert offsets.shape == (2, 12) and bool((offsets.abs() < 1).all())
    assert not torch.allclose(offsets[0], offsets[1])
    first = encoding.position_embedding(positions(images, (3, 4), patch=8))
    second = encoding.position_embedding(positions(images.flip(0), (3, 4), patch=8))
    torch.testing.assert_close(first.flip(0), second)


def test_interleaved_sinusoid_layout() -> None:
    out = interleaved_sinusoid(torch.tensor([0.0, 2.0]), 6)
    frequencies = torch.tensor([1.0, 10000 ** (-2 / 6), 10000 ** (-4 / 6)])
    torch.testing.assert_close(out[1, 0::2], (2 * frequencies).sin())
    torch.testing.assert_close(out[1, 1::2], (2 * frequencies).cos())
    assert out[0].tolist() == [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]


def test_another_grid_resamples_or_takes_its_own_curve() -> None:
    torch.manual_seed(0)
    encoding = LOOPE(embed_dim=8, grid_size=(2, 2), patch_size=4).eval()
    images = torch.randn(2, 3, 12, 16)
    pos = positions(images, (3, 4), patch=4)
    resized = torch.nn.functional.interpolate(images, size=(8, 8), mode='bilinear', antialias=True)
    table = encoding.position_embedding(positions(resized, (2, 2), patch=4))
    expected = torch.nn.functional.interpolate(table.unflatten(1, (2, 2)).permute(0, 3, 1, 2), size=(3, 4),
                                               mode='bicubic', antialias=True).flatten(2).transpose(1, 2)
    torch.testing.assert_close(encoding.position_embedding(pos), expected)
    encoding.extrapolation = 'hilbert'
    curve = gilbert_order((3, 4)).flatten().float()
    torch.testing.assert_close(encoding.position_embedding(positions(images, (3, 4), patch=4)),
                               interleaved_sinusoid(curve, 8).expand(2, -1, -1))


def test_in_a_vit_at_two_resolutions() -> None:
    torch.manual_seed(0)
    model = vispe.create_vit('vit_tiny_patch16_224', encoding=dict(type='LOOPE'), img_size=32, patch_size=8,
                             embed_dim=32, depth=1, num_heads=2, num_classes=3)
    assert model.encoding.grid_size == (4, 4) and model.encoding.patch_size == (8, 8)
    for size in (32, 64):
        assert model(torch.randn(2, 3, size, size)).shape == (2, 3)
    model(torch.randn(2, 3, 32, 32)).sum().backward()
    assert model.encoding.offsets[0].weight.grad.abs().sum() > 0


def test_refusals() -> None:
    with pytest.raises(ValueError, match='even'):
        LOOPE(embed_dim=6 + 1, grid_size=2, patch_size=4)
    encoding = LOOPE(embed_dim=8, grid_size=2, patch_size=4)
    with pytest.raises(ValueError, match='in_chans=1'):
        encoding.position_embedding(positions(torch.randn(1, 1, 8, 8), (2, 2), patch=4))
    with pytest.raises(ValueError, match='pixels'):
        encoding.position_embedding(Positions((2, 2), num_prefix_tokens=1, patch_size=4))
    with pytest.raises(ValueError, match='pixels'):                   # images of another batch than the tokens
        encoding.embed(torch.zeros(3, 5, 8), positions(torch.randn(2, 3, 8, 8), (2, 2), patch=4))
    with pytest.raises(vispe.encodings.EncodingHostError, match='pixels'):
        vispe.encodings.check_encoding_fits(encoding, vispe.encodings.hosts.HOSTS['DETR decoder'])
