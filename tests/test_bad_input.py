"""The bad-input battery: every case gets one actionable message (the field, the value, the fix) and
changes no file. Junk actions for the real and synthetic envs are in ``test_synthetic_env.py``
(``ACTION_BATTERY``), out-of-range model outputs also in ``test_formats.py``."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch
from tensordict import NonTensorStack

from dreamgym.cli import main
from dreamgym.errors import did_you_mean, run_guarded, user_message
from dreamgym.modeling.formats import parse_target
from dreamgym.schema import TrajectoryFileError, read_trajectories

ROOT = Path(__file__).resolve().parents[1]
GRPO = str(ROOT / "configs" / "webshop_grpo.yaml")


def _digest(paths) -> dict[str, str]:
    return {str(p): hashlib.sha256(Path(p).read_bytes()).hexdigest() for p in paths if Path(p).is_file()}


# ------------------------------------------------------------------------------------------- configs
@pytest.mark.parametrize(
    "arg, expected",
    [
        ("--model.init_args.tasks_per_bach=3", r"tasks_per_bach.*did you mean 'tasks_per_batch'"),
        ("--trainer.max_step=3", r"trainer.max_step.*did you mean '--trainer.max_steps'"),
        ("--model.init_args.group_size=abc", r"group_size: expected int, got abc"),
        ("--no_such_key=1", r"unrecognized arguments: --no_such_key=1"),
    ],
)
def test_config_typos_get_one_message_with_a_suggestion(arg, expected, tmp_path):
    before = _digest([GRPO])
    with pytest.raises(ValueError, match=expected) as info:
        main(["fit", "--config", GRPO, arg, "--print_config"])
    message = str(info.value)
    assert "\n" not in message and "python -m dreamgym fit --help" in message
    assert _digest([GRPO]) == before


def test_did_you_mean_uses_the_class_signature():
    msg = "Problem with given class_path 'dreamgym.rl.audit.RewardAudit':\n Option 'episdes' is not accepted"
    assert did_you_mean(msg) == ["'episdes': did you mean 'episodes'?"]
    assert did_you_mean("unrecognized arguments: --zzz=1", ["trainer.max_steps"]) == []


# ----------------------------------------------------------------------------------- the boundary
def _package_error(argv):
    from dreamgym.envs.webshop import WebShopEnv

    WebShopEnv(batch_size=[0])


def test_boundary_prints_one_line_and_exit_code_2(capsys):
    assert run_guarded(_package_error, []) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: WebShopEnv.batch_size=[0]") and "Traceback" not in "".join(err)
    assert len(err) == 2 and "--debug" in err[1]


def test_boundary_shows_tracebacks_of_foreign_errors_and_with_debug(monkeypatch):
    def foreign(argv):
        raise ValueError("raised outside the package")  # this test file is not package code

    with pytest.raises(ValueError, match="outside"):
        run_guarded(foreign, [])
    with pytest.raises(ValueError, match=r"batch_size=\[0\]"):
        run_guarded(_package_error, ["--debug"])
    monkeypatch.setenv("DREAMGYM_DEBUG", "1")
    with pytest.raises(ValueError):
        run_guarded(_package_error, [])


def test_user_message_finds_the_package_error_inside_a_chain():
    try:
        try:
            _package_error([])
        except ValueError as inner:
            raise RuntimeError("wrapper from a library") from inner
    except RuntimeError as outer:
        assert "batch_size=[0]" in user_message(outer)


# -------------------------------------------------------------------------------- trajectory files
GOOD = {"trajectory_id": "t0", "env": "webshop", "task_id": "0", "split": "train", "instruction": "i", "source": "offline", "policy": "expert",
        "transitions": []}  # fmt: skip
STEP = {
    "task_id": "0",
    "instruction": "i",
    "step": 0,
    "state": "s",
    "action": "a",
    "next_state": "t",
    "reward": 0.0,
    "done": False,
}


@pytest.mark.parametrize(
    "lines, expected",
    [
        (["not json"], r":1: not valid JSON"),
        ([json.dumps(GOOD), "{"], r":2: not valid JSON"),
        ([json.dumps({**GOOD, "bogus": 1})], r":1: unknown field\(s\) \['bogus'\]"),
        ([json.dumps({**GOOD, "transitions": "x"})], r":1:.*transitions"),
        ([json.dumps([1, 2])], r":1:"),
        # #39 item 6: out-of-range rewards and scores were trained on
        (
            [json.dumps({**GOOD, "transitions": [{**STEP, "reward": float("nan")}]})],
            r":1, transitions\[0\]: field 'reward' is nan",
        ),
        (
            [json.dumps({**GOOD, "transitions": [{**STEP, "reward": 7}]})],
            r":1, transitions\[0\]: field 'reward' is 7.*\[0, 1\]",
        ),
        ([json.dumps({**GOOD, "score": -0.5})], r":1:.*'score' is -0.5"),
        # #39 item 5: binary and UTF-16 files gave a UnicodeDecodeError traceback
        ([json.dumps(GOOD).encode("utf-16")], r":1: not UTF-8 text.*UTF-16"),
        ([b"\x89PNG\r\n\x1a\n\xff\xfe"], r":1: not UTF-8 text"),
    ],
)
def test_broken_or_wrong_typed_jsonl_names_file_and_line(tmp_path, lines, expected):
    path = tmp_path / "broken.jsonl"
    if isinstance(lines[0], bytes):
        path.write_bytes(lines[0])
    else:
        path.write_text("\n".join(lines) + "\n")
    before = _digest([path])
    with pytest.raises(TrajectoryFileError, match=str(path).replace(".", r"\.") + expected):
        list(read_trajectories(path))
    assert _digest([path]) == before
    assert user_message(_raise(read_trajectories, path)) is not None  # shown as one message at the CLI


def _raise(fn, *args):
    try:
        list(fn(*args))
    except Exception as exc:  # noqa: BLE001
        return exc
    raise AssertionError("no error")


# ------------------------------------------------------------------------------------ missing paths
def test_missing_paths_say_how_to_make_them(tmp_path):
    from datamodules.trajectories import TrajectoryDataModule
    from dreamgym.modeling.factory import LanguageModel

    with pytest.raises(FileNotFoundError, match="python -m dreamgym collect"):
        TrajectoryDataModule([str(tmp_path / "missing.jsonl")]).setup("fit")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        LanguageModel(path=str(tmp_path / "no_model")).build()
    with pytest.raises(ValueError, match="tokenizer_path"):
        LanguageModel()
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------------------------- env misuse
@pytest.mark.parametrize(
    "kwargs, expected",
    [
        (dict(batch_size=[0]), r"WebShopEnv.batch_size=\[0\].*positive"),
        (dict(batch_size=[-2]), r"WebShopEnv.batch_size=\[-2\].*positive"),
        (dict(batch_size=[2, 2]), r"batch_size=\[2, 2\]"),
        (dict(batch_size=[1], max_steps=0), r"WebShopEnv.max_steps=0"),
        (dict(batch_size=[1], max_steps=2.5), r"WebShopEnv.max_steps=2.5"),
    ],
)
def test_env_constructor_arguments_are_checked(kwargs, expected):
    from dreamgym.envs.webshop import WebShopEnv

    with pytest.raises(ValueError, match=expected):
        WebShopEnv(**kwargs)


@pytest.mark.parametrize("name", ["webshop", "alfworld", "synthetic"])
def test_step_before_reset_says_reset_first(name):
    from tensordict import TensorDict

    from dreamgym.envs import make_env

    env = make_env(name, batch_size=[2])
    td = TensorDict({"action": ["look", "look"]}, batch_size=[2])
    with pytest.raises(RuntimeError, match=r"step\(\) before reset\(\): call env.reset\(\) first"):
        env.step(td)


# ----------------------------------------------------------------------------- model outputs
@pytest.mark.parametrize(
    "text",
    [
        "",
        "no sections at all",
        "<next>\nx\n</next>\n<reward> 7 <done> true <score> 1 <end>",
        "<next>\nx\n</next>\n<reward> 1 <done> true <score> nan <end>",
        "<next>\nx\n</next>\n<reward> 1 <done> true <score> 1e999 <end>",
        "<next>\nx\n</next>\n<reward> 1 <done> maybe <score> 1 <end>",
        "<reward> 1 <done> true <score> 1 <end>",
    ],
)
def test_out_of_range_or_sectionless_outputs_are_parse_failures(text):
    parsed = parse_target(text)
    assert not parsed.ok and parsed.error


@pytest.mark.parametrize("out", ["no_such_dir/x.jsonl", "readonly/x.jsonl"])
def test_collect_refuses_an_unwritable_output_before_collecting(tmp_path, out, capsys, monkeypatch):
    import os

    (tmp_path / "readonly").mkdir()
    os.chmod(tmp_path / "readonly", 0o500)
    if os.access(tmp_path / "readonly", os.W_OK) and out.startswith("readonly"):
        pytest.skip("running as a user who can write anywhere (root)")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["collect", "--env", "webshop", "--n-expert", "1", "--n-random", "0", "--out", out])
    assert e.value.code == 2 and "does not exist or is not writable" in capsys.readouterr().err
    assert not list(tmp_path.rglob("*.jsonl"))


@pytest.mark.parametrize(
    "extra, expected",
    [
        (["--env", "webshopp"], "--env 'webshopp' is not a registered env"),
        (["--env-kwargs", "{not json"], "--env-kwargs must be a JSON object"),
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--env-kwargs", '{"no_such_arg": 1}'], "env 'webshop' takes no argument(s) ['no_such_arg']"),
    ],
)
def test_collect_overwrite_keeps_the_file_when_arguments_are_bad(tmp_path, extra, expected, capsys):
    """#39: `collect --overwrite` with a bad argument used to delete the user's file before failing."""
    out = tmp_path / "data.jsonl"
    out.write_text("precious\n")
    try:  # argparse's checks exit, the package's errors come back through the CLI's boundary
        rc = run_guarded(
            main, ["collect", "--n-expert", "1", "--n-random", "0", "--out", str(out), "--overwrite", *extra]
        )
    except SystemExit as e:
        rc = e.code
    last = (
        capsys.readouterr().err.strip().splitlines()[-2:]
    )  # (pytest's closed log streams may add noise above)
    assert rc == 2 and any(expected in line and "error" in line for line in last), last
    assert out.read_text() == "precious\n" and not list(tmp_path.glob("*.partial"))


