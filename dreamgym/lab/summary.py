"""The pipeline's held-out comparison of the warm start and the RL policy, and its printed summary."""

from __future__ import annotations

from pathlib import Path

__all__ = ["held_out_comparison", "paired_comparison", "per_task_outcomes", "print_summary"]


def per_task_outcomes(trajectories: dict[str, list]) -> dict[str, dict[str, dict[str, float | bool]]]:
    """Each policy's held-out outcome per task, ``{policy: {task_id: {"success": bool, "score": float}}}``
    (kept in ``eval.json``, so every figure of the comparison can be recomputed from the file).

    Raises:
        RuntimeError: if a policy's episodes repeat a task (one outcome per task is paired).
    """
    out = {}
    for name, trajs in trajectories.items():
        ids = [t.task_id for t in trajs]
        if len(set(ids)) != len(ids):
            raise RuntimeError(f"{name}'s held-out episodes repeat a task id; each task must be played once")
        out[name] = {t.task_id: {"success": bool(t.success), "score": float(t.score)} for t in trajs}
    return out


def paired_comparison(
    per_task: dict[str, dict[str, dict]], a: str = "policy_rl", b: str = "policy_sft"
) -> dict[str, float]:
    """The paired two-sided exact tests of policy ``a`` against ``b`` on the tasks both played, from
    :func:`per_task_outcomes` alone: McNemar on success (``only_a``, ``only_b``, ``p_two_sided``, ...) and
    the sign test on the per-task score (``score_higher_a``, ``score_higher_b``, ``score_p_two_sided``;
    WebShop's purchase score: a graded outcome that moves where success is rare); both
    ``min(1, 2 P[X >= max(b, c)])``, ``X ~ Binomial(b + c, 1/2)`` (:mod:`dreamgym.stats`).

    Raises:
        RuntimeError: if the two policies played different tasks.
    """
    from dreamgym.stats import mcnemar_exact, sign_test

    ta, tb = per_task[a], per_task[b]
    if set(ta) != set(tb):
        raise RuntimeError(f"{a} and {b} played different held-out tasks; they cannot be paired")
    tasks = list(ta)
    score = sign_test([ta[t]["score"] for t in tasks], [tb[t]["score"] for t in tasks])
    return {
        **mcnemar_exact([ta[t]["success"] for t in tasks], [tb[t]["success"] for t in tasks]),
        "score_higher_a": score["higher_a"],
        "score_higher_b": score["higher_b"],
        "score_p_two_sided": score["p_two_sided"],
    }


def held_out_comparison(
    episodes: dict[str, Path], n_tasks: int
) -> tuple[dict[str, dict[str, float]], dict[str, float], dict[str, dict[str, dict]]]:
    """``test/...`` metrics of each policy's held-out episodes, the paired two-sided tests of RL vs warm
    start (:func:`paired_comparison`) and the per-task outcomes they are computed from
    (:func:`per_task_outcomes`).

    Raises:
        RuntimeError: if an episode file holds another number of tasks than ``eval_tasks`` (it was made
            by a run with other settings) or the two files pair different tasks.
    """
    from dreamgym.envs.episodes import trajectory_metrics
    from dreamgym.schema import read_trajectories

    trajs = {name: list(read_trajectories(path)) for name, path in episodes.items()}
    for name, t in trajs.items():
        if len(t) != n_tasks:
            raise RuntimeError(
                f"{episodes[name]} holds {len(t)} episodes but eval_tasks={n_tasks}; it was recorded with "
                "other settings: delete it (and the other policy's) to re-evaluate"
            )
    evals = {
        name: {f"test/{k}": v for k, v in trajectory_metrics(t).items() if k != "reward_mean"}
        for name, t in trajs.items()
    }
    rl, sft = trajs["policy_rl"], trajs["policy_sft"]
    if [t.task_id for t in rl] != [t.task_id for t in sft]:
        raise RuntimeError(
            f"{episodes['policy_rl']} and {episodes['policy_sft']} hold different tasks; delete both and rerun"
        )
    per_task = per_task_outcomes(trajs)
    return evals, paired_comparison(per_task), per_task


def print_summary(eval_tasks: int, report: dict) -> None:
    """Print the pipeline report: held-out metrics of both policies, their paired test, the experience
    model's fidelity and the per-stage table (seconds and key figure)."""
    ev = report["eval"]
    print(f"\n[pipeline] held-out REAL test tasks 0..{eval_tasks - 1} (greedy):")
    for name in ("policy_sft", "policy_rl"):
        m = ev.get(name, {})
        print(
            f"  {name:11s} success {m.get('test/success_rate', float('nan')):.3f}  score {m.get('test/score_mean', float('nan')):.3f}"
            f"  steps {m.get('test/steps_mean', float('nan')):.2f}  invalid {m.get('test/invalid_rate', float('nan')):.3f}"
        )
    c = report["policy_rl_vs_policy_sft"]
    print(
        f"  paired on the same tasks: solved only by policy_rl {int(c['only_a'])}, only by policy_sft "
        f"{int(c['only_b'])}; two-sided exact McNemar p = {c['p_two_sided']:.3g}"
    )
    print(
        f"  score higher with policy_rl on {int(c['score_higher_a'])} tasks, with policy_sft on "
        f"{int(c['score_higher_b'])}; two-sided exact sign test p = {c['score_p_two_sided']:.3g}"
    )
    for name, m in report.get("fidelity_onpolicy", {}).items():
        print(
            f"  {name} on the warm start's held-out final steps: success precision "
            f"{m['success_precision']:.3f}, recall {m['success_recall']:.3f} (n={int(m['n'])})"
        )
    if report.get("onpolicy_real_transitions"):
        print(f"  real train-task transitions of the warm start given to the experience model: "
              f"{report['onpolicy_real_transitions']}")  # fmt: skip
    figures = {
        "evaluate_policy_sft": f"success {ev.get('policy_sft', {}).get('test/success_rate', float('nan')):.3f}",
        "evaluate_policy_rl": f"success {ev.get('policy_rl', {}).get('test/success_rate', float('nan')):.3f}",
        "onpolicy_rollouts": f"{report.get('onpolicy_real_transitions', 0)} real transitions",
        "rl": f"two-sided p = {c['p_two_sided']:.3g} (success), {c['score_p_two_sided']:.3g} (score) vs the "
        "warm start",
    }
    fid = report.get("fidelity_onpolicy", {}).get("experience_model_onpolicy")
    if fid:
        figures["fidelity_onpolicy"] = f"success precision {fid['success_precision']:.3f}"
    print("\n| stage | seconds | figure |\n|---|---|---|")
    for name, sec in report["stage_seconds"].items():
        print(f"| {name} | {sec:.1f} | {figures.get(name, '')} |")
    print(f"| **total** | {report['total_seconds']:.1f} | peak RSS {report['peak_rss_mb']} MB |")
    if report.get("figure"):
        print(f"[pipeline] figure: {report['figure']}")
