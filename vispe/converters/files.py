"""Converting a released checkpoint file into a vispe checkpoint file: read safely, convert, check against the
vispe model it is for, write atomically."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import torch
from torch import nn

from vispe.converters.registry import Conversion, convert_state_dict, get_converter


class ConversionMismatchError(ValueError):
    """The converted tensors do not load into the vispe model they are for (missing, unexpected, other shapes)."""


def load_problems(model: nn.Module, state_dict: Mapping[str, torch.Tensor]) -> list[str]:
    """What stops ``state_dict`` from loading into ``model`` with ``strict=True``: one line per key."""
    expected = model.state_dict()
    problems = [f'missing in the converted file: {key}' for key in expected if key not in state_dict]
    problems += [f'not in the model: {key}' for key in state_dict if key not in expected]
    problems += [f'shape {tuple(value.shape)} != model {tuple(expected[key].shape)}: {key}'
                 for key, value in state_dict.items() if key in expected and value.shape != expected[key].shape]
    return problems


def target_config(conversion: Conversion, config: str | os.PathLike | None = None) -> dict[str, Any] | None:
    """The config of the vispe model the converted tensors are for: ``config``'s model (a config file or
    ``vispe::`` name) when given, else the one the converter inferred (:attr:`Conversion.model`), else None."""
    if config is not None:
        from vispe.engine import load_config
        return load_config(config).model.to_dict()
    return None if conversion.model is None else dict(conversion.model)


def convert_checkpoint(family: str, source: str | os.PathLike, output: str | os.PathLike,
                       config: str | os.PathLike | None = None, **options: Any) -> Conversion:
    """Convert the released checkpoint ``source`` of ``family`` into ``output``, a vispe checkpoint.

    The file is read without running code from it (:func:`vispe.checkpoint.read_checkpoint_entries`: the state
    dict and the entries beside it that the family reads, :attr:`CheckpointConverter.file_entries`), converted, and
    checked by loading it with ``strict=True`` into its vispe model (``config``'s, or the one the converter inferred
    from the tensors). ``output`` is written atomically as ``{'state_dict': ..., 'meta': ...}``; ``meta`` names the
    source, the family, the converter's version, what stayed unmapped, the model config and its encodings, so that
    :func:`vispe.load_checkpoint` can check the encodings of the model it is loaded into. ``options`` go to the
    family's converter (:func:`vispe.converters.registry.converter_options`).

    Raises:
        KeyError: an unknown family (the closest names are given).
        vispe.converters.CheckpointFamilyError: the file belongs to another family (the message names those its keys
            resemble).
        ConversionMismatchError: the converted tensors do not load into the vispe model (every key is named);
            nothing is written.
        vispe.serialization.CorruptCheckpointError: a truncated or damaged file.
    """
    from vispe.checkpoint import model_encodings, read_checkpoint_entries
    from vispe.engine.hooks import save_atomically
    converter = get_converter(family)
    source = os.fspath(source)
    from vispe.registry import MODELS
    state_dict, entries = read_checkpoint_entries(source, converter.file_entries)
    conversion = convert_state_dict(family, state_dict, source, **entries, **options)
    model_config = target_config(conversion, config)
    model = None if model_config is None else MODELS.build(model_config)
    meta: dict[str, Any] = dict(converted_from=source, kind=family, converter_version=converter.version,
                                unmapped=list(conversion.unmapped), derived=list(conversion.derived))
    if model is not None:
        problems = load_problems(model, conversion.state_dict)
        if problems:
            listed = '; '.join(problems[:12]) + (f' ... ({len(problems)} in all)' if len(problems) > 12 else '')
            target = f'the model of {config}' if config is not None else f'the inferred {model_config}'
            raise ConversionMismatchError(f'{source}: the converted tensors do not load into {target}: {listed}. '
                                          f'Nothing written.')
        meta['encodings'] = model_encodings(model)
    if model_config is not None:
        meta['model'] = model_config
    if options:
        meta['converter_options'] = dict(options)
    save_atomically(dict(state_dict=conversion.state_dict, meta=meta), Path(output))
    return conversion
