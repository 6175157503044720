"""Web tasks (MiniWoB++) in headless Chromium, the paper's WebArena-Lite stand-in.

Modules: :mod:`.page` (abstract state, actions, their rules; pure text), :mod:`.browser` (one Chromium
through selenium, the network rule, missing-browser errors), :mod:`.tasks` (the task suite and its
splits), :mod:`.env` (:class:`WebEnv`), :mod:`.experts` (scripted experts reading the visible state,
random and near-miss agents), :mod:`.importer` (JSONL import of web trajectories recorded elsewhere).
Importing this package imports neither selenium nor the browser; ``from dreamgym.envs import WebEnv``
loads the env.
"""
