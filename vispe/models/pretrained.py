"""Where a vispe model's pretrained weights come from: the ``pretrained=`` of :func:`vispe.create_vit`, of ``TimmViT``
configs and of timm's ``vispe_vit``.

A string names one of:

* a checkpoint file (``.pth``, ``.pt``, ``.bin``, ``.safetensors``): a vispe, timm or converted checkpoint
  (``vispe convert``);
* a folder written by ``timm.models.save_for_hf``: its ``model.safetensors`` (or ``pytorch_model.bin``), its
  ``config.json`` saying which encodings the weights were trained with;
* ``hf-hub:org/name`` (``@revision`` optional): the same files on the Hugging Face Hub, through its local cache
  (with ``HF_HUB_OFFLINE=1`` only what is cached);
* a vispe zoo card: ``<card>`` or ``<card>_s<seed>`` of the repository's ``models/`` folder (e.g.
  ``vit-t4_rope-axial_fmnist-28_s1``; the card's seed 0 when no seed is given).

Every file is read by vispe's allow-list reader (:func:`vispe.checkpoint.read_checkpoint`: nothing in it can run
code) and loaded with :func:`vispe.checkpoint.load_weights` (keys, shapes, encodings, finite values checked).
"""
from __future__ import annotations

import difflib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

HF_PREFIX = 'hf-hub:'
WEIGHT_FILES = ('model.safetensors', 'pytorch_model.bin')
CHECKPOINT_SUFFIXES = ('.pth', '.pt', '.bin', '.safetensors')
ZOO_SEED = re.compile(r'^(?P<card>.+)_s(?P<seed>\d+)$')


class PretrainedWeightsError(RuntimeError):
    """``pretrained=`` names weights that cannot be found or fetched."""


@dataclass
class WeightsSource:
    """A resolved weights file and what its source says about it (``meta['encodings']``: the encoding types the
    weights were trained with, checked against the model)."""

    path: Path
    meta: dict[str, Any] = field(default_factory=dict)


def encoding_types(encoding: Any) -> list[str]:
    """The ``type`` names of an encoding config (a dict, or a list of them for a stack)."""
    members = encoding if isinstance(encoding, (list, tuple)) else [encoding]
    return [str(member['type']).split('.')[-1] for member in members
            if isinstance(member, Mapping) and isinstance(member.get('type'), str)]


def hub_config_meta(config_file: Path) -> dict[str, Any]:
    """What a ``save_for_hf`` ``config.json`` says about its weights: the encodings of a vispe model (its
    ``model_args['encoding']`` or ``pretrained_cfg['encoding']``); ``{}`` for a plain timm model's."""
    try:
        config = json.loads(config_file.read_text(encoding='utf-8'))
    except (OSError, ValueError) as error:
        raise PretrainedWeightsError(f'{config_file} is not a readable JSON config ({error}); write it again with '
                                     f'timm.models.save_for_hf.') from None
    if not isinstance(config, Mapping):
        return {}
    for section in ('model_args', 'pretrained_cfg'):
        part = config.get(section)
        if isinstance(part, Mapping) and part.get('encoding') is not None:
            return dict(encodings=encoding_types(part['encoding']))
    return {}


def folder_weights(folder: Path) -> WeightsSource:
    """The weights of a ``save_for_hf`` folder (``model.safetensors`` preferred)."""
    for name in WEIGHT_FILES:
        if (folder / name).is_file():
            config = folder / 'config.json'
            return WeightsSource(folder / name, hub_config_meta(config) if config.is_file() else {})
    raise PretrainedWeightsError(f'{folder} holds none of {", ".join(WEIGHT_FILES)}: pretrained= takes a checkpoint '
                                 f'file, or a folder written by timm.models.save_for_hf.')


def hub_weights(repo: str, cache_dir: str | os.PathLike | None = None) -> WeightsSource:
    """The weights of ``hf-hub:org/name[@revision]`` through the Hugging Face cache (downloaded unless
    ``HF_HUB_OFFLINE=1``)."""
    from huggingface_hub import constants, hf_hub_download
    from huggingface_hub.errors import EntryNotFoundError, LocalEntryNotFoundError, RepositoryNotFoundError
    repo_id, _, revision = repo.partition('@')

    not_cached = []

    def download(filename: str) -> Path | None:
        try:
            return Path(hf_hub_download(repo_id, filename, revision=revision or None, cache_dir=cache_dir))
        except LocalEntryNotFoundError:  # a subclass of EntryNotFoundError: first
            not_cached.append(filename)
            return None
        except EntryNotFoundError:
            return None
        except RepositoryNotFoundError:
            raise PretrainedWeightsError(f'{HF_PREFIX}{repo}: no such repository on the Hugging Face Hub (or it '
                                         f'is private: log in with `hf auth login`).') from None

    for name in WEIGHT_FILES:
        path = download(name)
        if path is not None:
            config = download('config.json')
            return WeightsSource(path, hub_config_meta(config) if config is not None else {})
    if constants.HF_HUB_OFFLINE and not_cached:
        raise PretrainedWeightsError(
            f'{HF_PREFIX}{repo}: none of {", ".join(not_cached)} is in the local Hugging Face cache and '
            f'HF_HUB_OFFLINE=1 forbids downloading them. Download them once with network access '
            f'(`hf download {repo_id}`), or unset HF_HUB_OFFLINE, or pass the path of a local copy.')
    raise PretrainedWeightsError(f'{HF_PREFIX}{repo} holds none of {", ".join(WEIGHT_FILES)} (or they could not be '
                                 f'fetched): push the model with timm.models.push_to_hf_hub.')


