"""The base of every encoding: named hooks into attention, and composition of several encodings.

An encoding touches a transformer at a few named points and implements only those it needs::

    prepare(pos)                                     once per forward and token set: tables into pos.memo
    x = embed(x, pos)                                tokens (prefix tokens first)
    q, k = rotate(q, k, pos_q, pos_k, layer)         per layer, q (B, heads, Nq, d), k (B, heads|1, Nk, d)
    v = transform_v(v, pos_k, layer)
    bias = logits_bias(q, k, pos_q, pos_k, layer)    additive logits, (B|1, heads|1, Nq, Nk) or None
    o = attention(q, k, v, bias)                     SDPA unless probabilities are needed
    o = transform_out(o, pos_q, layer, probs, pos_k) probs only when needs_probs(layer)
    x = between_blocks(x, pos, layer)                after block ``layer``

``pos_q`` and ``pos_k`` are the :class:`~vispe.geometry.Positions` of the queries' and the keys' tokens; in
self-attention they are the same object (``pos_q is pos_k``), in cross-attention (a detector's decoder)
they differ. ``embed`` and ``between_blocks`` act on one token set.

Options are declared once per class (``options``, see :mod:`vispe.encodings.options`) and checked when
an encoding is constructed and when a test-time option is set on a built encoding.
"""
from __future__ import annotations

import functools
import inspect
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Hashable, Mapping, Sequence

import torch
import torch.fx
from torch import nn

from vispe.encodings.options import (Option, OptionTypeError, check_test_time_option, closest_suggestion,
                                     unknown_attribute_message)
from vispe.geometry import Positions
from vispe.geometry.cameras import tracing

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

    from vispe.flex_bias import OffsetBias

HOOK_NAMES = ('embed', 'rotate', 'transform_v', 'logits_bias', 'transform_out', 'between_blocks')
# Positional parameters (after self) of each hook, and of the hooks that took one ``pos`` before vispe 0.2.
HOOK_SIGNATURES = {
    'rotate': ('q', 'k', 'pos_q', 'pos_k', 'layer_idx'),
    'logits_bias': ('q', 'k', 'pos_q', 'pos_k', 'layer_idx'),
    'transform_v': ('v', 'pos_k', 'layer_idx'),
    'transform_out': ('out', 'pos_q', 'layer_idx', 'probs', 'pos_k'),
}
ONE_POSITION_HOOKS = {'rotate': 4, 'logits_bias': 4, 'transform_out': 4}

# Instance-dict flags: inside the outermost constructor; construction finished (assignments checked).
_CONSTRUCTING = '_options_constructing'
_BUILT = '_options_built'


