"""Config pieces as the lab's fit overrides (dreamgym/lab/overrides.py): how a fit stage gives them to the
LightningCLI, how it resumes a fit recorded with ``--key=value`` strings, and the old spellings."""

import json

import pytest
import yaml

import dreamgym.lightning_cli
from dreamgym.lab.overrides import arg_piece, fill_templates, load_pieces, refuse_legacy_keys, upgrade_argv
from dreamgym.lab.stages import fit_stage, stage_log_dir

LR = {"model": {"init_args": {"optimizer": {"init_args": {"lr": 5.0e-4}}}}}


def _fake_fit(monkeypatch, tmp_path) -> list[list[str]]:
    """A fit that records its argv, leaves a ``last.ckpt`` and exports where the last piece says."""
    calls = []

    def fit(argv):
        calls.append(argv)
        ckpts = tmp_path / "runs" / "policy" / "version_0" / "checkpoints"
        ckpts.mkdir(parents=True, exist_ok=True)
        (ckpts / "last.ckpt").write_text("x")
        if len(calls) > 1:  # the first fit is "interrupted"
            (tmp_path / yaml.safe_load(open(argv[-1]))["model"]["init_args"]["save_dir"]).mkdir()

    monkeypatch.setattr(dreamgym.lightning_cli, "main", fit)
    return calls


def test_a_fit_stage_gives_each_piece_as_a_config_file_in_order(tmp_path, monkeypatch):
    calls = _fake_fit(monkeypatch, tmp_path)
    out = tmp_path / "policy"
    with pytest.raises(RuntimeError, match="without writing"):
        fit_stage("c.yaml", [LR, "--trainer.max_steps=3"], out, "model.init_args.save_dir")
    argv = calls[0]
    assert argv[:3] == ["fit", "--config", "c.yaml"] and argv[5:8] == [
        "--config",
        argv[6],
        "--trainer.max_steps=3",
    ]
    logs, lr, export = (yaml.safe_load(open(argv[i])) for i in (4, 6, -1))
    assert logs == {
        "trainer": {"logger": {"init_args": {"save_dir": str(out.parent / "runs"), "name": "policy"}}}
    }
    assert lr == LR and export == {"model": {"init_args": {"save_dir": str(out.with_name("policy.partial"))}}}
    assert argv[4].startswith(str(stage_log_dir(out) / "overrides"))  # beside the fit's logs
    recorded = json.loads((stage_log_dir(out) / "stage.json").read_text())
    assert recorded == {"config": "c.yaml", "args": [LR, "--trainer.max_steps=3"]}
    fit_stage("c.yaml", [LR, "--trainer.max_steps=3"], out, "model.init_args.save_dir")
    assert "--ckpt_path=last" in calls[1] and out.exists()  # the same pieces: resumed


@pytest.mark.parametrize(
    "old, resumes",
    [
        (["--model.init_args.optimizer.init_args.lr=5.0e-4", "--trainer.max_steps=3"], True),
        (["--trainer.max_steps=3", "--model.init_args.optimizer.init_args.lr=0.0005"], True),  # same values
        (["--model.init_args.optimizer.init_args.lr=1.0e-4", "--trainer.max_steps=3"], False),
        (["--model.init_args.optimizer.init_args.lr=5.0e-4"], False),
    ],
)
def test_a_fit_recorded_with_argument_strings_resumes_with_the_pieces_that_set_the_same(
    tmp_path, monkeypatch, capsys, old, resumes
):
    """A stage interrupted before stages took config pieces (its stage.json lists ``--key=value`` strings)
    resumes when the pieces now given set the same values; strings that still match exactly resume too."""
    calls = _fake_fit(monkeypatch, tmp_path)
    out = tmp_path / "policy"
    log_dir = stage_log_dir(out)
    (log_dir / "version_0" / "checkpoints").mkdir(parents=True)
    (log_dir / "version_0" / "checkpoints" / "last.ckpt").write_text("x")
    (log_dir / "stage.json").write_text(json.dumps({"config": "c.yaml", "args": old}))
    calls.append([])  # the next call exports
    fit_stage("c.yaml", [LR, {"trainer": {"max_steps": 3}}], out, "model.init_args.save_dir")
    assert ("--ckpt_path=last" in calls[-1]) == resumes
    assert ("starting fresh" in capsys.readouterr().out) != resumes
    again = tmp_path / "again"  # the old strings themselves: resumed as before
    (stage_log_dir(again) / "version_0" / "checkpoints").mkdir(parents=True)
    (stage_log_dir(again) / "version_0" / "checkpoints" / "last.ckpt").write_text("x")
    (stage_log_dir(again) / "stage.json").write_text(json.dumps({"config": "c.yaml", "args": old}))
    monkeypatch.setattr(
        dreamgym.lightning_cli,
        "main",
        lambda argv: calls.append(argv) or again.with_name("again.partial").mkdir(),
    )
    fit_stage("c.yaml", old, again, "model.init_args.save_dir")
    assert "--ckpt_path=last" in calls[-1]


