# V-DETR-S on rotated pt-scenes: boxes with 3DETR's 12 heading bins, 3DETR's Fourier features of xyz on the decoder's
# point keys and the queries' box centres.
_base_ = ['../_base_/models/vdetr-s_pt-scenes.py', '../_base_/datasets/pt-scenes-rotated.py',
          '../_base_/schedules/vdetr-pt-scenes.py', '../_base_/vdetr_runtime.py']
model = dict(num_yaw_bins=12, decoder=dict(encoding=dict(type='FourierXYZ')))
