"""Loading configs and building mmengine Runners with vispe's checkpoint policy and error messages."""
from __future__ import annotations

import ast
import contextlib
import copy
import re
from pathlib import Path
from typing import Any, Iterator, Sequence

from mmengine.config import Config
from mmengine.model import is_model_wrapper
from mmengine.runner import Runner
from mmengine.runner.checkpoint import _load_checkpoint, _load_checkpoint_to_model, find_latest_checkpoint

from vispe import registry, serialization
from vispe.configs import resolve_config
from vispe.engine.hooks import MMENGINE_SELF_DEPRECATIONS, RandomStateHook, dropped_log_records
from vispe.engine.tracking import set_vis_backends
from vispe.registry import RUNNERS, UnknownTypeError, VispeRegistry, unknown_argument_error, unknown_type_message

TRUST_FLAG = '--trust-checkpoint'


def check_config_syntax(path: Path, child: Path | None = None) -> None:
    """Parse a config and its ``_base_`` files, naming the file of a syntax error (mmengine says
    ``<unknown>``) or of a missing base. Nothing is executed."""
    try:
        tree = ast.parse(path.read_text(), filename=str(path))
    except SyntaxError as exc:
        where = f' (a _base_ of {child})' if child is not None else ''
        line = f': {exc.text.strip()}' if exc.text else ''
        raise SyntaxError(f'Config {path}{where} has a syntax error at line {exc.lineno}{line} ({exc.msg}). '
                          f'Fix that line of the file.') from None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == '_base_' for t in node.targets):
            values = node.value.elts if isinstance(node.value, (ast.List, ast.Tuple)) else [node.value]
            for value in values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str) and '::' not in value.value:
                    base = (path.parent / value.value).resolve()
                    if not base.is_file():
                        raise FileNotFoundError(f'Config {path} names _base_ {value.value!r}, which is not a file '
                                                f'({base}). Fix the path: it is relative to {path.parent}.')
                    check_config_syntax(base, path)


def load_config(path: str | Path, cfg_options: dict[str, Any] | None = None,
                work_dir: str | Path | None = None, vis_backends: Sequence[str] = ()) -> Config:
    """Read a config, apply ``--cfg-options``, set the work dir (default ``work_dirs/<config name>``) and, with
    ``vis_backends`` (``--vis-backend``), the trackers the run logs to
    (:func:`vispe.engine.tracking.set_vis_backends`). ``path`` may name a packaged config, ``vispe::<path>``
    (:func:`vispe.configs.resolve_config`; an unknown one raises :class:`vispe.configs.UnknownConfigError`)."""
    path = resolve_config(path)
    if not path.is_file():
        raise FileNotFoundError(f'Config {path} not found.')
    check_config_syntax(path)
    cfg = Config.fromfile(str(path))
    if cfg_options:
        cfg.merge_from_dict(cfg_options)
    if work_dir is not None:
        cfg.work_dir = str(work_dir)
    elif cfg.get('work_dir') is None:
        cfg.work_dir = str(Path('work_dirs') / path.stem)
    if vis_backends:
        set_vis_backends(cfg, vis_backends)
    return cfg


@contextlib.contextmanager
def named_unknown_types() -> Iterator[None]:
    """Turn mmengine's "X is not in the registry" errors raised inside the block into
    :class:`UnknownTypeError` naming the closest registered type (builds happen lazily: models when the
    Runner is made, datasets and metrics when it trains or tests)."""
    try:
        yield
    except TypeError as exc:
        raise unknown_argument_error(exc, _registered_by_name(str(exc))) from None
    except KeyError as exc:
        match = re.search(r"(\S+) is not in the (?:\S+::)?(.+?) registry", str(exc))
        if match is None or isinstance(exc, UnknownTypeError):
            raise
        name, kind = match.group(1).strip('\'"'), match.group(2)
        children = [value for value in vars(registry).values() if isinstance(value, VispeRegistry) and value.name == kind]
        known = sorted({key for child in children for key in (*child.module_dict, *child.parent.module_dict)})
        raise UnknownTypeError(unknown_type_message(kind, name, known)) from None


