"""hiraishin-llama-coverage: what it says of a model is what coverage.json says of the model's
architecture and weight types, per backend of the wheel; bad input is one line and exit status 2.

The models are synthetic GGUFs written here: a header and tensor table with chosen types, the data
section sparse (the file has its full size on paper and occupies almost no disk).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable
from pathlib import Path

import gguf
import numpy as np
import pytest

from hiraishin_llama import coverage, runtime, synthetic

REPO = Path(__file__).resolve().parents[2]
Q = gguf.GGMLQuantizationType
STACK = {"exact_backends": ["cpu", "cuda"], "exact_moe_backends": ["cpu", "cuda"],
         "exact_moe_experts_on_cpu_backends": [], "exact_hybrid_backends": ["cpu", "cuda"], "patched_commit": "0" * 40}
WHEELS = {"cu13-sm90": {**STACK, "recipe": "cu13-sm90", "cuda_architectures": "90-real;90-virtual"},
          "cpu": {**STACK, "recipe": "cpu", "cuda_architectures": ""}}

N_EMBD, N_FF, N_VOCAB, N_EXPERT = 256, 512, 1024, 8
Tensor = tuple[str, tuple[int, ...], int]
"""A tensor to write: name, numpy shape (rows last: the row length is the last entry), type id."""


@pytest.fixture(autouse=True)
def cuda_wheel(monkeypatch: pytest.MonkeyPatch) -> dict:
    """A CUDA wheel of a stack that claims both backends exact, MoE models included (as revision 15)."""
    build = dict(WHEELS["cu13-sm90"])
    monkeypatch.setattr(runtime, "build_info", lambda: build)
    return build


def use_wheel(monkeypatch: pytest.MonkeyPatch, build: dict) -> None:
    monkeypatch.setattr(runtime, "build_info", lambda: build)


def _nbytes(shape: tuple[int, ...], type_id: int) -> int:
    if type_id in (45, 46, 47):  # this fork's TQ3_1S, TQ4_1S, Q2_0, which the gguf package may not know
        block = coverage.load_coverage().fork_types[type_id].block
    else:
        block = gguf.GGML_QUANT_SIZES[Q(type_id)]
    assert block is not None and shape[-1] % block[0] == 0, (shape, type_id)
    return int(np.prod(shape)) // block[0] * block[1]


def write_gguf(path: Path, architecture: str, tensors: Iterable[Tensor], *, n_layer: int = 2,
               keys: dict[str, object] | None = None, n_expert: int = 0, n_expert_used: int = 0,
               vocab: int = 0, alignment: int = 0) -> Path:
    """A GGUF with these tensors and a sparse data section of their full size."""
    writer = gguf.GGUFWriter(path, architecture)
    if alignment:
        writer.add_custom_alignment(alignment)
    writer.add_block_count(n_layer)
    writer.add_embedding_length(N_EMBD)
    if n_expert:
        writer.add_expert_count(n_expert)
        writer.add_expert_used_count(n_expert_used)
    if vocab:
        writer.add_token_list([f"t{i}" for i in range(vocab)])
        writer.add_token_merges([f"a{i} b{i}" for i in range(vocab)])
    for key, value in (keys or {}).items():
        if isinstance(value, str):
            writer.add_string(key, value)
        else:
            writer.add_uint32(key, value)  # type: ignore[arg-type]
    total = 0
    for name, shape, type_id in tensors:
        nbytes = _nbytes(shape, type_id)
        writer.add_tensor_info(name, shape, np.dtype(np.float32), nbytes, raw_dtype=type_id)  # type: ignore[arg-type]
        total += nbytes + -nbytes % writer.data_alignment
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    handle = writer.fout[0]
    start = handle.tell()
    handle.truncate(start + -start % writer.data_alignment + total)
    writer.close()
    return path


def attention(layer: int, types: dict[str, int]) -> list[Tensor]:
    blk = f"blk.{layer}"
    return [
        (f"{blk}.attn_norm.weight", (N_EMBD,), Q.F32),
        (f"{blk}.attn_q.weight", (N_EMBD, N_EMBD), types.get("attn_q", Q.Q4_K)),
        (f"{blk}.attn_k.weight", (N_EMBD // 2, N_EMBD), types.get("attn_k", Q.Q4_K)),
        (f"{blk}.attn_v.weight", (N_EMBD // 2, N_EMBD), types.get("attn_v", Q.Q6_K)),
        (f"{blk}.attn_q_norm.weight", (64,), Q.F32),
        (f"{blk}.attn_k_norm.weight", (64,), Q.F32),
        (f"{blk}.attn_output.weight", (N_EMBD, N_EMBD), types.get("attn_output", Q.Q4_K)),
        (f"{blk}.ffn_norm.weight", (N_EMBD,), Q.F32),
    ]


def dense_tensors(n_layer: int = 2, types: dict[str, int] | None = None, *, tied: bool = False) -> list[Tensor]:
    """qwen3 as llama-quantize's Q4_K_M makes it: Q4_K matrices, Q6_K attn_v, ffn_down and output."""
    types = types or {}
    tensors: list[Tensor] = [("token_embd.weight", (N_VOCAB, N_EMBD), types.get("token_embd", Q.Q4_K))]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        tensors += attention(layer, types)
        tensors += [(f"{blk}.ffn_gate.weight", (N_FF, N_EMBD), types.get("ffn_gate", Q.Q4_K)),
                    (f"{blk}.ffn_up.weight", (N_FF, N_EMBD), types.get("ffn_up", Q.Q4_K)),
                    (f"{blk}.ffn_down.weight", (N_EMBD, N_FF), types.get("ffn_down", Q.Q6_K))]
    tensors.append(("output_norm.weight", (N_EMBD,), Q.F32))
    if not tied:
        tensors.append(("output.weight", (N_VOCAB, N_EMBD), types.get("output", Q.Q6_K)))
    return tensors


def moe_tensors(n_layer: int = 2, types: dict[str, int] | None = None) -> list[Tensor]:
    """qwen3moe as Q4_K_M makes it: Q4_K gate and up experts, Q6_K down experts, an F32 router."""
    types = types or {}
    tensors: list[Tensor] = [("token_embd.weight", (N_VOCAB, N_EMBD), Q.Q4_K)]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        tensors += attention(layer, types)
        tensors += [(f"{blk}.ffn_gate_inp.weight", (N_EXPERT, N_EMBD), types.get("ffn_gate_inp", Q.F32)),
                    (f"{blk}.ffn_gate_exps.weight", (N_EXPERT, N_FF, N_EMBD), types.get("ffn_gate_exps", Q.Q4_K)),
                    (f"{blk}.ffn_up_exps.weight", (N_EXPERT, N_FF, N_EMBD), types.get("ffn_up_exps", Q.Q4_K)),
                    (f"{blk}.ffn_down_exps.weight", (N_EXPERT, N_EMBD, N_FF), types.get("ffn_down_exps", Q.Q6_K))]
    return tensors + [("output_norm.weight", (N_EMBD,), Q.F32), ("output.weight", (N_VOCAB, N_EMBD), Q.Q6_K)]


