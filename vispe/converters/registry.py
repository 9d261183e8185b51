"""One registry of converters for the papers' released checkpoints.

A converter turns the state dict of one released family (rope-vit's DeiT, LookHere, iRPE-DeiT, DETR-R50, PETR, ...)
into the names of the vispe model that computes the same outputs, and says which vispe model that is
(:attr:`Conversion.model`, a config ``vispe.MODELS.build`` builds). Each family lives in its own module of
:mod:`vispe.converters` and registers itself with :func:`register_converter`; the modules are imported on the
first lookup.

A file of another family is refused before anything is converted: each converter declares the key patterns that
identify its family (:attr:`CheckpointConverter.signature`), and the error names the families whose patterns the
file's keys do match.
"""
from __future__ import annotations

import difflib
import importlib
import inspect
import pkgutil
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

import torch

StateDict = Mapping[str, torch.Tensor]
# A file resembles a family when at least this share of the family's signature patterns match one of its keys.
RESEMBLANCE_THRESHOLD = 0.5
# Modules of vispe.converters that are the machinery, not a family.
NOT_FAMILIES = ('registry', 'files')


class CheckpointFamilyError(ValueError):
    """A checkpoint given to the converter of another family, or one of no known family."""


class ConverterOptionError(TypeError):
    """An option or file entry the family's converter does not take (the message names those it does)."""


class UnsupportedCheckpointError(ValueError):
    """A checkpoint of the family that vispe cannot convert exactly: a variant no vispe model computes, or a setting
    the file does not carry (the message names what to give)."""


@dataclass
class Conversion:
    """A converted state dict and what did not come across.

    Attributes:
        state_dict: vispe names -> tensors.
        unmapped: the source's keys that have no vispe module (listed, never dropped in silence).
        derived: source buffers vispe rebuilds from its config instead of loading them.
        model: the vispe model config (for ``vispe.MODELS.build``) that ``state_dict`` loads into with
            ``strict=True``, inferred from the tensors' shapes; None where the family's architecture needs a config
            (``vispe convert --config``).
        notes: what a user must know about the converted weights (e.g. a backbone that computes differently).
    """

    state_dict: dict[str, torch.Tensor]
    unmapped: list[str] = field(default_factory=list)
    derived: list[str] = field(default_factory=list)
    model: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CheckpointConverter:
    """One released family's converter.

    Attributes:
        name: the family's name on the command line (``vispe convert NAME IN OUT``).
        convert: ``(state_dict, source, **entries) -> Conversion``; ``source`` names the file in error messages,
            ``entries`` are the file's top-level entries named in ``file_entries`` (those it has).
        summary: one line: the paper, the repository and what the converted model is.
        signature: regular expressions of keys that identify the family's files (searched in every key).
        keys_described: the family's keys in words, for error messages (e.g. "keys under pts_bbox_head.").
        released: where the authors publish the weights, or that they released none.
        license: the license of the released weights.
        version: bumped whenever the conversion of the same file changes; written into converted files.
        file_entries: top-level entries of the released file, beside its state dict, that the conversion reads
            (e.g. LookHere's ``config``: the attention directions are in no tensor).
    """

    name: str
    convert: Callable[..., Conversion]
    summary: str
    signature: tuple[str, ...]
    keys_described: str
    released: str
    license: str
    version: int = 1
    file_entries: tuple[str, ...] = ()

    def resemblance(self, keys: Sequence[str]) -> float:
        """The share of this family's signature patterns that some key matches."""
        if not self.signature:
            return 0.0
        return sum(any(re.search(pattern, key) for key in keys) for pattern in self.signature) / len(self.signature)


_CONVERTERS: dict[str, CheckpointConverter] = {}
_FAMILIES_LOADED = False


def register_converter(converter: CheckpointConverter) -> CheckpointConverter:
    """Add a family's converter to the registry (a second one of the same name is refused)."""
    if converter.name in _CONVERTERS:
        raise ValueError(f'A checkpoint converter named {converter.name!r} is already registered '
                         f'({_CONVERTERS[converter.name].summary}); choose another name.')
    _CONVERTERS[converter.name] = converter
    return converter


