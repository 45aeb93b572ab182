"""The generated pages of docs/ cannot drift: `hiraishin docs --check` fails while one differs from what
the click commands and the latest recorded results give, and the pages checked in are current."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from hiraishin_build import docgen
from hiraishin_build.cli import cli
from hiraishin_build.errors import CheckFailed, ConfigError
from hiraishin_build.project import Project

from ..helpers import hiraishin

REPO = Path(__file__).resolve().parents[2]


def test_the_pages_checked_in_are_current() -> None:
    """What CI runs (ci/lint.sh: `hiraishin docs --check`): edit a source, regenerate, commit both."""
    checked = docgen.check(Project(REPO), cli)
    assert [p.name for p in checked] == ["README.md", "commands.md", "cost.md", "guarantee.md", "wheels.md"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of what the pages are made from: recipes/ (the pin, so the CLI finds the project, and the recipes
    the install commands come from), docs/, the results."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "recipes", root / "recipes")
    shutil.copytree(REPO / "docs", root / "docs")
    shutil.copy2(REPO / "README.md", root / "README.md")
    shutil.copytree(REPO / "benchmarks" / "results", root / "benchmarks" / "results",
                    ignore=shutil.ignore_patterns("ncu", "rebase"))
    _copy_speedup_model(root)
    shutil.copy2(REPO / docgen.COVERAGE_DATA, root / docgen.COVERAGE_DATA)
    return root


def _copy_speedup_model(root: Path) -> None:
    """The cost page's speedup table comes from the wheel's model (wheels/hiraishin_llama/speedup.py)."""
    (root / docgen.SPEEDUP_MODULE).parent.mkdir(parents=True)
    shutil.copy2(REPO / docgen.SPEEDUP_MODULE, root / docgen.SPEEDUP_MODULE)


@pytest.mark.parametrize("page, edit", [
    ("cost.md", lambda text: text.replace("| 16 | 7.00 |", "| 16 | 12.00 |")),
    ("commands.md", lambda text: text + "\nA line typed by hand.\n"),
])
def test_a_hand_edited_page_fails_the_check_until_regenerated(project: Path, page: str, edit) -> None:  # type: ignore[no-untyped-def]
    path = project / "docs" / page
    original = path.read_text()
    assert edit(original) != original
    path.write_text(edit(original))

    failed = hiraishin("--project", str(project), "docs", "--check", cwd=project)
    assert failed.returncode == 7, failed.stdout + failed.stderr
    assert f"generated page(s) out of date: docs/{page}" in failed.stderr
    assert "run `hiraishin docs`" in failed.stderr

    written = hiraishin("--project", str(project), "docs", cwd=project)
    assert written.returncode == 0, written.stderr
    assert f"written    docs/{page}" in written.stdout
    assert path.read_text() == original
    passed = hiraishin("--project", str(project), "docs", "--check", cwd=project)
    assert passed.returncode == 0 and "ok: 5 generated page(s) up to date" in passed.stdout


def test_a_missing_page_fails_the_check(project: Path) -> None:
    (project / "docs" / "commands.md").unlink()
    with pytest.raises(CheckFailed, match="docs/commands.md"):
        docgen.check(Project(project), cli)


def test_the_reference_is_what_each_command_prints() -> None:
    page = docgen.commands_page(cli)
    runner = CliRunner()
    for args in (["--help"], ["rebase", "--help"], ["upstream", "fetch", "--help"], ["docs", "--help"]):
        shown = runner.invoke(cli, args, prog_name="hiraishin", terminal_width=docgen.HELP_WIDTH).output
        assert shown.strip() in page, args
    for name, command in cli.commands.items():
        assert f"## hiraishin {name}\n" in page
        for sub in getattr(command, "commands", {}):
            assert f"## hiraishin {name} {sub}\n" in page
    assert "| 14 | `CommandTimedOut`: " in page and "| `HIRAISHIN_BUILD_TIMEOUT` | 6 h |" in page


def bench_report(*, version: str, q4_b16_ms: float, preset: str = "qwen3-8b", quants: tuple[str, ...] = ("Q4_K_M",),
                 depth: int = 512, gpu: str = "NVIDIA H200") -> dict:
    verify = [{"b": b, "exact_ms": 4.0 + b, "stock_ms": 4.0 + b, "floor_ms": 1.5, "ratio": 1.0} for b in range(1, 16)]
    verify.append({"b": 16, "exact_ms": q4_b16_ms, "stock_ms": 8.0, "floor_ms": 1.5, "ratio": q4_b16_ms / 8.0})
    return {"tool": "hiraishin-llama-bench", "version": version, "gpus": [{"name": gpu, "compute_capability": "90"}],
            "config": {"preset": preset, "n_layer": 36, "depth": depth, "reps": 20, "warmup": 5},
            "results": {quant: {"model": {"pass_bytes": 4.27e9}, "copy_bandwidth_gb_per_s": 2730.0,
                                "verify": verify, "plain_tokens_per_s": {"exact": 250.0, "stock": 251.0}}
                        for quant in quants}}


def bench_record(name: str, *, revision: int | None, version: str, recorded: str, q4_b16_ms: float,
                 preset: str = "qwen3-8b", quants: tuple[str, ...] = ("Q4_K_M",)) -> dict:
    record = {"name": name, "recorded": recorded, "device": "NVIDIA H200", "command": "hiraishin-llama-bench",
              "raw": {"bench.json": bench_report(version=version, q4_b16_ms=q4_b16_ms, preset=preset, quants=quants)}}
    if revision is not None:
        record["stack_revision"] = str(revision)
    return record


def test_the_cost_page_follows_the_highest_stack_revision_and_names_its_file(tmp_path: Path) -> None:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)

    def add(name: str, **kwargs) -> None:  # type: ignore[no-untyped-def]
        (results / f"{name}.json").write_text(json.dumps(bench_record(name, **kwargs)))

    # Without "stack_revision" the revision is read from the reports' versions (9079.6 -> 6).
    add("bench-old", revision=None, version="9079.6", recorded="2026-11-30T00:00:00+00:00", q4_b16_ms=18.3)
    add("bench-new", revision=8, version="10400.8+cu13.sm90", recorded="2026-12-02T00:00:00+00:00", q4_b16_ms=9.6)
    add("bench-older-but-later", revision=7, version="10354.7", recorded="2026-12-05T00:00:00+00:00", q4_b16_ms=20.0)
    with pytest.raises(ConfigError, match="speedup.py"):
        docgen.cost_page(tmp_path)
    _copy_speedup_model(tmp_path)
    page = docgen.cost_page(tmp_path)
    assert "## NVIDIA H200 (sm_90), stack revision 8" in page
    assert "| 16 | 9.60 | 8.00 | **1.20** |" in page
    assert "`benchmarks/results/bench-new.json`, stack revision 8" in page
    assert "bench-old" not in page and "bench-older-but-later" not in page
    assert "18.30" not in page and "20.00" not in page
    # Every bullet with a number names its file and revision.
    for line in page.splitlines():
        if line.startswith("- Q4_K_M"):
            assert line.endswith("(`benchmarks/results/bench-new.json`, stack revision 8).")
    # The end-to-end table: at 90% acceptance and 2% drafts stock's passes (4 + b, b = 16: 8 ms) favour 15
    # drafts, the exact ones (b = 16: 9.6 ms) too, a little slower.
    exact = (1 - 0.9 ** 16) / 0.1 * 5.0 / (15 * 0.02 * 5.0 + 9.6)
    stock = (1 - 0.9 ** 16) / 0.1 * 5.0 / (15 * 0.02 * 5.0 + 8.0)
    assert f"| Q4_K_M | 0.9 | 2% | {exact:.2f}x | 15 | {stock:.2f}x | 15 | **{exact / stock:.2f}** |" in page
    assert docgen.latest_bench_records(results)[0].name == "bench-new"
    assert {r.name: r.revision for r in docgen.bench_records(results)}["bench-old"] == 6
    assert "(stack revision 8 on upstream build 10400)" in page


def test_the_cost_page_follows_the_newest_base_at_one_stack_revision(tmp_path: Path) -> None:
    """A rebase keeps the stack revision and moves the build: the page describes the new base alone."""
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for name, version, recorded, ms in [("bench-new-base", "10400.13+cu13.sm90", "2026-12-01T00:00:00+00:00", 11.8),
                                        ("bench-old-base", "10354.13+cu13.sm90", "2026-12-03T00:00:00+00:00", 11.6)]:
        (results / f"{name}.json").write_text(json.dumps(bench_record(name, revision=13, version=version,
                                                                      recorded=recorded, q4_b16_ms=ms)))
    _copy_speedup_model(tmp_path)
    assert [r.name for r in docgen.latest_bench_records(results)] == ["bench-new-base"]
    page = docgen.cost_page(tmp_path)
    assert "bench-new-base" in page and "bench-old-base" not in page
    assert "(stack revision 13 on upstream build 10400)" in page


def test_a_model_keeps_its_own_latest_measurement_when_a_revision_measures_only_others(tmp_path: Path) -> None:
    """A revision that changed only the mixture-of-experts path is benched on the MoE models: the dense model's
    section stays that of its own newest record, and each section names its revision and model."""
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for name, revision, preset, ms in [("bench-dense-14", 14, "qwen3-8b", 7.0), ("bench-dense-13", 13, "qwen3-8b", 9.9),
                                       ("bench-moe-17", 17, "qwen3moe", 17.4), ("bench-moe-16", 16, "qwen3moe", 30.0)]:
        (results / f"{name}.json").write_text(json.dumps(bench_record(
            name, revision=revision, version=f"10400.{revision}+cu13.sm90", recorded="2026-12-02T00:00:00+00:00",
            q4_b16_ms=ms, preset=preset)))
    _copy_speedup_model(tmp_path)
    assert [r.name for r in docgen.latest_bench_records(results)] == ["bench-dense-14", "bench-moe-17"]
    page = docgen.cost_page(tmp_path)
    assert "## NVIDIA H200 (sm_90), stack revision 14\n" in page
    assert "## NVIDIA H200 (sm_90), stack revision 17, qwen3moe\n" in page
    assert "| 16 | 7.00 | 8.00 | **0.88** |" in page and "| 16 | 17.40 | 8.00 | **2.17** |" in page
    assert "bench-dense-13" not in page and "bench-moe-16" not in page
    assert "(stack revision 14 for qwen3-8b; 17 for qwen3moe; on upstream build 10400)" in page


def test_the_cost_page_of_this_repository_is_revision_14_and_20_on_b10018_on_the_h200() -> None:
    page = (REPO / "docs" / "cost.md").read_text()
    assert "`benchmarks/results/bench-verify-cost-h200-rev14-b10018-1.2.0.json`, stack revision 14" in page
    assert "- Q4_K_M: exact/stock 0.52-0.90 at b = 2..16" in page
    assert "- Q6_K: exact/stock 0.67-1.00 at b = 2..16" in page
    # revision 20 benched the other weight types; Q8_0's figures are its own, not revision 14's
    assert "## NVIDIA H200 (sm_90), stack revision 20\n" in page
    assert "- Q8_0: exact/stock 1.00-1.10 at b = 2..8, 1.02-1.36 at b = 9..16 (`benchmarks/results/" \
           "bench-verify-cost-h200-rev20-types.json`, stack revision 20)" in page
    assert "| b | Q4_K_M exact | stock | exact/stock | Q6_K exact | stock | exact/stock |\n" in page
    assert "plain one-token decoding 315 tokens/s exact, 250 stock" in page
    # end to end, speculative tokens per second exact over stock: at 90% acceptance and 2% drafts
    assert "| Q4_K_M | 0.9 | 2% | 3.21x | 15 | 3.49x | 15 | **1.16** |" in page
    # The previous revision is named only as what this one is compared with.
    before, after = page.split("Against the previous measurement")
    assert "rev13" not in before and "`benchmarks/results/bench-verify-cost-h200-rev13-b10018-1.2.0.json`" in after


def test_the_cost_page_of_this_repository_has_the_full_depth_moe_models_of_revision_22() -> None:
    page = (REPO / "docs" / "cost.md").read_text()
    assert "## NVIDIA H200 (sm_90), stack revision 22, qwen3moe" in page
    assert "## NVIDIA H200 (sm_90), stack revision 22, gpt-oss" in page
    assert "| 8 | 8.04 | 9.71 | **0.83** |" in page  # qwen3moe, 48 layers
    assert "| 8 | 8.03 | 8.27 | **0.97** |" in page  # gpt-oss, 24 layers
    assert "| MXFP4_MOE | self | 290.5 | 100% | 3/3 | 187.7 | 70% | 0/3 |" in page
    # the newest measurement per model only: revision 18's MoE tables gave way to revision 22's
    assert "stack revision 18, qwen3moe" not in page


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercased, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_link_between_the_pages_resolves() -> None:
    pages = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
    for page in pages:
        text = page.read_text()
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"^[a-z]+://", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            assert linked.is_file(), f"{page.name}: {target}"
            if anchor:
                headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.MULTILINE)
                assert anchor in {_slug(h) for h in headings}, f"{page.name}: {target}"


def test_the_readme_is_short_and_keeps_the_two_commands_ci_runs() -> None:
    readme = (REPO / "README.md").read_text()
    assert len(readme.encode()) < 10_000
    main_job = "python3 -m pip install . && hiraishin build"
    tests = "python3 -m pip install -e '.[test]' && python3 -m pytest"
    assert main_job in readme.splitlines() and tests in readme.splitlines()
    assert tests in (REPO / ".ci" / "run").read_text().splitlines()
    for page in ("guarantee", "cost", "wheels", "maintainers", "ci", "commands", "log"):
        assert f"(docs/{page}.md)" in readme
    # a user's page: what holds now, not the history of how it came to hold
    assert not re.search(r"\brevisions?\b", readme, re.IGNORECASE)


# --- the guarantee's weight-type table -------------------------------------------------------------------------


def _coverage(root: Path) -> dict:
    return json.loads((root / docgen.COVERAGE_DATA).read_text())


def _table_row(page: str, type_name: str) -> list[str]:
    row, = [line for line in page.splitlines() if line.startswith(f"| {type_name} |")]
    return [cell.strip() for cell in row.strip("|").split("|")][1:]


def test_the_guarantee_s_weight_types_come_from_the_coverage_data(project: Path) -> None:
    page = docgen.guarantee_page(project)
    header, = [line for line in page.splitlines() if line.startswith("| type |")]
    assert header == "| type | CUDA dense | CUDA experts | CPU dense | CPU experts |"
    assert _table_row(page, "Q4_K")[:2] == ["yes", "yes"]  # the smoke runs a Q4_K_M model on CUDA
    assert _table_row(page, "IQ4_XS")[0] == "yes"  # and an IQ4_XS model since revision 19
    assert _table_row(page, "IQ4_NL")[0] == "op tests"
    assert _table_row(page, "F16")[0] == "op tests"  # on mmf's order since revision 24, no F16 model replayed
    cuda_tq2 = _table_row(page, "TQ2_0")[0]
    number = int(re.fullmatch(r"no \((\d+)\)", cuda_tq2)[1])
    reason = _coverage(project)["backends"]["cuda"]["dense"]["types"]["TQ2_0"]["reason"]
    assert f"\n{number}. {reason}\n" in page
    # every type any table names has a row, and the hand-written rest of the page is kept
    names = {name for backend in _coverage(project)["backends"].values() for kind in ("dense", "experts")
             for name in backend[kind]["types"]}
    assert {line.split("|")[1].strip() for line in page.splitlines() if re.match(r"\| [A-Z0-9_]+ \|", line)} == names
    assert page.startswith("# The guarantee, and how to check it")


def test_an_edit_of_the_coverage_data_makes_the_guarantee_stale(project: Path) -> None:
    """The fault the check exists for: coverage.json says TQ2_0 is covered on CUDA, the page still says not."""
    data = _coverage(project)
    data["backends"]["cuda"]["dense"]["types"]["TQ2_0"] = {"covered": True, "evidence": ["x.json"]}
    (project / docgen.COVERAGE_DATA).write_text(json.dumps(data))
    with pytest.raises(CheckFailed, match="docs/guarantee.md"):
        docgen.check(Project(project), cli)
    docgen.write(Project(project), cli)
    assert _table_row((project / "docs" / "guarantee.md").read_text(), "TQ2_0")[0] == "op tests"


def test_a_guarantee_page_without_the_markers_is_refused(project: Path) -> None:
    path = project / "docs" / "guarantee.md"
    path.write_text(path.read_text().replace(docgen.TYPES_END, ""))
    with pytest.raises(ConfigError, match="lacks the weight-type markers"):
        docgen.guarantee_page(project)


def test_unreadable_coverage_data_names_the_file(project: Path) -> None:
    (project / docgen.COVERAGE_DATA).write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read the coverage data .*coverage.json"):
        docgen.guarantee_page(project)


def test_a_weight_type_keeps_its_own_latest_measurement_when_a_revision_benches_other_types(tmp_path: Path) -> None:
    """A revision benched on other weight types of the same model: each type's figures are those of the newest
    record that measured it, so the older record keeps the types the newer one did not measure, and a type both
    measured is shown once, from the newer."""
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    for name, revision, quants, ms in [("bench-14", 14, ("Q4_K_M", "Q8_0"), 7.0), ("bench-20", 20, ("Q8_0", "IQ4_XS"), 11.0),
                                       ("bench-13", 13, ("Q4_K_M",), 9.9)]:
        (results / f"{name}.json").write_text(json.dumps(bench_record(
            name, revision=revision, version=f"10400.{revision}+cu13.sm90", recorded="2026-12-02T00:00:00+00:00",
            q4_b16_ms=ms, quants=quants)))
    _copy_speedup_model(tmp_path)
    records = docgen.bench_records(results)
    assert docgen.latest_quants(records) == {"bench-13": [], "bench-14": ["Q4_K_M"], "bench-20": ["Q8_0", "IQ4_XS"]}
    assert [r.name for r in docgen.latest_bench_records(results)] == ["bench-14", "bench-20"]
    page = docgen.cost_page(tmp_path)
    assert "| b | Q4_K_M exact | stock | exact/stock |\n" in page
    assert "| b | Q8_0 exact | stock | exact/stock | IQ4_XS exact | stock | exact/stock |\n" in page
    assert page.count("Q8_0 exact") == 1 and "bench-13" not in page


def test_a_record_benched_at_two_depths_shows_each_and_says_what_the_longer_context_costs(tmp_path: Path) -> None:
    """Attention's share of a pass grows with the context: a record with reports at KV position 512 and 4096
    becomes two sections, each with its own numbers, and the deeper one is not taken for the other's type; an
    older record at 512 is no longer shown, one at 4096 is replaced by the deeper report alone."""
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    record = {"name": "bench-31", "recorded": "2026-12-05T00:00:00+00:00", "device": "NVIDIA H100", "command": "bench",
              "raw": {"d512.json": bench_report(version="10400.31+cu13.sm90", q4_b16_ms=7.2),
                      "d4096.json": bench_report(version="10400.31+cu13.sm90", q4_b16_ms=11.5, depth=4096)}}
    (results / "bench-31.json").write_text(json.dumps(record))
    (results / "bench-14.json").write_text(json.dumps(bench_record(
        "bench-14", revision=14, version="10400.14+cu13.sm90", recorded="2026-12-01T00:00:00+00:00", q4_b16_ms=7.0)))
    _copy_speedup_model(tmp_path)
    records = docgen.bench_records(results)
    assert sorted((r.name, r.depth) for r in records) == [("bench-14", 512), ("bench-31", 512), ("bench-31@4096", 4096)]
    assert [r.name for r in docgen.latest_bench_records(results)] == ["bench-31", "bench-31@4096"]
    page = docgen.cost_page(tmp_path)
    assert "## NVIDIA H200 (sm_90), stack revision 31\n" in page
    assert "## NVIDIA H200 (sm_90), stack revision 31, KV position 4096\n" in page
    assert "| 16 | 7.20 | 8.00 | **0.90** |" in page and "| 16 | 11.50 | 8.00 | **1.44** |" in page
    assert "one verify pass of b tokens at KV position 4096" in page
    assert "bench-14" not in page
    assert "## Long contexts" in page
    assert ("At KV position 4096 (Q4_K_M, `benchmarks/results/bench-31.json`, stack revision 31) exact passes cost "
            "more than stock's at b = 16, up to 1.44x, where at KV position 512 of the same run they cost 0.90x.") in page


def test_a_newer_revision_benched_on_another_gpu_does_not_replace_the_older_one(tmp_path: Path) -> None:
    """Timings compare on one device only: revision 31 on an H100 is shown beside revision 14 on the H200, each
    under its own heading, not in its place."""
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "bench-14.json").write_text(json.dumps(bench_record(
        "bench-14", revision=14, version="10400.14+cu13.sm90", recorded="2026-12-01T00:00:00+00:00", q4_b16_ms=7.0)))
    (results / "bench-31-h100.json").write_text(json.dumps({
        "name": "bench-31-h100", "recorded": "2026-12-05T00:00:00+00:00", "device": "an H100", "command": "bench",
        "raw": {"bench.json": bench_report(version="10400.31+cu13.sm90", q4_b16_ms=7.4, gpu="NVIDIA H100 80GB HBM3")}}))
    # a device measured only on an older base is left to log.md
    (results / "bench-6-old-base.json").write_text(json.dumps({
        "name": "bench-6-old-base", "recorded": "2026-11-30T00:00:00+00:00", "device": "a CPU", "command": "bench",
        "raw": {"bench.json": bench_report(version="9079.6+cpu", q4_b16_ms=60.0, gpu="")}}))
    _copy_speedup_model(tmp_path)
    assert [r.name for r in docgen.latest_bench_records(results)] == ["bench-14", "bench-31-h100"]
    page = docgen.cost_page(tmp_path)
    assert "## NVIDIA H200 (sm_90), stack revision 14\n" in page and "| 16 | 7.00 | 8.00 | **0.88** |" in page
    assert "## NVIDIA H100 80GB HBM3 (sm_90), stack revision 31\n" in page and "| 16 | 7.40 | 8.00 | **0.93** |" in page


def test_without_a_deeper_record_the_long_context_section_is_left_out(tmp_path: Path) -> None:
    results = tmp_path / "benchmarks" / "results"
    results.mkdir(parents=True)
    (results / "bench-14.json").write_text(json.dumps(bench_record(
        "bench-14", revision=14, version="10400.14+cu13.sm90", recorded="2026-12-01T00:00:00+00:00", q4_b16_ms=9.0)))
    _copy_speedup_model(tmp_path)
    assert "## Long contexts" not in docgen.cost_page(tmp_path)


def _llama_bench_record(name: str, revision: int, pp_on: float, pp_off: float) -> dict:
    def run(switch: str, pp: float) -> dict:
        return {"tool": "llama-bench (the wheel's)", "switch": switch,
                "rows": [{"model_filename": "/m/q8b-L2-Q8_0.gguf", "n_prompt": 512, "n_gen": 0, "avg_ts": pp},
                         {"model_filename": "/m/q8b-L2-Q8_0.gguf", "n_prompt": 0, "n_gen": 64, "avg_ts": 50.0}]}
    return {"name": name, "device": "a CPU", "stack_revision": str(revision),
            "raw": {"a.json": run("sw1", pp_on), "b.json": run("sw0", pp_off)}}


def test_the_cpu_prompt_cost_comes_from_the_highest_revision_whatever_follows_its_number(tmp_path: Path) -> None:
    """Only PREFIX-revN records count: rev24-ubatch16 is not revision 2416, and a variant of the same revision
    (-dev-build) is not the revision's record."""
    (tmp_path / "cpu-prompt-cost-rev24-ubatch16.json").write_text(
        json.dumps(_llama_bench_record("cpu-prompt-cost-rev24-ubatch16", 24, 100.0, 100.0)))
    (tmp_path / "cpu-prompt-cost-rev27.json").write_text(
        json.dumps(_llama_bench_record("cpu-prompt-cost-rev27", 27, 185.0, 370.0)))
    (tmp_path / "cpu-prompt-cost-rev27-dev-build.json").write_text(
        json.dumps(_llama_bench_record("cpu-prompt-cost-rev27-dev-build", 27, 1.0, 1.0)))
    text = "\n".join(docgen._cpu_prompt_cost_section(tmp_path))
    assert "From stack revision 27" in text and "`benchmarks/results/cpu-prompt-cost-rev27.json`" in text
    assert "| q8b-L2-Q8_0.gguf | pp512: 185.0 / 370.0 | 0.50x | tg64: 50.0 / 50.0 |" in text


