"""ALFWorld env on a handful of generated games: expert wins, upstream invalid-command semantics,
TorchRL specs, memoised engine == stock engine, real-format data dirs, text-only action inference,
teacher rationales and collection. Games load in 1-5 s each, so the module shares one small game set.
"""

import json
import shutil

import pytest
import torch

pytest.importorskip("textworld")

from tensordict import TensorDict  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

from dreamgym.envs.alfworld import gen, speedups  # noqa: E402
from dreamgym.envs.alfworld.env import ALFWorldEnv  # noqa: E402
from dreamgym.envs.alfworld.expert import ALFWorldExpert  # noqa: E402
from dreamgym.envs.alfworld.games import MANIFEST, load_manifest, load_pddl_env, save_manifest  # noqa: E402
from dreamgym.envs.alfworld.searcher import ALFWorldSearcher  # noqa: E402
from dreamgym.envs.base import as_text_list  # noqa: E402
from dreamgym.schema import Transition  # noqa: E402
from dreamgym.teachers.alfworld import ALFWorldTeacher  # noqa: E402


@pytest.fixture(scope="module")
def small_manifest(tmp_path_factory):
    """One bundled valid_unseen game per task type (the smallest scenes first, to load fast)."""
    games = [g for g in load_manifest(MANIFEST)["games"] if g["split"] == "valid_unseen"]
    pick = {}
    for g in sorted(games, key=lambda g: (g["scene"] != 308, g["scene"] != 424, g["scene"])):
        pick.setdefault(g["task_type"], g)
    assert set(pick) == set(gen.TASK_TYPES)
    path = tmp_path_factory.mktemp("aw") / "small.json.gz"
    save_manifest(path, list(pick.values()), {"test": True})
    return path


@pytest.fixture(scope="module")
def env(small_manifest, tmp_path_factory):
    return ALFWorldEnv(
        batch_size=[2], split="test", manifest=small_manifest, cache_dir=tmp_path_factory.mktemp("c")
    )


def _reset(env, tasks):
    return env.reset(TensorDict({"task_index": torch.tensor([[t] for t in tasks])}, batch_size=[len(tasks)]))


def _play(env, tasks, agents, max_steps=30):
    td = _reset(env, tasks)
    won = [False] * len(tasks)
    for _ in range(max_steps):
        td["action"] = [a.act(env.current(i), env.step_info(i)) for i, a in enumerate(agents)]
        td = env.step(td)["next"]
        won = [w or bool(s) for w, s in zip(won, td["success"].reshape(-1).tolist(), strict=True)]
        if all(won):
            break
    return won


def test_expert_wins_every_task_type(env):
    assert env.num_tasks() == 6
    types = set()
    for first in (0, 2, 4):
        agents = [ALFWorldExpert(), ALFWorldExpert()]
        for a in agents:
            a.reset(0)
        assert _play(env, [first, first + 1], agents) == [True, True]
        types |= {env.step_info(i)["task_type"] for i in range(2)}
    assert types == set(gen.TASK_TYPES)


VISIBLE = ("targets", "task_type", "admissible_commands", "location", "holding", "command")
"""What the searcher may read: the goal's words, the admissible commands, where it is, what it holds and
its last command (the prompt shows each); never the walkthrough, object locations or progress."""


class _SeesOnlyVisible(ALFWorldSearcher):
    def act(self, obs, info):
        return super().act(obs, {k: v for k, v in info.items() if k in VISIBLE})


def test_searcher_wins_every_task_type_from_visible_information_only(env):
    types = set()
    for first in (0, 2, 4):
        agents = [_SeesOnlyVisible(), _SeesOnlyVisible()]
        assert _play(env, [first, first + 1], agents, max_steps=50) == [True, True]
        types |= {env.step_info(i)["task_type"] for i in range(2)}
    assert types == set(gen.TASK_TYPES)


