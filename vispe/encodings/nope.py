"""NoPE: no position information at all (the lower bound every encoding is compared with)."""
from __future__ import annotations

from typing import ClassVar

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option
from vispe.registry import ENCODINGS


@ENCODINGS.register_module()
class NoPE(PositionEncoding):
    """No positional encoding: attention sees a bag of patches (plus prefix tokens).

    Shapes: uses no hook; the model runs unchanged at any grid.
    """

    family: ClassVar[str] = 'none'
    requires: ClassVar[tuple[str, ...]] = ()
    paper: ClassVar[str] = 'baseline (no position)'
    options: ClassVar[dict[str, Option]] = {}
