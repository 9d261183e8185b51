# SRT-S on mv-scenes-nvs with GTA on queries and keys only (rotary-only, the reference's v_transform=False): values
# and the attention output are not transformed.
_base_ = ['../_base_/models/srt-s_mv-scenes.py', '../_base_/datasets/mv-scenes-nvs.py',
          '../_base_/schedules/nvs-mv-scenes.py', '../_base_/nvs_runtime.py']
model = dict(encoding=dict(type='GTA', on='qk'))
