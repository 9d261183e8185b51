# Tiny ViT (patch 4) on Fashion-MNIST at 28 px with seqpe.
# SeqPE's ImageNet recipe at this width: per-layer multipliers of queries and keys (attn_mul), an encoder as wide as
# the ViT (64), the training shift, and its two regularisers at the paper's weights.
_base_ = ['../_base_/models/vit-t4_fmnist.py', '../_base_/datasets/fmnist-28.py',
          '../_base_/schedules/fmnist-8e.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='SeqPE')), encoding_losses=dict(contrastive=0.1, distillation=0.1))