def _checked_arguments(cls: type[PositionEncoding], signature: inspect.Signature, instance: PositionEncoding,
                       args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The constructor arguments (defaults included) with every option declared in ``cls.options``
    checked and normalised; unknown keyword arguments are refused with the closest option name."""
    try:
        bound = signature.bind(instance, *args, **kwargs)
    except TypeError:
        accepted = [name for name in signature.parameters if name != 'self']
        unknown = [name for name in kwargs if name not in signature.parameters]
        if unknown and not any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values()):
            accepts = f'It accepts: {", ".join(accepted)}.' if accepted else 'It takes no options.'
            raise OptionTypeError(f'{cls.__name__} has no option {unknown[0]!r}.'
                                  f'{closest_suggestion(unknown[0], accepted)} {accepts}') from None
        return args, kwargs
    bound.apply_defaults()
    for name, parameter in signature.parameters.items():
        if parameter.kind is parameter.VAR_KEYWORD:
            extra = bound.arguments[name]
            for key in extra.keys() & cls.options.keys():
                extra[key] = cls.options[key].check(cls.__name__, key, extra[key])
        elif name in cls.options:
            bound.arguments[name] = cls.options[name].check(cls.__name__, name, bound.arguments[name])
    return bound.args[1:], bound.kwargs


def _refuse_one_position_hooks(cls: type) -> None:
    """A hook written against the one-``pos`` signatures (before vispe 0.2) gets a TypeError at class
    definition that names the new signature, rather than wrong positions at the first forward."""
    for hook, old_count in ONE_POSITION_HOOKS.items():
        method = cls.__dict__.get(hook)
        if method is None:
            continue
        parameters = list(inspect.signature(method).parameters.values())[1:]
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in parameters):
            continue
        positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        if len(positional) == old_count:
            names = ', '.join(p.name for p in positional)
            new = ', '.join(HOOK_SIGNATURES[hook])
            raise TypeError(f'{cls.__name__}.{hook}(self, {names}) has the one-position signature of vispe < 0.2. '
                            f'Hooks now receive the query-side and the key-side positions: write '
                            f'{hook}(self, {new}); in self-attention pos_q is pos_k (see docs/architecture.md).')


def _checking_constructor(init: Callable[..., None]) -> Callable[..., None]:
    """Wrap an encoding's ``__init__``: the outermost call checks the arguments against the declared
    options of the class being built, and marks the instance built when it returns (from then on
    attribute assignments are checked, see :meth:`PositionEncoding.__setattr__`)."""
    signature = inspect.signature(init)

    @functools.wraps(init)
    def __init__(self: PositionEncoding, *args: Any, **kwargs: Any) -> None:
        state = self.__dict__
        if state.get(_CONSTRUCTING):
            init(self, *args, **kwargs)
            return
        args, kwargs = _checked_arguments(type(self), signature, self, args, kwargs)
        state[_CONSTRUCTING] = True
        try:
            init(self, *args, **kwargs)
        finally:
            del state[_CONSTRUCTING]
        state[_BUILT] = True

    __init__.checks_options = True
    return __init__


class PositionEncoding(nn.Module):
    """Base class: override the hooks the encoding uses; the others are identities.

    Class attributes:
        family: 'none', 'absolute', 'rotary', 'bias' or 'conditional'.
        paper: the paper (and reference code) the encoding follows.
        timm_names: names a timm ViT state dict uses for this encoding's parameters
            (local name -> timm name), so checkpoints load both ways.
        foreign_names: names other checkpoints use for this encoding's parameters (local name -> key),
            adopted when loading one (timm's Eva RoPE ViTs: ``rope.freqs``); saving keeps vispe's names.
        examples: option sets that build representative instances (the demo and the common
            tests build one model per example).
        requires: what the positions must carry beyond a token grid (``('cameras',)`` for the camera
            encodings of multi-view detectors); the 2D models, demos and benchmarks use the encodings that
            require nothing.
        options: the declared constructor options (name -> :class:`~vispe.encodings.options.Option`),
            model facts included. Constructor arguments named there are checked before ``__init__``
            runs. On a built encoding, setting a declared test-time option checks the value, setting
            any other declared option raises AttributeError, and so does a new public attribute name
            when the class (or a base below PositionEncoding) declares ``options`` at all; a plugin
            that declares nothing keeps plain nn.Module attributes.
    """

    family: ClassVar[str] = 'other'
    paper: ClassVar[str] = ''
    timm_names: ClassVar[dict[str, str]] = {}
    foreign_names: ClassVar[dict[str, str]] = {}
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    requires: ClassVar[tuple[str, ...]] = ()
    options: ClassVar[dict[str, Option]] = {}
    declares_options: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _refuse_one_position_hooks(cls)
        init = cls.__dict__.get('__init__')
        if init is not None and not getattr(init, 'checks_options', False):
            cls.__init__ = _checking_constructor(init)
        cls.declares_options = any('options' in klass.__dict__ for klass in cls.__mro__
                                   if issubclass(klass, PositionEncoding) and klass is not PositionEncoding)
        if 'options' in cls.__dict__:
            parameters = inspect.signature(cls.__init__).parameters
            if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
                missing = sorted(set(cls.options) - set(parameters))
                if missing:
                    raise TypeError(f'{cls.__name__} declares options {missing} that its __init__ does not take; '
                                    f'declare only constructor arguments.')

    @_checking_constructor
    def __init__(self) -> None:
        super().__init__()

    def __setattr__(self, name: str, value: Any) -> None:
        """nn.Module's, after construction checked against the declared options (see the class docstring)."""
        if self.__dict__.get(_BUILT):
            if name in type(self).options:
                value = check_test_time_option(self, name, value)
            elif type(self).declares_options and not name.startswith('_') and not self._has_attribute(name):
                raise AttributeError(unknown_attribute_message(self, name))
        super().__setattr__(name, value)

    def _has_attribute(self, name: str) -> bool:
        """Whether ``name`` is already an attribute, parameter, buffer, submodule or class member."""
        return (name in self.__dict__ or name in self._parameters or name in self._buffers or name in self._modules
                or any(name in klass.__dict__ for klass in type(self).__mro__))

    @classmethod
    def test_time_options(cls) -> dict[str, Option]:
        """The declared options that may be set as attributes after build."""
        return {name: option for name, option in cls.options.items() if option.test_time}

    def prepare(self, pos: Positions) -> None:
        """Build this forward's tables into ``pos.memo`` (called once per forward, before the blocks and
        outside gradient checkpointing). Hooks read them back with the same ``pos.memo`` key."""

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        """Mix position into tokens. ``x``: (B, prefix + h·w, C) -> same shape."""
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transform queries (B, heads, Nq, d) by their positions and keys (B, heads|1, Nk, d) by theirs."""
        return q, k

    def transform_v(self, v: torch.Tensor, pos_k: Positions, layer_idx: int) -> torch.Tensor:
        """Transform values (B, heads|1, Nk, d) by the keys' positions."""
        return v

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
                    layer_idx: int) -> torch.Tensor | None:
        """Additive attention logits, (B|1, heads|1, Nq, Nk), or None."""
        return None

    def transform_out(self, out: torch.Tensor, pos_q: Positions, layer_idx: int,
                      probs: torch.Tensor | None = None, pos_k: Positions | None = None) -> torch.Tensor:
        """Transform the attention output (B, heads, Nq, d) by the queries' positions; ``probs``
        (B, heads, Nq, Nk), after attention dropout, is given when :meth:`needs_probs` is True for this layer,
        with ``pos_k``, the positions of the keys it runs over."""
        return out

    def between_blocks(self, x: torch.Tensor, pos: Positions, layer_idx: int) -> torch.Tensor:
        """Transform tokens after block ``layer_idx``, (B, prefix + h·w, C)."""
        return x

    def needs_probs(self, layer_idx: int) -> bool:
        """Whether :meth:`transform_out` needs the attention probabilities at this layer."""
        return False

    def flex_bias(self, pos_q: Positions, pos_k: Positions,
                  layer_idx: int) -> tuple[OffsetBias, BlockMask | None] | None:
        """This layer's :meth:`logits_bias` as grid-offset tables for FlexAttention, with its block mask, or None
        to have :meth:`logits_bias` called (the default). Attention asks only when it may use the flex path (see
        :mod:`vispe.attention`); the result must equal :meth:`logits_bias`."""
        return None

    def no_weight_decay(self) -> set[str]:
        """Names (relative to this module) of parameters to keep out of weight decay."""
        return set()

    def adopt_state_dict(self, state_dict: dict[str, torch.Tensor], keys: Mapping[str, str]) -> list[str]:
        """Make a foreign checkpoint's entries fit this encoding, in place, before it is loaded.

        The base renames entries found under ``foreign_names`` when the checkpoint lacks the model's own key;
        encodings with tables tied to a grid also resample them (:class:`~vispe.encodings.LearnedAPE`).

        Args:
            state_dict: the checkpoint's tensors (changed in place).
            keys: this module's own parameter and buffer names -> their keys in the model's state dict.

        Returns:
            One line per adopted entry ('rope.freqs -> encoding.freqs', 'pos_embed resampled 14x14 -> 7x7').
        """
        adopted = []
        for local, foreign in self.foreign_names.items():
            key = keys.get(local)
            if key is not None and key not in state_dict and foreign in state_dict:
                state_dict[key] = state_dict.pop(foreign)
                adopted.append(f'{foreign} -> {key}')
        return adopted

    def check_sequence(self, pos: Positions, num_prefix_tokens: int, integer_grid: bool = True) -> None:
        """Refuse positions this encoding was not built for: no single-image grid, another prefix-token count,
        or explicit coordinates when its tables index the integer grid."""
        name = type(self).__name__
        pos.require_grid(name)
        if pos.num_prefix_tokens != num_prefix_tokens:
            raise ValueError(f'{name} was built for {num_prefix_tokens} prefix tokens; the sequence has '
                             f'{pos.num_prefix_tokens}. Build it with num_prefix_tokens={pos.num_prefix_tokens}.')
        if integer_grid and not pos.has_default_coords:
            raise ValueError(f'{name} indexes the integer patch grid; explicit coordinates are not supported.')

    @classmethod
    def hooks(cls) -> tuple[str, ...]:
        """The hooks this encoding class overrides."""
        return tuple(name for name in HOOK_NAMES if getattr(cls, name) is not getattr(PositionEncoding, name))

    @property
    def active_hooks(self) -> frozenset[str]:
        """The hooks this instance uses (a composition uses those of its members)."""
        return frozenset(self.hooks())


class EncodingStack(PositionEncoding):
    """Several encodings applied together, in order (e.g. learned APE beside iRPE, RoPE-Mixed + APE).

    Token hooks and rotations apply in list order; logit biases add up.
    """

    family: ClassVar[str] = 'composite'
    options: ClassVar[dict[str, Option]] = {
        'encodings': Option(object, doc='The encodings to apply, in order (built, not configs).')}

    def __init__(self, encodings: Sequence[PositionEncoding]) -> None:
        super().__init__()
        self.encodings = nn.ModuleList(encodings)

    @property
    def active_hooks(self) -> frozenset[str]:
        return frozenset().union(*(encoding.active_hooks for encoding in self.encodings))

    def _with(self, hook: str) -> list[PositionEncoding]:
        return [encoding for encoding in self.encodings if hook in encoding.active_hooks]

    def prepare(self, pos: Positions) -> None:
        for encoding in self.encodings:
            encoding.prepare(pos)

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        for encoding in self._with('embed'):
            x = encoding.embed(x, pos)
        return x

    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        for encoding in self._with('rotate'):
            q, k = encoding.rotate(q, k, pos_q, pos_k, layer_idx)
        return q, k

    def transform_v(self, v: torch.Tensor, pos_k: Positions, layer_idx: int) -> torch.Tensor:
        for encoding in self._with('transform_v'):
            v = encoding.transform_v(v, pos_k, layer_idx)
        return v

    def logits_bias(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
                    layer_idx: int) -> torch.Tensor | None:
        total = None
        for encoding in self._with('logits_bias'):
            bias = encoding.logits_bias(q, k, pos_q, pos_k, layer_idx)
            if bias is not None:
                total = bias if total is None else total + bias
        return total

    def transform_out(self, out: torch.Tensor, pos_q: Positions, layer_idx: int,
                      probs: torch.Tensor | None = None, pos_k: Positions | None = None) -> torch.Tensor:
        for encoding in self._with('transform_out'):
            out = encoding.transform_out(out, pos_q, layer_idx, probs, pos_k)
        return out

    def between_blocks(self, x: torch.Tensor, pos: Positions, layer_idx: int) -> torch.Tensor:
        for encoding in self._with('between_blocks'):
            x = encoding.between_blocks(x, pos, layer_idx)
        return x

    def needs_probs(self, layer_idx: int) -> bool:
        return any(encoding.needs_probs(layer_idx) for encoding in self.encodings)

    def flex_bias(self, pos_q: Positions, pos_k: Positions,
                  layer_idx: int) -> tuple[OffsetBias, BlockMask | None] | None:
        """The flex tables of the one member with a logit bias, if it offers them (several biases: None)."""
        biased = self._with('logits_bias')
        return biased[0].flex_bias(pos_q, pos_k, layer_idx) if len(biased) == 1 else None

    def no_weight_decay(self) -> set[str]:
        return {f'encodings.{i}.{name}' for i, encoding in enumerate(self.encodings)
                for name in encoding.no_weight_decay()}


class TableCache:
    """A small LRU of tables that depend only on the grid (and device), never on parameters.

    Kept as a plain attribute, not a buffer: tables are rebuilt on a new device and never saved.
    """

    def __init__(self, max_entries: int = 8) -> None:
        self.max_entries = max_entries
        self._tables: OrderedDict[Hashable, Any] = OrderedDict()
        self.builds = 0

    @staticmethod
    def tracing() -> bool:
        """Whether torch.compile, torch.export or torch.fx is tracing: tables are then built in the traced code."""
        return tracing()

    def get(self, key: Hashable, build: Callable[[], Any]) -> Any:
        """The table under ``key``, built on a miss. While torch.compile, torch.export or torch.fx trace a
        model the table is built in the traced code instead, so the graph holds no state from outside."""
        if self.tracing():
            return build()
        # Tables built under torch.inference_mode cannot enter autograd: they are kept apart from the others.
        key = (key, torch.is_inference_mode_enabled())
        if key in self._tables:
            self._tables.move_to_end(key)
            return self._tables[key]
        table = build()
        self.builds += 1
        self._tables[key] = table
        if len(self._tables) > self.max_entries:
            self._tables.popitem(last=False)
        return table

    def nbytes(self) -> int:
        """Memory held by the cached tables (tensors, in dicts, tuples or a FlexAttention block mask)."""
        return sum(table_nbytes(table) for table in self._tables.values())


def table_nbytes(table: Any) -> int:
    """Bytes of the tensors in a table: a tensor, a dict, tuple or list of them, or an object with ``as_tuple()``
    (FlexAttention's BlockMask); anything else (None, numbers, functions) counts 0."""
    if isinstance(table, torch.Tensor):
        return table.numel() * table.element_size()
    if isinstance(table, dict):
        table = list(table.values())
    elif hasattr(table, 'as_tuple'):
        table = table.as_tuple()
    if isinstance(table, (tuple, list)):
        return sum(table_nbytes(part) for part in table)
    return 0
