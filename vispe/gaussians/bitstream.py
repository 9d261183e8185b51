"""The ``.vgs`` container of the Gaussian codecs: no pickles, every byte accounted for.

Layout: a magic (``b'VGS1'``, or ``b'VGS2'`` for a signed file), a little-endian uint32 header length, the header
as canonical UTF-8 JSON (sorted keys, as :func:`json.dumps` writes it: codec, counts, bounds, steps, ranges, the
names and lengths of the binary sections, the CRC-32 of the rest of the header and the payload, and in a signed
file the signature), then the sections back to back.

What it guarantees. The CRC-32 detects *damage*: every single-bit flip, every burst of up to 32 bits and every
cut or appended byte raises :class:`BitstreamError` naming the file, never a scene (with the canonical-header
check, a flip that leaves the JSON valid is caught too); other random damage escapes it with odds of 2⁻³².
A CRC is no protection against *tampering*: anyone can edit a file and recompute it, and the edited file decodes
to another scene. For tamper-evidence, sign the file with a key (``pack(..., key=)``, ``--key-file``): a signed
file carries an HMAC-SHA256 of its magic, header and payload under the key, and reading it with the key
(``unpack(..., key=)``) raises :class:`SignatureError` when anything was changed, when the key differs, or when
the file is unsigned (a signature can be stripped). A signed file read without a key decodes with an
:class:`UnverifiedSignatureWarning`: nothing but the CRC was checked. Unsigned files are written as before
(``VGS1``) and every ``VGS1`` file still decodes.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
import warnings
import zlib
from pathlib import Path
from typing import Any

from vispe.files import write_atomically

__all__ = ['BitstreamError', 'MAGIC', 'SIGNED_MAGIC', 'SignatureError', 'UnverifiedSignatureWarning', 'pack',
           'key_option', 'read_bitstream', 'read_key', 'unpack', 'write_bitstream']

MAGIC = b'VGS1'
SIGNED_MAGIC = b'VGS2'


class BitstreamError(ValueError):
    """A ``.vgs`` file that is not one, is cut short, or fails its checksum."""


class SignatureError(BitstreamError):
    """A ``.vgs`` file read with a key whose signature is missing or does not match."""


class UnverifiedSignatureWarning(UserWarning):
    """A signed ``.vgs`` file read without its key: its signature was not checked."""


def _check_key(key: bytes | None) -> None:
    if key is None:
        return
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError(f'key of type {type(key).__name__} is not bytes; give the key\'s bytes, e.g. '
                        f'Path("scene.key").read_bytes() (vispe.gaussians.bitstream.read_key).')
    if not key:
        raise ValueError('key is empty; give at least one byte (32 random bytes recommended: '
                         'head -c 32 /dev/urandom > scene.key).')


def _signature(key: bytes, header: dict[str, Any], payload: bytes) -> str:
    text = json.dumps(header, sort_keys=True).encode()
    return hmac.new(bytes(key), SIGNED_MAGIC + text + payload, hashlib.sha256).hexdigest()


def pack(header: dict[str, Any], sections: dict[str, bytes], key: bytes | None = None) -> bytes:
    """The container bytes of ``header`` (JSON-serialisable) and named binary ``sections``; signed with
    HMAC-SHA256 under ``key`` (bytes) when given (see the module docstring)."""
    _check_key(key)
    payload = b''.join(sections.values())
    full = dict(header, sections=[[name, len(data)] for name, data in sections.items()])
    if key is not None:
        full['signature'] = _signature(key, full, payload)
    full['crc32'] = zlib.crc32(json.dumps(full, sort_keys=True).encode() + payload)
    text = json.dumps(full, sort_keys=True).encode()
    return (MAGIC if key is None else SIGNED_MAGIC) + struct.pack('<I', len(text)) + text + payload


def _not_a_bitstream(data: bytes, source: str) -> BitstreamError:
    kind = ' (it starts like a .ply: compress it first)' if data[:3] == b'ply' else ''
    return BitstreamError(f'{source} is not a vispe Gaussian bitstream (no VGS1/VGS2 magic, found {data[:4]!r})'
                          f'{kind}; write one with tools/gaussians/compress.py.')


def unpack(data: bytes, source: str = 'bitstream',
           key: bytes | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Header and sections of container bytes; :class:`BitstreamError` (naming ``source``) when they are not a
    complete, undamaged ``.vgs``; with ``key``, :class:`SignatureError` unless the file is signed under it."""
    _check_key(key)
    if data[:4] not in (MAGIC, SIGNED_MAGIC):
        if len(data) < 4 and (MAGIC.startswith(data) or SIGNED_MAGIC.startswith(data)):
            raise BitstreamError(f'{source} is cut short: {len(data)} bytes, not even its magic.')
        raise _not_a_bitstream(data, source)
    if len(data) < 8:
        raise BitstreamError(f'{source} is cut short: {len(data)} bytes, not even a header length.')
    (length,) = struct.unpack('<I', data[4:8])
    signed = data[:4] == SIGNED_MAGIC
    try:
        header = json.loads(data[8:8 + length].decode())
        canonical = json.dumps(header, sort_keys=True).encode() == data[8:8 + length]
        crc = int(header.pop('crc32'))
        checked = json.dumps(header, sort_keys=True).encode()
        signature = str(header.pop('signature')) if signed else None
        names = [(str(name), int(size)) for name, size in header['sections']]
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as error:
        raise BitstreamError(f'{source} has a damaged header ({type(error).__name__}); the file is corrupt or cut '
                             f'short.') from None
    if not canonical or 'signature' in header:
        raise BitstreamError(f'{source} has a damaged header (not in the form vispe writes it); the file is corrupt.')
    payload = data[8 + length:]
    if len(payload) != sum(size for _, size in names):
        raise BitstreamError(f'{source} holds {len(payload)} payload bytes, its header lists '
                             f'{sum(size for _, size in names)}: the file is cut short or has bytes appended.')
    if zlib.crc32(checked + payload) != crc:
        raise BitstreamError(f'{source} fails its CRC-32 check: the header or payload was altered (corrupt file).')
    _verify(header, payload, signature, key, source)
    del header['sections']
    sections, start = {}, 0
    for name, size in names:
        sections[name] = payload[start:start + size]
        start += size
    return header, sections


