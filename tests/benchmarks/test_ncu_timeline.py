"""benchmarks/ncu_timeline.py: one verify pass cut out of an ncu run of hiraishin-replay bench, per kernel family."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ..helpers import load_benchmark

ncu_timeline = load_benchmark("ncu_timeline")

HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


SECTION = ("GPU Speed Of Light Throughput", "Duration", "ns")
METRIC = ("Command line profiler metrics", "gpu__time_duration.sum", "nsecond")


def _csv(kernels: list[tuple[str, str, float]], metric: tuple[str, str, str] = SECTION) -> str:
    """ncu rows, one duration each (ns), with the program's output between them as ncu leaves it; as the
    SpeedOfLight section gives it, or (METRIC) --metrics gpu__time_duration.sum."""
    section, name, unit = metric
    rows = ["==PROF== Connected to process 1", HEADER]
    for launch, (kernel, grid, ns) in enumerate(kernels):
        rows.append(f'"{launch}","1","hiraishin-replay","h","void {kernel}(const void *)","1","7","(32, 4, 1)",'
                    f'"{grid}","0","9.0","{section}","{name}","{unit}","{ns:,.0f}"')
        if launch == 2:
            rows.append("   1      4.172      4.249")
    return "\n".join(rows) + "\n"


def _pass(b: int, expert_ns: float) -> list[tuple[str, str, float]]:
    """One pass of a one-layer MoE model: the embedding lookup, attention, the router, the experts, the output."""
    return [("k_get_rows_float", f"({b}, 1, 1)", 2000), ("rms_norm_f32<256>", f"({b}, 1, 1)", 1500),
            ("mul_mat_vec_q<12, 1>", "(64, 1, 1)", 9000), ("flash_attn_ext_vec<128>", f"({b}, 8, 1)", 6000),
            ("mul_mat_vec_f<float, float, 1>", "(128, 1, 1)", 3000), ("topk_moe_cuda<8>", f"({b}, 1, 1)", 2500),
            ("mul_mat_vec_q<12, 1>", f"(192, 8, {b})", expert_ns), ("mul_mat_vec_q<14, 1>", f"(512, 8, {b})",
                                                                    expert_ns / 2),
            ("mul_mat_vec_q<14, 1>", "(4000, 1, 1)", 20000)]


def _run(b: int, expert_ns: float) -> list[tuple[str, str, float]]:
    """What the run profiles: the warm-up, the prompt (other grids), one plain token, then three timed passes."""
    prompt = [(kernel, grid.replace("(", "(9"), ns * 5) for kernel, grid, ns in _pass(64, 1e5)]
    return [*_pass(16, 1e5), *prompt, *_pass(1, 3e4), *(_pass(b, expert_ns) * 3)]


def _write(tmp_path: Path, name: str, kernels: list[tuple[str, str, float]],
           metric: tuple[str, str, str] = SECTION) -> Path:
    path = tmp_path / name
    path.write_text(_csv(kernels, metric))
    return path


def test_the_last_pass_is_cut_out_and_summed_per_kernel_family(tmp_path: Path) -> None:
    exact = _write(tmp_path, "timeline-qwen3moe-b4-exact.csv", _run(4, 80000))
    stock = _write(tmp_path, "timeline-qwen3moe-b4-stock.csv", _run(4, 50000))
    passes = ncu_timeline.compare([exact, stock])
    assert list(passes) == [4]
    e, s = passes[4]["exact"], passes[4]["stock"]
    assert e["launches"] == s["launches"] == len(_pass(4, 0))
    # the two expert products are one family: 80 + 40 us exact, 50 + 25 stock, plus the attention products
    assert e["families"]["mul_mat_vec_q"] == {"launches": 4, "us": pytest.approx(9 + 80 + 40 + 20)}
    assert s["families"]["mul_mat_vec_q"]["us"] == pytest.approx(9 + 50 + 25 + 20)
    assert list(e["families"])[0] == "mul_mat_vec_q"  # the largest first
    assert e["us"] == pytest.approx(2 + 1.5 + 9 + 6 + 3 + 2.5 + 80 + 40 + 20)


def test_the_table_and_the_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = [_write(tmp_path, f"t-b{b}-{mode}.csv", _run(b, 8e4 if mode == "exact" else 5e4))
             for b in (1, 8) for mode in ("exact", "stock")]
    out = tmp_path / "summary.json"
    assert ncu_timeline.main([*map(str, files), "--out", str(out)]) == 0
    table = capsys.readouterr().out
    assert "b = 1: exact" in table and "b = 8: exact" in table and "topk_moe_cuda" in table
    assert sorted(json.loads(out.read_text())) == ["1", "8"]


def test_a_run_that_does_not_end_in_three_alike_passes_is_refused(tmp_path: Path) -> None:
    """The fault the cut must not hide: passes of different kernels (two batch sizes in one run)."""
    kernels = [*_pass(4, 8e4), *_pass(4, 8e4), *_pass(8, 8e4)]
    path = _write(tmp_path, "t-b8-exact.csv", kernels)
    with pytest.raises(ncu_timeline.ReportError, match="the last 3 passes are not alike"):
        ncu_timeline.compare([path])


def test_a_file_without_batch_size_and_mode_in_its_name_is_refused(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, "timeline.csv", _run(4, 8e4))
    assert ncu_timeline.main([str(path)]) == 2
    assert "does not say its batch size and mode" in capsys.readouterr().err


def test_alike_launches_at_the_end_of_a_pass_are_not_taken_for_a_pass(tmp_path: Path) -> None:
    """Three copies of the logits at the end of every pass repeat thrice too: the pass starts with the lookup."""
    one = [*_pass(4, 8e4), *[("cpy_f32_f32", "(1, 1, 1)", 100)] * 3]
    path = _write(tmp_path, "t-b4-exact.csv", [*_pass(16, 1e5), *(one * 3)])
    assert ncu_timeline.compare([path])[4]["exact"]["launches"] == len(one)


def test_the_duration_metric_alone_reads_as_the_section_does(tmp_path: Path) -> None:
    # perf_session.sh timeline profiles a whole run with --metrics gpu__time_duration.sum (one pass a launch)
    by_metric = ncu_timeline.read_pass(_write(tmp_path, "m-b4-exact.csv", _run(4, 80000), METRIC))
    by_section = ncu_timeline.read_pass(_write(tmp_path, "s-b4-exact.csv", _run(4, 80000)))
    assert by_metric == by_section and by_metric["us"] == pytest.approx(2 + 1.5 + 9 + 6 + 3 + 2.5 + 80 + 40 + 20)
    # an unknown metric gives no duration, which is refused rather than summed as zero
    other = _write(tmp_path, "o-b4-exact.csv", _run(4, 80000), ("Command line profiler metrics", "sm__cycles", "cycle"))
    with pytest.raises(ncu_timeline.ReportError, match="without its duration"):
        ncu_timeline.read_pass(other)
