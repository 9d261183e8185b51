# Runtime shared by every config: vispe's registries, logging, checkpoints (best by top-1), seeding.
default_scope = 'vispe'
# mmengine's Runner with vispe's checkpoint policy (nothing in a file runs) and exact resumption.
runner_type = 'vispe.VispeRunner'
env_cfg = dict(cudnn_benchmark=False, mp_cfg=dict(mp_start_method='fork', opencv_num_threads=0),
               dist_cfg=dict(backend='gloo'))
default_hooks = dict(
    timer=dict(type='IterTimerHook'),
    logger=dict(type='LoggerHook', interval=20),
    param_scheduler=dict(type='ParamSchedulerHook'),
    checkpoint=dict(type='CheckpointHook', interval=1, max_keep_ckpts=2, save_best='accuracy/top1', rule='greater'),
    sampler_seed=dict(type='DistSamplerSeedHook'),
)
log_processor = dict(by_epoch=True, window_size=20)
# DDP that also runs on CPU processes (tools/dist_train.sh with gloo); on GPUs it is mmengine's.
model_wrapper_cfg = dict(type='vispe.AnyDeviceDistributedDataParallel', broadcast_buffers=False)
log_level = 'INFO'
randomness = dict(seed=0, deterministic=False)
load_from = None
resume = False
# best.pth / last.pth: weights and plain metadata only (load with weights_only=True; used by tools/test.py).
custom_hooks = [dict(type='WeightsCheckpointHook', metric='accuracy/top1')]
