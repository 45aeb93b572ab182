"""Every path under benchmarks/ that the benchmark scripts and READMEs name exists: a script renamed, moved or
removed cannot leave a command, a comment or a README line pointing at nothing. Recorded results
(benchmarks/results/) keep the commands they were made with, so they are not scanned."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# A path starts at "benchmarks/" (alone, or after $REPO/ or $repo/ in a script) and runs on through name characters,
# globs and placeholders: <name>, {name}, ${name} and $name.
PATH = re.compile(r"(?:(?<=\$REPO/)|(?<=\$repo/)|(?<![\w./$-]))"
                  r"benchmarks/(?:[\w.*/-]|<[^<>\s]*>|\{[^{}\s]*\}|\$\{[^{}\s]*\}|\$\w+)*")
# What stands for any name: the placeholders above, and a word in capitals between separators (fault-NAME.diff).
PLACEHOLDER = re.compile(r"<[^<>\s]*>|\{[^{}\s]*\}|\$\{[^{}\s]*\}|\$\w+|(?<![A-Za-z0-9])[A-Z][A-Z_]*(?![A-Za-z0-9])")


def scanned(root: Path) -> list[Path]:
    bench = root / "benchmarks"
    files = {*bench.glob("**/*.py"), *bench.glob("**/*.sh"), *bench.glob("**/README.md")}
    return sorted(f for f in files if "results" not in f.relative_to(bench).parts)


def named_paths(text: str) -> list[str]:
    """The paths under benchmarks/ that a text names, without the sentence's closing dot."""
    return [match.rstrip(".") for match in PATH.findall(text)]


def missing(root: Path, path: str) -> bool:
    if (root / path).exists():
        return False
    pattern = PLACEHOLDER.sub("*", path)  # a glob or a placeholder must match at least one path
    return "*" not in pattern or not any(root.glob(pattern))


def missing_paths(root: Path) -> list[str]:
    return [f"{page.relative_to(root)}:{n}: {path}"
            for page in scanned(root)
            for n, line in enumerate(page.read_text().splitlines(), 1)
            for path in named_paths(line)
            if missing(root, path)]


def test_every_path_the_benchmark_scripts_and_readmes_name_exists() -> None:
    assert len(scanned(REPO)) > 20
    assert missing_paths(REPO) == []


@pytest.mark.parametrize("text, paths", [
    ('python3 "$REPO/benchmarks/kernel_session_report.py" "$OUT"', ["benchmarks/kernel_session_report.py"]),
    ("applies `benchmarks/faults/fault-NAME.diff` to", ["benchmarks/faults/fault-NAME.diff"]),
    ("Writes ``benchmarks/results/mutation-<module>.json`` per module.", ["benchmarks/results/mutation-<module>.json"]),
    ('f"{args.before}:benchmarks/results/mutation-{args.module}.json"', ["benchmarks/results/mutation-{args.module}.json"]),
    ("see benchmarks/device/README.md.", ["benchmarks/device/README.md"]),
    ("tests/benchmarks/test_paths_named.py and ../benchmarks/x", []),
])
def test_a_path_is_read_whole_with_its_placeholders(text: str, paths: list[str]) -> None:
    assert named_paths(text) == paths


def test_a_broken_path_is_found(tmp_path: Path) -> None:
    bench = tmp_path / "benchmarks"
    (bench / "device").mkdir(parents=True)
    (bench / "faults").mkdir()
    (bench / "faults" / "fault-without-fa.diff").write_text("")
    (bench / "report.py").write_text('"""Reads what benchmarks/device/session.sh leaves."""\n')
    (bench / "device" / "session.sh").write_text(
        "# applies benchmarks/faults/fault-NAME.diff, then runs benchmarks/report.py\n"
        'python3 "$REPO/benchmarks/old_report.py"\n'
        "# VARIANT_DIFF=benchmarks/variants/X.diff\n")
    (bench / "results").mkdir()
    (bench / "results" / "README.md").write_text("made by benchmarks/device/gone.sh (history, not scanned)\n")
    assert missing_paths(tmp_path) == ["benchmarks/device/session.sh:2: benchmarks/old_report.py",
                                       "benchmarks/device/session.sh:3: benchmarks/variants/X.diff"]
    (bench / "old_report.py").write_text("")
    (bench / "variants").mkdir()
    (bench / "variants" / "bi-mma-split-tiles.diff").write_text("")
    assert missing_paths(tmp_path) == []
