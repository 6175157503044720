"""Every YAML in configs/ parses and instantiates (tiny overrides for model paths), the shared pieces in
configs/base/ as part of the configs built on them; every fit stage of every pipeline config and every arm
of every benchmark suite resolves into its LightningCLI config (the config pieces in configs/pieces/ as
part of them); no block of lines is repeated across the YAMLs; links and ``--print_config`` round-trip."""

import contextlib
import glob
import io
import os
import re
from collections import defaultdict
from pathlib import Path

import pytest
import torch
import yaml
from rl_toy import make_toy_tokenizer

from dreamgym.config_files import BASE_KEY, load_config
from dreamgym.lightning_cli import _lightning_cli

ROOT = Path(__file__).resolve().parents[1]
ALL_YAML = sorted(glob.glob(str(ROOT / "configs" / "**" / "*.yaml"), recursive=True))
PIECES = [p for p in ALL_YAML if Path(p).parent == ROOT / "configs" / "base"]
"""Shared pieces: not configs of their own, each instantiated inside the configs that name it."""
OVERRIDE_PIECES = [p for p in ALL_YAML if Path(p).parent == ROOT / "configs" / "pieces"]
"""Config pieces that pipeline stages and suite arms list (dreamgym/lab/overrides.py): each resolved with
the fits that list it."""
CONFIGS = [p for p in ALL_YAML if p not in PIECES and p not in OVERRIDE_PIECES]
SUITES = [p for p in CONFIGS if Path(p).name.startswith("benchmark_")]
PIPELINES = [p for p in CONFIGS if Path(p).name.startswith("pipeline_")]
REPEAT_LINES = 8
"""No block of this many (non-blank, non-comment) lines may appear twice in configs/."""


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


def _bases(path: str) -> set[str]:
    """Every file ``path`` names in a ``__base__`` (at any depth), and theirs, as absolute paths."""
    found, todo = set(), [path]
    while todo:
        here = todo.pop()

        def walk(node, here=here):
            if isinstance(node, dict):
                refs = node.get(BASE_KEY) or []
                for ref in [refs] if isinstance(refs, str) else refs:
                    target = str((Path(here).parent / ref).resolve())
                    if target not in found:
                        found.add(target)
                        todo.append(target)
                for value in node.values():
                    walk(value)
            elif isinstance(node, list):
                for value in node:
                    walk(value)

        walk(yaml.safe_load(open(here)))
    return found


def test_every_piece_is_part_of_a_tested_config():
    """A piece in configs/base/ is instantiated only through the configs built on it: each must have one."""
    used = set().union(*(_bases(p) for p in CONFIGS))
    assert PIECES and used, "the configs are composed from configs/base/"
    assert sorted(set(PIECES) - used) == []
    assert used <= set(ALL_YAML), f"a __base__ outside configs/: {sorted(used - set(ALL_YAML))}"


def _normalised_lines(path: str) -> list[tuple[int, str]]:
    """``(line number, text)`` of a YAML's lines with comments, blank lines and indentation removed."""
    out = []
    for number, line in enumerate(open(path, encoding="utf-8"), start=1):
        text = " ".join(re.sub(r"(^|\s)#.*$", "", line).split())
        if text:
            out.append((number, text))
    return out


def repeated_blocks(paths: list[str], size: int = REPEAT_LINES) -> list[str]:
    """``"a.yaml:3-12 = b.yaml:40-49"`` for every block of ``size`` normalised lines found twice (or more)
    across ``paths`` (a longer repeat shows as one entry per file pair, its overlapping windows merged)."""
    seen = defaultdict(list)
    for path in paths:
        lines = _normalised_lines(path)
        for i in range(len(lines) - size + 1):
            window = tuple(text for _, text in lines[i : i + size])
            seen[window].append((os.path.relpath(path, ROOT), lines[i][0], lines[i + size - 1][0]))
    spans: dict[tuple[str, str], list[list[int]]] = defaultdict(list)
    for places in seen.values():
        for (fa, a0, a1), (fb, b0, b1) in zip(places, places[1:], strict=False):
            runs = spans[(fa, fb)]
            if runs and a0 <= runs[-1][1] + 1 and b0 <= runs[-1][3] + 1:
                runs[-1][1], runs[-1][3] = max(runs[-1][1], a1), max(runs[-1][3], b1)
            else:
                runs.append([a0, a1, b0, b1])
    return sorted(f"{fa}:{r[0]}-{r[1]} = {fb}:{r[2]}-{r[3]}" for (fa, fb), rs in spans.items() for r in rs)


