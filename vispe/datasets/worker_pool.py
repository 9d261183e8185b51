"""The process pool the data-set converters render in: forkserver workers that import the converter's module once,
results in task order, pending work cancelled when the consumer stops or fails."""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from typing import Any, Callable, Iterator, Sequence

__all__ = ['map_in_processes']


def map_in_processes(function: Callable[[Any, Any], Any], tasks: Sequence[Any], target: Any, *, workers: int,
                     module: str, initializer: Callable[..., None], initargs: tuple[Any, ...],
                     chunksize: int = 4) -> Iterator[Any]:
    """``function(task, target)`` for each task, in order, in ``workers`` processes that preload ``module`` and run
    ``initializer(*initargs)`` once each."""
    context = multiprocessing.get_context('forkserver')
    context.set_forkserver_preload([module])
    with ProcessPoolExecutor(workers, mp_context=context, initializer=initializer, initargs=initargs) as executor:
        try:
            yield from executor.map(function, tasks, [target] * len(tasks), chunksize=chunksize)
        except BaseException:
            executor.shutdown(wait=True, cancel_futures=True)
            raise
