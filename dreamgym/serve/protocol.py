"""The two AgentGym env protocols (as WooooDyy/AgentGym main serves them) and dreamgym's additions.

WebShop variant (``agentenv-webshop``; env ids are ints, field ``env_idx``)::

    GET  /                                  -> "ok"
    POST /create                            -> 3                  (an env id)
    POST /reset {env_idx, session_id}       -> [observation, null] (session_id: the goal index)
    POST /step  {env_idx, action}           -> {state, reward, done, info}
    GET  /observation?env_idx=3             -> "WebShop [SEP] Instruction: [SEP] ..."
    GET  /available_actions?env_idx=3       -> {has_search_bar, clickables}
    GET  /instruction_text?env_idx=3        -> "i need ..."
    GET  /list_envs                         -> [0, 1, 3]
    POST /close {env_idx}                   -> "ok"               (upstream's client calls it; a PR adds it)

``reward`` is WebShop's raw purchase score (upstream's ``reward``); errors are FastAPI's
``{"detail": msg}`` with a 4xx/5xx status, as upstream (which answers 500 for an unknown id).

ALFWorld variant (``agentenv-alfworld``; field ``id``)::

    GET  /                                  -> "This is environment AlfWorld."
    POST /create                            -> {id}
    POST /reset {id, game, world_type}      -> {id, observation, available_actions, task_type}
    POST /step  {id, action}                -> {observation, reward, available_actions, done}
    GET  /observation?id=, /available_actions?id=, /detail?id=
    POST /close {id}                        -> {id, closed: true}

Errors are HTTP 200 ``{"error": msg}`` (upstream's style); ``world_type`` must be ``"Text"`` (upstream
also names ``"Embody"`` and ``"Hybrid"``, which need the 3D simulator). The reset observation drops
TextWorld's welcome banner and step observations drop a ``"You arrive at loc N. "`` prefix, as upstream
(:func:`alfworld_observation`).

Both variants, dreamgym additions that upstream clients ignore: ``GET /info`` (:func:`server_info`:
variant, env, split, task count and ids) and an ``info`` object on every step (:data:`STEP_INFO_KEYS`:
the exact reward, score and flags of dreamgym's key layout, and the next ``available_actions``), so
:mod:`.client` reproduces an in-process episode exactly and in one request per step. Validation errors
(missing field, wrong type, bad JSON) are 422 with FastAPI's ``detail`` list in both variants, as
upstream (pydantic models); bodies over the size limit get 413, a full server 503.
"""

from __future__ import annotations

from dreamgym.envs.webshop.pages import SEARCH_ACTION

__all__ = [
    "PROTOCOLS",
    "STEP_INFO_KEYS",
    "ALFWORLD_BANNER",
    "WEBSHOP_OK",
    "ALFWORLD_OK",
    "alfworld_observation",
    "clickables_of_actions",
]

PROTOCOLS = ("webshop", "alfworld")
"""Protocol variants; a served env speaks the variant of the env it is (or imitates)."""

WEBSHOP_OK = "ok"
ALFWORLD_OK = "This is environment AlfWorld."
"""What ``GET /`` answers, per variant (upstream's strings)."""

STEP_INFO_KEYS = ("reward", "score", "success", "invalid", "sim_error", "reasoning", "available_actions")
"""Keys of the ``info`` object of a dreamgym server's step response (dreamgym's :class:`TextStep`)."""

ALFWORLD_BANNER = "-= Welcome to TextWorld, ALFRED! =-"


def alfworld_observation(text: str, reset: bool) -> str:
    """An ALFWorld observation as upstream's server sends it.

    Reset: the paragraphs after TextWorld's welcome banner (upstream: ``"\\n".join(ob.split("\\n\\n")[1:])``;
    text without the banner is kept whole). Step: without a leading ``"You arrive at loc N. "``
    (upstream's ``process_ob``).
    """
    if reset:
        head, sep, rest = text.partition("\n\n")
        return "\n".join(rest.split("\n\n")) if sep and head.strip() == ALFWORLD_BANNER else text
    if text.startswith("You arrive at loc "):
        return text[text.find(". ") + 2 :]
    return text


def clickables_of_actions(actions: list[str]) -> dict:
    """Upstream's ``get_available_actions()`` result for dreamgym's WebShop action list: the inverse of
    :func:`dreamgym.envs.webshop.pages.actions_of_clickables` (the search page's clickables are
    ``["search"]``, as upstream)."""
    has_search_bar = SEARCH_ACTION in actions
    clicks = [a[len("click[") : -1] for a in actions if a.startswith("click[") and a.endswith("]")]
    return {"has_search_bar": has_search_bar, "clickables": (["search"] if has_search_bar else []) + clicks}
