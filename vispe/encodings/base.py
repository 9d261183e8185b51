"""The contract of every encoding: named hooks into attention and tokens, the position embedding hosts read without
tokens, what an encoding requires of its positions, and tables cached by what they depend on.

An encoding touches a transformer at a few named points and implements only those it needs::

    prepare(pos)                                     once per forward and token set: tables into pos.memo
    x = embed(x, pos)                                tokens (prefix tokens first)
    q, k = rotate(q, k, pos_q, pos_k, layer)         per layer, q (B, heads, Nq, d), k (B, heads|1, Nk, d)
    v = transform_v(v, pos_k, layer)
    bias = logits_bias(q, k, pos_q, pos_k, layer)    additive logits, (B|1, heads|1, Nq, Nk) or None
    o = attention(q, k, v, bias)                     SDPA unless probabilities are needed
    o = transform_out(o, pos_q, layer, probs, pos_k) probs only when needs_probs(layer)
    x = between_blocks(x, pos, layer)                after block ``layer``

    e = position_embedding(pos)                      (B|1, N, C) without tokens: what a decoder adds to its keys

``pos_q`` and ``pos_k`` are the :class:`~vispe.geometry.Positions` of the queries' and the keys' tokens; in
self-attention they are the same object (``pos_q is pos_k``), in cross-attention (a detector's decoder)
they differ. ``embed`` and ``between_blocks`` act on one token set. The camera encodings add the camera protocol
(:class:`~vispe.encodings.CameraEncoding`). docs/architecture.md keeps the table of who calls what.

Options are declared once per class (``options``, see :mod:`vispe.encodings.options`) and checked when
an encoding is constructed and when a declared option is set on a built encoding.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Hashable, Mapping, TypeVar

import torch
from torch import nn

from vispe.encodings.definition import (BUILT, checking_constructor, fit_transform_out,
                                        refuse_one_position_hooks)
from vispe.encodings.options import Option, check_test_time_option, misspelt_option_message, near_option_names
from vispe.encodings.tables import TableCache
from vispe.geometry import Positions

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

    from vispe.flex_bias import OffsetBias

T = TypeVar('T')

HOOK_NAMES = ('embed', 'rotate', 'transform_v', 'logits_bias', 'transform_out', 'between_blocks')


def default_method(method: Callable[..., T]) -> Callable[..., T]:
    """Mark a base class's default of a contract method (an identity hook, an embedding of None, a method a subclass
    must write): :meth:`PositionEncoding.implements` does not count it."""
    method.is_default = True
    return method


def defines(cls: type, method: str) -> bool:
    """Whether ``cls`` has ``method`` and it is not a base class's :func:`default_method`."""
    attribute = getattr(cls, method, None)
    return attribute is not None and not getattr(attribute, 'is_default', False)


