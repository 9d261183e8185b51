"""Declared encoding options: one declaration per option, checked at every entry.

Each encoding class lists its constructor options in ``options`` (name -> :class:`Option`): the kind
of value, its range or choices, its length for sequences, whether it may change after build
(``test_time``) and a one-line ``doc``. The same declaration checks a constructor argument (direct
construction, :func:`~vispe.encodings.build_encoding`, configs, plugins), an attribute set on a built
encoding, and the ``--encoding-options`` of ``tools/eval_resolution.py``::

    class RoPEAxial(PositionEncoding):
        options = {'theta': Option(float, gt=0, test_time=True, doc='The RoPE base is positive ...')}

    RoPEAxial(head_dim=64, theta=-1)   # ValueError: RoPEAxial option theta must be a finite number > 0; ...
    encoding.theta = '100'             # TypeError, before any forward
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

KINDS = (int, float, bool, str, object)


@dataclass(frozen=True)
class Search:
    """The values that ``tools/eval_resolution.py --tune`` tries for a test-time option at each test size.

    Args:
        values: absolute candidates (the choices of a string option).
        factors: multiples of the option's value as the model was built (1 is the trained value), for numbers.
    """

    values: tuple[Any, ...] = ()
    factors: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if bool(self.values) == bool(self.factors):
            raise TypeError('Search takes either values or factors.')

    def candidates(self, built: Any) -> tuple[Any, ...]:
        """The candidates for an option whose built value is ``built``: that value first, then the others."""
        others = self.values if self.values else tuple(built * factor for factor in self.factors)
        return (built, *[value for value in others if value != built])


class OptionTypeError(TypeError):
    """An option value of the wrong type."""


class OptionValueError(ValueError):
    """An option value of the right type but out of range, of the wrong length, or not one of the choices."""


class _Refused(Exception):
    """Internal: one value refused by :meth:`Option._item` (``wrong_type`` says which error to raise)."""

    def __init__(self, wrong_type: bool, suggestion: str = '') -> None:
        super().__init__()
        self.wrong_type = wrong_type
        self.suggestion = suggestion


# Finite float options must keep this magnitude (or be 0): beyond it, float32 tables hold inf or 0 and
# attention logits turn to NaN.
FLOAT32_MAGNITUDES = (1e-30, 1e30)

@dataclass(frozen=True)
class Option:
    """What one constructor option of an encoding accepts.

    Args:
        kind: ``int``, ``float`` (ints accepted, converted to float), ``bool``, ``str``, or ``object``
            (anything: the constructor checks it, e.g. an encoding config). Bools never pass as numbers.
        doc: one line on what the option does, its usual value and, for a test-time option, why it
            may change after build; it ends every error message about the option.
        gt, ge, lt, le: numeric bounds (exclusive, inclusive).
        multiple_of: ints must be divisible by it.
        finite: floats must be finite (NaN and ±inf refused).
        choices: the accepted strings (the error names the closest).
        sequence: the value is a sequence (list or tuple) whose items are of ``kind``.
        length: the exact length of the sequence.
        scalar_ok: a single item also stands for a sequence of ``length`` equal items.
        optional: None is accepted (and kept).
        test_time: the option may be set as an attribute after build (it shapes no parameter and
            no table that is not rebuilt); other options are fixed at build.
        search: for a test-time option, the candidates ``eval_resolution.py --tune`` tries (:class:`Search`).
    """

    kind: type = float
    doc: str = ''
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    multiple_of: int | None = None
    finite: bool = True
    choices: tuple[str, ...] | None = None
    sequence: bool = False
    length: int | None = None
    scalar_ok: bool = False
    optional: bool = False
    test_time: bool = False
    search: Search | None = None

    def __post_init__(self) -> None:
        if self.search is not None and not self.test_time:
            raise TypeError('Option search is for test-time options.')
        if self.kind not in KINDS:
            raise TypeError(f'Option kind must be one of {[kind.__name__ for kind in KINDS]}; got {self.kind!r}.')
        if self.choices is not None and self.kind is not str:
            raise TypeError('Option choices are for kind=str.')
        if (self.length is not None or self.scalar_ok) and not self.sequence:
            raise TypeError('Option length and scalar_ok are for sequence=True.')
        if self.scalar_ok and self.length is None:
            raise TypeError('Option scalar_ok needs the sequence length.')

    def requirement(self) -> str:
        """What the option accepts, in words: 'a finite number > 0', 'one of 'AP', 'LD''."""
        item = self._item_requirement()
        if self.sequence:
            count = f'{self.length} items' if self.length is not None else 'items'
            text = f'a sequence of {count}, each {item}'
            if self.scalar_ok:
                text = f'{item}, or {text}'
        else:
            text = item
        return f'{text}, or None' if self.optional else text

    def _item_requirement(self) -> str:
        if self.kind is bool:
            return 'True or False'
        if self.kind is str:
            return 'a string' if self.choices is None else 'one of ' + ', '.join(map(repr, self.choices))
        if self.kind is object:
            return 'any value'
        text = 'an int' if self.kind is int else ('a finite number' if self.finite else 'a number')
        bounds = [f'{sign} {bound:g}' for sign, bound in (('>', self.gt), ('>=', self.ge), ('<', self.lt),
                                                           ('<=', self.le)) if bound is not None]
        if bounds:
            text += ' ' + ' and '.join(bounds)
        if self.multiple_of is not None:
            text += f' divisible by {self.multiple_of}'
        return text

    def _item(self, value: Any) -> Any:
        """One item, normalised (ints to float for kind=float), or :class:`_Refused`."""
        if self.kind is object:
            return value
        if self.kind is bool:
            if not isinstance(value, bool):
                raise _Refused(wrong_type=True)
            return value
        if self.kind is str:
            if not isinstance(value, str):
                raise _Refused(wrong_type=True)
            if self.choices is not None and value not in self.choices:
                raise _Refused(wrong_type=False, suggestion=closest_suggestion(value, self.choices))
            return value
        if isinstance(value, bool) or not isinstance(value, numbers.Integral if self.kind is int else numbers.Real):
            raise _Refused(wrong_type=True)
        value = self.kind(value)
        if self.kind is float and self.finite and not math.isfinite(value):
            raise _Refused(wrong_type=False)
        if self.kind is float and self.finite and value and not FLOAT32_MAGNITUDES[0] <= abs(value) <= FLOAT32_MAGNITUDES[1]:
            raise _Refused(wrong_type=False, suggestion=f' Encodings compute in float32, where it overflows or '
                                                        f'vanishes: use a magnitude from {FLOAT32_MAGNITUDES[0]:g} to '
                                                        f'{FLOAT32_MAGNITUDES[1]:g}, or 0 where 0 is allowed.')
        if ((self.gt is not None and not value > self.gt) or (self.ge is not None and not value >= self.ge)
                or (self.lt is not None and not value < self.lt) or (self.le is not None and not value <= self.le)
                or (self.multiple_of is not None and value % self.multiple_of)):
            raise _Refused(wrong_type=False)
        return value

    def check(self, owner: str, name: str, value: Any) -> Any:
        """The value, normalised (floats for ints, tuples for sequences), or an error that says what is
        wrong, the value seen and what to pass.

        Raises:
            OptionTypeError (a TypeError): the value is of the wrong type.
            OptionValueError (a ValueError): out of range, of the wrong length, or not a choice.
        """
        if value is None and self.optional:
            return None
        detail = ''
        try:
            if not self.sequence:
                return self._item(value)
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                if self.scalar_ok:
                    return (self._item(value),) * self.length
                raise _Refused(wrong_type=True)
            if self.length is not None and len(value) != self.length:
                detail = f' (length {len(value)})'
                raise _Refused(wrong_type=False)
            items = []
            for index, item in enumerate(value):
                detail = f' (item {index} is {item!r})'
                items.append(self._item(item))
            return tuple(items)
        except _Refused as refused:
            error = OptionTypeError if refused.wrong_type else OptionValueError
            seen = f'{value!r} ({type(value).__name__})' if refused.wrong_type else repr(value)
            raise error(f'{owner} option {name} must be {self.requirement()}; got {seen}{detail}.'
                        f'{refused.suggestion} {self.doc}'.rstrip()) from None


def closest_names(word: str, names: Sequence[str]) -> list[str]:
    """The names closest to ``word`` (case-insensitive, best first): at most 3, each nearly as close as the best."""
    by_lower = {name.lower(): name for name in names}
    scored = sorted(((difflib.SequenceMatcher(None, word.lower(), lower).ratio(), lower) for lower in by_lower),
                    key=lambda pair: -pair[0])
    if not scored or scored[0][0] < 0.6:
        return []
    return [by_lower[lower] for ratio, lower in scored[:3] if ratio >= max(0.6, scored[0][0] - 0.1)]


def closest_suggestion(word: str, names: Sequence[str]) -> str:
    """' Did you mean 'x'?' for the closest of ``names`` (case-insensitive), or ''."""
    close = closest_names(word, names)
    return ' Did you mean ' + ' or '.join(map(repr, close)) + '?' if close else ''


# The model facts encodings take (filled in by the model, see vispe.encodings.builder.MODEL_CONTEXT).
MODEL_FACTS: dict[str, Option] = {
    'embed_dim': Option(int, ge=1, doc='The token width C, filled in by the model.'),
    'num_heads': Option(int, ge=1, doc='Attention heads per layer, filled in by the model.'),
    'head_dim': Option(int, ge=1, doc='The width d of one head (embed_dim / num_heads), filled in by the model.'),
    'depth': Option(int, ge=1, doc='The number of transformer layers, filled in by the model.'),
    'grid_size': Option(int, ge=1, sequence=True, length=2, scalar_ok=True,
                        doc='The training patch grid (rows, cols), filled in by the model.'),
    'patch_size': Option(int, ge=1, sequence=True, length=2, scalar_ok=True,
                         doc='The patch size in pixels (height, width), filled in by the model.'),
    'num_prefix_tokens': Option(int, ge=0, doc='The cls and register tokens before the patches, filled in by '
                                              'the model.'),
    'in_channels': Option(int, ge=1, doc='Channels of the backbone features an encoding reads (3DPPE\'s depth net), '
                                         'filled in by the model.'),
    'in_chans': Option(int, ge=1, doc='Channels of the input images (a ViT\'s in_chans), filled in by the model.'),
}


def model_facts(*names: str) -> dict[str, Option]:
    """The declarations of the model facts ``names``, to spread into an encoding's ``options``."""
    return {name: MODEL_FACTS[name] for name in names}


