"""What a vispe ViT tells timm about itself: its ``pretrained_cfg`` and the arguments that rebuild it.

timm describes a model by ``pretrained_cfg`` (the architecture name, the weights' source, the input config) and
records the factory's arguments in ``_model_args``; ``timm.models.save_for_hf`` writes both into ``config.json`` and
``timm.create_model('local-dir:...')`` calls the named architecture with them. A vispe ViT is built from a timm
architecture, so without this it would name that architecture and its hub weights, and come back from timm without
its encoding. :func:`describe_for_timm` makes it name vispe's timm architecture ``vispe_vit``
(:mod:`vispe.models.timm_hub`) with ``base_model`` and the ``encoding`` config, keep the base architecture's input
config (size, mean, std, interpolation), and name no weights it does not have.
"""
from __future__ import annotations

import copy
import json
from typing import Any, Sequence

from torch import nn

ARCHITECTURE = 'vispe_vit'
# pretrained_cfg entries that describe where weights come from, or the weights themselves: a vispe model built
# from a timm architecture has none of the base architecture's.
WEIGHT_KEYS = ('url', 'file', 'state_dict', 'hf_hub_id', 'hf_hub_filename', 'source', 'tag', 'custom_load',
               'license', 'description', 'origin_url', 'paper_name', 'paper_ids', 'notes', 'label_names',
               'label_descriptions', 'label_offset')
# Entries vispe adds to a pretrained_cfg; timm's PretrainedCfg has no such fields, so vispe_vit takes them out
# before timm resolves the rest.
VISPE_KEYS = ('base_model', 'encoding')
# create_vit arguments that are not part of the architecture (they never enter the rebuilt model's arguments).
NOT_ARCHITECTURE = ('pretrained_cfg', 'pretrained_cfg_overlay', 'features_only', 'out_indices', 'feature_cls',
                    'cache_dir', 'pretrained_model_args')


def serializable(value: Any) -> bool:
    """Whether ``value`` survives ``json.dumps`` (what ``save_for_hf`` writes)."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def vispe_pretrained_cfg(cfg: dict[str, Any], base_model: str, encoding: Any, weights_note: str | None,
                         keep_weights: bool = False) -> dict[str, Any]:
    """``cfg`` (a timm pretrained_cfg) as a vispe ViT's: architecture ``vispe_vit``, ``base_model``, the encoding
    config (None for an encoding given as an instance: it has no config to write), the weight source kept only with
    ``keep_weights``, and ``weights_note`` (where the weights came from) as timm's ``notes``."""
    described = {key: value for key, value in cfg.items()
                 if keep_weights or key not in WEIGHT_KEYS}
    described['architecture'] = ARCHITECTURE
    described['base_model'] = base_model
    described['encoding'] = copy.deepcopy(encoding) if serializable(encoding) else None
    if weights_note:
        described['notes'] = (weights_note,)
    return described


def describe_for_timm(model: nn.Module, base_model: str, encoding: Any, kwargs: dict[str, Any],
                      weights_note: str | None, nonfinite_inputs: str = 'raise',
                      extra_geometry: Sequence[str] = ()) -> None:
    """Set ``model.pretrained_cfg`` (see :func:`vispe_pretrained_cfg`; its ``num_classes`` the model's, its input
    size not fixed: vispe ViTs take any size divisible by the patch) and the arguments that rebuild ``model``
    through ``vispe_vit`` (timm's ``_model_args``: ``base_model``, ``encoding`` and the architecture arguments the
    model was built with; an encoding instance stays an instance, which ``save_for_hf`` refuses by name)."""
    model.pretrained_cfg = vispe_pretrained_cfg(dict(model.pretrained_cfg), base_model, encoding, weights_note)
    model.pretrained_cfg.update(num_classes=model.num_classes, fixed_input_size=False)
    model.default_cfg = model.pretrained_cfg
    arguments = {key: value for key, value in kwargs.items() if key not in NOT_ARCHITECTURE}
    arguments.update(base_model=base_model, encoding=copy.deepcopy(encoding) if serializable(encoding) else encoding)
    if nonfinite_inputs != 'raise':
        arguments['nonfinite_inputs'] = nonfinite_inputs
    if extra_geometry:
        arguments['extra_geometry'] = list(extra_geometry)
    model._model_args = arguments