def test_without_a_cpu_prompt_cost_record_the_section_is_left_out(tmp_path: Path) -> None:
    assert docgen._cpu_prompt_cost_section(tmp_path) == []


def test_from_the_batched_kernels_revision_the_section_says_what_stays_batched_and_what_it_cost_before(
        tmp_path: Path) -> None:
    (tmp_path / "cpu-prompt-cost-rev27.json").write_text(
        json.dumps(_llama_bench_record("cpu-prompt-cost-rev27", 27, 185.0, 370.0)))
    (tmp_path / "cpu-prompt-cost-rev30.json").write_text(
        json.dumps(_llama_bench_record("cpu-prompt-cost-rev30", 30, 360.0, 370.0)))
    text = "\n".join(docgen._cpu_prompt_cost_section(tmp_path))
    assert "Revisions 27 to 29 took the one-token path at every size" in text
    assert "q8b-L2-Q8_0.gguf 0.50x, `benchmarks/results/cpu-prompt-cost-rev27.json`" in text
    assert "From revision 30 the batched kernels stay" in text
    assert "`benchmarks/results/cpu-prompt-cost-rev30.json`" in text
    assert "| q8b-L2-Q8_0.gguf | pp512: 360.0 / 370.0 | 0.97x | tg64: 50.0 / 50.0 |" in text
    assert "one-row paths that sum in the order of the repacked gemm" not in text


