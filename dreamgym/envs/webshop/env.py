"""WebShopEnv: the WebShop text environment as a batched TorchRL env with the dreamgym key layout.

Behaviour follows upstream WebShop (pages, actions, reward; see :mod:`.pages`, :mod:`.reward`) on
the bundled catalog or on upstream data files (:mod:`.catalog`).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

import numpy as np

from dreamgym.envs.base import TextEnvBase, TextObs, TextStep
from dreamgym.envs.webshop.catalog import Catalog, load_catalog
from dreamgym.envs.webshop.goals import Goal, split_goals
from dreamgym.envs.webshop.grounding import WebShopGrounding
from dreamgym.envs.webshop.pages import (
    PageState,
    apply_action,
    available_actions,
    check_action,
    infer_available_actions,
    render_abstract,
    render_text,
)
from dreamgym.envs.webshop.reward import attribute_matches, outcome_reward, purchase_score, type_reward
from dreamgym.envs.webshop.search import get_search_engine

__all__ = ["WebShopEnv", "OBSERVATION_MODES"]

OBSERVATION_MODES = ("abstract", "text")


class WebShopEnv(TextEnvBase):
    """WebShop (Yao et al., 2022) re-implemented offline, batched, with binary outcome reward.

    Spec tree (``B`` = ``batch_size[0]``; shared with every dreamgym text env)::

        observation_spec: instruction, observation, available_actions, task_id, reasoning  NonTensor (B,)
                          score (B,1) float32 (raw purchase score in [0,1]), success / invalid /
                          sim_error (B,1) bool, step_count (B,1) int64
        action_spec:      action NonTensor (B,)  e.g. "search[red tea]", "click[buy now]"
        reward_spec:      reward (B,1) float32   1.0 on the purchase step iff score == 1.0, else 0
        done_spec:        done / terminated (purchase) / truncated (step limit), each (B,1) bool

    Example:
        >>> env = WebShopEnv(batch_size=[1], split="test")
        >>> env.queue_tasks([0])
        >>> acts = iter(["search[herbal tea]", "click[next >]", "click[back to search]"])
        >>> def policy(td):
        ...     td["action"] = [next(acts)]
        ...     return td
        >>> ro = env.rollout(3, policy)
        >>> ro.batch_size
        torch.Size([1, 3])
        >>> ro[0, 0]["next", "observation"].splitlines()[0]
        '[page] results | query: herbal tea | page 1 | total results: 44'
        >>> ro[0, 2]["next", "observation"]
        '[page] search\\n[search box]'

    Args:
        batch_size: number of parallel sessions, e.g. ``[4]``.
        split: "train", "val" or "test" (goals split by target product; see :mod:`.goals`).
        max_steps: step limit per episode (truncation).
        data_dir: directory of upstream-schema files; ``None`` for the bundled catalog.
        human_goals: human instructions (True) or synthetic option-combination goals (False).
        observation_mode: "abstract" (clean element list, the default) or "text" (upstream ``[SEP]`` text).
        seed: seed for sampling goals when no task index is given (uniform for human goals, by goal
            weight for synthetic goals, as upstream).
        show_attrs: show the Attributes button/sub-page on item pages (upstream ``show_attrs``).
        num_products: keep only the first N product rows of the data file.
        item_facts: abstract item pages show the price paid and the product's attribute list, what the
            purchase reward checks (:func:`.pages.item_fact_lines`); ``False`` gives the older item page
            (listed price only), kept for the observability ablation.
    """

    env_name = "webshop"

    def __init__(
        self,
        batch_size=(1,),
        split: str = "train",
        max_steps: int = 15,
        data_dir: str | None = None,
        human_goals: bool = True,
        observation_mode: str = "abstract",
        seed: int | None = 0,
        show_attrs: bool = False,
        num_products: int | None = None,
        item_facts: bool = True,
    ):
        if observation_mode not in OBSERVATION_MODES:
            raise ValueError(
                f"observation_mode={observation_mode!r} is not supported; use one of {OBSERVATION_MODES}"
            )
        if split not in ("train", "val", "test"):
            raise ValueError(f"split={split!r} is not a WebShop split; use 'train', 'val' or 'test'")
        self.catalog: Catalog = load_catalog(data_dir, num_products)
        self.engine = get_search_engine(self.catalog)
        self.goals = split_goals(self.catalog, human_goals)
        if not self.goals[split]:
            raise ValueError(f"split {split!r} has no goals in {self.catalog.data_dir!r}")
        self.human_goals = human_goals
        self.observation_mode = observation_mode
        self.show_attrs = show_attrs
        self.item_facts = item_facts
        super().__init__(batch_size=batch_size, max_steps=max_steps, split=split, seed=seed)
        n = self.batch_size[0]
        self._pages: list[PageState] = [PageState() for _ in range(n)]
        self._goal: list[Goal | None] = [None] * n
        self._infos: list[dict[str, Any]] = [{} for _ in range(n)]

    # ------------------------------------------------------------------ hooks
    def _num_tasks(self, split: str) -> int:
        return len(self.goals[split])

    def _task_ids(self, split: str) -> list[str]:
        return [g.goal_id for g in self.goals[split]]

    def _next_task(self, requested: int) -> int:
        # Upstream samples goals by weight when none is given (all 1 for human goals).
        if requested >= 0 or self._queued or self.human_goals:
            return super()._next_task(requested)
        w = np.array([g.weight for g in self.goals[self.split]], dtype=np.float64)
        return int(self._rng.choice(len(w), p=w / w.sum()))

    def goal(self, slot: int) -> Goal:
        """The current goal of ``slot``."""
        if self._goal[slot] is None:
            raise RuntimeError(f"WebShopEnv: slot {slot} has not been reset yet; call env.reset()")
        return self._goal[slot]

    def page(self, slot: int) -> PageState:
        """The current page state of ``slot``."""
        return self._pages[slot]

    def _render(self, slot: int) -> tuple[str, list[str]]:
        page = self._pages[slot]
        if self.observation_mode == "text":
            obs = render_text(page, self.catalog, self._goal[slot].instruction_text, self.show_attrs)
        else:
            obs = render_abstract(page, self.catalog, self.show_attrs, self.item_facts)
        return obs, available_actions(page, self.catalog, self.show_attrs)

    def _start(self, slot: int, split: str, task_index: int) -> TextObs:
        goal = self.goals[split][task_index]
        self._goal[slot] = goal
        self._pages[slot] = PageState()
        self._infos[slot] = self._base_info(slot)
        obs, acts = self._render(slot)
        return TextObs(goal.goal_id, goal.instruction_text, obs, acts)

    def _act(self, slot: int, action: str) -> TextStep:
        before = self._pages[slot]
        tr = apply_action(before, action, self.catalog, self.engine, self.show_attrs)
        goal = self._goal[slot]
        score, reward, success, breakdown = 0.0, 0.0, False, None
        if tr.bought:
            product = self.catalog.products[tr.page.asin]
            breakdown = purchase_score(product, goal, tr.page.options)
            score = breakdown.score
            reward = outcome_reward(score)
            success = reward == 1.0
            tr.page.score = score
        self._pages[slot] = tr.page
        info = self._base_info(slot)
        info.update(
            action=action,
            action_kind=tr.kind,
            target=tr.target,
            valid=tr.valid,
            reason=tr.reason,
            prev_page=before.kind,
            selected=tr.selected,
            bought=tr.bought,
            reward_info=breakdown.to_dict() if breakdown else None,
        )
        self._infos[slot] = info
        obs, acts = self._render(slot)
        return TextStep(
            obs,
            acts,
            reward=reward,
            score=score,
            terminated=tr.bought,
            success=success,
            invalid=not tr.valid,
            info=info,
        )

    # --------------------------------------------------------- privileged info
    def _product_match(self, asin: str, goal: Goal) -> dict[str, Any]:
        p = self.catalog.products[asin]
        r_type = type_reward(p, goal)[0]
        matched, missed = attribute_matches(p, goal.attributes)
        values = {v for vals in p.options.values() for v in vals}
        opts_missing = [v for v in goal.option_values() if v not in values]
        return {
            "asin": asin,
            "title": p.title,
            "is_target": asin == goal.asin,
            "type_ok": r_type == 1.0,
            "attrs_missed": missed,
            "options_missing": opts_missing,
            "price_ok": p.price <= goal.price_upper,
            "matches_goal": r_type == 1.0 and not missed and not opts_missing and p.price <= goal.price_upper,
        }

    def _base_info(self, slot: int) -> dict[str, Any]:
        goal, page = self._goal[slot], self._pages[slot]
        info: dict[str, Any] = {
            "goal": {
                "goal_id": goal.goal_id,
                "asin": goal.asin,
                "instruction": goal.instruction_text,
                "attributes": goal.attributes,
                "options": goal.goal_options,
                "price_upper": goal.price_upper,
                "query": goal.query,
                "name": goal.name,
            },
            "page": page.kind,
            "keywords": page.keywords,
            "page_num": page.page,
            "asin": page.asin,
            "options": dict(page.options),
            "num_results": len(page.results),
            "target_rank": page.results.index(goal.asin) + 1 if goal.asin in page.results else None,
        }
        if page.kind == "results":
            info["shown"] = [self._product_match(a, goal) for a in page.page_results()]
        if page.asin is not None and page.kind != "results":
            info["product"] = self._product_match(page.asin, goal)
            info["product_options"] = self.catalog.products[page.asin].options
        return info

    def purchase_score(self, task_id: str, asin: str, options: dict[str, str]) -> float | None:
        """What buying product ``asin`` with ``options`` pays on task ``task_id`` of this env's split (the
        upstream purchase score), whatever path leads there; None if the task or product is unknown. For
        audits of a simulator's purchases only (the synthetic env never calls it)."""
        index = self.task_index_of(task_id)
        product = self.catalog.products.get(asin.upper())
        if index is None or product is None:
            return None
        return purchase_score(product, self.goals[self.split][index], options).score

    def step_info(self, slot: int) -> dict[str, Any]:
        """Privileged info of ``slot``'s last step (or reset): goal, page, matches, reward breakdown."""
        return self._infos[slot]

    @classmethod
    def is_valid_action(cls, action: str, available_actions) -> bool:
        """WebShop's own rule (:func:`.pages.check_action`) against the clickables ``available_actions`` list."""
        clicks = {
            a[len("click[") : -1] for a in available_actions if a.startswith("click[") and a.endswith("]")
        }
        return not check_action(action, clicks)[2]

    @classmethod
    def infer_available_actions(
        cls, instruction: str, state: str, initial_state: str = "", earlier_states: Sequence[str] = ()
    ) -> list[str]:
        """The actions of an abstract WebShop ``state`` (see :mod:`.pages`); never raises."""
        return infer_available_actions(state)

    @classmethod
    def grounding(cls, **options) -> WebShopGrounding:
        """WebShop's grounding: steps answered from recorded pages (:mod:`.grounding`); ``options``: its
        arguments (``search_attributes``).

        Raises:
            ValueError: an option it does not take.
        """
        known = sorted(inspect.signature(WebShopGrounding).parameters)
        bad = sorted(set(options) - set(known))
        if bad:
            raise ValueError(f"WebShop's grounding options are {known}, got {bad}; fix grounding_options")
        return WebShopGrounding(**options)
