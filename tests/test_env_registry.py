"""Every registered env must pass TorchRL's check_env_specs (a new env cannot skip it)."""

import pytest
from torchrl.envs.utils import check_env_specs

from dreamgym.envs import make_env, registered_envs


@pytest.mark.parametrize("name", registered_envs())
def test_registered_env_passes_check_env_specs(name):
    try:
        env = make_env(name, batch_size=[2])
    except ImportError as e:  # an optional dependency (e.g. textworld for alfworld) is missing
        pytest.skip(f"env {name!r} needs an optional dependency that is not installed: {e}")
    except TypeError as e:  # an env that cannot be built from defaults alone (e.g. needs a trained model)
        pytest.skip(f"env {name!r} cannot be built with defaults only: {e}")
    check_env_specs(env)


def test_unknown_env_lists_registered():
    with pytest.raises(KeyError, match="registered envs are"):
        make_env("no-such-env")
