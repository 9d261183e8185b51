"""The attention-core redesign changes nothing for 2D encodings: today's models give the outputs frozen at 015d029.

``tests/data/core_parity_2d.pt`` holds, for every 2D encoding registered at commit 015d029 and every entry of its
``examples`` (plus three stacks and one more LookHere config), the logits and features of a tiny timm ViT at
its training size and at a larger one (extrapolation), the memory of a DETR encoder with and without a padded
mask (and in ``absolute_mode='input'`` for encodings with an ``embed`` hook), and the logits and boxes of a whole
small DETR whose decoder keys carry DETRSine. ``tests/data/make_core_parity.py`` made the file at 015d029 and
holds the recipe; each test here rebuilds one case from its stored config with that recipe and the same seeds
through the current code, and compares one frozen value (one test per stored key).

When only ``<case>/weights`` fails, the models are initialised differently (the seeded RNG is used in another
order, or a state-dict entry was added, removed or renamed), not computed differently. A whole DETR is compared on
its frozen weights (all but the seeded backbone, loaded with ``load_state_dict(strict=True)``; its ``weights`` key
covers the backbone alone), so its outputs still prove the decoder unchanged when its parameters were renamed or
initialised in another order; they fail if a DETR checkpoint of 015d029 no longer loads. The file is loaded with
``torch.load(..., weights_only=True)``: never unpickle untrusted data.

Defaults changed on purpose since 015d029 are pinned back to their old values in the rebuilt configs
(``CHANGED_DEFAULTS``), so that the comparison still proves the core unchanged.
"""
from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
import torch

DATA = Path(__file__).resolve().parent / 'data'
FROZEN_PATH = DATA / 'core_parity_2d.pt'
# (rtol, atol) per kind of case. At 015d029 a rebuild gives the frozen values bit for bit; the explicit softmax path
# instead of SDPA (another valid kernel) moves ViT and DETR-encoder outputs by up to 2.6e-6 and whole-DETR outputs
# by up to 3.6e-7, so these leave about 4-5x room for such reorderings and no more.
TOLERANCE = {'vit': (1e-5, 1e-5), 'detr_encoder': (1e-5, 1e-5), 'detr_encoder_input': (1e-5, 1e-5),
             'detr': (2e-6, 2e-6)}


def _load_recipe() -> Any:
    spec = importlib.util.spec_from_file_location('_core_parity_recipe', DATA / 'make_core_parity.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RECIPE = _load_recipe()
FROZEN: dict[str, Any] = torch.load(FROZEN_PATH, weights_only=True)
NOT_COMPARED = ('config', 'weight_names', 'state', 'state_layout')
# type -> {option: its default at 015d029}: RPE2D evaluated at contiguous positions before issue 15 made the expected
# positions of its training draw the default.
CHANGED_DEFAULTS = {'RPE2D': {'eval_positions': 'contiguous'}}
KEYS = sorted(key for key in FROZEN if not key.startswith('meta/') and key.rsplit('/', 1)[1] not in NOT_COMPARED)


def split(key: str) -> tuple[str, str]:
    """'vit/RoPEAxial/0/logits_32' -> ('vit/RoPEAxial/0', 'logits_32')."""
    case_id, value = key.rsplit('/', 1)
    return case_id, value


@functools.lru_cache(maxsize=None)
def rebuilt(case_id: str) -> dict[str, Any]:
    """Every value of one case, computed now from its stored config with the recipe (once per session; the
    tests run on one thread, see conftest.py)."""
    cfg = RECIPE.config_from_json(FROZEN[f'{case_id}/config'])
    if isinstance(cfg, dict):
        cfg = {**CHANGED_DEFAULTS.get(cfg['type'], {}), **cfg}
    frozen_state = None
    if f'{case_id}/state' in FROZEN:
        frozen_state = (FROZEN[f'{case_id}/state_layout'], FROZEN[f'{case_id}/state'])
    return RECIPE.compute_case(case_id, cfg, frozen_state)


def test_frozen_file_covers_every_case() -> None:
    assert FROZEN['meta/commit'].startswith('015d0294fcad7a9b10d79ccf320de15f702863a4')
    assert json.loads(FROZEN['meta/skipped']) == {}
    cases = {split(key)[0] for key in KEYS}
    kinds = {case_id.split('/', 1)[0] for case_id in cases}
    assert kinds == {'vit', 'detr_encoder', 'detr_encoder_input', 'detr'}
    for case_id in cases:
        assert f'{case_id}/config' in FROZEN and f'{case_id}/weights' in FROZEN, case_id
        assert (f'{case_id}/state' in FROZEN) == case_id.startswith('detr/'), case_id


@pytest.mark.parametrize('key', KEYS)
def test_output_unchanged(key: str) -> None:
    case_id, value = split(key)
    rtol, atol = TOLERANCE[case_id.split('/', 1)[0]]
    now = rebuilt(case_id)
    if value == 'weights':
        assert json.loads(now['weight_names']) == json.loads(FROZEN[f'{case_id}/weight_names']), (
            f'{case_id}: the state dict entries changed (names above); outputs are compared in the other keys')
        torch.testing.assert_close(now['weights'], FROZEN[key], rtol=rtol, atol=atol,
                                   msg=lambda m: f'{case_id}: the seeded initialisation changed.\n{m}')
        return
    torch.testing.assert_close(now[value], FROZEN[key], rtol=rtol, atol=atol,
                               msg=lambda m: f'{key} (config {FROZEN[f"{case_id}/config"]}) changed.\n{m}')
