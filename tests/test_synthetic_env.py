"""SyntheticEnv: same specs as the real env, invalid no-ops, parse failures, batched model steps, from_checkpoint."""

import pytest
import torch
from experience_toy import toy_trajectories, write_toy
from torchrl.envs.utils import check_env_specs

from dreamgym.envs.base import as_text_list
from dreamgym.envs.registry import make_env
from dreamgym.envs.synthetic import SyntheticEnv, SyntheticTask, tasks_from_trajectories
from dreamgym.envs.webshop import WebShopEnv
from dreamgym.modeling.experience import ExperienceModel
from dreamgym.modeling.formats import FAILURE_STATE, ExperienceFormat, build_target
from dreamgym.retrieval import HashingEncoder, ReplayBuffer

ITEM_PAGE = "[page] item | b01\n[button] back to search\n[button] < prev\n[title] red shirt\n[button] buy now"
DONE_PAGE = "[page] done\n[text] thank you for shopping with us!\n[score] 1.0000"
TASK = SyntheticTask("t0", "i want a red shirt", "[page] search\n[search box]", ["search[<query>]"])


class ScriptedExperience(ExperienceModel):
    """The real prompt/retrieval/parse path with canned generations (records its prompts)."""

    def __init__(self, outputs, buffer=None):
        from dreamgym.envs.synthetic import _tiny_untrained_experience

        tiny = _tiny_untrained_experience()
        super().__init__(tiny.model, tiny.tokenizer, ExperienceFormat(k=1), buffer)
        self.outputs, self.prompts_seen = list(outputs), []

    def generate(self, prompts, max_new_tokens=None, structured=False):
        self.prompts_seen += prompts
        return [self.outputs.pop(0) for _ in prompts]


def test_default_env_passes_check_env_specs():
    check_env_specs(SyntheticEnv(batch_size=[2]))
    check_env_specs(make_env("synthetic", batch_size=[2]))


def test_specs_equal_the_real_env():
    syn, real = SyntheticEnv(batch_size=[3]), make_env("webshop", batch_size=[3])
    for name in ("observation_spec", "action_spec", "reward_spec", "done_spec"):
        assert getattr(syn, name) == getattr(real, name), name
    assert syn.batch_size == real.batch_size


def test_valid_action_rule():
    """The synthetic env asks the imitated env's rule, which the real env applies on its steps."""
    valid = WebShopEnv.is_valid_action
    assert valid("search[red shirt]", ["search[<query>]"]) and valid("search[ ]", ["click[buy now]"])
    assert valid("click[Buy Now]", ["click[buy now]"]) and not valid("CLICK[buy now]", ["click[buy now]"])
    assert not valid("click[x]", ["click[y]"]) and not valid("click[search]", ["click[search]"])


ACTION_BATTERY = [
    "search[red shirt]", "search[ ]", "search[]", "SEARCH[tea]", "click[buy now]", "CLICK[buy now]",
    "click[Buy Now]", "click[back to search]", "click[next >]", "click[search]", "", "   ", "x" * 10_000,
    "click[" + "é" * 20 + "]", "buy now", "click[buy now", "click[b0000000000]", "search[a] extra",
]  # fmt: skip


def test_real_and_synthetic_envs_agree_on_validity():
    """On real states of every page kind, the real env's invalid flag equals the rule the synthetic
    env applies, for every action of the battery."""
    from dreamgym.collect import collect_trajectories

    states = {}
    for t in collect_trajectories("webshop", "train", 3, 3, seed=7, teacher=False):
        for tr in t.transitions:
            states.setdefault(tr.state.splitlines()[0].split(" ")[1], (t, tr))
    assert {"search", "results", "item"} <= set(states)
    env = make_env("webshop", split="train", batch_size=1)
    for traj, tr in states.values():
        idx = env.task_index_of(traj.task_id)
        for action in ACTION_BATTERY + tr.available_actions[:3]:
            env.queue_tasks([idx])
            td = env.reset()
            for prev in traj.transitions[: tr.step]:
                td["action"] = [prev.action]
                td = env.step(td)["next"]
            td["action"] = [action]
            real_invalid = bool(env.step(td)["next", "invalid"][0, 0])
            assert real_invalid == (not WebShopEnv.is_valid_action(action, tr.available_actions)), action