def test_searcher_moves_in_the_admissible_order_not_the_walkthrough():
    s = ALFWorldSearcher()
    info = {"targets": {"obj": "Mug", "recep": "CoffeeMachine"}, "task_type": "pick_and_place_simple",
            "admissible_commands": ["go to cabinet 10", "go to cabinet 2", "go to drawer 1", "inventory", "look"],
            "location": None, "holding": [], "walkthrough": ["go to drawer 1", "take mug 1 from drawer 1"]}  # fmt: skip
    assert s.act(None, info) == "go to cabinet 2"  # numeric order: cabinet 2 before cabinet 10
    info |= {
        "location": "cabinet 2",
        "admissible_commands": ["go to cabinet 10", "go to drawer 1", "open cabinet 2"],
    }
    assert s.act(None, info) == "open cabinet 2"
    info |= {
        "admissible_commands": [
            "close cabinet 2",
            "go to cabinet 10",
            "go to drawer 1",
            "take mug 1 from cabinet 2",
        ]
    }
    assert s.act(None, info) == "take mug 1 from cabinet 2"
    info |= {"location": "drawer 1", "admissible_commands": ["go to cabinet 10", "go to cabinet 2"]}
    assert s.act(None, info) == "go to cabinet 2"  # after the last one: wraps around


def test_task_types_keep_only_those_games_as_alfworld_numbers_them(small_manifest, tmp_path):
    heat_cool = ALFWorldEnv(
        split="test",
        manifest=small_manifest,
        cache_dir=tmp_path,
        task_types=[4, "pick_cool_then_place_in_recep"],
    )
    assert heat_cool.num_tasks() == 2
    ids = heat_cool.task_ids()
    assert {t.split("/")[2] for t in ids} == {
        "pick_heat_then_place_in_recep",
        "pick_cool_then_place_in_recep",
    }
    assert as_text_list(_reset(heat_cool, [1])["task_id"]) == [ids[1]]  # task 1 counts the kept games only
    with pytest.raises(ValueError, match=r"task_types: 'pick_hot' is not a task type; use names of"):
        ALFWorldEnv(split="test", manifest=small_manifest, cache_dir=tmp_path, task_types=["pick_hot"])
    with pytest.raises(ValueError, match=r"task_types: 7 is not"):
        ALFWorldEnv(split="test", manifest=small_manifest, cache_dir=tmp_path, task_types=[7])


def test_reset_text_ids_and_actions(env):
    td = _reset(env, [0, 1])
    obs = as_text_list(td["observation"])[0]
    assert obs.startswith("-= Welcome to TextWorld, ALFRED! =-") and "You are in the middle of a room" in obs
    instr = as_text_list(td["instruction"])[0]
    assert obs.rstrip().endswith(f"Your task is to: {instr}.")
    tid = as_text_list(td["task_id"])[0]
    assert tid.startswith(f"alfworld/valid_unseen/{env.step_info(0)['task_type']}/")
    acts = as_text_list(td["available_actions"])[0]
    assert "help" in acts and "look" in acts and acts == sorted(acts)  # as upstream's admissible commands
    assert any(a.startswith("go to ") for a in acts)


def test_invalid_command_is_a_no_op(env):
    td = _reset(env, [0, 1])
    before = as_text_list(td["available_actions"])
    first_go = next(a for a in before[1] if a.startswith("go to "))
    td["action"] = ["fly to the moon", first_go]
    out = env.step(td)["next"]
    assert as_text_list(out["observation"])[0] == "Nothing happens."
    assert out["invalid"].reshape(-1).tolist() == [True, False]
    assert out["reward"].reshape(-1).tolist() == [0.0, 0.0]
    assert as_text_list(out["available_actions"])[0] == before[0]
    # "go to X" while at X is not admissible in ALFWorld: nothing happens.
    out["action"] = ["look", first_go]
    out2 = env.step(out)["next"]
    assert as_text_list(out2["observation"])[1] == "Nothing happens." and bool(out2["invalid"][1])


def test_check_env_specs(env):
    check_env_specs(env)


def test_truncation_at_max_steps(small_manifest, tmp_path):
    e = ALFWorldEnv(batch_size=[1], split="test", max_steps=2, manifest=small_manifest, cache_dir=tmp_path)
    td = _reset(e, [0])
    for _ in range(2):
        td["action"] = ["look"]
        td = e.step(td)["next"]
    assert td["truncated"].item() and not td["terminated"].item()


