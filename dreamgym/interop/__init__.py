"""Bridges from dreamgym envs to other RL libraries, imported lazily.

``from dreamgym.interop import make_chat_env`` loads :mod:`dreamgym.interop.torchrl_llm` (and TorchRL's
LLM stack) only then; ``import dreamgym`` never does.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["DreamGymChatTransform", "make_chat_env", "render_turn"]

_LAZY = {name: "dreamgym.interop.torchrl_llm" for name in __all__}
"""Lazily exported names: name -> module."""


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'dreamgym.interop' has no attribute {name!r}")
