"""What a .vgs file guarantees: damage (seeded single-bit flips anywhere in the file, cuts at random lengths,
appended bytes) is always a BitstreamError naming the file, never a scene; tampering with the CRC recomputed is
caught only by a signed file read with its key (HMAC-SHA256), which also refuses another key or a stripped
signature; unsigned files are written and read as before."""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from tests.helpers import load_tool
from vispe.gaussians import read_gaussians_ply, write_gaussians_ply
from vispe.gaussians.bitstream import (MAGIC, SIGNED_MAGIC, BitstreamError, SignatureError, UnverifiedSignatureWarning,
                                       pack, read_bitstream, unpack)
from vispe.gaussians.codec import CodecConfig, compress, decompress

from .test_codec import varied_cloud

KEY = bytes(range(32))
FLIPS = 200
CUTS = 60


@pytest.fixture(scope='module')
def scene_bytes() -> dict[str, bytes]:
    """A tiny scene's factorized bitstream, unsigned and signed."""
    cloud = varied_cloud(count=40)
    config = CodecConfig(codec='factorized')
    return dict(unsigned=compress(cloud, config), signed=compress(cloud, config, key=KEY))


def assert_refused(data: bytes, path: Path, key: bytes | None = None) -> None:
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UnverifiedSignatureWarning)
        with pytest.raises(BitstreamError, match=str(path)):
            decompress(path.read_bytes(), str(path), key)


@pytest.mark.parametrize('kind,key', [('unsigned', None), ('signed', None), ('signed', KEY)],
                         ids=['unsigned', 'signed-read-without-key', 'signed-read-with-key'])
def test_every_single_bit_flip_is_a_named_error(scene_bytes: dict[str, bytes], kind: str, key: bytes | None,
                                                tmp_path: Path) -> None:
    data = scene_bytes[kind]
    rng = np.random.default_rng(39)
    for bit in rng.choice(8 * len(data), size=FLIPS, replace=False):
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert_refused(bytes(flipped), tmp_path / f'flip_{bit}.vgs', key)


def test_every_flip_of_the_header_is_a_named_error(scene_bytes: dict[str, bytes], tmp_path: Path) -> None:
    data = scene_bytes['unsigned']
    header_end = 8 + int.from_bytes(data[4:8], 'little')
    for bit in range(0, 8 * header_end, 7):                      # every 7th bit of magic, length and JSON
        flipped = bytearray(data)
        flipped[bit // 8] ^= 1 << (bit % 8)
        assert_refused(bytes(flipped), tmp_path / 'header.vgs')


@pytest.mark.parametrize('kind', ['unsigned', 'signed'])
def test_every_cut_and_every_appended_byte_is_a_named_error(scene_bytes: dict[str, bytes], kind: str,
                                                            tmp_path: Path) -> None:
    data = scene_bytes[kind]
    rng = np.random.default_rng(7)
    for length in [0, 1, 3, 4, 7, 8, *rng.integers(9, len(data), size=CUTS)]:
        assert_refused(data[:length], tmp_path / f'cut_{length}.vgs')
    assert_refused(data + b'\0', tmp_path / 'appended.vgs')


def test_a_crc_does_not_detect_tampering_but_a_signature_does(scene_bytes: dict[str, bytes]) -> None:
    header, sections = unpack(scene_bytes['unsigned'])
    moved = pack(dict(header, low=[value - 1 for value in header['low']], high=[value - 1 for value in
                                                                                  header['high']]), sections)
    original, edited = decompress(scene_bytes['unsigned']), decompress(moved)         # the documented limit
    assert np.allclose(edited.xyz, original.xyz - 1, atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter('ignore', UnverifiedSignatureWarning)
        signed_header, signed_sections = unpack(scene_bytes['signed'])
    assert decompress(scene_bytes['signed'], 'scene.vgs', KEY).as_rows().tobytes() == original.as_rows().tobytes()
    resigned = pack(dict(signed_header, low=[value - 1 for value in signed_header['low']]), signed_sections,
                    key=b'another key')
    with pytest.raises(SignatureError, match='scene.vgs fails its HMAC-SHA256 signature check: the file was changed '
                                             'after it was signed, or it was signed under another key'):
        decompress(resigned, 'scene.vgs', KEY)
    with pytest.raises(SignatureError, match='scene.vgs fails its HMAC-SHA256 signature check'):
        decompress(scene_bytes['signed'], 'scene.vgs', b'wrong key')
    with pytest.raises(SignatureError, match='scene.vgs is not signed, but a key was given.*signature can be '
                                             'stripped'):
        decompress(moved, 'scene.vgs', KEY)


def test_signed_files_read_without_a_key_warn_and_unsigned_files_are_unchanged(scene_bytes: dict[str, bytes]) -> None:
    assert scene_bytes['unsigned'][:4] == MAGIC and scene_bytes['signed'][:4] == SIGNED_MAGIC
    with pytest.warns(UnverifiedSignatureWarning, match='scene.vgs is signed but was read without a key: its '
                                                        r'signature was not verified.*pass key= \(--key-file\)'):
        unsigned_view = decompress(scene_bytes['signed'], 'scene.vgs')
    assert unsigned_view.as_rows().tobytes() == decompress(scene_bytes['unsigned']).as_rows().tobytes()
    header, sections = unpack(scene_bytes['unsigned'])
    assert 'signature' not in header and pack(header, sections) == scene_bytes['unsigned']
    with pytest.raises(ValueError, match='key is empty'):
        compress(varied_cloud(count=10), CodecConfig(codec='factorized'), key=b'')
    with pytest.raises(TypeError, match='key of type str is not bytes'):
        unpack(scene_bytes['signed'], 'scene.vgs', 'secret')


def test_the_tools_sign_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    compress_tool, decompress_tool = load_tool('gaussians/compress'), load_tool('gaussians/decompress')
    ply = write_gaussians_ply(tmp_path / 'scene.ply', varied_cloud(count=40))
    (tmp_path / 'scene.key').write_bytes(KEY)
    (tmp_path / 'other.key').write_bytes(b'other')
    vgs = tmp_path / 'scene.vgs'
    assert compress_tool.main([str(ply), str(vgs), '--codec', 'factorized', '--key-file',
                               str(tmp_path / 'scene.key')]) == 0
    assert 'signed (HMAC-SHA256)' in capsys.readouterr().out
    assert read_bitstream(vgs, KEY)[0]['codec'] == 'factorized'
    assert decompress_tool.main([str(vgs), str(tmp_path / 'a.ply'), '--key-file', str(tmp_path / 'scene.key')]) == 0
    with pytest.warns(UnverifiedSignatureWarning, match='scene.vgs is signed but was read without a key'):
        assert decompress_tool.main([str(vgs), str(tmp_path / 'b.ply')]) == 0
    assert read_gaussians_ply(tmp_path / 'a.ply').as_rows().tobytes() == \
        read_gaussians_ply(tmp_path / 'b.ply').as_rows().tobytes()
    with pytest.raises(SignatureError, match='scene.vgs fails its HMAC-SHA256 signature check'):
        decompress_tool.main([str(vgs), str(tmp_path / 'c.ply'), '--key-file', str(tmp_path / 'other.key')])
    assert not (tmp_path / 'c.ply').exists()