def _trace(game: dict, commands: list[str]) -> list:
    tw = load_pddl_env(game, speedups=False)
    state = tw.reset()
    out = [(state.feedback, state["admissible_commands"])]
    for c in commands:
        state, _, _ = tw.step(c)
        out.append((state.feedback, state["admissible_commands"], state["won"]))
    return out


@pytest.mark.slow
def test_memoised_engine_matches_stock(env):
    for i in (0, 1):
        _reset(env, [i, i])
        info = env.step_info(0)
        game = json.loads(open(info["gamefile"]).read())
        cmds = ["look", "inventory", "not a command", *info["walkthrough"]]
        speedups.install()
        fast = [_trace(game, cmds), _trace(game, cmds)]  # second run: all caches warm
        with speedups.stock():
            assert not speedups.installed()
            slow = _trace(game, cmds)
        assert speedups.installed()
        assert fast[0] == slow and fast[1] == slow
        assert slow[-1][2] is True


def test_real_format_data_dir(env, tmp_path):
    _reset(env, [0, 1])
    info = env.step_info(1)
    src = json.loads(open(info["gamefile"]).read())
    game_dir = tmp_path / "json_2.1.1" / "valid_seen" / "pick_and_place_simple-X-None-Y-1" / "trial_T0"
    game_dir.mkdir(parents=True)
    (game_dir / "game.tw-pddl").write_text(json.dumps(src))
    shutil.copy(info["gamefile"].replace("game.tw-pddl", "traj_data.json"), game_dir / "traj_data.json")
    bad = tmp_path / "json_2.1.1" / "valid_seen" / "movable_thing" / "trial_1"  # filtered like ALFWorld
    bad.mkdir(parents=True)
    (bad / "game.tw-pddl").write_text(json.dumps(src))
    shutil.copy(game_dir / "traj_data.json", bad / "traj_data.json")
    real = ALFWorldEnv(batch_size=[1], split="val", data_dir=tmp_path)
    assert real.num_tasks() == 1
    expert = ALFWorldExpert()
    expert.reset(0)
    assert _play(real, [0], [expert]) == [True]
    assert as_text_list(real.reset()["task_id"])[0].startswith("alfworld/valid_seen/")
    with pytest.raises(FileNotFoundError, match="json_2.1.1"):
        ALFWorldEnv(batch_size=[1], data_dir=tmp_path / "nowhere")


def test_infer_available_actions_from_text(env):
    td = _reset(env, [0, 1])
    s0 = as_text_list(td["observation"])[0]
    instr = as_text_list(td["instruction"])[0]
    true0 = set(as_text_list(td["available_actions"])[0])
    guess0 = set(ALFWorldEnv.infer_available_actions(instr, s0, s0))
    assert guess0 == true0  # at the start: every "go to", look, inventory
    go = sorted(a for a in true0 if a.startswith("go to "))[0]
    td["action"] = [go, "look"]
    out = env.step(td)["next"]
    s1 = as_text_list(out["observation"])[0]
    guess1 = ALFWorldEnv.infer_available_actions(instr, s1, s0)
    assert f"examine {go[6:]}" in guess1 and go not in guess1
    assert len(set(guess1) & set(as_text_list(out["available_actions"])[0])) >= len(guess1) - 2
    assert ALFWorldEnv.infer_available_actions("", "", "") == ["help", "inventory", "look"]
    assert isinstance(ALFWorldEnv.infer_available_actions(None, 42, None), list)  # never raises


def test_inferred_actions_with_the_episodes_history_list_every_expert_step(env):
    """The synthetic env lists a model-written state's commands with this rule, and its policy can only
    choose listed ones: read with the episode's earlier states, the inferred list holds every command the
    expert takes in all six task types (the winning placement, heat / cool / clean, ``use`` of the lamp),
    no ``take`` while an object is carried, and the real list at most steps. Without the history the
    placement after walking to the target is missing (the synthetic env could never pay a win)."""
    from dreamgym.envs.alfworld.env import infer_available_actions

    same = steps = 0
    missing_without_history = []
    for task in range(env.num_tasks()):
        td = _reset(env, [task, task])
        expert = ALFWorldExpert()
        expert.reset(task)
        instr = as_text_list(td["instruction"])[0]
        states = [as_text_list(td["observation"])[0]]
        for _ in range(40):
            action = expert.act(env.current(0), env.step_info(0))
            guess = infer_available_actions(instr, states[-1], states[0], states[:-1])
            real = set(env.current(0).available_actions)
            assert action in guess, (task, action, states[-1])
            assert not (
                any(a.startswith("take ") for a in guess) and any(a.startswith("move ") for a in guess)
            )
            same += set(guess) == real
            steps += 1
            if action not in infer_available_actions(instr, states[-1], states[0]):
                missing_without_history.append(action)
            td["action"] = [action, "look"]
            out = env.step(td)["next"]
            states.append(as_text_list(out["observation"])[0])
            if bool(out["success"].reshape(-1)[0]):
                break
            td = out
        else:
            raise AssertionError(f"the expert did not win task {task}")
    assert same >= 0.95 * steps, (same, steps)
    assert any(a.startswith("move ") for a in missing_without_history)


