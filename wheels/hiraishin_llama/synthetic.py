"""Deterministic synthetic GGUF models with a real architecture and real shapes.

Measuring batch invariance needs models that drive the same kernels as
production checkpoints (same matrix shapes, same quantization formats) but
can be produced anywhere without downloading gigabytes of weights. A model
written here is a ``qwen3``, ``qwen2`` (Qwen2.5-7B), ``gemma3`` (Gemma 3 12B),
``qwen3moe`` (Qwen3-30B-A3B), ``glm4moe`` (GLM-4.5-Air), ``deepseek2``
(DeepSeek-V2-Lite: multi-head latent attention), ``gpt-oss`` (gpt-oss-20b), ``qwen2moe`` (Qwen1.5-MoE-A2.7B: routed experts beside a
shared expert), ``qwen35`` (Qwen3.5/3.6 dense: gated delta net layers with
full attention on every fourth) or ``nemotron_h`` (Nemotron-H: Mamba-2,
attention and MLP layers) GGUF whose bytes are a pure function of (preset,
seed, n_layer): llama.cpp loads it like any converted checkpoint, and two runs on
different machines produce the same file.

The text it generates is meaningless; what matters is that the numerics are
those of a real model of that shape.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

# The directory holding the compiled tools (llama-quantize, hiraishin-replay).
from ._launch import BIN_DIR_ENV

# The dense architecture, and the default of a Preset.
ARCHITECTURE = "qwen3"
# Qwen2 and Qwen2.5 (LLM_ARCH_QWEN2): dense, biases on q, k and v, no q/k norms.
QWEN2 = "qwen2"
# Gemma 3 (LLM_ARCH_GEMMA3): dense, GELU-gated FFN, q/k norms, norms after attention and FFN, sliding window
# attention on all but every sliding_window_pattern-th layer, embedding scaled by sqrt(n_embd), tied output.
GEMMA3 = "gemma3"
# Mixture-of-experts architectures, as llama.cpp names them in src/llama-arch.cpp
# (LLM_ARCH_QWEN3MOE, LLM_ARCH_OPENAI_MOE and LLM_ARCH_QWEN2MOE).
QWEN3MOE = "qwen3moe"
GPT_OSS = "gpt-oss"
QWEN2MOE = "qwen2moe"
# GLM-4.5 (LLM_ARCH_GLM4_MOE): leading dense layers, then routed experts (sigmoid scores plus a per-expert bias)
# beside a shared expert, attention with biases on q, k and v rotating part of each head, and an MTP layer.
GLM4MOE = "glm4moe"
# DeepSeek-V2/V3 (LLM_ARCH_DEEPSEEK2): multi-head latent attention (K and V from a kv_lora_rank latent that the
# KV cache holds as one head), leading dense layers, routed experts beside shared experts.
DEEPSEEK2 = "deepseek2"
# Hybrid recurrent architectures (LLM_ARCH_QWEN35 and LLM_ARCH_NEMOTRON_H): recurrent layers, whose
# state carries over from token to token, between full attention layers.
QWEN35 = "qwen35"
NEMOTRON_H = "nemotron_h"
# Their mixture-of-experts versions (LLM_ARCH_QWEN35MOE, LLM_ARCH_NEMOTRON_H_MOE): the same recurrent and
# attention layers, routed experts beside a shared expert instead of the dense FFN.
QWEN35MOE = "qwen35moe"
NEMOTRON_H_MOE = "nemotron_h_moe"
ARCHITECTURES = (ARCHITECTURE, QWEN3MOE, GPT_OSS, QWEN2MOE, QWEN35, NEMOTRON_H, QWEN35MOE, NEMOTRON_H_MOE, QWEN2,
                 GEMMA3, GLM4MOE, DEEPSEEK2)
# Architectures whose FFNs are dense.
_DENSE_ARCHITECTURES = (ARCHITECTURE, QWEN35, NEMOTRON_H, QWEN2, GEMMA3)
# Architectures with sliding window attention on some layers.
_SWA_ARCHITECTURES = (GPT_OSS, GEMMA3)
# How a preset's rope_scaling_factor stretches positions (llama.cpp's rope.scaling.type).
ROPE_SCALING_TYPES = ("yarn", "linear")
HYBRID_ARCHITECTURES = (QWEN35, NEMOTRON_H, QWEN35MOE, NEMOTRON_H_MOE)
# The gated delta net family and the Mamba-2 family, each with and without experts.
_GDN_ARCHITECTURES = (QWEN35, QWEN35MOE)
_MAMBA2_ARCHITECTURES = (NEMOTRON_H, NEMOTRON_H_MOE)
# Architectures with a shared expert beside the routed ones.
_SHARED_EXPERT_ARCHITECTURES = (QWEN2MOE, QWEN35MOE, NEMOTRON_H_MOE, GLM4MOE, DEEPSEEK2)
# Shared experts weighted by a sigmoid gate of their own (ffn_gate_inp_shexp).
_GATED_SHARED_EXPERT_ARCHITECTURES = (QWEN2MOE, QWEN35MOE)
# Architectures whose loader sizes the shared expert n_ff_exp * expert_shared_count (n_ff_shexp must be a
# multiple of n_ff_exp), whose first n_dense_lead layers have a dense FFN of n_ff (leading_dense_block_count), and
# whose routers score experts by expert_gating (expert_gating_func).
_DENSE_LEAD_ARCHITECTURES = (GLM4MOE, DEEPSEEK2)
# Architectures with MTP blocks after their n_layer layers (nextn_predict_layers).
_NEXTN_ARCHITECTURES = (QWEN35MOE, GLM4MOE)
# Architectures whose graphs read expert_weights_norm and expert_weights_scale.
_EXPERT_WEIGHTS_ARCHITECTURES = (NEMOTRON_H_MOE, GLM4MOE, DEEPSEEK2)
# llama.cpp's expert_gating_func values (LLAMA_EXPERT_GATING_FUNC_TYPE_*): how a router turns logits into scores.
EXPERT_GATING_FUNCS = {"softmax": 1, "sigmoid": 2}

# Layer kinds of the hybrid architectures, in the notation of Nemotron-H's hybrid_override_pattern:
# a recurrent layer (Mamba-2 for nemotron_h, a gated delta net for qwen35), full attention, and
# (nemotron_h only) a layer that is an MLP and nothing else. qwen35 layers all end in an FFN.
RECURRENT_LAYER = "M"
ATTENTION_LAYER = "*"
MLP_LAYER = "-"
# nemotron_h_moe's FFN layer: routed experts and a shared expert, all relu^2 (Nemotron-3's "E").
MOE_LAYER = "E"

QUANTIZER_NAME = "llama-quantize"

# Quantization types that the project measures; names as llama-quantize spells them.
# MXFP4_MOE: expert tensors (3-D, ne[2] > 1) in MXFP4, every other quantizable
# matrix, output.weight included, in Q8_0 (llama_tensor_get_type_impl in src/llama-quant.cpp).
QUANT_TYPES = ("Q4_K_M", "Q6_K", "Q8_0", "MXFP4_MOE", "Q5_K_M", "Q5_K_S", "Q4_0", "IQ4_XS", "IQ4_NL", "Q3_K_M",
               "Q2_K", "F16", "BF16")

# llama.cpp's LLAMA_MAX_EXPERTS.
_MAX_EXPERTS = 512


@dataclass(frozen=True)
class Preset:
    """Hyperparameters of a synthetic model.

    The dense fields describe a qwen3 model; a mixture-of-experts preset
    (n_expert > 0) replaces each layer's FFN by n_expert experts of width
    n_ff_exp of which n_expert_used run per token, and n_ff is then only the
    feed_forward_length key that real conversions write. gpt-oss adds sliding
    window attention (window sliding_window on every other layer, from layer
    0 on: llama.cpp's default SWA period of 2 for that architecture, which
    real gpt-oss GGUFs rely on, writing no pattern key) and YaRN rope scaling
    (factor rope_scaling_factor over rope_scaling_orig_ctx positions).
    qwen2moe adds a shared expert of width n_ff_shexp that every token runs,
    weighted by a sigmoid gate of its own, and biases on q, k and v; qwen2 is
    dense with those biases (and, as qwen2moe, n_head * head_dim == n_embd).
    gemma3 slides a window of sliding_window over all layers but every
    sliding_window_pattern-th (from layer pattern - 1 on), whose rope base is
    rope_freq_base_swa, and scales the global layers' positions linearly
    (rope_scaling_type "linear": factor rope_scaling_factor, no original context).
    glm4moe: its first n_dense_lead layers have a dense SwiGLU of n_ff, the
    others n_expert experts scored by expert_gating ("sigmoid", plus a
    per-expert bias that picks the experts without weighting them) beside
    n_ff_shexp / n_ff_exp shared experts; q, k and v have biases, rope turns
    rope_dim of each head, and n_nextn MTP layers follow (loaded, not run).
    deepseek2 has those FFNs (its scores "softmax" or "sigmoid") behind
    multi-head latent attention: K and V of every head come from a latent of
    kv_lora_rank (the KV cache's one head, beside rope_dim rotated dimensions
    shared by all heads); head_dim is a query/key head's width (qk_nope_head_dim
    + qk_rope_head_dim, rope_dim of it rotated), v_head_dim a value head's; q
    comes through a q_lora_rank bottleneck, or directly where q_lora_rank is 0
    (V2-Lite); n_head_kv is 1, as conversions write it. YaRN's attention
    scale takes yarn_mscale_all_dim (the config's mscale_all_dim).

    The hybrid architectures describe their recurrent layers with the ssm_*
    fields, named like llama.cpp's ssm.* keys. qwen35: ssm_n_group key heads
    and ssm_dt_rank value heads, all ssm_d_state wide (ssm_d_inner =
    ssm_d_state * ssm_dt_rank), after a causal convolution of width
    ssm_d_conv; layer i is full attention where (i + 1) is a multiple of
    full_attention_interval (n_head heads of head_dim, q gated by a second
    half of attn_q), and rotates rope_dim dimensions of each head in four
    interleaved M-RoPE rope_sections. nemotron_h: ssm_dt_rank Mamba-2 heads
    of ssm_d_inner / ssm_dt_rank channels, B and C in ssm_n_group groups of
    state size ssm_d_state; layer_pattern gives each layer's kind
    (RECURRENT_LAYER, ATTENTION_LAYER or MLP_LAYER, n_ff wide, relu^2), and
    a model with more layers than the pattern repeats it. Their MoE versions
    replace each FFN by experts beside a shared expert of n_ff_shexp: qwen35moe
    a SwiGLU shared expert behind a sigmoid gate (as qwen2moe), and n_nextn
    MTP blocks (Qwen3.5/3.6's own draft head: a full-attention layer with
    experts over the embedding of the next token and the last hidden state)
    after its n_layer layers; nemotron_h_moe relu^2 experts without a gate,
    routed by sigmoid scores plus a per-expert bias, the n_expert_used weights
    renormalized (expert_weights_norm) and scaled by expert_weights_scale,
    its pattern's FFN layers MOE_LAYER.
    """

    name: str
    n_embd: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    n_vocab: int
    n_layer: int
    context_length: int
    rope_freq_base: float = 1e6
    rms_norm_eps: float = 1e-6
    architecture: str = ARCHITECTURE
    n_expert: int = 0
    n_expert_used: int = 0
    n_ff_exp: int = 0
    sliding_window: int = 0
    rope_scaling_factor: float = 0.0
    rope_scaling_orig_ctx: int = 0
    n_ff_shexp: int = 0
    ssm_d_conv: int = 0
    ssm_d_state: int = 0
    ssm_n_group: int = 0
    ssm_dt_rank: int = 0
    ssm_d_inner: int = 0
    full_attention_interval: int = 0
    layer_pattern: str = ""
    # Rotary dimensions of each head; 0 rotates all of head_dim.
    rope_dim: int = 0
    rope_sections: tuple[int, ...] = ()
    n_nextn: int = 0
    expert_weights_norm: bool = False
    expert_weights_scale: float = 0.0
    sliding_window_pattern: int = 0
    rope_freq_base_swa: float = 0.0
    rope_scaling_type: str = "yarn"
    n_dense_lead: int = 0
    expert_gating: str = ""
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    v_head_dim: int = 0
    yarn_mscale_all_dim: float = 0.0

    def __post_init__(self) -> None:
        if self.architecture not in ARCHITECTURES:
            raise ValueError(f"preset {self.name!r}: unknown architecture {self.architecture!r}; "
                             f"valid architectures: {', '.join(ARCHITECTURES)}")
        if self.architecture in _DENSE_ARCHITECTURES:
            if self.n_expert or self.n_expert_used or self.n_ff_exp:
                raise ValueError(f"preset {self.name!r}: a {self.architecture} model has no experts; use "
                                 f"architecture {QWEN3MOE}, {GPT_OSS}, {QWEN2MOE}, {QWEN35MOE} or "
                                 f"{NEMOTRON_H_MOE} for a mixture of experts")
        elif not (0 < self.n_expert_used <= self.n_expert <= _MAX_EXPERTS and self.n_ff_exp > 0):
            raise ValueError(f"preset {self.name!r}: a {self.architecture} model needs 0 < n_expert_used <= "
                             f"n_expert <= {_MAX_EXPERTS} and n_ff_exp > 0, got n_expert={self.n_expert}, "
                             f"n_expert_used={self.n_expert_used}, n_ff_exp={self.n_ff_exp}")
        if (self.architecture in _SHARED_EXPERT_ARCHITECTURES) != (self.n_ff_shexp > 0):
            raise ValueError(f"preset {self.name!r}: n_ff_shexp (the shared expert's width) must be positive for "
                             f"{', '.join(_SHARED_EXPERT_ARCHITECTURES)} and 0 otherwise, got {self.n_ff_shexp}")
        # llama.cpp's qwen35moe graph builds one MTP block (graph_mtp asserts n_layer_nextn == 1); GLM-4.5 has one.
        if self.n_nextn not in ((0, 1) if self.architecture in _NEXTN_ARCHITECTURES else (0,)):
            raise ValueError(f"preset {self.name!r}: n_nextn (MTP blocks) must be 0 or 1 for "
                             f"{', '.join(_NEXTN_ARCHITECTURES)} and 0 otherwise, got {self.n_nextn}")
        if (self.expert_weights_norm or self.expert_weights_scale) and \
                self.architecture not in _EXPERT_WEIGHTS_ARCHITECTURES:
            raise ValueError(f"preset {self.name!r}: expert_weights_norm and expert_weights_scale are read by "
                             f"{NEMOTRON_H_MOE}'s graph only (and {', '.join(_EXPERT_WEIGHTS_ARCHITECTURES[1:])}'s); "
                             f"leave them unset for {self.architecture}")
        self._check_dense_lead()
        self._check_mla()
        if self.expert_weights_scale < 0 or not np.isfinite(self.expert_weights_scale):
            raise ValueError(f"preset {self.name!r}: expert_weights_scale must be a finite number >= 0 (0: no "
                             f"scaling), got {self.expert_weights_scale}")
        if self.architecture in (QWEN2, QWEN2MOE) and self.n_head * self.head_dim != self.n_embd:
            raise ValueError(f"preset {self.name!r}: {self.architecture} needs n_head * head_dim == n_embd (its q and "
                             f"output projections are n_embd x n_embd), got {self.n_head} * {self.head_dim} != "
                             f"{self.n_embd}")
        # llama.cpp's qwen2 graph asserts that rope turns all of each head.
        if self.architecture == QWEN2 and self.rope_dim not in (0, self.head_dim):
            raise ValueError(f"preset {self.name!r}: {QWEN2} rotates all of each head; rope_dim must be 0 or "
                             f"head_dim {self.head_dim}, got {self.rope_dim}")
        if (self.architecture in _SWA_ARCHITECTURES) != (self.sliding_window > 0):
            raise ValueError(f"preset {self.name!r}: sliding_window must be positive for "
                             f"{' and '.join(_SWA_ARCHITECTURES)} and 0 otherwise, got {self.sliding_window}")
        self._check_gemma3()
        if self.rope_scaling_type not in ROPE_SCALING_TYPES:
            raise ValueError(f"preset {self.name!r}: unknown rope_scaling_type {self.rope_scaling_type!r}; valid "
                             f"types: {', '.join(ROPE_SCALING_TYPES)}")
        if self.rope_scaling_factor < 0 or not np.isfinite(self.rope_scaling_factor):
            raise ValueError(f"preset {self.name!r}: rope_scaling_factor must be a finite number >= 0 (0: no "
                             f"scaling), got {self.rope_scaling_factor}")
        if self.rope_scaling_type == "linear":
            if self.rope_scaling_orig_ctx:
                raise ValueError(f"preset {self.name!r}: linear rope scaling has no original context; leave "
                                 f"rope_scaling_orig_ctx unset, got {self.rope_scaling_orig_ctx}")
        elif (self.rope_scaling_factor > 0) != (self.rope_scaling_orig_ctx > 0):
            raise ValueError(f"preset {self.name!r}: YaRN rope scaling needs both rope_scaling_factor and "
                             "rope_scaling_orig_ctx, or neither")
        if not 0 <= self.rope_dim <= self.head_dim or self.rope_dim % 2:
            raise ValueError(f"preset {self.name!r}: rope_dim must be even and at most head_dim {self.head_dim} "
                             f"(0 for all of it), got {self.rope_dim}")
        self._check_recurrent_layers()

    def _check_dense_lead(self) -> None:
        if self.architecture not in _DENSE_LEAD_ARCHITECTURES:
            if self.n_dense_lead or self.expert_gating:
                raise ValueError(f"preset {self.name!r}: n_dense_lead and expert_gating are for "
                                 f"{', '.join(_DENSE_LEAD_ARCHITECTURES)}; leave them unset for {self.architecture}")
            return
        if self.expert_gating not in EXPERT_GATING_FUNCS:
            raise ValueError(f"preset {self.name!r}: {self.architecture} needs expert_gating "
                             f"{' or '.join(EXPERT_GATING_FUNCS)} (how the router scores experts), got "
                             f"{self.expert_gating!r}")
        if not 0 <= self.n_dense_lead <= self.n_layer:
            raise ValueError(f"preset {self.name!r}: n_dense_lead (leading layers with a dense FFN) must be from 0 "
                             f"to n_layer {self.n_layer}, got {self.n_dense_lead}")
        if self.n_dense_lead and self.n_ff <= 0:
            raise ValueError(f"preset {self.name!r}: the {self.n_dense_lead} leading dense layers need n_ff > 0")
        # The loader sizes the shared experts n_ff_exp * expert_shared_count.
        if self.n_ff_exp and self.n_ff_shexp % self.n_ff_exp:
            raise ValueError(f"preset {self.name!r}: {self.architecture}'s shared experts are n_ff_exp wide each; "
                             f"n_ff_shexp {self.n_ff_shexp} must be a multiple of n_ff_exp {self.n_ff_exp}")

    def _check_mla(self) -> None:
        mla = {"q_lora_rank": self.q_lora_rank, "kv_lora_rank": self.kv_lora_rank, "v_head_dim": self.v_head_dim,
               "yarn_mscale_all_dim": self.yarn_mscale_all_dim}
        if self.architecture != DEEPSEEK2:
            extra = [name for name, value in mla.items() if value]
            if extra:
                raise ValueError(f"preset {self.name!r}: {', '.join(extra)} describe {DEEPSEEK2}'s latent attention; "
                                 f"leave them unset for {self.architecture}")
            return
        if self.kv_lora_rank <= 0 or self.v_head_dim <= 0 or self.q_lora_rank < 0:
            raise ValueError(f"preset {self.name!r}: {DEEPSEEK2} needs kv_lora_rank > 0, v_head_dim > 0 and "
                             f"q_lora_rank >= 0 (0: q projected directly), got kv_lora_rank={self.kv_lora_rank}, "
                             f"v_head_dim={self.v_head_dim}, q_lora_rank={self.q_lora_rank}")
        # The loader asserts a non-rotated part (qk_nope_head_dim = head_dim - rope_dim >= 1).
        if not 0 < self.rope_dim < self.head_dim:
            raise ValueError(f"preset {self.name!r}: {DEEPSEEK2} rotates rope_dim (qk_rope_head_dim) of each "
                             f"query/key head and not the rest; rope_dim must be from 1 to head_dim - 1 = "
                             f"{self.head_dim - 1}, got {self.rope_dim}")
        # Conversions write one KV head: the latent, which every head reads.
        if self.n_head_kv != 1:
            raise ValueError(f"preset {self.name!r}: {DEEPSEEK2}'s KV cache holds the latent as one head; n_head_kv "
                             f"must be 1, got {self.n_head_kv}")
        if self.yarn_mscale_all_dim and not (self.rope_scaling_type == "yarn" and self.rope_scaling_factor):
            raise ValueError(f"preset {self.name!r}: yarn_mscale_all_dim needs YaRN rope scaling "
                             "(rope_scaling_factor and rope_scaling_orig_ctx)")
        if self.yarn_mscale_all_dim < 0 or not np.isfinite(self.yarn_mscale_all_dim):
            raise ValueError(f"preset {self.name!r}: yarn_mscale_all_dim must be a finite number >= 0, got "
                             f"{self.yarn_mscale_all_dim}")

    def _check_gemma3(self) -> None:
        if self.architecture != GEMMA3:
            if self.sliding_window_pattern or self.rope_freq_base_swa:
                raise ValueError(f"preset {self.name!r}: sliding_window_pattern and rope_freq_base_swa describe "
                                 f"{GEMMA3}'s local layers; leave them unset for {self.architecture}")
            return
        # Pattern 1 would make every layer global; llama.cpp takes a missing key for its default 6.
        if self.sliding_window_pattern < 2:
            raise ValueError(f"preset {self.name!r}: {GEMMA3} needs sliding_window_pattern >= 2 (every "
                             f"pattern-th layer is global, the others slide the window), got "
                             f"{self.sliding_window_pattern}")
        if not (self.rope_freq_base_swa > 0 and np.isfinite(self.rope_freq_base_swa)):
            raise ValueError(f"preset {self.name!r}: {GEMMA3} needs a positive rope_freq_base_swa (the local "
                             f"layers' rope base), got {self.rope_freq_base_swa}")
        if self.rope_dim not in (0, self.head_dim):
            raise ValueError(f"preset {self.name!r}: {GEMMA3} rotates all of each head; rope_dim must be 0 or "
                             f"head_dim {self.head_dim}, got {self.rope_dim}")

    def _check_recurrent_layers(self) -> None:
        ssm = {"ssm_d_conv": self.ssm_d_conv, "ssm_d_state": self.ssm_d_state, "ssm_n_group": self.ssm_n_group,
               "ssm_dt_rank": self.ssm_dt_rank, "ssm_d_inner": self.ssm_d_inner}
        if self.architecture not in HYBRID_ARCHITECTURES:
            extra = [name for name, value in (*ssm.items(), ("full_attention_interval", self.full_attention_interval),
                                              ("layer_pattern", self.layer_pattern),
                                              ("rope_sections", self.rope_sections)) if value]
            if extra:
                raise ValueError(f"preset {self.name!r}: {', '.join(extra)} describe the recurrent layers of "
                                 f"{', '.join(HYBRID_ARCHITECTURES)}; a {self.architecture} model has none")
            return
        if min(ssm.values()) <= 0:
            raise ValueError(f"preset {self.name!r}: a {self.architecture} model needs positive "
                             + ", ".join(f"{name}={value}" for name, value in ssm.items()))
        # Heads share their group's key (qwen35) or B and C (nemotron_h): llama.cpp repeats the
        # groups over the heads, which needs whole heads per group.
        if self.ssm_dt_rank % self.ssm_n_group:
            raise ValueError(f"preset {self.name!r}: ssm_dt_rank {self.ssm_dt_rank} (heads) must be a multiple of "
                             f"ssm_n_group {self.ssm_n_group}")
        if self.architecture in _GDN_ARCHITECTURES:
            self._check_qwen35()
        else:
            self._check_nemotron_h()

    def _check_qwen35(self) -> None:
        # The loader sizes the value heads ssm_d_state wide while the graph takes ssm_d_inner /
        # ssm_dt_rank, so llama.cpp only computes the model right when the two agree.
        if self.ssm_d_inner != self.ssm_d_state * self.ssm_dt_rank:
            raise ValueError(f"preset {self.name!r}: {self.architecture} needs ssm_d_inner == ssm_d_state * ssm_dt_rank "
                             f"(value heads are ssm_d_state wide), got {self.ssm_d_inner} != "
                             f"{self.ssm_d_state} * {self.ssm_dt_rank}")
        # 1 would leave no recurrent layer; llama.cpp takes a missing interval for its default 4.
        if self.full_attention_interval < 2:
            raise ValueError(f"preset {self.name!r}: {self.architecture} needs full_attention_interval >= 2 (every "
                             f"interval-th layer is full attention), got {self.full_attention_interval}")
        if self.layer_pattern:
            raise ValueError(f"preset {self.name!r}: {self.architecture} places its attention layers by "
                             "full_attention_interval; layer_pattern is for " + ", ".join(_MAMBA2_ARCHITECTURES))
        # IMROPE rotates pairs of dimensions, each pair in one of the four sections; real
        # conversions write sections that cover the rotated dimensions exactly.
        rope_dim = self.rope_dim or self.head_dim
        if len(self.rope_sections) != 4 or min(self.rope_sections) < 0 or 2 * sum(self.rope_sections) != rope_dim:
            raise ValueError(f"preset {self.name!r}: {self.architecture} needs 4 non-negative rope_sections summing to "
                             f"rope_dim / 2 = {rope_dim // 2}, got {self.rope_sections}")

    def _check_nemotron_h(self) -> None:
        if self.full_attention_interval or self.rope_dim or self.rope_sections:
            raise ValueError(f"preset {self.name!r}: {self.architecture} places its layers by layer_pattern and has "
                             "no rope; leave full_attention_interval, rope_dim and rope_sections unset")
        # llama.cpp's loader makes every FFN layer of a model with experts a mixture of experts.
        ffn_layer, ffn_name = (MOE_LAYER, "experts") if self.is_moe else (MLP_LAYER, "MLP")
        kinds = RECURRENT_LAYER + ATTENTION_LAYER + ffn_layer
        if not self.layer_pattern or set(self.layer_pattern) - set(kinds):
            raise ValueError(f"preset {self.name!r}: {self.architecture} needs a layer_pattern of {kinds!r} "
                             f"characters (one per layer: Mamba-2, attention, {ffn_name}), got {self.layer_pattern!r}")
        if len(self.layer_pattern) != self.n_layer:
            raise ValueError(f"preset {self.name!r}: layer_pattern has {len(self.layer_pattern)} layers, "
                             f"n_layer is {self.n_layer}")
        # The Mamba-2 graph splits ssm_d_inner into whole heads and whole norm groups.
        if self.ssm_d_inner % self.ssm_dt_rank or self.ssm_d_inner % self.ssm_n_group:
            raise ValueError(f"preset {self.name!r}: ssm_d_inner {self.ssm_d_inner} must be a multiple of "
                             f"ssm_dt_rank {self.ssm_dt_rank} (heads) and ssm_n_group {self.ssm_n_group}")
        # llama.cpp tells the layer kinds apart by these two counts alone (both 0: Mamba-2).
        if ATTENTION_LAYER in self.layer_pattern and self.n_head_kv <= 0:
            raise ValueError(f"preset {self.name!r}: attention layers need n_head_kv > 0")
        if ffn_layer in self.layer_pattern and self.n_ff <= 0:
            raise ValueError(f"preset {self.name!r}: {ffn_name} layers need n_ff > 0 (their feed_forward_length "
                             "entry tells them apart)")

    @property
    def is_moe(self) -> bool:
        """Whether the FFN is a mixture of experts (qwen3moe, gpt-oss, qwen2moe, qwen35moe, nemotron_h_moe)."""
        return self.n_expert > 0

    def layer_kinds(self, n_layer: int) -> str:
        """The kind of each of n_layer layers (RECURRENT_LAYER, ATTENTION_LAYER, MLP_LAYER), one character each."""
        if self.architecture in _GDN_ARCHITECTURES:
            return "".join(ATTENTION_LAYER if (layer + 1) % self.full_attention_interval == 0 else RECURRENT_LAYER
                           for layer in range(n_layer))
        if self.architecture in _MAMBA2_ARCHITECTURES:
            return "".join(self.layer_pattern[layer % len(self.layer_pattern)] for layer in range(n_layer))
        return ATTENTION_LAYER * n_layer

    def sliding_window_layers(self, n_layer: int) -> list[bool]:
        """Whether each of n_layer layers slides its attention window (llama_hparams::set_swa_pattern: gpt-oss's
        default period 2, gemma3's sliding_window_pattern, the last layer of each period global)."""
        if not self.sliding_window:
            return [False] * n_layer
        period = self.sliding_window_pattern or 2
        return [layer % period < period - 1 for layer in range(n_layer)]


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        # Qwen3-8B shapes with a llama-sized vocabulary; a few layers are enough to
        # exercise every kernel while keeping the file around 2 GB at F16.
        Preset(name="qwen3-8b", n_embd=4096, n_head=32, n_head_kv=8, head_dim=128,
               n_ff=12288, n_vocab=32000, n_layer=4, context_length=40960),
        # Small enough for CPU unit tests, while every row length stays a multiple of
        # 256 so that K-quants (block size 256) apply to all matrices.
        Preset(name="tiny", n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
               n_ff=768, n_vocab=4096, n_layer=2, context_length=4096),
        # Qwen2.5-7B (llama.cpp's qwen2) as its config.json describes it, with a llama-sized vocabulary (the
        # real one has 152064 tokens): 28 layers, 28 heads of 128 over 4 KV heads with biases on q, k and v,
        # a SwiGLU of 18944, rope theta 1e6 over all of each head, rms_norm_eps 1e-6. Rows of 3584 and
        # 18944 are multiples of 256, so K-quants apply everywhere, as for the real model.
        Preset(name="qwen2", architecture=QWEN2, n_embd=3584, n_head=28, n_head_kv=4, head_dim=128,
               n_ff=18944, n_vocab=32000, n_layer=28, context_length=32768),
        Preset(name="tiny-qwen2", architecture=QWEN2, n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
               n_ff=768, n_vocab=4096, n_layer=2, context_length=4096),
        # Gemma 3 12B (llama.cpp's gemma3) as its config.json describes it, with a llama-sized vocabulary (the real
        # one has 262208 tokens): 48 layers, 16 heads of 256 over 8 KV heads with q/k norms, a GELU-tanh gated
        # FFN of 15360, norms after attention and FFN; five local layers (window 1024, rope theta 1e4) then a
        # global one (rope theta 1e6, positions scaled linearly by 8), the embedding scaled by sqrt(3840) and
        # tied to the output. The tiny version keeps heads of 256 and the pattern (layer 5 global) with a
        # window of 128, so that a CPU replay of 600 tokens slides it.
        Preset(name="gemma3", architecture=GEMMA3, n_embd=3840, n_head=16, n_head_kv=8, head_dim=256,
               n_ff=15360, n_vocab=32000, n_layer=48, context_length=131072,
               sliding_window=1024, sliding_window_pattern=6, rope_freq_base_swa=1e4,
               rope_scaling_type="linear", rope_scaling_factor=8.0),
        Preset(name="tiny-gemma3", architecture=GEMMA3, n_embd=256, n_head=2, n_head_kv=1, head_dim=256,
               n_ff=768, n_vocab=4096, n_layer=6, context_length=4096,
               sliding_window=128, sliding_window_pattern=6, rope_freq_base_swa=1e4,
               rope_scaling_type="linear", rope_scaling_factor=8.0),
        # Qwen3-30B-A3B as its GGUF describes it (feed_forward_length 6144 is metadata
        # only; every layer is a mixture of experts), with a llama-sized vocabulary. The
        # top-8 routing weights are renormalized (norm_topk_prob), as llama.cpp's qwen3moe
        # graph always does; real GGUFs carry no key for it.
        Preset(name="qwen3moe", architecture=QWEN3MOE, n_embd=2048, n_head=32, n_head_kv=4, head_dim=128,
               n_ff=6144, n_vocab=32000, n_layer=48, context_length=40960,
               n_expert=128, n_expert_used=8, n_ff_exp=768),
        # gpt-oss-20b as its GGUF describes it, with a llama-sized vocabulary (the real
        # one has 201088 tokens). Rows of 2880 are no multiple of 256, so K-quant types
        # fall back to Q5_0 (for Q4_K) and Q8_0 (for Q6_K) there, as for the real model.
        Preset(name="gpt-oss", architecture=GPT_OSS, n_embd=2880, n_head=64, n_head_kv=8, head_dim=64,
               n_ff=2880, n_vocab=32000, n_layer=24, context_length=131072,
               rope_freq_base=150000.0, rms_norm_eps=1e-5,
               n_expert=32, n_expert_used=4, n_ff_exp=2880, sliding_window=128,
               rope_scaling_factor=32.0, rope_scaling_orig_ctx=4096),
        # Qwen1.5-MoE-A2.7B (llama.cpp's qwen2moe) as its GGUF describes it, with a llama-sized
        # vocabulary: 60 routed experts of 1408 (4 used) beside a shared expert of 5632 that every
        # token runs, gated by a sigmoid. Rows of 1408 are no multiple of 256, so the routed experts'
        # down projections fall back from K-quant types, as for the real model.
        Preset(name="qwen2moe", architecture=QWEN2MOE, n_embd=2048, n_head=16, n_head_kv=16, head_dim=128,
               n_ff=5632, n_vocab=32000, n_layer=24, context_length=8192,
               n_expert=60, n_expert_used=4, n_ff_exp=1408, n_ff_shexp=5632),
        # GLM-4.5-Air (llama.cpp's glm4moe) as its config.json describes it, with a llama-sized vocabulary (the
        # real one has 151552 tokens): 46 layers, 96 heads of 128 over 8 KV heads with biases on q, k and v and
        # half of each head rotated (partial_rotary_factor 0.5), the first layer a dense SwiGLU of 10944
        # (first_k_dense_replace 1), the others 128 experts of 1408 (8 used, sigmoid scores plus
        # e_score_correction_bias, renormalized, routed_scaling_factor 1.0) beside one shared expert of 1408,
        # rope theta 1e6, rms_norm_eps 1e-5, and one MTP layer (num_nextn_predict_layers 1). Rows of 1408 are no
        # multiple of 256, so K-quant types fall back there, as for the real model.
        Preset(name="glm4moe", architecture=GLM4MOE, n_embd=4096, n_head=96, n_head_kv=8, head_dim=128,
               n_ff=10944, n_vocab=32000, n_layer=46, context_length=131072, rms_norm_eps=1e-5, rope_dim=64,
               n_expert=128, n_expert_used=8, n_ff_exp=1408, n_ff_shexp=1408, n_dense_lead=1,
               expert_gating="sigmoid", expert_weights_norm=True, expert_weights_scale=1.0, n_nextn=1),
        # DeepSeek-V2-Lite (llama.cpp's deepseek2) as its config.json describes it, with a llama-sized vocabulary
        # (the real one has 102400 tokens): 27 layers of multi-head latent attention, 16 heads whose K and V come
        # from a latent of kv_lora_rank 512 (q projected directly: q_lora_rank null), query/key heads of
        # qk_nope_head_dim 128 + qk_rope_head_dim 64, value heads of v_head_dim 128; the first layer a dense
        # SwiGLU of 10944 (first_k_dense_replace 1), the others 64 experts of 1408 (6 used, softmax scores, not
        # renormalized, routed_scaling_factor 1.0) beside 2 shared experts; rope theta 1e4 with YaRN (factor 40
        # over 4096 positions, mscale_all_dim 0.707), rms_norm_eps 1e-6. The KV cache holds the latent as one
        # head of 576 (K) and 512 (V), as conversions write it.
        Preset(name="deepseek2", architecture=DEEPSEEK2, n_embd=2048, n_head=16, n_head_kv=1, head_dim=192,
               n_ff=10944, n_vocab=32000, n_layer=27, context_length=163840, rope_freq_base=1e4, rope_dim=64,
               q_lora_rank=0, kv_lora_rank=512, v_head_dim=128,
               rope_scaling_factor=40.0, rope_scaling_orig_ctx=4096, yarn_mscale_all_dim=0.707,
               n_expert=64, n_expert_used=6, n_ff_exp=1408, n_ff_shexp=2816, n_dense_lead=1,
               expert_gating="softmax", expert_weights_scale=1.0),
        # Small mixtures of experts for CPU tests, every row length a multiple of 256.
        # 16 experts, not 8: llama-quantize special-cases n_expert == 8 (Mixtral: attn_k
        # and attn_v in Q8_0, attn_output in Q5_K), which the real presets do not hit.
        Preset(name="tiny-qwen3moe", architecture=QWEN3MOE, n_embd=256, n_head=4, n_head_kv=2, head_dim=128,
               n_ff=1024, n_vocab=4096, n_layer=2, context_length=4096,
               n_expert=16, n_expert_used=4, n_ff_exp=256),
        # A window of 32, not 128, so that short CPU runs already slide it.
        Preset(name="tiny-gpt-oss", architecture=GPT_OSS, n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
               n_ff=256, n_vocab=4096, n_layer=2, context_length=4096,
               rope_freq_base=150000.0, rms_norm_eps=1e-5,
               n_expert=16, n_expert_used=4, n_ff_exp=256, sliding_window=32,
               rope_scaling_factor=32.0, rope_scaling_orig_ctx=128),
        Preset(name="tiny-qwen2moe", architecture=QWEN2MOE, n_embd=256, n_head=4, n_head_kv=4, head_dim=64,
               n_ff=512, n_vocab=4096, n_layer=2, context_length=4096,
               n_expert=16, n_expert_used=4, n_ff_exp=256, n_ff_shexp=512),
        # GLM-4.5-Air's layout in small: q twice n_embd wide (as 96 x 128 is three times 4096), half of each head
        # rotated, a dense first layer, two expert layers, and the MTP layer.
        Preset(name="tiny-glm4moe", architecture=GLM4MOE, n_embd=256, n_head=4, n_head_kv=2, head_dim=128,
               n_ff=768, n_vocab=4096, n_layer=3, context_length=4096, rms_norm_eps=1e-5, rope_dim=64,
               n_expert=16, n_expert_used=4, n_ff_exp=256, n_ff_shexp=256, n_dense_lead=1,
               expert_gating="sigmoid", expert_weights_norm=True, expert_weights_scale=1.0, n_nextn=1),
        # DeepSeek-V2-Lite's layout in small, its latent attention at full size (a latent of 512, heads of 128 + 64
        # and values of 128, so K and V cache rows of 576 and 512 as in the real model): a dense first layer, then
        # 16 experts of 256 (4 used) beside 2 shared experts.
        Preset(name="tiny-deepseek2", architecture=DEEPSEEK2, n_embd=256, n_head=4, n_head_kv=1, head_dim=192,
               n_ff=768, n_vocab=4096, n_layer=3, context_length=4096, rope_freq_base=1e4, rope_dim=64,
               q_lora_rank=0, kv_lora_rank=512, v_head_dim=128,
               rope_scaling_factor=40.0, rope_scaling_orig_ctx=4096, yarn_mscale_all_dim=0.707,
               n_expert=16, n_expert_used=4, n_ff_exp=256, n_ff_shexp=512, n_dense_lead=1,
               expert_gating="softmax", expert_weights_scale=1.0),
        # The 27B dense Qwen3.5/3.6 (llama.cpp's qwen35) as its config.json describes it, with a llama-sized
        # vocabulary (the real one has 248320 tokens): gated delta nets of 48 value heads over 16 key
        # heads, all 128 wide, and on every 4th layer full attention with 24 heads of 256 (4 KV heads)
        # whose q is gated by a second half of attn_q. A quarter of each head rotates (partial_rotary_factor
        # 0.25: 64 dimensions in the interleaved M-RoPE sections 11, 11, 10 that conversions write).
        # The sizes stay on CUDA's kernels: GDN heads of 128, 10240 conv channels (a multiple of 128).
        Preset(name="qwen35", architecture=QWEN35, n_embd=5120, n_head=24, n_head_kv=4, head_dim=256,
               n_ff=17408, n_vocab=32000, n_layer=64, context_length=262144, rope_freq_base=1e7,
               rope_dim=64, rope_sections=(11, 11, 10, 0), full_attention_interval=4,
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=16, ssm_dt_rank=48, ssm_d_inner=6144),
        # Nemotron-H-8B-Base-8K as its config.json describes it (hybrid_override_pattern: 24 Mamba-2
        # layers of 128 heads of 64 with 8 groups of state 128, 4 attention layers of 32 heads of 128
        # with 8 KV heads, 24 relu^2 MLPs of 21504), with a llama-sized vocabulary (the real one has
        # 131072 tokens). Mamba-2 state 128 with heads of 64 and 10240 conv channels stay on CUDA's kernels.
        Preset(name="nemotron-h", architecture=NEMOTRON_H, n_embd=4096, n_head=32, n_head_kv=8, head_dim=128,
               n_ff=21504, n_vocab=32000, n_layer=52, context_length=8192, rms_norm_eps=1e-5,
               layer_pattern="M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M-",
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=8, ssm_dt_rank=128, ssm_d_inner=8192),
        # Small hybrids for CPU tests, every row length a multiple of 256. tiny-qwen35: three gated
        # delta nets (4 value heads over 2 key heads, 128 wide as in the real model) and full attention
        # as layer 3. tiny-nemotron-h: two Mamba-2 layers (8 heads of 64, 2 groups of state 128), then
        # attention, whose input already depends on the recurrent states, and MLPs between them.
        Preset(name="tiny-qwen35", architecture=QWEN35, n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
               n_ff=768, n_vocab=4096, n_layer=4, context_length=4096, rope_freq_base=1e7,
               rope_dim=16, rope_sections=(3, 3, 2, 0), full_attention_interval=4,
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=2, ssm_dt_rank=4, ssm_d_inner=512),
        Preset(name="tiny-nemotron-h", architecture=NEMOTRON_H, n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
               n_ff=768, n_vocab=4096, n_layer=5, context_length=4096, rms_norm_eps=1e-5,
               layer_pattern="M-M*-",
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=2, ssm_dt_rank=8, ssm_d_inner=512),
        # Qwen3.6-35B-A3B (and Qwen3.5-35B-A3B: llama.cpp's qwen35moe) as its config.json describes it, with a
        # llama-sized vocabulary (the real one has 248320 tokens): 40 layers, three gated delta nets (32 value
        # heads over 16 key heads, 128 wide) then gated full attention (16 heads of 256 over 2 KV heads, 64
        # rotated dimensions), each followed by 256 experts of 512 (8 used) beside a shared expert of 512
        # behind a sigmoid gate, and one MTP block (mtp_num_hidden_layers 1) as the model's own draft.
        # feed_forward_length is metadata only here.
        Preset(name="qwen35moe", architecture=QWEN35MOE, n_embd=2048, n_head=16, n_head_kv=2, head_dim=256,
               n_ff=512, n_vocab=32000, n_layer=40, context_length=262144, rope_freq_base=1e7,
               rope_dim=64, rope_sections=(11, 11, 10, 0), full_attention_interval=4,
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=16, ssm_dt_rank=32, ssm_d_inner=4096,
               n_expert=256, n_expert_used=8, n_ff_exp=512, n_ff_shexp=512, n_nextn=1),
        # Nemotron-3-Nano-30B-A3B (llama.cpp's nemotron_h_moe) as its config.json describes it, with a
        # llama-sized vocabulary (the real one has 131072 tokens): hybrid_override_pattern of 23 Mamba-2
        # layers (64 heads of 64, 8 groups of state 128), 6 attention layers (32 heads of 128 over 2 KV
        # heads) and 23 layers of 128 relu^2 experts of 1856 (6 used, sigmoid scores plus a per-expert bias,
        # renormalized and scaled by routed_scaling_factor 2.5) beside a shared expert of 3712. Rows of 2688
        # and 1856 are no multiple of 256, so K-quant types fall back there, as for the real model.
        Preset(name="nemotron-h-moe", architecture=NEMOTRON_H_MOE, n_embd=2688, n_head=32, n_head_kv=2,
               head_dim=128, n_ff=1856, n_vocab=32000, n_layer=52, context_length=262144, rms_norm_eps=1e-5,
               layer_pattern="MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*EMEMEMEME",
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=8, ssm_dt_rank=64, ssm_d_inner=4096,
               n_expert=128, n_expert_used=6, n_ff_exp=1856, n_ff_shexp=3712,
               expert_weights_norm=True, expert_weights_scale=2.5),
        # Their small versions for CPU tests, every row length a multiple of 256: tiny-qwen35moe is
        # tiny-qwen35 with 16 experts of 256 (4 used), a shared expert and an MTP block; tiny-nemotron-h-moe
        # is tiny-nemotron-h with its MLPs as 16 experts (4 used) beside a shared expert.
        Preset(name="tiny-qwen35moe", architecture=QWEN35MOE, n_embd=256, n_head=4, n_head_kv=2, head_dim=64,
               n_ff=256, n_vocab=4096, n_layer=4, context_length=4096, rope_freq_base=1e7,
               rope_dim=16, rope_sections=(3, 3, 2, 0), full_attention_interval=4,
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=2, ssm_dt_rank=4, ssm_d_inner=512,
               n_expert=16, n_expert_used=4, n_ff_exp=256, n_ff_shexp=256, n_nextn=1),
        Preset(name="tiny-nemotron-h-moe", architecture=NEMOTRON_H_MOE, n_embd=256, n_head=4, n_head_kv=2,
               head_dim=64, n_ff=256, n_vocab=4096, n_layer=5, context_length=4096, rms_norm_eps=1e-5,
               layer_pattern="MEM*E",
               ssm_d_conv=4, ssm_d_state=128, ssm_n_group=2, ssm_dt_rank=8, ssm_d_inner=512,
               n_expert=16, n_expert_used=4, n_ff_exp=256, n_ff_shexp=512,
               expert_weights_norm=True, expert_weights_scale=2.5),
    )
}

