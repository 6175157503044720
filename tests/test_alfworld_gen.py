"""ALFWorld game generator: determinism, placement rules, populations, goal text, file format, manifest
round trip (no engine)."""

import json
import re

import pytest

pytest.importorskip("alfworld")

from dreamgym.envs.alfworld import gen  # noqa: E402
from dreamgym.envs.alfworld.games import MANIFEST, GameSet, load_manifest, save_manifest  # noqa: E402


def _facts(problem: str, pred: str) -> list[list[str]]:
    init = problem.split("(:goal")[0]  # the goal has facts over variables; read the initial state only
    return [m.split() for m in re.findall(rf"\({pred} ([^()]*)\)", init)]


def test_sampling_is_deterministic_and_covers_all_types():
    a = gen.sample_params("train", 24, seed=3)
    b = gen.sample_params("train", 24, seed=3)
    c = gen.sample_params("train", 24, seed=4)
    assert a == b and a != c
    assert {p.task_type for p in a} == set(gen.TASK_TYPES)
    assert len({(p.task_type, p.scene, p.obj, p.recep) for p in a}) == 24


def test_splits_use_disjoint_scenes_and_valid_seen_excludes_train_tasks():
    train = gen.sample_params("train", 60, seed=0)
    keys = {(p.task_type, p.scene, p.obj, p.recep) for p in train}
    seen = gen.sample_params("valid_seen", 30, seed=0, exclude=keys)
    unseen = gen.sample_params("valid_unseen", 30, seed=0)
    assert all(p.scene in gen.UNSEEN_SCENES for p in unseen)
    assert not any(p.scene in gen.UNSEEN_SCENES for p in train + seen)
    assert not keys & {(p.task_type, p.scene, p.obj, p.recep) for p in seen}


@pytest.mark.parametrize("task_type", gen.TASK_TYPES)
def test_problem_respects_alfred_rules(task_type):
    import alfworld.gen.constants as C

    p = next(q for q in gen.sample_params("train", 60, seed=1) if q.task_type == task_type)
    problem = gen.build_problem(p)
    assert problem == gen.build_problem(p)  # byte-identical rebuild
    otype = {o: t[: -len("Type")] for o, t in _facts(problem, "objectType")}
    rtype = {r: t[: -len("Type")] for r, t in _facts(problem, "receptacleType")}
    inrec = dict(_facts(problem, "inReceptacle"))
    for o, r in inrec.items():
        if otype[o] in ("DeskLamp", "FloorLamp"):
            assert rtype[r] in ("SideTable", "Desk", "Dresser")
        else:
            assert otype[o] in C.VAL_RECEPTACLE_OBJECTS[rtype[r]], (otype[o], rtype[r])
    targets = [o for o, t in otype.items() if t == p.obj]
    assert len(targets) >= (2 if task_type == "pick_two_obj_and_place" else 1)
    if task_type != "look_at_obj_in_light":
        assert all(rtype[inrec[o]] != p.recep for o in targets)  # the goal does not hold at the start
    else:
        assert any(t == p.recep for t in otype.values())
    cool = {o for (o,) in _facts(problem, "isCool")}
    assert cool == {o for o in targets if rtype[inrec[o]] == "Fridge"}  # ALFRED: target type, in the fridge
    needs = {"clean": "SinkBasin", "heat": "Microwave", "cool": "Fridge"}
    for verb, recep in needs.items():
        if f"_{verb}_" in task_type:
            assert recep in rtype.values()
    start = _facts(problem, "atLocation")[0][1]
    assert start not in {loc for _, loc in _facts(problem, "receptacleAtLocation")}


