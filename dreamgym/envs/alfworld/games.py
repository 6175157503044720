"""ALFWorld game sets: the bundled manifest, the on-disk cache of game files, real data directories.

The repository does not hold thousands of ``game.tw-pddl`` files (each repeats the ~40 KB domain and
grammar). It holds ``dreamgym/data/alfworld/games.json.gz``: per game its :class:`GameParams`, the
planner's walkthrough, a hash of the problem text and validation timings. :class:`GameSet` rebuilds
a game file from its parameters on first use (a few ms, checked against the stored hash) into a cache
directory laid out like ALFWorld's ``json_2.1.1/<split>/<task dir>/<trial>/``, each folder holding
``game.tw-pddl``, ``initial_state.pddl`` and ``traj_data.json`` as ALFWorld's own tools expect
(``AlfredTWEnv``, ``alfworld-play-tw``, ``alfworld-generate``): ``$DREAMGYM_ALFWORLD_CACHE`` or
``~/.cache/dreamgym/alfworld/<manifest hash>[-anns<prob>]``.

A real ``ALFWORLD_DATA`` directory (``json_2.1.1/{train,valid_seen,valid_unseen}/...``) loads too,
with ALFWorld's filters (``traj_data.json`` present, no ``movable``/``Sliced``, ``solvable: true``).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from dreamgym.envs.alfworld import gen

__all__ = [
    "MANIFEST",
    "SPLIT_ALIASES",
    "GameRecord",
    "GameSet",
    "canonical_split",
    "save_manifest",
    "load_manifest",
    "load_pddl_env",
    "demangle",
]

MANIFEST = Path(__file__).resolve().parents[2] / "data" / "alfworld" / "games.json.gz"
"""The bundled manifest of generated, planner-validated games."""

SPLIT_ALIASES = {
    "train": "train",
    "val": "valid_seen",
    "valid_seen": "valid_seen",
    "test": "valid_unseen",
    "valid_unseen": "valid_unseen",
}
"""dreamgym split names -> ALFWorld split directories (``test`` is the unseen-scene split)."""


def canonical_split(split: str) -> str:
    """``train``/``val``/``test`` or an ALFWorld split name -> the ALFWorld split directory."""
    if split not in SPLIT_ALIASES:
        raise ValueError(f"split must be one of {sorted(SPLIT_ALIASES)}, got {split!r}")
    return SPLIT_ALIASES[split]


@dataclass
class GameRecord:
    """One playable game: where its file is and what it asks.

    Attributes:
        name: relative game directory (``<task dir>/<trial>``).
        split: ALFWorld split directory.
        task_type: one of :data:`gen.TASK_TYPES`.
        path: ``game.tw-pddl`` path (may not exist yet for manifest games).
        walkthrough: the stored plan (empty if unknown).
        params: generator parameters (None for real ALFWorld games).
        sha1: expected problem hash (generated games).
        targets: ALFRED type names of the goal: ``obj``, ``recep`` and/or ``toggle``.
    """

    name: str
    split: str
    task_type: str
    path: Path
    walkthrough: list[str]
    params: gen.GameParams | None = None
    sha1: str = ""
    targets: dict[str, str] = field(default_factory=dict)

    @property
    def task_id(self) -> str:
        return f"alfworld/{self.split}/{self.task_type}/{self.name}"


def save_manifest(path: Path, games: list[dict], meta: dict) -> None:
    """Write the manifest (sorted by split and name, so the file is deterministic)."""
    games = sorted(games, key=lambda g: (g["split"], gen.GameParams(**_params(g)).name))
    data = {"version": 1, "meta": meta, "games": games}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    raw = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    with open(path, "wb") as f, gzip.GzipFile(fileobj=f, mode="wb", mtime=0) as gz:
        gz.write(raw)


def load_manifest(path: Path | None = None) -> dict:
    """Read a manifest; errors name the file and the fix."""
    path = Path(path or MANIFEST)
    if not path.exists():
        raise FileNotFoundError(
            f"ALFWorld manifest {path} is missing; run scripts/make_alfworld_games.py to generate games"
        )
    with gzip.open(path, "rt") as f:
        data = json.load(f)
    if data.get("version") != 1 or "games" not in data:
        raise ValueError(
            f"{path}: field 'version' is {data.get('version')!r}, expected 1 with a 'games' list"
        )
    return data


def _params(g: dict) -> dict:
    return {k: g[k] for k in ("split", "task_type", "scene", "obj", "recep", "seed")}


def _default_cache(manifest: Path, human_anns_prob: float = 0.0) -> Path:
    env = os.environ.get("DREAMGYM_ALFWORLD_CACHE")
    digest = hashlib.sha1(Path(manifest).read_bytes()).hexdigest()[:12]
    base = Path(env) if env else Path.home() / ".cache" / "dreamgym" / "alfworld"
    return base / (digest + (f"-anns{human_anns_prob:g}" if human_anns_prob else ""))


class GameSet:
    """The games of every split, from the manifest (default) or a real ``ALFWORLD_DATA`` directory.

    Args:
        data_dir: a directory holding ``json_2.1.1/<split>/.../game.tw-pddl`` (real ALFWorld layout);
            None uses the bundled manifest.
        manifest: manifest path (default :data:`MANIFEST`).
        cache_dir: where manifest games are written (default ``$DREAMGYM_ALFWORLD_CACHE`` or
            ``~/.cache/dreamgym/alfworld/<hash>``).
        goal_desc_human_anns_prob: as ALFWorld's setting of that name: the chance that a game's task is
            one of its annotations rather than the template (generated games only; the annotations are
            rule-made, see :mod:`.goals`). The choice is fixed per game.
    """

    def __init__(
        self,
        data_dir: str | Path | None = None,
        manifest: str | Path | None = None,
        cache_dir: str | Path | None = None,
        goal_desc_human_anns_prob: float = 0.0,
    ):
        if not 0.0 <= goal_desc_human_anns_prob <= 1.0:
            raise ValueError(f"goal_desc_human_anns_prob must be in [0, 1], got {goal_desc_human_anns_prob}")
        if data_dir and goal_desc_human_anns_prob:
            raise ValueError(
                "goal_desc_human_anns_prob applies to generated games only; a data_dir's games keep the goal "
                "text they were written with (set it with ALFWorld's alfworld-generate instead)"
            )
        self.human_anns_prob = goal_desc_human_anns_prob
        self.data_dir = Path(data_dir) if data_dir else None
        self._games: dict[str, list[GameRecord]] = {s: [] for s in gen.SPLIT_DIRS}
        if self.data_dir is not None:
            self._scan(self.data_dir)
        else:
            manifest = Path(manifest or MANIFEST)
            self.cache_dir = Path(cache_dir) if cache_dir else _default_cache(manifest, self.human_anns_prob)
            for g in load_manifest(manifest)["games"]:
                p = gen.GameParams(**_params(g))
                path = self.cache_dir / "json_2.1.1" / p.split / p.name / "game.tw-pddl"
                look = p.task_type == "look_at_obj_in_light"
                targets = {"obj": p.obj, "toggle": p.recep} if look else {"obj": p.obj, "recep": p.recep}
                self._games[p.split].append(
                    GameRecord(
                        p.name,
                        p.split,
                        p.task_type,
                        path,
                        list(g["walkthrough"]),
                        p,
                        g.get("sha1", ""),
                        targets,
                    )
                )

    def _scan(self, root: Path) -> None:
        base = root / "json_2.1.1" if (root / "json_2.1.1").is_dir() else root
        if not any((base / s).is_dir() for s in gen.SPLIT_DIRS):
            raise FileNotFoundError(
                f"data_dir {root} holds no json_2.1.1/{{train,valid_seen,valid_unseen}} directory; "
                "point it at an ALFWORLD_DATA directory"
            )
        for split in gen.SPLIT_DIRS:
            for game in sorted((base / split).glob("**/game.tw-pddl")) if (base / split).is_dir() else []:
                rel = game.parent.relative_to(base / split).as_posix()
                traj = game.parent / "traj_data.json"
                if not traj.exists() or "movable" in rel or "Sliced" in rel:
                    continue
                tdata = json.loads(traj.read_text())
                task_type = tdata["task_type"]
                data = json.loads(game.read_text())
                if task_type not in gen.TASK_TYPES or not data.get("solvable", False):
                    continue
                pp = tdata.get("pddl_params", {})
                keys = (("obj", "object_target"), ("recep", "parent_target"), ("toggle", "toggle_target"))
                targets = {k: pp[src] for k, src in keys if pp.get(src)}
                walk = list(data.get("walkthrough") or [])
                self._games[split].append(GameRecord(rel, split, task_type, game, walk, None, "", targets))

    def games(self, split: str) -> list[GameRecord]:
        """The games of ``split`` (``train``/``val``/``test`` or ALFWorld names), in a fixed order."""
        return self._games[canonical_split(split)]

    def game_file(self, rec: GameRecord) -> Path:
        """The ``game.tw-pddl`` of ``rec``, written from its parameters first if needed."""
        if rec.params is not None and not rec.path.exists():
            problem = gen.build_problem(rec.params)
            if rec.sha1 and gen.problem_sha1(problem) != rec.sha1:
                raise RuntimeError(
                    f"game {rec.task_id}: rebuilt problem hash {gen.problem_sha1(problem)} != manifest "
                    f"{rec.sha1}; the generator changed since the manifest was made - regenerate it with "
                    "scripts/make_alfworld_games.py"
                )
            folder = rec.path.parent
            folder.mkdir(parents=True, exist_ok=True)
            tmp = rec.path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(
                json.dumps(gen.game_json(rec.params, rec.walkthrough, problem, self.human_anns_prob))
            )
            (folder / "initial_state.pddl").write_text(problem)
            (folder / "traj_data.json").write_text(json.dumps(gen.traj_data(rec.params), indent=1))
            os.replace(tmp, rec.path)  # last: game.tw-pddl present means the folder is complete
        return rec.path

    def materialize(self, split: str) -> Path:
        """Write every game of ``split``; returns the ``json_2.1.1/<split>`` directory."""
        for rec in self.games(split):
            self.game_file(rec)
        return self.cache_dir / "json_2.1.1" / canonical_split(split)


def demangle(env) -> None:
    """Give every entity ALFWorld's display name ("drawer 3"), as ``AlfredDemangler`` does."""
    from alfworld.agents.utils.misc import Demangler

    dm = Demangler(game_infos=env._entity_infos)
    for info in env._entity_infos.values():
        info.name = dm.demangle_alfred_name(info.id)
    env._dreamgym_names = None  # names changed: summaries rebuild their name table


def load_pddl_env(game: dict | str | Path, speedups: bool = True):
    """A TextWorld ``PddlEnv`` with ``game`` loaded and ALFWorld names (admissible commands, won).

    With ``speedups`` the memoisation of :mod:`.speedups` is installed and the load skips the
    optimised translation that only ``replan`` uses (see :func:`speedups.no_replan_translation`).
    """
    import textworld
    from textworld.envs.pddl import PddlEnv

    from dreamgym.envs.alfworld import speedups as sp

    if speedups:
        sp.install()
    env = PddlEnv(textworld.EnvInfos(admissible_commands=True, won=True, facts=False))
    if not isinstance(game, dict):
        with open(game) as f:
            game = json.load(f)
    with sp.no_replan_translation():
        env.load(game)
    demangle(env)
    return env