# Token ids of the special tokens, in the order the SentencePiece "llama"
# tokenizer expects them.
UNK_ID = 0
BOS_ID = 1
EOS_ID = 2
FIRST_BYTE_ID = 3
N_BYTE_TOKENS = 256
# The SentencePiece word-boundary marker (U+2581), which llama.cpp substitutes for spaces.
SPACE_MARKER = "\u2581"

# Logits are output_norm(x) @ output, so with unit-RMS hidden states their
# standard deviation equals this factor; large enough that the top two logits
# are well separated and greedy decoding does not hinge on float ties.
LOGIT_STD = 3.0

# gemma3's input embedding (token_embd scaled by sqrt(n_embd)) has RMS GEMMA3_INPUT_RMS / sqrt(n_embd): with the
# output tied to token_embd, a logit's standard deviation is output_norm's weight times that RMS, and the input
# token's own logit stands out of the others by about GEMMA3_INPUT_RMS / (the residual stream's RMS, which the
# layers' unit writes grow to about sqrt(2 * n_layer)) of their standard deviations: 0.3 for tiny-gemma3, 0.1 for
# gemma3. At 4 (1.2 standard deviations for tiny-gemma3) its greedy text repeated one token nine times running.
GEMMA3_INPUT_RMS = 1.0

# gpt-oss biases, relative to the unit-scale activations they are added to
# (scaled like their matrices where they write into the residual stream).
BIAS_STD = 0.1
# gpt-oss attention sinks: one logit per head that competes with the scores in
# the softmax, which have about unit scale (q and k are unit-scale, divided by
# sqrt(head_dim)).
SINK_STD = 1.0
# What the synthetic MTP block writes beside the next token's embedding, relative to a trunk layer's writes.
MTP_WRITE_SCALE = 0.1
# nemotron_h_moe's per-expert score bias, added to sigmoid scores in (0, 1) to pick the experts: on the
# scale of the scores' own spread, so that it moves the choice without deciding it alone.
EXPERT_SCORE_BIAS_STD = 0.1