def _verify(header: dict[str, Any], payload: bytes, signature: str | None, key: bytes | None, source: str) -> None:
    """Check the signature of a signed file under ``key`` (see :func:`unpack`)."""
    if key is None:
        if signature is not None:
            warnings.warn(f'{source} is signed but was read without a key: its signature was not verified, only '
                          f'its CRC-32 (which does not detect tampering); pass key= (--key-file) to verify it.',
                          UnverifiedSignatureWarning, stacklevel=4)
        return
    if signature is None:
        raise SignatureError(f'{source} is not signed, but a key was given: its origin cannot be verified (a '
                             f'signature can be stripped); ask for the file signed (compress.py --key-file), or read '
                             f'it without a key if you trust where it came from.')
    if not hmac.compare_digest(signature, _signature(key, header, payload)):
        raise SignatureError(f'{source} fails its HMAC-SHA256 signature check: the file was changed after it was '
                             f'signed, or it was signed under another key; use the file and key its writer gave you.')


def write_bitstream(path: str | os.PathLike, data: bytes) -> Path:
    """Write container bytes atomically (temporary file beside ``path``, then rename)."""
    return write_atomically(Path(path), lambda temporary: temporary.write_bytes(data))


def read_bitstream(path: str | os.PathLike, key: bytes | None = None) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Header and sections of a ``.vgs`` file (FileNotFoundError, or :class:`BitstreamError` naming it); ``key``
    as :func:`unpack`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'No Gaussian bitstream at {path}.')
    return unpack(path.read_bytes(), str(path), key)


def read_key(path: str | os.PathLike) -> bytes:
    """The signing key stored in the file at ``path``: its bytes as they are (a trailing newline is part of the
    key); FileNotFoundError, or ValueError for an empty file."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'No key file at {path}; write one, e.g. head -c 32 /dev/urandom > {path}.')
    key = path.read_bytes()
    if not key:
        raise ValueError(f'{path}: the key file is empty; write a key into it, e.g. head -c 32 /dev/urandom > {path}.')
    return key


def key_option(path: Path | None, option: str = '--key-file') -> bytes | None:
    """The key of a tool's ``--key-file`` option (None when not given); a missing or empty file raises
    :class:`~vispe.engine.arguments.InvalidArgument`."""
    from vispe.engine.arguments import InvalidArgument

    if path is None:
        return None
    try:
        return read_key(path)
    except (FileNotFoundError, ValueError):
        problem = 'is empty' if path.is_file() else 'is not a file'
        raise InvalidArgument(option, path, problem, f'write the key into it, e.g. head -c 32 /dev/urandom > '
                              f'{path}, and give the same file to compress.py and decompress.py') from None