def test_a_batched_kernels_record_without_an_earlier_one_leaves_the_earlier_cost_out(tmp_path: Path) -> None:
    (tmp_path / "cpu-prompt-cost-rev30.json").write_text(
        json.dumps(_llama_bench_record("cpu-prompt-cost-rev30", 30, 360.0, 370.0)))
    text = "\n".join(docgen._cpu_prompt_cost_section(tmp_path))
    assert "Revisions" not in text and "From revision 30 the batched kernels stay" in text


# --- the scope tables of the README and the guarantee -----------------------------------------------------------


def test_the_readme_s_coverage_table_comes_from_the_coverage_data(project: Path) -> None:
    data = _coverage(project)
    data["architectures"]["qwen2"] = {"covered": True, "evidence": ["benchmarks/results/smoke-cpu-rev30.json"]}
    (project / docgen.COVERAGE_DATA).write_text(json.dumps(data))
    page = docgen.readme_page(project)
    assert "| `qwen2` | not measured | yes |" in page  # a CPU run only: no CUDA claim
    assert "| `qwen3` | yes | yes |" in page
    assert "| several server slots with drafts | no | yes |" in page


def test_the_guarantee_s_scope_links_each_claim_to_its_run_and_numbers_each_reason(project: Path) -> None:
    page = docgen.guarantee_page(project)
    row, = [line for line in page.splitlines() if line.startswith("| several server slots with drafts |")]
    cuda, cpu = [cell.strip() for cell in row.strip("|").split("|")][1:]
    assert cuda.startswith("no (") and cpu == "yes: [1](../benchmarks/results/server-slots-cpu-rev27.json)"
    number = int(cuda[len("no ("):-1])
    assert f"{number}. one slot: the server forces one slot" in page
    # every results file a scope entry names is listed among the measurements, with its device
    assert "| [smoke-h200-rev14-b10018-1.2.0.json](../benchmarks/results/smoke-h200-rev14-b10018-1.2.0.json) | " \
           "NVIDIA H200" in page


