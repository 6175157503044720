"""The headline benchmark suite (:mod:`dreamgym.lab.benchmark.suite`) and its report (:mod:`.report`)."""

from dreamgym.lab.benchmark.suite import Arm, ExperienceVariant, SuiteConfig, load_results, run_suite

__all__ = ["Arm", "ExperienceVariant", "SuiteConfig", "load_results", "run_suite"]
