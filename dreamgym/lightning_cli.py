"""The Lightning stages of the command line: ``python -m dreamgym {fit,validate,test,predict} --config
configs/X.yaml`` through LightningCLI (the entry point, :mod:`dreamgym.cli`, dispatches them here).

Models and data modules are injected with ``class_path``/``init_args`` (subclass mode), so one CLI
serves the experience-model SFT, the policy warm start and PPO/GRPO. The lab's pipeline runs its fits
through :func:`main` too, in process.
"""

from __future__ import annotations

import os
import re
import warnings

__all__ = ["main", "resolve_config", "run_fit", "run_validate", "run_test", "run_predict", "LINKS", "STAGES"]

STAGES = ("fit", "validate", "test", "predict")
"""The LightningCLI subcommands."""

LINKS: list[tuple[str, str]] = [
    # RL: validation/test batches hold as many tasks as the held-out env has slots (one episode per slot)
    ("model.init_args.eval_env.init_args.batch_size", "data.init_args.eval_batch_tasks"),
    # policy SFT: the module saves the data module's prompt format with the export (policy_format.json)
    ("data.init_args.format", "model.init_args.format"),
]
"""``parser.link_arguments(source, target)`` pairs: the target is computed, never given in YAML."""


def _lightning_cli(argv: list[str], run: bool = True, built: list | None = None, instantiate: bool = True):
    """The LightningCLI on ``argv``; ``run=False`` only parses and instantiates (used by tests), and with
    ``instantiate=False`` too it only parses (:func:`resolve_config`). The trainer is appended to ``built``
    as soon as it exists (a run stopped by a signal never returns the CLI)."""
    built = [] if built is None else built
    from lightning.pytorch import LightningDataModule, LightningModule
    from lightning.pytorch.cli import LightningCLI

    import dreamgym.strategies  # noqa: F401  (registers the deepspeed_cpu* names for --trainer.strategy)

    class DreamGymCLI(LightningCLI):
        def instantiate_classes(self) -> None:
            if instantiate:
                super().instantiate_classes()

        def before_instantiate_classes(self) -> None:
            if not instantiate:
                return
            # run=False parses without a subcommand: the trainer's keys are at the top level
            cfg = self.config.get(self.subcommand) if self.subcommand else self.config
            if cfg is not None and cfg.get("ckpt_path") == "last":
                _resume_last(cfg)
            elif cfg is not None and cfg.get("ckpt_path"):
                from dreamgym.checkpoint_io import check_checkpoint_file

                check_checkpoint_file(cfg.get("ckpt_path"))
            if cfg is not None:
                _drop_bar_when_disabled(cfg)
                _fill_precision(cfg)
                _check_log_dirs(cfg)

        def _parse_ckpt_path(self) -> None:
            # Lightning reads the checkpoint's hyperparameters here, first: refuse a cut or foreign file before
            sub = self.config.get("subcommand")
            path = self.config[sub].get("ckpt_path") if sub else None
            if path and path != "last":
                from dreamgym.checkpoint_io import check_checkpoint_file

                check_checkpoint_file(path)
            super()._parse_ckpt_path()

        def _check_ckpt(self, resume: bool) -> None:
            """The checkpoint against the built model, before Lightning restores (and fails late on) it."""
            from dreamgym.checkpoint_io import check_checkpoint_fits

            path = self.config_init[self.subcommand].get("ckpt_path")
            if path:
                check_checkpoint_fits(path, self.model, resume=resume)

        def before_fit(self) -> None:
            self._check_ckpt(resume=True)

        def before_validate(self) -> None:
            self._check_ckpt(resume=False)

        before_test = before_predict = before_validate

        def instantiate_trainer(self, **kwargs):
            trainer = super().instantiate_trainer(**kwargs)
            _atomic_checkpoints(trainer)
            built.append(trainer)
            return trainer

        def add_arguments_to_parser(self, parser):
            # Values that must agree are given once. A link whose source does not exist for the chosen
            # model class (e.g. the experience-model SFT) is skipped by jsonargparse.
            for source, target in LINKS:
                parser.link_arguments(source, target, apply_on="parse")

    from dreamgym.config_files import expand_config_args
    from dreamgym.memory import ReleaseFreeHeap

    # Parse errors raise (ArgumentError) instead of printing the whole usage; ``main`` shortens them.
    stage_kwargs = {"exit_on_error": False, "allow_abbrev": False, "prog": "python -m dreamgym"}
    with warnings.catch_warnings():
        # ``args=`` is how this CLI is meant to be driven (sys.argv stays untouched for DDP re-launches)
        warnings.filterwarnings("ignore", message=r"LightningCLI's args parameter")
        # RL (manual optimization) checkpoints after the iteration's update on purpose: resuming continues
        # with the next iteration, the schedule's counters saved with it (models/policy_rl.py)
        warnings.filterwarnings("ignore", message=r"Using ModelCheckpoint with manual optimization")
        return DreamGymCLI(
            LightningModule,
            LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            auto_configure_optimizers=False,
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"parser_mode": "yaml", **stage_kwargs, **{s: dict(stage_kwargs) for s in STAGES}},
            args=expand_config_args(argv),  # a config built on others (``__base__``) arrives composed
            # persistent: added to whatever callbacks a config lists (freed heap back to the OS, glibc)
            trainer_defaults={"callbacks": [ReleaseFreeHeap()]},
            run=run,
        )


