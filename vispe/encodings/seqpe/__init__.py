"""SeqPE (Li et al., 2025): positions as digit sequences, a sequential encoder, and its two regularisers."""
from vispe.encodings.seqpe.encoder import SequentialPositionEncoder
from vispe.encodings.seqpe.encoding import SeqPE
from vispe.encodings.seqpe.losses import contrastive_loss, distillation_loss
from vispe.encodings.seqpe.tokens import digit_tokens

__all__ = ['SeqPE', 'SequentialPositionEncoder', 'contrastive_loss', 'digit_tokens', 'distillation_loss']
