"""Experience-model SFT: masked loss by hand, prompt tokens carry no loss, data module, CLI fit + resume."""

import json
import math
from pathlib import Path

import pytest
import torch
from experience_toy import toy_trajectories, write_toy

from datamodules.trajectories import TrajectoryDataModule
from dreamgym.modeling import LanguageModel
from dreamgym.modeling.sft import OUTCOME, PROMPT, REASONING, encode_examples, experience_sft_loss
from dreamgym.modeling.tokenizer import train_tokenizer

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "webshop_experience_sft.yaml"


@pytest.fixture(scope="module")
def toy_data(tmp_path_factory):
    d = tmp_path_factory.mktemp("toy")
    train, test = write_toy(d / "train.jsonl", 24, "train", 0), write_toy(d / "test.jsonl", 6, "test", 1)
    texts = [
        t.state + " " + t.action + " " + t.next_state + " " + (t.reasoning or "")
        for traj in toy_trajectories(24)
        for t in traj.transitions
    ]
    tok = train_tokenizer(
        texts * 4
        + [
            "<task> <history> <ref> <s> <a> <s'> <r> <state> <action> <predict> <think> "
            "</think> <next> </next> <reward> <done> <score> <end>"
        ]
        * 20,
        vocab_size=400,
    )
    tok.save_pretrained(d / "tok")
    return {"train": train, "test": test, "tok": d / "tok"}


def test_loss_matches_hand_computation():
    torch.manual_seed(0)
    logits = torch.randn(1, 5, 3)
    ids = torch.tensor([[0, 2, 1, 1, 0]])
    parts = torch.tensor([[PROMPT, PROMPT, REASONING, OUTCOME, OUTCOME]])
    out = experience_sft_loss(logits, ids, parts)

    def ce(t):  # loss of token t, predicted from position t - 1
        row = logits[0, t - 1].tolist()
        return -(row[ids[0, t]] - math.log(sum(math.exp(v) for v in row)))

    assert out["loss_reasoning"].item() == pytest.approx(ce(2), rel=1e-5)
    assert out["loss_state"].item() == pytest.approx((ce(3) + ce(4)) / 2, rel=1e-5)
    assert out["loss"].item() == pytest.approx(ce(2) + (ce(3) + ce(4)) / 2, rel=1e-5)
    assert (out["n_reasoning"].item(), out["n_state"].item()) == (1, 2)


def test_prompt_term_by_hand():
    torch.manual_seed(2)
    logits = torch.randn(1, 6, 4)
    ids = torch.tensor([[0, 3, 2, 1, 1, 0]])
    parts = torch.tensor([[PROMPT, PROMPT, PROMPT, REASONING, OUTCOME, PROMPT]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0]])  # the last position is padding

    def ce(t):
        row = logits[0, t - 1].tolist()
        return -(row[ids[0, t]] - math.log(sum(math.exp(v) for v in row)))

    plain = experience_sft_loss(logits, ids, parts)
    out = experience_sft_loss(logits, ids, parts, mask, prompt_weight=0.5)
    assert "loss_prompt" not in plain and out["loss_prompt"].item() == pytest.approx(
        (ce(1) + ce(2)) / 2, rel=1e-5
    )
    assert out["loss"].item() == pytest.approx(plain["loss"].item() + 0.5 * (ce(1) + ce(2)) / 2, rel=1e-5)


def test_prompt_tokens_carry_no_loss():
    torch.manual_seed(1)
    logits = torch.randn(2, 6, 5, requires_grad=True)
    ids = torch.randint(0, 5, (2, 6))
    parts = torch.tensor([[0, 0, 0, 1, 2, 2], [0, 0, 2, 2, 0, 0]])  # second row: right padding
    experience_sft_loss(logits, ids, parts)["loss"].backward()
    grad_rows = logits.grad.abs().sum(-1)
    # position t-1 predicts token t: prompt tokens 1..2 (row 0) and padding (row 1) get no gradient
    assert grad_rows[0, :2].eq(0).all() and grad_rows[0, 2:5].gt(0).all()
    assert grad_rows[1, 0].eq(0) and grad_rows[1, 1:3].gt(0).all() and grad_rows[1, 3:].eq(0).all()
    with pytest.raises(ValueError, match="expects logits"):
        experience_sft_loss(torch.zeros(2, 3), ids, parts)