def test_invalid_action_is_a_noop_without_model_call():
    env = SyntheticEnv(ScriptedExperience([]), [TASK], batch_size=[1])
    td = env.reset()
    td["action"] = ["click[buy now]"]  # not available on the search page
    out = env.step(td)["next"]
    assert out["invalid"].item() and not out["done"].item() and out["reward"].item() == 0.0
    assert as_text_list(out["observation"]) == [TASK.initial_state] and env.model_calls == 0


def test_unparseable_output_is_failure_state_and_counted():
    env = SyntheticEnv(
        ScriptedExperience(["<next> half a state", build_target(ITEM_PAGE, 0, False)]), [TASK], batch_size=[2]
    )
    td = env.reset()
    td["action"] = ["search[red shirt]", "search[red shirt]"]
    out = env.step(td)["next"]
    assert out["sim_error"].squeeze(-1).tolist() == [True, False]
    assert out["terminated"].squeeze(-1).tolist() == [True, False]
    assert out["reward"].squeeze(-1).tolist() == [0.0, 0.0]
    obs = as_text_list(out["observation"])
    assert obs[0] == FAILURE_STATE and obs[1] == ITEM_PAGE
    assert as_text_list(out["available_actions"])[0] == []
    assert env.sim_errors == 1 and env.model_calls == 2 and env.sim_error_rate == 0.5


def test_untrained_model_never_raises():
    env = SyntheticEnv(batch_size=[2])  # tiny untrained model: noise, so sim errors, never an exception
    td = env.reset()
    td["action"] = ["search[red shirt]", "click[nothing]"]
    out = env.step(td)["next"]
    assert out["sim_error"][0].item() and out["invalid"][1].item() and env.sim_errors == 1


def test_batched_steps_reward_reasoning_actions_and_write_back():
    buf = ReplayBuffer(HashingEncoder(dim=32))
    buf.add([t for traj in toy_trajectories(4) for t in traj.transitions])
    em = ScriptedExperience(
        [
            build_target(ITEM_PAGE, 0, False, 0, reasoning="clicking opens the item"),
            build_target(DONE_PAGE, 1, True, 1, reasoning="the item matches"),
        ],
        buffer=buf,
    )
    env = SyntheticEnv(em, [TASK], batch_size=[1], write_back=True)
    td = env.reset()
    td["action"] = ["search[red shirt]"]
    td = env.step(td)["next"]
    assert as_text_list(td["reasoning"]) == ["clicking opens the item"]
    # the new state's actions come from the real env's rule applied to the generated text
    assert as_text_list(td["available_actions"])[0] == [
        "click[back to search]",
        "click[< prev]",
        "click[buy now]",
    ]
    td["action"] = ["click[buy now]"]
    td = env.step(td)["next"]
    assert (
        td["reward"].item() == 1.0 and td["success"].item() and td["terminated"].item() and td["done"].item()
    )
    assert "<history> search[red shirt]" in em.prompts_seen[1] and em.prompts_seen[1].count("<ref>") == 1
    assert len(buf) == 12 + 2 and buf.transitions[-1].source == "synthetic"


def test_the_optional_env_interface_real_defaults_and_synthetic_overrides():
    """What a trainer asks of any env (TextEnvBase): a real env's defaults, the synthetic env's answers."""
    real = make_env("webshop", batch_size=[1])
    assert real.place_model("cpu") is real and real.health() == {}
    assert real.written_buffer is None and real.make_real_env() is None
    buf = ReplayBuffer(HashingEncoder(dim=32))
    syn = SyntheticEnv(ScriptedExperience([], buffer=buf), [TASK], write_back=True, max_steps=7)
    assert syn.place_model("cpu") is syn and set(syn.health()) == {"sim_error_rate", "cut_rate"}
    assert syn.written_buffer is buf
    assert SyntheticEnv(ScriptedExperience([], buffer=buf), [TASK]).written_buffer is None  # no write_back
    twin = syn.make_real_env()
    assert isinstance(twin, WebShopEnv) and twin.max_steps == 7 and twin.batch_size == torch.Size([1])