def _parse_error(stage: str, message: str) -> ValueError:
    """A jsonargparse error as one short message: the complaint, "did you mean" hints, where help is."""
    from lightning.pytorch import Trainer

    from dreamgym.errors import constructor_parameters, did_you_mean

    known = ["seed_everything", "ckpt_path", "model", "data", "optimizer", "lr_scheduler", "trainer"]
    known += [f"trainer.{p}" for p in constructor_parameters(Trainer)]
    lines = [ln.strip().lstrip("- ").rstrip(":") for ln in message.splitlines() if ln.strip()]
    wanted = (r"not accepted|unrecognized|not expected|No action|does not exist|not a valid|"
              r"Expected a <class '(?!NoneType)|Problem with|Parser key")  # fmt: skip
    keep = [
        ln
        for i, ln in enumerate(lines)
        if re.search(wanted, ln, re.IGNORECASE) and (i or "Parser key" not in ln)
    ]
    text = "; ".join(dict.fromkeys(keep or lines[:3])).replace("Problem with given class_path", "in")
    text = re.sub(r'Parser key "([\w.]+)"', r"\1", text).replace("<class '", "").replace("'>", "")
    text = re.sub(r"; Expected a (\w+)\. Got value: ", r": expected \1, got ", text)
    hints = did_you_mean(message, known)
    return ValueError(
        f"python -m dreamgym {stage}: {text}"
        + (f" -- {' ; '.join(hints)}" if hints else "")
        + f" (`python -m dreamgym {stage} --help` lists the options)"
    )


def _atomic_checkpoints(trainer) -> None:
    """Save checkpoints atomically (:class:`dreamgym.checkpoint_io.AtomicCheckpointIO`) where the strategy
    uses Lightning's plain ``TorchCheckpointIO`` (a configured checkpoint IO of another kind is kept)."""
    from lightning.pytorch.plugins.io import TorchCheckpointIO

    from dreamgym.checkpoint_io import AtomicCheckpointIO

    strategy = trainer.strategy
    if type(getattr(strategy, "checkpoint_io", None)) is TorchCheckpointIO:
        strategy.checkpoint_io = AtomicCheckpointIO()


def _check_log_dirs(cfg) -> None:
    """Refuse, before anything is built or trained, a configured logger folder that cannot be written
    (Lightning finds it only when it first logs, with a traceback)."""
    from dreamgym.checkpoint_io import check_export_dir

    loggers = (cfg.get("trainer") or {}).get("logger")
    for logger in loggers if isinstance(loggers, list) else [loggers]:
        save_dir = (getattr(logger, "get", lambda k: None)("init_args") or {}).get("save_dir")
        if save_dir:
            check_export_dir(save_dir, "trainer.logger.init_args.save_dir", "the logs and checkpoints")


def _drop_bar_when_disabled(cfg) -> None:
    """``--trainer.enable_progress_bar false`` with a config that names a progress-bar callback (the
    shipped ones name ``PlannedProgressBar``): drop the bar instead of Lightning's refusal."""
    trainer = cfg.get("trainer")
    if trainer is None or trainer.get("enable_progress_bar") is not False:
        return
    callbacks = trainer.get("callbacks") or []
    trainer["callbacks"] = [c for c in callbacks if not str(c.get("class_path", "")).endswith("ProgressBar")]


def _fill_precision(cfg) -> None:
    """An unset ``trainer.precision``: ``bf16-mixed`` where the device has fast bf16 matmuls, else
    ``32-true`` (:func:`dreamgym.precision.auto_precision`); a given value is kept."""
    from dreamgym.precision import auto_precision

    trainer = cfg.get("trainer")
    if trainer is None or trainer.get("precision") is not None:
        return
    strategy = trainer.get("strategy")
    strategy = strategy if isinstance(strategy, str) else getattr(strategy, "class_path", strategy)
    trainer["precision"] = auto_precision(trainer.get("accelerator"), strategy)
    print(
        f"[dreamgym] trainer.precision: {trainer['precision']} (not set; chosen for this device)", flush=True
    )