def test_append_refuses_a_file_whose_last_line_is_cut(tmp_path, capsys):
    """#39: a collect cut by a full disk left half a line; `--append` glued a record onto it."""
    from dreamgym.schema import TrajectoryWriter, save_trajectories

    out = tmp_path / "data.jsonl"
    out.write_text('{"task_id": 1}\n{"task_id": 2, "instr')
    before = out.read_bytes()
    with pytest.raises(SystemExit) as e:
        main(["collect", "--n-expert", "1", "--n-random", "0", "--out", str(out), "--append"])
    assert e.value.code == 2 and "its last line is cut" in capsys.readouterr().err
    with pytest.raises(ValueError, match="last line is cut"):
        TrajectoryWriter(out)
    with pytest.raises(ValueError, match="last line is cut"):
        save_trajectories(out, [], append=True)
    assert out.read_bytes() == before


@pytest.fixture(scope="module")
def toy_tokenizer(tmp_path_factory) -> str:
    """A tokenizer of our own, so that the configs' ``artifacts/webshop/tokenizer`` (made by ``make run``)
    is not needed: on a fresh clone its absence would be the first error, not the one under test."""
    from rl_toy import make_toy_tokenizer

    return make_toy_tokenizer(tmp_path_factory.mktemp("tok"))


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["fit", "--config", str(ROOT / "configs" / "webshop_policy_sft.yaml"), "--trainer.max_steps=-5",
          "--model.init_args.policy.init_args.tokenizer_path={tok}"],
         "trainer setting: `max_steps` must be a non-negative integer"),
        (["fit", "--config", str(ROOT / "configs" / "webshop_policy_sft.yaml"), "--data.init_args.batch_size=0",
          "--model.init_args.policy.init_args.tokenizer_path={tok}"],
         "PolicySFTDataModule: batch_size (0) must be >= 1"),
        (["fit", "--config", str(ROOT / "configs" / "webshop_experience_sft.yaml"), "--data.init_args.batch_size=-3",
          "--model.init_args.lm.init_args.tokenizer_path={tok}"],
         "TrajectoryDataModule: batch_size (-3)"),
        (["serve", "--env", "webshop", "--port", "70000"], "--port must be in 0..65535, got 70000"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_line_not_a_traceback(argv, expected, capsys, toy_tokenizer):
    """#39 item 5: each of these was a 36-77 line traceback."""
    argv = [a.format(tok=toy_tokenizer) for a in argv]
    try:
        rc = run_guarded(main, argv)
    except SystemExit as e:  # argparse's own checks
        rc = e.code
    last = (
        capsys.readouterr().err.strip().splitlines()[-2:]
    )  # (pytest's closed log streams may add noise above)
    assert rc == 2 and any(expected in line and "error" in line for line in last), last


def test_env_edges_are_errors_not_silent(tmp_path):
    """#39 item 7: task_index=-5 drew a random task; stepping after close() worked; NUL and right-to-left
    override characters in an action were echoed into the page."""
    from tensordict import TensorDict

    from dreamgym.envs.registry import make_env

    env = make_env("webshop", batch_size=[1], split="test")
    with pytest.raises(IndexError, match=r"task_index -5: give a task index 0\.\.\d+ of split 'test', or -1"):
        env.reset(TensorDict({"task_index": torch.tensor([[-5]])}, batch_size=[1]))
    td = env.reset(TensorDict({"task_index": torch.tensor([[0]])}, batch_size=[1]))
    td["action"] = NonTensorStack("search[red\x00 shoes\u202e\u200b]")
    page = env.step(td)["next", "observation"]
    text = page if isinstance(page, str) else page[0]
    assert "red shoes" in text and not any(c in text for c in "\x00\u202e\u200b")
    env.close()
    with pytest.raises(RuntimeError, match=r"step\(\) after close\(\): make a new env"):
        env.step(td)
    with pytest.raises(RuntimeError, match=r"reset\(\) after close\(\)"):
        env.reset()