def _load_families() -> None:
    """Import every module of :mod:`vispe.converters` once (each registers its family)."""
    global _FAMILIES_LOADED
    if _FAMILIES_LOADED:
        return
    package = importlib.import_module('vispe.converters')
    for module in pkgutil.iter_modules(package.__path__):
        if module.name not in NOT_FAMILIES:
            importlib.import_module(f'vispe.converters.{module.name}')
    _FAMILIES_LOADED = True


def list_converters() -> dict[str, CheckpointConverter]:
    """Every registered converter by name, sorted."""
    _load_families()
    return dict(sorted(_CONVERTERS.items()))


def get_converter(name: str) -> CheckpointConverter:
    """The converter of family ``name``; an unknown name is refused with the closest known ones."""
    converters = list_converters()
    if name not in converters:
        close = difflib.get_close_matches(name, list(converters), n=3, cutoff=0.4)
        hint = f" Did you mean {' or '.join(repr(c) for c in close)}?" if close else ''
        raise KeyError(f'No checkpoint converter named {name!r}.{hint} Known families: {", ".join(converters)}.')
    return converters[name]


def resembling_families(state_dict: StateDict, exclude: str | None = None) -> list[str]:
    """Families whose signature the keys of ``state_dict`` match (most alike first), ``exclude`` left out."""
    keys = list(state_dict)
    scores = {name: converter.resemblance(keys) for name, converter in list_converters().items() if name != exclude}
    return [name for name, score in sorted(scores.items(), key=lambda item: -item[1])
            if score >= RESEMBLANCE_THRESHOLD]


def check_family(converter: CheckpointConverter, state_dict: StateDict, source: str) -> None:
    """Refuse a file whose keys do not carry ``converter``'s signature, naming the families they do resemble."""
    if converter.resemblance(list(state_dict)) >= RESEMBLANCE_THRESHOLD:
        return
    others = resembling_families(state_dict, exclude=converter.name)
    sample = ', '.join(list(state_dict)[:4]) + (', ...' if len(state_dict) > 4 else '')
    resembles = (f'Its keys resemble {" or ".join(repr(name) for name in others)}: convert it with '
                 f'`vispe convert {others[0]} ...`.' if others
                 else 'Its keys resemble no family vispe converts.')
    raise CheckpointFamilyError(
        f'{source} is not a {converter.name!r} checkpoint ({converter.summary}): its {len(state_dict)} keys '
        f'({sample or "none"}) are not its {converter.keys_described}. {resembles}')


def converter_options(converter: CheckpointConverter) -> dict[str, Any]:
    """The keyword options of a family's ``convert`` (what the tensors cannot say, e.g. DETR's head count) and their
    defaults; the file entries it reads (:attr:`CheckpointConverter.file_entries`) are not options."""
    parameters = list(inspect.signature(converter.convert).parameters.values())[2:]
    return {parameter.name: parameter.default for parameter in parameters
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY)
            and parameter.name not in converter.file_entries}


def convert_state_dict(family: str, state_dict: StateDict, source: str = 'the checkpoint',
                       **arguments: Any) -> Conversion:
    """Convert a released state dict of ``family`` into vispe's names (the family is checked first).

    ``arguments``: the family converter's options (:func:`converter_options`) and the file's top-level entries
    beside the state dict that the family reads (:attr:`CheckpointConverter.file_entries`, e.g. ``config=`` for
    LookHere); anything else is refused with what the family takes."""
    converter = get_converter(family)
    accepted = converter_options(converter)
    unknown = sorted(set(arguments) - set(accepted) - set(converter.file_entries))
    if unknown:
        takes = ', '.join(f'{name}={default!r}' for name, default in accepted.items()) or 'no options'
        reads = f'; it reads the file entries {", ".join(converter.file_entries)}' if converter.file_entries else ''
        raise ConverterOptionError(f'The {family!r} converter has no option {", ".join(unknown)}; it takes '
                                   f'{takes}{reads}.')
    check_family(converter, state_dict, source)
    return converter.convert(state_dict, source, **arguments)
