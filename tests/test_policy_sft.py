"""Policy warm start: examples mirror the RL prompt, loss only on action tokens, export reloads."""

import lightning as L
import pytest
import torch

from datamodules.policy_sft import PolicySFTDataModule, bc_examples, repeat_by_verb
from dreamgym.modeling import LanguageModel, load_pretrained
from dreamgym.modeling.policy_format import PolicyFormat
from dreamgym.modeling.sft import bc_loss, encode_bc_batch
from dreamgym.schema import read_trajectories
from models.policy_sft import PolicySFT


def test_examples_follow_expert_steps_with_history(webshop_offline):
    fmt = PolicyFormat(history_window=1)
    ex = bc_examples([str(webshop_offline)], fmt)
    trajs = [t for t in read_trajectories(webshop_offline) if t.policy == "expert" and t.success]
    assert len(ex) == sum(len(t.transitions) for t in trajs)
    first = trajs[0].transitions
    assert ex[0]["target"] == " " + first[0].action.strip()
    assert ex[1]["prompt"] == fmt.prompt(first[1].instruction, first[1].state, first[1].available_actions,
                                         [(first[0].state, first[0].action)])  # fmt: skip


def test_dagger_labels_are_cloned_with_the_history_of_the_actions_taken(tmp_path):
    """A trajectory with ``expert_action`` labels (a failed episode of another policy) teaches its labels
    whatever ``policies`` and ``success_only`` say; its prompts' history holds the actions the policy took;
    steps without a label teach nothing."""
    from dreamgym.schema import Trajectory, Transition, save_trajectories

    def step(i, action, label):
        return Transition(task_id="t", instruction="find a mug", step=i, state=f"s{i}", action=action,
                          next_state=f"s{i + 1}", reward=0.0, done=i == 2, expert_action=label)  # fmt: skip

    steps = [
        step(0, "go to desk 1", "go to shelf 1"),
        step(1, "go to desk 2", None),
        step(2, "look", "go to shelf 2"),
    ]
    path = tmp_path / "dagger.jsonl"
    save_trajectories(
        path, [Trajectory("d0", "t", "find a mug", "alfworld", "train", "real", "policy_sft", steps)]
    )
    fmt = PolicyFormat(history_window=1)
    ex = bc_examples([str(path)], fmt, policies=("non_oracle",), success_only=True)
    assert [e["target"] for e in ex] == [" go to shelf 1", " go to shelf 2"]
    assert ex[1]["prompt"] == fmt.prompt("find a mug", "s2", [], [("s1", "go to desk 2")])
    assert '"expert_action"' in path.read_text()
    plain = tmp_path / "plain.jsonl"  # unlabelled records stay as they were: no expert_action key
    save_trajectories(
        plain, [Trajectory("p0", "t", "x", "alfworld", "train", "real", "expert", [step(0, "look", None)])]
    )
    assert "expert_action" not in plain.read_text()


def test_repeat_by_verb_lists_rare_decisions_more_often(webshop_offline):
    ex = [{"prompt": "p", "target": t} for t in (" go to desk 1", " take mug 1 from desk 1", " <think>x y</think> take a",
                                                 " open drawer 1", "")]  # fmt: skip
    out = repeat_by_verb(ex, {"take": 3, "open": 2})
    assert [e["target"] for e in out].count(" take mug 1 from desk 1") == 3
    assert [e["target"] for e in out].count(
        " <think>x y</think> take a"
    ) == 3  # the action after a think block
    assert len(out) == 1 + 3 + 3 + 2 + 1
    dm = PolicySFTDataModule([str(webshop_offline)], [str(webshop_offline)], repeat_verbs={"click[buy": 2})
    dm.setup()
    buys = sum(e["target"].startswith(" click[buy") for e in bc_examples([str(webshop_offline)], dm.format))
    assert buys > 0 and len(dm.train_examples) == len(bc_examples([str(webshop_offline)], dm.format)) + buys
    with pytest.raises(ValueError, match=r"repeat_verbs=\{'take': 0\}"):
        PolicySFTDataModule([str(webshop_offline)], repeat_verbs={"take": 0})


