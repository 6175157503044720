"""AgentGym's HTTP env protocol, both ways: serve dreamgym envs to AgentGym / AgentGym-RL clients
(:mod:`.server`, ``python -m dreamgym serve``) and use AgentGym servers as dreamgym envs (:mod:`.client`).

Two protocol variants exist upstream (WooooDyy/AgentGym ``agentenv-webshop`` and ``agentenv-alfworld``);
the server speaks the one of the env it serves (a synthetic env speaks its imitated env's variant).
The request and response shapes are in :mod:`.protocol`. Needs the ``serve`` extra (fastapi, uvicorn,
httpx); importing this package imports none of them.
"""

from __future__ import annotations
