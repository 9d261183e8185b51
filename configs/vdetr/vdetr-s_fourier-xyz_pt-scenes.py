# V-DETR-S on pt-scenes with 3DETR's Fourier features of xyz (normalised to the scene) on the decoder's
# point keys; the queries get a projection of the same features of their box centres.
_base_ = ['../_base_/models/vdetr-s_pt-scenes.py', '../_base_/datasets/pt-scenes.py',
          '../_base_/schedules/vdetr-pt-scenes.py', '../_base_/vdetr_runtime.py']
model = dict(decoder=dict(encoding=dict(type='FourierXYZ')))