@pytest.mark.parametrize("split", gen.SPLIT_DIRS)
def test_no_task_starts_partly_done(split):
    """No target starts in the goal receptacle, no cooling target in the fridge (so none starts cool)."""
    for p in gen.sample_params(split, 120, seed=2):
        problem = gen.build_problem(p)
        otype = {o: t[: -len("Type")] for o, t in _facts(problem, "objectType")}
        rtype = {r: t[: -len("Type")] for r, t in _facts(problem, "receptacleType")}
        starts = {rtype[r] for o, r in _facts(problem, "inReceptacle") if otype[o] == p.obj}
        assert starts
        if p.task_type != "look_at_obj_in_light":
            assert p.recep not in starts, p.name
        if p.task_type == "pick_cool_then_place_in_recep":
            assert "Fridge" not in starts and not _facts(problem, "isCool"), p.name


def test_populations_follow_alfred_constants_and_floor_plan():
    import alfworld.gen.constants as C

    s = gen.scene_layout(10)  # ALFRED's unseen kitchen; the wheel's pose list names its receptacles
    counts = {}
    for _, rtype in s.receptacles:
        counts[rtype] = counts.get(rtype, 0) + 1
    assert counts == {
        "Cabinet": 3, "CoffeeMachine": 1, "CounterTop": 3, "Drawer": 3, "Fridge": 1, "GarbageCan": 1,
        "Microwave": 1, "Shelf": 3, "SinkBasin": 1, "StoveBurner": 4, "Toaster": 1,
    }  # fmt: skip
    p = gen.GameParams("valid_unseen", "pick_two_obj_and_place", 10, "Apple", "CounterTop", 7)
    per_type = {}
    for _, t in _facts(gen.build_problem(p), "objectType"):
        per_type[t[: -len("Type")]] = per_type.get(t[: -len("Type")], 0) + 1
    assert set(per_type) == set(s.pickupable)  # no lamp in this kitchen
    assert all(1 <= n <= C.MAX_NUM_OF_OBJ_INSTANCES for t, n in per_type.items() if t != "Apple")
    assert 2 <= per_type["Apple"] <= C.PICKUP_REPEAT_MAX
    assert [per_type[t] for t in ("Apple", "Bowl", "Bread", "Cup", "Vase")] == [2, 2, 1, 3, 1]
    assert sum(per_type.values()) == 52 and len(per_type) == 26
    distractors, targets = set(), set()
    for q in gen.sample_params("train", 60, seed=1):
        counts = {}
        for _, t in _facts(gen.build_problem(q), "objectType"):
            counts[t[: -len("Type")]] = counts.get(t[: -len("Type")], 0) + 1
        targets.add(counts.pop(q.obj))
        distractors |= {n for t, n in counts.items() if t not in ("DeskLamp", "FloorLamp")}
    assert (distractors, targets) == ({1, 2, 3}, {1, 2, 3, 4})  # several instances per type


def test_skipped_steps_flags_walkthroughs_that_skip_the_task():
    cold = ["go to fridge 1", "open fridge 1", "take apple 1 from fridge 1", "go to countertop 1"]
    assert gen.skipped_steps("pick_cool_then_place_in_recep", [*cold, "move apple 1 to countertop 1"]) == [
        "cool"
    ]
    full = [*cold[:3], "cool apple 1 with fridge 1", "go to countertop 1", "move apple 1 to countertop 1"]
    assert gen.skipped_steps("pick_cool_then_place_in_recep", full) == []
    assert gen.skipped_steps("pick_two_obj_and_place", full) == ["move", "take"]
    assert gen.skipped_steps("look_at_obj_in_light", ["go to desk 1", "take cd 1 from desk 1"]) == ["use"]


