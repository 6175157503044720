"""Record a trained policy's episodes in a REAL env as schema trajectories (JSONL).

    python scripts/collect_policy_rollouts.py --policy artifacts/webshop/policy_sft --env webshop \\
        --split test --tasks 100 --out runs/rollouts/policy_sft_test.jsonl

Greedy by default (``--sample`` samples at temperature 1), with the same prompt format and constrained
decoding as ``configs/webshop_grpo.yaml``. Each transition's ``reasoning`` is written by the env's
rule-based teacher (as in ``python -m dreamgym collect``): the episode's actions are replayed in a fresh
env so the teacher sees the privileged step info (``--no-teacher`` leaves it empty).

Uses: ``scripts/eval_fidelity.py --data <out>`` measures the experience model on the policy's own
(on-policy) transitions, e.g. how often it calls a failed purchase a success, which is what RL in the
synthetic env depends on; on *train* tasks, the output is experience-model SFT data with the failed
purchases that expert data lacks (the paper's replay of fresh interactions).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from dreamgym.envs import make_env  # noqa: E402
from dreamgym.envs.base import as_text_list, text_stack  # noqa: E402
from dreamgym.modeling import LanguageModel  # noqa: E402
from dreamgym.modeling.policy_format import PolicyFormat  # noqa: E402
from dreamgym.rl.collector import RolloutCollector  # noqa: E402
from dreamgym.schema import Trajectory, write_trajectories  # noqa: E402
from dreamgym.teachers.base import get_teacher  # noqa: E402


def annotate(env, teacher, traj: Trajectory, task_index: int) -> None:
    """Fill ``traj``'s reasoning by replaying its actions in ``env`` (batch 1) with ``teacher``.

    Raises:
        RuntimeError: if the replay does not reproduce a recorded state (the env is not deterministic).
    """
    env.reset(TensorDict({"_reset": torch.ones(1, 1, dtype=torch.bool),
                          "task_index": torch.tensor([[task_index]])}, batch_size=[1]))  # fmt: skip
    for tr in traj.transitions:
        nxt = env.step(TensorDict({"action": text_stack([tr.action], env.batch_size)}, batch_size=[1]))[
            "next"
        ]
        state = str(as_text_list(nxt["observation"])[0])
        if state != tr.next_state:
            raise RuntimeError(
                f"replaying task {task_index} step {tr.step} ({tr.action!r}) gave another state than the "
                "recorded one; the env must be deterministic for teacher annotation (use --no-teacher)"
            )
        tr.reasoning = teacher.explain(tr, env.step_info(0))


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policy", required=True, help="saved policy directory (save_pretrained)")
    ap.add_argument("--env", default="webshop")
    ap.add_argument("--split", default="test")
    ap.add_argument("--tasks", type=int, default=100, help="tasks 0..N-1 of the split")
    ap.add_argument("--out", required=True)
    ap.add_argument("--sample", action="store_true", help="sample (temperature 1) instead of greedy")
    ap.add_argument("--free", action="store_true", help="free decoding instead of constrained")
    ap.add_argument("--batch-size", type=int, default=20)
    ap.add_argument("--max-steps", type=int, default=15)
    ap.add_argument("--no-teacher", action="store_true", help="leave reasoning empty")
    args = ap.parse_args(argv)
    if not Path(args.policy).is_dir():
        ap.error(f"--policy {args.policy!r} is not a directory; train one with `python -m dreamgym fit "
                 "--config configs/webshop_policy_sft.yaml`")  # fmt: skip
    model, tok = LanguageModel(path=args.policy).build()
    env = make_env(args.env, split=args.split, batch_size=args.batch_size, max_steps=args.max_steps)
    fmt = PolicyFormat(history_window=2, max_state_chars=1200, history_state_chars=150, max_actions=20)
    col = RolloutCollector(fmt, max_new_tokens=48, max_prompt_tokens=704, constrained=not args.free)
    coll = col.collect(env, model, tok, list(range(args.tasks)), greedy=not args.sample)
    trajs = [
        e.to_trajectory(args.env, args.split, "real", policy=Path(args.policy).name) for e in coll.episodes
    ]
    if not args.no_teacher:
        replay = make_env(args.env, split=args.split, batch_size=1, max_steps=args.max_steps)
        teacher = get_teacher(args.env)
        for e, traj in zip(coll.episodes, trajs, strict=True):
            annotate(replay, teacher, traj, e.task_index)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    n = write_trajectories(args.out, trajs)
    metrics = coll.metrics()
    print(f"wrote {n} trajectories to {args.out}; {metrics}")
    return metrics


if __name__ == "__main__":
    main()
