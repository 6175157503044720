"""The package's import graph: no cycles, no upward imports, no ``sys.path`` edits, and the library never
reaches the lab.

Every ``import`` of ``dreamgym/``, ``models/`` and ``datamodules/`` is read with :mod:`ast` (module level,
inside functions and under ``TYPE_CHECKING`` alike: each is a dependency). Importing ``a.b.c`` also runs
``a/__init__.py`` and ``a/b/__init__.py``, so those count as edges for cycles too. The command table of the
entry point (``COMMANDS`` in ``dreamgym/cli.py``: name -> ``"module:function"``, imported when the command
runs) counts as one edge per command.

Three parts, bottom to top: the library (every layer up to the Lightning command line), the lab
(``dreamgym/lab/``: the experiments: pipeline, stages, benchmark suite, summary, plots, provenance) and
the entry point (``python -m dreamgym``), which dispatches to both. No library module names the lab: not
by an import, not by a ``"dreamgym.lab..."`` module string (``import_module``, ``class_path``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("dreamgym", "models", "datamodules")
LAB = "dreamgym.lab"
"""The experiments' layer: the package the library never imports."""

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("foundations: record schema, errors, seeding, checkpoint files, progress, config files, the agent interface",
     ("dreamgym", "dreamgym._imports", "dreamgym.errors", "dreamgym.schema", "dreamgym.seeding",
      "dreamgym.checkpoint_io", "dreamgym.progress", "dreamgym.precision", "dreamgym.optim",
      "dreamgym.stats", "dreamgym.strategies", "dreamgym.agents", "dreamgym.config_files")),
    ("retrieval: the replay buffer and vector index over schema records",
     ("dreamgym.retrieval",)),
    ("modeling: language models, tokenizer, prompt formats, decoding, the experience model",
     ("dreamgym.modeling",)),
    ("envs: the TorchRL envs (real ones, and the synthetic one wrapping the experience model), one episode loop",
     ("dreamgym.envs",)),
    ("teachers: reasoning written from an env's privileged information",
     ("dreamgym.teachers",)),
    ("uses of envs and models: offline data, fidelity, observability, TorchRL/AgentGym adapters",
     ("dreamgym.collect", "dreamgym.fidelity", "dreamgym.observability", "dreamgym.interop",
      "dreamgym.serve")),
    ("RL: rollouts, advantages, losses, schedules, the curriculum over them",
     ("dreamgym.rl", "dreamgym.curriculum")),
    ("Lightning wrappers: they receive the built parts above",
     ("models", "datamodules")),
    ("the Lightning command line: LightningCLI over the wrappers (named by class_path, not imported)",
     ("dreamgym.lightning_cli",)),
    ("lab: the experiments on the library: the pipeline, its stages, the benchmark suite, their reports",
     (LAB,)),
    ("entry: `python -m dreamgym`, the one table of commands (library and lab)",
     ("dreamgym.cli", "dreamgym.__main__")),
]  # fmt: skip
"""Lowest first, each with why it sits there; a module may import only its own layer or lower ones.
This is the README's picture read bottom-up: records -> retrieval -> experience model -> envs ->
collector/losses -> PolicyRL, then the lab on the library and the entry point on both. Every layer below
the lab's is the library. A new module gets its place here."""

LAB_LAYER = next(i for i, (_, prefixes) in enumerate(LAYERS) if prefixes == (LAB,))
ENTRY = LAYERS[-1][1]
"""The entry point's modules: the only ones above the lab."""
COMMAND_TABLES = {"dreamgym.cli": "COMMANDS"}
"""Module -> the name of its command table: a dict literal of name -> ``"module:function"`` (or a tuple
that starts with one), each an import edge of that module."""

FORBIDDEN_ROOTS = ("scripts", "tests", "benchmarks", "conftest")
"""What the library never imports: command-line tools, tests and their helpers, benchmark results."""

OPTIONAL_IMPORTS = {"matplotlib": ("dreamgym.lab.plots",)}
"""The package of an optional extra (``plots``) -> the only modules that import it, each inside a function
(so the package imports and runs without it: ``tests/test_plots.py`` runs a ``fit`` where it is missing)."""


