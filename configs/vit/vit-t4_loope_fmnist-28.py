# Tiny ViT (patch 4) on Fashion-MNIST at 28 px with loope.
# LOOPE: the sinusoid along the 7x7 gilbert curve plus the offsets its network reads from each (grey) image.
_base_ = ['../_base_/models/vit-t4_fmnist.py', '../_base_/datasets/fmnist-28.py',
          '../_base_/schedules/fmnist-8e.py', '../_base_/default_runtime.py']
model = dict(backbone=dict(encoding=dict(type='LOOPE')))