def test_a_readme_without_the_coverage_markers_is_refused(project: Path) -> None:
    readme = project / "README.md"
    readme.write_text(readme.read_text().replace("<!-- END coverage -->", ""))
    with pytest.raises(ConfigError, match="lacks the coverage markers"):
        docgen.readme_page(project)


# --- the install commands of README.md, wheels.md and guarantee.md ----------------------------------------------


def _install_block(page: str) -> list[str]:
    begin, end = page.index(docgen.INSTALL_COMMANDS.begin), page.index(docgen.INSTALL_COMMANDS.end)
    return [line for line in page[begin:end].splitlines() if line.startswith("pip install ")]


def test_the_install_commands_are_the_front_page_s_form_for_each_recipe(project: Path) -> None:
    wheels = _install_block(docgen.wheels_page(project))
    assert len(wheels) == len(list((project / "recipes").glob("c*.toml")))  # every recipe, cpu included
    assert wheels[0] == ("pip install 'hiraishin-llama[cu13]' --index-url https://OWNER.github.io/REPO/cu13-sm86/simple "
                         "--extra-index-url https://pypi.org/simple")
    assert wheels[-1] == ("pip install hiraishin-llama --index-url https://OWNER.github.io/REPO/cpu/simple "
                          "--extra-index-url https://pypi.org/simple")
    readme = _install_block(docgen.readme_page(project))
    assert set(readme) <= set(wheels)  # the same command for a variant on every page
    assert [re.search(r"REPO/([^/]+)/simple", line)[1] for line in readme] == list(docgen.README_INSTALL_VARIANTS)
    assert len(_install_block(docgen.guarantee_page(project))) == 1


