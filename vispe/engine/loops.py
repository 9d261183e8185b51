"""mmengine's epoch-based training loop, resumable at any iteration with the same numbers as an
uninterrupted run."""
from __future__ import annotations

from typing import Any

from mmengine.runner import EpochBasedTrainLoop as MMEpochBasedTrainLoop

from vispe.engine import random_state
from vispe.registry import LOOPS


@LOOPS.register_module()
class EpochBasedTrainLoop(MMEpochBasedTrainLoop):
    """mmengine's ``EpochBasedTrainLoop`` that resumes exactly.

    After a resume, the loop continues the epoch where the checkpoint was written: the batches of that
    epoch already trained are loaded again and dropped (the data loader, its workers and the
    sampler see the same stream as in the uninterrupted run, without forward or backward passes),
    and the random generators are set to the checkpoint's state right where the uninterrupted run
    was when it wrote it: before the epoch's data iterator starts at an epoch boundary, after the
    batches already trained within an epoch. With deterministic kernels, a resumed run then gives the
    uninterrupted run's weights bit for bit (checked on CPU in the tests).

    Configs select it with ``train_cfg = dict(by_epoch=True, ...)`` under :class:`vispe.engine.VispeRunner`,
    or explicitly with ``type='vispe.EpochBasedTrainLoop'``.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pending_random_state: dict[str, Any] | None = None

    def _restore_pending_random_state(self) -> None:
        if self.pending_random_state is not None:
            random_state.restore(self.pending_random_state)
            self.pending_random_state = None

    def batches_done_in_epoch(self) -> int:
        """Batches of the current epoch trained before a resume (0 at an epoch boundary)."""
        done = self._iter - self._epoch * len(self.dataloader)
        if not 0 <= done < len(self.dataloader):
            raise RuntimeError(f'The resumed iteration {self._iter} does not fall in epoch {self._epoch} of '
                               f'{len(self.dataloader)} batches: the checkpoint was written with another dataset size '
                               f'or batch size. Resume with the configuration that wrote it.')
        return done

    def run_epoch(self) -> None:
        """Iterate one epoch (the rest of it, after a resume within an epoch)."""
        self.runner.call_hook('before_train_epoch')
        self.runner.model.train()
        done = self.batches_done_in_epoch()
        if done == 0:
            self._restore_pending_random_state()
        batches = iter(self.dataloader)
        for _ in range(done):
            next(batches)
        self._restore_pending_random_state()
        for index, data_batch in enumerate(batches, start=done):
            self.run_iter(index, data_batch)
        self.runner.call_hook('after_train_epoch')
        self._epoch += 1
