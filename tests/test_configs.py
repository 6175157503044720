"""Every YAML in configs/ parses and instantiates (tiny overrides for model paths); links and
``--print_config`` round-trip."""

import contextlib
import glob
import io
import os
from pathlib import Path

import pytest
import torch
import yaml
from rl_toy import make_toy_tokenizer

from dreamgym.cli import _lightning_cli

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted(glob.glob(str(ROOT / "configs" / "**" / "*.yaml"), recursive=True))


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    from dreamgym.modeling import LanguageModel

    root = tmp_path_factory.mktemp("cfg")
    tok = make_toy_tokenizer(root / "tok")
    model, tokenizer = LanguageModel(preset="tiny", tokenizer_path=tok, max_positions=256).build()
    model.save_pretrained(root / "policy")
    tokenizer.save_pretrained(root / "policy")
    return {"tok": tok, "policy": str(root / "policy")}


def _overrides(cfg: dict, dirs: dict) -> list[str]:
    """Point every model spec at tiny local models; nothing else changes."""
    model = cfg.get("model", {})
    args = model.get("init_args", {})
    out = []
    for key in ("policy", "lm"):
        spec = args.get(key)
        if not spec:
            continue
        if spec.get("init_args", {}).get("path"):
            out += [f"--model.init_args.{key}.init_args.path={dirs['policy']}"]
        else:
            out += [f"--model.init_args.{key}.init_args.tokenizer_path={dirs['tok']}",
                    f"--model.init_args.{key}.init_args.preset=tiny"]  # fmt: skip
    sched = args.get("schedule", {}).get("init_args", {})
    for key in ("env", "synthetic_env"):
        if str(sched.get(key, {}).get("class_path", "")).endswith("SyntheticEnvFactory"):
            # only its existence is checked at config time; the env is built at the first RL step
            out.append(f"--model.init_args.schedule.init_args.{key}.init_args.checkpoint={dirs['policy']}")
    return out


def test_missing_inputs_name_the_command(tiny_dirs, tmp_path):
    from dreamgym.envs.factory import SyntheticEnvFactory
    from dreamgym.modeling import LanguageModel
    from dreamgym.rl.schedules import SyntheticSchedule
    from models.policy_rl import PolicyRL

    with pytest.raises(FileNotFoundError, match="configs/webshop_policy_sft.yaml"):
        PolicyRL(
            LanguageModel(path=str(tmp_path / "none")),
            SyntheticSchedule(SyntheticEnvFactory(checkpoint=tiny_dirs["policy"])),
        )
    with pytest.raises(FileNotFoundError, match="configs/webshop_experience_sft.yaml"):
        PolicyRL(
            LanguageModel(path=tiny_dirs["policy"]),
            SyntheticSchedule(SyntheticEnvFactory(checkpoint=str(tmp_path / "none"))),
        )


def _is_model_snippet(cfg: dict) -> bool:
    """A model snippet (``configs/models/``): a ``model`` without a class, composed with a stage config."""
    return isinstance(cfg.get("model"), dict) and "class_path" not in cfg["model"]


def _snippet_pairs() -> list[tuple[str, str]]:
    """(snippet, stage config) for every stage config whose model takes the model keys a snippet sets."""
    loaded = {p: yaml.safe_load(open(p)) for p in CONFIGS}
    pairs = []
    for snip, s in loaded.items():
        if not _is_model_snippet(s):
            continue
        keys = set(s["model"].get("init_args", {}))
        stages = [p for p, c in loaded.items() if "class_path" in (c.get("model") or {})]
        pairs += [(snip, p) for p in stages if keys <= set(loaded[p]["model"].get("init_args", {}))]
    return pairs


SNIPPET_PAIRS = _snippet_pairs()


@pytest.mark.parametrize("path", CONFIGS, ids=[os.path.relpath(p, ROOT) for p in CONFIGS])
def test_config_instantiates(path, tiny_dirs, tmp_path):
    cfg = yaml.safe_load(open(path))
    if _is_model_snippet(cfg):
        assert any(snip == path for snip, _ in SNIPPET_PAIRS), f"{path} composes with no stage config"
        pytest.skip("model snippet: instantiated with each stage config it composes with (below)")
    if "model" not in cfg:
        if cfg.get("trainer", {}).get("accelerator") == "gpu" and not torch.cuda.is_available():
            pytest.skip(
                "trainer snippet for GPUs (combined with a stage config; see tests/test_strategies.py)"
            )
        if "arms" in cfg:  # a benchmark suite: its pipeline and every arm's RL config are bundled configs
            from dreamgym.benchmark.suite import parse_suite_config

            suite, _ = parse_suite_config(["--config", path])
            assert str(ROOT / suite.pipeline) in CONFIGS
            for arm in suite.arms:
                assert arm.rl_config is None or str(ROOT / arm.rl_config) in CONFIGS, arm.rl_config
                suite.fill([*suite.common_args, *arm.args], seed=0)  # every template has its value
            return
        if "stages" in cfg or "out_dir" in cfg:
            from dreamgym.pipeline import PipelineConfig, parse_pipeline_config

            assert isinstance(parse_pipeline_config(["--config", path]), PipelineConfig)
            return
        pytest.skip("not a stage config")
    argv = ["--config", path, *_overrides(cfg, tiny_dirs), f"--trainer.default_root_dir={tmp_path}"]
    cli = _lightning_cli(argv, run=False)
    assert cli.model is not None and cli.datamodule is not None
    assert type(cli.model).__name__ == cfg["model"]["class_path"].rsplit(".", 1)[1]


