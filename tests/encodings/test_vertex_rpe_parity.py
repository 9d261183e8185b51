"""VertexRPE and the attention module against V-DETR's own GlobalShareCrossAttention, on its recorded outputs
(tests/data/README_parity.md): same weights, boxes and points, both angle types."""
from __future__ import annotations

import pytest
import torch

from vispe.attention import Attention
from vispe.encodings import VertexRPE, vertex_corners
from vispe.encodings.vertex_rpe import reference_vertex_mlps
from vispe.geometry import Positions, SceneGeometry

from ..conftest import REPO_ROOT

GOLDEN = torch.load(REPO_ROOT / 'tests' / 'data' / 'vdetr_rpe_parity.pt', weights_only=True)


def boxes_and_positions() -> tuple[torch.Tensor, Positions, Positions]:
    """vispe boxes (yaw counter-clockwise = −the reference's heading) and both sides' positions."""
    boxes = torch.cat([GOLDEN['box_center'], GOLDEN['box_size'], -GOLDEN['box_angle'][..., None]], dim=-1)
    return boxes, Positions(coords=boxes[..., :3], scene=SceneGeometry(boxes=boxes)), Positions(coords=GOLDEN['xyz'])


def reference_encoding(box_frame: bool) -> VertexRPE:
    encoding = VertexRPE(num_heads=4, depth=1, box_frame=box_frame)
    encoding.layers[0].load_state_dict(reference_vertex_mlps(GOLDEN['state_dict']))
    return encoding


def test_vertices_are_the_references_corners() -> None:
    boxes, _, _ = boxes_and_positions()
    assert torch.allclose(vertex_corners(boxes), GOLDEN['corners'], atol=1e-6)


@pytest.mark.parametrize('case, box_frame', [('aligned', False), ('object_coords', True)])
def test_bias_and_output_equal_the_reference(case: str, box_frame: bool) -> None:
    encoding = reference_encoding(box_frame)
    _, pos_q, pos_k = boxes_and_positions()
    bias = encoding.logits_bias(torch.zeros(1), None, pos_q, pos_k, 0)
    assert torch.allclose(bias, GOLDEN[case]['rpe'], atol=5e-5)
    state = GOLDEN['state_dict']
    attention = Attention(32, num_heads=4, num_kv_heads=1, qkv_bias=True).eval()
    attention.qkv.load_state_dict(dict(weight=torch.cat([state['q.weight'], state['k.weight'], state['v.weight']]),
                                       bias=torch.cat([state['q.bias'], state['k.bias'], state['v.bias']])))
    attention.proj.load_state_dict(dict(weight=state['proj.weight'], bias=state['proj.bias']))
    with torch.no_grad():
        output = attention(GOLDEN['query'].transpose(0, 1), pos_q, encoding, 0, memory=GOLDEN['key'].transpose(0, 1),
                           pos_k=pos_k)
        attention.capture_probs = True
        attention(GOLDEN['query'].transpose(0, 1), pos_q, encoding, 0, memory=GOLDEN['key'].transpose(0, 1),
                  pos_k=pos_k)
    assert (output - GOLDEN[case]['output'].transpose(0, 1)).abs().max() < 1e-5
    assert (attention.attn_probs - GOLDEN[case]['attn']).abs().max() < 1e-5


def test_each_vertex_reads_its_own_mlp() -> None:
    encoding = reference_encoding(False)
    boxes, _, _ = boxes_and_positions()
    planes, index = encoding.axis_offsets(boxes, GOLDEN['xyz'])
    table = encoding.tables(0)
    for vertex, (ix, iy, iz) in enumerate(index):
        u = torch.stack([planes[0][ix], planes[1][iy], planes[2][iz]], dim=-1)
        expected = GOLDEN['aligned']['rpe_per_vertex'][..., vertex]
        assert torch.allclose(encoding.vertex_bias(u, 0, vertex, table), expected, atol=1e-5)
    with pytest.raises(KeyError, match='cpb_mlps'):
        reference_vertex_mlps({})
