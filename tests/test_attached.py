"""``attached_trainer``: the modules ask Lightning's public API whether a trainer runs them."""

import lightning as L
import pytest

from models.attached import attached_trainer


def test_attached_trainer_is_none_alone_and_the_trainer_once_attached(tmp_path):
    module = L.LightningModule()
    with pytest.raises(RuntimeError, match="not attached"):  # what attached_trainer relies on
        module.trainer  # noqa: B018
    assert attached_trainer(module) is None
    trainer = L.Trainer(
        accelerator="cpu", logger=False, enable_checkpointing=False, default_root_dir=tmp_path
    )
    module.trainer = trainer
    assert attached_trainer(module) is trainer