def model_fact(name: str, **changes: Any) -> Option:
    """The declaration of one model fact with some fields changed: ``model_fact('head_dim', multiple_of=4)``."""
    return dataclasses.replace(MODEL_FACTS[name], **changes)


def tunable_option_paths(encoding: Any) -> list[str]:
    """Test-time options of ``encoding`` and of the encodings inside it, as attribute paths."""
    names = []
    for path, module in encoding.named_modules():
        for name in getattr(type(module), 'options', {}):
            if type(module).options[name].test_time:
                names.append(f'{path}.{name}' if path else name)
    return names


def _test_time_summary(encoding: Any) -> str:
    names = tunable_option_paths(encoding)
    owner = type(encoding).__name__
    return f'Test-time options of {owner}: {", ".join(names)}.' if names else f'{owner} has no test-time options.'


def unknown_attribute_message(encoding: Any, name: str) -> str:
    """The error for an option name that ``encoding`` does not declare (the closest test-time options named)."""
    owner = type(encoding).__name__
    paths = tunable_option_paths(encoding)
    leaves = {path.rsplit('.', 1)[-1] for path in paths}
    shown = []
    for close in closest_names(name, sorted(leaves | set(type(encoding).options))):
        if close in leaves:
            shown += [path for path in paths if path.rsplit('.', 1)[-1] == close]
        else:
            shown.append(f'{close} (fixed at build)')
    suggestion = ' Did you mean ' + ' or '.join(shown) + '?' if shown else ''
    return f'{owner} has no option {name!r}.{suggestion} {_test_time_summary(encoding)}'