def test_pieces_are_mappings_or_files_never_argument_strings(tmp_path):
    (tmp_path / "base.yaml").write_text("trainer: {max_steps: 3}\n")
    (tmp_path / "lever.yaml").write_text("__base__: base.yaml\nmodel: {init_args: {lr: 1.0}}\n")
    assert load_pieces([LR, str(tmp_path / "lever.yaml")], "x") == [
        LR,
        {"trainer": {"max_steps": 3}, "model": {"init_args": {"lr": 1.0}}},  # its __base__ composed
    ]
    with pytest.raises(ValueError, match=r"rl_overrides: '--trainer.max_steps=3' is a command-line argument; .*"
                       r"\{trainer: \{max_steps: 3\}\}"):  # fmt: skip
        load_pieces(["--trainer.max_steps=3"], "rl_overrides")
    with pytest.raises(FileNotFoundError, match="x: 'nope.yaml' is not a mapping or a file"):
        load_pieces(["nope.yaml"], "x")
    (tmp_path / "list.yaml").write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="must hold a mapping"):
        load_pieces([str(tmp_path / "list.yaml")], "x")
    assert arg_piece("--a.b={c: 1}") == {"a": {"b": {"c": 1}}}
    with pytest.raises(ValueError, match="cannot append"):
        arg_piece("--trainer.callbacks+=x.Y")


def test_templates_fill_strings_and_keep_numbers():
    values = {"iterations": 8, "name": "x"}
    assert fill_templates(
        [{"a": "{iterations}", "b": "run_{name}_{iterations}", "c": ["{name}"]}], values
    ) == [{"a": 8, "b": "run_x_8", "c": ["x"]}]
    assert fill_templates({"k": '{"a": 1}', "n": None}, values) == {"k": '{"a": 1}', "n": None}
    with pytest.raises(ValueError, match=r"x: template \{budget\} is not in `values`"):
        fill_templates("{budget}", values, "x")


def test_a_recorded_command_with_the_old_options_runs_again(capsys):
    argv = [
        "--config", "c.yaml",
        "--common_args", "[--model.init_args.tasks_per_batch=2,--trainer.val_check_interval=4]",
        '--pipeline_args=[--out_dir=a/b, "--experience_args=[--trainer.max_steps=400]", "--judge_episodes={expert: 3}"]',
        "--only=[x]",
    ]  # fmt: skip
    new = upgrade_argv(argv)
    assert new[:2] == ["--config", "c.yaml"] and new[-1] == "--only=[x]"
    common = json.loads(new[2].removeprefix("--common_overrides="))
    assert common == [
        {"model": {"init_args": {"tasks_per_batch": 2}}},
        {"trainer": {"val_check_interval": 4}},
    ]
    assert json.loads(new[3].removeprefix("--pipeline_overrides=")) == {
        "out_dir": "a/b",
        "experience_overrides": [{"trainer": {"max_steps": 400}}],
        "judge_episodes": {"expert": 3},
    }
    assert "--common_args is the old spelling of --common_overrides" in capsys.readouterr().out


def test_a_config_file_with_the_old_options_is_refused_with_the_new_spelling(tmp_path):
    old = tmp_path / "old.yaml"
    old.write_text(
        "rl_args: [--trainer.max_steps=3]\narms: [{name: a, args: ['--model.init_args.lr=1']}]\n"
        "quick_preset: {pipeline_args: [--eval_tasks=2]}\n"
    )
    with pytest.raises(ValueError) as info:
        refuse_legacy_keys(["--config", str(old)])
    lines = str(info.value).splitlines()[1:]
    assert lines == [
        f"{old}: `rl_args` is the old spelling of `rl_overrides`; write rl_overrides: [{{trainer: {{max_steps: 3}}}}]",
        f"{old}: `quick_preset.pipeline_args` is the old spelling of `quick_preset.pipeline_overrides`; write "
        "pipeline_overrides: {eval_tasks: 2}",
        f"{old}: `arms[0].args` is the old spelling of `arms[0].overrides`; write overrides: "
        "[{model: {init_args: {lr: 1}}}]",
    ]
    refuse_legacy_keys(
        ["--config", "configs/benchmark_webshop.yaml", "--config", "configs/pipeline_alfworld.yaml"]
    )
