"""The reward judge: save/load (alone and inside an experience model), the SyntheticEnv `reward` switch,
bad settings, a tiny judge learning a separable comparison, and the fit entry point end to end."""

import random

import pytest
import torch
from test_synthetic_env import DONE_PAGE, ITEM_PAGE, ScriptedExperience

from dreamgym.envs.base import as_text_list
from dreamgym.envs.synthetic import SyntheticEnv, SyntheticTask
from dreamgym.modeling.experience import ExperienceModel
from dreamgym.modeling.formats import ParsedOutcome, build_target
from dreamgym.modeling.judge import JudgeBackbone, RewardJudge, judge_inputs, judged_outcome
from dreamgym.schema import Trajectory, Transition, write_trajectories

BUY_TASK = SyntheticTask(
    "t0", "i want a red shirt, and price lower than 30.00 dollars", ITEM_PAGE, ["click[buy now]"]
)
ACCEPTING = "Buying b01 ends the episode. Checks: price $12.00 <= $30.00 yes. 1/1 checks pass, so the score is 1.00 and the reward is 1."


STEPS = 200


@pytest.fixture(autouse=True)
def _one_thread():
    """Tiny models gain nothing from threads; on a busy CPU two threads can make them 50x slower."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def tiny_judge(**kwargs) -> RewardJudge:
    return JudgeBackbone(preset="tiny", max_length=64, **kwargs).build()


class FixedJudge(RewardJudge):
    """A tiny judge whose P(success) is fixed (records what it was asked)."""

    def __init__(self, p: float):
        base = tiny_judge()
        super().__init__(base.model, base.tokenizer, base.env, base.max_length, base.threshold)
        self.p, self.asked, self.histories = p, [], []

    def predict(self, instructions, states, actions, batch_size=64, histories=None):
        self.asked += list(actions)
        self.histories += [list(h) for h in histories]
        return [self.p] * len(actions), None


def test_judge_inputs_carry_goal_page_facts_options_and_the_price_verdict():
    state = ("[page] item | b01\n[title] Red Cotton Shirt\n[price] $42.00\n[attributes] machine wash ; cotton\n"
             "[option color] red (selected) ; blue\n[option size] small ; large\n[button] buy now")  # fmt: skip
    a, b = judge_inputs("i want a red shirt, and price lower than 30.00 dollars", state, "click[buy now]")
    assert a == "i want a red shirt, and price lower than 30.00 dollars"
    assert b == (
        "title: Red Cotton Shirt | price: $42.00, over the cap of $30.00 | attributes: machine wash ; cotton | "
        "color: red | size: none selected | action: click[buy now]"
    )


def test_save_load_round_trip_alone_and_inside_the_experience_model(tmp_path):
    judge = tiny_judge(threshold=0.3)
    args = (["i want a red shirt"] * 2, [ITEM_PAGE, DONE_PAGE], ["click[buy now]"] * 2)
    before = judge.predict_proba(*args)
    loaded = RewardJudge.from_pretrained(judge.save_pretrained(tmp_path / "judge"))
    assert loaded.settings() == {"env": "webshop", "max_length": 64, "threshold": 0.3, "failure_ends": True}
    assert loaded.predict_proba(*args) == pytest.approx(before, abs=1e-6)

    em = ScriptedExperience([])
    em.judge = judge
    em.save_pretrained(tmp_path / "em")
    assert (tmp_path / "em" / "judge" / "judge.json").is_file()
    again = ExperienceModel.from_pretrained(tmp_path / "em", decoding="free")
    assert again.judge is not None and again.judge.predict_proba(*args) == pytest.approx(before, abs=1e-6)
    assert not any(p.requires_grad for p in again.judge.parameters())  # frozen with the experience model
    em.judge = None  # an export without judge/ loads without one
    em.save_pretrained(tmp_path / "em_plain")
    assert ExperienceModel.from_pretrained(tmp_path / "em_plain", decoding="free").judge is None


def _buy(env):
    td = env.reset()
    td["action"] = ["click[buy now]"]
    return env.step(td)["next"]


@pytest.mark.parametrize("p, reward", [(0.1, 0.0), (0.9, 1.0)])
def test_reward_switch_judge_decides_terminal_steps_and_the_text_agrees(p, reward):
    generated = build_target(DONE_PAGE, 1, True, 1, reasoning=ACCEPTING)
    em = ScriptedExperience([generated, generated])
    em.judge = FixedJudge(p)
    out = _buy(SyntheticEnv(em, [BUY_TASK], batch_size=[1], reward="judge"))
    assert out["reward"].item() == reward and out["done"].item() and em.judge.asked == ["click[buy now]"]
    reasoning = as_text_list(out["reasoning"])[0]
    # kept where the judge agrees with the generated verdict; overruled, the generated checks go too
    kept = "Checks: price $12.00 <= $30.00 yes." if reward else ""
    assert reasoning.startswith(f"Buying b01 ends the episode. {kept}".strip() + " The reward judge gives")
    assert reasoning.endswith(
        f"P(success) = {p:.2f}, so the score is {1.0 if reward else p:.2f} and the reward is {int(reward)}."
    )
    assert reasoning.count("the reward is") == 1 and "checks pass" not in reasoning
    assert f"[score] {1.0 if reward else p:.4f}" in as_text_list(out["observation"])[0]
    assert em.judge.histories == [[]]  # the episode's earlier actions reach the judge (none here)
    # generated: the model's own verdict, and the judge is not asked
    out = _buy(SyntheticEnv(em, [BUY_TASK], batch_size=[1], reward="generated"))
    assert out["reward"].item() == 1.0 and em.judge.asked == ["click[buy now]"]


def test_judge_leaves_steps_the_model_does_not_end_alone():
    em = ScriptedExperience([build_target(ITEM_PAGE, 0, False, 0, reasoning="it opens the page")])
    em.judge = FixedJudge(0.9)
    out = _buy(SyntheticEnv(em, [BUY_TASK], batch_size=[1], reward="judge"))
    assert out["reward"].item() == 0.0 and not out["done"].item() and em.judge.asked == []
    assert as_text_list(out["reasoning"]) == ["it opens the page"]


def test_judged_outcome_keeps_a_partial_generated_score_below_one():
    pred = ParsedOutcome(
        True,
        "[page] done\n[score] 0.7500",
        0.0,
        True,
        0.75,
        "3/4 checks pass, so the score is 0.75 and the reward is 0.",
    )
    out = judged_outcome(pred, 0.2)
    assert (out.reward, out.score) == (0.0, 0.75) and "[score] 0.7500" in out.next_state
    assert (
        out.reasoning == "The reward judge gives P(success) = 0.20, so the score is 0.75 and the reward is 0."
    )


def test_bad_settings_name_field_value_and_fix(tmp_path):
    with pytest.raises(
        ValueError,
        match=r"SyntheticEnv.reward='judged' is not a reward mode; choose one of \['generated', 'judge'\]",
    ):
        SyntheticEnv(ScriptedExperience([]), [BUY_TASK], reward="judged")
    with pytest.raises(
        ValueError,
        match=r"reward='judge'.*no reward judge.*configs/webshop_reward_judge.yaml.*reward='generated'",
    ):
        SyntheticEnv(ScriptedExperience([]), [BUY_TASK], reward="judge")
    with pytest.raises(ValueError, match=r"JudgeBackbone.threshold=1.5: must be in \(0, 1\)"):
        JudgeBackbone(threshold=1.5)
    with pytest.raises(
        FileNotFoundError, match="is not a saved reward judge.*configs/webshop_reward_judge.yaml"
    ):
        RewardJudge.from_pretrained(tmp_path)


def _toy_steps(n: int, seed: int) -> list[tuple[str, str, float]]:
    """The instruction names a goal material; the page's attribute is that material (success) or another."""
    words = ["cotton", "wool", "leather", "silk"]
    rng, out = random.Random(seed), []
    for _ in range(n):
        goal, other = rng.sample(words, 2)
        present = rng.random() < 0.5
        state = f"[page] item | b01\n[title] a jacket\n[attributes] {goal if present else other}\n[button] buy now"
        out.append((f"i need a {goal} jacket", state, float(present)))
    return out


