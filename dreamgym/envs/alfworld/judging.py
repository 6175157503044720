"""The reward judge's view of an ALFWorld step: the actions that decide whether the game is won.

An ALFWorld game is won by what was done to which object: the goal object taken (two of them for
``pick_two``), heated / cooled / cleaned / sliced where the goal asks for it, then moved to a receptacle of
the goal's type (or looked at while a lamp is on). The instruction names the object, the change and the
receptacle; the episode's ``take``, ``move``, ``heat``, ``cool``, ``clean``, ``slice`` and ``use`` commands
say what was done. So the judge reads those commands, oldest first, and nothing of the state, which in a
synthetic episode the experience model wrote (and may have got wrong)::

    put a hot cup in fridge | take cup 1 from countertop 2; heat cup 1 with microwave 1 | action: move cup 1 to fridge 1

Light: imports nothing of TextWorld.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["DECISIVE_VERBS", "alfworld_step_view"]

DECISIVE_VERBS = ("take", "move", "put", "heat", "cool", "clean", "slice", "use")
"""Commands that change what is held, where objects lie or what state they are in (``put``: older
ALFWorld's name of ``move``)."""


def alfworld_step_view(instruction: str, state: str, history: Sequence[str], last: int = 12) -> str:
    """The episode's last ``last`` decisive commands of ``history`` (:data:`DECISIVE_VERBS`), ``"; "``-joined,
    or ``"nothing taken or used yet"``; ``instruction`` and ``state`` are not needed (the judge's text pair
    carries the instruction)."""
    kept = [" ".join(a.split()) for a in history if a.split(" ", 1)[0] in DECISIVE_VERBS]
    return "; ".join(kept[-last:]) if kept else "nothing taken or used yet"
