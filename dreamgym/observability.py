"""Observability audit: is each transition's reward decided by what the experience model's prompt shows?

A target the model cannot derive from its prompt teaches it to assert what it cannot see. For every
transition of a data set the audit builds the prompt the experience model is trained on
(:func:`dreamgym.modeling.formats.build_prompt` with the data's :class:`ExperienceFormat`, *without*
retrieved neighbours, which do not count) and asks whether the real reward follows from it.

WebShop (:func:`webshop_audit`): a step that is not a purchase has reward 0 whatever the page, and
the prompt shows the action, so it is observable. A purchase is observable when, for every term of
the reward (each goal attribute, each goal option, the price cap, the type factor),

1. the instruction names the term (the goal's attributes and options are hidden otherwise), and
2. the reward's own rule applied to the facts in the prompt's ``<state>`` section
   (:func:`dreamgym.envs.webshop.checks.check_purchase`) gives the real verdict of that term
   (:func:`dreamgym.envs.webshop.reward.purchase_score` on the catalog's product and goal).

Then the visible checks give the real score (``score_share``). The binary reward (1 iff the score is
1) needs less: when some other term fails, the type factor does not matter, so a purchase's *reward*
is observable when 1. and 2. hold for every term but the type factor, and also for the type factor
unless another term fails (``purchase_share``). Per data source (the trajectory's ``policy``) the
report gives ``purchase_share``, ``score_share``, ``step_share`` (steps whose reward is observable /
steps) and, per term kind, the share of purchases where it holds.

Only envs registered here are audited; :func:`audit` raises a clear error for the others.

The same principle on the policy's side (:func:`webshop_choice_audit`): behaviour cloning teaches the
policy the demonstrator's choices, so a choice the visible page does not support (the oracle expert
opens its hidden target product) teaches it to guess. For every product opened from a results page,
the audit asks whether the visible text ranks it first (:func:`dreamgym.envs.webshop.agents.visible_scores`:
within the price cap, content words shared with the instruction; ties counted apart).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from dreamgym.modeling.formats import ExperienceFormat, build_prompt, terminated_of
from dreamgym.schema import Trajectory

__all__ = [
    "TERM_KINDS",
    "AUDITED_ENVS",
    "audit",
    "webshop_audit",
    "webshop_purchases",
    "webshop_choice_audit",
    "format_report",
]

TERM_KINDS = ("named", "attributes", "options", "price", "type")
"""Per-purchase checks the WebShop audit reports (each: the share of purchases where it holds)."""


def _prompt_state(prompt: str) -> str:
    """The ``<state>`` section of a prompt (what the model sees of the current page)."""
    body = prompt.rsplit("\n<state>\n", 1)[-1]
    return body.rsplit("\n<action> ", 1)[0]


def _purchased_options(next_state: str) -> dict[str, str]:
    for line in next_state.splitlines():
        if line.startswith("[purchased] "):
            opts = line.split(" | options: ", 1)[-1].strip()
            if opts == "none":
                return {}
            return dict(p.partition(": ")[::2] for p in opts.split(" ; "))
    return {}


def webshop_purchases(
    trajectories: Sequence[Trajectory], data_dir: str | None = None
) -> Iterator[tuple[Trajectory, Any, Any, Any]]:
    """Every step of ``trajectories`` as ``(trajectory, transition, goal, real)``: for a terminating
    ``click[buy now]`` the catalog's goal of its task and the real reward breakdown
    (:func:`dreamgym.envs.webshop.reward.purchase_score`), else ``goal = real = None``.

    Raises:
        KeyError: a task id that is not a goal of the catalog (data collected on another catalog).
    """
    from dreamgym.envs.webshop.catalog import load_catalog
    from dreamgym.envs.webshop.goals import split_goals
    from dreamgym.envs.webshop.reward import purchase_score

    catalog = load_catalog(data_dir)
    goals = {
        g.goal_id: g for human in (True, False) for gs in split_goals(catalog, human).values() for g in gs
    }
    for traj in trajectories:
        for t in traj.transitions:
            if not (terminated_of(t.done, t.truncated) and t.action.strip().lower() == "click[buy now]"):
                yield traj, t, None, None
                continue
            goal = goals.get(t.task_id)
            if goal is None:
                raise KeyError(
                    f"trajectory {traj.trajectory_id!r}: task_id {t.task_id!r} is not a goal of the catalog in "
                    f"{catalog.data_dir!r}; audit WebShop data with the catalog it was collected on (data_dir=)"
                )
            asin = t.state.splitlines()[0].split("|")[-1].strip().upper()
            yield (
                traj,
                t,
                goal,
                purchase_score(catalog.products[asin], goal, _purchased_options(t.next_state)),
            )


def webshop_audit(
    trajectories: Sequence[Trajectory], fmt: ExperienceFormat | None = None, data_dir: str | None = None
) -> dict[str, dict[str, float]]:
    """The WebShop observability report per data source (module docstring).

    Args:
        trajectories: WebShop trajectories of any split (task ids are goal ids).
        fmt: the experience model's prompt layout (default :class:`ExperienceFormat`).
        data_dir: the catalog the data was collected on (``None``: the bundled one).

    Returns:
        ``{source: {"purchases", "steps", "purchase_share", "step_share", <TERM_KINDS>...}}``, plus
        an ``"all"`` entry over every source.
    """
    from dreamgym.envs.webshop.checks import check_purchase

    fmt = fmt or ExperienceFormat()
    counts: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for traj in trajectories:
        for key in (traj.policy, "all"):
            counts[key]["steps"] += len(traj.transitions)
    for traj, t, goal, real in webshop_purchases(trajectories, data_dir):
        if goal is None:
            for key in (traj.policy, "all"):
                counts[key]["observable_steps"] += 1
            continue
        history = [x.action for x in traj.transitions[: t.step]]
        prompt = build_prompt(fmt, traj.instruction, history, [], t.state, t.action)
        vis = check_purchase(traj.instruction, _prompt_state(prompt), goal.attributes, goal.goal_options)
        held = {
            "named": all(c.named for c in vis.attributes + vis.options),
            "attributes": [c.term for c in vis.attributes if c.ok] == real.attrs_matched,
            "options": [c.term for c in vis.options if c.ok] == real.options_matched,
            "price": vis.price_ok == real.price_ok,
            "type": vis.r_type == real.r_type,
        }
        score_seen = all(held.values())
        # The binary reward needs the type factor only when every other term passes.
        others_fail = not (real.price_ok and not real.attrs_missed and not real.options_missed)
        seen = all(v for k, v in held.items() if k != "type") and (held["type"] or others_fail)
        for key in (traj.policy, "all"):
            c = counts[key]
            c["purchases"] += 1
            c["observable_purchases"] += seen
            c["score_observable"] += score_seen
            c["observable_steps"] += seen
            for k, v in held.items():
                c[k] += v
    report = {}
    for key, c in counts.items():
        n = c["purchases"]
        row = {"purchases": n, "steps": c["steps"]}
        row["purchase_share"] = c["observable_purchases"] / n if n else 1.0
        row["score_share"] = c["score_observable"] / n if n else 1.0
        row["step_share"] = c["observable_steps"] / c["steps"] if c["steps"] else 1.0
        row.update({k: (c[k] / n if n else 1.0) for k in TERM_KINDS})
        report[key] = row
    return report


def webshop_choice_audit(
    trajectories: Sequence[Trajectory], success_only: bool = False
) -> dict[str, dict[str, float]]:
    """Per data source (the trajectory's ``policy``, plus ``"all"``), the products opened from results
    pages: ``clicks``, and the shares ``best`` (no listed product scores higher on the visible text and
    none ties), ``tied`` (best, tied with another listed product), ``below`` (another listed product
    scores higher) and ``unlisted`` (the id is not on the page). ``success_only``: only successful
    trajectories (what behaviour cloning keeps)."""
    from dreamgym.envs.webshop.agents import visible_scores
    from dreamgym.envs.webshop.checks import listed_products

    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for traj in trajectories:
        if success_only and not traj.success:
            continue
        for t in traj.transitions:
            action = t.action.strip()
            if not (t.state.startswith("[page] results") and action.startswith("click[")):
                continue
            products = listed_products(t.state)
            ids = [pid.lower() for pid, _, _ in products]
            pid = action[len("click[") : -1].strip().lower()
            buttons = {
                ln[len("[button] ") :].strip().lower()
                for ln in t.state.splitlines()
                if ln.startswith("[button] ")
            }
            if pid in buttons:
                continue  # next >, back to search: not a product
            if pid not in ids:
                kind = "unlisted"
            else:
                key = [sc[:2] for sc in visible_scores(traj.instruction, products)]
                mine, best = key[ids.index(pid)], max(key)
                kind = "below" if mine < best else ("tied" if key.count(best) > 1 else "best")
            for source in (traj.policy or "unknown", "all"):
                counts[source]["clicks"] += 1
                counts[source][kind] += 1
    return {
        src: {
            "clicks": float(c["clicks"]),
            **{k: c[k] / c["clicks"] for k in ("best", "tied", "below", "unlisted")},
        }
        for src, c in counts.items()
    }


_AUDITS: dict[str, Callable[..., dict[str, dict[str, float]]]] = {"webshop": webshop_audit}
AUDITED_ENVS = tuple(_AUDITS)
"""The envs :func:`audit` knows (an ALFWorld reward is the goal condition, not a prompt-visible purchase)."""


def audit(env_name: str, trajectories: Sequence[Trajectory], **kwargs: Any) -> dict[str, dict[str, float]]:
    """The observability report of ``trajectories`` of ``env_name`` (see :func:`webshop_audit`).

    Raises:
        ValueError: if no audit is defined for ``env_name``.
    """
    if env_name not in _AUDITS:
        raise ValueError(f"no observability audit for env {env_name!r}; audited envs: {sorted(_AUDITS)}")
    return _AUDITS[env_name](trajectories, **kwargs)


def format_report(report: dict[str, dict[str, float]]) -> str:
    """The report as a markdown table, one row per data source."""
    cols = ["purchases", "purchase_share", "score_share", "step_share", *TERM_KINDS]
    lines = ["| source | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    for key in sorted(report, key=lambda k: (k == "all", k)):
        row = report[key]
        cells = [f"{int(row['purchases'])}"] + [f"{row[c]:.3f}" for c in cols[1:]]
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