def test_match_instruction_lists_the_actions_naming_the_goal(tmp_path):
    acts = ["go to desk 1", "help", "look", "take mug 1 from desk 1", "take pen 2 from desk 1"]
    assert PolicyFormat.matching("put a clean mug in coffeemachine", acts) == ["take mug 1 from desk 1"]
    assert PolicyFormat.matching("look at the pen under the desklamp", acts) == [
        "look",
        "take pen 2 from desk 1",
    ]
    fmt = PolicyFormat(history_window=0, match_instruction=True)
    prompt = fmt.prompt("put a clean mug in coffeemachine", "On the desk 1, you see a mug 1.", acts)
    assert prompt.endswith(
        "take pen 2 from desk 1\nActions naming the instruction's words:\ntake mug 1 from desk 1\nAction:"
    )
    assert "naming" not in PolicyFormat(history_window=0).prompt("put a mug in desk", "s", acts)
    related = {"clean": ["sinkbasin"], "hot": ["microwave"]}
    sink = ["go to desk 1", "go to sinkbasin 1", "go to microwave 1", "take mug 1 from desk 1"]
    assert PolicyFormat.matching("put a clean mug in desk", sink, related) == [
        "go to desk 1",
        "go to sinkbasin 1",
        "take mug 1 from desk 1",
    ]
    assert PolicyFormat.matching("put a clean mug in desk", sink) == [
        "go to desk 1",
        "take mug 1 from desk 1",
    ]
    with_related = PolicyFormat(history_window=0, match_instruction=True, related=related)
    assert "words:\ngo to desk 1\ngo to sinkbasin 1\n" in with_related.prompt(
        "put a clean mug in desk", "s", sink
    )
    at_sink = ["examine mug 1", "clean mug 1 with sinkbasin 1", "go to desk 1", "move mug 1 to sinkbasin 1"]
    assert PolicyFormat.matching("put a clean mug in desk", at_sink, related, rank=True) == [
        "clean mug 1 with sinkbasin 1",  # clean, mug, sinkbasin
        "move mug 1 to sinkbasin 1",  # mug, sinkbasin
        "examine mug 1",  # ties keep their listed order
        "go to desk 1",
    ]
    ranked = PolicyFormat(history_window=0, match_instruction=True, related=related, rank_matches=True)
    assert "words:\nclean mug 1 with sinkbasin 1\nmove mug 1" in ranked.prompt(
        "put a clean mug in desk", "s", at_sink
    )
    (tmp_path / "r").mkdir()
    with_related.save(tmp_path / "r")  # the mapping round-trips through policy_format.json
    assert PolicyFormat.load(tmp_path / "r") == with_related
    fmt.save(tmp_path)
    assert PolicyFormat.load(tmp_path) == fmt != PolicyFormat(history_window=0)
    saved = tmp_path / "policy_format.json"  # a field this version does not know: named, not a TypeError
    saved.write_text(saved.read_text().replace('"think"', '"mark_taken": false, "think"'))
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['mark_taken'\]"):
        PolicyFormat.load(tmp_path)


def test_done_verbs_move_the_goal_list_on_to_the_next_step():
    """After ``cool apple 1 with fridge 1`` the goal-naming list no longer heads with the cooling (the
    searcher then goes to the receptacle)."""
    related = {"cool": ["fridge"], "hot": ["microwave"], "heat": ["microwave"]}
    goal = "put a cool apple in countertop"
    at_fridge = [
        "cool apple 1 with fridge 1",
        "examine apple 1",
        "go to countertop 1",
        "move apple 1 to fridge 1",
    ]
    history = [
        ("s0", "go to diningtable 1"),
        ("s1", "take apple 1 from diningtable 1"),
        ("s2", "go to fridge 1"),
    ]
    before = PolicyFormat.matching(goal, at_fridge, related, rank=True, taken=[a for _, a in history])
    assert before[0] == "cool apple 1 with fridge 1"  # not done yet: it still heads the list
    history.append(("s3", "cool apple 1 with fridge 1"))
    taken = [a for _, a in history]
    assert PolicyFormat.done_words(goal, taken, related) == {"cool", "fridge"}
    assert (
        PolicyFormat.matching(goal, at_fridge, related, rank=True)
        == at_fridge[:1] + [at_fridge[3]] + at_fridge[1:3]
    )
    # cool and fridge no longer count; ties go to countertop, which no taken command named
    assert PolicyFormat.matching(goal, at_fridge, related, rank=True, taken=taken) == [
        "go to countertop 1",
        "examine apple 1",
        "move apple 1 to fridge 1",
    ]
    # "hot" is done through its related word once the heating is taken
    assert PolicyFormat.done_words("put a hot apple in desk", ["heat apple 1 with microwave 1"], related) == {
        "heat",
        "microwave",
    }
    assert PolicyFormat.matching("put a hot apple in desk", ["go to microwave 1", "go to desk 1"], related,
                                 taken=["heat apple 1 with microwave 1"]) == ["go to desk 1"]  # fmt: skip
    fmt = PolicyFormat(history_window=1, match_instruction=True, related=related, rank_matches=True,
                       untaken="go to ", done_verbs=True)  # fmt: skip
    prompt = fmt.prompt(goal, "You cool the apple 1 using the fridge 1.", at_fridge, history)
    assert "words:\ngo to countertop 1\nexamine apple 1\n" in prompt
    assert "words:\ncool apple 1 with fridge 1\n" in fmt.prompt(goal, "s", at_fridge, history[:-1])