def _resume_last(cfg) -> None:
    """``--ckpt_path last``: the newest ``version_*/checkpoints/last.ckpt`` of the configured logger's
    ``save_dir/name``, and log into that version again (Lightning alone looks only in the new run's
    version folder, finds nothing and silently starts from step 0)."""
    from pathlib import Path

    logger = cfg.get("trainer", {}).get("logger")
    init = logger.get("init_args") if hasattr(logger, "get") else None
    if init is None or init.get("save_dir") is None:
        return  # no file logger configured: Lightning's own lookup applies
    from dreamgym.checkpoint_io import check_checkpoint_file, newest_last_checkpoint

    root = Path(init.get("save_dir")) / (init.get("name") or "lightning_logs")
    last = newest_last_checkpoint(root)
    if last is None:
        print(
            f"[dreamgym] --ckpt_path last: no last.ckpt under {root}/version_*/checkpoints; starting fresh",
            flush=True,
        )
        cfg.ckpt_path = None
        return
    check_checkpoint_file(last)
    cfg.ckpt_path = str(last)
    init.version = last.parents[1].name
    print(f"[dreamgym] --ckpt_path last: resuming {cfg.ckpt_path}", flush=True)


def main(argv: list[str]) -> None:
    """A Lightning stage: ``argv`` is its command line, the stage included (``["fit", "--config", ...]``).
    Errors in the input raise ``ValueError`` (one line); a stop by signal raises
    :class:`~dreamgym.errors.Interrupted` saying how to resume."""
    from jsonargparse import ArgumentError
    from lightning.pytorch.utilities.exceptions import SIGTERMException

    from dreamgym.errors import Interrupted
    from dreamgym.strategies import destroy_process_group_at_exit, end_distributed_run

    _refuse_pipeline_config(argv)
    destroy_process_group_at_exit()  # a multi-process (gloo) run must not abort at exit after it finished
    stage = next((a for a in argv if a in STAGES), argv[0])
    built: list = []

    def stopped(name: str, code: int) -> Interrupted:
        saves = bool(built) and bool(built[-1].checkpoint_callbacks)
        resume = (
            "rerun the same command with --ckpt_path last to resume from the last saved checkpoint"
            if saves
            else "this run saves no checkpoints (trainer.enable_checkpointing=false or no ModelCheckpoint): "
            "rerun the same command to start it again"
        )
        return Interrupted(f"`{stage}` stopped by {name}; {resume}", code, name.split()[0], saves)

    try:
        cli = _lightning_cli(argv, built=built)
        if cli.trainer.world_size > 1:  # a finished multi-process run must not abort in interpreter teardown
            end_distributed_run()
    except ArgumentError as exc:
        raise _parse_error(stage, str(exc)) from None
    except SIGTERMException:  # Lightning's graceful stop is a SystemExit with code 0: not a finished run
        raise stopped("SIGTERM", 143) from None
    except SystemExit as exc:  # Lightning turns Ctrl-C (SIGINT) into sys.exit(1)
        if isinstance(exc.__context__, KeyboardInterrupt):
            raise stopped("SIGINT (Ctrl-C)", 130) from None
        raise


def _refuse_pipeline_config(argv: list[str]) -> None:
    """A pipeline config given to a Lightning stage: say which command runs it."""
    from pathlib import Path

    from dreamgym.config_files import load_config

    for flag, value in zip(argv, argv[1:], strict=False):
        if flag in ("--config", "-c") and os.path.isfile(value):
            try:
                top = load_config(value) or {}
            except ValueError as exc:  # not valid YAML, here or in a __base__ piece (named in the message)
                message = str(exc).removeprefix(f"{Path(value).resolve()}: ")
                raise ValueError(f"--config {value}: {message}") from None
            if isinstance(top, dict) and {"experience_config", "out_dir"} <= set(top):
                raise ValueError(
                    f"--config {value} is a pipeline config (it has experience_config/out_dir); run it with "
                    f"`python -m dreamgym pipeline --config {value}`"
                )


def resolve_config(argv: list[str]) -> dict:
    """The config a fit with ``argv`` (``["--config", X, ...]``, no stage name) would run with: composed,
    parsed and checked by the LightningCLI (every key and type, the chosen classes' arguments included), as
    ``--print_config`` prints it; nothing is built or run.

    Raises:
        ValueError: an option the config does not take or a value of the wrong type (one line, as :func:`main`).
    """
    from jsonargparse import ArgumentError

    try:
        return _lightning_cli(argv, run=False, instantiate=False).config.as_dict()
    except ArgumentError as exc:
        raise _parse_error("fit", str(exc)) from None


def run_fit(argv: list[str]) -> None:
    """``python -m dreamgym fit ARGS``: :func:`main` on ``["fit", *ARGS]``."""
    main(["fit", *argv])


def run_validate(argv: list[str]) -> None:
    """``python -m dreamgym validate ARGS``."""
    main(["validate", *argv])


def run_test(argv: list[str]) -> None:
    """``python -m dreamgym test ARGS``."""
    main(["test", *argv])


def run_predict(argv: list[str]) -> None:
    """``python -m dreamgym predict ARGS``."""
    main(["predict", *argv])