def zoo_weights(name: str, zoo: Path) -> WeightsSource | None:
    """The checkpoint of zoo card ``name`` (``<card>`` = seed 0, or ``<card>_s<seed>``) under ``zoo``; None if
    ``zoo`` has no such card."""
    match = ZOO_SEED.match(name)
    if (zoo / name).is_dir():
        card, seed = name, '0'
    elif match and (zoo / match.group('card')).is_dir():
        card, seed = match.group('card'), match.group('seed')
    else:
        return None
    path = zoo / card / f'{card}_s{seed}.pth'
    if not path.is_file():
        seeds = sorted(p.stem.rsplit('_s', 1)[-1] for p in (zoo / card).glob(f'{card}_s*.pth'))
        raise PretrainedWeightsError(f'Zoo card {card} has no checkpoint of seed {seed} ({path}); its seeds: '
                                     f'{", ".join(seeds) or "none (its checkpoint was too large to commit)"}.')
    return WeightsSource(path)


def resolve_pretrained(value: str | os.PathLike, zoo: str | os.PathLike = 'models',
                       cache_dir: str | os.PathLike | None = None) -> WeightsSource:
    """The weights file that ``pretrained=value`` names (see the module docstring); ``zoo`` is the zoo folder
    (relative to the working directory: a checkout of the vispe repository)."""
    text = os.fspath(value)
    if text.startswith(HF_PREFIX):
        return hub_weights(text[len(HF_PREFIX):], cache_dir)
    path = Path(text).expanduser()
    if path.is_dir():
        return folder_weights(path)
    if path.is_file():
        return WeightsSource(path)
    if path.suffix in CHECKPOINT_SUFFIXES or os.sep in text:
        raise PretrainedWeightsError(f'pretrained={text!r}: no such file or folder.')
    source = zoo_weights(text, Path(zoo))
    if source is not None:
        return source
    cards = sorted(p.name for p in Path(zoo).iterdir() if p.is_dir()) if Path(zoo).is_dir() else []
    close = difflib.get_close_matches(ZOO_SEED.sub(r'\g<card>', text), cards, n=3, cutoff=0.6)
    hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
    zoo_note = (f'no zoo card of that name in {zoo}/.{hint}' if cards else
                f'no zoo folder {zoo}/ here (the zoo cards live in the vispe repository: run from a checkout).')
    raise PretrainedWeightsError(f'pretrained={text!r} is not a file, a folder, an {HF_PREFIX}org/name id or a vispe '
                                 f'zoo card: {zoo_note}')


def with_model_head(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``state_dict`` with the model's own classifier (timm's ``get_classifier``, under ``head``) in place of the
    weights' head when the two differ (other classes, or none for ``num_classes=0``): their head entries dropped,
    the model's added."""
    head = model.get_classifier()
    prefix = next(name for name, module in model.named_modules() if module is head) + '.'
    own = {key: value for key, value in model.state_dict().items() if key.startswith(prefix)}
    theirs = {key: value for key, value in state_dict.items() if key.startswith(prefix)}
    if own.keys() == theirs.keys() and all(theirs[key].shape == value.shape for key, value in own.items()):
        return state_dict  # the same head: it loads
    kept = {key: value for key, value in state_dict.items() if not key.startswith(prefix)}
    return {**kept, **own}


def vispe_model_config(model: nn.Module) -> dict[str, Any] | None:
    """The ``TimmViT`` config a :func:`vispe.create_vit` model was built from (the arguments it records for timm),
    for comparison with a converted file's ``meta['model']``; None for other models."""
    arguments = dict(getattr(model, '_model_args', {}) or {})
    if 'base_model' not in arguments:
        return None
    return dict(type='TimmViT', model_name=arguments.pop('base_model'), **arguments)


def load_pretrained(model: nn.Module, value: str | os.PathLike, new_classifier: bool = False,
                    cache_dir: str | os.PathLike | None = None) -> dict[str, Any]:
    """Load the weights ``pretrained=value`` names into ``model`` (a vispe ViT), strictly; see the module docstring.

    A zoo card's classifier checkpoint (keys under ``backbone.``) loads into the bare ViT. With ``new_classifier``
    (the model was built with its own ``num_classes``) the weights' head is left out and the model's head keeps its
    initialisation, as timm does. A converted file (``vispe convert``) records the model it was converted for
    (``meta['model']``): a vispe ViT built with other options (head count, encoding slopes, norm eps: no tensor shape
    tells them) is refused.

    Returns:
        :func:`vispe.checkpoint.load_weights`' report.
    """
    from vispe.checkpoint import check_converted_model, load_weights, read_checkpoint
    source = resolve_pretrained(value, cache_dir=cache_dir)
    state_dict, meta = read_checkpoint(source.path)
    meta = {**source.meta, **meta}
    own = model.state_dict()
    if state_dict and all(key.startswith('backbone.') for key in state_dict) and not any(
            key.startswith('backbone.') for key in own):
        state_dict = {key[len('backbone.'):]: value for key, value in state_dict.items()}
    if new_classifier and hasattr(model, 'get_classifier'):
        state_dict = with_model_head(model, state_dict)
    built = vispe_model_config(model)
    if built is not None:
        built.pop('img_size', None)  # learned tables resample to the model's size
        if new_classifier:
            built.pop('num_classes', None)
        check_converted_model(built, meta, str(source.path))
    return load_weights(model, state_dict, meta, str(source.path))
