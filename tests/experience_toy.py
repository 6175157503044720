"""A toy shop written as real-looking trajectories, for experience-model tests before/without WebShop."""

from __future__ import annotations

import random

from dreamgym.schema import Trajectory, Transition, write_trajectories

COLORS = ["red", "blue", "green", "black"]
ITEMS = ["shirt", "mug", "lamp", "sock"]


def toy_trajectories(n: int, split: str = "train", seed: int = 0) -> list[Trajectory]:
    """``n`` episodes: search, click the right (or a wrong) item, buy. Success iff the right item."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        color, item = rng.choice(COLORS), rng.choice(ITEMS)
        wrong = rng.random() < 0.3
        instr = f"i want a {color} {item}"
        s0 = f"Search page [SEP] {instr} [SEP] Search"
        res = f"Results for {color} {item} [SEP] b1 {color} {item} $10 [SEP] b2 plain {item} $5"
        pick = "b2" if wrong else "b1"
        title = f"plain {item}" if wrong else f"{color} {item}"
        page = f"Item {pick} [SEP] {title} [SEP] Buy Now"
        reward = 0.0 if wrong else 1.0
        done_page = f"Thank you for shopping [SEP] score {reward:.1f}"
        steps = [
            (s0, f"search[{color} {item}]", res, 0.0, False, "Searching lists matching products."),
            (res, f"click[{pick}]", page, 0.0, False, f"Clicking {pick} opens its item page."),
            (
                page,
                "click[buy now]",
                done_page,
                reward,
                True,
                "Buying ends the episode; " + ("the item does not match." if wrong else "the item matches."),
            ),
        ]
        tid = f"{split}-{i}"
        trans = [
            Transition(
                task_id=f"task{i}",
                instruction=instr,
                step=j,
                state=s,
                action=a,
                next_state=ns,
                reward=r,
                done=d,
                success=d and r == 1.0,
                split=split,
                reasoning=why,
                score=r,
                terminated=d,
                trajectory_id=tid,
                available_actions=["click[buy now]"],
            )
            for j, (s, a, ns, r, d, why) in enumerate(steps)
        ]
        out.append(
            Trajectory(
                tid,
                f"task{i}",
                instr,
                "webshop",
                split,
                "offline",
                "expert",
                trans,
                success=reward == 1.0,
                score=reward,
            )
        )
    return out


def write_toy(path, n: int, split: str = "train", seed: int = 0):
    write_trajectories(path, toy_trajectories(n, split, seed))
    return path


class RecordedAnswers:
    """An experience model that answers from recorded real transitions (``.predict`` like
    :class:`dreamgym.modeling.experience.ExperienceModel`): the transition's next state, reward and
    teacher rationale. ``buy_success`` overrides every purchase's reward, ``edit`` rewrites the rationale."""

    def __init__(self, trajs, buy_success=None, edit=None):
        self.table = {(q.state, q.action): q for t in trajs for q in t.transitions}
        self.buy_success, self.edit = buy_success, edit

    def predict(self, queries):
        from dreamgym.modeling.formats import ParsedOutcome

        out = []
        for q in queries:
            t = self.table[(q.state, q.action)]
            reward = float(self.buy_success) if self.buy_success is not None and t.terminated else t.reward
            text = self.edit(t.reasoning) if self.edit is not None else t.reasoning
            out.append(ParsedOutcome(True, t.next_state, reward, t.terminated, reward, reasoning=text or ""))
        return out