def test_goal_text_templates_and_rule_annotations():
    from alfworld.agents.utils.misc import add_task_to_grammar

    p = gen.GameParams("train", "pick_cool_then_place_in_recep", 21, "Bowl", "DiningTable", 804973)
    anns = gen.traj_data(p)["turk_annotations"]["anns"]
    assert [a["task_desc"] for a in anns] == [
        "Put a chilled bowl on the table.",
        "Chill a bowl, then set it on the table.",
        "Cool a bowl in the fridge and put it on the dining table.",
    ]
    assert {a["source"] for a in anns} == {"dreamgym-rule"}
    assert gen.task_text(p) == gen.task_text(p, 0.0) == "cool some bowl and put it in diningtable"
    assert gen.task_text(p, 1.0) + "." in [a["task_desc"] for a in anns]
    params = gen.sample_params("train", 200, seed=5)
    assert sum(gen.task_text(q, 0.5) != gen.task_text(q) for q in params) == 93  # of 200, per-game draws
    assert sum(gen.task_text(q, 0.0) != gen.task_text(q) for q in params) == 0
    # ALFWorld's own goal writer reads the same traj_data (template and annotation paths)
    grammar = add_task_to_grammar("Your task is to: UNKNOWN GOAL.", gen.traj_data(p), 1.0)
    assert grammar[len("Your task is to: ") : -1] in [a["task_desc"] for a in anns]
    with pytest.raises(ValueError, match="goal_desc_human_anns_prob"):
        gen.task_text(p, 1.5)


def test_game_files_follow_alfworld_format():
    p = gen.sample_params("valid_unseen", 1, seed=0)[0]
    g = gen.game_json(p, walkthrough=["look"])
    assert set(g) == {"pddl_domain", "grammar", "pddl_problem", "solvable", "walkthrough"}
    assert "UNKNOWN GOAL" not in g["grammar"] and f"Your task is to: {gen.task_text(p)}." in g["grammar"]
    assert g["solvable"] is True and "(:goal" in g["pddl_problem"]
    t = gen.traj_data(p)
    assert t["task_type"] == p.task_type and t["pddl_params"]["object_target"] == p.obj
    assert t["scene"]["scene_num"] == p.scene and len(t["turk_annotations"]["anns"]) == 3


def test_manifest_round_trip_and_rebuild(tmp_path):
    params = gen.sample_params("valid_unseen", 3, seed=0)
    games = [
        {**p.to_dict(), "walkthrough": ["look"], "sha1": gen.problem_sha1(gen.build_problem(p))}
        for p in params
    ]
    path = tmp_path / "m.json.gz"
    save_manifest(path, games, {"seed": 0})
    first = path.read_bytes()
    save_manifest(path, list(reversed(games)), {"seed": 0})
    assert path.read_bytes() == first  # deterministic file
    gs = GameSet(manifest=path, cache_dir=tmp_path / "cache")
    rec = gs.games("test")[0]
    data = json.loads(gs.game_file(rec).read_text())
    assert gen.problem_sha1(data["pddl_problem"]) == rec.sha1
    assert json.loads((rec.path.parent / "traj_data.json").read_text()) == gen.traj_data(rec.params)
    assert (rec.path.parent / "initial_state.pddl").read_text() == data["pddl_problem"]  # alfworld-play-tw
    anns = GameSet(manifest=path, cache_dir=tmp_path / "anns", goal_desc_human_anns_prob=1.0)
    grammar = json.loads(anns.game_file(anns.games("test")[0]).read_text())["grammar"]
    assert f"Your task is to: {gen.task_text(rec.params, 1.0)}." in grammar
    assert gen.task_text(rec.params, 1.0) != gen.task_text(rec.params)


def test_bundled_manifest_rebuilds_identically():
    data = load_manifest(MANIFEST)
    by_split = {}
    for g in data["games"]:
        by_split.setdefault(g["split"], []).append(g)
    assert {k: len(v) for k, v in by_split.items()} == {"train": 2000, "valid_seen": 140, "valid_unseen": 134}
    assert all(g["scene"] in gen.UNSEEN_SCENES for g in by_split["valid_unseen"])
    assert not any(g["scene"] in gen.UNSEEN_SCENES for g in by_split["train"] + by_split["valid_seen"])
    trivial = [g["task_type"] for g in data["games"] if gen.skipped_steps(g["task_type"], g["walkthrough"])]
    assert trivial == []
    for games in by_split.values():
        for g in games[:3]:
            p = gen.GameParams(**{k: g[k] for k in ("split", "task_type", "scene", "obj", "recep", "seed")})
            assert gen.problem_sha1(gen.build_problem(p)) == g["sha1"]
            assert g["walkthrough"]
