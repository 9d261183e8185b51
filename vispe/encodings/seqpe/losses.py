"""SeqPE's two regularisers of the position embedding space (Li et al., 2025, §3.3; ghrua/seqpe
``pe_criterion.py``)."""
from __future__ import annotations

import torch
import torch.nn.functional as F


def contrastive_loss(pivots: torch.Tensor, candidates: torch.Tensor, nearest: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over each pivot's candidates of the raw dot products of their embeddings, the target being the
    nearest candidate: pivots (P, C), candidates (P, K, C), nearest (P,) -> scalar (no normalisation or temperature,
    as the reference)."""
    logits = torch.einsum('pc,pkc->pk', pivots.float(), candidates.float())
    return F.cross_entropy(logits, nearest)


def distillation_loss(students: torch.Tensor, teachers: torch.Tensor, heads: int) -> torch.Tensor:
    """Relational distillation of shifted windows onto the training grid: per window and head (the embedding split
    into ``heads`` contiguous chunks), the row-wise log-softmax of the n×n Gram matrix of the students and of their
    teachers; the sum of the two KL divergences, each averaged over every element (the reference's
    ``kl_div(reduction='mean')``). The teachers get no gradient. students, teachers (W, n, C) -> scalar."""
    def log_similarities(embedding: torch.Tensor) -> torch.Tensor:
        chunks = embedding.float().unflatten(-1, (heads, -1)).transpose(1, 2)          # (W, heads, n, C / heads)
        return F.log_softmax(chunks @ chunks.transpose(-1, -2), dim=-1)

    student, teacher = log_similarities(students), log_similarities(teachers).detach()
    return (teacher.exp() * (teacher - student)).mean() + (student.exp() * (student - teacher)).mean()
