# Tiny ViT (patch 4) on Fashion-MNIST at 28 px with lookhere.
_base_ = ['../_base_/models/vit-t4_fmnist.py', '../_base_/datasets/fmnist-28.py',
          '../_base_/schedules/fmnist-8e.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='LookHere', directions='halves', global_slope=1.0, layer_slopes=(1.5, 0.5))))
