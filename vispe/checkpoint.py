"""Loading timm and vispe checkpoints into vispe models, resampling what a new grid needs.

Every file is read through :mod:`vispe.serialization` (an allow-list unpickler: nothing in the file
can run code), checked against the model (keys, shapes, the encoding it was trained with, finite
values) and reported.
"""
from __future__ import annotations

import ast
import os
import re
import warnings
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

from vispe import serialization
from vispe.encodings import EncodingStack, LearnedAPE, PositionEncoding

STATE_DICT_KEYS = ('state_dict', 'model', 'state_dict_ema', 'model_ema', 'module', 'weights')
# strict=False warns when fewer than this share of the model's tensors came from the checkpoint.
LOW_LOAD_FRACTION = 0.5
TRUST_HINT = ('If the file comes from elsewhere, ask for its weights as a state dict of tensors or a .safetensors file. '
              'Only if you wrote it yourself, with your own classes inside: load_checkpoint(..., trusted=True), which '
              'runs any code the file contains.')


class CheckpointMismatchError(RuntimeError):
    """The checkpoint's parameters, or the encoding it was trained with, do not match the model's."""


class NonFiniteWeightsError(ValueError):
    """The checkpoint holds NaN or infinite values (a diverged run)."""


def read_checkpoint(path: str | os.PathLike, trusted: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The parameters stored in a checkpoint file (torch or safetensors) and its metadata.

    Accepts a bare state dict, or one nested under ``state_dict`` (mmengine), ``model`` (DeiT,
    timm train.py), ``state_dict_ema`` or ``weights`` (LookHere); strips a DDP ``module.`` prefix.

    Args:
        path: the file.
        trusted: the file is your own: objects outside vispe's allow-list may be unpickled (which runs
            any code a crafted file contains). Leave False for files from elsewhere.

    Returns:
        (state dict, metadata): ``meta`` of vispe and mmengine checkpoints (training config, epoch,
        metrics, encodings), else ``{}``.
    """
    state_dict, loaded = _read(path, trusted)
    meta = loaded.get('meta') if isinstance(loaded, Mapping) else None
    return state_dict, dict(meta) if isinstance(meta, Mapping) else {}


def read_checkpoint_entries(path: str | os.PathLike, names: Sequence[str],
                            trusted: bool = False) -> tuple[dict[str, torch.Tensor], dict[str, Any]]:
    """The parameters stored in a checkpoint file (see :func:`read_checkpoint`) and the top-level entries ``names``
    stored beside them, those the file has (e.g. the ``config`` dict of LookHere's released files; read by the same
    allow-list unpickler, so only plain data and tensors)."""
    state_dict, loaded = _read(path, trusted)
    entries = {name: loaded[name] for name in names if isinstance(loaded, Mapping) and name in loaded}
    return state_dict, entries


def _read(path: str | os.PathLike, trusted: bool) -> tuple[dict[str, torch.Tensor], Any]:
    """(state dict, the whole loaded object) of a checkpoint file."""
    path = os.fspath(path)
    if path.endswith('.safetensors'):
        from safetensors.torch import load_file
        try:
            state_dict = load_file(path, device='cpu')
            return state_dict, state_dict
        except FileNotFoundError:
            raise FileNotFoundError(f'Checkpoint not found: {path}') from None
        except Exception as exc:  # safetensors raises its own error types for corrupt headers
            raise serialization.CorruptCheckpointError(f'Checkpoint {path} is corrupt or not a safetensors file '
                                                       f'({exc}). Write it again or use another copy.') from None
    loaded = serialization.load(path, map_location='cpu', trusted=trusted, refusal_hint=TRUST_HINT)
    state_dict = loaded
    if isinstance(loaded, Mapping):
        for key in STATE_DICT_KEYS:
            if isinstance(loaded.get(key), Mapping):
                state_dict = loaded[key]
                break
    if not isinstance(state_dict, Mapping) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise CheckpointMismatchError(f'{path} holds no state dict of tensors (top-level keys: '
                                      f'{list(loaded)[:8] if isinstance(loaded, Mapping) else type(loaded).__name__}). '
                                      f'Save the weights with torch.save(model.state_dict(), path), or nest them under '
                                      f'one of {", ".join(STATE_DICT_KEYS)}.')
    if state_dict and all(key.startswith('module.') for key in state_dict):
        state_dict = {key[len('module.'):]: value for key, value in state_dict.items()}
    return dict(state_dict), loaded


def read_state_dict(path: str | os.PathLike, trusted: bool = False) -> dict[str, torch.Tensor]:
    """The parameters stored in a checkpoint file (see :func:`read_checkpoint`)."""
    return read_checkpoint(path, trusted)[0]


def model_encodings(model: nn.Module) -> list[str]:
    """The class names of the encodings a model was built with (members of a composition), in order."""
    names = []
    for module in model.modules():
        encoding = getattr(module, 'encoding', None)
        if isinstance(encoding, PositionEncoding):
            members = encoding.encodings if isinstance(encoding, EncodingStack) else [encoding]
            names += [type(member).__name__ for member in members]
    return names


def config_encodings(config_text: str) -> list[str] | None:
    """The encoding types a dumped training config names under ``encoding=`` keys, read with ``ast``
    (the text is never executed); None if the text is not Python."""
    try:
        tree = ast.parse(config_text)
    except (SyntaxError, ValueError):
        return None
    values = [keyword.value for node in ast.walk(tree) if isinstance(node, ast.Call)
              for keyword in node.keywords if keyword.arg == 'encoding']
    values += [value for node in ast.walk(tree) if isinstance(node, ast.Dict)
               for key, value in zip(node.keys, node.values)
               if isinstance(key, ast.Constant) and key.value == 'encoding']
    names = []
    for value in values:
        members = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
        for member in members:
            names += _encoding_type(member)
    return names


def _encoding_type(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value.split('.')[-1]]
    pairs: list[tuple[Any, ast.AST]] = []
    if isinstance(node, ast.Call):
        pairs = [(keyword.arg, keyword.value) for keyword in node.keywords]
    elif isinstance(node, ast.Dict):
        pairs = [(key.value if isinstance(key, ast.Constant) else None, value) for key, value in zip(node.keys,
                                                                                                      node.values)]
    return [value.value.split('.')[-1] for key, value in pairs
            if key == 'type' and isinstance(value, ast.Constant) and isinstance(value.value, str)]


def trained_encodings(meta: Mapping[str, Any], path: str | os.PathLike | None = None) -> list[str] | None:
    """The encodings a checkpoint was trained with, as far as it says: vispe's ``meta['encodings']``,
    else the ``encoding=`` types of its stored config, else those of the one config (``.py``) dumped next
    to it in its work dir; None when nothing says."""
    if isinstance(meta.get('encodings'), (list, tuple)):
        return [str(name) for name in meta['encodings']]
    for key in ('config', 'cfg'):
        if isinstance(meta.get(key), str):
            return config_encodings(meta[key])
    if path is not None and Path(path).is_file():
        configs = list(Path(path).parent.glob('*.py'))
        if len(configs) == 1:
            return config_encodings(configs[0].read_text())
    return None


def check_encodings(model: nn.Module, meta: Mapping[str, Any], path: str) -> None:
    """Refuse a checkpoint trained with other encodings than the model's (weights of a SinCos2D run in a
    RoPEAxial model load without a key mismatch, and give nonsense)."""
    trained = trained_encodings(meta, path)
    built = model_encodings(model)
    if not trained or not built or sorted(trained) == sorted(built):
        return
    raise CheckpointMismatchError(
        f'Checkpoint {path} was trained with encoding {" + ".join(trained)}, but the model has '
        f'{" + ".join(built)}. Build the model from the checkpoint\'s own config (the work dir\'s .py file, or '
        f'its meta["config"]), or pass check_encoding=False to load the weights anyway (a config next to the file '
        f'counts when the file itself names no encoding).')


# Options of a model config that change training only (dropout, initialisation, losses): a converted file's
# meta["model"] and an eval config may differ in them.
TRAINING_ONLY_OPTIONS = frozenset({'drop_rate', 'drop_path_rate', 'attn_drop_rate', 'proj_drop_rate', 'pos_drop_rate',
                                   'patch_drop_rate', 'dropout', 'pretrained', 'init_cfg', 'class_weight',
                                   'bbox_weight', 'giou_weight', 'eos_coef', 'aux_loss', 'label_smoothing', 'loss',
                                   'batch_augment', 'head_bias_init'})


def config_differences(recorded: Any, built: Any, where: str = '') -> list[str]:
    """Where two model configs disagree, over the options both name (an option one leaves at its default is not
    compared), one ``path: recorded != built`` line each; nested dicts and lists are compared item by item."""
    if isinstance(recorded, Mapping) and isinstance(built, Mapping):
        return [line for key in recorded if key in built and key not in TRAINING_ONLY_OPTIONS
                for line in config_differences(recorded[key], built[key], f'{where}.{key}' if where else str(key))]
    if isinstance(recorded, (list, tuple)) and isinstance(built, (list, tuple)) and len(recorded) == len(built):
        return [line for index, (a, b) in enumerate(zip(recorded, built))
                for line in config_differences(a, b, f'{where}[{index}]')]
    return [] if recorded == built else [f'{where or "model"}: file {recorded!r} != config {built!r}']


def check_converted_model(model_cfg: Mapping[str, Any], meta: Mapping[str, Any], path: str) -> None:
    """Refuse a converted file (``vispe convert`` records the model it was converted for in ``meta['model']``) whose
    model disagrees with the config's: the config's ``backbone`` when the file holds a backbone config of another
    type than the whole model (a ViT into an ``ImageClassifier``), else the config's model. Options that change no
    tensor shape (heads, encoding slopes, theta) would otherwise load and give other outputs.

    Raises:
        CheckpointMismatchError: naming each option that differs.
    """
    recorded = meta.get('model')
    if not isinstance(recorded, Mapping):
        return
    built: Any = model_cfg
    backbone = model_cfg.get('backbone')
    if isinstance(backbone, Mapping) and recorded.get('type') != model_cfg.get('type'):
        built = backbone
    differences = config_differences(dict(recorded), dict(built))
    if differences:
        raise CheckpointMismatchError(
            f'Checkpoint {path} was converted for another model than the config builds: {_listing(differences)}. '
            f'Make the config\'s model match the file\'s meta["model"] (the converter inferred it from the tensors), '
            f'or convert the file again.')


def check_finite(state_dict: Mapping[str, torch.Tensor], path: str) -> None:
    """Refuse NaN or infinite values, naming the tensors (a run that diverged saves them)."""
    bad = [f'{key} ({int((~torch.isfinite(value)).sum())} of {value.numel()})' for key, value in state_dict.items()
           if value.is_floating_point() or value.is_complex()
           if not bool(torch.isfinite(value).all())]
    if bad:
        raise NonFiniteWeightsError(f'Checkpoint {path} holds NaN or infinite values in {_listing(bad)}: the run that '
                                    f'wrote it probably diverged. Use an earlier checkpoint, or pass '
                                    f'allow_nonfinite=True to load it for inspection.')


# timm's Eva (the class of timm's vit_*_rope_* models) names a block's layer scales gamma_1 / gamma_2 where timm's
# VisionTransformer, and so vispe's, has ls1.gamma / ls2.gamma.
EVA_LAYER_SCALE = re.compile(r'^(?P<block>(?:.*\.)?blocks\.\d+\.)gamma_(?P<which>[12])$')


def backbone_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor], path: str) -> dict[str, torch.Tensor]:
    """``state_dict`` with every key under ``backbone.`` when it is the file of ``model.backbone`` alone (a converted
    released ViT, ``vispe convert``, or timm's own ViT file) and ``model`` wraps that backbone (an
    ``ImageClassifier``); otherwise ``state_dict`` itself.

    A file is the backbone's when no key is the model's own or carries ``backbone.`` and every key is one of the
    backbone's (after the backbone's encodings adopt timm's names: :func:`adopt_foreign_entries`). A file some of
    whose keys fit the backbone and others do not is refused: prefixing part of it would load it half-way.

    Raises:
        CheckpointMismatchError: the file mixes backbone keys with keys of neither the backbone nor the model.
    """
    backbone = getattr(model, 'backbone', None)
    if not isinstance(backbone, nn.Module) or not state_dict:
        return state_dict
    own = model.state_dict()
    if any(key in own or key.startswith('backbone.') for key in state_dict):
        return state_dict
    renamed = dict(state_dict)
    try:
        adopt_foreign_entries(backbone, renamed)
    except ValueError:
        renamed = dict(state_dict)
    backbone_keys = set(backbone.state_dict())
    foreign = [key for key in renamed if key not in backbone_keys]
    if not foreign:
        return {f'backbone.{key}': value for key, value in state_dict.items()}
    if len(foreign) < len(renamed):
        raise CheckpointMismatchError(
            f'Checkpoint {path} looks like the file of a {type(backbone).__name__} backbone without the model\'s '
            f'"backbone." prefix ({len(renamed) - len(foreign)} of its {len(renamed)} keys are the backbone\'s), but '
            f'{_listing(foreign)} fit neither the backbone nor the whole {type(model).__name__}: nothing was loaded. '
            f'Build the model the file was converted for (its meta["model"] config), or convert the file again '
            f'(vispe convert).')
    return state_dict


def adopt_foreign_entries(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> list[str]:
    """Make a foreign checkpoint fit ``model`` in place: each encoding adopts its entries
    (:meth:`PositionEncoding.adopt_state_dict`: timm's names, resampled tables) and Eva's layer-scale names become
    timm ViT's.

    Returns:
        One line per adopted entry.
    """
    own = model.state_dict(keep_vars=True)
    key_of = {id(value): key for key, value in own.items()}
    adopted = []
    for module in model.modules():
        if isinstance(module, PositionEncoding) and not isinstance(module, EncodingStack):
            local = {**dict(module.named_parameters(recurse=False)), **dict(module.named_buffers(recurse=False))}
            keys = {name: key_of[id(value)] for name, value in local.items() if id(value) in key_of}
            adopted += module.adopt_state_dict(state_dict, keys)
    for key in list(state_dict):
        match = EVA_LAYER_SCALE.match(key)
        if match:
            ours = f'{match.group("block")}ls{match.group("which")}.gamma'
            if ours in own and ours not in state_dict:
                state_dict[ours] = state_dict.pop(key)
                adopted.append(f'{key} -> {ours}')
    return adopted


def load_checkpoint(
        model: nn.Module,
        path: str | os.PathLike,
        strict: bool = True,
        trusted: bool = False,
        check_encoding: bool = True,
        allow_nonfinite: bool = False,
) -> dict[str, Any]:
    """Load a timm or vispe checkpoint into ``model``, resampling learned APE tables to its grid.

    A file of the backbone alone (a converted released ViT, or timm's ViT file) loads into a model that wraps it
    (an ``ImageClassifier``: :func:`backbone_state_dict` adds the ``backbone.`` prefix). A timm ViT checkpoint
    loads into a vispe ViT built with ``LearnedAPE`` (the names are timm's), and a timm RoPE
    ViT checkpoint (``vit_*_rope_*``, timm's Eva class) into one built with ``RoPEAxial`` or ``RoPEMixed`` (and
    ``init_values`` for its layer scales): each encoding adopts the foreign names of its entries and resamples
    tables of another grid (:meth:`PositionEncoding.adopt_state_dict`), and Eva's ``gamma_1``/``gamma_2`` become
    ``ls1.gamma``/``ls2.gamma``.

    Args:
        model: the model.
        path: a ``.pth``/``.pt``/``.bin`` torch file or a ``.safetensors`` file.
        strict: every model parameter must be in the checkpoint and every checkpoint entry used.
            With False, loading less than half of the model's tensors warns with the counts.
        trusted: the file is your own: unpickle objects outside vispe's allow-list (runs any code a
            crafted file contains). Files written by vispe and timm never need it.
        check_encoding: refuse a checkpoint whose metadata names other encodings than the model's.
        allow_nonfinite: load NaN or infinite values instead of refusing them.

    Returns:
        ``dict(missing=[...], unexpected=[...], skipped=[...], resampled=[...], adopted=[...])``; ``skipped`` are
        entries whose shape differs from the model's (loaded only with ``strict=False``), ``adopted`` says what
        was renamed or resampled.

    Raises:
        CheckpointMismatchError: keys, shapes or the trained encoding do not match (the message lists
            them and says whether resampling was tried), or a file mixes keys of the backbone (without its prefix)
            with others.
        NonFiniteWeightsError: NaN or infinite values (unless ``allow_nonfinite``).
        vispe.serialization.UnsafeCheckpointError: the file holds Python objects that could run code.
        vispe.serialization.CorruptCheckpointError: not a checkpoint, truncated or damaged.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f'load_checkpoint loads into a torch nn.Module; got {type(model).__name__}. Build the model '
                        f'first (vispe.create_vit, or MODELS.build(cfg.model)).')
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f'load_checkpoint takes the path of a checkpoint file (str or Path); got '
                        f'{type(path).__name__}.')
    path = os.fspath(path)
    state_dict, meta = read_checkpoint(path, trusted=trusted)
    return load_weights(model, state_dict, meta, path, strict=strict, check_encoding=check_encoding,
                        allow_nonfinite=allow_nonfinite)