def module_files(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (file, is a package ``__init__``) for every module of :data:`PACKAGES`."""
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            is_pkg = parts[-1] == "__init__"
            mods[".".join(parts[:-1] if is_pkg else parts)] = (path, is_pkg)
    return mods


def _imported_names(module: str, path: Path, is_pkg: bool) -> list[tuple[str, int]]:
    """(dotted name, line) of every import in ``path``, relative imports made absolute; ``from a
    import b`` gives ``a.b`` (a submodule when one exists, else resolved to ``a`` by the caller)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                pkg = module.split(".") if is_pkg else module.split(".")[:-1]
                pkg = pkg[: len(pkg) - (node.level - 1)]
                base = ".".join([*pkg, *([node.module] if node.module else [])])
            out += [(f"{base}.{alias.name}", node.lineno) for alias in node.names]
    return out


def command_table(path: Path, name: str) -> list[tuple[str, str, int]]:
    """``(command, "module:function", line)`` of the module-level dict literal ``name`` in ``path`` (each
    value a ``"module:function"`` string or a tuple that starts with one; line: that string's)."""
    for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
        targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
        if isinstance(node.value if hasattr(node, "value") else None, ast.Dict) and any(
            isinstance(t, ast.Name) and t.id == name for t in targets
        ):
            table = ast.literal_eval(node.value)
            lines = [(v.elts[0] if isinstance(v, ast.Tuple) else v).lineno for v in node.value.values]
            return [
                (cmd, value[0] if isinstance(value, tuple) else value, line)
                for (cmd, value), line in zip(table.items(), lines, strict=True)
            ]
    raise AssertionError(f"{path}: no module-level dict literal {name}")


def command_edges(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """``edges[a][b] = line`` for every command of :data:`COMMAND_TABLES` (``b``: the module it runs)."""
    mods = module_files(root)
    edges: dict[str, dict[str, int]] = {}
    for module, table in COMMAND_TABLES.items():
        if module in mods:
            for _, target, line in command_table(mods[module][0], table):
                edges.setdefault(module, {}).setdefault(target.partition(":")[0], line)
    return edges


def import_graph(root: Path = ROOT) -> tuple[dict[str, dict[str, int]], set[str]]:
    """``(edges, external)``: ``edges[a][b] = line`` where module ``a`` imports module ``b`` of the
    packages, or runs it as a command (:func:`command_edges`); ``external`` the other top-level names
    imported (for :data:`FORBIDDEN_ROOTS`)."""
    mods = module_files(root)
    edges: dict[str, dict[str, int]] = {m: {} for m in mods}
    external: set[str] = set()
    for module, targets in command_edges(root).items():
        for name, line in targets.items():
            edges[module].setdefault(name, line)
    for module, (path, is_pkg) in mods.items():
        for name, line in _imported_names(module, path, is_pkg):
            target = name
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if not target:
                external.add(f"{module}:{line} imports {name}")
                continue
            if target != module:
                edges[module].setdefault(target, line)
    return edges, external


def cycles(edges: dict[str, dict[str, int]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), with the implicit edges to the
    ``__init__`` of every package above an imported module."""
    graph = {m: set(targets) for m, targets in edges.items()}
    for m, targets in edges.items():
        for t in targets:
            parent = t.rpartition(".")[0]
            while parent:
                if parent in graph and parent != m and not m.startswith(parent + "."):
                    graph[m].add(parent)
                parent = parent.rpartition(".")[0]
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:  # recursion depth is bounded by the number of modules (~150)
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def layer_of(module: str) -> int | None:
    """Index in :data:`LAYERS` of the longest prefix naming ``module`` (None: not placed)."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


def upward_imports(edges: dict[str, dict[str, int]]) -> list[str]:
    """``"a:line imports b (layer i -> j)"`` for every import of a higher layer."""
    bad = []
    for m, targets in sorted(edges.items()):
        for t, line in sorted(targets.items()):
            lm, lt = layer_of(m), layer_of(t)
            if lm is not None and lt is not None and lt > lm:
                bad.append(f"{m}:{line} imports {t} (layer {lm} '{LAYERS[lm][0].split(':')[0]}' -> "
                           f"layer {lt} '{LAYERS[lt][0].split(':')[0]}')")  # fmt: skip
    return bad


def in_lab(module: str) -> bool:
    """Whether ``module`` is :data:`LAB` or one of its modules."""
    return module == LAB or module.startswith(LAB + ".")


_LAB_STRING = re.compile(rf"^{re.escape(LAB)}(\.\w+)*(:\w+)?$")


def library_reaches_lab(root: Path = ROOT) -> list[str]:
    """``"a:line ..."`` for every way a module outside the lab reaches it, other than a command of the
    entry point's table: an import (module level or in a function), or a string that names a lab module
    (``import_module("dreamgym.lab.x")``, a ``class_path``)."""
    mods = module_files(root)
    edges, _ = import_graph(root)
    table = command_edges(root)
    bad = []
    for m, targets in sorted(edges.items()):
        for t, line in sorted(targets.items()):
            if in_lab(t) and not in_lab(m) and table.get(m, {}).get(t) != line:
                bad.append(f"{m}:{line} imports {t}")
    table_lines = {(m, line) for m, targets in table.items() for line in targets.values()}
    for m, (path, _) in sorted(mods.items()):
        if in_lab(m):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and _LAB_STRING.match(node.value)
            ):
                if (m, node.lineno) not in table_lines:
                    bad.append(f"{m}:{node.lineno} names {node.value!r}")
    return bad


def sys_path_edits(root: Path = ROOT) -> list[str]:
    """``file:line`` of every ``sys.path`` insert/append/extend/assignment in the repository's code."""
    pattern = re.compile(r"sys\.path\s*(\.\s*(insert|append|extend)\b|\[[^\]]*\]\s*=|\s*(\+=|=)(?!=))")
    skip = {".venv", ".git", "artifacts", "runs", "node_modules"}
    hits = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if skip & set(rel.parts) or path.suffix not in (".py", ".sh", ".cfg", ".toml", ".ini"):
            continue
        if not path.is_file():
            continue
        for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if pattern.search(line):
                hits.append(f"{rel}:{i}: {line.strip()}")
    return hits


# ---------------------------------------------------------------------------------------------- tests
_SYS_PATH = "sys" + ".path"  # spelt in two parts so this file's planted edits are not found in it


def test_every_module_has_a_layer():
    unplaced = [m for m in module_files() if layer_of(m) is None]
    assert not unplaced, f"place these modules in tests/test_structure.py LAYERS: {unplaced}"


def test_no_import_cycles():
    edges, _ = import_graph()
    found = cycles(edges)
    assert not found, "import cycles (break each by moving the shared part down a layer):\n" + "\n".join(
        " <-> ".join(c) for c in found
    )


def test_no_upward_imports():
    edges, _ = import_graph()
    bad = upward_imports(edges)
    assert not bad, "upward imports (move the part down, or pass it in):\n" + "\n".join(bad)


def test_the_library_never_imports_scripts_tests_or_benchmarks():
    _, external = import_graph()
    bad = sorted(e for e in external if e.split(" imports ")[1].split(".")[0] in FORBIDDEN_ROOTS)
    assert bad == []


def test_the_library_never_reaches_the_lab():
    """The lab's layer sits above every library layer, below the entry point only; no library module
    imports or names a lab module (the entry point runs lab commands through its table alone)."""
    assert LAYERS[LAB_LAYER][1] == (LAB,) and LAB_LAYER == len(LAYERS) - 2
    assert set(COMMAND_TABLES) <= set(ENTRY), "only the entry point has a command table"
    assert all(not in_lab(m) or layer_of(m) == LAB_LAYER for m in module_files())
    bad = library_reaches_lab()
    assert not bad, f"the library reaches the lab ({LAB}; move the part it needs down):\n" + "\n".join(bad)


def test_every_command_runs_a_function_of_a_module():
    """Each ``"module:function"`` of the command table names a module of the packages that defines it."""
    mods = module_files()
    for module, table in COMMAND_TABLES.items():
        for cmd, target, _ in command_table(mods[module][0], table):
            name, _, fn = target.partition(":")
            assert name in mods and fn, f"{module} command {cmd!r}: {target!r} is not a module:function"
            tree = ast.parse(mods[name][0].read_text(encoding="utf-8"))
            defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert fn in defined, f"{module} command {cmd!r}: {name} defines no function {fn}"


def test_the_command_table_is_what_the_cli_runs():
    from dreamgym import cli

    mods = module_files()
    assert {cmd: target for cmd, target, _ in command_table(mods["dreamgym.cli"][0], "COMMANDS")} == {
        cmd: value[0] for cmd, value in cli.COMMANDS.items()
    }
    assert {"fit", "pipeline", "benchmark"} <= set(cli.COMMANDS)
    assert all(f"\n  {cmd} " in cli.USAGE for cmd in cli.COMMANDS)


def optional_imports(root: Path = ROOT) -> list[str]:
    """``"a:line imports x"`` for every import of a package of :data:`OPTIONAL_IMPORTS` outside its modules,
    or at module level in one of them."""
    bad = []
    for module, (path, _) in sorted(module_files(root).items()):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        in_function = {
            id(n)
            for f in ast.walk(tree)
            if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
            for n in ast.walk(f)
        }
        for node in ast.walk(tree):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and not node.level
                else []
            )
            for name in names:
                allowed = OPTIONAL_IMPORTS.get(name.split(".")[0])
                if allowed is not None and (module not in allowed or id(node) not in in_function):
                    bad.append(f"{module}:{node.lineno} imports {name}")
    return bad


def test_optional_extras_are_imported_only_where_they_are_used():
    bad = optional_imports()
    assert not bad, (
        f"an optional extra imported elsewhere than {OPTIONAL_IMPORTS} or at module level (the package must "
        "import without it):\n" + "\n".join(bad)
    )


def test_no_sys_path_edits():
    bad = sys_path_edits()
    assert not bad, "sys.path edits (make it an importable package or a module of one):\n" + "\n".join(bad)


def test_the_checks_find_a_cycle_an_upward_import_and_a_sys_path_edit(tmp_path):
    """The checks above can fail: a planted cycle, upward import and path edit are each reported."""
    (tmp_path / "dreamgym" / "envs").mkdir(parents=True)
    (tmp_path / "models").mkdir()
    (tmp_path / "datamodules").mkdir()
    files = {
        "dreamgym/__init__.py": "",
        "dreamgym/schema.py": "def f():\n    from dreamgym.envs import base  # upward, inside a function\n",
        "dreamgym/envs/__init__.py": "from .base import X\n",
        "dreamgym/envs/base.py": "import dreamgym.schema\nfrom dreamgym.envs import episodes\nX = 1\n",
        "dreamgym/envs/episodes.py": "from . import base\n",
        "models/__init__.py": "",
        "datamodules/__init__.py": "",
        "tool.py": f"import sys\n{_SYS_PATH}.insert(0, '.')\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    edges, _ = import_graph(tmp_path)
    assert edges["dreamgym.envs.episodes"] == {"dreamgym.envs.base": 1}
    assert cycles(edges) == [["dreamgym.envs", "dreamgym.envs.base", "dreamgym.envs.episodes",
                              "dreamgym.schema"]]  # fmt: skip
    assert [u.split(" (")[0] for u in upward_imports(edges)] == [
        "dreamgym.schema:2 imports dreamgym.envs.base"
    ]
    assert sys_path_edits(tmp_path) == [f"tool.py:2: {_SYS_PATH}.insert(0, '.')"]


def test_the_lab_check_finds_an_import_and_a_module_string(tmp_path):
    """A planted library import of the lab, a lab module string in the library and a plain import of the
    lab by the entry point are each reported; the entry point's command table is not."""
    files = {
        "dreamgym/__init__.py": "",
        "dreamgym/collect.py": "import importlib\nrun = importlib.import_module('dreamgym.lab.pipeline').main\n",
        "dreamgym/rl/__init__.py": "",
        "dreamgym/rl/x.py": "def f():\n    from dreamgym.lab import pipeline\n",
        "dreamgym/lightning_cli.py": "def run_fit(argv):\n    pass\n",
        "dreamgym/lab/__init__.py": "",
        "dreamgym/lab/pipeline.py": "from dreamgym import lightning_cli\ndef main(argv):\n    pass\n",
        "dreamgym/lab/stages.py": "",
        "dreamgym/cli.py": "COMMANDS = {\n    'fit': ('dreamgym.lightning_cli:run_fit', 'train'),\n"
        "    'pipeline': ('dreamgym.lab.pipeline:main', 'the chain'),\n}\n"
        "def g():\n    import dreamgym.lab.stages\n",
        "models/__init__.py": "",
        "datamodules/__init__.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    edges, _ = import_graph(tmp_path)
    assert edges["dreamgym.cli"] == {
        "dreamgym.lightning_cli": 2, "dreamgym.lab.pipeline": 3, "dreamgym.lab.stages": 6
    }  # fmt: skip
    assert library_reaches_lab(tmp_path) == [
        "dreamgym.cli:6 imports dreamgym.lab.stages",
        "dreamgym.rl.x:2 imports dreamgym.lab.pipeline",
        "dreamgym.collect:2 names 'dreamgym.lab.pipeline'",
    ]
    assert [u.split(" (")[0] for u in upward_imports(edges)] == [
        "dreamgym.rl.x:2 imports dreamgym.lab.pipeline"
    ]
    assert cycles(edges) == []


def test_the_optional_import_check_finds_a_stray_and_a_module_level_import(tmp_path):
    files = {
        "dreamgym/__init__.py": "",
        "dreamgym/lab/__init__.py": "",
        "dreamgym/lab/plots.py": "import matplotlib\ndef f():\n    import matplotlib.pyplot as plt\n",
        "dreamgym/collect.py": "def g():\n    from matplotlib import pyplot\n",
        "models/__init__.py": "",
        "datamodules/__init__.py": "",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    assert optional_imports(tmp_path) == [
        "dreamgym.collect:2 imports matplotlib",
        "dreamgym.lab.plots:1 imports matplotlib",
    ]


@pytest.mark.parametrize("edit", [".append('x')", "[:0] = ['x']", " += ['x']"])
def test_every_form_of_sys_path_edit_is_found(tmp_path, edit):
    line = _SYS_PATH + edit
    (tmp_path / "x.py").write_text(f"import sys\n{line}\nok = {_SYS_PATH} == []\n")
    assert sys_path_edits(tmp_path) == [f"x.py:2: {line}"]
