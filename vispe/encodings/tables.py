"""Tables an encoding keeps across forwards: a small LRU keyed by what they depend on (see
:meth:`vispe.encodings.PositionEncoding.cached_table`, which builds the keys)."""
from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable, Hashable

import torch

from vispe.geometry.cameras import tracing

__all__ = ['TableCache', 'table_nbytes']


class TableCache:
    """A small LRU of tables that depend only on the token layout (and device), never on parameters.

    Kept as a plain attribute, not a buffer: tables are rebuilt on a new device and never saved. Encodings do not
    key it by hand: :meth:`~vispe.encodings.PositionEncoding.cached_table` does.
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
