"""How faithful the experience model is to the real env, measured on held-out real transitions.

Teacher-forced (one step from a real prompt; :class:`FidelityMeter`):

* ``reward_acc``: predicted reward equals the real one (rounded to 1e-6).
* ``success_precision`` / ``success_recall`` / ``success_f1``: the positive class is a success step
  (reward >= 1); precision is over predicted success steps, recall over real ones.
* ``success_fpr``: the share of real non-success steps predicted a success (0.0 when there are none).
* ``done_acc``: predicted termination equals the real one.
* ``state_exact``: next state matches the real one exactly (after whitespace normalisation).
* ``state_token_f1``: bag-of-words F1 between predicted and real next state (SQuAD-style).
* ``copy_state_token_f1``: the baseline that predicts "nothing changes" (next state = current state).
* ``parse_fail_rate``: share of outputs that did not parse; a failure counts as wrong everywhere.
* ``cut_rate``: share of outputs whose reasoning or state structured decoding closed at the token
  budget (0 under free decoding, where such an output fails to parse instead).

Open loop (:func:`open_loop_eval`): replay each real trajectory's actions through the model, feeding
back its own predicted states; compare the final predicted reward with the real final reward
(``open_loop_reward_acc``) and the final state (``open_loop_state_token_f1``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from dreamgym.modeling.formats import ParsedOutcome, terminated_of
from dreamgym.schema import Trajectory, is_success

__all__ = [
    "token_f1",
    "normalise_state",
    "FidelityMeter",
    "same_reward",
    "success_precision_recall",
    "binary_metrics",
    "teacher_forced_eval",
    "teacher_forced_queries",
    "open_loop_eval",
    "FIDELITY_KEYS",
]

FIDELITY_KEYS = (
    "reward_acc",
    "success_precision",
    "success_recall",
    "success_f1",
    "success_fpr",
    "done_acc",
    "state_exact",
    "state_token_f1",
    "copy_state_token_f1",
    "parse_fail_rate",
    "cut_rate",
)


def normalise_state(text: str) -> str:
    """Whitespace-normalised state text (what the formats write)."""
    return " ".join(text.split())


def token_f1(pred: str, ref: str) -> float:
    """Bag-of-words F1 of whitespace tokens: ``2 P R / (P + R)``, ``P = |pred ∩ ref| / |pred|``,
    ``R = |pred ∩ ref| / |ref|`` (multiset intersection); 1.0 if both are empty."""
    p, r = pred.lower().split(), ref.lower().split()
    if not p and not r:
        return 1.0
    common = sum((Counter(p) & Counter(r)).values())
    if common == 0:
        return 0.0
    prec, rec = common / len(p), common / len(r)
    return 2 * prec * rec / (prec + rec)


def same_reward(a: float, b: float) -> bool:
    """Two rewards are equal (to 1e-6): how ``reward_acc`` compares them."""
    return abs(float(a) - float(b)) < 1e-6


def success_precision_recall(tp: int, fp: int, fn: int) -> tuple[float, float]:
    """Precision and recall of the success class from true/false positives and false negatives.

    Undefined cases: precision with no predicted success is 1.0 if no real success was missed either,
    else 0.0; recall with no real success is 1.0.
    """
    prec = tp / (tp + fp) if tp + fp else float(fn == 0)
    rec = tp / (tp + fn) if tp + fn else 1.0
    return prec, rec


def binary_metrics(tp: int, fp: int, tn: int, fn: int) -> dict[str, float]:
    """Success-class metrics: ``tpr = recall = tp/(tp+fn)``, ``fpr = fp/(fp+tn)``, ``precision =
    tp/(tp+fp)``, ``balanced_acc = (tpr + 1 - fpr)/2``, ``acc``; an empty denominator gives NaN."""

    def ratio(a: int, b: int) -> float:
        return a / b if b else float("nan")

    tpr, fpr = ratio(tp, tp + fn), ratio(fp, fp + tn)
    return {
        "success_precision": ratio(tp, tp + fp),
        "success_recall": tpr,
        "tpr": tpr,
        "fpr": fpr,
        "balanced_acc": (tpr + 1.0 - fpr) / 2.0,
        "acc": ratio(tp + tn, tp + fp + tn + fn),
        "n": float(tp + fp + tn + fn),
    }


class FidelityMeter:
    """Accumulates teacher-forced fidelity metrics over held-out transitions (see module docstring)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.n = 0
        self.sums: Counter[str] = Counter()
        self.tp = self.fp = self.fn = 0

    def update(self, pred: ParsedOutcome, state: str, next_state: str, reward: float, done: bool) -> None:
        """Add one prediction against the real ``(state, next_state, reward, done)``."""
        self.n += 1
        real_success = is_success(reward)
        ok = pred.ok
        pred_success = ok and is_success(pred.reward)
        self.tp += int(pred_success and real_success)
        self.fp += int(pred_success and not real_success)
        self.fn += int(real_success and not pred_success)
        real = normalise_state(next_state)
        self.sums["reward_acc"] += ok and same_reward(pred.reward, reward)
        self.sums["done_acc"] += ok and pred.done == bool(done)
        self.sums["state_exact"] += ok and normalise_state(pred.next_state) == real
        self.sums["state_token_f1"] += token_f1(pred.next_state, real) if ok else 0.0
        self.sums["copy_state_token_f1"] += token_f1(normalise_state(state), real)
        self.sums["parse_fail_rate"] += not ok
        self.sums["cut_rate"] += bool(pred.cut)

    def compute(self) -> dict[str, float]:
        """The metrics (``FIDELITY_KEYS`` plus ``n``); precision/recall are 1.0 when undefined and no error."""
        n = max(self.n, 1)
        out = {k: self.sums[k] / n for k in FIDELITY_KEYS if k in self.sums or self.n == 0}
        prec, rec = success_precision_recall(self.tp, self.fp, self.fn)
        out["success_precision"], out["success_recall"] = prec, rec
        out["success_f1"] = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
        negatives = self.n - self.tp - self.fn
        out["success_fpr"] = self.fp / negatives if negatives else 0.0
        out["n"] = float(self.n)
        return {k: float(out.get(k, 0.0)) for k in (*FIDELITY_KEYS, "n")}


