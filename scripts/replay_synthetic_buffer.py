"""Why synthetic wins are not real: replay the synthetic episodes a DreamGym fit wrote back to its buffer.

    python scripts/replay_synthetic_buffer.py --env alfworld \\
        --ckpt artifacts/benchmark_alfworld/dreamgym_grpo/s0/tb/version_0/checkpoints/last.ckpt \\
        --judge artifacts/alfworld/reward_judge --out benchmarks/results/alfworld_synthetic_wins.json

A synthetic env with ``write_back: true`` adds every step it simulates to its replay buffer, which the
fit's checkpoint keeps (``dreamgym_rl.replay_buffers``). This groups those steps into episodes (by
``trajectory_id``, in step order), replays each episode's actions in the real env on the same train task
(:func:`dreamgym.envs.replay.replay_actions`; the bundled envs are deterministic) and sorts the synthetic
wins into:

- ``real_win``: the real env wins too;
- ``world``: the real env refused one of the episode's actions ("Nothing happens."): the synthetic world
  had drifted from the real one (an object where there is none, a receptacle not reached), so no judge
  of the final step can tell (``world_first_refused_verb``: the verb of each one's first refused action);
- ``judgement``: every action was valid in the real env and the game was still not won: the final step
  was misjudged (a wrong object, receptacle or missing change).

With ``--experience DIR`` (an exported experience model), the retrieval check: for the synthetic steps
that reveal a place (``go to R`` / ``open R``, whose next state lists what lies there in *this* game), the
share whose top-``k`` retrieved neighbours (the model's own ``k``, the synthetic env's query) hold a real
step of the same game with the same action, against the share for which the model's buffer holds one.
With ``--retrieval-predict N`` it also asks the model for the next state of ``N`` of those steps whose game
has such a real step, once with its own retrieval and once with the same game's steps first
(``ExperienceFormat.same_task_first``), and scores each against that real next state (token F1, exact):
whether the model, as trained, would use the fact if retrieval showed it.

With ``--judge``, each class gets the reward judge's verdict on the winning step (what a ``reward:
judge`` run would have paid); the audit of the fit (``sim/audit_*``) sees the same split on 8 episodes an
iteration. Episodes whose steps are not all in the buffer (a step the experience model cut is not
written back) are counted and skipped. Invalid (no-op) actions are never written back; in the real env
they would change nothing but the step count.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch

from dreamgym.envs.registry import make_env
from dreamgym.envs.replay import replay_actions
from dreamgym.lab.provenance import result_meta, write_result

CLASSES = ("real_win", "world", "judgement")


def synthetic_steps(ckpt: str) -> list[dict]:
    """The synthetic steps ``ckpt``'s written-back buffers hold, in buffer order (read once: a checkpoint
    is hundreds of MB)."""
    state = torch.load(ckpt, map_location="cpu", weights_only=False).get("dreamgym_rl") or {}
    return [t for buf in state.get("replay_buffers", {}).values() for t in buf["transitions"]
            if str(t.get("source")) == "synthetic"]  # fmt: skip


def by_episode(steps: list[dict]) -> dict[str, list[dict]]:
    """``steps`` per episode (``trajectory_id``), each in step order."""
    out: dict[str, list[dict]] = defaultdict(list)
    for t in steps:
        out[str(t["trajectory_id"])].append(t)
    for trans in out.values():
        trans.sort(key=lambda t: int(t["step"]))
    return out


def synthetic_episodes(episodes: dict[str, list[dict]]) -> tuple[list[dict], int]:
    """The complete episodes of :func:`by_episode` (oldest first) and the count of incomplete ones:
    ``{"task_id", "instruction", "actions", "success"}``."""
    out, incomplete = [], 0
    for trans in episodes.values():
        if [int(t["step"]) for t in trans] != list(range(len(trans))):
            incomplete += 1
            continue
        last = trans[-1]
        out.append({"task_id": str(last["task_id"]), "instruction": str(last["instruction"]),
                    "actions": [str(t["action"]) for t in trans], "success": str(last["success"]) == "True"})  # fmt: skip
    return out, incomplete


def retrieval_check(
    experience_dir: str,
    steps: list[dict],
    episodes: dict[str, list[dict]],
    sample: int,
    predict: int = 0,
    seed: int = 0,
) -> dict:
    """Whether retrieval shows the experience model the same game's real step (module docstring)."""
    import random
    import re

    from dreamgym.modeling.experience import ExperienceModel

    em = ExperienceModel.from_pretrained(experience_dir)
    reveal = re.compile(r"^(go to|open) [a-z]+ \d+$")
    asked_steps = [t for t in steps if reveal.match(str(t["action"]))]
    random.Random(seed).shuffle(asked_steps)
    asked_steps = asked_steps[:sample]

    def same_game(t: dict) -> list:
        return em.buffer.same_steps(str(t["task_id"]), str(t["action"]))

    hits = em.buffer.search(
        [str(t["state"]) for t in asked_steps], [str(t["action"]) for t in asked_steps], em.fmt.k
    )
    shown = sum(any((h.task_id, h.action) == (t["task_id"], t["action"]) for h in hs)
                for hs, t in zip(hits, asked_steps, strict=True))  # fmt: skip
    held = sum(bool(same_game(t)) for t in asked_steps)
    out = {
        "steps": len(asked_steps),
        "k": em.fmt.k,
        "same_game_step_retrieved": shown,
        "same_game_step_in_buffer": held,
    }
    if predict:
        import dataclasses

        from dreamgym.fidelity import token_f1
        from dreamgym.modeling.experience import ExperienceQuery

        asked = [t for t in asked_steps if same_game(t)][:predict]
        queries = []
        for t in asked:  # the episode's earlier actions ("" for a step cut and not written back)
            actions = {int(x["step"]): str(x["action"]) for x in episodes[str(t["trajectory_id"])]}
            history = [actions.get(i, "") for i in range(int(t["step"]))]
            queries.append(ExperienceQuery(str(t["instruction"]), history, str(t["state"]), str(t["action"]),
                                           task_id=str(t["task_id"])))  # fmt: skip
        truth = [same_game(t)[0].next_state for t in asked]
        own = em.fmt
        for name, fmt in (
            ("own_retrieval", own),
            ("same_game_first", dataclasses.replace(own, same_task_first=True)),
        ):
            em.fmt = fmt
            preds = [p for i in range(0, len(queries), 16) for p in em.predict(queries[i : i + 16])]
            f1 = [token_f1(p.next_state if p.ok else "", r) for p, r in zip(preds, truth, strict=True)]
            exact = sum(p.ok and p.next_state.strip() == r.strip() for p, r in zip(preds, truth, strict=True))
            out[name] = {"n": len(f1), "state_token_f1": sum(f1) / max(len(f1), 1), "exact": exact}
        em.fmt = own
    return out


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ckpt", required=True, help="a DreamGym fit's checkpoint (write_back: true)")
    ap.add_argument("--env", default="alfworld", help="the real env the synthetic env imitates")
    ap.add_argument("--max-steps", type=int, default=50, help="the real env's step limit")
    ap.add_argument("--judge", default=None, help="a saved reward judge to ask about each synthetic win")
    ap.add_argument("--examples", type=int, default=3, help="episodes kept per class as examples")
    ap.add_argument("--experience", default=None, help="an exported experience model: the retrieval check")
    ap.add_argument(
        "--retrieval-sample", type=int, default=400, help="synthetic steps the retrieval check asks"
    )
    ap.add_argument(
        "--retrieval-predict", type=int, default=0, help="of those, steps whose next state is predicted"
    )
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    import dreamgym.envs  # noqa: F401  (registers the judge's views)

    t0 = time.time()
    steps = synthetic_steps(args.ckpt)
    grouped = by_episode(steps)
    episodes, incomplete = synthetic_episodes(grouped)
    real = make_env(args.env, batch_size=[1], split="train", max_steps=args.max_steps)
    judge = None
    if args.judge:
        from dreamgym.modeling.judge import RewardJudge

        judge = RewardJudge.from_pretrained(args.judge)
    counts = {c: 0 for c in CLASSES}
    judged = {c: 0 for c in CLASSES}
    examples: dict[str, list] = {c: [] for c in CLASSES}
    missing_task = real_wins_missed = 0
    first_refused: dict[str, int] = defaultdict(int)  # the verb of each drifted win's first refused action
    for ep in episodes:
        task = real.task_index_of(ep["task_id"])
        if task is None:
            missing_task += 1
            continue
        replay = replay_actions(real, task, ep["actions"])
        if not ep["success"]:
            real_wins_missed += int(replay.success)
            continue
        refused = [i for i, bad in enumerate(replay.invalid) if bad]
        kind = "real_win" if replay.success else ("world" if refused else "judgement")
        if kind == "world":
            first_refused[ep["actions"][refused[0]].split()[0]] += 1
        counts[kind] += 1
        if judge is not None:
            p = judge.predict_proba(
                [ep["instruction"]], [""], [ep["actions"][-1]], histories=[ep["actions"][:-1]]
            )[0]
            judged[kind] += int(p >= judge.threshold)
        if len(examples[kind]) < args.examples:
            examples[kind].append({"instruction": ep["instruction"], "actions": ep["actions"],
                                   "first_refused": refused[0] if refused else None})  # fmt: skip
    wins = sum(counts.values())
    retrieval = None
    if args.experience:
        retrieval = retrieval_check(
            args.experience, steps, grouped, args.retrieval_sample, args.retrieval_predict
        )
    result = {
        "_meta": {
            **result_meta("scripts/replay_synthetic_buffer.py", argv),
            "ckpt": args.ckpt,
            "judge": args.judge,
            "experience": args.experience,
            "wall_s": round(time.time() - t0, 1),
        },  # fmt: skip
        "episodes": len(episodes),
        "incomplete_episodes": incomplete,
        "episodes_without_real_task": missing_task,
        "synthetic_wins": wins,
        "synthetic_losses_won_in_real_env": real_wins_missed,
        "wins_by_class": counts,
        "world_first_refused_verb": dict(sorted(first_refused.items(), key=lambda kv: -kv[1])),
        "judge_pays_by_class": judged if judge is not None else None,
        "retrieval": retrieval,
        "examples": examples,
    }
    write_result(args.out, result, indent=2)
    print(json.dumps({k: v for k, v in result.items() if k not in ("examples", "_meta")}, indent=1))
    return result


if __name__ == "__main__":
    main()
