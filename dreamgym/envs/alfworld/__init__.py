"""ALFWorld (text) from offline-generated household games.

Modules: :mod:`.gen` (game generator over ALFRED's scene layouts), :mod:`.plan` (fast-downward plan ->
commands, generation time), :mod:`.games` (bundled manifest, game-file cache, real ``ALFWORLD_DATA``
directories), :mod:`.speedups` (memoisation of TextWorld's PDDL engine), :mod:`.world` (state summary
for teachers), :mod:`.env` (:class:`ALFWorldEnv`), :mod:`.expert` (walkthrough expert).
Importing this package imports nothing heavy; ``from dreamgym.envs import ALFWorldEnv`` loads the env.
"""
