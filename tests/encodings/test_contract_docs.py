"""docs/architecture.md describes the contract that is in the code: its table names, per method, the registered
encodings that implement it, and its hosts table is vispe.list_hosts()."""
from __future__ import annotations

import re

import pytest

import vispe
from vispe.encodings import AbsoluteEncoding, CameraEncoding, PositionEncoding
from vispe.encodings.base import HOOK_NAMES
from vispe.encodings.builder import registered_encodings

BASES = (PositionEncoding, AbsoluteEncoding, CameraEncoding)


def table(repo_root, marker: str) -> list[list[str]]:
    text = (repo_root / 'docs' / 'architecture.md').read_text()
    block = text.split(f'<!-- {marker}:', 1)[1].split(f'<!-- /{marker} -->', 1)[0]
    rows = [line.strip() for line in block.splitlines() if line.strip().startswith('|')][2:]
    return [[cell.strip() for cell in re.split(r'(?<!\\)\|', row)[1:-1]] for row in rows]


def implementers(method: str) -> set[str]:
    """Registered encodings that use a hook, or that write ``method`` themselves (not inherited from vispe's bases)."""
    found = set()
    for name, cls in registered_encodings().items():
        if not cls.__module__.startswith('vispe.'):
            continue
        if method in HOOK_NAMES:
            if method in cls.hooks():
                found.add(name)
            continue
        owner = next((klass for klass in cls.__mro__ if method in klass.__dict__), None)
        if owner is not None and owner not in BASES:
            found.add(name)
    return found


def test_the_contract_table_names_who_implements_each_method(repo_root) -> None:
    names = set(registered_encodings())
    rows = table(repo_root, 'contract-table')
    assert len(rows) >= 13
    for method_cell, _, _, who in rows:
        method = re.findall(r'`(\w+)\(', method_cell)[0]
        listed = {word for word in re.findall(r'\w+', who) if word in names}
        assert listed == implementers(method), method


def test_the_hosts_table_is_list_hosts(repo_root) -> None:
    rows = {name: (provides, calls) for name, provides, calls in table(repo_root, 'hosts-table')}
    hosts = [host for host in vispe.encodings.list_hosts() if host.where.startswith('vispe.')]
    assert set(rows) == {host.name for host in hosts}
    for host in hosts:
        provides, calls = rows[host.name]
        assert re.findall(r'[a-z_]+', provides.split('(')[0]) == list(host.provides), host.name
        assert (calls == '-') == (not host.calls) and all(method in calls for method in host.calls), host.name


@pytest.mark.parametrize('host', ['VisionTransformer', 'DETR decoder', 'V-DETR decoder', 'PETRDetector'])
def test_every_registered_encoding_builds_in_a_host_or_is_refused_naming_the_missing_geometry(host) -> None:
    """A host refuses exactly the encodings whose requirements it lacks, naming them."""
    from vispe.encodings import EncodingHostError, check_encoding_fits
    provider = vispe.encodings.hosts.HOSTS[host]
    for name, cls in registered_encodings().items():
        encoding = vispe.build_encoding(dict(type=name, **cls.examples[0]), embed_dim=32, num_heads=4, head_dim=8,
                                        depth=2, grid_size=(4, 4), patch_size=(8, 8), num_prefix_tokens=1,
                                        in_channels=32)
        missing = set(cls.requires) - set(provider.provides)
        calls = [method for method in provider.calls if not encoding.implements(method)]
        if missing or calls:
            with pytest.raises(EncodingHostError, match=f'{name} requires|{host} calls'):
                check_encoding_fits(encoding, provider)
        else:
            check_encoding_fits(encoding, provider)
