"""Where a result came from: commit and dirty flag of the working tree."""

import subprocess

from dreamgym.lab.provenance import result_meta


def _git(repo, *args):
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_dirty_counts_tracked_changes_except_the_callers_own_outputs(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    (repo / "results").mkdir(parents=True)
    (repo / "code.py").write_text("x = 1\n")
    (repo / "results" / "suite.json").write_text("{}\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    monkeypatch.chdir(repo)
    clean = result_meta("s.py", [])
    assert clean["dirty"] is False and len(clean["commit"]) == 40 and clean["command"] == "python s.py"
    (repo / "untracked.txt").write_text("new\n")  # untracked files never count
    (repo / "results" / "suite.json").write_text('{"runs": {}}\n')  # a stage of the suite wrote it
    assert result_meta("s.py", [], ignore=["results/suite.json"])["dirty"] is False
    assert result_meta("s.py", [])["dirty"] is True
    (repo / "code.py").write_text("x = 2\n")  # the code changed: dirty whatever is ignored
    assert result_meta("s.py", [], ignore=["results/suite.json"])["dirty"] is True


def test_outside_a_git_checkout_the_commit_is_unknown(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    assert result_meta("s.py", ["--a"]) == {"command": "python s.py --a", "commit": "unknown", "dirty": False}
