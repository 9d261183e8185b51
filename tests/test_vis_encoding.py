"""Plots of what encodings do without training: similarity of absolute tables, logits of relative ones."""
from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import vispe
from vispe.visualization import embedding_similarity, query_index, relative_logits

CONTEXT = dict(embed_dim=32, num_heads=4, head_dim=8, depth=1, grid_size=(6, 8), num_prefix_tokens=0)


def test_embedding_similarity_is_one_at_the_query() -> None:
    encoding = vispe.build_encoding('SinCos2D', **CONTEXT)
    query = query_index('2,3', (6, 8), 0)
    similarity = embedding_similarity(encoding, (6, 8), query, 32)
    assert similarity.shape == (6, 8) and torch.isclose(similarity[2, 3], torch.tensor(1.0))
    assert similarity.max() <= 1 + 1e-6


def test_relative_logits_show_lookhere_masks_and_alibi_distances() -> None:
    lookhere = vispe.build_encoding(dict(type='LookHere', directions='halves'), **CONTEXT)
    query = query_index('2,3', (6, 8), 0)
    logits = relative_logits(lookhere, (6, 8), query, 4, 8)
    assert torch.isinf(logits[0, 3:]).all() and torch.isfinite(logits[0, :3]).all()  # head 'up' masks rows below
    alibi = vispe.build_encoding('ALiBi2D', **CONTEXT)
    rope_free = relative_logits(alibi, (6, 8), query, 4, 8)
    assert rope_free[:, 2, 3].sub(rope_free[:, 2, 4]).gt(0).all()  # the query itself beats its neighbour


@pytest.mark.slow
def test_tool_draws_absolute_relative_and_conditional_rows(repo_root, tmp_path) -> None:
    out = tmp_path / 'enc.png'
    result = subprocess.run([sys.executable, str(repo_root / 'tools' / 'vis_encoding.py'), '--encodings', 'SinCos2D',
                             'RoPEAxial', 'PEG', '--grid', '6', '8', '--heads', '2', '--embed-dim', '32', '--out',
                             str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert out.read_bytes()[:4] == b'\x89PNG'


def test_an_embedding_that_reads_the_image_has_no_map_of_its_own() -> None:
    encoding = vispe.build_encoding(dict(type='LOOPE'), embed_dim=16, grid_size=(4, 4), patch_size=8,
                                    num_prefix_tokens=1, in_chans=3)
    with pytest.raises(ValueError, match='depends on the image'):
        embedding_similarity(encoding, (4, 4), 0, 16)
