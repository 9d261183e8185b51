"""DETR's decoder on vispe's attention: every 2D encoding reaches its cross-attention, a padded memory
changes nothing, and checkpoints with the decoder's former projection names still load."""
from __future__ import annotations

import pytest
import torch

from vispe.encodings import PositionEncoding
from vispe.models.detr import DETRDecoder, DETREncoder
from vispe.models.detr.transformer import RELATIVE_HOOKS
from vispe.registry import MODELS

from .test_padding import ENCODINGS, registered_examples

DECODER_ENCODINGS = [cfg for cfg in ENCODINGS if cfg['type'] not in ('PEG', 'NoPE')]


def decoder(encoding) -> DETRDecoder:
    torch.manual_seed(0)
    return DETRDecoder(embed_dim=32, depth=2, num_heads=4, mlp_dim=64, dropout=0.0, encoding=encoding, grid_size=6,
                       stride=16).eval()


def memory_positions(features: torch.Tensor, mask: torch.Tensor | None):
    return DETREncoder(embed_dim=32, depth=1, num_heads=4, grid_size=6, stride=16).positions(features, mask)


@pytest.mark.parametrize('encoding', DECODER_ENCODINGS, ids=lambda cfg: '-'.join(str(v) for v in cfg.values()))
def test_padded_memory_equals_each_image_alone(encoding) -> None:
    """Query reference points and absolute key tables use each image's real grid; padded keys are never
    attended: the decoder output of a padded batch equals that of each image alone."""
    model = decoder(encoding)
    sizes = [(5, 6), (3, 4)]
    memories = [torch.randn(1, h * w, 32) for h, w in sizes]
    padded = torch.randn(2, 7 * 8, 32) * 3
    mask = torch.zeros(2, 7, 8, dtype=torch.bool)
    for index, ((h, w), memory) in enumerate(zip(sizes, memories)):
        padded.view(2, 7, 8, 32)[index, :h, :w] = memory[0].view(h, w, 32)
        mask[index, :h, :w] = True
    queries = torch.randn(2, 5, 32)
    with torch.no_grad():
        batch = model(queries, padded, memory_positions(padded.new_zeros(2, 32, 7, 8), mask), mask.flatten(1))
        for index, ((h, w), memory) in enumerate(zip(sizes, memories)):
            alone = model(queries[index:index + 1], memory, memory_positions(memory.new_zeros(1, 32, h, w), None))
            torch.testing.assert_close(batch[:, index], alone[:, 0], atol=2e-5, rtol=1e-5)


SELF_ATTENTION_ONLY = [dict(type='SeqPE')]           # method='attn_mul': positions of one token set


@pytest.mark.parametrize('encoding', [cfg for cfg in registered_examples() if cfg['type'] not in ('PEG', 'NoPE')
                                      and cfg not in SELF_ATTENTION_ONLY],
                         ids=lambda cfg: '-'.join(str(v) for v in cfg.values()))
def test_every_registered_encoding_reaches_the_cross_attention(encoding) -> None:
    """The decoder runs with it, gradients reach its parameters, and rotations pass gradients to the reference
    points (buckets and direction masks are piecewise constant in position)."""
    model = decoder(encoding).train()
    features = torch.randn(2, 32, 7, 8)
    pos = memory_positions(features, None)
    memory, queries = torch.randn(2, 56, 32), torch.randn(2, 5, 32)
    out = model(queries, memory, pos)
    assert out.shape == (2, 2, 5, 32) and torch.isfinite(out).all()
    out.square().sum().backward()
    if 'rotate' in model.encoding.active_hooks:
        assert model.reference_points.weight.grad.abs().sum() > 0
    assert (model.reference_points is None) == (not model.encoding.active_hooks & RELATIVE_HOOKS)
    grads = [p.grad for p in model.encoding.parameters() if p.requires_grad]
    assert all(g is not None and torch.isfinite(g).all() for g in grads)


