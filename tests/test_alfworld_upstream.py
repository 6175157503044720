"""Generated game folders through ALFWorld's own loader: ``AlfredTWEnv`` collects them and the stored
walkthroughs win in its TextWorld gym env; the folders hold what ``alfworld-play-tw`` reads."""

import json

import pytest

pytest.importorskip("alfworld", reason="alfworld is not installed")

from dreamgym.envs.alfworld import gen  # noqa: E402
from dreamgym.envs.alfworld.games import MANIFEST, GameSet, load_manifest, save_manifest  # noqa: E402


def _config(data_path: str) -> dict:
    return {
        "dataset": {"data_path": data_path, "eval_ood_data_path": data_path, "num_eval_games": -1},
        "env": {
            "goal_desc_human_anns_prob": 0.0,
            "task_types": [1, 2, 3, 4, 5, 6],
            "domain_randomization": False,
            "expert_type": "handcoded",
        },
        "general": {"training_method": "dagger"},
        "dagger": {"training": {"max_nb_steps_per_episode": 50}},
    }


@pytest.fixture(scope="module")
def game_dir(tmp_path_factory):
    """Two bundled valid_unseen games (a cooling and a pick-two task) written as ALFWorld folders."""
    games = [g for g in load_manifest(MANIFEST)["games"] if g["split"] == "valid_unseen"]
    pick = {}
    for g in sorted(games, key=lambda g: (g["scene"] != 424, g["scene"])):
        if g["task_type"] in ("pick_cool_then_place_in_recep", "pick_two_obj_and_place"):
            pick.setdefault(g["task_type"], g)
    root = tmp_path_factory.mktemp("aw_upstream")
    save_manifest(root / "m.json.gz", list(pick.values()), {"test": True})
    gs = GameSet(manifest=root / "m.json.gz", cache_dir=root / "data")
    return gs, gs.materialize("test")


def test_alfredtwenv_loads_and_wins_generated_games(game_dir):
    from alfworld.agents.environment.alfred_tw_env import AlfredTWEnv

    gs, split_dir = game_dir
    aw = AlfredTWEnv(_config(str(split_dir)), train_eval="eval_out_of_distribution")
    assert sorted(aw.game_files) == sorted(str(gs.game_file(r)) for r in gs.games("test"))
    walks = {str(gs.game_file(r)): r.walkthrough for r in gs.games("test")}
    env = aw.init_env(batch_size=1)
    try:
        for _ in range(len(walks)):
            obs, infos = env.reset()
            walk = walks[infos["extra.gamefile"][0]]
            assert obs[0].rstrip().endswith(".") and "Your task is to: " in obs[0]
            for cmd in walk:
                assert cmd in infos["admissible_commands"][0], cmd
                obs, _, dones, infos = env.step([cmd])
            assert list(infos["won"]) == [True] and list(dones) == [True]
    finally:
        env.close()


def test_folders_hold_what_alfworld_play_tw_reads(game_dir):
    import alfworld.gen.goal_library as glib
    from alfworld.agents.utils.misc import add_task_to_grammar

    gs, _ = game_dir
    for rec in gs.games("test"):
        folder = gs.game_file(rec).parent
        traj = json.loads((folder / "traj_data.json").read_text())
        problem = (folder / "initial_state.pddl").read_text()
        assert problem == json.loads((folder / "game.tw-pddl").read_text())["pddl_problem"]
        grammar = add_task_to_grammar("Your task is to: UNKNOWN GOAL.", traj)  # the script's goal step
        p = rec.params
        templated = {  # ALFWorld draws one of the type's templates with the global random module
            t.format(obj=p.obj.lower(), recep=p.recep.lower(), toggle="", mrecep="")
            for t in glib.gdict[p.task_type]["templates"]
        }
        assert gen.task_text(p) in templated and grammar[len("Your task is to: ") : -1] in templated