# Recurrent layers decay their state by exp(dt * a) per token, dt = softplus(x @ w + dt_bias) > 0, so
# a must be negative (conversions store -exp(A_log)). Mamba-2's own initialization: a uniform in
# [-16, -1], and dt_bias the inverse softplus of a time step in [0.001, 0.1] (about log(dt)), which
# keeps decays near 1 and the state long-lived.
MAMBA2_A_RANGE = (-16.0, -1.0)
MAMBA2_DT_BIAS_RANGE = (-6.9, -2.25)
# The gated delta net's gate is softplus(alpha + dt_bias) * a with alpha of unit scale; these give
# per-token decays between about 0.5 and 0.99, so that the state neither vanishes within a few
# tokens nor never forgets.
GDN_A_RANGE = (-1.0, -0.02)
GDN_DT_BIAS_RANGE = (-1.0, 1.0)

# Normal draws are generated in chunks of this many values to bound peak memory
# on the large presets. The chunking is part of the byte-exact output, so it
# must not change.
_DRAW_CHUNK = 1 << 22


class QuantizationError(RuntimeError):
    """llama-quantize ran but did not produce the quantized model."""


# llama.cpp's file type for each quantization type, stamped into directly written models.
_FILE_TYPES = {
    "Q4_K_M": gguf.LlamaFileType.MOSTLY_Q4_K_M,
    "Q6_K": gguf.LlamaFileType.MOSTLY_Q6_K,
    "Q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
    "MXFP4_MOE": gguf.LlamaFileType.MOSTLY_MXFP4_MOE,
    "Q5_K_M": gguf.LlamaFileType.MOSTLY_Q5_K_M,
    "Q5_K_S": gguf.LlamaFileType.MOSTLY_Q5_K_S,
    "Q4_0": gguf.LlamaFileType.MOSTLY_Q4_0,
    "IQ4_XS": gguf.LlamaFileType.MOSTLY_IQ4_XS,
    "IQ4_NL": gguf.LlamaFileType.MOSTLY_IQ4_NL,
    "Q3_K_M": gguf.LlamaFileType.MOSTLY_Q3_K_M,
    "Q2_K": gguf.LlamaFileType.MOSTLY_Q2_K,
    "F16": gguf.LlamaFileType.MOSTLY_F16,
    "BF16": gguf.LlamaFileType.MOSTLY_BF16,
}