def test_a_hand_edited_install_command_or_a_new_recipe_makes_the_pages_stale(project: Path) -> None:
    """The faults the generated commands exist for: the README's command typed back in its old form (no
    --extra-index-url, pip finds no numpy), and a recipe added without its command on wheels.md."""
    readme = project / "README.md"
    readme.write_text(readme.read_text().replace(" --extra-index-url https://pypi.org/simple", "", 1))
    with pytest.raises(CheckFailed, match="README.md"):
        docgen.check(Project(project), cli)
    docgen.write(Project(project), cli)
    assert all(line.endswith("--extra-index-url https://pypi.org/simple")
               for line in _install_block(readme.read_text()))
    (project / "recipes" / "cu12-sm80.toml").write_text(
        'description = "CUDA 12, compute capability 8.0"\nbackend = "cuda"\ncuda = 12\n'
        'architectures = ["80-real"]\nextra = "cu12"\nsize-budget-mb = 150\n')
    with pytest.raises(CheckFailed, match="docs/wheels.md"):
        docgen.check(Project(project), cli)
    docgen.write(Project(project), cli)
    assert ("pip install 'hiraishin-llama[cu12]' --index-url https://OWNER.github.io/REPO/cu12-sm80/simple "
            "--extra-index-url https://pypi.org/simple") in _install_block(
        (project / "docs" / "wheels.md").read_text())


def test_a_page_showing_a_variant_no_recipe_builds_is_refused(project: Path) -> None:
    (project / "recipes" / "cu12-sm89.toml").unlink()
    with pytest.raises(ConfigError, match="install command of cu12-sm89, which recipes/ does not have"):
        docgen.readme_page(project)


def test_a_wheels_page_without_the_install_markers_is_refused(project: Path) -> None:
    path = project / "docs" / "wheels.md"
    path.write_text(path.read_text().replace(docgen.INSTALL_COMMANDS.end, ""))
    with pytest.raises(ConfigError, match="lacks the install commands markers"):
        docgen.wheels_page(project)
