"""Building encodings from configs, and the table of registered encodings."""
from __future__ import annotations

import copy
import inspect
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import MODEL_FACTS, OptionTypeError
from vispe.encodings.stack import EncodingStack
from vispe.registry import ENCODINGS, UnknownTypeError, unknown_type_message
from vispe.text_table import aligned_table

EncodingConfig = PositionEncoding | Mapping[str, Any] | str | Sequence[Any]

# What a model tells the encodings it builds (constructor arguments filled in when not configured).
MODEL_CONTEXT = tuple(MODEL_FACTS)


def registered_encodings() -> dict[str, type[PositionEncoding]]:
    """Every registered encoding class by name (plugins loaded first)."""
    ENCODINGS.import_from_location()
    return {name: cls for name, cls in ENCODINGS.module_dict.items()
            if isinstance(cls, type) and issubclass(cls, PositionEncoding)}


def _accepted_context(cls: type, context: Mapping[str, Any]) -> dict[str, Any]:
    """The model facts (embed_dim, num_heads, grid_size, ...) that ``cls.__init__`` takes."""
    parameters = inspect.signature(cls.__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return dict(context)
    return {key: value for key, value in context.items() if key in parameters}


def build_encoding(cfg: EncodingConfig, **context: Any) -> PositionEncoding:
    """Build an encoding from a config dict, a type name, an instance, or a list of those.

    Args:
        cfg: ``dict(type='RoPEMixed', ...)``, ``'SinCos2D'``, a :class:`PositionEncoding` instance
            (returned as is), or a list of those (composed in order into an :class:`EncodingStack`).
        context: facts about the model the encoding goes into (``embed_dim``, ``num_heads``,
            ``head_dim``, ``depth``, ``grid_size``, ``patch_size``, ``num_prefix_tokens``). Each is
            passed to the encoding's constructor if it takes it and the config does not set it.

    Raises:
        UnknownTypeError: the type is not a registered encoding (the message names the closest).
        TypeError: the config is not an encoding config, an option is unknown (the message names the
            closest) or of the wrong type, or the constructor rejects an argument.
        ValueError: an option is out of its declared range, of the wrong length or not a choice.
    """
    if isinstance(cfg, PositionEncoding):
        return cfg
    if isinstance(cfg, str):
        cfg = {'type': cfg}
    if isinstance(cfg, Sequence) and not isinstance(cfg, str):
        members = [build_encoding(member, **context) for member in cfg]
        if not members:
            raise ValueError('An empty list of encodings: pass dict(type="NoPE") for no position encoding.')
        return members[0] if len(members) == 1 else EncodingStack(members)
    if not isinstance(cfg, Mapping) or 'type' not in cfg:
        raise TypeError(f'An encoding config is a dict with a "type" key, a type name, an encoding instance or a '
                        f'list of those; got {cfg!r}.')
    args = dict(copy.deepcopy(cfg))
    type_name = args.pop('type')
    args.pop('_scope_', None)
    if isinstance(type_name, type):
        cls = type_name
    elif not isinstance(type_name, str):
        raise TypeError(f'An encoding config\'s "type" is a registered name such as "RoPEAxial" or a '
                        f'PositionEncoding subclass; got {type_name!r} ({type(type_name).__name__}). List the names '
                        f'with vispe.list_encodings().')
    else:
        registered = registered_encodings()
        cls = ENCODINGS.get(type_name)
        if type_name in ENCODINGS.module_dict and not (isinstance(cls, type) and issubclass(cls, PositionEncoding)):
            found = f'{getattr(cls, "__module__", "?")}.{getattr(cls, "__qualname__", repr(cls))}'
            raise TypeError(f'{type_name!r} is registered but is not an encoding: it is {found}, not a subclass of '
                            f'vispe.PositionEncoding. An encoding derives from it (the README\'s "Write your own '
                            f'encoding" shows how).')
        if cls is None or not (isinstance(cls, type) and issubclass(cls, PositionEncoding)):
            raise UnknownTypeError(unknown_type_message('encoding', type_name, list(registered)))
    if not issubclass(cls, PositionEncoding):
        raise TypeError(f'{cls.__name__} is not a vispe PositionEncoding: an encoding class subclasses '
                        f'vispe.PositionEncoding (and registers with @vispe.ENCODINGS.register_module() to be named '
                        f'in configs).')
    kwargs = {**_accepted_context(cls, context), **args}
    try:
        return cls(**kwargs)
    except OptionTypeError:
        raise
    except TypeError as exc:
        accepted = [name for name in inspect.signature(cls.__init__).parameters if name != 'self']
        raise TypeError(f'Cannot build {cls.__name__} from {dict(cfg)}: {exc}. It accepts: {", ".join(accepted)}.') \
            from None


@dataclass(frozen=True)
class EncodingInfo:
    """One row of :func:`list_encodings`."""

    name: str
    family: str
    hooks: tuple[str, ...]
    options: tuple[str, ...]
    paper: str
    requires: tuple[str, ...] = ()


class EncodingTable(list):
    """A list of :class:`EncodingInfo` that prints as a table."""

    HEADER = ('name', 'family', 'hooks', 'requires', 'options', 'paper')

    def rows(self) -> list[tuple[str, ...]]:
        return [(info.name, info.family, ', '.join(info.hooks) or '-', ', '.join(info.requires) or '-',
                 ', '.join(info.options) or '-', info.paper) for info in self]

    def __str__(self) -> str:
        return aligned_table([self.HEADER, *self.rows()])

    def __repr__(self) -> str:
        return str(self)

    def markdown(self) -> str:
        lines = ['| ' + ' | '.join(self.HEADER) + ' |', '|' + '---|' * len(self.HEADER)]
        lines += [f'| `{name}` | ' + ' | '.join(cells) + ' |' for name, *cells in self.rows()]
        return '\n'.join(lines)


def encoding_options(cls: type[PositionEncoding]) -> tuple[str, ...]:
    """The constructor options a config sets (``name=default``, marked ``(test-time)`` when declared so),
    without the model's facts."""
    options = []
    for name, parameter in inspect.signature(cls.__init__).parameters.items():
        if name == 'self' or name in MODEL_CONTEXT or parameter.kind in (parameter.VAR_POSITIONAL,
                                                                         parameter.VAR_KEYWORD):
            continue
        text = name if parameter.default is parameter.empty else f'{name}={parameter.default!r}'
        options.append(f'{text} (test-time)' if name in cls.test_time_options() else text)
    return tuple(options)


def list_encodings(image_only: bool = False) -> EncodingTable:
    """Every registered encoding (built-in and plugins): name, family, hooks used, the geometry its positions
    require, options, paper. ``image_only``: only those that require nothing beyond a 2D grid (every ViT and DETR
    encoder takes them; the camera encodings need the cameras of a multi-view detector)."""
    return EncodingTable(
        EncodingInfo(name, cls.family, cls.hooks(), encoding_options(cls), cls.paper, tuple(cls.requires))
        for name, cls in sorted(registered_encodings().items()) if not (image_only and set(cls.requires) - {'grid'}))
