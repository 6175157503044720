"""The shared text-env layout: specs, step limit, invalid flag, reproducible task choice."""

import pytest
import torch
from tensordict import TensorDict
from torchrl.envs.utils import check_env_specs

from dreamgym.envs.base import TextEnvBase, TextObs, TextStep, as_text_list


class CountEnv(TextEnvBase):
    """Task i: say "go" i+1 times. Anything else is invalid."""

    env_name = "count"

    def _num_tasks(self, split):
        return 3

    def _start(self, slot, split, task_index):
        self._need = getattr(self, "_need", {})
        self._need[slot] = task_index + 1
        return TextObs(f"t{task_index}", f"say go {task_index + 1} times", f"left: {task_index + 1}", ["go"])

    def _act(self, slot, action):
        if action != "go":
            return TextStep(f"left: {self._need[slot]}", ["go"], invalid=True)
        self._need[slot] -= 1
        won = self._need[slot] == 0
        return TextStep(
            f"left: {self._need[slot]}",
            ["go"],
            reward=float(won),
            score=float(won),
            terminated=won,
            success=won,
        )


def test_check_env_specs():
    check_env_specs(CountEnv(batch_size=[3], max_steps=5))


def test_task_index_and_termination():
    env = CountEnv(batch_size=[2], max_steps=5)
    td = env.reset(TensorDict({"task_index": torch.tensor([[0], [2]])}, batch_size=[2]))
    assert as_text_list(td["task_id"]) == ["t0", "t2"]
    assert as_text_list(td["available_actions"]) == [["go"], ["go"]]
    td["action"] = ["go", "stay"]
    out = env.step(td)["next"]
    assert out["terminated"].squeeze(-1).tolist() == [True, False]
    assert out["reward"].squeeze(-1).tolist() == [1.0, 0.0]
    assert out["invalid"].squeeze(-1).tolist() == [False, True]
    assert out["reward"].shape == (2, 1)


def test_truncation_is_not_termination():
    env = CountEnv(batch_size=[1], max_steps=2)
    env.queue_tasks([2])
    td = env.reset()
    for _ in range(2):
        td["action"] = ["go"]
        td = env.step(td)["next"]
    assert td["truncated"].item() and not td["terminated"].item() and td["done"].item()


def test_rollout_with_plain_policy():
    env = CountEnv(batch_size=[2], max_steps=4)

    def policy(td):
        td["action"] = ["go"] * 2
        return td

    ro = env.rollout(4, policy, break_when_any_done=False)
    assert ro.batch_size[0] == 2 and ro.batch_size[1] == 4


def test_bad_task_index():
    env = CountEnv(batch_size=[1])
    with pytest.raises(IndexError, match="out of range"):
        env.queue_tasks([7])


def test_task_ids_are_listed_in_task_index_order():
    class NamedCountEnv(CountEnv):
        def _task_ids(self, split):
            return [f"{split}-{i}" for i in range(3)]

    env = NamedCountEnv(split="val")
    assert env.task_ids() == ["val-0", "val-1", "val-2"] and env.task_ids("test")[0] == "test-0"
    assert env.task_index_of("val-2") == 2 and env.task_index_of("test-2") is None
    assert CountEnv().task_ids() is None  # no stable ids
