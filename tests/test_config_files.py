"""``__base__`` composition of YAML configs (dreamgym/config_files.py): the merge rules on small files."""

import pytest
import yaml

from dreamgym.config_files import expand_config_args, load_config


def _write(root, files: dict[str, str]):
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_bases_merge_in_order_then_the_file_itself(tmp_path):
    _write(tmp_path, {
        "base/a.yaml": "x: 1\nt: {p: 1, q: 1}\nlst: [1, 2]\nm: {class_path: A, init_args: {u: 1, v: 1}}\n",
        "base/b.yaml": "x: 2\nt: {q: 2}\n",
        "piece.yaml": "class_path: E\ninit_args: {w: 3}\n",
        "leaf.yaml": "__base__: [base/a.yaml, base/b.yaml]\nt: {r: 3}\nlst: [9]\n"
                     "m: {init_args: {v: 2}}\nenv: {__base__: piece.yaml, init_args: {k: 4}}\n",
    })  # fmt: skip
    assert load_config(tmp_path / "leaf.yaml") == {
        "x": 2,  # the later base wins
        "t": {"p": 1, "q": 2, "r": 3},  # mappings merge key by key
        "lst": [9],  # a list replaces
        "m": {"class_path": "A", "init_args": {"u": 1, "v": 2}},  # same class: its arguments merge
        "env": {"class_path": "E", "init_args": {"w": 3, "k": 4}},  # a nested piece
    }


def test_another_class_replaces_and_a_plus_key_appends(tmp_path):
    _write(tmp_path, {
        "base.yaml": "m: {class_path: A, init_args: {u: 1}}\nargs: [a, b]\nq: {args: [x]}\n",
        "leaf.yaml": "__base__: base.yaml\nm: {class_path: B, init_args: {z: 1}}\nargs+: [c]\nq: {args+: [y]}\nnew+: [n]\n",
    })  # fmt: skip
    assert load_config(tmp_path / "leaf.yaml") == {
        "m": {"class_path": "B", "init_args": {"z": 1}},
        "args": ["a", "b", "c"],
        "q": {"args": ["x", "y"]},
        "new": ["n"],
    }


def test_a_missing_or_circular_base_is_named(tmp_path):
    _write(
        tmp_path,
        {"a.yaml": "__base__: b.yaml\n", "b.yaml": "__base__: a.yaml\n", "c.yaml": "__base__: nope.yaml\n"},
    )
    with pytest.raises(ValueError, match=r"includes itself: .*a.yaml -> .*b.yaml -> .*a.yaml"):
        load_config(tmp_path / "a.yaml")
    with pytest.raises(FileNotFoundError, match=r"c.yaml: __base__ names 'nope.yaml', which is not a file"):
        load_config(tmp_path / "c.yaml")


def test_only_composed_configs_are_expanded_on_the_command_line(tmp_path):
    _write(
        tmp_path, {"plain.yaml": "x: 1\n", "base.yaml": "y: 2\n", "leaf.yaml": "__base__: base.yaml\nx: 1\n"}
    )
    plain, leaf = str(tmp_path / "plain.yaml"), str(tmp_path / "leaf.yaml")
    argv = ["fit", "--config", plain, f"--config={leaf}", "--trainer.max_steps=3"]
    out = expand_config_args(argv)
    assert out[:4] == ["fit", "--config", plain, "--config"] and out[5:] == ["--trainer.max_steps=3"]
    assert yaml.safe_load(out[4]) == {"y": 2, "x": 1}  # the composed config, as a YAML string


def test_nested_builds_the_config_piece_of_dotted_keys(tmp_path):
    from dreamgym.config_files import nested

    lm = "model.init_args.lm.init_args"
    piece = nested(
        {f"{lm}.path": tmp_path / "m", f"{lm}.preset": "tiny", "data.init_args.files": [tmp_path / "a"]}
    )
    assert piece == {
        "model": {"init_args": {"lm": {"init_args": {"path": str(tmp_path / "m"), "preset": "tiny"}}}},
        "data": {"init_args": {"files": [str(tmp_path / "a")]}},
    }
    with pytest.raises(ValueError, match="'a.b.c' nests under 'a.b', which is set to a value"):
        nested({"a.b": 1, "a.b.c": 2})


def test_flat_settings_reads_pieces_and_arguments_in_order():
    from dreamgym.config_files import flat_settings

    settings = flat_settings(
        [
            {"trainer": {"logger": {"init_args": {"save_dir": "runs"}}, "max_steps": 3}},
            "--trainer.max_steps=5",  # a later value wins
            "--trainer.logger=false",  # set whole: what was set under it goes
            '--model.init_args.kwargs={"a": 1}',  # a mapping given as a value stays one value
            {"model": {"init_args": {"lr": 5.0e-4, "files": ["x"], "empty": {}}}},
        ]
    )
    assert settings == {
        "trainer.max_steps": 5,
        "trainer.logger": False,
        "model.init_args.kwargs": {"a": 1},
        "model.init_args.lr": 5.0e-4,
        "model.init_args.files": ["x"],
        "model.init_args.empty": {},
    }
