"""The GitHub Actions workflows and the ci/*.sh scripts their steps run."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest
import yaml

from hiraishin_build import workflows
from hiraishin_build.errors import WorkflowLintFailed, WorkflowsOutOfSync
from hiraishin_build.project import Project
from hiraishin_build.recipe import recipe_paths

from ..helpers import hiraishin

REPO = Path(__file__).resolve().parents[2]
SOURCES = sorted((REPO / "ci" / "workflows").glob("*.yml"))
CI_SCRIPT = re.compile(r"^ci/[a-z0-9-]+\.sh$")


def load(path: Path) -> dict:
    # PyYAML reads the key `on` as True (YAML 1.1); the tests look it up under both.
    return yaml.safe_load(path.read_text())


def jobs_of(path: Path) -> dict[str, dict]:
    return load(path)["jobs"]


def steps_of(path: Path) -> list[tuple[str, dict]]:
    return [(name, step) for name, job in jobs_of(path).items() for step in job.get("steps", [])]


def commands(run: str) -> list[list[str]]:
    """The commands of a run: block, one per line (continuations joined), as words."""
    joined = run.replace("\\\n", " ")
    return [shlex.split(line) for line in joined.splitlines() if line.strip() and not line.strip().startswith("#")]


def test_the_four_workflows_exist() -> None:
    assert [path.name for path in SOURCES] == ["checks.yml", "publish.yml", "upstream-watch.yml", "wheels.yml",
                                               "yank.yml"]


def test_installed_workflows_are_in_sync() -> None:
    workflows.check_sync(Project(REPO))
    for path in SOURCES:
        installed = REPO / ".github" / "workflows" / path.name
        assert installed.read_text() == workflows.header(path.name) + path.read_text()


def test_sync_and_check_on_a_copy(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(REPO / "ci", root / "ci")
    shutil.copytree(REPO / ".github", root / ".github")
    project = Project(root)
    workflows.check_sync(project)
    source = root / "ci" / "workflows" / "checks.yml"
    source.write_text(source.read_text().replace("timeout-minutes: 15", "timeout-minutes: 16"))
    (root / ".github" / "workflows" / "hand-made.yml").write_text("name: x\n")
    with pytest.raises(WorkflowsOutOfSync) as raised:
        workflows.check_sync(project)
    assert ".github/workflows/checks.yml differs from ci/workflows/checks.yml" in str(raised.value)
    assert "hand-made.yml: it has no source in ci/workflows/" in str(raised.value)
    assert raised.value.exit_code == 7
    (root / "ci" / "workflows" / "publish.yml").unlink()
    result = workflows.sync(project)
    assert result.written == ("checks.yml",) and result.removed == ("publish.yml",)
    assert result.foreign == ("hand-made.yml",)
    (root / ".github" / "workflows" / "hand-made.yml").unlink()
    workflows.check_sync(project)


def test_every_script_a_workflow_calls_exists_and_is_executable() -> None:
    called = set()
    for path in SOURCES:
        for _, step in steps_of(path):
            for words in commands(step.get("run", "")):
                if CI_SCRIPT.match(words[0]):
                    called.add(words[0])
    assert {"ci/lint.sh", "ci/unit-tests.sh", "ci/patches-check.sh", "ci/sdist.sh", "ci/matrix.sh",
            "ci/build-wheel.sh", "ci/smoke.sh", "ci/publish-index.sh", "ci/upstream-watch.sh",
            "ci/fetch-published-index.sh", "ci/release-assets.sh"} <= called
    for script in sorted(called):
        path = REPO / script
        assert path.is_file(), f"{script} is called by a workflow but does not exist"
        assert os.access(path, os.X_OK), f"{script} is not executable"


def test_steps_run_only_ci_scripts_or_hiraishin() -> None:
    """So that a person runs any job's steps locally with the same commands."""
    for path in SOURCES:
        for job, step in steps_of(path):
            assert ("run" in step) != ("uses" in step), f"{path.name}/{job}: a step either runs or uses"
            for words in commands(step.get("run", "")):
                assert CI_SCRIPT.match(words[0]) or words[0] == "hiraishin", (
                    f"{path.name}/{job}: step runs {words[0]!r}; steps run ci/*.sh scripts or hiraishin only"
                )
                assert "${{" not in " ".join(words), f"{path.name}/{job}: pass expressions through env:, not run:"


