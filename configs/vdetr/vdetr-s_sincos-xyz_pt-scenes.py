# V-DETR-S on pt-scenes with 3DETR's sine embedding of normalised xyz on the decoder's point keys and
# (projected) on the queries' box centres.
_base_ = ['../_base_/models/vdetr-s_pt-scenes.py', '../_base_/datasets/pt-scenes.py',
          '../_base_/schedules/vdetr-pt-scenes.py', '../_base_/vdetr_runtime.py']
model = dict(decoder=dict(encoding=dict(type='SinCosXYZ')))
