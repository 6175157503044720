"""Training strategies: a CPU DeepSpeed strategy for tests and development, and helpers around DeepSpeed.

On GPUs use Lightning's own strategies, given in the trainer snippets under ``configs/strategies/``
(``ddp.yaml``, ``deepspeed_zero2.yaml``, ``deepspeed_zero3.yaml``)::

    python -m dreamgym fit --config configs/webshop_grpo.yaml --config configs/strategies/deepspeed_zero2.yaml

Lightning refuses DeepSpeed on anything but CUDA ("The DeepSpeed strategy is only supported on CUDA
GPUs"). :class:`CPUDeepSpeedStrategy` lifts that check so that ZeRO-2/3 code paths (the engine wrapping
the whole LightningModule, one optimizer, ``manual_backward``, sharded checkpoints) can be exercised on
a CPU with the ``gloo`` backend and ``precision="32-true"``. It is a **test/dev tool**: it is slow and
gives no memory benefit on one machine. Importing this module registers three names for
``--trainer.strategy``:

==========================  ===================================================
name                        strategy
==========================  ===================================================
``deepspeed_cpu``           ``CPUDeepSpeedStrategy()`` (ZeRO stage 2)
``deepspeed_cpu_stage_2``   ``CPUDeepSpeedStrategy(stage=2)``
``deepspeed_cpu_stage_3``   ``CPUDeepSpeedStrategy(stage=3)``
==========================  ===================================================

Contract for LightningModules trained under DeepSpeed (GPU or CPU), all met by manual optimisation:

* exactly one optimizer (parameter groups are fine); DeepSpeed wraps the whole LightningModule and
  optimises only parameters with ``requires_grad=True``, so frozen reference/experience models stay
  frozen;
* ``self.manual_backward(loss)`` instead of ``loss.backward()``, and ``opt.step()`` on
  ``self.optimizers()``: the engine's ``backward``/``step`` run underneath;
* gradient clipping is done by DeepSpeed from its config key ``gradient_clipping`` (Lightning's
  ``clip_gradients`` is a no-op under DeepSpeed and ``Trainer(gradient_clip_val=...)`` is refused with
  manual optimisation), so set it to the module's own clipping norm.
"""

from __future__ import annotations

import atexit
import os
import sys
from pathlib import Path
from typing import Any

import torch
from lightning.fabric.utilities.seed import reset_seed
from lightning.pytorch.strategies import DDPStrategy, DeepSpeedStrategy, StrategyRegistry

__all__ = [
    "CPUDeepSpeedStrategy",
    "check_rl_strategy",
    "CPU_DEEPSPEED_NAMES",
    "skip_deepspeed_shm_build",
    "destroy_process_group_at_exit",
    "end_distributed_run",
    "deepspeed_checkpoint_files",
    "consolidate_deepspeed_checkpoint",
]

CPU_DEEPSPEED_NAMES: dict[str, dict[str, Any]] = {
    "deepspeed_cpu": {},
    "deepspeed_cpu_stage_2": {"stage": 2},
    "deepspeed_cpu_stage_3": {"stage": 3},
}
"""``--trainer.strategy`` names registered by this module -> ``CPUDeepSpeedStrategy`` keyword arguments."""


def destroy_process_group_at_exit() -> None:
    """Destroy ``torch.distributed``'s process groups when the interpreter exits (registered once).

    Lightning registers this only for NCCL. A no-op when no group is initialised. Destroying the group
    does not stop its Gloo worker threads while DeepSpeed still holds the group (ZeRO-3 parameters keep
    ``ds_process_group``), so a finished multi-process run also ends through :func:`end_distributed_run`.
    """
    global _EXIT_HOOK_REGISTERED
    if not _EXIT_HOOK_REGISTERED:
        atexit.register(_destroy_process_group)
        _EXIT_HOOK_REGISTERED = True


_EXIT_HOOK_REGISTERED = False