def test_scripts_are_strict_bash() -> None:
    scripts = sorted((REPO / "ci").glob("*.sh"))
    assert scripts
    for script in scripts:
        text = script.read_text()
        if script.name == "common.sh":
            assert "set -euo pipefail" in text and not os.access(script, os.X_OK)
            continue
        assert text.startswith("#!/usr/bin/env bash\n"), script.name
        assert 'source "$(dirname "$0")/common.sh"' in text, f"{script.name} does not source common.sh"
        assert os.access(script, os.X_OK), f"{script.name} is not executable"


def test_no_variant_is_listed_by_hand() -> None:
    """The recipes are named in recipes/ only: the workflows and scripts get them from hiraishin matrix."""
    names = [path.stem for path in recipe_paths(REPO / "recipes")]
    texts = {path: path.read_text() for path in [*SOURCES, *(REPO / "ci").glob("*.sh")]}
    for path, text in texts.items():
        for name in names:
            if name == "cpu":
                continue
            assert name not in text, f"{path.relative_to(REPO)} names the recipe {name}"
    wheel_jobs = jobs_of(REPO / "ci" / "workflows" / "wheels.yml")
    for job in ("wheel", "smoke"):
        assert wheel_jobs[job]["strategy"]["matrix"] == "${{ fromJSON(needs.matrix.outputs.matrix) }}"
    matrix_steps = [step for step in wheel_jobs["matrix"]["steps"] if step.get("run") == "ci/matrix.sh"]
    assert matrix_steps and "hiraishin matrix --format github" in (REPO / "ci" / "matrix.sh").read_text()


def test_least_privilege_permissions_and_concurrency() -> None:
    widened = {}
    for path in SOURCES:
        data = load(path)
        assert data["permissions"] == {"contents": "read"}, f"{path.name}: workflow permissions"
        assert "concurrency" in data or all("concurrency" in job for job in data["jobs"].values()), path.name
        for name, job in data["jobs"].items():
            extra = {key: value for key, value in job.get("permissions", {}).items() if value != "read"}
            if extra:
                widened[f"{path.stem}/{name}"] = extra
    # contents: write only where a release's assets are uploaded (ci/release-assets.sh), and by its caller
    assert widened == {
        "publish/publish": {"contents": "write", "pages": "write", "id-token": "write"},
        "wheels/publish": {"contents": "write", "pages": "write", "id-token": "write"},
        "upstream-watch/watch": {"issues": "write"},
        "yank/yank": {"pages": "write", "id-token": "write"},
    }


def test_publishing_needs_smoke_and_a_tag() -> None:
    wheel_jobs = jobs_of(REPO / "ci" / "workflows" / "wheels.yml")
    assert wheel_jobs["wheel"]["needs"] == ["matrix", "sdist"]
    assert wheel_jobs["smoke"]["needs"] == ["matrix", "wheel"]
    assert wheel_jobs["smoke"]["runs-on"] == "${{ matrix.smoke_runs_on }}"
    publish = wheel_jobs["publish"]
    assert publish["needs"] == "smoke" and publish["if"] == "startsWith(github.ref, 'refs/tags/')"
    assert publish["uses"] == "./.github/workflows/publish.yml"
    published = jobs_of(REPO / "ci" / "workflows" / "publish.yml")["publish"]
    downloads = [step["with"] for step in published["steps"] if "download-artifact" in step.get("uses", "")]
    assert downloads == [{"pattern": "smoked-*", "path": "dist/published", "merge-multiple": True}]
    # The smoked-* artifact is the last step of the smoke job: uploaded only when the smoke test passed.
    last = wheel_jobs["smoke"]["steps"][-1]
    assert last["with"]["name"] == "smoked-${{ matrix.recipe }}" and "if" not in last
    watch = load(REPO / "ci" / "workflows" / "upstream-watch.yml")
    triggers = watch.get("on", watch.get(True))
    assert "schedule" in triggers and "workflow_dispatch" in triggers


