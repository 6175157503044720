"""What decides an ALFWorld win is in the experience model's prompt: the rule of
``scripts/alfworld_reward_visibility.py`` and the window the shipped config shows."""

from pathlib import Path

import yaml

from tests.script_loader import load_script

CONFIGS = Path(__file__).resolve().parents[1] / "configs"

vis = load_script("alfworld_reward_visibility")


def test_a_heat_task_wins_only_after_the_heat_and_in_the_goal_receptacle():
    win = vis.visible_win
    before = ["go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1"]
    heated = [*before, "heat apple 1 with microwave 1", "go to fridge 1"]
    assert win("pick_heat_then_place_in_recep", "apple", "fridge", heated, "move apple 1 to fridge 1")
    assert not win("pick_heat_then_place_in_recep", "apple", "fridge", before, "move apple 1 to fridge 1")
    assert not win("pick_heat_then_place_in_recep", "apple", "fridge", heated, "move apple 1 to shelf 1")
    assert not win(
        "pick_heat_then_place_in_recep", "apple", "fridge", heated[-1:], "move apple 1 to fridge 1"
    )


def test_pick_two_needs_the_first_one_still_in_place_and_look_at_needs_the_lamp_where_it_is_held():
    win = vis.visible_win
    first = [
        "take mug 1 from shelf 1",
        "go to desk 1",
        "move mug 1 to desk 1",
        "go to shelf 2",
        "take mug 2 from shelf 2",
    ]
    assert win("pick_two_obj_and_place", "mug", "desk", [*first, "go to desk 1"], "move mug 2 to desk 1")
    taken_back = [*first[:3], "take mug 1 from desk 1", *first[3:], "go to desk 1"]
    assert not win("pick_two_obj_and_place", "mug", "desk", taken_back, "move mug 2 to desk 1")
    lit = ["go to sidetable 1", "use desklamp 1", "go to bed 1", "take book 1 from bed 1"]
    assert win("look_at_obj_in_light", "book", "desklamp", lit, "go to sidetable 1")  # back at the lamp
    assert not win("look_at_obj_in_light", "book", "desklamp", lit, "go to shelf 1")
    assert win("look_at_obj_in_light", "book", "desklamp", lit[2:] + ["go to sidetable 1"], "use desklamp 1")


def test_the_alfworld_experience_model_sees_every_earlier_action():
    import inspect

    from dreamgym.envs import ALFWorldEnv

    cfg = yaml.safe_load((CONFIGS / "alfworld_experience_sft.yaml").read_text())
    max_steps = inspect.signature(ALFWorldEnv.__init__).parameters["max_steps"].default
    assert cfg["data"]["init_args"]["history_window"] >= max_steps


def test_listed_counts_a_placement_as_reachable_only_with_the_episodes_states(tmp_path):
    """``listed``: the winning ``move`` comes two steps after the pickup, so the text-inferred list holds
    it only when it reads the episode's earlier states."""
    from dreamgym.schema import Trajectory, Transition, save_trajectories

    room = "-= Welcome to TextWorld, ALFRED! =- You are in the middle of a room. Looking quickly around you, you see a countertop 1, and a shelf 1."
    steps = [
        (room, "go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1.", 0.0),
        ("You arrive at countertop 1. On the countertop 1, you see a mug 1.", "take mug 1 from countertop 1",
         "You pick up the mug 1 from the countertop 1.", 0.0),
        ("You pick up the mug 1 from the countertop 1.", "go to shelf 1",
         "You arrive at shelf 1. On the shelf 1, you see nothing.", 0.0),
        ("You arrive at shelf 1. On the shelf 1, you see nothing.", "move mug 1 to shelf 1",
         "You move the mug 1 to the shelf 1.", 1.0),
    ]  # fmt: skip
    task = "alfworld/valid_seen/pick_and_place_simple/pick_and_place_simple-Mug-None-Shelf-1/trial_1"
    trs = [
        Transition(task_id=task, instruction="put a mug in shelf", step=i, state=s, action=a, next_state=n,
                   reward=r, done=r > 0, success=r > 0, source="real", env="alfworld", split="test",
                   terminated=r > 0, trajectory_id="t0")
        for i, (s, a, n, r) in enumerate(steps)
    ]  # fmt: skip
    path = tmp_path / "ep.jsonl"
    save_trajectories(
        path,
        [Trajectory("t0", task, "put a mug in shelf", "alfworld", "test", "real", "expert", trs, True, 1.0)],
    )
    without, with_history = vis.listed(str(path), False), vis.listed(str(path), True)
    assert (without["wins"], without["win_listed"]) == (1, 0.0)
    assert (with_history["win_listed"], with_history["taken_listed"]) == (1.0, 1.0)