def _destroy_process_group() -> None:
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def end_distributed_run(code: int = 0) -> None:
    """End the process of a finished multi-process run without interpreter finalisation.

    A no-op when no process group is initialised. Call it from a command's top level only (the CLI calls
    it when ``trainer.world_size > 1``), never from a library or a test process: it ends the process.

    A Gloo process group that outlives the run keeps C++ worker threads that may still release tensors
    (and so take the GIL) while the interpreter is being torn down: the process then aborts after the run
    finished ("terminate called without an active exception", exit -6 after "`Trainer.fit` stopped";
    pytorch/pytorch#190489, #179291). DeepSpeed keeps its groups referenced (ZeRO-3 parameters hold
    ``ds_process_group``), so destroying the group does not stop those threads. When a group is still
    initialised, this runs the ``atexit`` handlers (loggers, :func:`destroy_process_group_at_exit`), flushes
    stdout/stderr and leaves with ``os._exit(code)``: everything a run writes is closed by Lightning's
    teardown before ``fit`` returns, and what is skipped is only the destruction of Python objects.
    """
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def skip_deepspeed_shm_build() -> bool:
    """Stop DeepSpeed from JIT-compiling its CPU shared-memory all-reduce op (~70 s on a 2-core CPU).

    DeepSpeed's torch backend calls ``deepspeed.comm.torch.build_shm_op()`` when it initialises; the op
    only speeds up ``inference_all_reduce`` on CPU, and without it DeepSpeed falls back to
    ``torch.distributed``. Replacing the builder by one returning ``None`` makes the first init take ~2 s.

    Returns:
        ``True`` if the builder was replaced now, ``False`` if it already was.
    """
    import deepspeed.comm.torch  # noqa: F401  (the module object is looked up in sys.modules below)

    module = sys.modules["deepspeed.comm.torch"]
    if getattr(module.build_shm_op, "_dreamgym_skipped", False):
        return False

    def _no_shm_op() -> None:
        return None

    _no_shm_op._dreamgym_skipped = True  # type: ignore[attr-defined]
    module.build_shm_op = _no_shm_op
    return True


class CPUDeepSpeedStrategy(DeepSpeedStrategy):
    """Lightning's :class:`~lightning.pytorch.strategies.DeepSpeedStrategy` made to run on CPUs (gloo).

    A test/dev tool for exercising ZeRO-2/3 without a GPU; on GPUs use ``DeepSpeedStrategy`` itself
    (``configs/strategies/deepspeed_zero{2,3}.yaml``). Use it with ``accelerator="cpu"`` and
    ``precision="32-true"`` (the only precision tested on CPU), and a plain ``torch.optim`` optimizer:
    ``DeepSpeedCPUAdam`` JIT-compiles for ~2 minutes. ``devices=2`` spawns a second process (Lightning's
    subprocess launcher re-runs the command line), so run it from a script or the CLI, not inside pytest.

    Every argument of ``DeepSpeedStrategy`` is accepted (``stage``, ``config``, ...); a ``config``
    dict or JSON path replaces Lightning's defaults entirely, as there.

    Args:
        process_group_backend: torch.distributed backend; ``"gloo"`` is the one that works on CPU.
        build_shm_op: let DeepSpeed JIT-compile its CPU shared-memory op (slow, only helps inference
            all-reduce); by default the build is skipped (:func:`skip_deepspeed_shm_build`).
        **kwargs: passed to :class:`~lightning.pytorch.strategies.DeepSpeedStrategy`.

    Example::

        trainer = Trainer(accelerator="cpu", devices=1, precision="32-true",
                          strategy=CPUDeepSpeedStrategy(stage=3), max_steps=2)
    """

    strategy_name = "deepspeed_cpu"

    def __init__(
        self, process_group_backend: str = "gloo", build_shm_op: bool = False, **kwargs: Any
    ) -> None:
        if process_group_backend != "gloo":
            raise ValueError(
                f"CPUDeepSpeedStrategy.process_group_backend={process_group_backend!r} does not run on CPU; "
                "use 'gloo' (or Lightning's DeepSpeedStrategy with 'nccl' on GPUs)"
            )
        # DeepSpeed picks its accelerator once, at first use; make sure it is the CPU one.
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
        super().__init__(process_group_backend=process_group_backend, **kwargs)
        self.build_shm_op = build_shm_op
        _check_deepspeed_accelerator_is_cpu()

    @property
    def root_device(self) -> torch.device:
        """Every rank computes on the CPU; DeepSpeed wants an indexed device (``cpu:0``)."""
        return torch.device("cpu", 0)

    def setup_environment(self) -> None:
        """Skip DeepSpeed's CUDA-only check: DDP's environment setup (accelerator, then distributed)."""
        from lightning.pytorch.accelerators import CPUAccelerator

        if not isinstance(self.accelerator, CPUAccelerator):
            raise RuntimeError(
                f"CPUDeepSpeedStrategy needs accelerator='cpu', got {type(self.accelerator).__name__}; "
                "on GPUs use lightning.pytorch.strategies.DeepSpeedStrategy (configs/strategies/deepspeed_zero2.yaml)"
            )
        DDPStrategy.setup_environment(self)

    def setup_distributed(self) -> None:
        """Seed, ranks and ``deepspeed.init_distributed`` without the CUDA device-index validation."""
        if not self.build_shm_op:
            skip_deepspeed_shm_build()
        reset_seed()
        self.set_world_ranks()
        self._init_deepspeed_distributed()
        destroy_process_group_at_exit()

    @classmethod
    def register_strategies(cls, strategy_registry: Any) -> None:
        """Register :data:`CPU_DEEPSPEED_NAMES` (only these: the ``deepspeed*`` names stay Lightning's)."""
        for name, kwargs in CPU_DEEPSPEED_NAMES.items():
            if name not in strategy_registry:
                strategy_registry.register(
                    name, cls, description=f"DeepSpeed on CPU (gloo), {kwargs or 'stage 2'}", **kwargs
                )