@pytest.mark.parametrize(
    "snippet,stage", SNIPPET_PAIRS, ids=[f"{Path(a).stem}+{Path(b).stem}" for a, b in SNIPPET_PAIRS]
)
def test_model_snippet_composes_with_the_stage_config(snippet, stage, tiny_dirs, tmp_path):
    """``--config STAGE --config SNIPPET`` swaps the model and keeps the rest of the stage config; the
    snippet's model path is pointed at a tiny local model (its LoRA adapters stay on)."""
    pytest.importorskip("peft")
    cfg, snip = yaml.safe_load(open(stage)), yaml.safe_load(open(snippet))
    argv = [
        "--config",
        stage,
        "--config",
        snippet,
        *_overrides(cfg, tiny_dirs),
        f"--trainer.default_root_dir={tmp_path}",
    ]
    for key in snip["model"]["init_args"]:
        argv.append(f"--model.init_args.{key}.init_args.path={tiny_dirs['policy']}")
    cli = _lightning_cli(argv, run=False)
    assert type(cli.model).__name__ == cfg["model"]["class_path"].rsplit(".", 1)[1]
    assert cli.trainer.max_steps == (cfg["trainer"].get("max_steps") or -1)  # the stage's own settings
    lora = [n for n, _ in cli.model.model.named_parameters() if "lora_" in n]
    assert lora and all(p.requires_grad == ("lora_" in n) for n, p in cli.model.model.named_parameters())


def test_rl_links_and_print_config_round_trip(tiny_dirs, tmp_path):
    path = str(ROOT / "configs" / "webshop_ppo.yaml")
    over = [f"--model.init_args.policy.init_args.path={tiny_dirs['policy']}", "--model.init_args.eval_env.init_args.batch_size=3",
            f"--model.init_args.schedule.init_args.env.init_args.checkpoint={tiny_dirs['policy']}"]  # fmt: skip
    cli = _lightning_cli(["--config", path, *over], run=False)
    assert cli.datamodule.eval_batch_tasks == 3  # linked from the eval env's slots
    assert cli.model.estimator.name == "gae" and cli.model.critic is not None
    printed = _print_config(["fit", "--config", path, *over])
    dumped = tmp_path / "dumped.yaml"
    dumped.write_text(printed)
    assert yaml.safe_load(_print_config(["fit", "--config", str(dumped)])) == yaml.safe_load(printed)


def _print_config(argv):
    """What ``python -m dreamgym <argv> --print_config`` prints (in-process)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), pytest.raises(SystemExit) as exit_info:
        _lightning_cli([*argv, "--print_config"])
    assert exit_info.value.code in (0, None)
    return buf.getvalue()


def test_the_cli_fills_an_unset_precision_and_keeps_a_given_one(tiny_dirs, tmp_path, monkeypatch):
    from dreamgym import precision

    monkeypatch.setattr(precision, "fast_bf16", lambda device: True)
    path = str(ROOT / "configs" / "webshop_policy_sft.yaml")
    base = ["--config", path, *_overrides(yaml.safe_load(open(path)), tiny_dirs),
            f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false"]  # fmt: skip
    cli = _lightning_cli(base, run=False)
    assert cli.trainer.precision == "bf16-mixed"
    from dreamgym.checkpoint_io import AtomicCheckpointIO

    assert isinstance(cli.trainer.strategy.checkpoint_io, AtomicCheckpointIO)  # every fit saves atomically
    given = _lightning_cli([*base, "--trainer.precision=32-true"], run=False)
    assert given.trainer.precision == "32-true"


def test_seed_everything_reaches_the_warm_starts_init_and_batch_order(tiny_dirs, tmp_path):
    """``--seed_everything=1`` trained the same warm start as 0 (model init and batch order had seeds
    of their own, both 0); now parts without a seed take the run's, and a pinned one still wins."""
    path = str(ROOT / "configs" / "webshop_policy_sft.yaml")
    base = ["--config", path, *_overrides(yaml.safe_load(open(path)), tiny_dirs),
            f"--trainer.default_root_dir={tmp_path}", "--trainer.logger=false"]  # fmt: skip

    def built(*extra):
        cli = _lightning_cli([*base, *extra], run=False)
        weights = torch.cat([p.detach().flatten() for p in cli.model.model.parameters()])
        return weights, cli.datamodule.seed

    w0, s0 = built("--seed_everything=0")
    w1, s1 = built("--seed_everything=1")
    pinned, s_pinned = built("--seed_everything=1", "--model.init_args.policy.init_args.seed=0",
                             "--data.init_args.seed=0")  # fmt: skip
    assert (s0, s1, s_pinned) == (0, 1, 0)
    assert not torch.equal(w0, w1)
    assert torch.equal(w0, pinned)
