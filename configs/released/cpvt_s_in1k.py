# CPVT-S: DeiT-S with a PEG after each of blocks 0-4 instead of an absolute embedding (the cls token bypasses the
# PEGs), the models of the CPVT README's Table 5. Evaluation only; the authors released no CPVT weights: this is the
# model `vispe convert cpvt` infers from a CPVT-S file in timm's DeiT names with the PEGs under Twins' name,
# pos_block.I.proj.0 for I = 0..4 (models/released/cpvt/README.md).
_base_ = ['../_base_/models/deit-s16_in1k.py', '../_base_/datasets/imagenet-224.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='PEG', after_blocks=(0, 1, 2, 3, 4), kernel_size=3)))
# DeiT's evaluation (resize to 1/0.875 of the size, then centre crop), as the paper's numbers were measured.
val_dataloader = dict(dataset=dict(crop_pct=0.875))
test_dataloader = val_dataloader