def check_rl_strategy(strategy: Any) -> None:
    """Refuse DeepSpeed ZeRO-3 for RL (``PolicyRL`` calls this in ``setup``).

    ZeRO-3 partitions the parameters, and every forward pass is a collective: each rank gathers each
    layer's weights from all ranks. Rollout generation runs a different number of forward passes on each
    rank (episodes end at different turns, replies stop at different lengths, ranks hold different
    tasks), so the ranks' collectives fall out of step and training hangs. ``generate(synced_gpus=True)``
    only pads the decoding steps of one call, not the number of calls per rank, so it is not enough.
    ZeRO-2 (optimizer state and gradients sharded, parameters replicated) has none of this.

    Raises:
        ValueError: if ``strategy`` is a DeepSpeed strategy configured with ZeRO stage 3.
    """
    config = getattr(strategy, "config", None) if isinstance(strategy, DeepSpeedStrategy) else None
    stage = ((config or {}).get("zero_optimization") or {}).get("stage")
    if stage == 3:
        raise ValueError(
            "DeepSpeed ZeRO-3 is not supported for RL: it gathers the partitioned parameters in every "
            "forward pass on all ranks at once, and rollout generation runs a different number of forward "
            "passes per rank, so training would hang; use ZeRO-2 (configs/strategies/deepspeed_zero2.yaml) "
            "or DDP (configs/strategies/ddp.yaml)"
        )


def _check_deepspeed_accelerator_is_cpu() -> None:
    from deepspeed.accelerator import get_accelerator

    name = get_accelerator().device_name()
    if name != "cpu":
        raise RuntimeError(
            f"CPUDeepSpeedStrategy needs DeepSpeed's CPU accelerator but DeepSpeed already chose {name!r}; "
            "set the environment variable DS_ACCELERATOR=cpu before DeepSpeed is first used, "
            "or use Lightning's DeepSpeedStrategy on GPUs"
        )


def deepspeed_checkpoint_files(path: str | os.PathLike, tag: str = "checkpoint") -> list[Path]:
    """The files of a DeepSpeed checkpoint directory written by Lightning (``<path>/<tag>/*.pt``).

    Args:
        path: the checkpoint path Lightning saved to (a directory under DeepSpeed, e.g. ``last.ckpt/``).
        tag: DeepSpeed tag; Lightning always uses ``"checkpoint"``.

    Returns:
        Sorted paths: model states (``mp_rank_00_model_states.pt``) and one optimizer shard per rank
        (``*zero_pp_rank_<r>_mp_rank_00_optim_states.pt``).

    Raises:
        FileNotFoundError: if ``path`` is not a DeepSpeed checkpoint directory.
    """
    root = Path(path) / tag
    files = sorted(root.glob("*.pt"))
    if not files:
        raise FileNotFoundError(
            f"{str(path)!r} is not a DeepSpeed checkpoint: no {tag}/*.pt inside; DeepSpeed strategies save "
            "a directory per checkpoint (e.g. checkpoints/last.ckpt/checkpoint/mp_rank_00_model_states.pt)"
        )
    return files


def consolidate_deepspeed_checkpoint(path: str | os.PathLike, out: str | os.PathLike) -> dict[str, Any]:
    """Merge a (sharded) DeepSpeed ZeRO checkpoint into one fp32 Lightning checkpoint file.

    Thin wrapper over Lightning's ``convert_zero_checkpoint_to_fp32_state_dict``; the result loads with
    ``torch.load`` / ``Module.load_from_checkpoint`` without DeepSpeed.

    Args:
        path: DeepSpeed checkpoint directory (see :func:`deepspeed_checkpoint_files`).
        out: the single ``.ckpt`` file to write.

    Returns:
        The written checkpoint dict (``state_dict`` holds full fp32 tensors).
    """
    from lightning.pytorch.utilities.deepspeed import convert_zero_checkpoint_to_fp32_state_dict

    deepspeed_checkpoint_files(path)
    return convert_zero_checkpoint_to_fp32_state_dict(str(path), str(out))


CPUDeepSpeedStrategy.register_strategies(StrategyRegistry)
