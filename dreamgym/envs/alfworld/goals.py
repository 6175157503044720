"""Goal text of generated ALFWorld games: ALFWorld's templates and rule-made annotation-style paraphrases.

ALFWorld writes a game's task either from ``goal_library`` templates ("put a clean mug in
coffeemachine") or, with probability ``goal_desc_human_anns_prob``, from one of the trajectory's
human annotations in ``traj_data.json`` (``turk_annotations.anns[i].task_desc``, e.g. "Put a washed
mug in the coffee maker."). The official annotations are not in the ``alfworld`` wheel, so
:func:`annotations` writes three per game by rule, in their style (natural object names, varied verbs,
articles, "in"/"on"), each marked ``"source": "dreamgym-rule"``; :func:`goal_text` picks between the
template and them as ALFWorld's ``add_task_to_grammar`` does, deterministically per game.
"""

from __future__ import annotations

import random
import re

__all__ = ["ANNOTATION_SOURCE", "task_text", "goal_pddl", "annotations", "goal_text", "natural_name"]

ANNOTATION_SOURCE = "dreamgym-rule"
"""``source`` of every generated annotation: written by rule, not by a person."""

_NAMES = {
    "AlarmClock": ("alarm clock", "clock"),
    "BathtubBasin": ("bathtub", "tub"),
    "CD": ("cd", "compact disc"),
    "CellPhone": ("cell phone", "phone"),
    "CoffeeMachine": ("coffee maker", "coffee machine"),
    "CounterTop": ("counter", "kitchen counter", "counter top"),
    "CreditCard": ("credit card", "card"),
    "DeskLamp": ("desk lamp", "lamp"),
    "DiningTable": ("dining table", "table"),
    "DishSponge": ("sponge", "dish sponge"),
    "FloorLamp": ("floor lamp", "lamp"),
    "Fridge": ("fridge", "refrigerator"),
    "GarbageCan": ("trash can", "garbage can", "bin"),
    "KeyChain": ("key chain", "set of keys"),
    "Laptop": ("laptop", "computer"),
    "RemoteControl": ("remote", "remote control"),
    "SideTable": ("side table", "night stand", "end table"),
    "SinkBasin": ("sink", "sink basin"),
    "SoapBar": ("bar of soap", "soap bar"),
    "SprayBottle": ("spray bottle", "bottle of spray"),
    "StoveBurner": ("stove", "burner", "stove top"),
    "TissueBox": ("tissue box", "box of tissues"),
    "ToiletPaper": ("roll of toilet paper", "toilet paper roll"),
    "TVStand": ("tv stand", "television stand"),
    "WateringCan": ("watering can",),
}
_IN = {"Box", "Cabinet", "Drawer", "Fridge", "Microwave", "Safe", "GarbageCan", "SinkBasin",
       "BathtubBasin", "LaundryHamper", "Toilet", "Cart"}  # fmt: skip
_ODD_PLURALS = {"knife": "knives", "shelf": "shelves", "potato": "potatoes", "tomato": "tomatoes",
                "lettuce": "heads of lettuce", "bread": "loaves of bread"}  # fmt: skip
_TEMPLATES = {
    "pick_and_place_simple": (
        "Put {a_obj} {on} the {recep}.",
        "Place {a_obj} {on} the {recep}.",
        "Move {a_obj} to the {recep}.",
        "Pick up {a_obj} and set it {on} the {recep}.",
    ),
    "look_at_obj_in_light": (
        "Examine {a_obj} under the light of the {toggle}.",
        "Look at {a_obj} by the light of a {toggle}.",
        "Pick up {a_obj} and turn on the {toggle}.",
        "Hold {a_obj} while turning on the {toggle}.",
    ),
    "pick_clean_then_place_in_recep": (
        "Put a clean {obj} {on} the {recep}.",
        "Rinse {a_obj} and put it {on} the {recep}.",
        "Wash {a_obj} in the sink, then place it {on} the {recep}.",
        "Place a rinsed {obj} {on} the {recep}.",
    ),
    "pick_heat_then_place_in_recep": (
        "Put a heated {obj} {on} the {recep}.",
        "Heat {a_obj} in the microwave and put it {on} the {recep}.",
        "Place a warm {obj} {on} the {recep}.",
        "Microwave {a_obj}, then set it {on} the {recep}.",
    ),
    "pick_cool_then_place_in_recep": (
        "Put a chilled {obj} {on} the {recep}.",
        "Cool {a_obj} in the fridge and put it {on} the {recep}.",
        "Place a cold {obj} {on} the {recep}.",
        "Chill {a_obj}, then set it {on} the {recep}.",
    ),
    "pick_two_obj_and_place": (
        "Put two {objs} {on} the {recep}.",
        "Place two {objs} {on} the {recep}.",
        "Move two {objs} to the {recep}.",
        "Find two {objs} and put them {on} the {recep}.",
    ),
}