def test_untaken_lists_the_places_no_earlier_step_went_to_in_natural_order(tmp_path):
    acts = ["go to cabinet 10", "go to cabinet 2", "go to bed 1", "look", "open cabinet 2"]
    history = [
        ("You are in the middle of a room.", "go to cabinet 2"),
        ("The cabinet 2 is closed.", "open cabinet 2"),
    ]
    assert PolicyFormat.not_taken("go to ", acts, history) == ["go to bed 1", "go to cabinet 10"]
    assert PolicyFormat.not_taken("go to ", acts, []) == [
        "go to bed 1",
        "go to cabinet 2",
        "go to cabinet 10",
    ]
    fmt = PolicyFormat(history_window=1, untaken="go to")  # a YAML value loses its trailing space: same list
    prompt = fmt.prompt("put a mug in desk", "You open the cabinet 2.", acts, history)
    assert prompt.endswith(
        "open cabinet 2\nNot taken yet (go to ...):\ngo to bed 1\ngo to cabinet 10\nAction:"
    )
    assert (
        "[1] action: open cabinet 2" in prompt and "go to cabinet 2" not in prompt.split("Not taken yet")[1]
    )
    assert "Not taken" not in PolicyFormat(history_window=1).prompt("put a mug in desk", "s", acts, history)
    first = PolicyFormat(history_window=1, untaken="go to", untaken_limit=1)
    assert first.prompt("put a mug in desk", "s", acts, history).endswith(
        "(go to ...):\ngo to bed 1\nAction:"
    )
    fmt.save(tmp_path)
    assert PolicyFormat.load(tmp_path) == fmt != first


def test_bc_loss_ignores_prompt_tokens(tiny_tokenizer):
    from dreamgym.modeling import load_tokenizer
    from dreamgym.modeling.chat import ChatCodec

    tok = load_tokenizer(tiny_tokenizer)
    b = encode_bc_batch(
        ChatCodec(tok), [{"prompt": "Instruction: buy tea\nAction:", "target": " search[tea]"}], max_length=64
    )
    n_target = len(tok.encode(" search[tea]", add_special_tokens=False)) + 1
    assert int(b["target_mask"].sum()) == n_target and b["target_mask"][0, -1]
    logits = torch.randn(1, b["input_ids"].shape[1], len(tok), requires_grad=True)
    loss, _ = bc_loss(logits, b["input_ids"], b["target_mask"])
    loss.backward()
    first_target = int(b["target_mask"][0].float().argmax())
    # logits at position t predict token t+1: only positions first_target-1 .. end-1 get gradient
    assert logits.grad[0, : first_target - 1].abs().sum() == 0
    assert logits.grad[0, first_target - 1 :].abs().sum() > 0


def test_bc_loss_prompt_term_by_hand():
    """loss = mean target CE + w * mean prompt CE; accuracy stays on target tokens only."""
    import torch.nn.functional as F

    torch.manual_seed(0)
    ids = torch.tensor([[0, 5, 6, 7, 8, 1]])
    target = torch.tensor([[False, False, False, False, True, True]])
    prompt = torch.tensor([[True, True, True, True, False, False]])
    logits = torch.randn(1, 6, 10)
    ce = F.cross_entropy(logits[0, :-1], ids[0, 1:], reduction="none")  # ce[t-1] predicts token t
    expected = ce[3:5].mean() + 0.5 * ce[0:3].mean()  # targets: tokens 4, 5; prompt: tokens 1..3
    loss, acc = bc_loss(logits, ids, target, prompt, prompt_weight=0.5)
    assert loss.item() == pytest.approx(expected.item(), abs=1e-6)
    loss0, acc0 = bc_loss(logits, ids, target)
    assert loss0.item() == pytest.approx(ce[3:5].mean().item(), abs=1e-6) and acc0 == acc


