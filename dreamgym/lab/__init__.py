"""The lab: the experiments run on the library, which the library never imports.

- :mod:`.pipeline` and :mod:`.stages`: the main job (``python -m dreamgym pipeline``), resumable stage
  by stage; :mod:`.summary` its printed comparison;
- :mod:`.benchmark`: the headline suite (``python -m dreamgym benchmark``) and its report;
- :mod:`.plots`: their figures (matplotlib, the ``plots`` extra: ``pip install 'dreamgym[plots]'``);
- :mod:`.provenance`: the command, commit and host written beside every result file (also used by
  ``scripts/``).

Only the command table of :mod:`dreamgym.cli` (the entry point above both) names these modules;
``tests/test_structure.py`` fails when a library module imports one.
"""