@dataclass(frozen=True)
class _BlockScales:
    """Where a quantized block keeps its f16 scales, and how to size them.

    A block written from uniformly random bits dequantizes to weights whose
    standard deviation is std_per_d times its scale d (derived from the
    uniform distributions of the quants and the 6-bit or int8 sub-block
    scales; checked against gguf's dequantization in the tests), so
    d = std / std_per_d gives the F16 model's scale. K-quants with a minimum
    subtract dmin * m; dmin = dmin_per_d * d centres the weights on zero.
    Q5_1 adds its minimum m as it is, so its factor is negative. Types whose
    uniformly random quants are not centred on zero and that have no minimum
    (Q4_0, IQ4_NL) get a random sign on each block's d instead (random_sign).
    """

    d_offset: int
    std_per_d: float
    dmin_offset: int | None = None
    dmin_per_d: float = 0.0
    random_sign: bool = False


_DIRECT_BLOCK_SCALES = {
    # w = d*sc*q - dmin*m with q in 0..15, sc and m in 0..63
    gguf.GGMLQuantizationType.Q4_K: _BlockScales(d_offset=0, std_per_d=258.3, dmin_offset=2, dmin_per_d=7.5),
    # as Q4_K with q in 0..31
    gguf.GGMLQuantizationType.Q5_K: _BlockScales(d_offset=0, std_per_d=526.9, dmin_offset=2, dmin_per_d=15.5),
    # w = d*sc*(q - 32) with q in 0..63 and sc an int8; d is the block's last two bytes
    gguf.GGMLQuantizationType.Q6_K: _BlockScales(d_offset=208, std_per_d=1365.7),
    # w = d*q with q an int8
    gguf.GGMLQuantizationType.Q8_0: _BlockScales(d_offset=0, std_per_d=73.9),
    # w = d*q + m with q in 0..31 (std sqrt((32**2 - 1)/12)) and m = -15.5*d; what
    # llama-quantize gives a Q5_K tensor whose rows are no multiple of 256
    gguf.GGMLQuantizationType.Q5_1: _BlockScales(d_offset=0, std_per_d=9.233, dmin_offset=2, dmin_per_d=-15.5),
    # w = d*sc*q - dmin*m with q in 0..3, sc and m in 0..15 (a byte's two nibbles): E[sc*q] = 11.25 = 1.5 E[m];
    # Var(sc*q) = 77.5*3.5 - 11.25**2, Var(1.5 m) = 2.25*21.25; d and dmin are the block's last four bytes
    gguf.GGMLQuantizationType.Q2_K: _BlockScales(d_offset=80, std_per_d=13.874, dmin_offset=82, dmin_per_d=1.5),
    # w = d*(sc - 32)*q with q in -4..3 (two bits and a bit of hmask) and sc in 0..63: E[(sc-32)**2] = 341.5,
    # E[q**2] = 5.5 (mean 0.25 d, 0.6% of the std); d is the block's last two bytes
    gguf.GGMLQuantizationType.Q3_K: _BlockScales(d_offset=108, std_per_d=43.338),
    # w = d*(q - 8) with q in 0..15: E[(q - 8)**2] = 21.5, centred by the sign of d
    gguf.GGMLQuantizationType.Q4_0: _BlockScales(d_offset=0, std_per_d=4.6368, random_sign=True),
    # w = d*kvalues[q], the 16 non-uniform IQ4_NL values (E[kvalues**2] = 4548, mean -5.9), centred by the sign of d
    gguf.GGMLQuantizationType.IQ4_NL: _BlockScales(d_offset=0, std_per_d=67.439, random_sign=True),
    # w = d*(ls - 32)*kvalues[q] with the 6-bit sub-block scales ls in 0..63: sqrt(341.5 * 4548)
    gguf.GGMLQuantizationType.IQ4_XS: _BlockScales(d_offset=0, std_per_d=1246.3),
}

# Q5_0 (what llama-quantize gives a Q4_K tensor whose rows are no multiple of 256):
# w = d*(q - 16), q in 0..31. Uniform random bits would centre the weights on -d/2
# (5% of their std), so q is drawn uniformly from 1..31 instead: w/d is uniform on
# -15..15, mean 0, E[(w/d)**2] = 2 * (1**2 + ... + 15**2) / 31 = 80.
_Q5_0_STD_PER_D = float(np.sqrt(80.0))

# MXFP4: w = kvalues[q] * 2**(e - 128) (kvalues holds the e2m1 values doubled, and
# ggml_e8m0_to_fp32_half halves the e8m0 scale 2**(e - 127)), q a 4-bit code. With
# uniformly random codes E[kvalues**2] = 2 * (0 + 1 + 4 + 9 + 16 + 36 + 64 + 144) / 16
# = 34.25, so a block of exponent e has std sqrt(34.25) * 2**(e - 128). The exponent
# only reaches stds a factor of 2 apart; for a std s between those of e and e + 1,
# whose variances are v and 4v, a fraction p = (s**2 / v - 1) / 3 of the blocks
# (drawn at random) gets e + 1, and the variance is (1 - p) v + 4 p v = s**2.
_MXFP4_STD_PER_SCALE = float(np.sqrt(34.25))

# One line of `llama-quantize --dry-run` per tensor, e.g.
# "[   3/  25] token_embd.weight   - [   256,   4096,      1,      1], type =    f16, size = 2.00 MiB -> 0.56 MiB (q4_K)"
# Tensors it leaves as they are end in "size = X MiB" with no target type.
_DRY_RUN_LINE = re.compile(r"^\[\s*\d+/\s*\d+\]\s+(?P<name>\S+)\s+- \[[^\]]*\], type =\s*(?P<source>\w+),"
                           r"\s+size =[^(\n]*?(?:\((?P<target>\w+)\))?\s*$", re.MULTILINE)


@dataclass(frozen=True)
class _TensorSpec:
    name: str
    # numpy order (slowest dimension first), i.e. the reverse of ggml's ne[].
    shape: tuple[int, ...]
    # Standard deviation of the normal draw; None for norm weights, which are all ones,
    # and for uniform draws.
    std: float | None
    # Kept in F32 in F16 models, as conversions keep routers, biases, sinks and the
    # recurrent layers' convolution kernels (llama-quantize then keeps them too).
    f32: bool = False
    # Drawn uniformly from [low, high) instead (std None, F32): the recurrent layers'
    # decay rates and time-step biases, which need one sign or a range, not a spread about zero.
    uniform: tuple[float, float] | None = None
    # Added to the normal draw's leading square block (a matrix that passes its first inputs through):
    # the MTP block's eh_proj, so that the draft head sees the next token's embedding.
    identity: float = 0.0
    # The value of every weight of a norm (std None, no uniform draw): gemma3's output norm sets the logits' scale.
    fill: float = 1.0

    @property
    def dtype(self) -> type[np.floating]:
        # llama.cpp keeps 1-D norm weights in F32 even in F16 and quantized models.
        return np.float32 if self.std is None or self.f32 else np.float16

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * np.dtype(self.dtype).itemsize


def get_preset(preset: str | Preset) -> Preset:
    if isinstance(preset, Preset):
        return preset
    try:
        return PRESETS[preset]
    except KeyError:
        valid = ", ".join(sorted(PRESETS))
        raise ValueError(f"unknown synthetic model preset {preset!r}; valid presets: {valid}") from None


def build_vocab(n_vocab: int) -> tuple[list[str], list[float], list[int]]:
    """Return (tokens, scores, token_types) of a SentencePiece-style vocabulary.

    Layout: <unk>, <s>, </s>, the 256 byte-fallback tokens <0x00>..<0xFF>, then
    word pieces over a-z (with and without the word-boundary marker) by
    increasing length. Byte fallback makes every string tokenizable, and the
    pieces give the merge-based tokenizer something to merge.
    """
    n_fixed = FIRST_BYTE_ID + N_BYTE_TOKENS
    if n_vocab <= n_fixed:
        raise ValueError(f"vocabulary size {n_vocab} is too small; it must exceed {n_fixed} "
                         "(3 special tokens and 256 byte tokens)")

    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{byte:02X}>" for byte in range(N_BYTE_TOKENS)]
    token_types = [int(gguf.TokenType.UNKNOWN), int(gguf.TokenType.CONTROL), int(gguf.TokenType.CONTROL)]
    token_types += [int(gguf.TokenType.BYTE)] * N_BYTE_TOKENS
    scores = [0.0] * n_fixed

    pieces = itertools.islice(_word_pieces(), n_vocab - n_fixed)
    for rank, piece in enumerate(pieces):
        tokens.append(piece)
        # Earlier (shorter) pieces score higher, like frequent pieces in a trained model.
        scores.append(-float(rank))
        token_types.append(int(gguf.TokenType.NORMAL))
    return tokens, scores, token_types


