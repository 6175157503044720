"""Training strategies on CPU: DDP (gloo, 2 processes) and DeepSpeed ZeRO-2/3 via ``CPUDeepSpeedStrategy``.

Multi-process runs go through the real CLI in a subprocess (``python -m dreamgym fit --config
configs/strategies/X.yaml`` with CPU overrides), so Lightning's launcher and DeepSpeed's process group
never touch the pytest process. Two models:

* :class:`ToyPolicy`, shaped like our RL module (manual optimisation, one optimizer, several minibatch
  updates per ``training_step``, clipping by norm, a frozen reference net) but with SGD, so the size of
  the parameter change proves clipping (ZeRO-2 checkpoint/consolidation/resume, ZeRO-3 shards);
* the real :class:`models.policy_rl.PolicyRL` from ``configs/webshop_real_grpo.yaml`` with tiny overrides
  (GRPO on the real WebShop env, 2 ranks), under DDP and ZeRO-2: replicas stay identical.

Subprocesses import this file (``PYTHONPATH=tests``, ``class_path: test_strategies.ToyPolicy``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import rl_toy  # registers the "letters" env, also in the CLI subprocesses that import this module
import torch
import yaml
from lightning.pytorch import Callback, LightningDataModule, LightningModule
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from dreamgym.config_files import load_config

REPO = Path(__file__).resolve().parents[1]
STRATEGY_CONFIGS = sorted((REPO / "configs" / "strategies").glob("*.yaml"))
CPU_OVERRIDES = ["--trainer.accelerator", "cpu", "--trainer.precision", "32-true"]
SUBPROCESS_TIMEOUT_S = 300


class ToyPolicy(LightningModule):
    """A tiny regressor trained like PolicyRL: manual optimisation, one SGD optimizer, ``updates`` minibatch
    steps per batch, gradient clipping by norm, and a frozen reference net used in the loss (a KL stand-in).

    Args:
        updates: optimizer steps per ``training_step`` (PPO-style minibatches).
        lr: SGD learning rate (plain SGD: each clipped step moves the parameters by at most ``lr * clip_norm``).
        clip_norm: gradient norm clip; ``clip_gradients`` under DDP, the DeepSpeed config's ``gradient_clipping``
            under DeepSpeed (where ``clip_gradients`` is a no-op).
        seed: initialisation seed, so a test can rebuild the initial parameters.
    """

    def __init__(self, updates: int = 2, lr: float = 0.1, clip_norm: float = 1.0, seed: int = 0):
        super().__init__()
        self.automatic_optimization = False
        self.updates, self.lr, self.clip_norm = updates, lr, clip_norm
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(4, 16), nn.Tanh(), nn.Linear(16, 1))
        self.ref = nn.Linear(4, 1)
        self.ref.requires_grad_(False)
        self._first_step: int | None = None

    def training_step(self, batch, batch_idx):
        if self._first_step is None:
            self._first_step = int(self.global_step)
        opt = self.optimizers()
        x, y = batch
        for xs, ys in zip(x.chunk(self.updates), y.chunk(self.updates), strict=True):
            pred = self.net(xs)
            loss = (pred - ys).pow(2).mean() + 0.01 * (pred - self.ref(xs)).pow(2).mean()
            opt.zero_grad()
            self.manual_backward(loss)
            self.clip_gradients(opt, gradient_clip_val=self.clip_norm, gradient_clip_algorithm="norm")
            opt.step()
        self.log("train/loss", loss.detach())

    def configure_optimizers(self):
        return torch.optim.SGD([p for p in self.parameters() if p.requires_grad], lr=self.lr)

    def on_train_end(self):
        _dump_rank(self.trainer, self, first_step=self._first_step)


def _dump_rank(trainer, module: LightningModule, **info) -> None:
    """Write ``rank<r>.json`` (steps, world size, RL counters) and, unless ZeRO-3 shards them, ``rank<r>.pt``."""
    out = Path(trainer.default_root_dir)
    rank = trainer.global_rank
    info.update(global_step=int(trainer.global_step), world_size=trainer.world_size)
    schedule = getattr(module, "schedule", None)
    if schedule is not None:
        info.update(iteration=int(schedule.iteration), real_transitions=int(schedule.real_transitions))
    (out / f"rank{rank}.json").write_text(json.dumps(info))
    if not getattr(trainer.strategy, "zero_stage_3", False):
        torch.save({k: v.detach().clone() for k, v in module.state_dict().items()}, out / f"rank{rank}.pt")


class RankDump(Callback):
    """Callback form of :func:`_dump_rank` for modules we do not own (PolicyRL)."""

    def on_train_end(self, trainer, pl_module):
        _dump_rank(trainer, pl_module)


class ToyData(LightningDataModule):
    """Random regression data ``y = scale * sum(x)`` (a large ``scale`` makes every gradient exceed the clip norm)."""

    def __init__(self, n: int = 96, batch_size: int = 8, scale: float = 100.0):
        super().__init__()
        self.n, self.batch_size, self.scale = n, batch_size, scale

    def train_dataloader(self):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(self.n, 4, generator=g)
        return DataLoader(TensorDataset(x, self.scale * x.sum(1, keepdim=True)), batch_size=self.batch_size)


def _fit(tmp_path: Path, *args: str) -> None:
    """Run ``python -m dreamgym fit`` on ToyPolicy/ToyData in a subprocess; fail with its output on error."""
    cmd = [
        sys.executable, "-m", "dreamgym", "fit",
        "--model", "test_strategies.ToyPolicy", "--data", "test_strategies.ToyData",
        "--trainer.default_root_dir", str(tmp_path), "--trainer.logger", "false",
        "--trainer.enable_progress_bar", "false", "--trainer.enable_model_summary", "false",
        *args,
    ]  # fmt: skip
    _run(cmd)


def _run(cmd: list[str], timeout: int = SUBPROCESS_TIMEOUT_S, gpu: bool = False) -> None:
    """Run ``cmd`` from the repo root with ``tests/`` importable (CPU only unless ``gpu``); fail with its output."""
    # PYTHONFAULTHANDLER: an abort (exit -6) prints every thread's Python stack
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO / "tests"), str(REPO)]), PYTHONFAULTHANDLER="1"
    )
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore")
    if not gpu:
        env.update(CUDA_VISIBLE_DEVICES="", DS_ACCELERATOR="cpu")
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, (
        f"{' '.join(cmd)}\nexit {proc.returncode}\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}"
    )


def _initial_params() -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in ToyPolicy().state_dict().items()}


def _net_delta(params: dict[str, torch.Tensor], init: dict[str, torch.Tensor]) -> float:
    return float(
        torch.sqrt(
            sum(((params[k].detach().float() - init[k]) ** 2).sum() for k in init if k.startswith("net."))
        )
    )


def _assert_trained_and_clipped(
    params: dict[str, torch.Tensor], n_updates: int, lr: float = 0.1, clip: float = 1.0
):
    """Trainable params moved, by at most ``n_updates * lr * clip`` (so clipping was applied); ``ref`` did not move."""
    init = _initial_params()
    delta = _net_delta(params, init)
    assert delta > 0.5 * lr * clip, f"trainable parameters barely moved (|delta|={delta:.4f})"
    assert delta <= n_updates * lr * clip * 1.001, (
        f"|delta|={delta:.3f} exceeds {n_updates} clipped SGD steps: no clipping"
    )
    for k in init:
        if k.startswith("ref."):
            assert torch.equal(params[k].float(), init[k]), f"frozen {k} changed"


# ---------------------------------------------------------------- fast, in-process


def test_cpu_deepspeed_names_are_registered_for_trainer_strategy():
    from lightning.pytorch import Trainer

    from dreamgym.strategies import CPU_DEEPSPEED_NAMES, CPUDeepSpeedStrategy

    assert set(CPU_DEEPSPEED_NAMES) == {"deepspeed_cpu", "deepspeed_cpu_stage_2", "deepspeed_cpu_stage_3"}
    trainer = Trainer(accelerator="cpu", devices=1, strategy="deepspeed_cpu_stage_3", logger=False)
    assert isinstance(trainer.strategy, CPUDeepSpeedStrategy)
    assert trainer.strategy.zero_stage_3
    assert trainer.strategy.root_device == torch.device("cpu", 0)
    assert trainer.strategy.process_group_backend == "gloo"
    # Lightning's own names still give Lightning's strategy (not overwritten by ours)
    from lightning.pytorch.strategies import StrategyRegistry

    assert StrategyRegistry["deepspeed_stage_2"]["strategy"] is not CPUDeepSpeedStrategy


def test_cli_accepts_cpu_deepspeed_name_and_keeps_snippet_config(tmp_path):
    """``--trainer.strategy deepspeed_cpu_stage_3`` resolves in the CLI, and swapping the class of a GPU
    snippet keeps its DeepSpeed config (parse + instantiate only, nothing runs)."""
    from dreamgym.lightning_cli import _lightning_cli
    from dreamgym.strategies import CPUDeepSpeedStrategy

    common = ["--model", "test_strategies.ToyPolicy", "--data", "test_strategies.ToyData",
              "--trainer.logger", "false", "--trainer.default_root_dir", str(tmp_path)]  # fmt: skip
    cli = _lightning_cli([*common, "--trainer.strategy", "deepspeed_cpu_stage_3"], run=False)
    assert isinstance(cli.trainer.strategy, CPUDeepSpeedStrategy) and cli.trainer.strategy.zero_stage_3
    swapped = [
        "--config", str(REPO / "configs/strategies/deepspeed_zero2.yaml"), *CPU_OVERRIDES,
        "--trainer.strategy.class_path", "dreamgym.strategies.CPUDeepSpeedStrategy", "--trainer.devices", "1",
    ]  # fmt: skip
    strategy = _lightning_cli([*common, *swapped], run=False).trainer.strategy
    assert isinstance(strategy, CPUDeepSpeedStrategy)
    snippet = load_config(REPO / "configs/strategies/deepspeed_zero2.yaml")
    assert strategy.config == snippet["trainer"]["strategy"]["init_args"]["config"]


def test_cpu_deepspeed_rejects_nccl_with_a_fix():
    from dreamgym.strategies import CPUDeepSpeedStrategy

    with pytest.raises(ValueError, match="process_group_backend='nccl'.*gloo"):
        CPUDeepSpeedStrategy(process_group_backend="nccl")


def test_skip_shm_build_replaces_builder_once():
    from dreamgym.strategies import skip_deepspeed_shm_build

    skip_deepspeed_shm_build()  # `deepspeed.comm.torch` as an attribute is the torch package itself
    assert sys.modules["deepspeed.comm.torch"].build_shm_op() is None
    assert skip_deepspeed_shm_build() is False


def test_process_group_is_destroyed_at_exit_registered_once(tmp_path, monkeypatch):
    """A gloo group left alive at interpreter exit can abort a finished multi-process run (exit -6):
    the CLI and CPUDeepSpeedStrategy register one exit hook that destroys it while Python is alive."""
    import atexit

    import torch.distributed as dist

    from dreamgym import strategies

    registered = []
    monkeypatch.setattr(atexit, "register", registered.append)
    monkeypatch.setattr(strategies, "_EXIT_HOOK_REGISTERED", False)
    strategies.destroy_process_group_at_exit()
    strategies.destroy_process_group_at_exit()
    assert len(registered) == 1
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'store'}", rank=0, world_size=1)
    try:
        registered[0]()
        assert not dist.is_initialized()
        registered[0]()  # nothing left to destroy: a no-op
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()


def test_end_distributed_run_runs_exit_handlers_and_skips_finalisation(tmp_path):
    """A finished multi-process run ends with its atexit handlers run (the group destroyed, loggers
    closed) and without interpreter teardown, where Gloo's threads can abort the process; with no group
    up it returns and the program goes on."""
    script = f"""
