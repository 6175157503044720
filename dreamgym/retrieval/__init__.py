"""Replay buffer of real (and synthetic) transitions with a usearch index over embed(state, action)."""

from dreamgym.retrieval.buffer import ReplayBuffer
from dreamgym.retrieval.encoders import Encoder, HashingEncoder, MiniLMEncoder, make_encoder
from dreamgym.retrieval.index import VectorIndex

__all__ = [
    "Encoder",
    "HashingEncoder",
    "MiniLMEncoder",
    "make_encoder",
    "VectorIndex",
    "ReplayBuffer",
]