def _word_pieces() -> Iterator[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    yield SPACE_MARKER
    for length in itertools.count(1):
        for combo in itertools.product(letters, repeat=length):
            word = "".join(combo)
            yield SPACE_MARKER + word
            yield word


def _tensor_specs(preset: Preset, n_layer: int, deep_scale: float = 1.0) -> list[_TensorSpec]:
    """Every tensor llama.cpp's loader for the preset's architecture requires, with its initialization scale.

    Projections use std 1/sqrt(fan_in) so each matmul preserves the activation
    scale; the projections that write into the residual stream (two per layer,
    one per nemotron_h layer) are further scaled by 1/sqrt(the number of
    residual writes, 2 * n_layer or n_layer) so the stream grows slowly with depth.
    ``deep_scale`` (dense qwen3 only) scales those writes once more in every layer
    past the first: how far the model's logits move from its first layer's.
    """
    if preset.architecture in _GDN_ARCHITECTURES:
        return _qwen35_tensor_specs(preset, n_layer)
    if preset.architecture in _MAMBA2_ARCHITECTURES:
        return _nemotron_h_tensor_specs(preset, n_layer)
    if preset.architecture == QWEN3MOE:
        return _qwen3moe_tensor_specs(preset, n_layer)
    if preset.architecture == GPT_OSS:
        return _gpt_oss_tensor_specs(preset, n_layer)
    if preset.architecture == QWEN2MOE:
        return _qwen2moe_tensor_specs(preset, n_layer)
    if preset.architecture == QWEN2:
        return _qwen2_tensor_specs(preset, n_layer)
    if preset.architecture == GEMMA3:
        return _gemma3_tensor_specs(preset, n_layer)
    if preset.architecture == GLM4MOE:
        return _glm4moe_tensor_specs(preset, n_layer)
    if preset.architecture == DEEPSEEK2:
        return _deepseek2_tensor_specs(preset, n_layer)
    n_embd = preset.n_embd

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), 1.0)]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        residual_scale = 1.0 / np.sqrt(2.0 * n_layer) * (deep_scale if layer > 0 else 1.0)
        specs += _qwen3_attention_specs(preset, blk, residual_scale)
        specs += [
            _TensorSpec(f"{blk}.ffn_gate.weight", (preset.n_ff, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.ffn_up.weight", (preset.n_ff, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.ffn_down.weight", (n_embd, preset.n_ff), residual_scale / np.sqrt(preset.n_ff)),
        ]
    return specs + _output_specs(preset)


def _qkv_specs(preset: Preset, blk: str, biases: bool) -> list[_TensorSpec]:
    """The attention's input norm and its q, k and v projections, each followed by its bias where the
    architecture has them (qwen2, qwen2moe, gpt-oss)."""
    n_embd = preset.n_embd
    specs = [_TensorSpec(f"{blk}.attn_norm.weight", (n_embd,), None)]
    for name, rows in (("attn_q", preset.n_head * preset.head_dim), ("attn_k", preset.n_head_kv * preset.head_dim),
                       ("attn_v", preset.n_head_kv * preset.head_dim)):
        specs.append(_TensorSpec(f"{blk}.{name}.weight", (rows, n_embd), 1.0 / np.sqrt(n_embd)))
        if biases:
            specs.append(_TensorSpec(f"{blk}.{name}.bias", (rows,), BIAS_STD, f32=True))
    return specs


def _qwen3_attention_specs(preset: Preset, blk: str, residual_scale: float) -> list[_TensorSpec]:
    """A qwen3 layer's attention (q and k normed per head) and the FFN's input norm."""
    n_embd = preset.n_embd
    n_q = preset.n_head * preset.head_dim
    return _qkv_specs(preset, blk, biases=False) + [
        _TensorSpec(f"{blk}.attn_q_norm.weight", (preset.head_dim,), None),
        _TensorSpec(f"{blk}.attn_k_norm.weight", (preset.head_dim,), None),
        _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_q), residual_scale / np.sqrt(n_q)),
        _TensorSpec(f"{blk}.ffn_norm.weight", (n_embd,), None),
    ]


def _output_specs(preset: Preset) -> list[_TensorSpec]:
    return [
        _TensorSpec("output_norm.weight", (preset.n_embd,), None),
        _TensorSpec("output.weight", (preset.n_vocab, preset.n_embd), LOGIT_STD / np.sqrt(preset.n_embd)),
    ]


def _expert_specs(preset: Preset, blk: str, residual_scale: float, biases: bool) -> list[_TensorSpec]:
    """The router (F32, as real GGUFs keep it) and the 3-D expert tensors, ggml ne
    {n_embd, n_ff_exp, n_expert} for gate and up and {n_ff_exp, n_embd, n_expert} for down.
    nemotron_h_moe's experts have no gate, and its router a bias on the sigmoid scores that picks the
    experts (exp_probs_b, e_score_correction_bias in the checkpoints) without weighting them, as have the
    routers with sigmoid expert_gating (glm4moe)."""
    n_embd, n_expert, n_ff_exp = preset.n_embd, preset.n_expert, preset.n_ff_exp
    gated = preset.architecture != NEMOTRON_H_MOE
    specs = [_TensorSpec(f"{blk}.ffn_gate_inp.weight", (n_expert, n_embd), 1.0 / np.sqrt(n_embd), f32=True)]
    if biases:
        specs.append(_TensorSpec(f"{blk}.ffn_gate_inp.bias", (n_expert,), BIAS_STD, f32=True))
    if not gated or preset.expert_gating == "sigmoid":
        specs.append(_TensorSpec(f"{blk}.exp_probs_b.bias", (n_expert,), EXPERT_SCORE_BIAS_STD, f32=True))
    for name, shape, std, bias_shape, bias_std in (
        ("ffn_gate_exps", (n_expert, n_ff_exp, n_embd), 1.0 / np.sqrt(n_embd), (n_expert, n_ff_exp), BIAS_STD),
        ("ffn_up_exps", (n_expert, n_ff_exp, n_embd), 1.0 / np.sqrt(n_embd), (n_expert, n_ff_exp), BIAS_STD),
        ("ffn_down_exps", (n_expert, n_embd, n_ff_exp), residual_scale / np.sqrt(n_ff_exp), (n_expert, n_embd),
         residual_scale * BIAS_STD),
    ):
        if name == "ffn_gate_exps" and not gated:
            continue
        specs.append(_TensorSpec(f"{blk}.{name}.weight", shape, std))
        if biases:
            specs.append(_TensorSpec(f"{blk}.{name}.bias", bias_shape, bias_std, f32=True))
    return specs


def _shared_expert_specs(preset: Preset, blk: str, residual_scale: float) -> list[_TensorSpec]:
    """The shared expert that every token runs: qwen2moe's and qwen35moe's a SwiGLU weighted by a sigmoid
    gate of its own (ffn_gate_inp_shexp, a vector of n_embd), glm4moe's a SwiGLU (its shared experts side by side)
    without one, nemotron_h_moe's a relu^2 of up and down."""
    n_embd, n_ff_shexp = preset.n_embd, preset.n_ff_shexp
    specs = []
    if preset.architecture in _GATED_SHARED_EXPERT_ARCHITECTURES:
        specs.append(_TensorSpec(f"{blk}.ffn_gate_inp_shexp.weight", (n_embd,), 1.0 / np.sqrt(n_embd), f32=True))
    if preset.architecture != NEMOTRON_H_MOE:
        specs.append(_TensorSpec(f"{blk}.ffn_gate_shexp.weight", (n_ff_shexp, n_embd), 1.0 / np.sqrt(n_embd)))
    return specs + [
        _TensorSpec(f"{blk}.ffn_up_shexp.weight", (n_ff_shexp, n_embd), 1.0 / np.sqrt(n_embd)),
        _TensorSpec(f"{blk}.ffn_down_shexp.weight", (n_embd, n_ff_shexp), residual_scale / np.sqrt(n_ff_shexp)),
    ]


def _qwen3moe_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """qwen3's attention (with q and k norms) and a mixture of experts instead of the dense FFN
    (llama_model_qwen3moe::load_arch_tensors)."""
    residual_scale = 1.0 / np.sqrt(2.0 * n_layer)

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, preset.n_embd), 1.0)]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        specs += _qwen3_attention_specs(preset, blk, residual_scale)
        specs += _expert_specs(preset, blk, residual_scale, biases=False)
    return specs + _output_specs(preset)


def _qwen2moe_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """qwen2's attention (biases on q, k and v, no q/k norms), the routed experts, and a shared expert
    with its sigmoid gate ffn_gate_inp_shexp, a vector of n_embd (llama_model_qwen2moe::load_arch_tensors)."""
    n_embd = preset.n_embd
    residual_scale = 1.0 / np.sqrt(2.0 * n_layer)

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), 1.0)]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        specs += _qkv_specs(preset, blk, biases=True)  # q is n_embd x n_embd here (Preset checks it)
        specs += [
            _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_embd), residual_scale / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.ffn_norm.weight", (n_embd,), None),
        ]
        specs += _expert_specs(preset, blk, residual_scale, biases=False)
        specs += _shared_expert_specs(preset, blk, residual_scale)
    return specs + _output_specs(preset)


def _dense_ffn_specs(preset: Preset, blk: str, residual_scale: float) -> list[_TensorSpec]:
    """A SwiGLU (GELU for gemma3) FFN of n_ff: gate and up, then down into the residual stream."""
    n_embd, n_ff = preset.n_embd, preset.n_ff
    return [
        _TensorSpec(f"{blk}.ffn_gate.weight", (n_ff, n_embd), 1.0 / np.sqrt(n_embd)),
        _TensorSpec(f"{blk}.ffn_up.weight", (n_ff, n_embd), 1.0 / np.sqrt(n_embd)),
        _TensorSpec(f"{blk}.ffn_down.weight", (n_embd, n_ff), residual_scale / np.sqrt(n_ff)),
    ]


def _qwen2_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """qwen2 (llama_model_qwen2::load_arch_tensors): attention with biases on q, k and v and no q/k norms,
    an n_embd x n_embd output projection, and a dense SwiGLU FFN."""
    n_embd = preset.n_embd
    residual_scale = 1.0 / np.sqrt(2.0 * n_layer)

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), 1.0)]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        specs += _qkv_specs(preset, blk, biases=True)  # q is n_embd x n_embd here (Preset checks it)
        specs += [
            _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_embd), residual_scale / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.ffn_norm.weight", (n_embd,), None),
        ]
        specs += _dense_ffn_specs(preset, blk, residual_scale)
    return specs + _output_specs(preset)


def _mtp_specs(preset: Preset, blk: str) -> list[_TensorSpec]:
    """An MTP block's own tensors: eh_proj over [normed embedding of the next token; normed hidden state] (2 n_embd)
    into n_embd, passing the embedding through (see _qwen35_tensor_specs), and the two norms."""
    n_embd = preset.n_embd
    return [
        _TensorSpec(f"{blk}.nextn.eh_proj.weight", (n_embd, 2 * n_embd), MTP_WRITE_SCALE / np.sqrt(2.0 * n_embd),
                    identity=1.0),
        _TensorSpec(f"{blk}.nextn.enorm.weight", (n_embd,), None),
        _TensorSpec(f"{blk}.nextn.hnorm.weight", (n_embd,), None),
    ]


def _glm4moe_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """glm4moe (llama_model_glm4_moe::load_arch_tensors): attention with biases on q, k and v (no q/k norms, as
    GLM-4.5-Air), post_attention_norm before the FFN, a dense SwiGLU in the first n_dense_lead layers and routed
    experts (with the score bias exp_probs_b) beside the shared experts in the others; then the n_nextn MTP
    layers, each a full layer with experts and the MTP block's own tensors (and shared_head_norm, which
    GLM-4.5's checkpoints carry), which llama.cpp loads but does not run."""
    n_embd, n_q = preset.n_embd, preset.n_head * preset.head_dim
    trunk_residual_scale = 1.0 / np.sqrt(2.0 * n_layer)

    def layer_specs(layer: int, residual_scale: float) -> list[_TensorSpec]:
        blk = f"blk.{layer}"
        specs = _qkv_specs(preset, blk, biases=True) + [
            _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_q), residual_scale / np.sqrt(n_q)),
            _TensorSpec(f"{blk}.post_attention_norm.weight", (n_embd,), None),
        ]
        if layer < preset.n_dense_lead:
            return specs + _dense_ffn_specs(preset, blk, residual_scale)
        return specs + _expert_specs(preset, blk, residual_scale, biases=False) + \
            _shared_expert_specs(preset, blk, residual_scale)

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), 1.0)]
    for layer in range(n_layer):
        specs += layer_specs(layer, trunk_residual_scale)
    for layer in range(n_layer, n_layer + preset.n_nextn):
        blk = f"blk.{layer}"
        specs += layer_specs(layer, trunk_residual_scale * MTP_WRITE_SCALE) + _mtp_specs(preset, blk) + [
            _TensorSpec(f"{blk}.nextn.shared_head_norm.weight", (n_embd,), None)]
    return specs + _output_specs(preset)


def _deepseek2_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """deepseek2 (llama_model_deepseek2::load_arch_tensors, with MLA as conversions write it: attn_kv_b split into
    attn_k_b and attn_v_b): q from attn_q (or attn_q_a, its norm and attn_q_b with a q_lora_rank), the latent and
    the shared rotated key from attn_kv_a_mqa, the latent normed (attn_kv_a_norm), each head's key (non-rotated
    part) and value from it through attn_k_b and attn_v_b, ggml ne {qk_nope, kv_lora_rank, n_head} and
    {kv_lora_rank, v_head_dim, n_head}; then ffn_norm and a dense SwiGLU in the first n_dense_lead layers, routed
    experts (with exp_probs_b under sigmoid scores) beside the shared experts in the others.

    attn_k_b and attn_v_b read the normed latent (fan-in kv_lora_rank) in the checkpoints' kv_b_proj, so they take
    1/sqrt(kv_lora_rank): unit-scale keys and values, whether the graph absorbs attn_k_b into q or not."""
    n_embd, n_head, head_dim = preset.n_embd, preset.n_head, preset.head_dim
    kv_lora, q_lora, rope_dim = preset.kv_lora_rank, preset.q_lora_rank, preset.rope_dim
    qk_nope, n_q, n_v = head_dim - rope_dim, n_head * head_dim, n_head * preset.v_head_dim
    residual_scale = 1.0 / np.sqrt(2.0 * n_layer)

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), 1.0)]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        specs.append(_TensorSpec(f"{blk}.attn_norm.weight", (n_embd,), None))
        if q_lora:
            specs += [
                _TensorSpec(f"{blk}.attn_q_a_norm.weight", (q_lora,), None),
                _TensorSpec(f"{blk}.attn_q_a.weight", (q_lora, n_embd), 1.0 / np.sqrt(n_embd)),
                _TensorSpec(f"{blk}.attn_q_b.weight", (n_q, q_lora), 1.0 / np.sqrt(q_lora)),
            ]
        else:
            specs.append(_TensorSpec(f"{blk}.attn_q.weight", (n_q, n_embd), 1.0 / np.sqrt(n_embd)))
        specs += [
            _TensorSpec(f"{blk}.attn_kv_a_norm.weight", (kv_lora,), None),
            _TensorSpec(f"{blk}.attn_kv_a_mqa.weight", (kv_lora + rope_dim, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.attn_k_b.weight", (n_head, kv_lora, qk_nope), 1.0 / np.sqrt(kv_lora)),
            _TensorSpec(f"{blk}.attn_v_b.weight", (n_head, preset.v_head_dim, kv_lora), 1.0 / np.sqrt(kv_lora)),
            _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_v), residual_scale / np.sqrt(n_v)),
            _TensorSpec(f"{blk}.ffn_norm.weight", (n_embd,), None),
        ]
        if layer < preset.n_dense_lead:
            specs += _dense_ffn_specs(preset, blk, residual_scale)
        else:
            specs += _expert_specs(preset, blk, residual_scale, biases=False)
            specs += _shared_expert_specs(preset, blk, residual_scale)
    return specs + _output_specs(preset)


