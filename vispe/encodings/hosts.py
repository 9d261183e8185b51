"""Where an encoding meets its host: what each host's positions carry, what it calls, and the check at build.

A host is a model, or one encoding slot of a model (a detector's encoder and decoder are two hosts). It declares
the geometry its positions provide (names of :data:`vispe.geometry.GEOMETRY`) and the encoding methods beyond the
attention and token hooks that it calls (the camera protocol's ``encode_queries``, ...). Building a host checks
its encoding with :func:`check_encoding_fits`: an encoding that requires geometry the host does not provide, or
that lacks a method the host calls, is refused at build with an error naming what is missing and which hosts
provide it, rather than failing at the first forward. ``vispe.list_hosts()`` prints them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

from vispe.geometry.positions import GEOMETRY
from vispe.text_table import aligned_table

if TYPE_CHECKING:
    from vispe.encodings.base import PositionEncoding

__all__ = ['EncodingHostError', 'HOSTS', 'Host', 'HostTable', 'check_encoding_fits', 'list_hosts', 'register_host',
           'require_position_embedding']


class EncodingHostError(ValueError):
    """An encoding that its host cannot run: geometry it requires that the host does not provide, or a method the
    host calls that it does not implement."""


@dataclass(frozen=True)
class Host:
    """One place encodings plug into.

    Attributes:
        name: how errors and ``list_hosts`` name it ('VisionTransformer', 'DETR decoder', ...).
        provides: the geometry its positions carry.
        calls: encoding methods beyond the hooks that it calls, each of which the encoding must implement.
        where: the class or config that builds it.
    """

    name: str
    provides: tuple[str, ...]
    calls: tuple[str, ...] = ()
    where: str = ''

    def __post_init__(self) -> None:
        unknown = sorted(set(self.provides) - set(GEOMETRY))
        if unknown:
            raise ValueError(f'Host {self.name} provides unknown geometry {unknown}; known: {", ".join(GEOMETRY)}.')


HOSTS: dict[str, Host] = {}


def register_host(name: str, provides: Iterable[str], calls: Iterable[str] = (), where: str = '') -> Host:
    """Declare a host (once, where its model is defined) and return it."""
    host = Host(name, tuple(provides), tuple(calls), where)
    HOSTS[name] = host
    return host


def _and(names: Iterable[str]) -> str:
    names = list(names)
    return ' and '.join(names) if len(names) < 3 else ', '.join(names[:-1]) + ' and ' + names[-1]


def _implementers(method: str) -> list[str]:
    from vispe.encodings.base import defines
    from vispe.encodings.builder import registered_encodings
    return [name for name, cls in sorted(registered_encodings().items()) if defines(cls, method)]


def check_encoding_fits(encoding: PositionEncoding, host: Host, provides: Iterable[str] | None = None) -> None:
    """Refuse ``encoding`` in ``host`` (whose positions carry ``provides``, by default the host's own) when it
    requires geometry they do not carry or lacks a method the host calls.

    Raises:
        EncodingHostError: naming the encoding, what is missing, and the hosts (or encodings) that have it.
    """
    provided = tuple(host.provides if provides is None else provides)
    name = type(encoding).__name__
    required = encoding.required_geometry()
    missing = sorted(required - set(provided), key=list(GEOMETRY).index)
    if missing:
        fitting = [other.name for other in HOSTS.values() if required <= set(other.provides)]
        where = (f'Hosts that provide them: {", ".join(fitting)}.' if fitting else
                 'No registered host provides all of them; write a host that gives its positions '
                 f'{_and(missing)} (docs/architecture.md, "One contract").')
        raise EncodingHostError(f'{name} requires {_and(missing)} in its positions, but {host.name} provides '
                                f'{_and(provided) or "nothing"}. {where} (vispe.list_hosts() lists them.)')
    for method in host.calls:
        if not encoding.implements(method):
            others = _implementers(method)
            raise EncodingHostError(f'{host.name} calls {method} of its encoding, which {name} does not implement. '
                                    f'Encodings that do: {", ".join(others) or "none registered"}.')


def require_position_embedding(encoding: PositionEncoding, host: Host, why: str) -> None:
    """Refuse an encoding whose ``embed`` hook (its own, or a member's in a stack) has no ``position_embedding``,
    where ``host`` reads the embedding without tokens (``why``: what it does with it)."""
    members = list(getattr(encoding, 'encodings', [encoding]))
    for member in members:
        if 'embed' in member.active_hooks and not member.implements('position_embedding'):
            others = _implementers('position_embedding')
            raise EncodingHostError(f'{host.name} reads the position embedding of its encoding without tokens ({why}); '
                                    f'{type(member).__name__} embeds tokens but does not implement '
                                    f'position_embedding(pos). Encodings that do: {", ".join(others)}.')


class HostTable(list):
    """A list of :class:`Host` that prints as a table."""

    HEADER = ('host', 'provides', 'calls', 'where')

    def __str__(self) -> str:
        return aligned_table([self.HEADER, *((host.name, ', '.join(host.provides), ', '.join(host.calls) or '-',
                                              host.where) for host in self)])

    def __repr__(self) -> str:
        return str(self)


def list_hosts() -> HostTable:
    """Every registered host: what its positions provide, what it calls beyond the hooks, where it is built."""
    return HostTable(HOSTS.values())