def load_weights(
        model: nn.Module,
        state_dict: dict[str, torch.Tensor],
        meta: Mapping[str, Any],
        path: str,
        strict: bool = True,
        check_encoding: bool = True,
        allow_nonfinite: bool = False,
) -> dict[str, Any]:
    """Load a state dict already read from ``path`` (its ``meta`` as :func:`read_checkpoint` returns it) into
    ``model``, with the checks and adoptions of :func:`load_checkpoint` (whose arguments and result these are);
    ``path`` names the weights' source in messages. ``state_dict`` is changed in place."""
    if check_encoding:
        check_encodings(model, meta, path)
    state_dict = backbone_state_dict(model, state_dict, path)
    if not allow_nonfinite:
        check_finite(state_dict, path)
    shapes = {key: value.shape for key, value in state_dict.items()}
    try:
        adopted = adopt_foreign_entries(model, state_dict)
    except ValueError as error:
        raise CheckpointMismatchError(f'Checkpoint {path}: {error}') from None
    resampled = [key for key, shape in shapes.items() if key in state_dict and state_dict[key].shape != shape]
    own = model.state_dict()
    mismatched = [key for key, value in state_dict.items() if key in own and own[key].shape != value.shape]
    missing = sorted(set(own) - set(state_dict))
    unexpected = sorted(set(state_dict) - set(own))
    if strict and (mismatched or missing or unexpected):
        shapes = [f'{key}: checkpoint {tuple(state_dict[key].shape)} vs model {tuple(own[key].shape)}'
                  for key in mismatched]
        if resampled:
            tried = f'resampled {", ".join(resampled)}'
        elif any(isinstance(module, LearnedAPE) for module in model.modules()):
            tried = 'tried; no learned position table needed it'
        else:
            tried = 'not tried: the model has no learned position table'
        raise CheckpointMismatchError(
            f'Checkpoint {path} does not match {type(model).__name__}. Missing from the checkpoint: '
            f'{_listing(missing)}. Unexpected in the checkpoint: {_listing(unexpected)}. Shape mismatches: '
            f'{_listing(shapes)}. Resampling: {tried}. Build the model with the encoding and sizes the checkpoint '
            f'was trained with, or pass strict=False to load the matching part (e.g. with a new classifier head).')
    for key in mismatched:
        del state_dict[key]
    result = model.load_state_dict(state_dict, strict=False)
    loaded = len(own) - len(result.missing_keys)
    if own and loaded < LOW_LOAD_FRACTION * len(own):
        warnings.warn(f'load_checkpoint(strict=False) loaded {loaded} of the model\'s {len(own)} tensors from {path} '
                      f'({len(result.missing_keys)} missing from the checkpoint, {len(unexpected)} unexpected in it, '
                      f'{len(mismatched)} of another shape): it probably belongs to another architecture or needs a '
                      f'key prefix removed. Missing: {_listing(sorted(result.missing_keys))}.', stacklevel=2)
    return dict(missing=list(result.missing_keys), unexpected=list(result.unexpected_keys),
                skipped=mismatched, resampled=resampled, adopted=adopted)


def _listing(items: list[str]) -> str:
    if not items:
        return 'none'
    return ', '.join(items[:12]) + (f' ... ({len(items)} in all)' if len(items) > 12 else '')