def _words(alfred_type: str) -> str:
    return re.sub(r"(?<=[a-z])(?=[A-Z])", " ", alfred_type).lower()  # "ButterKnife" -> "butter knife"


def natural_name(alfred_type: str, rng: random.Random) -> str:
    """A natural name of an ALFRED type, e.g. "CounterTop" -> "counter" (one of a few, from ``rng``)."""
    return rng.choice(_NAMES.get(alfred_type, (_words(alfred_type),)))


def _plural(name: str) -> str:
    head, of, tail = name.partition(" of ")  # "bar of soap" -> "bars of soap"
    if of:
        return _plural(head) + of + tail
    rest, _, last = name.rpartition(" ")
    if last in _ODD_PLURALS:
        last = _ODD_PLURALS[last]
    elif re.search(r"(s|x|ch|sh)$", last):
        last += "es"
    elif re.search(r"[^aeiou]y$", last):
        last = last[:-1] + "ies"
    else:
        last += "s"
    return (rest + " " if rest else "") + last


def _article(name: str) -> str:
    return ("an " if name[0] in "aeiou" else "a ") + name


def task_text(task_type: str, obj: str, recep: str, seed: int) -> str:
    """The templated task description, e.g. "put a knife in countertop" (ALFWorld's rule)."""
    import alfworld.gen.goal_library as glib

    template = random.Random(f"task-{seed}").choice(glib.gdict[task_type]["templates"])
    toggle = recep if task_type == "look_at_obj_in_light" else ""
    return template.format(obj=obj.lower(), recep=recep.lower(), toggle=toggle.lower(), mrecep="")


def goal_pddl(task_type: str, obj: str, recep: str) -> str:
    """The PDDL goal of ALFWorld's ``goal_library`` for the task."""
    import alfworld.gen.goal_library as glib

    toggle = recep if task_type == "look_at_obj_in_light" else ""
    text = glib.gdict[task_type]["pddl"].format(obj=obj, recep=recep, toggle=toggle, mrecep="")
    return text.replace("#", "-")


def annotations(task_type: str, obj: str, recep: str, seed: int, n: int = 3) -> list[dict]:
    """``n`` rule-made annotations in ``turk_annotations.anns`` format (distinct templates)."""
    rng = random.Random(f"anns-{seed}-{task_type}-{obj}-{recep}")
    out = []
    for i, template in enumerate(rng.sample(_TEMPLATES[task_type], n)):
        o, r = natural_name(obj, rng), natural_name(recep, rng)
        text = template.format(
            a_obj=_article(o), obj=o, objs=_plural(o), recep=r, toggle=r, on="in" if recep in _IN else "on"
        )
        out.append(
            {"assignment_id": f"{ANNOTATION_SOURCE}-{i}", "source": ANNOTATION_SOURCE, "task_desc": text}
        )
    return out


def goal_text(task_type: str, obj: str, recep: str, seed: int, human_anns_prob: float = 0.0) -> str:
    """The game's task: the template, or with ``human_anns_prob`` one annotation (its final period
    dropped, since the grammar adds one), chosen per game as ALFWorld's ``add_task_to_grammar``."""
    if not 0.0 <= human_anns_prob <= 1.0:
        raise ValueError(f"goal_desc_human_anns_prob must be in [0, 1], got {human_anns_prob}")
    rng = random.Random(f"goal-{seed}-{task_type}-{obj}-{recep}")
    if rng.random() < human_anns_prob:
        return rng.choice(annotations(task_type, obj, recep, seed))["task_desc"].rstrip(".")
    return task_text(task_type, obj, recep, seed)