def test_judged_outcome_pays_a_failure_the_score_heads_prediction_below_one():
    pred = ParsedOutcome(
        True, "[page] done\n[score] 0.0200", 0.0, True, 0.02, "the score is 0.02 and the reward is 0."
    )
    out = judged_outcome(pred, 0.2, score=0.74)
    assert (out.reward, out.score) == (0.0, 0.74) and "[score] 0.7400" in out.next_state
    assert judged_outcome(pred, 0.2, score=1.0).score == 0.99  # only a success earns 1
    assert judged_outcome(pred, 0.9, score=0.3).score == 1.0


def test_a_score_head_grows_on_a_saved_judge_without_changing_its_success_logit(tmp_path):
    judge = tiny_judge()
    args = (["i want a red shirt"] * 2, [ITEM_PAGE, DONE_PAGE], ["click[buy now]"] * 2)
    before = judge.predict_proba(*args)
    assert judge.predict(*args)[1] is None and not judge.has_score_head
    grown = JudgeBackbone(path=str(judge.save_pretrained(tmp_path / "old")), score_head=True).build()
    probs, scores = grown.predict(*args)
    assert grown.has_score_head and probs == pytest.approx(before, abs=1e-6) and scores == [0.5, 0.5]
    loaded = RewardJudge.from_pretrained(grown.save_pretrained(tmp_path / "new"))
    assert loaded.has_score_head and loaded.predict(*args) == (pytest.approx(probs), pytest.approx(scores))
    fresh = tiny_judge(score_head=True)
    assert fresh.logits(**fresh.encode(*args)).shape == (2, 2) and fresh(**fresh.encode(*args)).shape == (2,)


