"""GTA against the authors' ``multihead_geometric_transform_attention`` on its recorded outputs
(tests/data/README_parity.md): self-attention over two views, the rotary-only variant, and target rays
attending to the input views."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vispe.encodings import GTA
from vispe.geometry import CameraGeometry, Cameras, Positions

from ..conftest import REPO_ROOT

GOLDEN = torch.load(REPO_ROOT / 'tests' / 'data' / 'gta_parity.pt', weights_only=True)


def cameras(extrinsics: torch.Tensor) -> Cameras:
    batch, views = extrinsics.shape[:2]
    intrinsics = torch.tensor([[50., 0, 32], [0, 50., 24], [0, 0, 1]]).expand(batch, views, 3, 3)
    return Cameras(intrinsics=intrinsics, lidar2cam=extrinsics, image_size=tuple(GOLDEN['image_size'].tolist()))


INPUT_VIEWS = Positions(grid_size=tuple(GOLDEN['grid_size'].tolist()), num_views=2, camera=CameraGeometry(cameras(GOLDEN['extrinsics'])))
TARGET_RAYS = Positions(coords=GOLDEN['ray_pixels'].float(), camera=CameraGeometry(cameras(GOLDEN['target_extrinsics'])))


@pytest.mark.parametrize('case, on', [('self', 'qkvo'), ('self_qk', 'qk'), ('cross', 'qkvo')])
def test_output_equals_the_reference(case: str, on: str) -> None:
    encoding = GTA(head_dim=64, depth=1, se3_dim=GOLDEN['se3_dim'], so2_freqs=GOLDEN['so2_freqs'],
                   trans_coeff=float(GOLDEN['trans_coeff']), on=on)
    q, pos_q = (GOLDEN['q_target'], TARGET_RAYS) if case == 'cross' else (GOLDEN['q'], INPUT_VIEWS)
    q, k = encoding.rotate(q, GOLDEN['k'], pos_q, INPUT_VIEWS, 0)
    v = encoding.transform_v(GOLDEN['v'], INPUT_VIEWS, 0) if on == 'qkvo' else GOLDEN['v']
    out = F.scaled_dot_product_attention(q, k, v)
    if on == 'qkvo':
        out = encoding.transform_out(out, pos_q, 0)
    assert torch.allclose(out, GOLDEN['cases'][case]['out'], atol=1e-5)
