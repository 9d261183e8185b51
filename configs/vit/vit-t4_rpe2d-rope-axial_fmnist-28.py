# Tiny ViT (patch 2) on Fashion-MNIST at 28 px with rpe2d-rope-axial.
# RPE-2D positions drawn from a 56x56 range during training (up to 4x the 14x14 grid at test).
_base_ = ['../_base_/models/vit-t2_fmnist.py', '../_base_/datasets/fmnist-28.py',
          '../_base_/schedules/fmnist-12e.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='RPE2D', base=dict(type='RoPEAxial'), max_grid=(56, 56))))
