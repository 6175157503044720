"""Shared test fixtures: everything runs on CPU with the ``tiny`` model preset, few steps, no workers.

Fixtures (session-scoped where building them costs time):
    cpu_trainer_kwargs: Lightning Trainer kwargs forcing CPU, no workers, a couple of steps.
    webshop_offline:    a small JSONL of real WebShop trajectories (expert + random) on train tasks.
    tiny_tokenizer:     directory of a BPE tokenizer (vocab 512) trained on ``webshop_offline``.
    tiny_lm:            a :class:`dreamgym.modeling.LanguageModel` spec of the ``tiny`` preset.
"""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))

TINY = "tiny"
"""The one model preset every test uses."""


def pytest_collection_modifyitems(config, items):
    if not torch.cuda.is_available():
        skip = pytest.mark.skip(reason="needs a CUDA GPU")
        for item in items:
            if "gpu" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _seeded():
    """Every test starts from torch seed 0: parts given no seed take the run's seed
    (:func:`dreamgym.seeding.run_seed`), so no test depends on the ones run before it."""
    torch.manual_seed(0)


@pytest.fixture
def cpu_trainer_kwargs(tmp_path) -> dict:
    return dict(
        accelerator="cpu",
        devices=1,
        max_steps=2,
        limit_val_batches=1,
        num_sanity_val_steps=0,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(tmp_path),
    )


@pytest.fixture(scope="session")
def webshop_offline(tmp_path_factory):
    from dreamgym.collect import collect_trajectories

    out = tmp_path_factory.mktemp("offline") / "webshop_train.jsonl"
    collect_trajectories("webshop", split="train", n_expert=24, n_random=8, out=out, seed=0)
    return out


@pytest.fixture(scope="session")
def tiny_tokenizer(webshop_offline, tmp_path_factory):
    from dreamgym.modeling.tokenizer import corpus_from_trajectories, train_tokenizer

    tok = train_tokenizer(corpus_from_trajectories([webshop_offline]), vocab_size=512)
    path = tmp_path_factory.mktemp("tokenizer")
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_lm(tiny_tokenizer):
    from dreamgym.modeling import LanguageModel

    return LanguageModel(preset=TINY, tokenizer_path=str(tiny_tokenizer), max_positions=4096)
