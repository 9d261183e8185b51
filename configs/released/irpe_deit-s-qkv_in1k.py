# DeiT-S with iRPE on qkv (contextual product, 50 shared buckets): microsoft/Cream's released
# deit_small_patch16_224_ctx_product_50_shared_qkv.pth, evaluation only, after `vispe convert irpe-deit
# deit_small_patch16_224_ctx_product_50_shared_qkv.pth OUT.pth` (models/released/irpe-deit/README.md). The backbone is
# the model the converter infers from that file.
_base_ = ['./irpe_deit-s-k_in1k.py']
model = dict(backbone=dict(encoding=[
    dict(type='LearnedAPE'),
    dict(type='iRPE', method='product', mode='contextual', on='qkv', shared_head=True, ratio=1.9)]))
