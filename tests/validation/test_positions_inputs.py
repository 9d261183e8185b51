"""Positions refuse sizes and counts that describe no tokens (grid sizes, prefix tokens, patch sizes, views below
their minimum, or not whole numbers), and tokens that disagree with their Positions get one clear error (a check
of shapes, no host synchronisation) in the attention and in every encoding's embed, not a raw torch shape error."""
from __future__ import annotations

import math

import pytest
import torch

import vispe
from vispe.attention import Attention
from vispe.encodings import GTA
from vispe.geometry import CameraGeometry, Cameras, Positions


@pytest.mark.parametrize('options, error, match', [
    (dict(grid_size=(0, 4)), ValueError, r'grid_size\[0\] \(H\) must be at least 1, got 0; give the \(h, w\) cells'),
    (dict(grid_size=(4, -2)), ValueError, r'grid_size\[1\] \(W\) must be at least 1, got -2'),
    (dict(grid_size=(4.5, 4)), TypeError, r'grid_size\[0\] \(H\) must be a whole number, got 4\.5'),
    (dict(grid_size=(math.nan, 4)), TypeError, r'grid_size\[0\] \(H\) must be a whole number, got nan'),
    (dict(grid_size=(True, 4)), TypeError, r'must be a whole number, got True \(bool\)'),
    (dict(grid_size=(4,)), ValueError, r'grid_size must be \(H, W\), two positive whole numbers, got \(4,\)'),
    (dict(grid_size='44'), ValueError, r"grid_size must be \(H, W\), two positive whole numbers, got '44'"),
    (dict(grid_size=(4, 4), num_prefix_tokens=-1), ValueError,
     r'num_prefix_tokens must be at least 0, got -1; give the tokens before the positioned ones'),
    (dict(grid_size=(4, 4), num_prefix_tokens=1.5), TypeError, r'num_prefix_tokens must be a whole number, got 1\.5'),
    (dict(grid_size=(4, 4), patch_size=(0, 16)), ValueError, r'patch_size\[0\] \(H\) must be at least 1, got 0; give '
                                                             r'the \(ph, pw\) image pixels per cell'),
    (dict(grid_size=(4, 4), patch_size=(16, -16)), ValueError, r'patch_size\[1\] \(W\) must be at least 1, got -16'),
    (dict(grid_size=(4, 4), patch_size=-8), ValueError, r'patch_size\[0\] \(H\) must be at least 1, got -8'),
    (dict(grid_size=(4, 4), patch_size=(16, 7.5)), TypeError, r'patch_size\[1\] \(W\) must be a whole number'),
    (dict(grid_size=(4, 4), num_views=0), ValueError, r'num_views must be at least 1, got 0; give the number of views'),
    (dict(grid_size=(4, 4), num_views=2.5), TypeError, r'num_views must be a whole number, got 2\.5'),
    (dict(num_positions=-3), ValueError, r'num_positions must be at least 0, got -3'),
])
def test_sizes_and_counts_below_their_minimum_are_refused(options, error, match) -> None:
    with pytest.raises(error, match=match):
        Positions(**options)


def test_sizes_in_other_number_types_are_taken() -> None:
    pos = Positions(torch.Size([3, 4]), patch_size=16, num_prefix_tokens=torch.tensor(1), num_views=2.0)
    assert (pos.grid_size, pos.patch_size, pos.num_prefix_tokens, pos.num_views, pos.num_tokens) == \
        ((3, 4), (16, 16), 1, 2, 25)


TOKENS = r'got {count} tokens but its Positions describe 17: 1 prefix \+ 16 positioned \(the \(4, 4\) grid\); build ' \
         r'the Positions of this sequence'


@pytest.mark.parametrize('encoding', ['RoPEAxial', 'ALiBi2D', 'RoPEMixed', 'LookHere', 'iRPE'])
@pytest.mark.parametrize('count', [16, 18, 26])
def test_attention_refuses_a_sequence_its_positions_do_not_describe(encoding: str, count: int) -> None:
    torch.manual_seed(0)
    built = vispe.build_encoding(encoding, embed_dim=32, num_heads=2, head_dim=16, depth=1, grid_size=(4, 4),
                                 num_prefix_tokens=1)
    with pytest.raises(ValueError, match=rf'{type(built).__name__} in attention \(the queries\): '
                                         + TOKENS.format(count=count)):
        Attention(32, num_heads=2)(torch.randn(2, count, 32), Positions((4, 4), num_prefix_tokens=1), built)


def test_cross_attention_refuses_keys_their_positions_do_not_describe() -> None:
    torch.manual_seed(0)
    rope = vispe.build_encoding('RoPEAxial', embed_dim=32, num_heads=2, head_dim=16, depth=1)
    pos_q, pos_k = Positions(coords=torch.rand(5, 2) * 4), Positions((4, 4), num_prefix_tokens=1)
    with pytest.raises(ValueError, match=r'in attention \(the keys\): ' + TOKENS.format(count=12)):
        Attention(32, num_heads=2)(torch.randn(2, 5, 32), pos_q, rope, memory=torch.randn(2, 12, 32), pos_k=pos_k)


@pytest.mark.parametrize('encoding', ['SinCos2D', 'LearnedAPE', 'DETRSine', 'FourierFeatures'])
def test_embed_refuses_a_sequence_its_positions_do_not_describe(encoding: str) -> None:
    torch.manual_seed(0)
    built = vispe.build_encoding(encoding, embed_dim=32, num_heads=2, head_dim=16, depth=1, grid_size=(4, 4),
                                 num_prefix_tokens=1)
    with pytest.raises(ValueError, match=TOKENS.format(count=10)):
        built.embed(torch.randn(2, 10, 32), Positions((4, 4), num_prefix_tokens=1))


def test_peg_refuses_a_sequence_its_positions_do_not_describe() -> None:
    peg = vispe.build_encoding('PEG', embed_dim=32, depth=2)
    with pytest.raises(ValueError, match='PEG: ' + TOKENS.format(count=20)):
        peg.between_blocks(torch.randn(2, 20, 32), Positions((4, 4), num_prefix_tokens=1), 0)


def test_camera_encodings_refuse_a_sequence_their_positions_do_not_describe() -> None:
    cameras = Cameras(torch.tensor([[40.0, 0, 24], [0, 40.0, 16], [0, 0, 1]]).expand(1, 2, 3, 3),
                      torch.eye(4).expand(1, 2, 4, 4), (32, 48))
    pos = Positions((4, 6), num_views=2, patch_size=8, camera=CameraGeometry(cameras))
    petr = vispe.build_encoding('PETR', embed_dim=32)
    with pytest.raises(ValueError, match=r'PETR: got 40 tokens but its Positions describe 48: 0 prefix \+ 48 '
                                         r'positioned \(2 views of the \(4, 6\) grid\)'):
        petr.embed(torch.zeros(1, 40, 32), pos)
    with pytest.raises(ValueError, match=r'GTA: got 47 tokens but its Positions describe 48'):
        GTA(head_dim=16, depth=1).rotate(*[torch.zeros(1, 2, 47, 16)] * 2, pos, pos, 0)


def test_the_token_check_reads_no_values_and_traces() -> None:
    """The check compares shapes only: it runs under torch.compile without a graph break on a meta tensor."""
    pos = Positions((4, 4), num_prefix_tokens=1)
    pos.check_tokens(2, 17, 'test')
    with pytest.raises(ValueError, match='test: got 16 tokens'):
        pos.check_tokens(2, torch.empty(2, 16, 8, device='meta').shape[1], 'test')