@pytest.mark.parametrize('encoding', SELF_ATTENTION_ONLY)
def test_an_encoding_of_one_token_set_is_refused_by_the_decoder(encoding) -> None:
    with pytest.raises(ValueError, match='works within one token set only'):
        decoder(encoding)


@pytest.mark.parametrize('encoding', ['PEG', 'NoPE'])
def test_an_encoding_that_cannot_reach_cross_attention_is_refused(encoding) -> None:
    with pytest.raises(ValueError, match='do not reach cross-attention; give the decoder an encoding with embed, '
                                         'rotate or logits_bias'):
        decoder(encoding)


def test_former_projection_names_load_into_the_fused_weights() -> None:
    model = decoder('DETRSine')
    state = model.state_dict()
    legacy = {}
    for name, value in state.items():
        for attention in ('self_attn', 'cross_attn'):
            marker = f'.{attention}.qkv.'
            if marker in name:
                head, kind = name.split(marker)
                for projection, part in zip(('q_proj', 'k_proj', 'v_proj'), value.chunk(3)):
                    legacy[f'{head}.{attention}.{projection}.{kind}'] = part
                break
            if f'.{attention}.proj.' in name:
                legacy[name.replace(f'.{attention}.proj.', f'.{attention}.out_proj.')] = value
                break
        else:
            legacy[name] = value
    assert any('q_proj' in name for name in legacy)
    fresh = decoder('DETRSine')
    for parameter in fresh.parameters():
        torch.nn.init.zeros_(parameter)
    fresh.load_state_dict(legacy)
    for name, value in fresh.state_dict().items():
        assert torch.equal(value, state[name]), name


class CameraProbe(PositionEncoding):
    """Records the cameras the model hands to its encoding."""

    seen: list = []

    def __init__(self, embed_dim: int) -> None:
        super().__init__()
        self.embed_dim = embed_dim

    def position_embedding(self, pos):
        CameraProbe.seen.append(None if pos.camera is None else pos.camera.cameras)
        return torch.zeros(1, pos.num_positions, self.embed_dim)

    def embed(self, x, pos):
        return x + self.position_embedding(pos)


def camera_sample(focal: float) -> dict:
    intrinsics = torch.tensor([[[focal, 0.0, 31.5], [0.0, focal, 31.5], [0.0, 0.0, 1.0]]])
    return dict(labels=torch.tensor([0]), boxes=torch.tensor([[0.5, 0.5, 0.2, 0.2]]), intrinsics=intrinsics,
                lidar2cam=torch.eye(4)[None], pad_shape=(64, 64))


def test_cameras_flow_from_the_data_samples_into_the_positions() -> None:
    """Each sample's own rig reaches the encodings (mmdet3d's PETR once used the first sample's for all)."""
    torch.manual_seed(0)
    model = MODELS.build(dict(
        type='DETR', backbone=dict(type='TimmFeatures', model_name='resnet18', out_index=-2), num_classes=3,
        num_queries=4, embed_dim=32, image_size=64, encoder=dict(depth=1, num_heads=4, mlp_dim=32,
                                                                   encoding=CameraProbe(32)),
        decoder=dict(depth=1, num_heads=4, mlp_dim=32))).eval()
    CameraProbe.seen.clear()
    samples = [camera_sample(50.0), camera_sample(80.0)]
    with torch.no_grad():
        model(torch.randn(2, 3, 64, 64), data_samples=samples, mode='tensor')
        model(torch.randn(2, 3, 64, 64), mode='tensor')
    cameras, none = CameraProbe.seen
    assert none is None
    assert cameras.intrinsics[:, 0, 0, 0].tolist() == [50.0, 80.0] and cameras.num_views == 1
    with pytest.raises(ValueError, match='data sample 1 has no cameras'):
        without = {key: value for key, value in samples[1].items() if key != 'lidar2cam'}
        model(torch.randn(2, 3, 64, 64), data_samples=[samples[0], without])
    with pytest.raises(ValueError, match=r'the images are \(48, 64\) \(H, W\) but the cameras expect \(64, 64\)'):
        model(torch.randn(2, 3, 48, 64), data_samples=samples)
