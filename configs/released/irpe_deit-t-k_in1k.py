# DeiT-Ti with iRPE on k (contextual product, 50 shared buckets): microsoft/Cream's released
# deit_tiny_patch16_224_ctx_product_50_shared_k.pth, evaluation only, after `vispe convert irpe-deit
# deit_tiny_patch16_224_ctx_product_50_shared_k.pth OUT.pth` (models/released/irpe-deit/README.md). The backbone is
# the model the converter infers from that file.
_base_ = ['./irpe_deit-s-k_in1k.py']
model = dict(backbone=dict(model_name='deit_tiny_patch16_224', embed_dim=192, num_heads=3))
