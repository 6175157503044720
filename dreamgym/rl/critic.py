"""Critics for PPO: a value head on the policy backbone, or a separate small LM with its own head.

A critic maps a turn's sequence to ``V(s_t)``, read at the last prompt token (the state, before the
policy's action). It is injected into :class:`models.policy_rl.PolicyRL` (``critic: ...`` in YAML) and
trained with the clipped value loss in the same optimizer (its own param group).
"""

from __future__ import annotations

import torch
from torch import nn

from dreamgym.modeling.factory import LanguageModel

__all__ = ["Critic", "ValueHead", "LMCritic", "last_prompt_index", "read_values"]


def last_prompt_index(action_mask: torch.Tensor) -> torch.Tensor:
    """(N,) position of the last prompt token of each row: the first action position minus one."""
    if action_mask.dim() != 2:
        raise ValueError(f"action_mask must be (N, L), got {tuple(action_mask.shape)}")
    first = action_mask.float().argmax(dim=1)
    return (first - 1).clamp_min(0)


def read_values(head: nn.Linear, hidden: torch.Tensor) -> torch.Tensor:
    """(N,) float32 values ``head(hidden)`` of (N, H) states, outside any autocast (under bf16 autocast a
    Linear returns bf16, which neither a float32 rollout buffer nor the value loss should get)."""
    with torch.autocast(device_type=hidden.device.type, enabled=False):
        return head(hidden.to(head.weight.dtype)).squeeze(-1).float()


class Critic(nn.Module):
    """Base class. ``shares_backbone``: values come from the policy's own hidden states."""

    shares_backbone: bool = False

    def bind(self, policy: nn.Module) -> None:
        """Called once with the policy model before the optimizer is built (create layers here)."""

    def values(
        self,
        input_ids: torch.Tensor,
        attention_mask: torch.Tensor,
        action_mask: torch.Tensor,
        policy_hidden: torch.Tensor | None,
    ) -> torch.Tensor:
        """(N,) values; ``policy_hidden`` (N, L, H) is the policy's last hidden state if ``shares_backbone``."""
        raise NotImplementedError


class ValueHead(Critic):
    """A linear value head on the policy's last hidden state (shared backbone: value gradients also
    shape the policy's representation).
    """

    shares_backbone = True

    def __init__(self) -> None:
        super().__init__()
        self.head: nn.Linear | None = None

    def bind(self, policy: nn.Module) -> None:
        hidden = policy.config.hidden_size
        self.head = nn.Linear(hidden, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def values(self, input_ids, attention_mask, action_mask, policy_hidden):
        if policy_hidden is None or self.head is None:
            raise RuntimeError(
                "ValueHead needs the policy's hidden states and bind(policy) to have been called"
            )
        idx = last_prompt_index(action_mask)
        return read_values(self.head, policy_hidden[torch.arange(idx.numel(), device=idx.device), idx])


class LMCritic(Critic):
    """A separate causal-LM backbone (e.g. the ``tiny`` preset) with a linear value head.

    Args:
        lm: which LM to build for the critic (same tokenizer as the policy).
    """

    shares_backbone = False

    def __init__(self, lm: LanguageModel) -> None:
        super().__init__()
        model, _ = lm.build()
        self.backbone = model
        self.head = nn.Linear(model.config.hidden_size, 1)
        nn.init.zeros_(self.head.weight)
        nn.init.zeros_(self.head.bias)

    def values(self, input_ids, attention_mask, action_mask, policy_hidden):
        out = self.backbone(
            input_ids=input_ids, attention_mask=attention_mask.long(), output_hidden_states=True
        )
        hidden = out.hidden_states[-1]
        idx = last_prompt_index(action_mask)
        return read_values(self.head, hidden[torch.arange(idx.numel(), device=idx.device), idx])
