"""The pipeline's held-out comparison of the warm start and the RL policy, and its printed summary."""

from __future__ import annotations

from pathlib import Path

__all__ = ["held_out_comparison", "print_summary"]


def held_out_comparison(
    episodes: dict[str, Path], n_tasks: int
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """``test/...`` metrics of each policy's held-out episodes, and the paired tests RL vs warm start: the
    exact McNemar test on success (``only_a``, ``only_b``, ``p_one_sided``, ...) and the exact sign test on
    the per-task score (``score_higher_a``, ``score_higher_b``, ``score_p_one_sided``; WebShop's purchase
    score: a graded outcome that moves where success is rare).

    Raises:
        RuntimeError: if an episode file holds another number of tasks than ``eval_tasks`` (it was made
            by a run with other settings) or the two files pair different tasks.
    """
    from dreamgym.envs.episodes import trajectory_metrics
    from dreamgym.schema import read_trajectories
    from dreamgym.stats import mcnemar_exact, sign_test

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
    score = sign_test([t.score for t in rl], [t.score for t in sft])
    return evals, {
        **mcnemar_exact([t.success for t in rl], [t.success for t in sft]),
        "score_higher_a": score["higher_a"],
        "score_higher_b": score["higher_b"],
        "score_p_one_sided": score["p_one_sided"],
    }


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
        f"{int(c['only_b'])}; exact McNemar p (policy_rl better) = {c['p_one_sided']:.3g}"
    )
    if "score_p_one_sided" in c:  # reports written before the score test have none
        print(
            f"  score higher with policy_rl on {int(c['score_higher_a'])} tasks, with policy_sft on "
            f"{int(c['score_higher_b'])}; exact sign test p (policy_rl better) = {c['score_p_one_sided']:.3g}"
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
        "rl": f"p = {c['p_one_sided']:.3g} (success), "
        f"{c.get('score_p_one_sided', float('nan')):.3g} (score) vs the warm start",
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