class PositionEncoding(nn.Module):
    """Base class: override the hooks the encoding uses; the others are identities.

    Class attributes:
        family: 'none', 'absolute', 'rotary', 'bias' or 'conditional'.
        paper: the paper (and reference code) the encoding follows.
        timm_names: names a timm ViT state dict uses for this encoding's parameters
            (local name -> timm name), so checkpoints load both ways.
        foreign_names: names other checkpoints use for this encoding's parameters (local name -> key),
            adopted when loading one (timm's Eva RoPE ViTs: ``rope.freqs``); saving keeps vispe's names.
        examples: option sets that build representative instances (the demo and the contract tests
            build one model per example).
        requires: the geometry its positions must carry (names of :data:`vispe.geometry.GEOMETRY`: 'grid',
            'cameras', 'crop_boxes', 'points', 'bounds', 'boxes'); a host that does not provide it refuses the
            encoding at build (:func:`vispe.encodings.check_encoding_fits`). Default: a 2D grid.
        options: the declared constructor options (name -> :class:`~vispe.encodings.options.Option`),
            model facts included. Constructor arguments named there are checked before ``__init__``
            runs. On a built encoding, setting a declared test-time option checks the value and setting
            any other declared option raises AttributeError; other attributes may be set freely, except a
            public name within a small edit distance of a declared option (a misspelt option).
        table_cache_size: how many tables :meth:`cached_table` keeps across forwards.
        loss_terms: the names of the training regularisers :meth:`training_losses` computes (SeqPE's
            ``contrastive`` and ``distillation``); a classifier turns them on by name with weights
            (``ImageClassifier(encoding_losses=...)``).
        reads_poses: whether its attention hooks take query positions that carry only a pose per token
            (``SceneGeometry.poses``: a 3D detector's object queries at their reference points) against key
            positions that carry what ``requires`` names; the multi-view detector's decoder refuses the others.
    """

    family: ClassVar[str] = 'other'
    paper: ClassVar[str] = ''
    timm_names: ClassVar[dict[str, str]] = {}
    foreign_names: ClassVar[dict[str, str]] = {}
    examples: ClassVar[tuple[dict[str, Any], ...]] = ({},)
    requires: ClassVar[tuple[str, ...]] = ('grid',)
    options: ClassVar[dict[str, Option]] = {}
    declares_options: ClassVar[bool] = False
    table_cache_size: ClassVar[int] = 8
    loss_terms: ClassVar[tuple[str, ...]] = ()
    reads_poses: ClassVar[bool] = False
    _test_time_names: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        refuse_one_position_hooks(cls)
        fit_transform_out(cls)
        init = cls.__dict__.get('__init__')
        if init is not None and not getattr(init, 'checks_options', False):
            cls.__init__ = checking_constructor(init)
        cls.declares_options = any('options' in klass.__dict__ for klass in cls.__mro__
                                   if issubclass(klass, PositionEncoding) and klass is not PositionEncoding)
        cls._test_time_names = tuple(name for name, option in cls.options.items() if option.test_time)
        if 'options' in cls.__dict__:
            parameters = inspect.signature(cls.__init__).parameters
            if not any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
                missing = sorted(set(cls.options) - set(parameters))
                if missing:
                    raise TypeError(f'{cls.__name__} declares options {missing} that its __init__ does not take; '
                                    f'declare only constructor arguments.')

    @checking_constructor
    def __init__(self) -> None:
        super().__init__()

    def __setattr__(self, name: str, value: Any) -> None:
        """nn.Module's, after construction checked against the declared options (see the class docstring)."""
        if self.__dict__.get(BUILT):
            if name in type(self).options:
                value = check_test_time_option(self, name, value)
            elif not name.startswith('_') and not self._has_attribute(name):
                near = near_option_names(self, name)
                if near:
                    raise AttributeError(misspelt_option_message(self, name, near))
        super().__setattr__(name, value)

    def _has_attribute(self, name: str) -> bool:
        """Whether ``name`` is already an attribute, parameter, buffer, submodule or class member."""
        return (name in self.__dict__ or name in self._parameters or name in self._buffers or name in self._modules
                or any(name in klass.__dict__ for klass in type(self).__mro__))

    @classmethod
    def test_time_options(cls) -> dict[str, Option]:
        """The declared options that may be set as attributes after build."""
        return {name: cls.options[name] for name in cls._test_time_names}

    # ---- tables -------------------------------------------------------------------------------------------------

    def option_values(self) -> tuple[tuple[str, Any], ...]:
        """The current value of every declared test-time option: part of every key of :meth:`cached_table`."""
        return tuple((name, getattr(self, name, None)) for name in self._test_time_names)

    def _tables_dtype(self) -> torch.dtype | None:
        """The dtype of this encoding's own floating parameters or buffers (None without any)."""
        for tensor in (*self._parameters.values(), *self._buffers.values()):
            if tensor is not None and tensor.is_floating_point():
                return tensor.dtype
        return None

    @property
    def table_cache(self) -> TableCache:
        """The tables :meth:`cached_table` keeps across forwards (a plain attribute: never saved, rebuilt on a new
        device)."""
        cache = self.__dict__.get('_table_cache')
        if cache is None:
            cache = self.__dict__['_table_cache'] = TableCache(self.table_cache_size)
        return cache

    def cached_table(self, name: str, pos: Positions, build: Callable[[], T], *, pos_k: Positions | None = None,
                     across_forwards: bool = False, key: Hashable = ()) -> T:
        """``build()``, made once and reused while nothing it depends on changes; no encoding writes a key by hand.

        The key holds ``name``, ``key`` (anything else the table depends on), the current value of every declared
        test-time option (:meth:`option_values`) and the dtype of the encoding's own parameters, and:

        * by default (a per-forward table, which may depend on parameters and on the positions' values): the
          positions themselves, ``pos`` (and ``pos_k`` for a table between two token sets); it lives in
          ``pos.memo`` and goes with them;
        * ``across_forwards=True`` (a table that depends only on the token layout, never on parameters or
          coordinates: a grid's rotations, bucket ids, distances): ``pos.layout_key()`` (grid, views, prefix tokens,
          patch size, device); it is kept in :attr:`table_cache` for later forwards. While a model is traced the
          table is built in the traced code.
        """
        table_key = (name, key, self.option_values(), self._tables_dtype())
        if not across_forwards:
            return pos.memo((id(self), None if pos_k is None else id(pos_k), table_key), build)
        if pos.coords is not None:
            raise RuntimeError(f'{type(self).__name__}.cached_table({name!r}, across_forwards=True) keys by the token '
                               f'layout, but these positions have explicit coordinates: build this table per forward.')
        return self.table_cache.get((pos.layout_key(), table_key), build)

    # ---- hooks ------------------------------------------------------------------------------------------------

    @default_method
    def prepare(self, pos: Positions) -> None:
        """Build this forward's tables (called once per forward, before the blocks and outside gradient
        checkpointing). Hooks read them back through :meth:`cached_table`."""

    @default_method
    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        """Mix position into tokens. ``x``: (B, prefix + N, C) -> same shape."""
        return x

    @default_method
    def position_embedding(self, pos: Positions) -> torch.Tensor | None:
        """(B|1, N, C) the embedding of the positioned tokens that :meth:`embed` adds, built without tokens (a
        decoder adds it to its keys, or embeds its queries' reference points with it), or None: this encoding adds
        no embedding."""
        return None

    @default_method
    def rotate(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
               layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Transform queries (B, heads, Nq, d) by their positions and keys (B, heads|1, Nk, d) by theirs."""
        return q, k

    @default_method
    def transform_v(self, v: torch.Tensor, pos_k: Positions, layer_idx: int) -> torch.Tensor:
        """Transform values (B, heads|1, Nk, d) by the keys' positions."""
        return v

    @default_method
    def logits_bias(self, q: torch.Tensor, k: torch.Tensor, pos_q: Positions, pos_k: Positions,
                    layer_idx: int) -> torch.Tensor | None:
        """Additive attention logits, (B|1, heads|1, Nq, Nk), or None."""
        return None

    @default_method
    def transform_out(self, out: torch.Tensor, pos_q: Positions, layer_idx: int,
                      probs: torch.Tensor | None = None, pos_k: Positions | None = None) -> torch.Tensor:
        """Transform the attention output (B, heads, Nq, d) by the queries' positions; ``probs``
        (B, heads, Nq, Nk), after attention dropout, is given when :meth:`needs_probs` is True for this layer,
        with ``pos_k``, the positions of the keys it runs over. A subclass may leave ``probs`` and ``pos_k`` out of
        its signature; it is then called without them."""
        return out

    @default_method
    def between_blocks(self, x: torch.Tensor, pos: Positions, layer_idx: int) -> torch.Tensor:
        """Transform tokens after block ``layer_idx``, (B, prefix + h·w, C)."""
        return x

    def needs_probs(self, layer_idx: int) -> bool:
        """Whether :meth:`transform_out` needs the attention probabilities at this layer."""
        return False

    @default_method
    def flex_bias(self, pos_q: Positions, pos_k: Positions,
                  layer_idx: int) -> tuple[OffsetBias, BlockMask | None] | None:
        """This layer's :meth:`logits_bias` as grid-offset tables for FlexAttention, with its block mask, or None
        to have :meth:`logits_bias` called (the default). Attention asks only when it may use the flex path (see
        :mod:`vispe.attention`); the result must equal :meth:`logits_bias`."""
        return None

    def reaches_cross_attention(self) -> bool:
        """Whether its hooks work between two token sets (a decoder's queries and its memory); an encoding whose
        positions exist only for one token set says False, and decoders refuse it at build."""
        return True

    @default_method
    def training_losses(self, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """The regularisers of :attr:`loss_terms` named in ``names``, unweighted scalars, for the training step whose
        forward just ran (called after it); none by default."""
        return {}

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

    # ---- what the encoding offers and needs ---------------------------------------------------------------------

    @classmethod
    def hooks(cls) -> tuple[str, ...]:
        """The hooks this encoding class overrides."""
        return tuple(name for name in HOOK_NAMES if defines(cls, name))

    @property
    def active_hooks(self) -> frozenset[str]:
        """The hooks this instance uses (a composition uses those of its members)."""
        return frozenset(self.hooks())

    def implements(self, method: str) -> bool:
        """Whether this encoding defines ``method`` beyond the base class's default (a hook, ``position_embedding``,
        or a method of the camera protocol such as ``encode_queries``); hosts check what they will call at build."""
        return defines(type(self), method)

    def required_geometry(self) -> frozenset[str]:
        """The geometry this encoding, and every encoding inside it, requires of its positions."""
        return frozenset(name for module in self.modules() if isinstance(module, PositionEncoding)
                         for name in type(module).requires)


def apply_learned(module: nn.Module, inputs: torch.Tensor) -> torch.Tensor:
    """``module(inputs)`` with the inputs in the dtype of the module's parameters: geometry is computed in float32,
    learned layers run in their own dtype (float64 after ``.double()``; autocast still casts as it does)."""
    weight = next(module.parameters(), None)
    return module(inputs if weight is None else inputs.to(weight.dtype))


def add_to_positioned(x: torch.Tensor, pos: Positions, embedding: torch.Tensor,
                      user: str = 'The encoding') -> torch.Tensor:
    """``x`` (B, prefix + N, C) with ``embedding`` (B|1, N, C) added to its positioned tokens, prefix tokens
    unchanged. ``x`` must be the sequence ``pos`` describes, its batch that of the per-sample geometry of ``pos``
    (:meth:`~vispe.geometry.Positions.check_tokens`, an error naming ``user``)."""
    pos.check_tokens(x.shape[0], x.shape[1], user)
    prefix = pos.num_prefix_tokens
    tokens = x[:, prefix:] + embedding.to(x.dtype)
    return torch.cat([x[:, :prefix], tokens], dim=1) if prefix else tokens


class AbsoluteEncoding(PositionEncoding):
    """Base of the encodings that add an embedding to the positioned tokens: a subclass implements
    :meth:`position_embedding`, and :meth:`embed` adds it (prefix tokens unchanged)."""

    family: ClassVar[str] = 'absolute'

    @default_method
    def position_embedding(self, pos: Positions) -> torch.Tensor:
        raise NotImplementedError(f'{type(self).__name__} derives from AbsoluteEncoding and must implement '
                                  f'position_embedding(pos) -> (B|1, N, C).')

    def embed(self, x: torch.Tensor, pos: Positions) -> torch.Tensor:
        return add_to_positioned(x, pos, self.position_embedding(pos), type(self).__name__)
