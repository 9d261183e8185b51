"""The PETR family through the converter: the authors' position modules, under their released names
(``pts_bbox_head.position_encoder.*``, ``adapt_pos3d.*``, ``query_embedding.*``) with the weights their code ran with
(tests/data/petr_parity.pt, made from megvii-research/PETR and drilistbox/3DPPE; tests/data/README_parity.md), go
through ``convert_petr_state_dict`` and give their key and query embeddings. The whole head's names are checked by
tests/models/petr/test_convert.py against the released files' key lists."""
from __future__ import annotations

import torch

import vispe
from vispe.converters import convert_state_dict

from ..encodings.test_petr_parity import (PETR_GOLDEN, PPE3D_GOLDEN, TOLERANCE, build_ppe3d, golden_positions,
                                          recipe_weights, token_rows)
from ..models.petr.test_convert import reference_state_dict


def converted_encoding_weights(golden: dict, released_keys: str) -> dict[str, torch.Tensor]:
    """The released file's key list with the reference weights in its position modules, converted; the entries of
    vispe's ``encoding.`` (the detector's encoding module)."""
    released = reference_state_dict(released_keys)
    released.update({f'pts_bbox_head.{key}': value for key, value in recipe_weights(golden).items()})
    conversion = convert_state_dict('petr', released, 'petr.pth')
    return {key[len('encoding.'):]: value for key, value in conversion.state_dict.items()
            if key.startswith('encoding.')}


def test_petr_keys_and_queries_from_a_converted_file() -> None:
    golden, rows = PETR_GOLDEN, token_rows(PETR_GOLDEN)
    config = golden['config']
    petr = vispe.build_encoding(dict(type='PETR', depth_num=config['depth_num'], depth_start=config['depth_start'],
                                     position_range=config['position_range'], depth_mode='LID'),
                                embed_dim=config['embed_dims'])
    weights = converted_encoding_weights(golden, 'petr_checkpoint_keys.json')
    petr.load_state_dict({key: weights[key] for key in petr.state_dict()})
    reference = golden['weights']['reference_points'][golden['queries']['index']]
    with torch.no_grad():
        key_pos = petr.key_embedding(golden_positions(golden, 'padded'), 1, {})[0]
        queries = petr.encode_queries(reference)
    torch.testing.assert_close(key_pos[rows], golden['lid']['key_pos_tokens_padded'], **TOLERANCE)
    torch.testing.assert_close(queries, golden['queries']['query_embeds'], **TOLERANCE)


def test_ppe3d_keys_from_a_converted_file() -> None:
    golden, rows = PPE3D_GOLDEN, token_rows(PPE3D_GOLDEN)
    encoding = build_ppe3d()
    weights = converted_encoding_weights(golden, 'petr_depth_checkpoint_keys.json')
    shared = {key: weights[key] for key in encoding.state_dict() if key.startswith('position_encoder.')}
    encoding.load_state_dict(shared, strict=False)
    extras = dict(depth=golden['depth']['fused'][None])
    with torch.no_grad():
        key_pos = encoding.key_embedding(golden_positions(golden, 'padded'), 1, extras)[0]
    torch.testing.assert_close(key_pos[rows], golden['cases']['padded']['key_pos_tokens'], **TOLERANCE)