def test_encode_examples_marks_parts_and_keeps_target(toy_data):
    from dreamgym.modeling.tokenizer import load_tokenizer

    tok = load_tokenizer(toy_data["tok"])
    dm = TrajectoryDataModule([str(toy_data["train"])], k=2)
    dm.setup("fit")
    ex = dm.examples("train")[:2]
    full = encode_examples(tok, ex, max_length=4096)
    row = full["input_ids"][0][full["attention_mask"][0].bool()]
    parts = full["parts"][0][: len(row)]
    assert tok.decode(row[parts == REASONING]) == ex[0]["reasoning"]
    assert tok.decode(row[parts == OUTCOME], skip_special_tokens=True) == ex[0]["outcome"]
    assert tok.decode(row[parts == PROMPT], skip_special_tokens=True) == ex[0]["prompt"]
    n_target = int((full["parts"][0] > 0).sum())
    short = encode_examples(tok, ex, max_length=n_target + 10)  # prompt cut from the left, target whole
    assert short["input_ids"].shape[1] <= n_target + 10 and int((short["parts"][0] > 0).sum()) == n_target
    assert short["input_ids"][0, 0] == tok.bos_token_id
    # a cut removes the neighbours first: the task, history and current state survive a budget that
    # the neighbours alone exceed
    full_prompt = int((full["parts"][0] == PROMPT).sum())
    refs = len(tok.encode("".join(ex[0]["prompt"].partition("\n<ref>")[1:]).split("<state>\n")[0]))
    mid = encode_examples(tok, ex[:1], max_length=full_prompt + n_target - refs // 2)
    kept = tok.decode(mid["input_ids"][0][mid["parts"][0] == PROMPT], skip_special_tokens=True)
    head, tail = ex[0]["prompt"].split("<ref>")[0], ex[0]["prompt"][ex[0]["prompt"].rfind("<state>") :]
    assert kept.startswith(head) and kept.endswith(tail) and kept != ex[0]["prompt"]


def test_datamodule_switches_and_no_leak(toy_data):
    dm = TrajectoryDataModule(
        [str(toy_data["train"])], [str(toy_data["test"])], k=2, use_reasoning=False, history_window=1
    )
    dm.setup("fit")
    train, val = dm.examples("train"), dm.examples("val")
    assert len(train) == 72 and len(val) == 18
    assert all(ex["reasoning"] == "" and ex["prompt"].count("<ref>") == 2 for ex in train)
    assert train[2]["prompt"].split("\n")[1] in ("<history> click[b1]", "<history> click[b2]")
    assert train[1]["prompt"].split("\n")[1].startswith("<history> search[")
    assert all(
        len(ex["neighbour_ids"]) == 2 and ex["trajectory_id"] not in ex["neighbour_ids"] for ex in train
    )
    assert all(
        ex["trajectory_id"].startswith("test") and all(n.startswith("train") for n in ex["neighbour_ids"])
        for ex in val
    )  # held-out examples retrieve from the train buffer only
    # without exclusion a transition mostly retrieves itself: the exclusion is what removes it
    leaky = TrajectoryDataModule([str(toy_data["train"])], k=1, exclude="none")
    leaky.setup("fit")
    own = sum(ex["neighbour_ids"] == [ex["trajectory_id"]] for ex in leaky.examples("train"))
    assert own > len(train) // 2
    dm0 = TrajectoryDataModule([str(toy_data["train"])], k=0)
    dm0.setup("fit")
    assert all("<ref>" not in ex["prompt"] for ex in dm0.examples("train"))
    with pytest.raises(FileNotFoundError, match="python -m dreamgym collect"):
        TrajectoryDataModule(["missing.jsonl"]).setup("fit")


def _cli(args):
    from dreamgym.cli import main

    main(args)


def _fit_args(toy_data, root, max_steps, extra=()):
    return [
        "fit",
        "--config",
        str(CONFIG),
        "--trainer.max_steps",
        str(max_steps),
        "--trainer.val_check_interval",
        "2",
        "--trainer.limit_val_batches",
        "1",
        "--trainer.log_every_n_steps",
        "1",
        "--trainer.logger.init_args.save_dir",
        str(root / "runs"),
        "--trainer.callbacks.init_args.every_n_train_steps",
        "2",
        "--trainer.enable_progress_bar",
        "false",
        "--model.init_args.lm.init_args.preset",
        "tiny",
        "--model.init_args.lm.init_args.tokenizer_path",
        str(toy_data["tok"]),
        "--model.init_args.max_new_tokens",
        "8",
        "--model.init_args.decoding",
        "free",  # 8 tokens cannot hold a structured target; free decoding of noise is fine here
        "--model.init_args.max_length",
        "256",
        "--model.init_args.export_dir",
        str(root / "hf"),
        "--data.init_args.train_files",
        f"[{toy_data['train']}]",
        "--data.init_args.val_files",
        f"[{toy_data['test']}]",
        "--data.init_args.batch_size",
        "2",
        "--data.init_args.eval_batch_size",
        "2",
        *extra,
    ]


@pytest.mark.slow
def test_cli_fit_exports_and_resumes(toy_data, tmp_path):
    _cli(_fit_args(toy_data, tmp_path, 2))
    hf = tmp_path / "hf"
    assert (hf / "config.json").is_file() and (hf / "buffer" / "index.usearch").is_file()
    assert json.loads((hf / "experience_format.json").read_text())["k"] == 3
    from transformers import AutoModelForCausalLM

    AutoModelForCausalLM.from_pretrained(hf, local_files_only=True)  # plain transformers loads it
    ckpts = sorted((tmp_path / "runs").rglob("last.ckpt"))
    assert ckpts, "no checkpoint written"
    state = torch.load(ckpts[0], weights_only=False)
    assert state["global_step"] == 2
    with pytest.raises(ValueError, match="overwrite=true"):  # a finished export is not replaced by default
        _cli(_fit_args(toy_data, tmp_path, 4, ["--ckpt_path", "last"]))
    before = (hf / "model.safetensors").read_bytes()
    # resuming the run to 4 steps replaces the export only when asked to
    _cli(_fit_args(toy_data, tmp_path, 4, ["--ckpt_path", "last", "--model.init_args.overwrite", "true"]))
    assert (hf / "model.safetensors").read_bytes() != before
    resumed = torch.load(sorted((tmp_path / "runs").rglob("last.ckpt"))[-1], weights_only=False)
    assert resumed["global_step"] == 4
    versions = {p.parents[1].name for p in (tmp_path / "runs").rglob("last.ckpt")}
    assert versions == {ckpts[0].parents[1].name}  # logged into the same version, not a new one
    events = list((tmp_path / "runs").rglob("events.out.tfevents*"))
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    tags = set()
    for e in events:
        acc = EventAccumulator(str(e))
        acc.Reload()
        tags |= set(acc.Tags()["scalars"])
    assert {
        "train/loss",
        "train/loss_state",
        "train/loss_reasoning",
        "val/loss",
        "val/reward_acc",
        "val/parse_fail_rate",
    } <= tags


def test_language_model_spec_builds_tiny(toy_data):
    model, tok = LanguageModel(preset="tiny", tokenizer_path=str(toy_data["tok"])).build()
    assert model.config.hidden_size == 64 and len(tok) == model.config.vocab_size


def test_variation_pairs_pair_different_tasks(toy_data):
    from dreamgym.modeling.formats import parse_variation

    dm = TrajectoryDataModule([str(toy_data["train"])], k=0, variation_pairs=5)
    dm.setup("fit")
    var = [ex for ex in dm.examples("train") if ex.get("kind") == "variation"]
    assert len(var) == 5 and len(dm.examples("train")) == 72 + 5
    instr = {traj.task_id: traj.instruction for traj in toy_trajectories(24)}
    for ex in var:
        assert ex["task_id"] != ex["variant_task_id"] and ex["prompt"].startswith(
            "<vary> " + instr[ex["task_id"]]
        )
        assert parse_variation(ex["outcome"]) == instr[ex["variant_task_id"]]


def test_done_repeat_weights_final_steps(toy_data):
    dm = TrajectoryDataModule([str(toy_data["train"])], k=0, done_repeat=3)
    dm.setup("fit")
    ex = dm.examples("train")
    finals = [e for e in ex if e["done"]]
    assert len(ex) == 72 + 2 * 24 and len(finals) == 3 * 24  # 24 episodes, 3 steps each, 1 final
    assert sum(e["reward"] for e in finals) == 3 * sum(t.success for t in toy_trajectories(24))
    with pytest.raises(ValueError, match="done_repeat=0"):
        TrajectoryDataModule([str(toy_data["train"])], done_repeat=0)


def test_real_webshop_examples_round_trip(webshop_offline):
    """On real WebShop trajectories: every target parses back to its transition; no own-episode neighbours."""
    from dreamgym.envs.webshop.env import WebShopEnv
    from dreamgym.modeling.formats import parse_target
    from dreamgym.schema import read_trajectories

    dm = TrajectoryDataModule([str(webshop_offline)], k=2)
    dm.setup("fit")
    examples = dm.examples("train")
    assert examples and all(ex["trajectory_id"] not in ex["neighbour_ids"] for ex in examples)
    for ex in examples:
        out = parse_target(ex["reasoning"] + ex["outcome"])
        assert out.ok and out.next_state == ex["next_state"].strip() and out.reward == ex["reward"]
    # the synthetic env lists actions of a state from its text: on real states this equals the real list
    for traj in read_trajectories(webshop_offline):
        for a, b in zip(traj.transitions, traj.transitions[1:], strict=False):
            assert WebShopEnv.infer_available_actions(traj.instruction, a.next_state) == b.available_actions


def test_tokenizer_cli_saves_a_transformers_tokenizer(toy_data, tmp_path):
    from transformers import AutoTokenizer

    from dreamgym.cli import main

    main(
        ["tokenizer", "--data", str(toy_data["train"]), "--out", str(tmp_path / "tok"), "--vocab-size", "300"]
    )
    tok = AutoTokenizer.from_pretrained(tmp_path / "tok", local_files_only=True)
    text = "<next>\n[page] item | b1\n</next>"
    assert len(tok) == 300 and tok.decode(tok.encode(text, add_special_tokens=False)) == text
    with pytest.raises(SystemExit):
        main(["tokenizer", "--data", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "t2")])
    # #39: an existing tokenizer is replaced only when asked; an empty corpus is an error, not a tokenizer
    before = sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "tok").iterdir())
    argv = [
        "tokenizer",
        "--data",
        str(toy_data["train"]),
        "--out",
        str(tmp_path / "tok"),
        "--vocab-size",
        "300",
    ]
    with pytest.raises(SystemExit, match="2"):
        main(argv)
    assert sorted((p.name, p.stat().st_mtime_ns) for p in (tmp_path / "tok").iterdir()) == before
    main([*argv, "--overwrite"])
    assert len(AutoTokenizer.from_pretrained(tmp_path / "tok", local_files_only=True)) == 300
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SystemExit, match="2"):
        main(["tokenizer", "--data", str(tmp_path / "empty.jsonl"), "--out", str(tmp_path / "t3")])
    assert not (tmp_path / "t3").exists()