def _gemma3_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """gemma3 (llama_model_gemma3::load_arch_tensors): qwen3's attention (q and k normed per head), each
    sublayer's output RMS-normed (post_attention_norm, post_ffw_norm) before it joins the residual stream, a
    GELU-gated FFN, and no output.weight: the logits come from token_embd (tied), after output_norm.

    The post norms make every write unit-RMS whatever its matrices' scale, so these take 1/sqrt(fan_in) at any
    depth. With the output tied, the residual stream's copy of the input embedding (scaled by sqrt(n_embd))
    votes for the input token itself: the embedding is drawn at GEMMA3_INPUT_RMS / sqrt(n_embd) RMS after that
    scaling, small beside the layers' unit writes, so that the model does not just repeat its input, and
    output_norm's weights, all LOGIT_STD / that RMS, give the logits LOGIT_STD as elsewhere."""
    n_embd, head_dim = preset.n_embd, preset.head_dim
    n_q, n_kv = preset.n_head * head_dim, preset.n_head_kv * head_dim
    input_rms = GEMMA3_INPUT_RMS / np.sqrt(n_embd)

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), input_rms / np.sqrt(n_embd))]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        specs += [
            _TensorSpec(f"{blk}.attn_norm.weight", (n_embd,), None),
            _TensorSpec(f"{blk}.attn_q.weight", (n_q, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.attn_k.weight", (n_kv, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.attn_v.weight", (n_kv, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_q), 1.0 / np.sqrt(n_q)),
            _TensorSpec(f"{blk}.post_attention_norm.weight", (n_embd,), None),
            _TensorSpec(f"{blk}.attn_k_norm.weight", (head_dim,), None),
            _TensorSpec(f"{blk}.attn_q_norm.weight", (head_dim,), None),
            _TensorSpec(f"{blk}.ffn_norm.weight", (n_embd,), None),
        ]
        specs += _dense_ffn_specs(preset, blk, residual_scale=1.0)
        specs.append(_TensorSpec(f"{blk}.post_ffw_norm.weight", (n_embd,), None))
    return specs + [_TensorSpec("output_norm.weight", (n_embd,), None, fill=LOGIT_STD / input_rms)]


def _gpt_oss_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """gpt-oss (llama_model_openai_moe::load_arch_tensors): attention with biases and one sink
    logit per head, a post-attention norm before the experts, and biases on the router and
    on every expert."""
    n_embd, n_vocab = preset.n_embd, preset.n_vocab
    n_q = preset.n_head * preset.head_dim
    residual_scale = 1.0 / np.sqrt(2.0 * n_layer)

    specs = [_TensorSpec("token_embd.weight", (n_vocab, n_embd), 1.0)]
    for layer in range(n_layer):
        blk = f"blk.{layer}"
        specs += _qkv_specs(preset, blk, biases=True)
        specs += [
            _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_q), residual_scale / np.sqrt(n_q)),
            _TensorSpec(f"{blk}.attn_output.bias", (n_embd,), residual_scale * BIAS_STD, f32=True),
            _TensorSpec(f"{blk}.attn_sinks.weight", (preset.n_head,), SINK_STD, f32=True),
            _TensorSpec(f"{blk}.post_attention_norm.weight", (n_embd,), None),
        ]
        specs += _expert_specs(preset, blk, residual_scale, biases=True)
    return specs + _output_specs(preset)


def _qwen35_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """qwen35 (llama_model_qwen35::load_arch_tensors): gated delta nets and, every full_attention_interval-th
    layer, gated full attention, each followed by a dense SwiGLU FFN behind post_attention_norm; qwen35moe
    (llama_model_qwen35moe) has experts and a shared expert instead, and after its n_layer layers the MTP
    block: a full-attention layer with experts whose input is eh_proj of the normed embedding of the next
    token beside the normed last hidden state, read out through the model's output_norm and output."""
    n_embd, head_dim = preset.n_embd, preset.head_dim
    n_q, n_kv = preset.n_head * head_dim, preset.n_head_kv * head_dim
    key_dim = preset.ssm_d_state * preset.ssm_n_group
    value_dim = preset.ssm_d_inner
    # The convolution runs over q, k and v together, as attn_qkv produces them.
    conv_dim = 2 * key_dim + value_dim
    trunk_residual_scale = 1.0 / np.sqrt(2.0 * n_layer)
    residual_scale = trunk_residual_scale

    def gated_attention(blk: str) -> list[_TensorSpec]:
        return [
            # Each head's query and then its output gate (a sigmoid on the attention's output).
            _TensorSpec(f"{blk}.attn_q.weight", (2 * n_q, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.attn_k.weight", (n_kv, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.attn_v.weight", (n_kv, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.attn_q_norm.weight", (head_dim,), None),
            _TensorSpec(f"{blk}.attn_k_norm.weight", (head_dim,), None),
            _TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_q), residual_scale / np.sqrt(n_q)),
        ]

    def ffn(blk: str) -> list[_TensorSpec]:
        if preset.is_moe:
            return _expert_specs(preset, blk, residual_scale, biases=False) + \
                _shared_expert_specs(preset, blk, residual_scale)
        return [
            _TensorSpec(f"{blk}.ffn_gate.weight", (preset.n_ff, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.ffn_up.weight", (preset.n_ff, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.ffn_down.weight", (n_embd, preset.n_ff), residual_scale / np.sqrt(preset.n_ff)),
        ]

    def norms(blk: str) -> list[_TensorSpec]:
        return [_TensorSpec(f"{blk}.attn_norm.weight", (n_embd,), None),
                _TensorSpec(f"{blk}.post_attention_norm.weight", (n_embd,), None)]

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), 1.0)]
    for layer, kind in enumerate(preset.layer_kinds(n_layer)):
        blk = f"blk.{layer}"
        specs += norms(blk)
        if kind == ATTENTION_LAYER:
            specs += gated_attention(blk)
        else:
            n_heads = preset.ssm_dt_rank
            specs += [
                _TensorSpec(f"{blk}.attn_qkv.weight", (conv_dim, n_embd), 1.0 / np.sqrt(n_embd)),
                # z, which gates the normed output through a SiLU
                _TensorSpec(f"{blk}.attn_gate.weight", (value_dim, n_embd), 1.0 / np.sqrt(n_embd)),
                # depthwise: each channel sums ssm_d_conv taps
                _TensorSpec(f"{blk}.ssm_conv1d.weight", (conv_dim, preset.ssm_d_conv),
                            1.0 / np.sqrt(preset.ssm_d_conv), f32=True),
                _TensorSpec(f"{blk}.ssm_dt.bias", (n_heads,), None, uniform=GDN_DT_BIAS_RANGE),
                _TensorSpec(f"{blk}.ssm_a", (n_heads,), None, uniform=GDN_A_RANGE),
                # one logit per value head: beta (the delta rule's write strength) and alpha (the decay)
                _TensorSpec(f"{blk}.ssm_beta.weight", (n_heads, n_embd), 1.0 / np.sqrt(n_embd)),
                _TensorSpec(f"{blk}.ssm_alpha.weight", (n_heads, n_embd), 1.0 / np.sqrt(n_embd)),
                _TensorSpec(f"{blk}.ssm_norm.weight", (preset.ssm_d_state,), None),
                _TensorSpec(f"{blk}.ssm_out.weight", (n_embd, value_dim), residual_scale / np.sqrt(value_dim)),
            ]
        specs += ffn(blk)
    # The MTP block as a draft head that agrees with the trunk part of the time, as a trained one does: its
    # eh_proj passes the next token's normed embedding through and its own layer writes little, so it
    # predicts what the embedding alone points to, which the trunk's layers then move more or less.
    residual_scale = trunk_residual_scale * MTP_WRITE_SCALE
    for layer in range(n_layer, n_layer + preset.n_nextn):
        blk = f"blk.{layer}"
        specs += norms(blk) + gated_attention(blk) + ffn(blk) + [
            # [normed embedding; normed hidden state] (2 n_embd) -> n_embd
            _TensorSpec(f"{blk}.nextn.eh_proj.weight", (n_embd, 2 * n_embd), MTP_WRITE_SCALE / np.sqrt(2.0 * n_embd),
                        identity=1.0),
            _TensorSpec(f"{blk}.nextn.enorm.weight", (n_embd,), None),
            _TensorSpec(f"{blk}.nextn.hnorm.weight", (n_embd,), None),
        ]
    return specs + _output_specs(preset)


def _nemotron_h_tensor_specs(preset: Preset, n_layer: int) -> list[_TensorSpec]:
    """nemotron_h (llama_model_nemotron_h::load_arch_tensors): each layer one norm and one of a Mamba-2
    mixer, attention without rope, biases or q/k norms, or an MLP of up and down projections
    (nemotron_h_moe: relu^2 experts beside a shared expert)."""
    n_embd, d_inner, n_heads = preset.n_embd, preset.ssm_d_inner, preset.ssm_dt_rank
    bc_dim = 2 * preset.ssm_n_group * preset.ssm_d_state
    n_q = preset.n_head * preset.head_dim
    # One residual write per layer.
    residual_scale = 1.0 / np.sqrt(n_layer)

    specs = [_TensorSpec("token_embd.weight", (preset.n_vocab, n_embd), 1.0)]
    for layer, kind in enumerate(preset.layer_kinds(n_layer)):
        blk = f"blk.{layer}"
        if kind == ATTENTION_LAYER:
            specs += _qkv_specs(preset, blk, biases=False)
            specs.append(_TensorSpec(f"{blk}.attn_output.weight", (n_embd, n_q), residual_scale / np.sqrt(n_q)))
            continue
        specs.append(_TensorSpec(f"{blk}.attn_norm.weight", (n_embd,), None))
        if kind == MOE_LAYER:
            specs += _expert_specs(preset, blk, residual_scale, biases=False)
            specs += _shared_expert_specs(preset, blk, residual_scale)
            continue
        if kind == MLP_LAYER:
            specs += [
                _TensorSpec(f"{blk}.ffn_up.weight", (preset.n_ff, n_embd), 1.0 / np.sqrt(n_embd)),
                _TensorSpec(f"{blk}.ffn_down.weight", (n_embd, preset.n_ff), residual_scale / np.sqrt(preset.n_ff)),
            ]
            continue
        specs += [
            # z (the output gate), then x, B and C (convolved together), then one dt per head
            _TensorSpec(f"{blk}.ssm_in.weight", (2 * d_inner + bc_dim + n_heads, n_embd), 1.0 / np.sqrt(n_embd)),
            _TensorSpec(f"{blk}.ssm_conv1d.weight", (d_inner + bc_dim, preset.ssm_d_conv),
                        1.0 / np.sqrt(preset.ssm_d_conv), f32=True),
            _TensorSpec(f"{blk}.ssm_conv1d.bias", (d_inner + bc_dim,), BIAS_STD, f32=True),
            _TensorSpec(f"{blk}.ssm_dt.bias", (n_heads,), None, uniform=MAMBA2_DT_BIAS_RANGE),
            _TensorSpec(f"{blk}.ssm_a", (n_heads, 1), None, uniform=MAMBA2_A_RANGE),
            # the skip connection D * x, 1 as Mamba-2 initializes it
            _TensorSpec(f"{blk}.ssm_d", (n_heads, 1), None),
            # RMS-normed in groups, after the gate
            _TensorSpec(f"{blk}.ssm_norm.weight", (preset.ssm_n_group, d_inner // preset.ssm_n_group), None),
            _TensorSpec(f"{blk}.ssm_out.weight", (n_embd, d_inner), residual_scale / np.sqrt(d_inner)),
        ]
    return specs + _output_specs(preset)


def _tensor_rng(seed: int, tensor_name: str) -> np.random.Generator:
    # Each tensor gets its own stream keyed by its name, so its draws do not
    # depend on the order tensors are written in or on how many layers come
    # before or after it (only the depth-dependent scale of the residual
    # projections changes with the layer count).
    name_key = int.from_bytes(hashlib.sha256(tensor_name.encode()).digest()[:8], "little")
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy=seed, spawn_key=(name_key,))))


def _materialize(spec: _TensorSpec, seed: int) -> np.ndarray:
    if spec.uniform is not None:
        # Per-head vectors, small enough to draw in one go.
        low, high = spec.uniform
        return _tensor_rng(seed, spec.name).uniform(low, high, size=spec.shape).astype(np.float32)
    if spec.std is None:
        return np.full(spec.shape, spec.fill, dtype=np.float32)
    rng = _tensor_rng(seed, spec.name)
    std = np.float32(spec.std)
    out = np.empty(spec.shape, dtype=spec.dtype)
    flat = out.reshape(-1)
    for start in range(0, flat.size, _DRAW_CHUNK):
        count = min(_DRAW_CHUNK, flat.size - start)
        chunk = rng.standard_normal(count, dtype=np.float32)
        chunk *= std
        flat[start:start + count] = chunk
    if spec.identity:
        rows = min(spec.shape[0], spec.shape[-1])
        out[np.arange(rows), np.arange(rows)] += spec.identity
    return out