def _registered_by_name(message: str) -> Any:
    """The registered class a "Name.__init__() got an unexpected keyword argument" message is about, if any
    (mmengine's root registries build datasets and metrics, so vispe's own build does not see the error)."""
    match = re.match(r'(\w+)\.__init__\(\) got an unexpected keyword argument', message)
    if match is None:
        return None
    for child in vars(registry).values():
        if isinstance(child, VispeRegistry) and match.group(1) in child.module_dict:
            return child.module_dict[match.group(1)]
    return None


@RUNNERS.register_module()
class VispeRunner(Runner):
    """mmengine's ``Runner`` with vispe's checkpoint policy and exact resumption.

    - Every local checkpoint (``load_from`` and ``resume``) is read through
      :mod:`vispe.serialization`'s allow-list unpickler: nothing in a file can run code. A resume
      file outside the run's work dir, or one that holds objects beyond mmengine's training state,
      is refused unless the config sets ``trust_resume_file=True`` (``tools/train.py
      --trust-checkpoint``), which unpickles it in full.
    - The config stored in a checkpoint is never executed (mmengine's own ``resume`` runs
      ``Config.fromstring`` on it).
    - Exact resumption: :class:`~vispe.engine.hooks.RandomStateHook` saves the random generators with
      every checkpoint and keeps validation off the training's random stream; epoch-based training
      runs :class:`~vispe.engine.loops.EpochBasedTrainLoop`, which restores them and the position in
      the epoch. With deterministic kernels a resumed run equals an uninterrupted one.
    - Saving does not log mmengine's deprecation warnings about its own FileClient.
    """

    trust_resume_file: bool = False
    _resuming: bool = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not any(isinstance(hook, RandomStateHook) for hook in self.hooks):
            self.register_hook(RandomStateHook())

    @classmethod
    def from_cfg(cls, cfg: Config) -> VispeRunner:
        runner = super().from_cfg(cfg)
        runner.trust_resume_file = bool(cfg.get('trust_resume_file', False))
        return runner

    def save_checkpoint(self, *args: Any, **kwargs: Any) -> None:
        """mmengine's, without the FileClient deprecation warning that its own saving logs (it builds a
        FileClient for every file even without file_client_args)."""
        with dropped_log_records(MMENGINE_SELF_DEPRECATIONS):
            super().save_checkpoint(*args, **kwargs)

    def build_train_loop(self, loop: Any) -> Any:
        """Epoch-based configs without a loop type get :class:`~vispe.engine.loops.EpochBasedTrainLoop`."""
        if isinstance(loop, dict) and 'type' not in loop and loop.get('by_epoch', False):
            loop = copy.deepcopy(loop)
            loop.pop('by_epoch')
            loop['type'] = 'vispe.EpochBasedTrainLoop'
        return super().build_train_loop(loop)

    def resume_path(self, filename: str | Path) -> Path:
        """The file to resume from, if the run may read it: inside its work dir, or trusted."""
        path = Path(filename).expanduser().resolve()
        work_dir = Path(self.work_dir).resolve()
        if work_dir not in path.parents and not self.trust_resume_file:
            raise PermissionError(
                f'Resume file {path} is outside this run\'s work dir {work_dir}. vispe resumes only from checkpoints '
                f'the run wrote itself: resume with --work-dir set to the folder of the run that wrote it. If you '
                f'wrote the file yourself and trust it, pass {TRUST_FLAG} (tools/train.py), i.e. '
                f'trust_resume_file=True in the config.')
        return path

    def load_or_resume(self) -> None:
        """mmengine's ``load_or_resume``; an automatic resume that finds no checkpoint says so."""
        if self._resume and self._load_from is None and not self._has_loaded:
            latest = find_latest_checkpoint(self.work_dir)
            if latest is None:
                self.logger.warning(f'--resume: no checkpoint in {self.work_dir} (no last_checkpoint file); '
                                    f'training starts from scratch.')
                self._resume = False
            else:
                self._load_from = latest
        super().load_or_resume()

    def resume(self, filename: str, resume_optimizer: bool = True, resume_param_scheduler: bool = True,
               map_location: Any = 'default') -> None:
        path = self.resume_path(filename)
        self._resuming = True
        try:
            super().resume(str(path), resume_optimizer, resume_param_scheduler, map_location)
        finally:
            self._resuming = False

    def read_checkpoint(self, filename: str, map_location: Any) -> dict:
        """A checkpoint file through the allow-list (remote URLs through mmengine, with torch's defaults)."""
        if re.match(r'^[a-z][a-z0-9+.-]*://', str(filename)):
            return _load_checkpoint(filename, map_location=map_location)
        hint = (f'If you wrote this file yourself and trust it, resume with {TRUST_FLAG}.' if self._resuming else
                'If the file comes from elsewhere, ask for its weights as a state dict of tensors or a .safetensors '
                'file.')
        return serialization.load(filename, map_location=map_location,
                                  trusted=self._resuming and self.trust_resume_file, refusal_hint=hint)

    def load_checkpoint(self, filename: str, map_location: Any = 'cpu', strict: bool = False,
                        revise_keys: list | None = None) -> dict:
        """mmengine's ``load_checkpoint`` on vispe's reader; on resume, also hands the random state to the loop."""
        checkpoint = self.read_checkpoint(filename, map_location)
        if not isinstance(checkpoint, dict):
            raise serialization.CorruptCheckpointError(f'Checkpoint {filename} holds a {type(checkpoint).__name__}, '
                                                       f'not a dict of state_dict and meta.')
        if self._resuming:
            meta = checkpoint.get('meta')
            if not isinstance(meta, dict) or not {'epoch', 'iter'} <= set(meta):
                raise serialization.CorruptCheckpointError(
                    f'{filename} is not a training checkpoint (no meta with epoch and iter): resume from an '
                    f'epoch_N.pth of the work dir; best.pth and last.pth hold weights only (use load_from).')
            meta.pop('config', None)
            self._hand_random_state(checkpoint, filename)
        self.call_hook('after_load_checkpoint', checkpoint=checkpoint)
        model = self.model.module if is_model_wrapper(self.model) else self.model
        checkpoint = _load_checkpoint_to_model(model, checkpoint, strict,
                                               revise_keys=[(r'^module.', '')] if revise_keys is None else revise_keys)
        self._has_loaded = True
        self.logger.info(f'Load checkpoint from {filename}')
        return checkpoint

    def _hand_random_state(self, checkpoint: dict, filename: str) -> None:
        loop = self.train_loop
        state = checkpoint.get(RandomStateHook.CHECKPOINT_KEY)
        if state is None or not hasattr(loop, 'pending_random_state'):
            self.logger.warning(f'{filename} holds no random state, or the train loop ({type(loop).__name__}) cannot '
                                f'restore it: the resumed run will draw other random numbers than an uninterrupted '
                                f'one (augmentation, dropout, drop-path).')
            return
        loop.pending_random_state = state
        if getattr(loop.dataloader, 'persistent_workers', False):
            self.logger.warning('persistent_workers=True: data-loader workers restart at a resume, so their random '
                                'augmentation differs from an uninterrupted run. Set persistent_workers=False for an '
                                'exact resume.')


def build_runner(cfg: Config) -> Runner:
    """The config's runner (``runner_type``, default :class:`VispeRunner`) inside :func:`named_unknown_types`."""
    with named_unknown_types():
        runner_type = cfg.get('runner_type', 'VispeRunner')
        runner_class = RUNNERS.get(runner_type) if isinstance(runner_type, str) else runner_type
        if runner_class is None:
            raise UnknownTypeError(unknown_type_message('runner', runner_type, list(RUNNERS.module_dict)))
        return runner_class.from_cfg(cfg)