def teacher_forced_eval(
    experience,
    trajectories: Sequence[Trajectory],
    done_only: bool = False,
    skip_invalid: bool = True,
    max_minutes: float | None = None,
    chunk: int = 32,
    verbs: Sequence[str] | None = None,
) -> dict[str, float]:
    """One step from every real (state, action) of ``trajectories`` through ``experience.predict``.

    The same call the synthetic env makes (retrieval excluding the query's own episode), scored by
    :class:`FidelityMeter`. With ``done_only`` only each episode's final, terminating step is asked, e.g.
    a policy's purchases: ``success_precision`` then says how often the model calls a real failure a
    success, which is what RL in the synthetic env rewards.

    Args:
        experience: a :class:`dreamgym.modeling.experience.ExperienceModel`.
        trajectories: held-out real trajectories.
        done_only: only terminating steps (``terminated``; truncated-only endings are not asked).
        skip_invalid: skip invalid actions (the synthetic env answers them without the model).
        verbs: only steps whose action's first word is one of these (e.g. ``["move"]``: ALFWorld's
            placements, where an episode is won or not); None: every step.
        max_minutes: ask in chunks of ``chunk`` queries and start none once this many minutes have
            passed (a time budget; :func:`dreamgym.progress.play_in_chunks`): ``n`` then counts the steps
            asked, the first ones. ``None``: every step.

    Returns:
        ``FIDELITY_KEYS`` and ``n`` (see :meth:`FidelityMeter.compute`).
    """
    from dreamgym.progress import play_in_chunks

    queries, asked = teacher_forced_queries(trajectories, done_only, skip_invalid, verbs)
    meter = FidelityMeter()
    preds = play_in_chunks(
        range(len(queries)), lambda idx: list(experience.predict([queries[i] for i in idx])),
        chunk if max_minutes is not None else None, max_minutes, "fidelity", unit="steps asked",
    )  # fmt: skip
    for pred, t in zip(preds, asked[: len(preds)], strict=True):
        meter.update(pred, t.state, t.next_state, t.reward, terminated_of(t.done, t.truncated))
    return meter.compute()