def test_from_checkpoint_and_frozen_model(tmp_path):
    from dreamgym.envs.synthetic import _tiny_untrained_experience

    path = write_toy(tmp_path / "train.jsonl", 6)
    em = _tiny_untrained_experience()
    em.buffer = ReplayBuffer.from_files([path], HashingEncoder(dim=32))
    em.save_pretrained(tmp_path / "model")
    env = SyntheticEnv.from_checkpoint(
        tmp_path / "model", tasks=str(path), batch_size=[2], max_new_tokens=4, decoding="free"
    )
    assert len(env.tasks) == len(tasks_from_trajectories([path])) == 6 and len(env.experience.buffer) == 18
    assert (
        not any(p.requires_grad for p in env.experience.model.parameters())
        and not env.experience.model.training
    )
    env2 = SyntheticEnv.from_checkpoint(tmp_path / "model", batch_size=[1])  # tasks from the buffer
    assert {t.task_id for t in env2.tasks} == {t.task_id for t in env.tasks}
    env.add_tasks([TASK])
    assert env.num_tasks() == 7
    td = env.reset(env.reset().set("task_index", torch.tensor([[6], [6]])))
    assert as_text_list(td["task_id"]) == ["t0", "t0"]
    with pytest.raises(FileNotFoundError, match="experience_format.json"):
        SyntheticEnv.from_checkpoint(tmp_path)


def test_vary_tasks_adds_the_experience_models_variations_to_the_pool():
    from dreamgym.curriculum import VariableTaskPool

    class Varying(ScriptedExperience):
        def vary_task(self, instructions, max_new_tokens=64):
            return [f"{s} in blue" if i == 0 else "  " for i, s in enumerate(instructions)]

    env = SyntheticEnv(Varying([]), [TASK], batch_size=[1])
    assert isinstance(env, VariableTaskPool)
    assert env.vary_tasks([0], 2) == [1]  # the blank second variation is dropped
    new = env.tasks[1]
    assert new.instruction == "i want a red shirt in blue" and new.task_id == "t0-var1"
    assert (new.initial_state, new.available_actions) == (TASK.initial_state, TASK.available_actions)
    assert env.num_tasks() == 2


def test_synthetic_alfworld_lists_a_placement_steps_after_the_pickup():
    """The synthetic env lists each model-written state's commands with the real env's rule, given the
    episode's earlier states: the mug picked up at the countertop can be moved to the shelf two steps
    later (the winning command, which a rule reading one state never listed)."""
    from dreamgym.modeling.formats import ParsedOutcome

    answers = {
        "go to countertop 1": "You arrive at countertop 1. On the countertop 1, you see a mug 1.",
        "take mug 1 from countertop 1": "You pick up the mug 1 from the countertop 1.",
        "go to shelf 1": "You arrive at shelf 1. On the shelf 1, you see nothing.",
        "move mug 1 to shelf 1": "You move the mug 1 to the shelf 1.",
    }

    class Scripted:
        buffer = None

        def predict(self, queries):
            return [ParsedOutcome(True, answers[q.action], 0.0, False, 0.0) for q in queries]

    room = (
        "-= Welcome to TextWorld, ALFRED! =- You are in the middle of a room. Looking quickly around you, "
        "you see a countertop 1, and a shelf 1."
    )
    task = SyntheticTask("alfworld/train/pick_and_place_simple/x/trial_1", "put a mug in shelf", room, [])
    env = SyntheticEnv(Scripted(), [task], real_env="alfworld", batch_size=[1], max_steps=10)
    td = env.reset()
    listed = []
    for action in answers:
        assert action in env.current(0).available_actions, (action, env.current(0).available_actions)
        td["action"] = [action]
        td = env.step(td)["next"]
        listed.append(as_text_list(td["available_actions"])[0])
    assert not any(a.startswith("take ") for a in listed[1])  # carrying: no second pickup
    assert "move mug 1 to shelf 1" in listed[2] and "take mug 1 from shelf 1" in listed[3]


