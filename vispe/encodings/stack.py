"""Several encodings applied together as one (learned APE beside iRPE, RoPE-Mixed + APE, ...)."""
from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Sequence

import torch
from torch import nn

from vispe.encodings.base import PositionEncoding
from vispe.encodings.options import Option
from vispe.geometry import Positions

if TYPE_CHECKING:
    from torch.nn.attention.flex_attention import BlockMask

    from vispe.flex_bias import OffsetBias

__all__ = ['EncodingStack']


class EncodingStack(PositionEncoding):
    """Several encodings applied together, in order (e.g. learned APE beside iRPE, RoPE-Mixed + APE).

    Token hooks and rotations apply in list order; logit biases and position embeddings add up. It requires what
    its members require and implements what any member implements.
    """

    family: ClassVar[str] = 'composite'
    requires: ClassVar[tuple[str, ...]] = ()
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

    def position_embedding(self, pos: Positions) -> torch.Tensor | None:
        total = None
        for encoding in self.encodings:
            embedding = encoding.position_embedding(pos)
            if embedding is not None:
                total = embedding if total is None else total + embedding
        return total

    def implements(self, method: str) -> bool:
        return any(encoding.implements(method) for encoding in self.encodings)

    @property
    def loss_terms(self) -> tuple[str, ...]:  # type: ignore[override]
        """The members' regularisers, in member order."""
        return tuple(dict.fromkeys(name for encoding in self.encodings for name in encoding.loss_terms))

    def training_losses(self, names: tuple[str, ...]) -> dict[str, torch.Tensor]:
        """Each member's regularisers among ``names``."""
        losses: dict[str, torch.Tensor] = {}
        for encoding in self.encodings:
            wanted = tuple(name for name in names if name in encoding.loss_terms)
            if wanted:
                losses.update(encoding.training_losses(wanted))
        return losses

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
