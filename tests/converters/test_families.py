"""Every family's golden file given to every other family's converter: refused, and the message names the family
the file does belong to (the families' signatures tell them apart)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

from vispe.checkpoint import read_state_dict
from vispe.converters import CheckpointFamilyError, convert_state_dict, list_converters

from ..models.petr.test_convert import reference_state_dict

RELEASED = Path(__file__).parents[1] / 'data' / 'released'
FILES = {'rope-vit': 'rope-vit/state_dict.pt', 'irpe-deit': 'irpe-deit/state_dict_qkv.pt',
         'cpvt': 'cpvt/state_dict_cls.pt', 'detr': 'detr/state_dict.pt', 'vdetr': 'vdetr/state_dict.pt',
         'lookhere': 'lookhere/state_dict.pt', 'comrope': 'comrope/state_dict.pt'}
# Families whose converters read the same files (DETR with and without a dilated last stage).
SAME_FILES = {'detr': {'detr-dc5'}}


def family_file(family: str) -> dict[str, torch.Tensor]:
    if family == 'petr':
        return reference_state_dict('petr_checkpoint_keys.json')
    return read_state_dict(RELEASED / FILES[family])


CASES = [(owner, other) for owner in [*FILES, 'petr'] for other in list_converters()
         if other != owner and other not in SAME_FILES.get(owner, set())]


@pytest.mark.parametrize('owner, other', CASES, ids=[f'{owner}-as-{other}' for owner, other in CASES])
def test_a_file_of_another_family_is_refused_naming_its_own(owner: str, other: str) -> None:
    with pytest.raises(CheckpointFamilyError, match=rf"is not a '{other}' checkpoint .*Its keys resemble "
                                                    rf"[^.]*'{owner}'"):
        convert_state_dict(other, family_file(owner), f'{owner}.pth')


@pytest.mark.parametrize('owner', [*FILES, 'petr'])
def test_each_golden_file_passes_its_own_familys_check(owner: str) -> None:
    assert list_converters()[owner].resemblance(list(family_file(owner))) == 1.0


REPO = Path(__file__).parents[2]
# Families documented on another family's card (the same files, another backbone dilation).
CARD_OF = {'detr-dc5': 'detr'}


@pytest.mark.parametrize('family', list(list_converters()))
def test_every_family_has_a_card_and_a_docs_row(family: str) -> None:
    card = REPO / 'models' / 'released' / CARD_OF.get(family, family) / 'README.md'
    assert card.is_file(), f'{family} has no card at {card}'
    assert f'vispe convert {family} ' in card.read_text() or family in CARD_OF
    assert f'`{family}`' in (REPO / 'docs' / 'released-weights.md').read_text()