def test_policy_sft_prompt_loss_trains_on_prompt_tokens(tiny_lm):
    """With prompt_loss_weight > 0 the training loss reaches prompt positions; validation does not."""
    module = PolicySFT(tiny_lm, max_length=64, prompt_loss_weight=0.5)
    ex = [{"prompt": "Instruction: buy tea\nAction:", "target": " search[tea]"}]
    train_loss, _ = module._step(ex, train=True)
    val_loss, _ = module._step(ex)
    assert train_loss.item() > val_loss.item()  # + 0.5 x the (positive) prompt CE
    with pytest.raises(ValueError, match="prompt_loss_weight"):
        PolicySFT(tiny_lm, prompt_loss_weight=-1.0)


@pytest.mark.slow
def test_policy_sft_fit_exports_hf_model(webshop_offline, tiny_lm, cpu_trainer_kwargs, tmp_path):
    out = tmp_path / "policy"
    fmt = PolicyFormat(history_window=1, max_actions=7)
    module = PolicySFT(
        tiny_lm,
        optimizer=lambda p: torch.optim.AdamW(p, lr=1e-2),
        max_length=384,
        save_dir=str(out),
        format=fmt,
    )
    before = {k: v.clone() for k, v in module.model.state_dict().items()}
    dm = PolicySFTDataModule(
        [str(webshop_offline)], [str(webshop_offline)], batch_size=4, max_val_examples=4, format=fmt
    )
    kw = {**cpu_trainer_kwargs, "max_steps": 3, "logger": False, "enable_checkpointing": False}
    L.Trainer(**kw).fit(module, dm)
    assert any(not torch.equal(before[k], v) for k, v in module.model.state_dict().items())
    model, tok = load_pretrained(out)
    assert all(torch.equal(p, module.model.state_dict()[k]) for k, p in model.state_dict().items())
    assert LanguageModel(path=str(out)).build()[1].eos_token_id == tok.eos_token_id
    # the format travels with the policy: a collector without one takes it, a different one is refused
    from dreamgym.rl.collector import RolloutCollector

    assert PolicyFormat.load(out) == fmt and RolloutCollector().use_format_of(out).format == fmt
    with pytest.raises(ValueError, match="differs from the format the policy was trained with"):
        RolloutCollector(format=PolicyFormat(history_window=3)).use_format_of(out)


def test_policy_sft_logs_the_held_out_metrics_rl_logs(webshop_offline, tiny_lm, cpu_trainer_kwargs):
    """With an eval_env, validation plays greedy held-out episodes and logs RL's val/* episode metrics;
    the values are those of the same greedy episodes played again with the trained policy."""
    from dreamgym.envs.factory import EnvFactory
    from dreamgym.rl.collector import RolloutCollector

    fmt = PolicyFormat(history_window=1, max_actions=7)
    env = EnvFactory("webshop", split="test", batch_size=2, max_steps=3)
    module = PolicySFT(
        tiny_lm, optimizer=lambda p: torch.optim.AdamW(p, lr=1e-2), max_length=384, format=fmt, eval_env=env,
        eval_tasks=3, collector=RolloutCollector(max_new_tokens=12, constrained=True, max_arg_tokens=4),
    )  # fmt: skip
    assert module.collector.format == fmt  # the collector prompts as the data module lays examples out
    dm = PolicySFTDataModule(
        [str(webshop_offline)], [str(webshop_offline)], batch_size=4, max_val_examples=4, format=fmt
    )
    trainer = L.Trainer(
        **{**cpu_trainer_kwargs, "max_steps": 2, "logger": False, "enable_checkpointing": False}
    )
    trainer.fit(module, dm)
    trainer.validate(module, dm, verbose=False)
    m = trainer.callback_metrics
    again = module.collector.collect(env.build(), module.model, module.tokenizer, [0, 1, 2], 1, greedy=True)
    expected = again.held_out_metrics()
    assert {f"val/{k}" for k in expected} <= set(m) and "val/reward_mean" not in m
    assert float(m["val/success_rate"]) == pytest.approx(expected["success_rate"])
    assert float(m["val/steps_mean"]) == pytest.approx(expected["steps_mean"])
    with pytest.raises(ValueError, match="needs eval_tasks >= 0 and an eval_env"):
        PolicySFT(tiny_lm, eval_tasks=4)
