"""Every registered env must pass TorchRL's check_env_specs (a new env cannot skip it)."""

import subprocess
import sys

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


def test_the_registry_is_the_one_table_of_envs():
    import dreamgym.envs as envs
    from dreamgym.envs.registry import env_factory, exported_env_classes, imitable_envs
    from dreamgym.envs.synthetic import SyntheticEnv

    assert imitable_envs() == ["alfworld", "web", "webshop"]  # what a synthetic env may imitate
    with pytest.raises(ValueError, match=r"\['alfworld', 'web', 'webshop'\] or 'module:Class'"):
        SyntheticEnv(real_env="probe_choice")  # registered, but not an env to imitate
    exported = exported_env_classes()
    assert {"WebShopEnv", "ALFWorldEnv", "WebEnv", "SyntheticEnv"} <= set(exported) <= set(envs.__all__)
    assert envs.WebShopEnv is env_factory("webshop") and envs.SyntheticEnv is env_factory("synthetic")
    with pytest.raises(AttributeError, match="no attribute 'NoSuchEnv'"):
        envs.NoSuchEnv  # noqa: B018


def test_importing_the_envs_package_imports_no_env_until_asked():
    code = (
        "import sys, dreamgym.envs\n"
        "from dreamgym.envs import WebShopEnv\n"
        "print(sorted(m for m in sys.modules if m in ('dreamgym.envs.alfworld.env', 'dreamgym.envs.web.env',"
        " 'dreamgym.envs.synthetic', 'textworld')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
