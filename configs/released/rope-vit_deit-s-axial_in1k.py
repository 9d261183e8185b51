# rope-vit's released RoPE-Axial DeiT-III ViT-S/16 (naver-ai/rope_axial_deit_small_patch16_LS; Heo et al., ECCV 2024)
# on ImageNet-1k val, evaluation only: the backbone is what `vispe convert rope-vit` infers for that file.
# vispe eval-resolution configs/released/rope-vit_deit-s-axial_in1k.py::<converted.pth> --sizes 224 320 ...
_base_ = ['../_base_/models/rope-vit_deit-s_in1k.py', '../_base_/datasets/imagenet-224.py',
          '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='RoPEAxial', theta=100.0)))
