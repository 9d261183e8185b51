"""The ``.vgs`` container of the Gaussian codecs: no pickles, every byte accounted for.

Layout: ``b'VGS1'``, a little-endian uint32 header length, the header as UTF-8 JSON (codec, counts, bounds,
steps, ranges, the names and lengths of the binary sections, the CRC-32 of the rest of the header and the
payload), then the sections back to back. A file cut short, altered or of another kind raises
:class:`BitstreamError` naming the file; a decoder never returns a scene from bytes that fail the check.
"""
from __future__ import annotations

import json
import os
import struct
import zlib
from pathlib import Path
from typing import Any

from vispe.files import write_atomically

__all__ = ['BitstreamError', 'MAGIC', 'pack', 'read_bitstream', 'unpack', 'write_bitstream']

MAGIC = b'VGS1'


class BitstreamError(ValueError):
    """A ``.vgs`` file that is not one, is cut short, or fails its checksum."""


def pack(header: dict[str, Any], sections: dict[str, bytes]) -> bytes:
    """The container bytes of ``header`` (JSON-serialisable) and named binary ``sections``."""
    payload = b''.join(sections.values())
    full = dict(header, sections=[[name, len(data)] for name, data in sections.items()])
    full['crc32'] = zlib.crc32(json.dumps(full, sort_keys=True).encode() + payload)
    text = json.dumps(full, sort_keys=True).encode()
    return MAGIC + struct.pack('<I', len(text)) + text + payload


def unpack(data: bytes, source: str = 'bitstream') -> tuple[dict[str, Any], dict[str, bytes]]:
    """Header and sections of container bytes; :class:`BitstreamError` (naming ``source``) when they are not a
    complete, unaltered ``.vgs``."""
    if data[:4] != MAGIC:
        raise BitstreamError(f'{source} is not a vispe Gaussian bitstream (no VGS1 magic); write one with '
                             f'tools/gaussians/compress.py.')
    if len(data) < 8:
        raise BitstreamError(f'{source} is cut short: {len(data)} bytes, not even a header length.')
    (length,) = struct.unpack('<I', data[4:8])
    try:
        header = json.loads(data[8:8 + length].decode())
        crc = int(header.pop('crc32'))
        checked = json.dumps(header, sort_keys=True).encode()
        names = [(str(name), int(size)) for name, size in header.pop('sections')]
    except (UnicodeDecodeError, json.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as error:
        raise BitstreamError(f'{source} has a damaged header ({type(error).__name__}); the file is corrupt or cut '
                             f'short.') from None
    payload = data[8 + length:]
    if len(payload) != sum(size for _, size in names):
        raise BitstreamError(f'{source} holds {len(payload)} payload bytes, its header lists '
                             f'{sum(size for _, size in names)}: the file is cut short or has bytes appended.')
    if zlib.crc32(checked + payload) != crc:
        raise BitstreamError(f'{source} fails its CRC-32 check: the header or payload was altered (corrupt file).')
    sections, start = {}, 0
    for name, size in names:
        sections[name] = payload[start:start + size]
        start += size
    return header, sections


def write_bitstream(path: str | os.PathLike, data: bytes) -> Path:
    """Write container bytes atomically (temporary file beside ``path``, then rename)."""
    return write_atomically(Path(path), lambda temporary: temporary.write_bytes(data))


def read_bitstream(path: str | os.PathLike) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Header and sections of a ``.vgs`` file (FileNotFoundError, or :class:`BitstreamError` naming it)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f'No Gaussian bitstream at {path}.')
    return unpack(path.read_bytes(), str(path))
