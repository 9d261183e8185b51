# ViT-B/16 on ImageNet-1k at 224 px with sincos, the LookHere paper's recipe (see the _base_ files).
_base_ = ['../_base_/models/vit-b16_in1k.py', '../_base_/datasets/imagenet-224.py',
          '../_base_/schedules/imagenet-lookhere-150e.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='SinCos2D')))
