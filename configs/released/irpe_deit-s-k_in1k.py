# DeiT-S with iRPE on k (contextual product, 50 shared buckets): microsoft/Cream's released
# deit_small_patch16_224_ctx_product_50_shared_k.pth, evaluation only, after `vispe convert irpe-deit
# deit_small_patch16_224_ctx_product_50_shared_k.pth OUT.pth` (models/released/irpe-deit/README.md). The backbone is
# the model the converter infers from that file.
_base_ = ['../_base_/models/deit-s16_in1k.py', '../_base_/datasets/imagenet-224.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=[
    dict(type='LearnedAPE'),
    dict(type='iRPE', method='product', mode='contextual', on='k', shared_head=True, ratio=1.9)]))
# DeiT's evaluation (resize to 1/0.875 of the size, then centre crop), as the paper's numbers were measured.
val_dataloader = dict(dataset=dict(crop_pct=0.875))
test_dataloader = val_dataloader
