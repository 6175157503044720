"""ALFRED floor plans as the ``alfworld`` wheel describes them: receptacles, object types, populations.

The wheel ships, per floor plan, ``FloorPlan<n>-objects.json`` (the object and receptacle *types* the
scene holds) and ``FloorPlan<n>-openable.json`` (one entry per receptacle instance ALFRED recorded an
interaction pose for, with its ALFRED id). :func:`scene_layout` takes every receptacle instance of the
pose list (so a floor plan keeps its recorded receptacle counts: cabinets, drawers, shelves,
countertops, ...) and adds the static receptacle types the pose list lacks (:data:`MISSING_RECEP_COUNT`).

Object populations follow ALFRED's scene randomisation constants: every pickupable type of the scene
gets 1..``MAX_NUM_OF_OBJ_INSTANCES`` instances and the task's target 1..``PICKUP_REPEAT_MAX``
(:func:`instance_counts`).
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from functools import cache

__all__ = [
    "MISSING_RECEP_COUNT",
    "Scene",
    "all_scenes",
    "scene_layout",
    "holders",
    "instance_counts",
    "room_type",
]

MISSING_RECEP_COUNT = {"StoveBurner": 4}
"""Instances of a static receptacle type the pose list lacks (others: 1). AI2-THOR's kitchen stoves
have four burners; the pose lists name no stove burner at all."""

LAMPS = ("DeskLamp", "FloorLamp")
LAMP_HOLDERS = ("SideTable", "Desk", "Dresser")


def constants():
    import alfworld.gen.constants as c

    return c


def room_type(scene: int) -> str:
    """ALFRED's room type of a floor-plan number (1-30 kitchens, 201-230 living rooms, ...)."""
    return {0: "Kitchen", 2: "LivingRoom", 3: "Bedroom", 4: "Bathroom"}[scene // 100]


def _layout_path(scene: int, kind: str) -> str:
    import alfworld.gen

    return os.path.join(os.path.dirname(alfworld.gen.__file__), "layouts", f"FloorPlan{scene}-{kind}.json")


def all_scenes() -> list[int]:
    """ALFRED floor-plan numbers that have a layout in the installed ``alfworld`` package."""
    return sorted(n for n in constants().SCENE_NUMBERS if os.path.exists(_layout_path(n, "objects")))


@dataclass(frozen=True)
class Scene:
    """What a floor plan offers: static receptacles (with ALFRED ids) and pickupable types."""

    scene: int
    receptacles: tuple[tuple[str, str], ...]  # (ALFRED id, type), static receptacles only
    pickupable: tuple[str, ...]  # object types that some present receptacle can hold
    lamps: tuple[str, ...]  # lamp types present
    rtypes: frozenset


def _rtype(alfred_id: str) -> str:
    parts = alfred_id.split("|")
    return parts[-1] if len(parts) == 5 else parts[0]  # Sink|x|y|z|SinkBasin -> SinkBasin


@cache
def scene_layout(scene: int) -> Scene:
    """Read ``FloorPlan<scene>``: the pose list's receptacles plus the static types it lacks."""
    c = constants()
    with open(_layout_path(scene, "objects")) as f:
        types = set(json.load(f))
    with open(_layout_path(scene, "openable")) as f:
        poses = json.load(f)
    recs = {
        rid: _rtype(rid)
        for rid in sorted(poses)
        if _rtype(rid) in c.STATIC_RECEPTACLES and _rtype(rid) not in ("Sink", "Bathtub")
    }
    present = set(recs.values())
    rng = random.Random(f"layout-{scene}")
    for rtype in sorted(types):
        if rtype in ("Sink", "Bathtub"):
            rtype += "Basin"
        if rtype not in c.STATIC_RECEPTACLES or rtype in present or rtype not in c.VAL_RECEPTACLE_OBJECTS:
            continue
        for _ in range(MISSING_RECEP_COUNT.get(rtype, 1)):
            rid = "|".join([rtype, *(f"{rng.uniform(-3, 3):+06.2f}" for _ in range(3))])
            if rtype in ("SinkBasin", "BathtubBasin"):
                rid = rid.replace(rtype, rtype[: -len("Basin")], 1) + f"|{rtype}"
            recs[rid] = rtype
        present.add(rtype)
    rtypes = frozenset(recs.values())
    pick = sorted(
        t
        for t in types
        if t in c.OBJECTS_SET
        and t not in c.STATIC_RECEPTACLES
        and t not in LAMPS
        and any(t in c.VAL_RECEPTACLE_OBJECTS[r] for r in rtypes)
    )
    lamps = tuple(t for t in LAMPS if t in types and rtypes & set(LAMP_HOLDERS))
    return Scene(scene, tuple(sorted(recs.items())), tuple(pick), lamps, rtypes)


def holders(obj: str, rtypes) -> list[str]:
    """Receptacle types among ``rtypes`` that ALFRED allows ``obj`` in (sorted)."""
    c = constants()
    return sorted(r for r in rtypes if obj in c.VAL_RECEPTACLE_OBJECTS.get(r, ()))


def instance_counts(s: Scene, target: str, task_type: str, rng: random.Random) -> dict[str, int]:
    """Instances per pickupable type: 1..``MAX_NUM_OF_OBJ_INSTANCES``, the target 1..``PICKUP_REPEAT_MAX``
    (at least 2 for ``pick_two_obj_and_place``), drawn from ``rng`` in sorted type order."""
    c = constants()
    out = {}
    for obj in s.pickupable:
        if obj == target:
            low = 2 if task_type == "pick_two_obj_and_place" else 1
            out[obj] = rng.randint(low, c.PICKUP_REPEAT_MAX)
        else:
            out[obj] = rng.randint(1, c.MAX_NUM_OF_OBJ_INSTANCES)
    return out