import atexit, pathlib, sys
import torch.distributed as dist
from dreamgym.strategies import destroy_process_group_at_exit, end_distributed_run
out = pathlib.Path({str(tmp_path)!r})
end_distributed_run()  # no group yet: returns
(out / "went_on").write_text("")
class Finalised:
    def __del__(self):
        (out / "finalised").write_text("")
keep = Finalised()  # destroyed only in interpreter teardown
dist.init_process_group("gloo", init_method=f"file://{{out / 'store'}}", rank=0, world_size=1)
atexit.register(lambda: (out / "atexit").write_text(str(dist.is_initialized())))  # runs last (LIFO)
destroy_process_group_at_exit()
print("finished", flush=True)
end_distributed_run(3)
(out / "after").write_text("")
"""
    proc = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 3, proc.stderr
    assert "finished" in proc.stdout
    assert (tmp_path / "went_on").exists() and not (tmp_path / "after").exists()
    assert (tmp_path / "atexit").read_text() == "False"  # the handlers ran: the group was destroyed
    assert not (tmp_path / "finalised").exists()


def test_deepspeed_checkpoint_files_names_the_problem(tmp_path):
    from dreamgym.strategies import deepspeed_checkpoint_files

    with pytest.raises(FileNotFoundError, match="not a DeepSpeed checkpoint"):
        deepspeed_checkpoint_files(tmp_path / "last.ckpt")


@pytest.mark.parametrize("path", STRATEGY_CONFIGS, ids=lambda p: p.stem)
def test_strategy_snippet_is_a_trainer_only_gpu_config(path):
    """Each snippet only touches ``trainer``, targets GPUs in bf16, and builds its strategy on any machine."""
    import importlib

    cfg = load_config(path)  # with its configs/base/ piece
    assert set(cfg) == {"trainer"}, f"{path.name} must only set trainer options, got {sorted(cfg)}"
    trainer = cfg["trainer"]
    assert trainer["accelerator"] == "gpu" and trainer["precision"] == "bf16-mixed"
    module, _, name = trainer["strategy"]["class_path"].rpartition(".")
    strategy = getattr(importlib.import_module(module), name)(**trainer["strategy"]["init_args"])
    if "deepspeed" in path.stem:
        ds = strategy.config
        stage = int(path.stem[-1])
        assert ds["zero_optimization"]["stage"] == stage
        assert (
            "offload_optimizer" not in ds["zero_optimization"]
            and "offload_param" not in ds["zero_optimization"]
        )
        assert ds["gradient_clipping"] > 0, "manual optimisation: DeepSpeed must clip (Lightning cannot)"
        assert "gradient_accumulation_steps" not in ds, (
            "Lightning sets it from trainer.accumulate_grad_batches"
        )
    else:
        assert strategy.process_group_backend == "nccl"


def test_all_strategy_snippets_exist():
    assert {p.stem for p in STRATEGY_CONFIGS} >= {"ddp", "deepspeed_zero2", "deepspeed_zero3"}


# ---------------------------------------------------------------- multi-process, through the CLI


@pytest.mark.slow
def test_deepspeed_zero2_two_cpu_processes_clip_and_checkpoint(tmp_path):
    """configs/strategies/deepspeed_zero2.yaml with the CPU strategy swapped in: 2 ranks stay identical,
    DeepSpeed clips from its config, sharded optimizer checkpoint, consolidation to one fp32 file."""
    from dreamgym.strategies import consolidate_deepspeed_checkpoint, deepspeed_checkpoint_files

    _fit(
        tmp_path,
        "--config", "configs/strategies/deepspeed_zero2.yaml", *CPU_OVERRIDES,
        "--trainer.strategy.class_path", "dreamgym.strategies.CPUDeepSpeedStrategy", "--trainer.devices", "2",
        "--trainer.max_steps", "4",
    )  # fmt: skip
    (ckpt,) = (tmp_path / "checkpoints").glob("*.ckpt")
    names = {p.name for p in deepspeed_checkpoint_files(ckpt)}
    assert "mp_rank_00_model_states.pt" in names
    assert {f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)} <= names, names
    p0, p1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    for k in p0:
        assert torch.allclose(p0[k], p1[k], atol=1e-6), f"ZeRO-2 replicas diverged on {k}"
    _assert_trained_and_clipped(p0, n_updates=4)

    merged = consolidate_deepspeed_checkpoint(ckpt, tmp_path / "merged.ckpt")["state_dict"]
    for k, v in p0.items():
        assert torch.allclose(merged[k].float(), v.float(), atol=1e-6), (
            f"consolidated {k} differs from rank 0"
        )


@pytest.mark.slow
def test_deepspeed_zero3_cpu_shards_parameters(tmp_path):
    """configs/strategies/deepspeed_zero3.yaml on 2 CPU ranks: per-rank parameter shards, which merge
    back to trained, clipped parameters with the frozen reference untouched."""
    from dreamgym.strategies import consolidate_deepspeed_checkpoint, deepspeed_checkpoint_files

    _fit(
        tmp_path,
        "--config", "configs/strategies/deepspeed_zero3.yaml", *CPU_OVERRIDES,
        "--trainer.strategy.class_path", "dreamgym.strategies.CPUDeepSpeedStrategy", "--trainer.devices", "2",
        "--trainer.max_steps", "4",
    )  # fmt: skip
    (ckpt,) = (tmp_path / "checkpoints").glob("*.ckpt")
    names = {p.name for p in deepspeed_checkpoint_files(ckpt)}
    assert {f"zero_pp_rank_{r}_mp_rank_00_model_states.pt" for r in (0, 1)} <= names, names
    merged = consolidate_deepspeed_checkpoint(ckpt, tmp_path / "merged.ckpt")["state_dict"]
    _assert_trained_and_clipped(merged, n_updates=4)


# ---------------------------------------------------------------- PolicyRL (GRPO) under the strategies


def _rl_overrides(tmp_path: Path) -> Path:
    """Tiny overrides for ``configs/webshop_real_grpo.yaml``: a fresh ``tiny`` policy (toy tokenizer), 2 GRPO
    iterations of 2 tasks x group 2 on the real WebShop env, short episodes, a checkpoint every step."""
    tok = rl_toy.make_toy_tokenizer(tmp_path / "tok")
    env = {"batch_size": 4, "max_steps": 2}
    cfg = {
        "trainer": {
            "logger": False, "enable_progress_bar": False, "enable_model_summary": False,
            "default_root_dir": str(tmp_path), "val_check_interval": 2, "limit_val_batches": 1,
            "callbacks": [
                {"class_path": "test_strategies.RankDump"},
                {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                 "init_args": {"save_last": True, "every_n_train_steps": 1}},
            ],
        },
        "model": {"init_args": {
            "policy": {"init_args": {"path": None, "preset": "tiny", "tokenizer_path": tok, "max_positions": 512}},
            "schedule": {"init_args": {"iterations": 2, "env": {"init_args": env}}},
            "eval_env": {"init_args": {"batch_size": 2, "max_steps": 2}},
            # free decoding: with the toy tokenizer no admissible action fits in 4 tokens, so constrained
            # decoding would force every token (no choice, no gradient); it is tested in test_action_constraint
            "collector": {"init_args": {"max_new_tokens": 4, "max_prompt_tokens": 128, "constrained": False}},
            "optimizer": {"init_args": {"lr": 1.0e-3}},
            "tasks_per_batch": 2, "group_size": 2, "minibatches": 2, "save_dir": None,
            "loss": {"class_path": "dreamgym.rl.objective.ClipPPOLoss", "init_args": {"entropy_coef": 0.01}},  # a gradient even when a fresh policy earns no reward (zero GRPO advantages)
        }},
        "data": {"init_args": {"eval_tasks": 4}},
    }  # fmt: skip
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _fit_rl(tmp_path: Path, *args: str, gpu: bool = False) -> None:
    """``python -m dreamgym fit --config configs/webshop_real_grpo.yaml --config <tiny overrides> *args``."""
    base = ["--config", "configs/webshop_real_grpo.yaml", "--config", str(_rl_overrides(tmp_path))]
    _run([sys.executable, "-m", "dreamgym", "fit", *base, *args], gpu=gpu)


def _assert_rl_replicas(tmp_path: Path, iterations: int = 2, minibatches: int = 2) -> dict[str, torch.Tensor]:
    """Both ranks ran every iteration, counted the real transitions of both, and hold identical policies."""
    ranks = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:
        assert r["world_size"] == 2 and r["iteration"] == iterations, ranks
        assert r["global_step"] == iterations * minibatches, ranks
    assert ranks[0]["real_transitions"] == ranks[1]["real_transitions"] > 0, ranks
    p0, p1 = (torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1))
    for k in p0:
        assert torch.allclose(p0[k], p1[k], atol=1e-6), f"policy replicas diverged on {k}"
    from dreamgym.modeling import LanguageModel

    fresh, _ = LanguageModel(preset="tiny", tokenizer_path=str(tmp_path / "tok"), max_positions=512).build()
    assert any(not torch.equal(p0[f"model.{k}"], v) for k, v in fresh.state_dict().items()), (
        "policy did not train"
    )
    return p0


@pytest.mark.slow
def test_policy_rl_grpo_ddp_two_cpu_processes(tmp_path):
    """PolicyRL through the CLI with configs/strategies/ddp.yaml on 2 CPU processes."""
    _fit_rl(
        tmp_path,
        "--config", "configs/strategies/ddp.yaml", *CPU_OVERRIDES,
        "--trainer.devices", "2", "--trainer.strategy.init_args.process_group_backend", "gloo",
    )  # fmt: skip
    _assert_rl_replicas(tmp_path)
    ckpt = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)
    assert ckpt["dreamgym_rl"]["schedule"], "RL state missing from the DDP checkpoint"


@pytest.mark.slow
def test_policy_rl_grpo_deepspeed_zero2_two_cpu_processes_and_resume(tmp_path):
    """PolicyRL through the CLI with configs/strategies/deepspeed_zero2.yaml (CPU strategy swapped in),
    then resumed from its DeepSpeed checkpoint: RL counters come back from DeepSpeed's client state."""
    from dreamgym.strategies import deepspeed_checkpoint_files

    ds = [
        "--config", "configs/strategies/deepspeed_zero2.yaml", *CPU_OVERRIDES,
        "--trainer.strategy.class_path", "dreamgym.strategies.CPUDeepSpeedStrategy", "--trainer.devices", "2",
    ]  # fmt: skip
    _fit_rl(tmp_path, *ds)
    p0 = _assert_rl_replicas(tmp_path)
    ckpt = tmp_path / "checkpoints" / "last.ckpt"
    files = {p.name: p for p in deepspeed_checkpoint_files(ckpt)}
    assert {f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in (0, 1)} <= set(files), sorted(files)
    states = torch.load(files["mp_rank_00_model_states.pt"], weights_only=False)
    assert states["dreamgym_rl"]["schedule"], "RL state missing from the DeepSpeed checkpoint"
    first = json.loads((tmp_path / "rank0.json").read_text())

    resumed = tmp_path / "resumed"
    resumed.mkdir()
    _fit_rl(
        tmp_path, *ds, "--trainer.default_root_dir", str(resumed), "--ckpt_path", str(ckpt),
        "--model.init_args.schedule.init_args.iterations", "3",
    )  # fmt: skip
    ranks = [json.loads((resumed / f"rank{r}.json").read_text()) for r in (0, 1)]
    for r in ranks:
        assert r["iteration"] == 3 and r["global_step"] == 6, ranks  # one more iteration, not three
        assert r["real_transitions"] > first["real_transitions"], (ranks, first)
    p_resumed = torch.load(resumed / "rank0.pt")
    assert any(not torch.equal(p_resumed[k], v) for k, v in p0.items()), "resumed run did not train"


@pytest.mark.gpu
@pytest.mark.parametrize("snippet", STRATEGY_CONFIGS, ids=lambda p: p.stem)
def test_policy_rl_grpo_on_one_gpu_with_the_real_snippet(snippet, tmp_path):
    """The GPU snippets as shipped (bf16-mixed, NCCL / Lightning's DeepSpeedStrategy) on one GPU.
    Run with ``CUDA_VISIBLE_DEVICES=0 pytest -m gpu tests/test_strategies.py`` (conftest hides GPUs otherwise)."""
    _fit_rl(tmp_path, "--config", str(snippet), "--trainer.devices", "1", gpu=True)
    info = json.loads((tmp_path / "rank0.json").read_text())
    assert info["iteration"] == 2 and info["global_step"] == 4 and info["real_transitions"] > 0, info