def test_ground_reads_what_a_place_holds_from_the_games_real_steps():
    """With ``ground=True`` a ``go to R`` / ``open R`` before the episode touched ``R`` reads the next state
    of the same game's real step (recorded before its episode touched ``R``) instead of the model's; after
    a take from ``R`` the model writes again, as it does for other games and without ``ground``."""
    from dreamgym.envs.alfworld.env import ALFWorldEnv
    from dreamgym.modeling.formats import ParsedOutcome
    from dreamgym.schema import Transition

    assert ALFWorldEnv.path_free("go to countertop 1", ["go to shelf 1", "open drawer 1"])
    assert ALFWorldEnv.path_free("open drawer 1", ["open drawer 10", "take mug 1 from countertop 1"])
    assert ALFWorldEnv.path_free(
        "open drawer 1", ["go to drawer 1", "examine drawer 1"]
    )  # looking changes nothing
    assert not ALFWorldEnv.path_free("open drawer 1", ["go to drawer 1", "open drawer 1", "close drawer 1"])
    assert not ALFWorldEnv.path_free("go to countertop 1", ["take mug 1 from countertop 1"])
    assert not ALFWorldEnv.path_free("take mug 1 from countertop 1", [])
    assert not ALFWorldEnv.path_free("go to countertop 1", ["slice apple 1 with knife 1"])

    game = "alfworld/train/pick_and_place_simple/x/trial_1"
    real_view = "You arrive at countertop 1. On the countertop 1, you see a mug 1."
    after_take = "You arrive at countertop 1. On the countertop 1, you see nothing."
    steps = [  # a real episode: countertop seen untouched, then again after its mug was taken
        ("go to countertop 1", real_view),
        ("take mug 1 from countertop 1", "You pick up the mug 1 from the countertop 1."),
        ("go to shelf 1", "You arrive at shelf 1. On the shelf 1, you see nothing."),
        ("go to countertop 1", after_take),
    ]
    buf = ReplayBuffer(HashingEncoder(dim=64))
    buf.add(
        Transition(task_id=game, instruction="put a mug in shelf", step=i, state="s", action=a, next_state=n,
                   reward=0.0, done=False, trajectory_id="real-0", source="offline", env="alfworld")
        for i, (a, n) in enumerate(steps)
    )  # fmt: skip
    assert buf.earlier_actions(buf.same_steps(game, "go to countertop 1")[1]) == [a for a, _ in steps[:3]]
    invented = "You arrive at countertop 1. On the countertop 1, you see a apple 1."

    class Scripted:
        buffer = buf

        def __init__(self):
            self.calls = []

        def predict(self, queries):
            self.calls += [q.action for q in queries]
            return [ParsedOutcome(True, invented, 0.0, False, 0.0) for _ in queries]

    room = (
        "-= Welcome to TextWorld, ALFRED! =- You are in the middle of a room. Looking quickly around you, "
        "you see a countertop 1, and a shelf 1."
    )
    other = SyntheticTask("alfworld/train/pick_and_place_simple/y/trial_2", "put a mug in shelf", room, [])
    for ground, task, expect in [(True, SyntheticTask(game, "put a mug in shelf", room, []), real_view),
                                 (False, SyntheticTask(game, "put a mug in shelf", room, []), invented),
                                 (True, other, invented)]:  # fmt: skip
        model = Scripted()
        env = SyntheticEnv(model, [task], real_env="alfworld", batch_size=[1], max_steps=10, ground=ground,
                           write_back=True)  # fmt: skip
        td = env.reset()
        td["action"] = ["go to countertop 1"]
        td = env.step(td)["next"]
        assert as_text_list(td["observation"])[0] == expect
        assert model.calls == ([] if expect == real_view else ["go to countertop 1"])
        listed = env.current(0).available_actions  # the commands of the state it shows
        assert ("take mug 1 from countertop 1" in listed) == (expect == real_view)
        assert env.health().get("grounded_steps", 0.0) == float(expect == real_view)
        written = buf.transitions[-1]  # every step of the episode is written back, read or generated
        assert (written.source, written.action, written.next_state) == (
            "synthetic",
            "go to countertop 1",
            expect,
        )
