"""Policy RL over TorchRL text envs: rollout schema, collector, advantage estimators, losses, schedules.

PPO and GRPO share one core (:class:`models.policy_rl.PolicyRL`); they differ only in the advantage
estimator (``"gae"`` vs ``"grpo"``) and PPO's critic.
"""

from dreamgym.envs.factory import EnvFactory, SyntheticEnvFactory
from dreamgym.rl.advantages import (
    ADVANTAGE_ESTIMATORS,
    AdvantageEstimator,
    GAEAdvantage,
    GRPOAdvantage,
    gae_advantages,
    grpo_advantages,
    make_advantage_estimator,
    register_advantage_estimator,
)
from dreamgym.rl.collector import Collection, RolloutCollector
from dreamgym.rl.critic import Critic, LMCritic, ValueHead
from dreamgym.rl.rollout import RolloutBatch, Turn, build_rollout_batch
from dreamgym.rl.schedules import Phase, RealSchedule, Schedule, Sim2RealSchedule, SyntheticSchedule

__all__ = [
    "ADVANTAGE_ESTIMATORS",
    "AdvantageEstimator",
    "GAEAdvantage",
    "GRPOAdvantage",
    "gae_advantages",
    "grpo_advantages",
    "make_advantage_estimator",
    "register_advantage_estimator",
    "Collection",
    "RolloutCollector",
    "Critic",
    "LMCritic",
    "ValueHead",
    "EnvFactory",
    "SyntheticEnvFactory",
    "RolloutBatch",
    "Turn",
    "build_rollout_batch",
    "Phase",
    "Schedule",
    "RealSchedule",
    "SyntheticSchedule",
    "Sim2RealSchedule",
]