def test_no_block_of_lines_is_repeated_across_configs():
    """Shared settings are written once (a piece in configs/base/ named by ``__base__``), not copied."""
    found = repeated_blocks(ALL_YAML)
    assert not found, (
        f"{len(found)} repeated block(s) of >= {REPEAT_LINES} lines (comments and indentation ignored); "
        "move each into a configs/base/ piece:\n" + "\n".join(found)
    )


def test_the_repeat_check_finds_a_copied_block(tmp_path):
    block = "".join(f"  key_{i}: {i}  # a comment\n" for i in range(REPEAT_LINES))
    (tmp_path / "a.yaml").write_text("a: 1\nshared:\n" + block)
    (tmp_path / "b.yaml").write_text("shared:\n\n" + block.replace("  ", "    ") + "b: 2\n")
    (tmp_path / "c.yaml").write_text("shared:\n" + block.replace("key_3", "other"))
    found = repeated_blocks([str(tmp_path / n) for n in ("a.yaml", "b.yaml", "c.yaml")])
    rel = os.path.relpath(tmp_path, ROOT)
    assert found == [f"{rel}/a.yaml:2-10 = {rel}/b.yaml:1-10"]


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
    loaded = {p: load_config(p) for p in CONFIGS}
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
    cfg = load_config(path)  # composed from its configs/base/ pieces
    if _is_model_snippet(cfg):
        assert any(snip == path for snip, _ in SNIPPET_PAIRS), f"{path} composes with no stage config"
        pytest.skip("model snippet: instantiated with each stage config it composes with (below)")
    if "model" not in cfg:
        if cfg.get("trainer", {}).get("accelerator") == "gpu" and not torch.cuda.is_available():
            pytest.skip(
                "trainer snippet for GPUs (combined with a stage config; see tests/test_strategies.py)"
            )
        if "arms" in cfg:  # a benchmark suite: its pipeline and every arm's RL config are bundled configs
            from dreamgym.lab.benchmark.suite import parse_suite_config

            suite, _ = parse_suite_config(["--config", path])
            assert str(ROOT / suite.pipeline) in CONFIGS
            for arm in suite.arms:
                assert arm.rl_config is None or str(ROOT / arm.rl_config) in CONFIGS, arm.rl_config
                suite.arm_overrides(arm, seed=0)  # every template has its value (resolved below)
            return
        if "stages" in cfg or "out_dir" in cfg:
            from dreamgym.lab.pipeline import PipelineConfig, parse_pipeline_config

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
    cfg, snip = load_config(stage), load_config(snippet)
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
    names = [type(c).__name__ for c in cli.trainer.callbacks]
    assert "ReleaseFreeHeap" in names and "ModelCheckpoint" in names  # persistent + the config's own
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
    base = ["--config", path, *_overrides(load_config(path), tiny_dirs),
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
    base = ["--config", path, *_overrides(load_config(path), tiny_dirs),
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


# ------------------------------------------------------------- pipeline stages and suite arms, resolved
X = Path("/nonexistent")
"""Where the resolved fits' inputs would be (only parsed: nothing is read)."""


def _pipeline_fits(pcfg) -> list[tuple[str, str, list, str]]:
    """``(stage, config, overrides, export key)`` of every fit stage ``pcfg`` runs, built by the functions
    :func:`dreamgym.lab.pipeline.prepare` and :func:`~dreamgym.lab.pipeline.run_pipeline` use."""
    from dreamgym.lab import pipeline as p

    tok, train, test, exp = X / "tokenizer", [X / "offline_train.jsonl"], X / "offline_test.jsonl", X / "exp"
    fits = [
        (
            "experience_sft",
            pcfg.experience_config,
            p.experience_fit(pcfg, tok, train, test),
            p.EXPERIENCE_EXPORT,
        ),
        (
            "policy_sft",
            pcfg.policy_sft_config,
            p.policy_sft_fit(pcfg, train, test, tokenizer=tok),
            p.POLICY_EXPORT,
        ),
        ("rl", pcfg.rl_config, p.rl_fit(pcfg, exp, X / "policy_sft"), p.POLICY_EXPORT),
    ]
    if pcfg.onpolicy_tasks > 0:
        onpolicy = p.experience_fit(pcfg, tok, [*train, X / "rollouts.jsonl"], test, init=exp)
        fits.append(("experience_onpolicy", pcfg.experience_config, onpolicy, p.EXPERIENCE_EXPORT))
    if pcfg.dagger_tasks > 0:
        dagger = p.policy_sft_fit(pcfg, [*train, X / "labels.jsonl"], test, init=X / "policy_sft")
        fits.append(("policy_dagger", pcfg.policy_sft_config, dagger, p.POLICY_EXPORT))
    if pcfg.judge_config is not None:
        judge = p.judge_fit(pcfg, train[0], X / "rollouts.jsonl", test, X / "purchases.jsonl")
        fits.append(("reward_judge", pcfg.judge_config, judge, p.EXPERIENCE_EXPORT))
    return fits


_RESOLVED: dict[str, dict] = {}
"""Resolved fits by their config and overrides (a suite's pipeline repeats a bundled pipeline's stages)."""


def _without_one_init_args(key: str) -> list[str]:
    """``key`` with one of its ``.init_args`` levels dropped: a dataclass argument given as
    ``class_path``/``init_args`` (``judge: {init_args: {score_head: true}}``) resolves to its fields alone."""
    parts = key.split(".")
    return [".".join(parts[:i] + parts[i + 1 :]) for i, p in enumerate(parts) if p == "init_args"]


def _resolve(config: str, overrides: list, export_key: str, tmp_path: Path) -> dict:
    """The LightningCLI config a fit stage runs (:func:`dreamgym.lab.stages.fit_stage`'s arguments: its
    logger folder, ``overrides``, its export), parsed and checked, nothing built; every value the
    overrides set is in it."""
    import json

    from dreamgym.config_files import flat_settings
    from dreamgym.lab.stages import overrides_argv, stage_overrides
    from dreamgym.lightning_cli import resolve_config

    key = json.dumps([config, overrides, export_key], sort_keys=True)
    if key not in _RESOLVED:
        stage = stage_overrides(overrides, X / "runs" / "stage", export_key, X / "out")
        _RESOLVED[key] = resolve_config(
            ["--config", config, *overrides_argv(stage, tmp_path / f"p{len(_RESOLVED)}")]
        )
    resolved = flat_settings([_RESOLVED[key]])
    pieces = [flat_settings([o]) for o in overrides if isinstance(o, dict)]  # `--key+=value` strings aside
    for i, piece in enumerate(pieces):
        later = {k for p in pieces[i + 1 :] for k in p}
        for k, v in piece.items():
            # `estimator: a.B` resolves to `estimator.class_path`; a dataclass's `init_args` to its fields
            spellings = [k, f"{k}.class_path", *_without_one_init_args(k)]
            got = next((resolved[s] for s in spellings if s in resolved), None)
            parent = k.rpartition(".")[0] + "."
            missing = not any(s in resolved for s in spellings)
            if k in later or (missing and any(o.startswith(parent) for o in later)):
                continue  # a later piece sets it, or sets its mapping whole (an env's `kwargs`)
            assert got == v, f"{config}: {k} = {v!r} in the overrides, {got!r} in the resolved config"
    return _RESOLVED[key]


_SUITE_RUNS = [
    (p, quick) for p in SUITES for quick in (False, True) if not quick or "quick_preset" in load_config(p)
]


@pytest.mark.parametrize(
    "path,quick",
    _SUITE_RUNS,
    ids=[os.path.relpath(p, ROOT) + ("[quick]" if q else "") for p, q in _SUITE_RUNS],
)
def test_every_arm_and_shared_fit_of_a_suite_resolves(path, quick, tmp_path, monkeypatch):
    """Each RL arm's fit (its warm start's and simulator's paths, the seed, the suite's common overrides,
    its own), each experience variant's two fits and every fit of the suite's pipeline (with the suite's
    pipeline_overrides) resolves into its LightningCLI config: a misspelt or renamed option fails here.
    ``--quick`` adds one common piece to the same arms: one arm per RL config checks it."""
    from dreamgym.lab.benchmark.suite import parse_suite_config, suite_pipeline_config
    from dreamgym.lab.pipeline import EXPERIENCE_EXPORT, POLICY_EXPORT, experience_fit, rl_paths

    monkeypatch.chdir(ROOT)
    cfg, _ = parse_suite_config(
        ["--config", os.path.relpath(path, ROOT), *(["--quick=true"] if quick else [])]
    )
    arms = [a for a in cfg.arms if a.rl_config is not None]
    if quick:
        arms = list({a.rl_config: a for a in arms}.values())
    for arm in arms:
        paths = rl_paths(arm.rl_config, X / "simulator", X / "policy_sft")
        resolved = _resolve(arm.rl_config, [paths, *cfg.arm_overrides(arm, 1)], POLICY_EXPORT, tmp_path)
        assert (resolved["seed_everything"], resolved["model"]["init_args"]["save_dir"]) == (
            1,
            str(X / "out"),
        )
    pcfg = suite_pipeline_config(cfg)
    tok, train, test = X / "tokenizer", [X / "offline_train.jsonl"], X / "offline_test.jsonl"
    for variant in cfg.variants.values():
        for init in (None, X / "first"):
            fit = [*experience_fit(pcfg, tok, train, test, init=init), *variant.overrides]
            _resolve(pcfg.experience_config, fit, EXPERIENCE_EXPORT, tmp_path)
    for _, config, overrides, export in _pipeline_fits(pcfg):
        _resolve(config, overrides, export, tmp_path)


@pytest.mark.parametrize("path", PIPELINES, ids=[os.path.relpath(p, ROOT) for p in PIPELINES])
def test_every_fit_stage_of_a_pipeline_resolves(path, tmp_path, monkeypatch):
    from dreamgym.lab.pipeline import parse_pipeline_config

    monkeypatch.chdir(ROOT)
    pcfg = parse_pipeline_config(["--config", os.path.relpath(path, ROOT)])
    fits = _pipeline_fits(pcfg)
    assert {"experience_sft", "policy_sft", "rl"} <= {name for name, *_ in fits}
    for _, config, overrides, export in fits:
        _resolve(config, overrides, export, tmp_path)


def test_every_config_piece_is_listed_by_a_bundled_suite_or_pipeline():
    """A piece in configs/pieces/ is resolved only with the fits that list it (above): each must have one."""
    listed = "".join(open(p).read() for p in [*SUITES, *PIPELINES, *PIECES])
    assert OVERRIDE_PIECES and [p for p in OVERRIDE_PIECES if os.path.relpath(p, ROOT) not in listed] == []


def test_a_misspelt_or_misplaced_override_fails_to_resolve(tmp_path):
    config = str(ROOT / "configs" / "webshop_grpo.yaml")
    paths = {"model": {"init_args": {"policy": {"init_args": {"path": "p"}}}}}
    with pytest.raises(ValueError, match="tasks_per_bach"):
        _resolve(
            config,
            [paths, {"model": {"init_args": {"tasks_per_bach": 2}}}],
            "model.init_args.save_dir",
            tmp_path,
        )
    with pytest.raises(ValueError, match="real_env"):  # a Sim2RealSchedule argument on a SyntheticSchedule
        sched = {
            "model": {
                "init_args": {"schedule": {"init_args": {"real_env": {"init_args": {"batch_size": 2}}}}}
            }
        }
        _resolve(config, [paths, sched], "model.init_args.save_dir", tmp_path)


def test_resolve_config_merges_pieces_as_lightningcli_does(tmp_path):
    """Several ``--config`` pieces: ``init_args`` without a ``class_path`` fill the class the config chose
    (its other arguments kept), a mapping-valued argument (an env's ``kwargs``) and a list are replaced
    whole, a class path given as a string picks that class."""
    from dreamgym.lightning_cli import resolve_config

    env = {"init_args": {"kwargs": {"write_back": True, "ground": True, "unrecorded": "search"}}}
    first = {
        "model": {
            "init_args": {"optimizer": {"init_args": {"lr": 5.0e-4}}, "schedule": {"init_args": {"env": env}}}
        }
    }
    second = {
        "model": {
            "init_args": {
                "estimator": "dreamgym.rl.advantages.GiGPOAdvantage",
                "schedule": {"init_args": {"env": {"init_args": {"kwargs": {"write_back": True}}}}},
            }
        },
        "trainer": {"callbacks": []},
    }
    argv = ["--config", str(ROOT / "configs" / "webshop_grpo.yaml")]
    for i, piece in enumerate((first, second)):
        (tmp_path / f"{i}.yaml").write_text(yaml.safe_dump(piece))
        argv += ["--config", str(tmp_path / f"{i}.yaml")]
    resolved = resolve_config(argv)
    model = resolved["model"]["init_args"]
    assert model["optimizer"]["class_path"] == "torch.optim.AdamW"
    assert (
        model["optimizer"]["init_args"]["lr"] == 5.0e-4
        and model["optimizer"]["init_args"]["weight_decay"] == 0.0
    )
    assert model["schedule"]["init_args"]["env"]["init_args"]["kwargs"] == {"write_back": True}
    assert model["schedule"]["init_args"]["env"]["init_args"]["real_env"] == "webshop"  # the config's own
    assert model["estimator"]["class_path"] == "dreamgym.rl.advantages.GiGPOAdvantage"
    assert resolved["trainer"]["callbacks"] == []
