"""Loading timm and vispe checkpoints into vispe models, resampling what a new grid needs."""
from __future__ import annotations

import math
import os
from typing import Any, Mapping

import torch
from timm.layers import resample_abs_pos_embed
from torch import nn

from vispe.compat import torch_load
from vispe.encodings import LearnedAPE

STATE_DICT_KEYS = ('state_dict', 'model', 'state_dict_ema', 'model_ema', 'module')


class CheckpointMismatchError(RuntimeError):
    """The checkpoint's parameters do not match the model's."""


def read_state_dict(path: str | os.PathLike, weights_only: bool = True) -> dict[str, torch.Tensor]:
    """The parameters stored in a checkpoint file (torch or safetensors).

    Accepts a bare state dict, or one nested under ``state_dict`` (mmengine), ``model`` (DeiT,
    timm train.py) or ``state_dict_ema``; strips a DDP ``module.`` prefix.

    Args:
        path: the file.
        weights_only: refuse pickled Python objects (keep True for files from elsewhere).
    """
    path = os.fspath(path)
    if path.endswith('.safetensors'):
        from safetensors.torch import load_file
        try:
            return load_file(path, device='cpu')
        except FileNotFoundError:
            raise FileNotFoundError(f'Checkpoint not found: {path}') from None
        except Exception as exc:  # safetensors raises its own error types for corrupt headers
            raise RuntimeError(f'Checkpoint {path} is corrupt or not a safetensors file: {exc}') from None
    loaded = torch_load(path, map_location='cpu', weights_only=weights_only)
    state_dict = loaded
    if isinstance(loaded, Mapping):
        for key in STATE_DICT_KEYS:
            if isinstance(loaded.get(key), Mapping):
                state_dict = loaded[key]
                break
    if not isinstance(state_dict, Mapping) or not all(isinstance(v, torch.Tensor) for v in state_dict.values()):
        raise CheckpointMismatchError(f'{path} holds no state dict of tensors (top-level keys: '
                                      f'{list(loaded)[:8] if isinstance(loaded, Mapping) else type(loaded).__name__}).')
    if state_dict and all(key.startswith('module.') for key in state_dict):
        state_dict = {key[len('module.'):]: value for key, value in state_dict.items()}
    return dict(state_dict)


def _square_grid(num_patches: int, key: str) -> tuple[int, int]:
    side = math.isqrt(num_patches)
    if side * side != num_patches:
        raise CheckpointMismatchError(f'{key}: {num_patches} patch rows is not a square grid, so the grid it was '
                                      f'trained on cannot be inferred for resampling.')
    return side, side


def resample_position_tables(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> list[str]:
    """Resample learned APE tables of a checkpoint to the model's grids (timm's bicubic resampling).

    Returns:
        The keys that were resampled.
    """
    apes = [module for module in model.modules() if isinstance(module, LearnedAPE)]
    resampled = []
    for key, value in model.state_dict(keep_vars=True).items():
        ape = next((ape for ape in apes if value is ape.pos_embed), None)
        if ape is None or key not in state_dict or state_dict[key].shape == value.shape:
            continue
        table = state_dict[key]
        prefix = ape.table_prefix_tokens
        if table.ndim != 3 or table.shape[-1] != value.shape[-1] or table.shape[1] <= prefix:
            continue
        old_grid = _square_grid(table.shape[1] - prefix, key)
        state_dict[key] = resample_abs_pos_embed(table, new_size=list(ape.grid_size), old_size=list(old_grid),
                                                 num_prefix_tokens=prefix)
        resampled.append(key)
    return resampled


def load_checkpoint(
        model: nn.Module,
        path: str | os.PathLike,
        strict: bool = True,
        weights_only: bool = True,
) -> dict[str, Any]:
    """Load a timm or vispe checkpoint into ``model``, resampling learned APE tables to its grid.

    A timm ViT checkpoint loads into a vispe ViT built with ``LearnedAPE`` (the names are timm's).

    Args:
        model: the model.
        path: a ``.pth``/``.pt``/``.bin`` torch file or a ``.safetensors`` file.
        strict: every model parameter must be in the checkpoint and every checkpoint entry used.
        weights_only: keep True for files you did not write yourself.

    Returns:
        ``dict(missing=[...], unexpected=[...], skipped=[...], resampled=[...])``; ``skipped`` are
        entries whose shape differs from the model's (loaded only with ``strict=False``).

    Raises:
        CheckpointMismatchError: keys or shapes do not match (the message lists them and says
            whether resampling was tried).
    """
    state_dict = read_state_dict(path, weights_only=weights_only)
    resampled = resample_position_tables(model, state_dict)
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
            f'Checkpoint {os.fspath(path)} does not match {type(model).__name__}. Missing from the checkpoint: '
            f'{_listing(missing)}. Unexpected in the checkpoint: {_listing(unexpected)}. Shape mismatches: '
            f'{_listing(shapes)}. Resampling: {tried}. Build the model with the encoding and sizes the checkpoint '
            f'was trained with, or pass strict=False to load the matching part (e.g. with a new classifier head).')
    for key in mismatched:
        del state_dict[key]
    result = model.load_state_dict(state_dict, strict=False)
    return dict(missing=list(result.missing_keys), unexpected=list(result.unexpected_keys),
                skipped=mismatched, resampled=resampled)


def _listing(items: list[str]) -> str:
    if not items:
        return 'none'
    return ', '.join(items[:12]) + (f' ... ({len(items)} in all)' if len(items) > 12 else '')