def _add_metadata(writer: gguf.GGUFWriter, preset: Preset, seed: int, n_layer: int,
                  file_type: gguf.LlamaFileType = gguf.LlamaFileType.MOSTLY_F16, *, deep_scale: float = 1.0,
                  draft_layers: int | None = None) -> None:
    """``n_layer``: the model the tensors come from; a draft of ``draft_layers`` holds that many of them."""
    variant = (f"-deep{deep_scale:g}" if deep_scale != 1.0 else "") + (f"-draft{draft_layers}" if draft_layers else "")
    writer.add_name(f"hiraishin-synthetic-{preset.name}-L{n_layer}{variant}-seed{seed}")
    writer.add_file_type(int(file_type))
    writer.add_context_length(preset.context_length)
    writer.add_embedding_length(preset.n_embd)
    writer.add_block_count(draft_layers or n_layer + preset.n_nextn)
    writer.add_head_count(preset.n_head)
    if preset.architecture in _MAMBA2_ARCHITECTURES:
        # Per-layer arrays, as conversions write them: llama.cpp takes a layer with neither an FFN
        # nor KV heads for Mamba-2, one with KV heads and no FFN for attention, one with an FFN for an MLP
        # (for experts, where the model has them).
        kinds = preset.layer_kinds(n_layer)
        writer.add_feed_forward_length([preset.n_ff if kind in (MLP_LAYER, MOE_LAYER) else 0 for kind in kinds])
        writer.add_head_count_kv([preset.n_head_kv if kind == ATTENTION_LAYER else 0 for kind in kinds])
    else:
        writer.add_feed_forward_length(preset.n_ff)
        writer.add_head_count_kv(preset.n_head_kv)
    if preset.architecture == DEEPSEEK2:
        # As conversions write MLA: the KV cache's one head holds the latent and the rotated key (K) and the latent
        # (V); the *_mla lengths (spelled out: gguf releases before 0.17 have no add_key_length_mla) are a
        # query/key head's and a value head's. q_lora_rank is written even at 0: llama.cpp reads it from every
        # model but those of 26 or 27 layers (V2-Lite's own count), so a V2-Lite of another depth needs the key.
        writer.add_key_length(preset.kv_lora_rank + preset.rope_dim)
        writer.add_value_length(preset.kv_lora_rank)
        writer.add_uint32(f"{preset.architecture}.attention.key_length_mla", preset.head_dim)
        writer.add_uint32(f"{preset.architecture}.attention.value_length_mla", preset.v_head_dim)
        writer.add_q_lora_rank(preset.q_lora_rank)
        writer.add_kv_lora_rank(preset.kv_lora_rank)
        writer.add_vocab_size(preset.n_vocab)
    else:
        writer.add_key_length(preset.head_dim)
        writer.add_value_length(preset.head_dim)
    # nemotron_h has no rope.
    if preset.architecture not in _MAMBA2_ARCHITECTURES:
        writer.add_rope_dimension_count(preset.rope_dim or preset.head_dim)
        writer.add_rope_freq_base(preset.rope_freq_base)
    if preset.rope_sections:
        writer.add_rope_dimension_sections(list(preset.rope_sections))
    writer.add_layer_norm_rms_eps(preset.rms_norm_eps)
    if preset.architecture in HYBRID_ARCHITECTURES:
        writer.add_ssm_conv_kernel(preset.ssm_d_conv)
        writer.add_ssm_inner_size(preset.ssm_d_inner)
        writer.add_ssm_state_size(preset.ssm_d_state)
        writer.add_ssm_time_step_rank(preset.ssm_dt_rank)
        writer.add_ssm_group_count(preset.ssm_n_group)
    if preset.full_attention_interval:
        # Spelled out: gguf releases before qwen3next's have no add_full_attention_interval.
        writer.add_uint32(f"{preset.architecture}.full_attention_interval", preset.full_attention_interval)
    if preset.is_moe:
        writer.add_expert_count(preset.n_expert)
        writer.add_expert_used_count(preset.n_expert_used)
        writer.add_expert_feed_forward_length(preset.n_ff_exp)
    if preset.architecture in _DENSE_LEAD_ARCHITECTURES:
        # As conversions write them: the shared experts by count (each n_ff_exp wide), the leading dense layers,
        # the scoring function (spelled out: add_expert_gating_func wants gguf's enum), and the routing weights'
        # renormalization and scale where the config sets them.
        writer.add_expert_shared_count(preset.n_ff_shexp // preset.n_ff_exp)
        writer.add_leading_dense_block_count(preset.n_dense_lead)
        writer.add_uint32(f"{preset.architecture}.expert_gating_func", EXPERT_GATING_FUNCS[preset.expert_gating])
        if preset.expert_weights_norm:
            writer.add_expert_weights_norm(True)
        if preset.expert_weights_scale:
            writer.add_expert_weights_scale(preset.expert_weights_scale)
    elif preset.n_ff_shexp:
        writer.add_expert_shared_feed_forward_length(preset.n_ff_shexp)
    if preset.architecture == NEMOTRON_H_MOE:
        writer.add_expert_shared_count(1)
        writer.add_expert_weights_norm(preset.expert_weights_norm)
        writer.add_expert_weights_scale(preset.expert_weights_scale)
    if preset.n_nextn:
        writer.add_nextn_predict_layers(preset.n_nextn)
    if preset.sliding_window:
        writer.add_sliding_window(preset.sliding_window)
    if preset.sliding_window_pattern:
        # Spelled out: conversions of Gemma 3 write no pattern (llama.cpp's default is 6), and gguf's
        # add_sliding_window_pattern writes a per-layer array in releases that have it.
        writer.add_uint32(f"{preset.architecture}.attention.sliding_window_pattern", preset.sliding_window_pattern)
    if preset.rope_freq_base_swa:
        # Spelled out: gguf releases before 0.17 have no add_rope_freq_base_swa.
        writer.add_float32(f"{preset.architecture}.rope.freq_base_swa", preset.rope_freq_base_swa)
    if preset.rope_scaling_factor and preset.rope_scaling_type == "linear":
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(preset.rope_scaling_factor)
    elif preset.rope_scaling_factor:
        writer.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        writer.add_rope_scaling_factor(preset.rope_scaling_factor)
        writer.add_rope_scaling_orig_ctx_len(preset.rope_scaling_orig_ctx)
    if preset.yarn_mscale_all_dim:
        # 0.1 * mscale_all_dim, as conversions write it (llama.cpp divides it out again).
        writer.add_rope_scaling_yarn_log_mul(0.1 * preset.yarn_mscale_all_dim)

    tokens, scores, token_types = build_vocab(preset.n_vocab)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(token_types)
    writer.add_unk_token_id(UNK_ID)
    writer.add_bos_token_id(BOS_ID)
    writer.add_eos_token_id(EOS_ID)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(False)

    # Provenance, so a file found on disk says how to regenerate it.
    writer.add_string("hiraishin.synthetic.preset", preset.name)
    writer.add_uint64("hiraishin.synthetic.seed", seed)
    if deep_scale != 1.0 or draft_layers is not None:
        writer.add_float32("hiraishin.synthetic.deep_layer_scale", deep_scale)
        writer.add_uint32("hiraishin.synthetic.n_layer", n_layer)


def _check_model_args(preset: str | Preset, seed: int, n_layer: int | None,
                      out_path: str | os.PathLike[str]) -> tuple[Preset, int, Path]:
    preset = get_preset(preset)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    n_layer = preset.n_layer if n_layer is None else n_layer
    if isinstance(n_layer, bool) or not isinstance(n_layer, int) or n_layer < 1:
        raise ValueError(f"n_layer must be a positive integer, got {n_layer!r}")
    out_path = Path(out_path)
    if not out_path.parent.is_dir():
        raise FileNotFoundError(f"output directory {out_path.parent} does not exist; create it first")
    return preset, n_layer, out_path


class _AtomicGGUF:
    """A GGUFWriter on `path.partial`, renamed to `path` only when everything was written,
    so an interrupted run never leaves a truncated file under the final name."""

    def __init__(self, path: Path, architecture: str) -> None:
        self.path = path
        self.partial = path.with_name(path.name + ".partial")
        self.writer = gguf.GGUFWriter(self.partial, architecture)

    def __enter__(self) -> gguf.GGUFWriter:
        return self.writer

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.writer.close()
        if exc_type is None:
            os.replace(self.partial, self.path)
        else:
            self.partial.unlink(missing_ok=True)


def _write_header(writer: gguf.GGUFWriter, specs: list[_TensorSpec],
                  types: dict[str, gguf.GGMLQuantizationType] | None = None) -> None:
    """The tensor table and everything before the data: each tensor in its spec's
    float type, or in types[name] where given (quantized tensors as raw blocks)."""
    for spec in specs:
        qtype = (types or {}).get(spec.name)
        if qtype is None or _float_dtype(qtype) is not None:
            dtype = np.dtype(spec.dtype if qtype is None else _float_dtype(qtype))
            writer.add_tensor_info(spec.name, spec.shape, dtype, int(np.prod(spec.shape)) * dtype.itemsize)
        else:
            block_size, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
            byte_shape = (*spec.shape[:-1], spec.shape[-1] // block_size * block_bytes)
            writer.add_tensor_info(spec.name, byte_shape, np.dtype(np.uint8), int(np.prod(byte_shape)),
                                   raw_dtype=qtype)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()


def _float_dtype(qtype: gguf.GGMLQuantizationType) -> type[np.floating] | None:
    return {gguf.GGMLQuantizationType.F32: np.float32, gguf.GGMLQuantizationType.F16: np.float16}.get(qtype)


def _speculation_specs(preset: Preset, n_layer: int, deep_scale: float, draft_layers: int | None) -> list[_TensorSpec]:
    """The tensors of the n_layer model with ``deep_scale``, or of its first ``draft_layers`` layers: a draft
    whose tensors are the target's own, so that it agrees with the target as far as the deeper layers let it."""
    if deep_scale != 1.0 or draft_layers is not None:
        if preset.architecture != ARCHITECTURE:
            raise ValueError(f"deep_scale and draft_layers are for the dense qwen3 presets, not {preset.name} "
                             f"({preset.architecture})")
        if not (isinstance(deep_scale, (int, float)) and np.isfinite(deep_scale) and deep_scale > 0):
            raise ValueError(f"deep_scale must be a positive number, got {deep_scale!r}")
        if draft_layers is not None and not (isinstance(draft_layers, int) and not isinstance(draft_layers, bool)
                                             and 1 <= draft_layers < n_layer):
            raise ValueError(f"draft_layers must be from 1 to n_layer - 1 = {n_layer - 1}, got {draft_layers!r}")
    specs = _tensor_specs(preset, n_layer, deep_scale)
    if draft_layers is None:
        return specs
    deeper = tuple(f"blk.{layer}." for layer in range(draft_layers, n_layer))
    return [spec for spec in specs if not spec.name.startswith(deeper)]


def make_model(preset: str | Preset, seed: int, n_layer: int | None, out_path: str | os.PathLike[str], *,
               deep_scale: float = 1.0, draft_layers: int | None = None) -> Path:
    """Write a synthetic F16 GGUF of the preset's architecture to out_path and return its path.

    Matrices are F16; norms, and for the mixtures of experts the router, the
    biases and the attention sinks, are F32 as in real conversions.

    n_layer=None uses the preset's layer count. Tensors are generated and
    written one at a time, so peak memory is about one tensor, not the model.

    For speculative decoding (dense qwen3 presets): ``deep_scale`` scales what
    every layer past the first writes into the residual stream, and
    ``draft_layers`` writes only the first layers of that model, tensor for
    tensor, as its draft.
    """
    preset, n_layer, out_path = _check_model_args(preset, seed, n_layer, out_path)
    specs = _speculation_specs(preset, n_layer, deep_scale, draft_layers)
    with _AtomicGGUF(out_path, preset.architecture) as writer:
        _add_metadata(writer, preset, seed, n_layer, deep_scale=deep_scale, draft_layers=draft_layers)
        _write_header(writer, specs)
        for spec in specs:
            writer.write_tensor_data(_materialize(spec, seed))
    return out_path


def make_quantized_model(preset: str | Preset, seed: int, n_layer: int | None, qtype: str,
                         out_path: str | os.PathLike[str], quantizer_path: str | os.PathLike[str], *,
                         deep_scale: float = 1.0, draft_layers: int | None = None) -> Path:
    """The F16 model quantized to qtype by llama-quantize; the F16 file is removed afterwards."""
    out_path = Path(out_path)
    f16_path = out_path.with_name(out_path.name + ".f16")
    try:
        make_model(preset, seed, n_layer, f16_path, deep_scale=deep_scale, draft_layers=draft_layers)
        return quantize(f16_path, out_path, qtype, quantizer_path)
    finally:
        f16_path.unlink(missing_ok=True)


def write_shape_model(preset: str | Preset, n_layer: int | None, out_path: str | os.PathLike[str]) -> Path:
    """Write the F16 model's header and tensor table with a sparse, all-zero data section.

    The file has the F16 model's size on paper but occupies almost no disk,
    and `llama-quantize --dry-run` reads only its header: enough to ask which
    type llama-quantize gives each tensor of a full-size model.
    """
    preset, n_layer, out_path = _check_model_args(preset, 0, n_layer, out_path)
    specs = _tensor_specs(preset, n_layer)
    with _AtomicGGUF(out_path, preset.architecture) as writer:
        _add_metadata(writer, preset, 0, n_layer)
        _write_header(writer, specs)
        handle = writer.fout[0]
        data_start = handle.tell()
        data_start += -data_start % writer.data_alignment
        data_size = sum(spec.nbytes + -spec.nbytes % writer.data_alignment for spec in specs)
        handle.truncate(data_start + data_size)
    return out_path


def planned_tensor_types(shape_model: str | os.PathLike[str], qtype: str,
                         quantizer_path: str | os.PathLike[str]) -> dict[str, gguf.GGMLQuantizationType]:
    """The type llama-quantize would give each tensor of shape_model for qtype (its --dry-run)."""
    qtype = normalize_quant_type(qtype)
    command = [str(quantizer_path), "--dry-run", str(shape_model), qtype]
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    tail = "\n".join(result.stdout.splitlines()[-20:])
    if result.returncode != 0:
        raise QuantizationError(f"{' '.join(command)} failed with exit status {result.returncode}; "
                                f"last output lines:\n{tail}")
    types = {}
    for match in _DRY_RUN_LINE.finditer(result.stdout):
        type_name = (match["target"] or match["source"]).upper()
        try:
            types[match["name"]] = gguf.GGMLQuantizationType[type_name]
        except KeyError:
            raise QuantizationError(f"llama-quantize --dry-run planned type {type_name!r} for {match['name']}, "
                                    "which gguf does not know; update the gguf package") from None
    n_tensors = len(gguf.GGUFReader(shape_model).tensors)
    if len(types) != n_tensors:
        raise QuantizationError(f"read a planned type for {len(types)} of {n_tensors} tensors from "
                                f"{' '.join(command)}; its output format may have changed. Last lines:\n{tail}")
    return types


def _q5_0_blocks(rng: np.random.Generator, n_blocks: int, std: float) -> np.ndarray:
    """Q5_0 blocks (f16 d, 4 bytes of high bits qh, 16 bytes of low nibbles) with q uniform on 1..31."""
    blocks = np.empty((n_blocks, gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.Q5_0][1]), dtype=np.uint8)
    d = np.float16(std / _Q5_0_STD_PER_D)
    blocks[:, 0:2] = np.frombuffer(d.tobytes(), dtype=np.uint8)
    # Drawn in chunks of _DRAW_CHUNK values, like _materialize; part of the byte-exact output.
    chunk_blocks = _DRAW_CHUNK // 32
    for start in range(0, n_blocks, chunk_blocks):
        stop = min(start + chunk_blocks, n_blocks)
        q = rng.integers(1, 32, size=(stop - start, 32), dtype=np.uint8)
        # Element j's fifth bit is bit j of the little-endian qh; its low four bits are
        # the low nibble of qs[j] for j < 16, the high nibble of qs[j - 16] otherwise.
        blocks[start:stop, 2:6] = np.packbits(q >> np.uint8(4), axis=-1, bitorder="little")
        blocks[start:stop, 6:] = (q[:, :16] & np.uint8(0x0F)) | (q[:, 16:] << np.uint8(4))
    return blocks


def _mxfp4_blocks(rng: np.random.Generator, n_blocks: int, std: float) -> np.ndarray:
    """MXFP4 blocks (e8m0 exponent byte, 16 bytes of e2m1 codes) of random codes, the exponents
    mixed so that the weights' variance is std**2 (see _MXFP4_STD_PER_SCALE)."""
    block_bytes = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType.MXFP4][1]
    blocks = np.frombuffer(rng.bytes(n_blocks * block_bytes), dtype=np.uint8).reshape(n_blocks, block_bytes).copy()
    exponent = int(np.floor(np.log2(std / _MXFP4_STD_PER_SCALE))) + 128
    # ggml_e8m0_to_fp32_half treats exponents 0 and 1 specially, and 255 is NaN.
    if not 2 <= exponent <= 253:
        raise ValueError(f"an MXFP4 weight std of {std} is out of the e8m0 scale's range")
    variance = (_MXFP4_STD_PER_SCALE * 2.0 ** (exponent - 128)) ** 2
    p_next = min(max((std * std / variance - 1.0) / 3.0, 0.0), 1.0)
    blocks[:, 0] = exponent + (rng.random(n_blocks) < p_next)
    return blocks