def teacher_forced_queries(
    trajectories: Sequence[Trajectory],
    done_only: bool = False,
    skip_invalid: bool = True,
    verbs: Sequence[str] | None = None,
) -> tuple[list, list]:
    """The experience-model queries of :func:`teacher_forced_eval` (retrieval excluding the query's own
    episode) and the real transitions they ask about, in the same order."""
    from dreamgym.modeling.experience import ExperienceQuery

    queries, asked = [], []
    for traj in trajectories:
        for t in traj.transitions:
            if (skip_invalid and t.invalid) or (done_only and not terminated_of(t.done, t.truncated)):
                continue
            if verbs is not None and t.action.split(" ", 1)[0] not in verbs:
                continue
            history = [x.action for x in traj.transitions[: t.step]]
            queries.append(
                ExperienceQuery(
                    traj.instruction, history, t.state, t.action, traj.trajectory_id, traj.task_id
                )
            )
            asked.append(t)
    return queries, asked


def open_loop_eval(
    experience, trajectories: Sequence[Trajectory], skip_invalid: bool = True
) -> dict[str, Any]:
    """Replay real trajectories' actions through the model on its own predicted states.

    All trajectories advance together (one batched model call per step). A trajectory stops when the
    model predicts ``done``, its output does not parse (final reward 0) or its real actions run out.

    Args:
        experience: a :class:`dreamgym.modeling.experience.ExperienceModel`.
        trajectories: held-out real trajectories.
        skip_invalid: skip real invalid actions (no-ops in the real env and in the synthetic env).

    Returns:
        ``open_loop_reward_acc``, ``open_loop_done_acc``, ``open_loop_state_token_f1``,
        ``open_loop_parse_fail_rate`` and ``n``.
    """
    from dreamgym.modeling.experience import ExperienceQuery

    runs = []
    for traj in trajectories:
        steps = [t for t in traj.transitions if not (skip_invalid and t.invalid)]
        if steps:
            runs.append(
                {
                    "traj": traj,
                    "steps": steps,
                    "i": 0,
                    "state": steps[0].state,
                    "hist": [],
                    "reward": 0.0,
                    "done": False,
                    "fail": False,
                    "active": True,
                }
            )
    while any(r["active"] for r in runs):
        active = [r for r in runs if r["active"]]
        queries = [
            ExperienceQuery(
                r["traj"].instruction,
                list(r["hist"]),
                r["state"],
                r["steps"][r["i"]].action,
                exclude_id=r["traj"].trajectory_id,
                task_id=r["traj"].task_id,
            )
            for r in active
        ]
        for r, out in zip(active, experience.predict(queries), strict=True):
            r["hist"].append(r["steps"][r["i"]].action)
            r["i"] += 1
            if not out.ok:
                r.update(fail=True, reward=0.0, done=True, active=False)
                continue
            r.update(state=out.next_state, reward=out.reward, done=out.done)
            r["active"] = not out.done and r["i"] < len(r["steps"])
    n = max(len(runs), 1)
    last = [r["steps"][-1] for r in runs]
    return {
        "open_loop_reward_acc": sum(
            same_reward(r["reward"], t.reward) for r, t in zip(runs, last, strict=True)
        )
        / n,
        "open_loop_done_acc": sum(
            r["done"] == terminated_of(t.done, t.truncated) for r, t in zip(runs, last, strict=True)
        )
        / n,
        "open_loop_state_token_f1": sum(
            token_f1(r["state"], t.next_state) * (not r["fail"]) for r, t in zip(runs, last, strict=True)
        )
        / n,
        "open_loop_parse_fail_rate": sum(r["fail"] for r in runs) / n,
        "n": float(len(runs)),
    }