def test_teacher_explains_valid_and_invalid_steps(env):
    td = _reset(env, [0, 1])
    teacher = ALFWorldTeacher()
    info0 = env.step_info(0)
    plan = info0["walkthrough"]
    td["action"] = [plan[0], "take apple 9 from nowhere 1"]
    out = env.step(td)["next"]
    common = dict(
        task_id="t",
        instruction="i",
        step=0,
        state="s",
        next_state="n",
        reward=0.0,
        done=False,
        env="alfworld",
    )
    ok = teacher.explain(Transition(action=plan[0], **common), env.step_info(0))
    assert "admissible" in ok and "now at" in ok and "reward is 0" in ok
    bad = teacher.explain(
        Transition(action="take apple 9 from nowhere 1", invalid=True, **common), env.step_info(1)
    )
    assert "not an admissible" in bad and "Nothing happens" in bad
    assert bool(out["invalid"][1])


@pytest.mark.slow
def test_collect_alfworld(small_manifest, tmp_path):
    from dreamgym.collect import collect_trajectories
    from dreamgym.schema import read_trajectories

    out = tmp_path / "aw.jsonl"
    trajs = collect_trajectories(
        "alfworld",
        split="test",
        n_expert=2,
        n_random=1,
        out=out,
        seed=0,
        max_steps=12,
        batch_size=3,
        env_kwargs={"manifest": str(small_manifest), "cache_dir": str(tmp_path / "c")},
    )
    assert len(trajs) == 3 and len(list(read_trajectories(out))) == 3
    assert all(t.success for t in trajs if t.policy == "expert")
    assert all(tr.reasoning for t in trajs for tr in t.transitions)


@pytest.mark.parametrize("mode", ["wrong_place", "skip_step", "wrong_object"])
def test_near_miss_commits_its_mistake_without_reward_then_searches_on(env, mode):
    from dreamgym.envs.alfworld.searcher import ALFWorldNearMiss, move_parts, object_kind

    for first in (0, 2, 4):
        agents = [ALFWorldNearMiss(modes=(mode,), seed=i) for i in range(2)]
        td = _reset(env, [first, first + 1])
        mistakes, won = [None, None], [False, False]
        for _ in range(50):
            before = [a.committed for a in agents]
            td["action"] = actions = [a.act(env.current(i), env.step_info(i)) for i, a in enumerate(agents)]
            td = env.step(td)["next"]
            for i, a in enumerate(agents):
                if a.committed and not before[i]:
                    mistakes[i] = (actions[i], float(td["reward"].reshape(-1)[i]), env.step_info(i))
                won[i] = won[i] or bool(td["success"].reshape(-1)[i])
            if all(won):
                break
        assert all(mistakes), (mode, first)
        for (action, reward, info), agent in zip(mistakes, agents, strict=True):
            targets = {"recep": "", **{k: v.lower() for k, v in info["targets"].items()}}
            obj, recep = move_parts(action)
            assert reward == 0.0, (mode, action)
            if agent.mode == "wrong_place":
                assert object_kind(obj) == targets["obj"] and object_kind(recep) != targets["recep"]
            elif agent.mode == "skip_step":
                assert object_kind(obj) == targets["obj"] and object_kind(recep) == targets["recep"]
            else:
                assert object_kind(obj) != targets["obj"] and object_kind(recep) == targets["recep"]
        assert any(won), (mode, first)  # it searches on after the mistake