# Direct writers of the block types that cannot be sized by _BlockScales alone.
_DIRECT_BLOCK_WRITERS = {
    gguf.GGMLQuantizationType.Q5_0: _q5_0_blocks,
    gguf.GGMLQuantizationType.MXFP4: _mxfp4_blocks,
}


def _direct_types() -> tuple[gguf.GGMLQuantizationType, ...]:
    """The quantized types make_direct_model writes (besides F32, F16 and BF16)."""
    return (*_DIRECT_BLOCK_SCALES, *_DIRECT_BLOCK_WRITERS)


def _materialize_quantized(spec: _TensorSpec, qtype: gguf.GGMLQuantizationType, seed: int) -> np.ndarray:
    """Random blocks of qtype whose dequantized weights have about spec.std, as raw bytes (rows, row bytes)."""
    scales = _DIRECT_BLOCK_SCALES.get(qtype)
    writer = _DIRECT_BLOCK_WRITERS.get(qtype)
    if (scales is None and writer is None) or spec.std is None:
        raise ValueError(f"cannot write {spec.name} directly as {qtype.name}; direct writing supports "
                         f"{', '.join(t.name for t in _direct_types())}, BF16, F16 and F32 for matrices. "
                         "Quantize the F16 model with llama-quantize instead (leave out --direct)")
    block_size, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    n_rows, row_length = int(np.prod(spec.shape[:-1])), spec.shape[-1]
    if row_length % block_size:
        raise ValueError(f"cannot write {spec.name} as {qtype.name}: its rows of {row_length} are no multiple "
                         f"of the block size {block_size}")
    n_blocks = n_rows * row_length // block_size
    rng = _tensor_rng(seed, spec.name)
    if writer is not None:
        return writer(rng, n_blocks, spec.std).reshape(n_rows, row_length // block_size * block_bytes)
    blocks = np.frombuffer(rng.bytes(n_blocks * block_bytes), dtype=np.uint8).reshape(n_blocks, block_bytes).copy()
    d = np.float16(spec.std / scales.std_per_d)
    blocks[:, scales.d_offset:scales.d_offset + 2] = np.frombuffer(d.tobytes(), dtype=np.uint8)
    if scales.dmin_offset is not None:
        dmin = np.float16(float(d) * scales.dmin_per_d)
        blocks[:, scales.dmin_offset:scales.dmin_offset + 2] = np.frombuffer(dmin.tobytes(), dtype=np.uint8)
    if scales.random_sign:
        # the sign bit of a little-endian f16 is the top bit of its second byte
        blocks[rng.random(n_blocks) < 0.5, scales.d_offset + 1] ^= np.uint8(0x80)
    return blocks.reshape(n_rows, row_length // block_size * block_bytes)


def make_direct_model(preset: str | Preset, seed: int, n_layer: int | None, qtype: str,
                      out_path: str | os.PathLike[str], quantizer_path: str | os.PathLike[str], *,
                      deep_scale: float = 1.0, draft_layers: int | None = None) -> Path:
    """Write a quantized model without an F16 model or a quantization pass.

    Each tensor gets the type llama-quantize would give it for qtype (read
    from its --dry-run on a shape-only model) and random bits with scales
    sized like the F16 model's draws. Kernels see the same types, shapes and
    bytes per token as in the quantized F16 model, so it times the same, and a
    full-size model takes seconds instead of minutes and no 16 GB F16 file;
    its weights are not those of the F16 model with the same seed.

    ``deep_scale`` and ``draft_layers`` as in make_model; a draft's tensors
    take the types llama-quantize gives them in the n_layer model, so they
    are the direct target's own blocks, byte for byte.
    """
    qtype = normalize_quant_type(qtype)
    preset, n_layer, out_path = _check_model_args(preset, seed, n_layer, out_path)
    specs = _speculation_specs(preset, n_layer, deep_scale, draft_layers)
    shape_model = out_path.with_name(out_path.name + ".shape")
    try:
        write_shape_model(preset, n_layer, shape_model)
        types = planned_tensor_types(shape_model, qtype, quantizer_path)
    finally:
        shape_model.unlink(missing_ok=True)

    def tensor_data(spec: _TensorSpec) -> np.ndarray:
        dtype = _float_dtype(types[spec.name])
        if dtype is not None:
            return _materialize(spec, seed).astype(dtype, copy=False)
        if types[spec.name] == gguf.GGMLQuantizationType.BF16:
            weights = _materialize(spec, seed).astype(np.float32)
            return gguf.quants.quantize(weights, gguf.GGMLQuantizationType.BF16).reshape(-1, weights.shape[-1] * 2)
        return _materialize_quantized(spec, types[spec.name], seed)

    with _AtomicGGUF(out_path, preset.architecture) as writer:
        _add_metadata(writer, preset, seed, n_layer, _FILE_TYPES[qtype], deep_scale=deep_scale,
                      draft_layers=draft_layers)
        writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
        writer.add_string("hiraishin.synthetic.weights", "direct")
        _write_header(writer, specs, types)
        for spec in specs:
            writer.write_tensor_data(tensor_data(spec))
    return out_path


def normalize_quant_type(qtype: str) -> str:
    normalized = qtype.strip().upper()
    if normalized not in QUANT_TYPES:
        raise ValueError(f"unsupported quantization type {qtype!r}; valid types: {', '.join(QUANT_TYPES)}")
    return normalized


def find_quantizer(bin_dir: str | os.PathLike[str] | None = None) -> Path:
    """Locate llama-quantize: in bin_dir, else in ${HIRAISHIN_LLAMA_BIN_DIR}, else on PATH."""
    search_dir = bin_dir if bin_dir is not None else os.environ.get(BIN_DIR_ENV)
    if search_dir:
        candidate = Path(search_dir) / QUANTIZER_NAME
        if candidate.is_file():
            return candidate
        raise FileNotFoundError(f"{QUANTIZER_NAME} not found in {search_dir}; build it with "
                                f"`cmake --build <build-dir> --target {QUANTIZER_NAME}` and point "
                                f"{BIN_DIR_ENV} at the directory that holds the binary")
    on_path = shutil.which(QUANTIZER_NAME)
    if on_path is None:
        raise FileNotFoundError(f"{QUANTIZER_NAME} is not on PATH and {BIN_DIR_ENV} is not set; build it "
                                f"with `cmake --build <build-dir> --target {QUANTIZER_NAME}` and pass its path "
                                f"or set {BIN_DIR_ENV}")
    return Path(on_path)


def quantize(src: str | os.PathLike[str], dst: str | os.PathLike[str], qtype: str,
             quantizer_path: str | os.PathLike[str]) -> Path:
    """Quantize the GGUF at src into dst with llama-quantize and return dst.

    llama-quantize writes only data derived from its input (it stamps
    general.quantization_version and general.file_type, nothing time-based),
    so the same input and type give the same bytes.
    """
    qtype = normalize_quant_type(qtype)
    src, dst, quantizer = Path(src), Path(dst), Path(quantizer_path)
    if not quantizer.is_file():
        raise FileNotFoundError(f"quantizer binary {quantizer} does not exist; build it with "
                                f"`cmake --build <build-dir> --target {QUANTIZER_NAME}`")
    if not os.access(quantizer, os.X_OK):
        raise PermissionError(f"quantizer binary {quantizer} is not executable; check its permissions")
    if not src.is_file():
        raise FileNotFoundError(f"model to quantize {src} does not exist")
    if src.resolve() == dst.resolve():
        raise ValueError(f"quantization output {dst} must differ from its input")

    partial = dst.with_name(dst.name + ".partial")
    result = subprocess.run([str(quantizer), str(src), str(partial), qtype],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    if result.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = "\n".join(result.stdout.splitlines()[-20:])
        raise QuantizationError(f"{quantizer} {src} -> {qtype} failed with exit status {result.returncode}; "
                                f"last output lines:\n{tail}")
    os.replace(partial, dst)
    return dst


def sha256_of(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe_preset(preset: str | Preset) -> str:
    """One line: the preset's architecture and shapes."""
    preset = get_preset(preset)
    text = (f"{preset.architecture}, {preset.n_layer} layers, n_embd {preset.n_embd}, "
            f"{preset.n_head}/{preset.n_head_kv} heads of {preset.head_dim}")
    if preset.is_moe:
        text += f", {preset.n_expert} experts ({preset.n_expert_used} used) of {preset.n_ff_exp}"
        if preset.n_ff_shexp:
            text += f" and a shared expert of {preset.n_ff_shexp}"
    else:
        text += f", n_ff {preset.n_ff}"
    if preset.architecture == GEMMA3:
        period = preset.sliding_window_pattern
        text += (f", window {preset.sliding_window} on {period - 1} of every {period} layers (rope theta "
                 f"{preset.rope_freq_base_swa:g}; global {preset.rope_freq_base:g}, scaled by "
                 f"{preset.rope_scaling_factor:g}), tied output")
    elif preset.sliding_window:
        text += f", window {preset.sliding_window} on every other layer"
    if preset.n_dense_lead:
        text += f", the first {preset.n_dense_lead} dense (n_ff {preset.n_ff})"
    if preset.expert_gating:
        text += f", {preset.expert_gating} routing"
    if preset.architecture == GLM4MOE and preset.rope_dim:
        text += f", rope on {preset.rope_dim} of {preset.head_dim}"
    if preset.architecture == DEEPSEEK2:
        q = f"q through rank {preset.q_lora_rank}" if preset.q_lora_rank else "q projected directly"
        text += (f", latent attention of rank {preset.kv_lora_rank} (heads of {preset.head_dim - preset.rope_dim} + "
                 f"{preset.rope_dim} rotated, values of {preset.v_head_dim}, {q})")
    if preset.n_nextn:
        text += f", {preset.n_nextn} MTP layer" + ("s" if preset.n_nextn > 1 else "")
    if preset.architecture == QWEN35:
        text += (f", gated delta nets of {preset.ssm_dt_rank}/{preset.ssm_n_group} value/key heads of "
                 f"{preset.ssm_d_state}, full attention every {preset.full_attention_interval} layers")
    elif preset.architecture == NEMOTRON_H:
        text += (f", Mamba-2 of {preset.ssm_dt_rank} heads of {preset.ssm_d_inner // preset.ssm_dt_rank} "
                 f"({preset.ssm_n_group} groups, state {preset.ssm_d_state}), layers {preset.layer_pattern}")
    return text + f", vocab {preset.n_vocab}"


def _presets_table() -> str:
    width = max(len(name) for name in PRESETS)
    lines = [f"  {name:{width}}  {describe_preset(name)}" for name in sorted(PRESETS)]
    return "presets:\n" + "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hiraishin_llama.synthetic",
        description=f"Write a deterministic synthetic GGUF model ({', '.join(ARCHITECTURES)}), optionally quantized.",
        epilog=_presets_table(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--preset", default="tiny", help=f"model shape: {', '.join(sorted(PRESETS))} (default: tiny)")
    parser.add_argument("--seed", type=int, default=1, help="weight seed (default: 1)")
    parser.add_argument("--n-layer", type=int, default=None, help="number of layers (default: the preset's)")
    parser.add_argument("--out", required=True, type=Path, help="output GGUF path")
    parser.add_argument("--quant", default=None,
                        help=f"quantize the output to this type ({', '.join(QUANT_TYPES)}); default: keep F16")
    parser.add_argument("--quantizer", type=Path, default=None,
                        help=f"path of {QUANTIZER_NAME} (default: from ${BIN_DIR_ENV}, else PATH)")
    parser.add_argument("--direct", action="store_true",
                        help="with --quant: write random quantized blocks in the types llama-quantize would "
                             "choose, without an F16 model (seconds for a full-size model; for timing, "
                             "its weights differ from the quantized F16 model's)")
    parser.add_argument("--deep-layer-scale", type=float, default=1.0, metavar="X",
                        help="dense qwen3 presets: scale what every layer past the first writes into the residual "
                             "stream by X (below 1, the model's tokens agree more often with its first layer's)")
    parser.add_argument("--draft-layers", type=int, default=None, metavar="K",
                        help="dense qwen3 presets: write only the first K layers of the --n-layer model (with the "
                             "same --deep-layer-scale and seed), a draft whose tensors are the target's own")
    args = parser.parse_args(argv)
    if args.direct and args.quant is None:
        parser.error("--direct needs --quant")

    try:
        speculation = {"deep_scale": args.deep_layer_scale, "draft_layers": args.draft_layers}
        if args.quant is None:
            make_model(args.preset, args.seed, args.n_layer, args.out, **speculation)
        else:
            quantizer = args.quantizer if args.quantizer is not None else find_quantizer()
            make = make_direct_model if args.direct else make_quantized_model
            make(args.preset, args.seed, args.n_layer, args.quant, args.out, quantizer, **speculation)
    except (ValueError, OSError, QuantizationError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"{args.out}  sha256={sha256_of(args.out)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
