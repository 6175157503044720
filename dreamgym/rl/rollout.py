"""THE rollout schema: one sample per policy turn (prompt = context, response = the policy's action).

``N`` = number of turns in the batch, ``L`` = padded sequence length (prompt + response). A turn's
sequence is its prompt tokens followed by its response tokens, right-padded. Token-level fields are
aligned with ``input_ids``: ``old_log_probs[n, t] = log pi_old(input_ids[n, t] | input_ids[n, :t])``,
and only positions with ``action_mask`` (the response tokens, the policy's own) carry any loss, so
observation and prompt tokens are never trained.

Turns of one episode are stored contiguously and in order (``turn`` = 0, 1, ...), which the turn-level
GAE estimator relies on.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, fields

import torch
from tensordict import tensorclass

from dreamgym.modeling.forward import pad_rows

__all__ = ["RolloutBatch", "Turn", "build_rollout_batch", "state_key"]


def state_key(state: str) -> int:
    """A stable 64-bit key of a state's text (``blake2b``, the same in every process): turns whose env
    states are the same text get the same key (GiGPO's anchor states)."""
    return int.from_bytes(
        hashlib.blake2b(state.encode("utf-8"), digest_size=8).digest(), "little", signed=True
    )


_TOKEN_FIELDS = frozenset(
    {"input_ids", "attention_mask", "action_mask", "old_log_probs", "ref_log_probs", "allowed_ids"}
)


@tensorclass
class RolloutBatch:
    """A batch of policy turns (see module docstring for the layout)."""

    input_ids: torch.Tensor  # (N, L) int64   prompt tokens then response tokens, right-padded
    attention_mask: torch.Tensor  # (N, L) bool  True on real (non-pad) tokens
    action_mask: torch.Tensor  # (N, L) bool     True on response tokens: the only positions with loss
    old_log_probs: (
        torch.Tensor
    )  # (N, L) float  log pi_old(token | prefix) of the sampling policy (0 off mask)
    ref_log_probs: torch.Tensor  # (N, L) float  log pi_ref(token | prefix) of the frozen reference policy
    old_values: torch.Tensor  # (N,) float       critic value V(s_t) at collection time (0 without a critic)
    rewards: torch.Tensor  # (N,) float          env reward r_{t+1} received after this turn's action
    dones: torch.Tensor  # (N,) bool             the episode ended after this turn
    terminated: torch.Tensor  # (N,) bool        ... by the env's own rule (not the step limit)
    advantages: torch.Tensor  # (N,) float       advantage of the turn, shared by all its response tokens
    returns: torch.Tensor  # (N,) float          value target (GAE: advantages + values)
    task_index: torch.Tensor  # (N,) int64       index of the task in the env's split
    group_id: torch.Tensor  # (N,) int64         GRPO group: rollouts of the same task in this batch
    episode_id: torch.Tensor  # (N,) int64       episode the turn belongs to (unique in the batch)
    turn: torch.Tensor  # (N,) int64             0-based step index within the episode
    invalid: torch.Tensor  # (N,) bool           the env flagged the action invalid (a no-op)
    state_key: torch.Tensor  # (N,) int64        :func:`state_key` of the env state the turn acted in
    allowed_ids: torch.Tensor  # (N, L, K) int64  constrained decoding: token ids allowed at each response
    # position (-1 = padding); K = 0 when no turn was constrained. See dreamgym.modeling.action_constraint.

    def longest_first(self, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``rows`` (default: all) ordered by turn length, longest first (ties keep their order): chunks
        of consecutive rows then hold turns of similar length, each run at its own width (:meth:`trimmed`)."""
        rows = torch.arange(self.batch_size[0], device=self.device) if rows is None else rows
        return rows[self.attention_mask[rows].sum(1).argsort(descending=True, stable=True)]

    def trimmed(self) -> RolloutBatch:
        """These turns with the token-level fields cut after the last column any of them uses.

        A batch is padded to its longest turn; a (micro-)batch of shorter turns run at that width spends
        its forward and backward passes on padding (masked out, so the numbers do not change)."""
        used = self.attention_mask.any(0).nonzero()
        width = int(used.max()) + 1 if used.numel() else 1
        if width == self.input_ids.shape[1]:
            return self
        return RolloutBatch(
            **{
                f.name: getattr(self, f.name)[:, :width] if f.name in _TOKEN_FIELDS else getattr(self, f.name)
                for f in fields(self)
            },
            batch_size=self.batch_size,
        )

    def episode_rewards(self) -> torch.Tensor:
        """(E,) summed reward of each episode, indexed by ``episode_id`` (E = max id + 1)."""
        n_ep = int(self.episode_id.max().item()) + 1 if self.episode_id.numel() else 0
        out = torch.zeros(n_ep, dtype=self.rewards.dtype, device=self.rewards.device)
        return out.index_add_(0, self.episode_id, self.rewards)


@dataclass
class Turn:
    """One policy turn as the collector records it, before padding.

    Attributes:
        prompt_ids: token ids of the prompt (context).
        response_ids: token ids the policy generated (including the EOS token if it stopped).
        reward: env reward after the action.
        done: the episode ended after this turn.
        terminated: it ended by the env's rule (purchase, win), not truncation.
        invalid: the env flagged the action invalid.
        task_index: index of the task in its split.
        group_id: GRPO group id.
        episode_id: episode id within the batch.
        turn: step index within the episode.
        allowed: per response token, the token ids constrained decoding allowed there (``None``: free).
        state_key: :func:`state_key` of the env state the policy acted in (0: unknown).
    """

    prompt_ids: list[int]
    response_ids: list[int]
    reward: float
    done: bool
    terminated: bool
    invalid: bool
    task_index: int
    group_id: int
    episode_id: int
    turn: int
    allowed: list[list[int]] | None = None
    state_key: int = 0


def build_rollout_batch(turns: list[Turn], pad_id: int) -> RolloutBatch:
    """Pad ``turns`` (already ordered by episode, then turn) into a :class:`RolloutBatch`.

    Every field is built on the CPU with an explicit dtype (float32 for log-probs, values, rewards,
    advantages and returns, whatever the default dtype); move the batch with ``.to(device)``. Log-probs,
    values, advantages and returns start at zero; the trainer fills them in.

    Raises:
        ValueError: if ``turns`` is empty or a turn has an empty response.
    """
    if not turns:
        raise ValueError("build_rollout_batch needs at least one turn, got an empty list")
    ids, attn = pad_rows([t.prompt_ids + t.response_ids for t in turns], pad_id)
    n, length = ids.shape
    attn = attn.bool()
    act = pad_rows(
        [[False] * len(t.prompt_ids) + [True] * len(t.response_ids) for t in turns], False, dtype=torch.bool
    )[0]
    k = max((len(a) for t in turns if t.allowed for a in t.allowed), default=0)
    allowed = torch.full((n, length, k), -1, dtype=torch.long)
    for i, t in enumerate(turns):
        if not t.response_ids:
            raise ValueError(f"turn {i} (episode {t.episode_id}, step {t.turn}) has an empty response")
        p, r = len(t.prompt_ids), len(t.response_ids)
        if t.allowed is not None:
            if len(t.allowed) != r:
                raise ValueError(
                    f"turn {i}: {len(t.allowed)} allowed-token sets for {r} response tokens; they must match"
                )
            for j, a in enumerate(t.allowed):
                allowed[i, p + j, : len(a)] = torch.tensor(a, dtype=torch.long)

    def col(name, dtype):
        return torch.tensor([getattr(t, name) for t in turns], dtype=dtype)

    zeros_tok = torch.zeros((n, length), dtype=torch.float32)
    zeros_turn = torch.zeros(n, dtype=torch.float32)  # explicit: bf16-true makes bf16 the default dtype
    return RolloutBatch(
        input_ids=ids,
        attention_mask=attn,
        action_mask=act,
        old_log_probs=zeros_tok.clone(),
        ref_log_probs=zeros_tok.clone(),
        old_values=zeros_turn.clone(),
        rewards=col("reward", torch.float32),
        dones=col("done", torch.bool),
        terminated=col("terminated", torch.bool),
        advantages=zeros_turn.clone(),
        returns=zeros_turn.clone(),
        task_index=col("task_index", torch.long),
        group_id=col("group_id", torch.long),
        episode_id=col("episode_id", torch.long),
        turn=col("turn", torch.long),
        invalid=col("invalid", torch.bool),
        state_key=col("state_key", torch.long),
        allowed_ids=allowed,
        batch_size=[n],
    )
