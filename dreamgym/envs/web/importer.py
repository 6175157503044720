"""Import web trajectories recorded elsewhere (human demos, another agent, WebArena logs) as offline data.

``python -m dreamgym import-web --in recorded.jsonl --out artifacts/web/offline_train.jsonl``
(:func:`dreamgym.collect.import_web_main`, which brings the web teacher) reads one
episode per line in either form and writes schema trajectories (:mod:`dreamgym.schema`; ``env="web"``,
``source="offline"``) that the experience-model SFT and the warm start read directly. The fields are
documented in ``docs/web.md``:

- a schema trajectory (it has ``transitions``): validated and written as it is;
- a step record: ``task_id``, ``instruction``, ``steps`` (a list of ``{"state", "action"}`` and
  optionally ``"reasoning"``), ``success`` (bool), optionally ``final_state`` (the state after the last
  action; default ``[episode over] the task reports success|failure``), ``split`` (default ``--split``)
  and ``policy`` (default ``--policy``).

States use this env's lines ``[ref] role: text``; WebArena's accessibility-tree lines ``[ref] role 'text'``
are rewritten to it (``StaticText`` becomes ``text``). Each transition gets the actions its state admits
(:func:`.page.infer_available_actions`), an ``invalid`` flag from the same rule as the live env, reward 1
on the last step of a successful episode (else 0) and, with ``--teacher`` (default), the web teacher's
rationale where none was recorded.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from dreamgym.envs.web.page import ended_state, infer_available_actions
from dreamgym.schema import SPLITS, Trajectory, TrajectoryFileError, Transition, write_trajectories

__all__ = ["import_web_trajectories", "from_step_record", "normalize_state"]

_WEBARENA_LINE = re.compile(r"^\s*\[(\d+)\]\s+(\w+)\s+'(.*)'(.*)$")
_ROLES = {
    "StaticText": "text",
    "combobox": "select",
    "searchbox": "textbox",
    "menuitem": "link",
    "tab": "link",
}


def normalize_state(state: str) -> str:
    """``state`` with WebArena-style lines ``[12] link 'Home'`` rewritten as ``[12] link: Home``."""
    out = []
    for line in state.splitlines():
        m = _WEBARENA_LINE.match(line)
        if m:
            role = _ROLES.get(m.group(2), m.group(2).lower())
            line = f"[{m.group(1)}] {role}: {m.group(3)}{m.group(4)}".rstrip()
        out.append(line)
    return "\n".join(out)


def _need(rec: dict, key: str, types: tuple[type, ...], where: str) -> Any:
    if key not in rec:
        raise TrajectoryFileError(
            f"{where}: missing field '{key}' (see docs/web.md, 'Importing trajectories')"
        )
    v = rec[key]
    if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
        want = " or ".join(t.__name__ for t in types)
        raise TrajectoryFileError(f"{where}: field '{key}' must be {want}, got {type(v).__name__} {v!r:.80}")
    return v


def from_step_record(rec: dict, where: str, split: str, policy: str, teacher: Any = None) -> Trajectory:
    """A schema trajectory from a step record (module docstring); errors name ``where`` and the field."""
    from dreamgym.envs.web.env import WebEnv

    task_id = _need(rec, "task_id", (str,), where)
    instruction = _need(rec, "instruction", (str,), where)
    steps = _need(rec, "steps", (list,), where)
    success = _need(rec, "success", (bool,), where)
    split = rec.get("split", split)
    if split not in SPLITS:
        raise TrajectoryFileError(f"{where}: field 'split' is {split!r}; use one of {SPLITS}")
    if not steps:
        raise TrajectoryFileError(f"{where}: field 'steps' is empty; an episode needs at least one step")
    states = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict):
            raise TrajectoryFileError(f"{where}, steps[{i}]: expected an object with 'state' and 'action'")
        states.append(normalize_state(_need(step, "state", (str,), f"{where}, steps[{i}]")))
        _need(step, "action", (str,), f"{where}, steps[{i}]")
    final = rec.get("final_state", ended_state(success))
    if not isinstance(final, str):
        raise TrajectoryFileError(f"{where}: field 'final_state' must be str, got {type(final).__name__}")
    states.append(normalize_state(final))
    trajectory_id = str(rec.get("trajectory_id", f"{task_id}#imported"))
    transitions = []
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        acts = infer_available_actions(states[i])
        tr = Transition(
            task_id=task_id, instruction=instruction, step=i, state=states[i], action=step["action"],
            next_state=states[i + 1], reward=float(last and success), done=last, success=last and success,
            source="offline", env="web", split=split, available_actions=acts, reasoning=step.get("reasoning"),
            score=float(last and success), invalid=not WebEnv.is_valid_action(step["action"], acts),
            terminated=last, trajectory_id=trajectory_id,
        )  # fmt: skip
        if tr.reasoning is None and teacher is not None:
            tr.reasoning = teacher.explain(tr, {})
        transitions.append(tr)
    return Trajectory(trajectory_id, task_id, instruction, "web", split, "offline",
                      str(rec.get("policy", policy)), transitions, success, float(success))  # fmt: skip


def import_web_trajectories(
    src: str | Path, out: str | Path, split: str = "train", policy: str = "imported", teacher: Any = None
) -> list[Trajectory]:
    """Convert every line of ``src`` (module docstring) and append the trajectories to ``out``.

    ``teacher`` (a :class:`dreamgym.teachers.base.Teacher`, e.g. ``get_teacher("web")``) writes the
    reasoning of steps recorded without one; None leaves it empty.

    Raises:
        FileNotFoundError: if ``src`` does not exist.
        TrajectoryFileError: ``"<file>:<line>: ..."`` naming the field, the value and the fix.
    """
    src = Path(src)
    if not src.is_file():
        raise FileNotFoundError(
            f"--in {str(src)!r} does not exist; give a JSONL file of recorded web episodes"
        )
    trajs = []
    for lineno, line in enumerate(src.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{src}:{lineno}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise TrajectoryFileError(f"{where}: not valid JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(rec, dict):
            raise TrajectoryFileError(f"{where}: expected a JSON object, got {type(rec).__name__}")
        if "transitions" in rec:
            trajs.append(Trajectory.from_dict(rec, where=where))
        else:
            trajs.append(from_step_record(rec, where, split, policy, teacher))
    write_trajectories(out, trajs)
    return trajs
