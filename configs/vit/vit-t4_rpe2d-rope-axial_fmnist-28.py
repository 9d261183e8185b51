# Tiny ViT (patch 4) on Fashion-MNIST at 28 px with rpe2d-rope-axial.
# RPE-2D positions drawn from a 28x28 range during training (up to 4x the 7x7 grid at test); evaluation uses the
# expected positions of that draw (eval_positions='expected').
_base_ = ['../_base_/models/vit-t4_fmnist.py', '../_base_/datasets/fmnist-28.py',
          '../_base_/schedules/fmnist-8e.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='RPE2D', base=dict(type='RoPEAxial'), max_grid=(28, 28))))