def test_tiny_judge_learns_a_separable_comparison():
    """A 2-layer BERT from scratch learns "goal term on the page or not" (fresh toy steps every batch)."""
    torch.manual_seed(0)
    judge = tiny_judge()
    opt = torch.optim.AdamW(judge.parameters(), lr=3e-3)
    judge.model.train()
    for step in range(STEPS):
        batch = _toy_steps(32, seed=100 + step)
        logits = judge(**judge.encode([b[0] for b in batch], [b[1] for b in batch], ["click[buy now]"] * 32))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(
            logits, torch.tensor([b[2] for b in batch])
        )
        opt.zero_grad()
        loss.backward()
        opt.step()
    held_out = _toy_steps(200, seed=2)
    probs = judge.predict_proba([h[0] for h in held_out], [h[1] for h in held_out], ["click[buy now]"] * 200)
    acc = sum((p >= 0.5) == (h[2] > 0.5) for p, h in zip(probs, held_out, strict=True)) / len(held_out)
    assert acc >= 0.95, acc


def test_fit_trains_exports_and_the_export_loads(tmp_path, cpu_trainer_kwargs):
    import lightning as L

    from datamodules.terminal_steps import TerminalStepDataModule
    from models.reward_judge import RewardJudgeFit

    def traj(i, split, success):
        t = Transition(f"t{i}", "i need a wool jacket", 0, ITEM_PAGE, "click[buy now]", DONE_PAGE,
                       float(success), True, success, split=split, terminated=True)  # fmt: skip
        return Trajectory(
            f"e{i}", f"t{i}", t.instruction, "webshop", split, "offline", "expert", [t], success
        )

    train, test = tmp_path / "train.jsonl", tmp_path / "test.jsonl"
    write_trajectories(train, [traj(i, "train", i % 2 == 0) for i in range(6)])
    write_trajectories(test, [traj(9, "test", True)])
    module = RewardJudgeFit(JudgeBackbone(preset="tiny", max_length=64), export_dir=str(tmp_path / "judge"))
    before = [p.detach().clone() for p in module.judge.parameters()]
    dm = TerminalStepDataModule([str(train)], [str(test)], batch_size=2)
    L.Trainer(**cpu_trainer_kwargs, logger=False).fit(module, datamodule=dm)
    assert any(not torch.equal(a, b) for a, b in zip(before, module.judge.parameters(), strict=True))
    assert torch.equal(before[0], module.judge.model.get_input_embeddings().weight)  # frozen by default
    loaded = RewardJudge.from_pretrained(tmp_path / "judge")
    assert loaded.predict_proba(["i need a wool jacket"], [ITEM_PAGE], ["click[buy now]"]) == pytest.approx(
        module.judge.predict_proba(["i need a wool jacket"], [ITEM_PAGE], ["click[buy now]"]), abs=1e-6
    )
    scored = RewardJudgeFit(
        JudgeBackbone(preset="tiny", max_length=64, score_head=True), export_dir=str(tmp_path / "scored")
    )
    L.Trainer(**cpu_trainer_kwargs, logger=False).fit(scored, datamodule=dm)
    assert RewardJudge.from_pretrained(tmp_path / "scored").has_score_head
    assert all(e["score"] == e["label"] for e in dm.train)  # a success scores 1; these failures have no score
    with pytest.raises(
        ValueError, match=r"train_files: .* holds a 'test'-split episode .* collect them with `--split train`"
    ):
        TerminalStepDataModule([str(test)]).setup("fit")