def test_experience_sft_takes_format_and_buffer_through_its_protocol(toy_data, tmp_path):
    import lightning as L

    from dreamgym.modeling.formats import ExperienceFormat
    from dreamgym.retrieval import HashingEncoder, ReplayBuffer
    from dreamgym.schema import read_trajectories
    from models.experience_sft import ExperienceSFT, ExperienceSource

    lm = LanguageModel(preset="tiny", tokenizer_path=str(toy_data["tok"]))
    dm = TrajectoryDataModule([str(toy_data["train"])], k=2, history_window=1)
    assert isinstance(dm, ExperienceSource)

    class NoLayout(L.LightningDataModule):  # a data module without `format` / `buffer`
        def train_dataloader(self):
            return [[]]

    trainer = L.Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    with pytest.raises(TypeError, match="format.*buffer"):
        trainer.fit(ExperienceSFT(lm), datamodule=NoLayout())
    clash = ExperienceSFT(lm, format=ExperienceFormat(k=3))
    trainer = L.Trainer(max_steps=1, logger=False, enable_checkpointing=False, enable_progress_bar=False)
    with pytest.raises(ValueError, match="differs from the data module"):
        trainer.fit(clash, datamodule=dm)

    # without a trainer: the layout given here, the buffer given to export
    module = ExperienceSFT(lm, format=ExperienceFormat(k=2, history_window=1))
    buffer = ReplayBuffer(HashingEncoder(dim=64))
    buffer.add(t for traj in read_trajectories(toy_data["train"]) for t in traj.transitions)
    out = module.export(str(tmp_path / "hf"), buffer=buffer)
    saved = json.loads((out / "experience_format.json").read_text())
    assert (saved["k"], saved["history_window"]) == (2, 1)
    assert (out / "buffer" / "index.usearch").is_file()
