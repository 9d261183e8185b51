# CPVT-Ti: DeiT-Ti with a PEG after each of blocks 0-4 instead of an absolute embedding (the cls token bypasses the
# PEGs), the models of the CPVT README's Table 5. Evaluation only; the authors released no CPVT weights: this is the
# model `vispe convert cpvt` infers from a CPVT-Ti file in timm's DeiT names with the PEGs under Twins' name,
# pos_block.I.proj.0 for I = 0..4 (models/released/cpvt/README.md).
_base_ = ['./cpvt_s_in1k.py']
model = dict(backbone=dict(model_name='deit_tiny_patch16_224', embed_dim=192, num_heads=3))