@pytest.fixture
def dense_model(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "qwen3-2l-Q4_K_M.gguf", "qwen3", dense_tensors())


@pytest.fixture
def moe_model(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "qwen3moe-2l-Q4_K_M.gguf", "qwen3moe", moe_tensors(), n_expert=N_EXPERT,
                      n_expert_used=2)


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = coverage.main([str(arg) for arg in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def line(out: str, prefix: str) -> str:
    found = [text for text in out.splitlines() if text.startswith(prefix)]
    assert len(found) == 1, out
    return found[0]


# --- covered models -------------------------------------------------------------------------------------------


def test_a_q4_k_m_dense_model_is_covered_on_both_backends(dense_model: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([dense_model], capsys)
    assert (code, err) == (0, "")
    assert line(out, "model:") == "model: qwen3-2l-Q4_K_M.gguf (qwen3; 2 layers)"
    assert line(out, "cuda:") == "cuda: covered (dense Q4_K, Q6_K)"
    assert line(out, "cpu:") == "cpu:  covered (dense Q4_K, Q6_K)"
    assert "experts on the CPU" not in out  # a dense model has none
    assert line(out, "at run time:") == ("at run time: flash attention on; KV cache f16, q8_0, turbo3 or turbo4; "
                                         "one server slot on cuda (several on cpu); verify batches of at most 16 tokens")


def test_a_q4_k_m_moe_model_is_covered_with_the_note_on_experts_on_the_cpu(
        moe_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([moe_model], capsys)
    assert (code, err) == (0, "")
    assert line(out, "model:") == "model: qwen3moe-2l-Q4_K_M.gguf (qwen3moe, 8 experts, 2 used; 2 layers)"
    assert line(out, "cuda:") == "cuda: covered (dense Q4_K, Q6_K; experts Q4_K, Q6_K; router F32)"
    assert line(out, "cpu:") == "cpu:  covered (dense Q4_K, Q6_K; experts Q4_K, Q6_K; router F32)"
    note = line(out, "note: on cuda, experts on the CPU")
    assert "--cpu-moe" in note and "-ot exps=CPU" in note and "not covered" in note


def test_the_experts_on_the_cpu_note_goes_once_the_stack_claims_them(
        moe_model: Path, cuda_wheel: dict, capsys: pytest.CaptureFixture[str]) -> None:
    cuda_wheel["exact_moe_experts_on_cpu_backends"] = ["cuda"]
    code, out, _ = run([moe_model], capsys)
    assert code == 0 and "experts on the CPU" not in out


def test_gpt_oss_mxfp4_experts_are_covered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tensors = moe_tensors(types={"ffn_gate_exps": Q.MXFP4, "ffn_up_exps": Q.MXFP4, "ffn_down_exps": Q.MXFP4,
                                 **{name: Q.Q8_0 for name in ("attn_q", "attn_k", "attn_v", "attn_output")}})
    tensors += [("blk.0.attn_sinks.weight", (4,), Q.F32), ("blk.0.ffn_gate_inp.bias", (N_EXPERT,), Q.F32)]
    model = write_gguf(tmp_path / "gpt-oss.gguf", "gpt-oss", tensors, n_expert=N_EXPERT, n_expert_used=2)
    code, out, _ = run([model], capsys)
    assert code == 0, out
    assert line(out, "cuda:") == "cuda: covered (dense Q8_0, Q6_K; experts MXFP4; router F32)"


def test_the_notes_say_where_the_basis_is_op_tests_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "q4_0.gguf", "qwen3", dense_tensors(types=dict.fromkeys(
        ("token_embd", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down", "output"),
        Q.Q4_0)))
    code, out, _ = run([model, "--backend", "cuda"], capsys)
    assert code == 0
    assert line(out, "cuda:") == "cuda: covered (dense Q4_0)"
    assert line(out, "note:") == "note: on cuda, dense Q4_0: op tests only: no Q4_0 model has been measured"


def test_a_type_the_smoke_measured_in_a_model_has_no_op_tests_only_note(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # IQ4_XS and Q8_0 models are smoke cases on CUDA (smoke-h200-rev19-b10018-1.2.0.json), and so are Q5_K_M
    # (smoke-h200-rev24.json), Q3_K_M and Q2_K (smoke-h200-rev24-q3-k-m-q2-k.json)
    model = write_gguf(tmp_path / "m.gguf", "qwen3", dense_tensors(types={"attn_v": Q.IQ4_XS, "ffn_up": Q.Q8_0}))
    code, out, _ = run([model, "--backend", "cuda"], capsys)
    assert code == 0 and set(line(out, "cuda:")[len("cuda: covered (dense "):-1].split(", ")) == {
        "Q4_K", "Q6_K", "IQ4_XS", "Q8_0"}
    assert "note:" not in out
    for qtype in (Q.Q5_K, Q.Q3_K, Q.Q2_K):
        model = write_gguf(tmp_path / f"{qtype.name}.gguf", "qwen3", dense_tensors(types={"attn_v": qtype}))
        code, out, _ = run([model, "--backend", "cuda"], capsys)
        assert code == 0 and "note:" not in out, out


# --- models that are not covered ------------------------------------------------------------------------------


TQ_EXPERTS_ON_CUDA = "no batch-invariant path (the fork's dequantize-to-cuBLAS path for TQ experts)"
NOT_ON_CUDA = ("the CUDA backend does not multiply this type (test-backend-ops: not supported), so its products leave "
               "the GPU; that split has not been measured")


@pytest.mark.parametrize(("qtype", "reason"), [(Q.TQ1_0, NOT_ON_CUDA), (Q.TQ2_0, NOT_ON_CUDA)])
def test_a_weight_type_not_covered_on_cuda_is_named_with_its_tensors_and_reason(
        tmp_path: Path, qtype: Q, reason: str, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "m.gguf", "qwen3", dense_tensors(types={"attn_v": qtype}))
    code, out, err = run([model], capsys)
    assert (code, err) == (1, "")
    expected = f"NOT covered: dense {qtype.name} (2 tensors, e.g. blk.0.attn_v.weight): {reason}"
    assert line(out, "cuda:") == f"cuda: {expected}"
    # the CPU backend is batch-invariant for every weight type of ggml's table (test-batch-invariance --types-only)
    cpu = line(out, "cpu:")
    assert cpu.startswith("cpu:  covered (dense ") and set(cpu[len("cpu:  covered (dense "):-1].split(", ")) == {
        qtype.name, "Q4_K", "Q6_K"}
    assert "so on cuda greedy speculative decoding may differ from plain greedy decoding" in out


@pytest.mark.parametrize("qtype", [Q.Q5_0, Q.IQ4_NL, Q.IQ3_S, Q.IQ2_XXS])
def test_the_types_of_the_table_covered_by_op_tests_say_so(tmp_path: Path, qtype: Q,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "m.gguf", "qwen3", dense_tensors(types={"attn_v": qtype}))
    code, out, _ = run([model, "--backend", "cuda"], capsys)
    assert code == 0, out
    assert line(out, "note:") == (f"note: on cuda, dense {qtype.name}: op tests only: no dense {qtype.name} model "
                                  "has been measured")


def test_the_fork_s_tq3_1s_is_covered_dense_by_op_tests_and_not_as_experts(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # Type ids 45 and 46 are this fork's TQ3_1S and TQ4_1S: the gguf package on PyPI does not know them. Dense
    # TQ3_1S stays on the fork's fused kernel up to 16 columns since revision 21 (9-16 differed before).
    model = write_gguf(tmp_path / "tq.gguf", "qwen3", dense_tensors(types={"ffn_up": 45}))
    code, out, _ = run([model, "--backend", "cuda"], capsys)
    assert code == 0, out
    assert line(out, "note:").startswith("note: on cuda, dense TQ3_1S: op tests only, from revision 21")
    tq4 = write_gguf(tmp_path / "tq4.gguf", "qwen3", dense_tensors(types={"ffn_up": 46}))
    assert run([tq4, "--backend", "cuda"], capsys)[0] == 0
    experts = write_gguf(tmp_path / "moe-tq3.gguf", "qwen3moe",
                         moe_tensors(types=dict.fromkeys(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"), 45)),
                         n_expert=N_EXPERT, n_expert_used=2)
    code, out, _ = run([experts, "--backend", "cuda"], capsys)
    assert code == 1
    assert line(out, "cuda:") == ("cuda: NOT covered: experts TQ3_1S (6 tensors, e.g. blk.0.ffn_gate_exps.weight): "
                                  f"{TQ_EXPERTS_ON_CUDA}")


def test_f16_weights_are_covered_on_cuda_by_op_tests_since_they_run_on_mmf(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "m.gguf", "qwen3", dense_tensors(types={"attn_v": Q.F16}))
    code, out, _ = run([model, "--backend", "cuda"], capsys)
    assert code == 0, out
    assert line(out, "note:").startswith("note: on cuda, dense F16: op tests only, from revision 25 (F16 on mmf's "
                                         "order at every column count")


def test_bf16_counts_as_op_tests_only_until_a_wheel_with_its_new_kernel_runs_a_model(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # revision 25 replaces the one- and two-column kernel that revision 24's smoke ran on a BF16 model
    model = write_gguf(tmp_path / "m.gguf", "qwen3", dense_tensors(types={"ffn_up": Q.BF16}))
    code, out, _ = run([model, "--backend", "cuda"], capsys)
    assert code == 0, out
    assert line(out, "note:").startswith("note: on cuda, dense BF16: op tests only, from revision 25")


def test_experts_of_a_type_not_yet_tested_on_cuda_do_not_count(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "moe-iq4.gguf", "qwen3moe",
                       moe_tensors(types=dict.fromkeys(("ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"), Q.IQ4_NL)),
                       n_expert=N_EXPERT, n_expert_used=2)
    code, out, _ = run([model], capsys)
    assert code == 1
    assert line(out, "cuda:") == ("cuda: NOT covered: experts IQ4_NL (6 tensors, e.g. blk.0.ffn_gate_exps.weight): "
                                  "not yet tested")
    assert line(out, "cpu:") == "cpu:  covered (dense Q4_K, Q6_K; experts IQ4_NL; router F32)"


def test_q8_0_f16_and_bf16_experts_are_covered_on_cuda_by_op_tests(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for qtype in (Q.Q8_0, Q.F16, Q.BF16):
        model = write_gguf(tmp_path / f"moe-{qtype.name}.gguf", "qwen3moe",
                           moe_tensors(types={"ffn_down_exps": qtype}), n_expert=N_EXPERT, n_expert_used=2)
        code, out, _ = run([model, "--backend", "cuda"], capsys)
        assert code == 0, out
        assert f"experts {qtype.name}: op tests only" in out


def test_several_problems_are_listed_one_a_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "m.gguf", "phi3", dense_tensors(types={"attn_v": Q.TQ1_0, "ffn_down": Q.TQ2_0}))
    code, out, _ = run([model, "--backend", "cuda"], capsys)
    assert code == 1
    lines = out.splitlines()
    start = lines.index("cuda: NOT covered:")
    assert lines[start + 1:start + 4] == [
        "  architecture phi3: not measured",
        f"  dense TQ1_0 (2 tensors, e.g. blk.0.attn_v.weight): {NOT_ON_CUDA}",
        f"  dense TQ2_0 (2 tensors, e.g. blk.0.ffn_down.weight): {NOT_ON_CUDA}",
    ]


def test_an_unmeasured_architecture_is_not_covered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "phi3.gguf", "phi3", dense_tensors())
    code, out, _ = run([model], capsys)
    assert code == 1
    assert line(out, "cuda:") == "cuda: NOT covered: architecture phi3: not measured"


def test_a_shared_expert_model_is_covered(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hiraishin_llama import synthetic

    model = synthetic.make_model("tiny-qwen2moe", seed=1, n_layer=1, out_path=tmp_path / "qwen2moe.gguf")
    code, out, _ = run([str(model)], capsys)
    assert code == 0
    assert line(out, "cuda:").startswith("cuda: covered")


def test_a_hybrid_with_recurrent_state_is_not_covered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tensors = dense_tensors() + [("blk.0.ssm_conv1d.weight", (N_EMBD, 4), Q.F32), ("blk.0.ssm_a", (N_EMBD,), Q.F32),
                                 ("blk.0.ssm_dt.bias", (N_EMBD,), Q.F32),
                                 ("blk.0.ssm_out.weight", (N_EMBD, N_EMBD), Q.Q5_0)]
    model = write_gguf(tmp_path / "next.gguf", "qwen3next", tensors, keys={"qwen3next.ssm.conv_kernel": 4})
    code, out, _ = run([model], capsys)
    assert code == 1
    # The recurrent tensors are named under the architecture, not judged as products.
    assert line(out, "cuda:") == ("cuda: NOT covered: architecture qwen3next (4 tensors, e.g. "
                                  "blk.0.ssm_conv1d.weight): recurrent state, not claimed yet: the SSM_CONV and "
                                  "GATED_DELTA_NET ops it uses pass the op tests on CUDA and the CPU (as qwen35's, whose "
                                  "models are exact on CUDA and the CPU), but no model of this architecture has been run")


@pytest.fixture(scope="module")
def measured_hybrids(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from hiraishin_llama import synthetic

    out = tmp_path_factory.mktemp("hybrids")
    return {preset: synthetic.make_model(preset, seed=1, n_layer=None, out_path=out / f"{preset}.gguf")
            for preset in ("tiny-qwen35", "tiny-nemotron-h")}


@pytest.mark.parametrize("preset", ["tiny-qwen35", "tiny-nemotron-h"])
def test_a_measured_hybrid_architecture_is_covered_where_the_build_claims_hybrids(
        preset: str, measured_hybrids: dict[str, Path], cuda_wheel: dict, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run([str(measured_hybrids[preset])], capsys)
    assert code == 0, out
    assert line(out, "cuda:").startswith("cuda: covered") and line(out, "cpu:").startswith("cpu:  covered")
    cuda_wheel["exact_hybrid_backends"] = ["cpu"]
    code, out, _ = run([str(measured_hybrids[preset])], capsys)
    assert code == 1
    assert line(out, "cuda:") == ("cuda: NOT covered: build: this wheel's patch stack does not claim models with "
                                  "recurrent layers exact on cuda (exact_hybrid_backends in its stack.json)")
    assert line(out, "cpu:").startswith("cpu:  covered")


def test_a_gated_delta_net_model_is_told_where_its_exactness_ends(measured_hybrids: dict[str, Path],
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # the fused gated delta net is what makes a batch add as one token does, and where a device lacks it a verify
    # batch runs as one-token steps (revision 29) but a long prompt does not; the note says both
    out = run([str(measured_hybrids["tiny-qwen35"]), "--backend", "cuda"], capsys)[1]
    assert "architecture qwen35: exact where llama.cpp keeps its fused gated delta net" in out
    assert "a verify batch of up to 16 tokens as one-token steps" in out
    assert "prompts of more than 16 tokens take the chunked form" in out


def test_recurrent_state_is_found_in_an_unlisted_architecture_too(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "h.gguf", "newhybrid", dense_tensors(), keys={"newhybrid.ssm.state_size": 16})
    code, out, _ = run([model, "--backend", "cpu"], capsys)
    assert code == 1
    assert line(out, "cpu:") == ("cpu: NOT covered: architecture newhybrid (metadata key newhybrid.ssm.state_size): "
                                 "recurrent state, not claimed yet: SSM_CONV, SSM_SCAN (Mamba-2) and GATED_DELTA_NET pass "
                                 "the op tests at the hybrids' shapes, but no model of this architecture has been run, and "
                                 "Mamba-1's SSM_SCAN and RWKV_WKV have no op tests")


def test_a_tied_output_counts_the_token_embedding_as_a_product(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    untied = write_gguf(tmp_path / "untied.gguf", "qwen3", dense_tensors(types={"token_embd": Q.TQ1_0}))
    assert run([untied], capsys)[0] == 0  # a lookup only: exact at any batch size
    tied = write_gguf(tmp_path / "tied.gguf", "qwen3", dense_tensors(types={"token_embd": Q.TQ1_0}, tied=True))
    code, out, _ = run([tied, "--backend", "cuda"], capsys)
    assert code == 1
    assert line(out, "cuda:") == ("cuda: NOT covered: dense TQ1_0 (1 tensor: token_embd.weight (the output matrix, "
                                  f"tied to the token embedding)): {NOT_ON_CUDA}")


# --- what the build claims ------------------------------------------------------------------------------------


def test_a_build_without_stack_information_covers_nothing(dense_model: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    use_wheel(monkeypatch, {})
    code, out, _ = run([dense_model], capsys)
    assert code == 1 and "no stack information" in line(out, "cpu:")


def test_a_fault_build_covers_nothing(dense_model: Path, cuda_wheel: dict, capsys: pytest.CaptureFixture[str]) -> None:
    cuda_wheel["omitted_patches"] = ["ggml-cuda-batch-invariant-mmvq-up-to-16-columns.patch"]
    code, out, _ = run([dense_model, "--backend", "cuda"], capsys)
    assert code == 1
    assert "built without ggml-cuda-batch-invariant-mmvq-up-to-16-columns.patch (a fault build" in line(out, "cuda:")


def test_moe_models_need_the_stack_s_moe_claim(moe_model: Path, dense_model: Path, cuda_wheel: dict,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    cuda_wheel["exact_moe_backends"] = ["cpu"]
    code, out, _ = run([moe_model], capsys)
    assert code == 1
    assert "does not claim mixture-of-experts models exact on cuda" in line(out, "cuda:")
    assert line(out, "cpu:").startswith("cpu:  covered")
    assert run([dense_model], capsys)[0] == 0


# --- --backend ------------------------------------------------------------------------------------------------


def test_backend_chooses_the_one_judged(moe_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # IQ4_NL experts: covered on the CPU, not yet tested on CUDA.
    model = write_gguf(tmp_path / "moe-iq4.gguf", "qwen3moe", moe_tensors(types={"ffn_down_exps": Q.IQ4_NL}),
                       n_expert=N_EXPERT, n_expert_used=2)
    assert run([model], capsys)[0] == 1  # the CUDA wheel: both backends
    code, out, _ = run([model, "--backend", "cpu"], capsys)
    assert code == 0 and "cuda" not in out.split("note:")[0]
    assert [text.split(":")[0] for text in out.splitlines() if text.startswith(("cuda:", "cpu:"))] == ["cpu"]
    use_wheel(monkeypatch, WHEELS["cpu"])
    code, out, _ = run([model], capsys)  # a CPU wheel: the CPU backend only
    assert code == 0 and not any(text.startswith("cuda:") for text in out.splitlines())
    code, out, _ = run([model, "--backend", "cuda"], capsys)  # asked for: what the CUDA wheels cover
    assert code == 1
    assert "note: this wheel has no cuda backend" in out


def test_an_unknown_backend_is_one_line(dense_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        coverage.main([str(dense_model), "--backend", "metal"])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "invalid choice: 'metal'" in err


# --- --json ---------------------------------------------------------------------------------------------------


def test_json_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "moe.gguf", "qwen3moe", moe_tensors(types={"ffn_down_exps": Q.IQ4_NL}),
                       n_expert=N_EXPERT, n_expert_used=2)
    report_path = tmp_path / "out" / "coverage.json"
    code, out, _ = run([model, "--json", report_path], capsys)
    assert code == 1
    report = json.loads(report_path.read_text())
    assert report["tool"] == "hiraishin-llama-coverage" and report["covered"] is False
    assert report["model"] == {"path": str(model), "files": [str(model)], "architecture": "qwen3moe", "n_layer": 2,
                               "n_expert": N_EXPERT, "n_expert_used": 2, "n_tensors": len(moe_tensors())}
    assert list(report["backends"]) == ["cuda", "cpu"]
    cuda, cpu = report["backends"]["cuda"], report["backends"]["cpu"]
    assert (cuda["covered"], cpu["covered"], cuda["in_this_wheel"]) == (False, True, True)
    by_what = {finding["what"]: finding for finding in cuda["findings"]}
    assert by_what["experts IQ4_NL"] == {"what": "experts IQ4_NL", "covered": False,
                                       "reason": "not yet tested",
                                       "tensors": 2, "example": "blk.0.ffn_down_exps.weight", "evidence": [],
                                       "note": None}
    assert by_what["experts Q4_K"]["evidence"] == ["benchmarks/results/op-tests-h200-rev15-moe-partial.json",
                                                   "benchmarks/results/smoke-h200-rev15-b10018-1.2.0.json",
                                                   "benchmarks/results/op-tests-h200-rev18-types-partial.json",
                                                   "benchmarks/results/smoke-h200-rev18-b10018-1.2.0.json"]
    assert by_what["architecture qwen3moe"]["covered"] is True
    assert len(cuda["notes"]) == 1 and cpu["notes"] == []
    assert report["run_time"][0] == "flash attention on"


def test_a_json_path_that_cannot_be_written_is_refused_first(dense_model: Path, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        coverage.main([str(dense_model), "--json", str(tmp_path)])
    captured = capsys.readouterr()
    assert exited.value.code == 2 and captured.out == "" and captured.err.count("\n") == 1
    assert "is a directory" in captured.err


# --- bad input ------------------------------------------------------------------------------------------------


def _cut(source: Path, target: Path, size: int) -> Path:
    target.write_bytes(source.read_bytes()[:size])
    return target


def _tensor_table_start(path: Path) -> int:
    """Where the first tensor's entry of the tensor table is, as gguf.GGUFReader finds it."""
    return int(gguf.GGUFReader(path).tensors[0].field.offset)


BAD_INPUTS = {
    "missing": (lambda d, m: d / "nope.gguf", "no such file; check the path"),
    "directory": (lambda d, m: d, "is a directory, not a model file; pass the .gguf file itself"),
    "empty": (lambda d, m: _write(d / "empty.gguf", b""), "is empty; pass a .gguf model file"),
    "text": (lambda d, m: _write(d / "notes.gguf", b"just some text\n"), "not a GGUF file (its first 4 bytes are "
                                                                         "not 'GGUF'); pass a .gguf model file"),
    "magic only": (lambda d, m: _write(d / "magic.gguf", b"GGUF"), "is cut short: the file ends inside its version"),
    "version 1": (lambda d, m: _write(d / "v1.gguf", b"GGUF\x01\x00\x00\x00" + bytes(16)),
                  "is GGUF version 1, which llama.cpp does not read (it reads versions 2 and 3)"),
    "cut in the metadata": (lambda d, m: _cut(m, d / "cut.gguf", 100), "is cut short: the file ends inside its "
                            "metadata (key "),
    "cut in the tensor table": (lambda d, m: _cut(m, d / "cut.gguf", _tensor_table_start(m) + 80),
                                "is cut short: the file ends inside its tensor table (tensor 2 of "
                                f"{len(dense_tensors())})"),
    "data cut short": (lambda d, m: _cut(m, d / "cut.gguf", _tensor_table_start(m) + 4096),
                       "is cut short: its tensor data ends at byte"),
}


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_one_line_and_exit_status_2(case: str, dense_model: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    make, expected = BAD_INPUTS[case]
    bad_dir = tmp_path / "bad"
    bad_dir.mkdir()
    path = make(bad_dir, dense_model)
    code, out, err = run([path], capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1, err
    assert err.startswith(f"hiraishin-llama-coverage: error: {path}: {expected}"), err


def test_a_missing_model_argument_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        coverage.main([])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and err.count("\n") == 1 and "MODEL.gguf" in err


# --- files llama.cpp's loader refuses (gguf_init_from_file_impl, llama_model_loader) --------------------------
# Each is a well-formed GGUF but for one thing; the tool judged them (exit 0) before it checked their structure.

LOADER_REFUSES = "which llama.cpp's loader refuses"


def _patch(path: Path, old: bytes, new: bytes) -> Path:
    """Overwrite the one place ``old`` is in the file's header with ``new``, as long, in place."""
    assert len(old) == len(new)
    with path.open("r+b") as handle:
        head = handle.read(1 << 20)
        assert head.count(old) == 1, old
        handle.seek(head.index(old))
        handle.write(new)
    return path


def _tensor_entry(path: Path, name: str) -> tuple[int, int, int]:
    """The tensor's index in the table, where its entry starts and where its offset is written in it."""
    reader = gguf.GGUFReader(path)
    index = [t.name for t in reader.tensors].index(name)
    tensor = reader.tensors[index]
    start = int(tensor.field.offset)
    return index, start, start + 8 + len(name.encode()) + 4 + 8 * len(tensor.shape) + 4


def _set_offset(path: Path, name: str, delta: int) -> tuple[int, int, int]:
    """Move the tensor's data offset by ``delta`` bytes; its index, entry position and the new offset."""
    index, entry, where = _tensor_entry(path, name)
    with path.open("r+b") as handle:
        handle.seek(where)
        offset = int.from_bytes(handle.read(8), "little") + delta
        handle.seek(where)
        handle.write(offset.to_bytes(8, "little"))
    return index, entry, offset


def _refused(path: Path, capsys: pytest.CaptureFixture[str]) -> str:
    """What the tool says of a file it must refuse: one line, exit status 2, nothing judged."""
    code, out, err = run([path], capsys)
    assert (code, out) == (2, ""), (code, out, err)
    assert err.count("\n") == 1, err
    prefix = f"hiraishin-llama-coverage: error: {path}: "
    assert err.startswith(prefix), err
    return err[len(prefix):].rstrip("\n")


def test_a_duplicated_metadata_key_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (a) the first general.architecture an uncovered one, the second a covered one: the second was judged
    model = write_gguf(tmp_path / "dup-key.gguf", "mamba", dense_tensors(), keys={"general.architectur2": "qwen3"})
    fields = gguf.GGUFReader(model).fields
    first, second = fields["general.architecture"].offset, fields["general.architectur2"].offset
    _patch(model, b"general.architectur2", b"general.architecture")
    message = _refused(model, capsys)
    assert message.startswith(f"is not a valid GGUF file: duplicate key 'general.architecture' in its metadata (key 4 "
                              f"of 4, at byte {second}; first as key 1, at byte {first}), {LOADER_REFUSES}"), message
    assert message.endswith("convert or download the model again"), message


def test_a_duplicated_tensor_name_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (b) blk.1.attn_q.weight renamed to blk.0.attn_q.weight
    model = write_gguf(tmp_path / "dup-tensor.gguf", "qwen3", dense_tensors())
    second, entry, _ = _tensor_entry(model, "blk.1.attn_q.weight")
    first, first_entry, _ = _tensor_entry(model, "blk.0.attn_q.weight")
    _patch(model, b"blk.1.attn_q.weight", b"blk.0.attn_q.weight")
    message = _refused(model, capsys)
    assert message.startswith(f"is not a valid GGUF file: duplicate tensor name 'blk.0.attn_q.weight' in its tensor "
                              f"table (tensor {second + 1} of {len(dense_tensors())}, at byte {entry}; first as tensor "
                              f"{first + 1}, at byte {first_entry}), {LOADER_REFUSES}"), message


def _bad_offset(model: Path, index: int, entry: int, offset: int) -> str:
    """How the refusal of blk.0.attn_k.weight's data offset begins; what is wrong with it follows."""
    return (f"is not a valid GGUF file: tensor 'blk.0.attn_k.weight' (tensor {index + 1} of {len(dense_tensors())}, "
            f"its entry at byte {entry}) has the data offset {offset} (from the data section's start, byte "
            f"{gguf.GGUFReader(model).data_offset}), ")


def test_a_tensor_offset_off_the_alignment_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (c) 16 bytes past where the writer put it: within the file, not a multiple of 32
    model = write_gguf(tmp_path / "misaligned.gguf", "qwen3", dense_tensors())
    index, entry, offset = _set_offset(model, "blk.0.attn_k.weight", 16)
    message = _refused(model, capsys)
    assert message.startswith(_bad_offset(model, index, entry, offset) + "not a multiple of the alignment 32 (the "
                              f"default: the file has no general.alignment), {LOADER_REFUSES}"), message


def test_an_offset_of_the_default_alignment_is_off_a_larger_alignment(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "misaligned-64.gguf", "qwen3", dense_tensors(), alignment=64)
    _set_offset(model, "blk.0.attn_k.weight", 32)
    message = _refused(model, capsys)
    assert "not a multiple of the alignment 64 (its general.alignment)" in message, message


def test_a_tensor_that_does_not_start_where_the_one_before_it_ends_is_bad_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # aligned, but gguf_init_from_file_impl wants each tensor's data right after the one before it, padded
    model = write_gguf(tmp_path / "gap.gguf", "qwen3", dense_tensors())
    index, entry, offset = _set_offset(model, "blk.0.attn_k.weight", 32)
    message = _refused(model, capsys)
    assert message.startswith(_bad_offset(model, index, entry, offset) + f"expected {offset - 32} (where "
                              f"'blk.0.attn_q.weight' before it ends, padded to the alignment 32), {LOADER_REFUSES}"), message


def test_a_row_length_that_is_no_whole_number_of_blocks_is_bad_input(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    # gguf_init_from_file_impl: "... elements per row, not a multiple of block size"
    model = write_gguf(tmp_path / "rows.gguf", "qwen3", dense_tensors())
    index, entry, _ = _tensor_entry(model, "blk.0.ffn_down.weight")
    with model.open("r+b") as handle:  # its row length, the first dimension after its name and n_dims
        handle.seek(entry + 8 + len("blk.0.ffn_down.weight") + 4)
        assert int.from_bytes(handle.read(8), "little") == N_FF
        handle.seek(-8, 1)
        handle.write((N_FF - 12).to_bytes(8, "little"))
    message = _refused(model, capsys)
    assert message.startswith(f"is not a valid GGUF file: tensor 'blk.0.ffn_down.weight' (tensor {index + 1} of "
                              f"{len(dense_tensors())}, at byte {entry}) of type Q6_K has rows of {N_FF - 12} "
                              f"elements, not a whole number of its blocks of 256, {LOADER_REFUSES}"), message


def test_a_file_without_tensors_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (d) metadata only: llama.cpp loads no model from it
    model = write_gguf(tmp_path / "no-tensors.gguf", "qwen3", [])
    message = _refused(model, capsys)
    assert message.startswith("has no tensors (its tensor table is empty), so llama.cpp loads no model from it; "
                              "pass the model file itself"), message


def test_a_well_formed_file_has_no_structural_problems(tmp_path: Path, dense_model: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    data = coverage.load_coverage()
    wide = write_gguf(tmp_path / "aligned-64.gguf", "qwen3", dense_tensors(), alignment=64)
    odd = write_gguf(tmp_path / "odd-sizes.gguf", "qwen3",
                     [*dense_tensors(), ("blk.0.attn_sinks.weight", (3,), Q.F32), ("rope_freqs.weight", (5,), Q.F32)])
    for model in (dense_model, wide, odd):
        assert coverage.structural_problems(coverage.read_header(model), data) == []
        code, out, err = run([model], capsys)
        assert (code, err) == (0, ""), out
        assert line(out, "cuda:") == "cuda: covered (dense Q4_K, Q6_K)"


def test_the_structural_problems_are_listed_in_the_loader_s_order(tmp_path: Path) -> None:
    model = write_gguf(tmp_path / "two.gguf", "qwen3", dense_tensors(), keys={"general.architectur2": "qwen3"})
    _set_offset(model, "blk.0.attn_k.weight", 16)  # first: gguf.GGUFReader refuses a duplicated key (KeyError)
    _patch(model, b"general.architectur2", b"general.architecture")
    problems = coverage.structural_problems(coverage.read_header(model), coverage.load_coverage())
    assert [problem.split(" (")[0] for problem in problems] == [
        "is not a valid GGUF file: duplicate key 'general.architecture' in its metadata",
        "is not a valid GGUF file: tensor 'blk.0.attn_k.weight'"]


def test_a_split_model_whose_first_part_has_no_tensors_is_read(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # llama-gguf-split --no-tensor-first-split: the first part holds the metadata only
    for number, part in enumerate(([], dense_tensors())):
        write_gguf(tmp_path / f"m-{number + 1:05d}-of-00002.gguf", "qwen3", part,
                   keys={"split.no": number, "split.count": 2})
    code, out, err = run([tmp_path / "m-00001-of-00002.gguf"], capsys)
    assert (code, err) == (0, ""), out
    for number in range(2):
        write_gguf(tmp_path / f"e-{number + 1:05d}-of-00002.gguf", "qwen3", [],
                   keys={"split.no": number, "split.count": 2})
    path = tmp_path / "e-00001-of-00002.gguf"
    assert _refused(path, capsys).startswith("has no tensors in any of its 2 parts"), path


def test_a_tensor_in_two_parts_of_a_split_model_is_bad_input(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    tensors = dense_tensors()
    half = len(tensors) // 2
    for number, part in enumerate((tensors[:half + 1], tensors[half:])):
        write_gguf(tmp_path / f"m-{number + 1:05d}-of-00002.gguf", "qwen3", part,
                   keys={"split.no": number, "split.count": 2})
    message = _refused(tmp_path / "m-00002-of-00002.gguf", capsys)
    assert message.startswith(f"is not a valid split model: tensor {tensors[half][0]!r} is in part 1 "
                              "(m-00001-of-00002.gguf) and again in part 2 (m-00002-of-00002.gguf), "
                              f"{LOADER_REFUSES}"), message


# --- split models ---------------------------------------------------------------------------------------------


def test_a_split_model_is_judged_from_all_its_parts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tensors = dense_tensors(types={"ffn_down": Q.TQ2_0})
    half = len(tensors) // 2
    for number, part in enumerate((tensors[:half], tensors[half:])):
        write_gguf(tmp_path / f"m-{number + 1:05d}-of-00002.gguf", "qwen3", part,
                   keys={"split.no": number, "split.count": 2})
    code, out, _ = run([tmp_path / "m-00002-of-00002.gguf", "--backend", "cuda"], capsys)
    assert code == 1
    assert line(out, "model:") == "model: m-00002-of-00002.gguf (qwen3; 2 layers, 2 files)"
    assert line(out, "cuda:") == f"cuda: NOT covered: dense TQ2_0 (2 tensors, e.g. blk.0.ffn_down.weight): {NOT_ON_CUDA}"
    (tmp_path / "m-00001-of-00002.gguf").unlink()
    code, out, err = run([tmp_path / "m-00002-of-00002.gguf"], capsys)
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert "its part 1 (m-00001-of-00002.gguf) is not next to it" in err


# --- the reader -----------------------------------------------------------------------------------------------


def test_the_reader_agrees_with_gguf_reader(moe_model: Path) -> None:
    header = coverage.read_header(moe_model)
    reader = gguf.GGUFReader(moe_model)
    assert [(t.name, t.type_id, list(t.shape), t.offset) for t in header.tensors] == [
        (t.name, int(t.tensor_type), [int(d) for d in t.shape], int(t.data_offset) - reader.data_offset)
        for t in reader.tensors]
    assert header.data_offset == reader.data_offset
    assert header.metadata["general.architecture"] == "qwen3moe"
    assert header.metadata["qwen3moe.expert_count"] == N_EXPERT


def test_a_60_gb_model_with_a_large_vocabulary_is_read_in_well_under_a_second(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Qwen3-30B-A3B's shapes, 48 layers (60 GB at F16 on paper), and a 152k-token vocabulary with its merges,
    # which gguf.GGUFReader takes about 10 s to parse.
    model = synthetic.write_shape_model("qwen3moe", None, tmp_path / "qwen3moe-48l.gguf")
    assert model.stat().st_size > 60e9
    started = time.monotonic()
    assert run([model], capsys)[0] == 0  # F16 weights and experts: covered by op tests on CUDA (revision 21)
    assert time.monotonic() - started < 1.0
    vocab = write_gguf(tmp_path / "vocab.gguf", "qwen3", dense_tensors(), vocab=152_000)
    started = time.monotonic()
    assert run([vocab], capsys)[0] == 0
    assert time.monotonic() - started < 1.0


# --- the data -------------------------------------------------------------------------------------------------


def test_every_evidence_file_is_in_the_repository_or_listed_as_pending() -> None:
    data = coverage.load_coverage()
    for path in sorted(data.evidence()):
        assert path.startswith(("benchmarks/results/", "patches/")), path
        if path in data.pending_evidence:
            assert not (REPO / path).exists(), f"{path} is recorded now: remove it from pending_evidence"
        else:
            assert (REPO / path).is_file(), f"{path}: no such evidence file (record it, or list it as pending)"
    assert set(data.pending_evidence) <= data.evidence()


def test_every_type_in_the_data_is_a_type_name() -> None:
    data = coverage.load_coverage()
    names = {t.name for t in Q} | {t.name for t in data.fork_types.values()}
    for name, backend in data.backends.items():
        for kind, table in backend.tables.items():
            unknown = set(table.types) - names
            assert not unknown, f"backends.{name}.{kind}: {unknown} are no gguf.GGMLQuantizationType names"


def test_the_data_rejects_a_misspelt_key() -> None:
    data = json.loads(coverage.DATA_FILE.read_text())
    data["backends"]["cuda"]["dense"]["types"]["Q4_K"]["evidense"] = ["x"]
    with pytest.raises(coverage.DataError, match="did you mean 'evidence'"):
        coverage.parse_coverage(data)
    data = json.loads(coverage.DATA_FILE.read_text())
    data["backends"]["cuda"]["dense"]["types"]["Q4_K"] = {"covered": True}
    with pytest.raises(coverage.DataError, match="needs its evidence"):
        coverage.parse_coverage(data)


def test_a_type_removed_from_the_data_flips_the_verdict(dense_model: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    assert run([dense_model], capsys)[0] == 0
    data = json.loads(coverage.DATA_FILE.read_text())
    del data["backends"]["cuda"]["dense"]["types"]["Q4_K"]
    changed = tmp_path / "coverage.json"
    changed.write_text(json.dumps(data))
    monkeypatch.setattr(coverage, "DATA_FILE", changed)
    code, out, _ = run([dense_model], capsys)
    assert code == 1
    assert line(out, "cuda:") == "cuda: NOT covered: dense Q4_K (10 tensors, e.g. blk.0.attn_q.weight): not yet tested"
    assert line(out, "cpu:").startswith("cpu:  covered")


def test_the_console_script_is_declared() -> None:
    pyproject = (REPO / "wheels" / "pyproject.toml").read_text()
    assert 'hiraishin-llama-coverage = "hiraishin_llama.coverage:main"' in pyproject


# --- the line llama-server, llama-cli and llama-speculative-simple print at start -----------------------------


@pytest.fixture
def launched(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The programs' stand-ins in a bin/ of their own; execve records what would have been run."""
    from hiraishin_llama import _launch, switch

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("llama-server", "llama-cli", "llama-speculative-simple", "llama-bench"):
        (bin_dir / name).write_text("#!/bin/sh\n")
    monkeypatch.setattr(_launch, "BIN_DIR", bin_dir)
    monkeypatch.setattr(runtime, "nvidia_library_dirs", lambda: [])
    monkeypatch.setattr(runtime, "environment_warnings", lambda: [])
    monkeypatch.setattr(runtime, "built_backends", lambda: ["cpu", "cuda"])
    for name in switch.NAMES:
        monkeypatch.delenv(name, raising=False)
    calls: list[tuple] = []
    monkeypatch.setattr(_launch.os, "execve", lambda path, argv, env: calls.append((path, argv, env)))
    return calls


def start(program: str, args: list[str], monkeypatch: pytest.MonkeyPatch,
          capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Start a console script as a user would and return its launcher's lines on stderr."""
    from hiraishin_llama import _launch

    monkeypatch.setattr(_launch.sys, "argv", [program, *map(str, args)])
    getattr(_launch, program.replace("-", "_"))()
    captured = capsys.readouterr()
    assert captured.out == ""
    return captured.err.splitlines()


@pytest.mark.parametrize("program", ["llama-server", "llama-cli", "llama-speculative-simple"])
def test_a_covered_model_is_said_covered_at_start(program: str, moe_model: Path, cuda_wheel: dict, launched: list,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    lines = start(program, ["-m", moe_model, "--port", "8080"], monkeypatch, capsys)
    assert lines[1:] == [f"hiraishin-llama: batch-invariant mode covers {moe_model.name} on cuda"]
    (_, argv, _), = launched
    assert argv[1:] == ["-m", str(moe_model), "--port", "8080"]  # the program gets its arguments as given


def test_an_uncovered_weight_type_is_named_at_start(tmp_path: Path, launched: list, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "q5.gguf", "qwen3", dense_tensors(types={"attn_v": Q.TQ2_0}))
    lines = start("llama-server", [f"--model={model}"], monkeypatch, capsys)
    assert lines[1] == ("hiraishin-llama: batch-invariant mode does NOT cover q5.gguf on cuda (dense TQ2_0 (2 tensors, "
                        f"e.g. blk.0.attn_v.weight): {NOT_ON_CUDA}), so greedy speculative decoding may differ from "
                        "plain greedy decoding (hiraishin-llama-coverage MODEL says more)")
    # with no layer on the GPU the CPU backend computes it, which covers every weight type of ggml's table
    lines = start("llama-server", ["-m", model, "-ngl", "0"], monkeypatch, capsys)
    assert lines[1] == "hiraishin-llama: batch-invariant mode covers q5.gguf on cpu"
    assert len(launched) == 2


@pytest.mark.parametrize("placement", [["--cpu-moe"], ["-ncmoe", "4"], ["-ot", r"\.ffn_.*_exps\.=CPU"],
                                       ["--override-tensor=blk\\.1\\.ffn_up_exps=CPU,token_embd=CUDA0"]])
def test_experts_on_the_cpu_count_only_where_the_build_claims_them(
        placement: list[str], moe_model: Path, cuda_wheel: dict, launched: list, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    cuda_wheel["exact_moe_experts_on_cpu_backends"] = []  # revisions 15 and 16
    line = start("llama-cli", ["-m", moe_model, *placement], monkeypatch, capsys)[1]
    assert line.startswith(f"hiraishin-llama: batch-invariant mode does NOT cover {moe_model.name} on cuda (experts "
                           "on the CPU (--cpu-moe, --n-cpu-moe, -ot exps=CPU) are not covered by this build")
    cuda_wheel["exact_moe_experts_on_cpu_backends"] = ["cuda"]  # revision 17 on
    line = start("llama-cli", ["-m", moe_model, *placement], monkeypatch, capsys)[1]
    assert line == f"hiraishin-llama: batch-invariant mode covers {moe_model.name} on cuda"


def test_experts_kept_on_the_gpu_do_not_count_as_on_the_cpu() -> None:
    assert not coverage.experts_on_cpu(["-m", "x.gguf", "-ncmoe", "0", "-ot", "token_embd=CPU"])
    assert coverage.experts_on_cpu(["-ot", "exps=CPU"])


def test_what_the_check_cannot_read_it_says_and_the_program_still_starts(
        tmp_path: Path, launched: list, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "missing.gguf"
    lines = start("llama-server", ["-m", missing], monkeypatch, capsys)
    assert lines[1].startswith(f"hiraishin-llama: coverage of {missing} not checked: ")
    text = tmp_path / "notes.txt"
    text.write_text("not a model\n")
    assert "not checked" in start("llama-server", ["-m", text], monkeypatch, capsys)[1]
    assert len(launched) == 2  # llama-server reports the bad model itself


@pytest.mark.parametrize("args", [[], ["-hf", "org/model-GGUF"]])
def test_no_local_model_no_line(args: list[str], launched: list, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    assert len(start("llama-server", args, monkeypatch, capsys)) == 1  # the mode line alone


def test_no_line_with_the_mode_off_or_for_the_bench(moe_model: Path, launched: list, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert len(start("llama-bench", ["-m", moe_model], monkeypatch, capsys)) == 1
    monkeypatch.setenv("GGML_BATCH_INVARIANT", "0")
    assert len(start("llama-server", ["-m", moe_model], monkeypatch, capsys)) == 1


def test_the_start_line_names_the_structural_problem(tmp_path: Path, launched: list, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    model = write_gguf(tmp_path / "dup-key.gguf", "mamba", dense_tensors(), keys={"general.architectur2": "qwen3"})
    _patch(model, b"general.architectur2", b"general.architecture")
    lines = start("llama-server", ["-m", model], monkeypatch, capsys)
    assert lines[1].startswith(f"hiraishin-llama: coverage of {model} not checked: is not a valid GGUF file: "
                               "duplicate key 'general.architecture'"), lines
    assert len(launched) == 1  # llama-server reports the bad model itself