def test_a_bad_judge_setting_at_the_command_line_is_one_error_line(capsys):
    from pathlib import Path

    from dreamgym.cli import main
    from dreamgym.errors import run_guarded

    config = str(Path(__file__).resolve().parents[1] / "configs" / "webshop_reward_judge.yaml")
    rc = run_guarded(main, ["fit", "--config", config, "--model.init_args.judge.init_args.threshold=2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and "error: JudgeBackbone.threshold=2.0: must be in (0, 1)" in err[-2:], err[-2:]


def test_from_checkpoint_loads_the_judge_and_checks_the_switch(tmp_path):
    em = ScriptedExperience([])
    em.save_pretrained(tmp_path / "plain")
    with pytest.raises(ValueError, match="no reward judge"):
        SyntheticEnv.from_checkpoint(tmp_path / "plain", tasks=[BUY_TASK], reward="judge", decoding="free")
    em.judge = tiny_judge()
    em.save_pretrained(tmp_path / "with_judge")
    env = SyntheticEnv.from_checkpoint(
        tmp_path / "with_judge", tasks=[BUY_TASK], reward="judge", decoding="free"
    )
    assert env.reward == "judge" and isinstance(env.experience.judge, RewardJudge)
    with pytest.raises(ValueError, match=r"from_checkpoint\(reward=...\)='jduge' is not a reward mode"):
        SyntheticEnv.from_checkpoint(tmp_path / "with_judge", tasks=[BUY_TASK], reward="jduge")


def test_pipeline_judge_stage_collects_train_purchases_and_points_the_fit_at_them(tmp_path):
    from pathlib import Path

    from dreamgym.lab.pipeline import PipelineConfig, judge_fit, judge_purchases_stage
    from dreamgym.schema import read_trajectories

    with pytest.raises(ValueError, match="judge_config='j.yaml' needs judge_episodes"):
        PipelineConfig(out_dir=str(tmp_path), judge_config="j.yaml")
    cfg = PipelineConfig(out_dir=str(tmp_path), judge_config="j.yaml", judge_episodes={"near_miss": 2, "expert": 1},
                         judge_overrides=[{"trainer": {"max_steps": 5}}])  # fmt: skip
    out = judge_purchases_stage(cfg)
    trajs = list(read_trajectories(out))
    assert out == tmp_path / "judge_purchases_train.jsonl" and len(trajs) == 3
    assert {t.split for t in trajs} == {"train"} and sorted(t.policy for t in trajs) == [
        "expert",
        "near_miss",
        "near_miss",
    ]
    d = Path(tmp_path)
    files = [str(out), str(d / "train.jsonl"), str(d / "roll.jsonl")]
    assert judge_fit(cfg, d / "train.jsonl", d / "roll.jsonl", d / "test.jsonl", out) == [
        {"data": {"init_args": {"train_files": files, "val_files": [str(d / "test.jsonl")]}}},
        {"trainer": {"max_steps": 5}},
    ]


def test_alfworld_view_is_the_decisive_commands_and_a_loss_need_not_end_the_game():
    """ALFWorld's judge reads what was done (take / heat / move ...), never the state; a step it overrules
    to a loss keeps the game running where only a win ends one (``failure_ends=False``)."""
    history = ["go to countertop 2", "take cup 1 from countertop 2", "go to microwave 1", "open microwave 1",
               "heat cup 1 with microwave 1", "examine cup 1", "go to fridge 1"]  # fmt: skip
    a, b = judge_inputs(
        "put a hot cup in fridge", "You arrive at fridge 1.", "move cup 1 to fridge 1", "alfworld", history
    )
    assert a == "put a hot cup in fridge"
    assert b == "take cup 1 from countertop 2; heat cup 1 with microwave 1 | action: move cup 1 to fridge 1"
    assert judge_inputs("put a cup in fridge", "x", "take cup 1 from table 1", "alfworld")[1].startswith(
        "nothing taken or used yet | action:"
    )
    won = ParsedOutcome(True, "You move the cup 1 to the fridge 1.", 1.0, True, 1.0, "The goal holds.")
    lost = judged_outcome(won, 0.2, failure_ends=False)
    assert (lost.reward, lost.done, lost.score) == (0.0, False, 0.0)
    assert lost.reasoning.endswith("so the score is 0.00 and the reward is 0.")
    kept = judged_outcome(won, 0.8, failure_ends=False)
    assert (kept.reward, kept.done, kept.score) == (1.0, True, 1.0)
    assert judged_outcome(won, 0.2).done  # WebShop: a purchase ends the episode whatever it earns


def test_terminal_examples_with_verbs_keep_losing_placements_and_their_history():
    from datamodules.terminal_steps import terminal_examples

    def step(i, action, reward=0.0, done=False, invalid=False):
        return Transition(task_id="t", instruction="put a cup in fridge", step=i, state=f"s{i}", action=action,
                          next_state=f"s{i + 1}", reward=reward, done=done, invalid=invalid)  # fmt: skip

    traj = Trajectory(trajectory_id="e", task_id="t", instruction="put a cup in fridge", env="alfworld", split="train",
                      source="offline", policy="near_miss",
                      transitions=[step(0, "take cup 1 from table 1"), step(1, "jump", invalid=True),
                                   step(2, "move cup 1 to sinkbasin 1"), step(3, "take cup 1 from sinkbasin 1"),
                                   step(4, "move cup 1 to fridge 1", 1.0, True)])  # fmt: skip
    assert [(e["action"], e["label"]) for e in terminal_examples([traj])] == [("move cup 1 to fridge 1", 1.0)]
    ex = terminal_examples([traj], verbs=["move", "take"])
    assert [(e["action"].split()[0], e["label"]) for e in ex] == [
        ("take", 0.0),
        ("move", 0.0),
        ("take", 0.0),
        ("move", 1.0),
    ]
    assert ex[-1]["history"] == [
        "take cup 1 from table 1",
        "move cup 1 to sinkbasin 1",
        "take cup 1 from sinkbasin 1",
    ]


def test_a_loss_the_judge_finds_keeps_the_synthetic_episode_running_without_failure_ends():
    generated = build_target(DONE_PAGE, 1, True, 1, reasoning=ACCEPTING)
    em = ScriptedExperience([generated])
    em.judge = FixedJudge(0.1)
    em.judge.failure_ends = False
    out = _buy(SyntheticEnv(em, [BUY_TASK], batch_size=[1], reward="judge"))
    assert out["reward"].item() == 0.0 and not out["done"].item() and em.judge.asked == ["click[buy now]"]


def test_terminal_examples_carry_webshops_partial_purchase_scores():
    """A near-miss purchase fails with partial credit: the score head's target is that real score."""
    from datamodules.terminal_steps import terminal_examples
    from dreamgym.collect import collect_trajectories

    episodes = collect_trajectories("webshop", "train", 0, 0, seed=0, teacher=False, mix={"near_miss": 6})
    ex = terminal_examples(episodes)
    final = {t.trajectory_id: t.transitions[-1] for t in episodes}
    assert ex and all(e["score"] == pytest.approx(final[e["trajectory_id"]].score) for e in ex)
    assert any(e["label"] == 0.0 and 0.0 < e["score"] < 1.0 for e in ex)
