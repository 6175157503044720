"""The headline benchmark suite (:mod:`dreamgym.benchmark.suite`) and its report (:mod:`.report`)."""

from dreamgym.benchmark.suite import Arm, ExperienceVariant, SuiteConfig, load_results, run_suite

__all__ = ["Arm", "ExperienceVariant", "SuiteConfig", "load_results", "run_suite"]