def test_actions_are_pinned_to_a_version() -> None:
    for path in SOURCES:
        for job, step in steps_of(path):
            if "uses" in step:
                assert re.match(r"^[\w.-]+/[\w.-]+@(v\d+(\.\d+)*|[0-9a-f]{40})$", step["uses"]), (
                    f"{path.name}/{job}: {step['uses']} is not pinned to a version tag or commit"
                )


def test_actionlint_is_clean_on_every_workflow() -> None:
    result = workflows.lint_installed(Project(REPO))
    assert sorted(Path(f).name for f in result.files) == [path.name for path in SOURCES]
    assert result.clean, "\n".join(str(finding) for finding in result.findings)


def test_actionlint_finds_a_broken_workflow(tmp_path: Path) -> None:
    """Fault injection: the lint is not a no-op."""
    broken = tmp_path / "broken.yml"
    text = (REPO / "ci" / "workflows" / "upstream-watch.yml").read_text()
    broken.write_text(text.replace("runs-on: ubuntu-22.04", "runs-on: ubuntu-22.04\n    needs: no-such-job")
                      .replace("${{ github.token }}", "${{ github.tokn }}"))
    result = workflows.lint([broken], cwd=tmp_path)
    messages = "\n".join(str(finding) for finding in result.findings)
    assert not result.clean
    assert "no-such-job" in messages and "tokn" in messages
    with pytest.raises(WorkflowLintFailed, match="actionlint found 2 problem"):
        workflows.require_clean(result)


def test_check_command_fails_on_a_broken_installed_workflow(tmp_path: Path) -> None:
    root = tmp_path / "project"
    shutil.copytree(REPO / "recipes", root / "recipes")
    shutil.copytree(REPO / "ci", root / "ci")
    source = root / "ci" / "workflows" / "checks.yml"
    source.write_text(source.read_text().replace("runs-on: ubuntu-22.04", "runs-on: ubuntu-22.04\n    if: ${{ github.nope }}", 1))
    synced = hiraishin("workflows", "sync", cwd=root)
    assert synced.returncode == 0, synced.stderr
    checked = hiraishin("workflows", "check", cwd=root)
    assert checked.returncode == 7 and "actionlint found" in checked.stderr and "nope" in checked.stderr
    (root / ".github" / "workflows" / "checks.yml").write_text("name: edited by hand\n")
    checked = hiraishin("workflows", "check", cwd=root)
    assert checked.returncode == 7 and "hiraishin workflows sync" in checked.stderr


def test_ci_builds_no_cpu_wheel_without_the_pinned_upstream_and_says_why(tmp_path: Path) -> None:
    """.ci/run's wheel step on a machine whose tool cache lacks the pin (CI cannot fetch it): it
    builds nothing, hands no wheel to the tests, says why, and does not fail the run."""
    import subprocess

    env = {**os.environ, "HIRAISHIN_CACHE_DIR": str(tmp_path / "no-cache"),
           "HIRAISHIN_CI_CACHE": str(tmp_path / "ci-cache")}
    run = subprocess.run([str(REPO / "ci" / "cpu-wheel.sh")], env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert "HIRAISHIN_CPU_WHEEL=" not in run.stdout
    assert "the CPU wheel is not built: the tool's upstream cache lacks the pin" in run.stderr
    assert not (tmp_path / "ci-cache").exists()


def test_ci_run_hands_the_built_wheel_to_the_readme_test_command() -> None:
    ci_run = (REPO / ".ci" / "run").read_text()
    wheel_step = ci_run.index("ci/cpu-wheel.sh")
    tests = ci_run.index("python3 -m pytest")
    assert wheel_step < ci_run.index("export HIRAISHIN_CPU_WHEEL") < tests