def edit_distance(a: str, b: str) -> int:
    """Levenshtein distance between two strings (insertions, deletions and substitutions of one character)."""
    previous = list(range(len(b) + 1))
    for i, char_a in enumerate(a, 1):
        current = [i]
        for j, char_b in enumerate(b, 1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (char_a != char_b)))
        previous = current
    return previous[-1]


def near_option_names(encoding: Any, name: str) -> list[str]:
    """The declared options of ``encoding`` and the test-time options of the encodings inside it (as attribute
    paths) whose name is within a small edit distance of ``name`` (case-insensitive: 1 for names of up to 5
    characters, else 2); a nested option of exactly that name counts too. Setting ``name`` on a built encoding is
    then almost surely a misspelt or misplaced option."""
    near = []
    lowered = name.lower()
    for option in type(encoding).options:
        if option != name and edit_distance(lowered, option.lower()) <= (1 if len(option) <= 5 else 2):
            near.append(option)
    for path in tunable_option_paths(encoding):
        if '.' in path:
            leaf = path.rsplit('.', 1)[-1]
            if edit_distance(lowered, leaf.lower()) <= (1 if len(leaf) <= 5 else 2):
                near.append(path)
    return near


def misspelt_option_message(encoding: Any, name: str, near: list[str]) -> str:
    """The error for a new attribute whose name is that of a declared option, nearly or inside a nested encoding."""
    owner = type(encoding).__name__
    options = type(encoding).options
    shown = [f'{path} (fixed at build)' if path in options and not options[path].test_time else path for path in near]
    return (f'{owner} has no option {name!r}. Did you mean {" or ".join(shown)}? A built encoding takes new '
            f'attributes, but not one named like an option, which nothing would read. {_test_time_summary(encoding)}')


def fixed_at_build_message(encoding: Any, name: str) -> str:
    """The error for setting a declared option that is not test-time on a built encoding."""
    owner = type(encoding).__name__
    return (f'{owner} option {name} cannot change after build: {type(encoding).options[name].doc} Rebuild the '
            f'encoding with the new {name} (a constructor or config argument) instead. {_test_time_summary(encoding)}')


def check_test_time_option(encoding: Any, name: str, value: Any) -> Any:
    """Check that ``name`` may be set to ``value`` on the built ``encoding`` now, before any work starts.

    Returns:
        The normalised value (what setting the attribute stores).

    Raises:
        AttributeError: ``name`` is not a declared option (the message names the closest test-time
            option), or it is fixed at build.
        OptionTypeError, OptionValueError: the value does not fit the declaration.
    """
    option = type(encoding).options.get(name)
    if option is None:
        raise AttributeError(unknown_attribute_message(encoding, name))
    if not option.test_time:
        raise AttributeError(fixed_at_build_message(encoding, name))
    return option.check(type(encoding).__name__, name, value)
