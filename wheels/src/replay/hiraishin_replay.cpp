// hiraishin-replay: measures whether llama.cpp produces the same logits for a
// token whether it is decoded alone or inside a batch.
//
// Speculative decoding verifies draft tokens in one batched forward pass and
// keeps those the target model would have produced itself. That is the same
// as plain greedy decoding only if the batched pass yields logits that are
// bit-identical to one-token-at-a-time decoding, which stock kernels do not
// guarantee: their floating-point summation order depends on the batch size.
//
// Subcommands:
//   replay  Decode greedily one token at a time, then push the same tokens
//           through in batches of b and compare each position's logits bit
//           for bit with the one-token run.
//   spec    Run greedy speculative decoding (draft model + batched
//           verification) and compare the emitted tokens with plain greedy
//           decoding of the target model.
//   bench   Time one verify pass of b tokens (llama_decode + synchronize) for
//           each b, plain one-token decoding, and the device's copy bandwidth.
//   slots   Decode several requests greedily, each alone, then replay them as
//           a server's slots do: sequences side by side in one context, their
//           prompt chunks and verify batches joined into shared batches,
//           starting at different times, a slot taking a new request when its
//           last one ends; compare each position's logits bit for bit with
//           the request decoded alone.
//
// In every subcommand --cpu-moe, --n-cpu-moe N and --override-tensor place a
// mixture-of-experts model's tensors as llama.cpp's own programs do, so that a
// model served with its experts on the CPU can be measured as it is served.
//
// Only the public llama.h / ggml.h / ggml-backend.h API is used, so the tool
// does not depend on llama.cpp internals or its `common` library.

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"
#include "replay_batches.h"
#include "replay_compare.h"
#include "replay_overrides.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

// llama.cpp's staging API for multi-token prediction (src/llama-ext.h, C++ linkage, exported by libllama):
// the hidden state an MTP block reads beside the next token, for every row of a batch (masked = false) or
// for the rows with logits (masked = true).
LLAMA_API void llama_set_embeddings_nextn(struct llama_context * ctx, bool value, bool masked);
LLAMA_API float * llama_get_embeddings_nextn_ith(struct llama_context * ctx, int32_t i);

// The wheel's version and patched commit, passed by the build (src/replay/CMakeLists.txt).
#ifndef HIRAISHIN_VERSION
#define HIRAISHIN_VERSION "0+source"
#endif
#ifndef HIRAISHIN_PATCHED_COMMIT
#define HIRAISHIN_PATCHED_COMMIT ""
#endif

namespace {

constexpr const char * kToolName      = "hiraishin-replay";
constexpr const char * kToolVersion   = HIRAISHIN_VERSION;
constexpr const char * kPatchedCommit = HIRAISHIN_PATCHED_COMMIT;

// Verify batches are capped at 16 tokens: the batch sizes the project makes
// batch invariant.
constexpr int kMaxVerifyBatch = 16;

// llama.cpp sizes the attention window over the KV cache in steps of 256
// cells, so a batch that crosses a multiple of 256 sees a different window
// than the single-token steps it replaces.
constexpr int kKvWindowStep = 256;

// slots: a server feeds a long prompt in chunks beside the other slots' tokens; these make a later slot's
// prompt share batches with the verify batches of the slots that started before it.
constexpr int kSlotsPromptChunk = 32;
constexpr int kSlotsStagger     = 3;
// llama.cpp's server takes up to 256 slots; a replay of more than this many is not what it tests.
constexpr int kMaxSlots         = 64;

// --n-cpu-moe makes one pattern per layer, and llama.cpp compiles every pattern for every tensor it
// loads; no model has this many layers, and a typed "999" for "all" still loads in seconds.
constexpr int kMaxCpuMoeLayers = 1000;

// ---------------------------------------------------------------------------
// Exit status and errors
// ---------------------------------------------------------------------------

enum ExitStatus : int {
    kExitOk                  = 0,
    kExitExpectationFailed   = 1,
    kExitUsageError          = 2,
    kExitRuntimeFailure      = 3,
};

// Bad flags, missing or unreadable model, unsupported type: the input is wrong.
struct UsageError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Something failed while running a valid configuration (e.g. llama_decode).
struct RuntimeFailure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------
// Logging: keep llama.cpp quiet unless asked, but remember its recent errors
// so that a null return from the API can be explained to the user.
// ---------------------------------------------------------------------------

struct LogState {
    bool verbose = false;
    ggml_log_level last_level = GGML_LOG_LEVEL_NONE;
    std::deque<std::string> recent_errors;
    // Tensors llama.cpp's loader said it placed by a tensor override: the public API has no other
    // way to tell whether --cpu-moe or --override-tensor matched anything.
    int tensors_overridden = 0;
};

LogState g_log;

void log_callback(ggml_log_level level, const char * text, void * /*user_data*/) {
    // CONT continues the previous message and inherits its level.
    const ggml_log_level effective = level == GGML_LOG_LEVEL_CONT ? g_log.last_level : level;
    g_log.last_level = effective;
    // llama_model_loader logs "tensor NAME (... MiB TYPE) buffer type overridden to BUFT" once per
    // tensor an override placed (at debug level, so it reaches this callback whatever --verbose says).
    if (level == GGML_LOG_LEVEL_DEBUG && std::strncmp(text, "tensor ", 7) == 0 &&
        std::strstr(text, " buffer type overridden to ") != nullptr) {
        ++g_log.tensors_overridden;
    }
    if (effective == GGML_LOG_LEVEL_ERROR) {
        std::string line(text);
        while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
            line.pop_back();
        }
        if (!line.empty()) {
            g_log.recent_errors.push_back(line);
            if (g_log.recent_errors.size() > 8) {
                g_log.recent_errors.pop_front();
            }
        }
    }
    // Errors are not echoed here: every failing API call reports them as part
    // of this tool's own error message.
    if (g_log.verbose) {
        fputs(text, stderr);
    }
}

std::string recent_llama_errors() {
    std::string joined;
    for (const auto & line : g_log.recent_errors) {
        joined += "\n  llama.cpp: " + line;
    }
    return joined;
}

// ---------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------

enum class Mode { Replay, Spec, Bench, Slots };

const char * mode_name(Mode mode) {
    switch (mode) {
        case Mode::Replay: return "replay";
        case Mode::Spec:   return "spec";
        case Mode::Bench:  return "bench";
        case Mode::Slots:  return "slots";
    }
    return "replay";
}
enum class Expectation { None, Identical, Differ };

struct KvCacheType {
    std::string name;
    ggml_type   type;
};

const std::vector<KvCacheType> & kv_cache_types() {
    static const std::vector<KvCacheType> types = {
        {"f16",    GGML_TYPE_F16},
        {"q8_0",   GGML_TYPE_Q8_0},
        {"q4_0",   GGML_TYPE_Q4_0},
        {"turbo2", GGML_TYPE_TURBO2_0},
        {"turbo3", GGML_TYPE_TURBO3_0},
        {"turbo4", GGML_TYPE_TURBO4_0},
    };
    return types;
}

struct Options {
    Mode mode = Mode::Replay;

    std::string model_path;
    uint32_t    n_ctx        = 4096;
    std::string fa_name      = "on";
    int         n_gpu_layers = 999;
    KvCacheType cache_type_k = {"f16", GGML_TYPE_F16};
    KvCacheType cache_type_v = {"f16", GGML_TYPE_F16};
    int         n_prompt     = 64;
    // 600 generated tokens after a 64-token prompt cross KV positions 256, 384 and 512.
    int         n_gen        = 600;
    uint64_t    seed         = 1;
    int         n_threads    = std::max(1u, std::thread::hardware_concurrency());
    std::string json_path;
    Expectation expect       = Expectation::None;
    bool        verbose      = false;
    // --cpu-moe, --n-cpu-moe and --override-tensor, in command-line order: the first that matches a
    // tensor decides, as in llama.cpp. They place the target model's tensors (and so a self-draft's);
    // a separate --draft-model is loaded as --ngl says, as llama.cpp's --cpu-moe leaves its draft.
    std::vector<hiraishin::TensorOverride> tensor_overrides;
    // rpc-server workers (HOST:PORT), as llama.cpp's --rpc: their devices take offloaded layers beside the GPUs
    std::vector<std::string> rpc_servers;

    // replay
    // every verify batch size the guarantee covers: kernel choices depend on the exact width
    std::vector<int> batch_sizes = {2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    int  timing_reps = 1;
    bool check_b1    = true;

    // spec
    std::string draft_model_path;  // empty: the target model drafts for itself
    bool mtp = false;              // the target model's own MTP block drafts (Qwen3.5/3.6 nextn)
    int  n_draft   = 16;
    bool guard_256 = true;
    int  n_prompts = 1;

    // slots
    int  n_slots    = 4;
    bool kv_unified = true;

    // bench
    int      bench_reps      = 20;
    int      bench_warmup    = 5;
    uint64_t bandwidth_mib   = 1024;
};

const char * expectation_name(Expectation e) {
    switch (e) {
        case Expectation::Identical: return "identical";
        case Expectation::Differ:    return "differ";
        case Expectation::None:      return "none";
    }
    return "none";
}

llama_flash_attn_type flash_attn_type(const std::string & name) {
    if (name == "on")  return LLAMA_FLASH_ATTN_TYPE_ENABLED;
    if (name == "off") return LLAMA_FLASH_ATTN_TYPE_DISABLED;
    return LLAMA_FLASH_ATTN_TYPE_AUTO;
}

void print_usage(FILE * out) {
    fprintf(out,
        "usage: %s [replay|spec|bench|slots] --model PATH [options]\n"
        "\n"
        "replay (default): decode greedily one token at a time, then replay the same tokens in\n"
        "  batches of b and compare each position's logits bit for bit.\n"
        "spec: greedy speculative decoding with a draft model, compared token for token with\n"
        "  plain greedy decoding.\n"
        "bench: time one verify pass of b tokens after an --n-prompt-token prompt (llama_decode then\n"
        "  llama_synchronize, all b logits requested, the b tokens dropped from the KV cache again),\n"
        "  --n-gen tokens of plain one-token decoding, and the device's copy bandwidth.\n"
        "slots: decode 2 x --slots requests greedily, each alone, then replay them side by side in\n"
        "  one context as a server's slots (sequences 0..N-1): their prompts in chunks of %d tokens\n"
        "  and verify batches of every --batches size joined into shared batches, slot s starting at\n"
        "  step %d*s and taking its second request when the first ends; each position's logits are\n"
        "  compared bit for bit with the request decoded alone (--ctx cells per slot).\n"
        "\n"
        "common options:\n"
        "  --model PATH             target model (GGUF), required\n"
        "  --ctx N                  context size (default 4096)\n"
        "  --fa on|off|auto         flash attention (default on)\n"
        "  --ngl N                  layers to offload to the GPU (default 999: all)\n"
        "  --rpc HOST:PORT[,...]    rpc-server workers whose devices take offloaded layers, as llama.cpp's --rpc\n"
        "                           (in batch-invariant mode a worker whose mode is off is refused)\n"
        "  --cpu-moe, -cmoe         keep every mixture-of-experts expert tensor on the CPU\n"
        "  --n-cpu-moe, -ncmoe N    keep the expert tensors of the first N layers on the CPU (0 to %d)\n"
        "  --override-tensor, -ot PATTERN=BUFFER_TYPE[,...]\n"
        "                           put tensors whose name matches the regular expression PATTERN in\n"
        "                           BUFFER_TYPE (e.g. exps=CPU; the names are those of this build's\n"
        "                           devices: CPU, CUDA0, ...); the three read as llama.cpp's do, may be\n"
        "                           repeated, and the first that matches a tensor decides; they place the\n"
        "                           target model, not a separate --draft-model\n"
        "  --cache-type-k TYPE      K cache type: f16, q8_0, q4_0, turbo2, turbo3, turbo4 (default f16)\n"
        "  --cache-type-v TYPE      V cache type, same choices (default f16)\n"
        "  --n-prompt N             prompt length in tokens (default 64)\n"
        "  --n-gen N                tokens to generate (default 600)\n"
        "  --seed N                 seed of the prompt tokens (default 1)\n"
        "  --threads N              CPU threads (default: all hardware threads)\n"
        "  --json PATH              also write the results as JSON\n"
        "  --expect identical|differ|none\n"
        "                           exit 1 unless the outcome matches (default none)\n"
        "  --verbose                show llama.cpp's log\n"
        "  --version, --help\n"
        "\n"
        "replay options:\n"
        "  --batches LIST           batch sizes: a list, ranges or an open range (2,4,8-12 or 2-:\n"
        "                           2 to %d), default 2-%d: every size\n"
        "  --timing-reps N          replay each batch size N times; a position counts as\n"
        "                           differing if it differs in any repetition (default 1)\n"
        "  --skip-b1                skip the b=1 sanity replay\n"
        "  --no-256-guard           (replay and spec) let a batch cross a multiple of %d KV cells;\n"
        "                           by default a batch is cut there, as a guarded verify is\n"
        "\n"
        "spec options:\n"
        "  --draft-model PATH       draft model (default: the target model itself)\n"
        "  --mtp                    draft with the target model's own MTP block (Qwen3.5/3.6's nextn layer),\n"
        "                           as llama-server --spec-type draft-mtp does, instead of a draft model\n"
        "  --n-draft N              maximum draft tokens per step (default 16; a verify batch\n"
        "                           never exceeds %d tokens)\n"
        "  --prompts K              run K prompts, seeds seed..seed+K-1 (default 1)\n"
        "\n"
        "slots options:\n"
        "  --slots N                sequences side by side, as llama-server -np N (2 to %d, default 4)\n"
        "  --kv-unified on|off      one KV cache for every slot (on, the server's default) or a KV\n"
        "                           stream per slot (off, as llama-server --no-kv-unified)\n"
        "  --batches, --skip-b1, --no-256-guard as for replay (b = 1, one slot's plain decoding\n"
        "                           beside the others, is part of the run unless --skip-b1)\n"
        "\n"
        "bench options:\n"
        "  --batches LIST           batch sizes to time, same forms (default 1-%d)\n"
        "  --reps N                 timed passes per batch size, after the warm-up (default 20)\n"
        "  --warmup N               untimed passes per batch size first (default 5)\n"
        "  --bandwidth-mib N        size of the device-to-device copy that measures memory\n"
        "                           bandwidth (default 1024; 0 skips it)\n"
        "\n"
        "exit status: 0 expectation holds, 1 expectation failed, 2 usage or input error,\n"
        "             3 runtime failure\n",
        kToolName, kSlotsPromptChunk, kSlotsStagger, kMaxCpuMoeLayers, kMaxVerifyBatch, kMaxVerifyBatch,
        kKvWindowStep, kMaxVerifyBatch, kMaxSlots, kMaxVerifyBatch);
}

long long parse_integer(const std::string & flag, const std::string & text, long long min_value, long long max_value) {
    size_t consumed = 0;
    long long value = 0;
    try {
        value = std::stoll(text, &consumed, 10);
    } catch (const std::exception &) {
        consumed = 0;
    }
    if (consumed == 0 || consumed != text.size()) {
        throw UsageError(flag + " expects an integer, got '" + text + "'");
    }
    if (value < min_value || value > max_value) {
        throw UsageError(flag + " must be between " + std::to_string(min_value) + " and " +
                         std::to_string(max_value) + ", got " + text);
    }
    return value;
}

KvCacheType parse_kv_cache_type(const std::string & flag, const std::string & name) {
    std::string valid;
    for (const auto & candidate : kv_cache_types()) {
        if (candidate.name == name) {
            return candidate;
        }
        valid += (valid.empty() ? "" : ", ") + candidate.name;
    }
    throw UsageError(flag + ": unknown cache type '" + name + "'; valid types: " + valid);
}

// Sizes, ranges and open ranges ("2,4,8-12", "2-"), as hiraishin-llama-smoke reads its --batches:
// the smoke passes its list on, and a user may type the same list to either tool. Sizes above 16
// stay allowed here, for measuring beyond the verify batches the guarantee covers.
std::vector<int> parse_batch_sizes(const std::string & text) {
    try {
        return hiraishin::parse_batch_list(text, kMaxVerifyBatch, 1 << 20);
    } catch (const hiraishin::BatchListError & e) {
        throw UsageError(std::string("--batches: ") + e.what());
    }
}

Options parse_options(int argc, char ** argv) {
    Options opts;
    std::vector<std::string> args(argv + 1, argv + argc);
    size_t i = 0;
    if (!args.empty() && args[0].rfind("--", 0) != 0) {
        if (args[0] == "replay") {
            opts.mode = Mode::Replay;
        } else if (args[0] == "spec") {
            opts.mode = Mode::Spec;
        } else if (args[0] == "slots") {
            opts.mode = Mode::Slots;
        } else if (args[0] == "bench") {
            opts.mode = Mode::Bench;
            opts.batch_sizes.clear();
            for (int b = 1; b <= kMaxVerifyBatch; ++b) {
                opts.batch_sizes.push_back(b);
            }
        } else {
            throw UsageError("unknown subcommand '" + args[0] + "'; valid subcommands: replay, spec, bench, slots");
        }
        i = 1;
    }

    // Flags that only some subcommands read; any other flag applies to all of them.
    const std::map<std::string, std::set<Mode>> flag_modes = {
        {"--batches",       {Mode::Replay, Mode::Bench, Mode::Slots}},
        {"--timing-reps",   {Mode::Replay}},
        {"--skip-b1",       {Mode::Replay, Mode::Slots}},
        {"--no-256-guard",  {Mode::Replay, Mode::Spec, Mode::Slots}},
        {"--slots",         {Mode::Slots}},
        {"--kv-unified",    {Mode::Slots}},
        {"--draft-model",   {Mode::Spec}},
        {"--mtp",           {Mode::Spec}},
        {"--n-draft",       {Mode::Spec}},
        {"--prompts",       {Mode::Spec}},
        {"--reps",          {Mode::Bench}},
        {"--warmup",        {Mode::Bench}},
        {"--bandwidth-mib", {Mode::Bench}},
    };

    for (; i < args.size(); ++i) {
        std::string flag = args[i];
        std::optional<std::string> inline_value;
        if (const size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
            inline_value = flag.substr(eq + 1);
            flag         = flag.substr(0, eq);
        }
        if (const auto it = flag_modes.find(flag); it != flag_modes.end() && !it->second.count(opts.mode)) {
            std::string modes;
            for (const Mode mode : it->second) {
                modes += (modes.empty() ? "" : " and ") + std::string(mode_name(mode));
            }
            throw UsageError(flag + " applies to the " + modes + " subcommand" +
                             (it->second.size() > 1 ? "s" : "") + " only, not to " + mode_name(opts.mode));
        }
        auto value = [&]() -> std::string {
            if (inline_value) {
                return *inline_value;
            }
            if (i + 1 >= args.size()) {
                throw UsageError(flag + " expects a value");
            }
            return args[++i];
        };

        if (flag == "--help" || flag == "-h") {
            print_usage(stdout);
            std::exit(kExitOk);
        } else if (flag == "--version") {
            // As `hiraishin-llama --version` says it.
            printf("%s %s\n", kToolName, kToolVersion);
            if (kPatchedCommit[0] != '\0') {
                printf("commit:   %s\n", kPatchedCommit);
            }
            std::exit(kExitOk);
        } else if (flag == "--model") {
            opts.model_path = value();
        } else if (flag == "--ctx") {
            opts.n_ctx = (uint32_t) parse_integer(flag, value(), 1, 1 << 24);
        } else if (flag == "--fa") {
            opts.fa_name = value();
            if (opts.fa_name != "on" && opts.fa_name != "off" && opts.fa_name != "auto") {
                throw UsageError("--fa expects on, off or auto, got '" + opts.fa_name + "'");
            }
        } else if (flag == "--ngl") {
            opts.n_gpu_layers = (int) parse_integer(flag, value(), -1, 100000);
        } else if (flag == "--rpc") {
            std::string list = value();
            for (size_t start = 0; start <= list.size();) {
                const size_t end = std::min(list.find(',', start), list.size());
                const std::string server = list.substr(start, end - start);
                if (server.empty() || server.find(':') == std::string::npos) {
                    throw UsageError("--rpc expects HOST:PORT[,HOST:PORT...], got '" + list + "'");
                }
                opts.rpc_servers.push_back(server);
                start = end + 1;
            }
        } else if (flag == "--cpu-moe" || flag == "-cmoe") {
            if (inline_value) {
                throw UsageError(flag + " takes no value, got '" + *inline_value + "'; write --n-cpu-moe N to put "
                                 "the experts of the first N layers on the CPU");
            }
            opts.tensor_overrides.push_back(hiraishin::all_experts_on_cpu(flag));
        } else if (flag == "--n-cpu-moe" || flag == "-ncmoe") {
            const int n_layers = (int) parse_integer(flag, value(), 0, kMaxCpuMoeLayers);
            for (auto & override_ : hiraishin::first_layers_experts_on_cpu(flag, n_layers)) {
                opts.tensor_overrides.push_back(std::move(override_));
            }
        } else if (flag == "--override-tensor" || flag == "-ot") {
            try {
                for (auto & override_ : hiraishin::parse_override_list(flag, value())) {
                    opts.tensor_overrides.push_back(std::move(override_));
                }
            } catch (const hiraishin::OverrideError & e) {
                throw UsageError(e.what());
            }
        } else if (flag == "--cache-type-k") {
            opts.cache_type_k = parse_kv_cache_type(flag, value());
        } else if (flag == "--cache-type-v") {
            opts.cache_type_v = parse_kv_cache_type(flag, value());
        } else if (flag == "--n-prompt") {
            opts.n_prompt = (int) parse_integer(flag, value(), 1, 1 << 24);
        } else if (flag == "--n-gen") {
            opts.n_gen = (int) parse_integer(flag, value(), 1, 1 << 24);
        } else if (flag == "--seed") {
            opts.seed = (uint64_t) parse_integer(flag, value(), 0, INT64_MAX);
        } else if (flag == "--threads") {
            opts.n_threads = (int) parse_integer(flag, value(), 1, 4096);
        } else if (flag == "--json") {
            opts.json_path = value();
        } else if (flag == "--expect") {
            const std::string name = value();
            if (name == "identical") {
                opts.expect = Expectation::Identical;
            } else if (name == "differ") {
                opts.expect = Expectation::Differ;
            } else if (name == "none") {
                opts.expect = Expectation::None;
            } else {
                throw UsageError("--expect expects identical, differ or none, got '" + name + "'");
            }
        } else if (flag == "--verbose") {
            opts.verbose = true;
        } else if (flag == "--batches") {
            opts.batch_sizes = parse_batch_sizes(value());
        } else if (flag == "--timing-reps") {
            opts.timing_reps = (int) parse_integer(flag, value(), 1, 1000);
        } else if (flag == "--skip-b1") {
            opts.check_b1 = false;
        } else if (flag == "--draft-model") {
            opts.draft_model_path = value();
        } else if (flag == "--mtp") {
            opts.mtp = true;
        } else if (flag == "--n-draft") {
            opts.n_draft = (int) parse_integer(flag, value(), 0, 1 << 20);
        } else if (flag == "--no-256-guard") {
            opts.guard_256 = false;
        } else if (flag == "--prompts") {
            opts.n_prompts = (int) parse_integer(flag, value(), 1, 100000);
        } else if (flag == "--slots") {
            opts.n_slots = (int) parse_integer(flag, value(), 2, kMaxSlots);
        } else if (flag == "--kv-unified") {
            const std::string name = value();
            if (name != "on" && name != "off") {
                throw UsageError("--kv-unified expects on or off, got '" + name + "'");
            }
            opts.kv_unified = name == "on";
        } else if (flag == "--reps") {
            opts.bench_reps = (int) parse_integer(flag, value(), 1, 100000);
        } else if (flag == "--warmup") {
            opts.bench_warmup = (int) parse_integer(flag, value(), 0, 100000);
        } else if (flag == "--bandwidth-mib") {
            opts.bandwidth_mib = (uint64_t) parse_integer(flag, value(), 0, 1 << 20);
        } else {
            throw UsageError("unknown option '" + args[i] + "' (see --help)");
        }
    }

    if (opts.model_path.empty()) {
        throw UsageError("--model PATH is required");
    }
    if (opts.mtp && !opts.draft_model_path.empty()) {
        throw UsageError("--mtp drafts with the model's own MTP block; leave out --draft-model");
    }
    const long long n_positions = (long long) opts.n_prompt + opts.n_gen;
    if (n_positions > opts.n_ctx) {
        throw UsageError("the prompt and the generated tokens need " + std::to_string(n_positions) +
                         " KV cells but --ctx is " + std::to_string(opts.n_ctx) +
                         "; raise --ctx or lower --n-prompt/--n-gen");
    }
    if (opts.mode == Mode::Replay || opts.mode == Mode::Slots) {
        for (const int b : opts.batch_sizes) {
            if ((uint32_t) b > opts.n_ctx) {
                throw UsageError("batch size " + std::to_string(b) + " exceeds the context size " +
                                 std::to_string(opts.n_ctx));
            }
            if (b > opts.n_gen) {
                throw UsageError("batch size " + std::to_string(b) + " exceeds --n-gen " +
                                 std::to_string(opts.n_gen) + ", so no full batch could be replayed");
            }
        }
        // b=1 is the sanity check and is handled separately from the measured sizes.
        opts.batch_sizes.erase(std::remove(opts.batch_sizes.begin(), opts.batch_sizes.end(), 1),
                               opts.batch_sizes.end());
    }
    if (opts.mode == Mode::Bench) {
        for (const int b : opts.batch_sizes) {
            if ((long long) opts.n_prompt + b > opts.n_ctx) {
                throw UsageError("a pass of " + std::to_string(b) + " tokens after the " +
                                 std::to_string(opts.n_prompt) + "-token prompt needs " +
                                 std::to_string(opts.n_prompt + b) + " KV cells but --ctx is " +
                                 std::to_string(opts.n_ctx) + "; raise --ctx or lower --n-prompt/--batches");
            }
        }
    }
    return opts;
}

// ---------------------------------------------------------------------------
// Minimal JSON writer (pretty-printed, no dependencies)
// ---------------------------------------------------------------------------

class JsonWriter {
public:
    void begin_object() { open('{'); }
    void end_object()   { close('}'); }
    void begin_array()  { open('['); }
    void end_array()    { close(']'); }

    JsonWriter & key(const std::string & name) {
        separate();
        out_ << quote(name) << ": ";
        after_key_ = true;
        return *this;
    }

    void value(const std::string & text) { scalar(quote(text)); }
    void value(const char * text)        { text ? scalar(quote(text)) : null(); }
    void value(bool flag)                { scalar(flag ? "true" : "false"); }
    void value(int number)               { scalar(std::to_string(number)); }
    void value(long long number)         { scalar(std::to_string(number)); }
    void value(uint64_t number)          { scalar(std::to_string(number)); }
    void value(double number) {
        if (!std::isfinite(number)) {
            null();  // JSON has no NaN or infinity
            return;
        }
        char buf[64];
        snprintf(buf, sizeof(buf), "%.9g", number);
        scalar(buf);
    }
    void null() { scalar("null"); }

    // A short list of integers on one line, e.g. [256, 263].
    void inline_array(const std::vector<int> & numbers) {
        std::string text = "[";
        for (size_t i = 0; i < numbers.size(); ++i) {
            text += (i ? ", " : "") + std::to_string(numbers[i]);
        }
        scalar(text + "]");
    }

    std::string str() const { return out_.str() + "\n"; }

private:
    std::ostringstream out_;
    std::vector<bool>  scope_has_items_;
    bool               after_key_ = false;

    static std::string quote(const std::string & text) {
        std::string quoted = "\"";
        for (const unsigned char c : text) {
            switch (c) {
                case '"':  quoted += "\\\""; break;
                case '\\': quoted += "\\\\"; break;
                case '\n': quoted += "\\n";  break;
                case '\r': quoted += "\\r";  break;
                case '\t': quoted += "\\t";  break;
                default:
                    if (c < 0x20) {
                        char buf[8];
                        snprintf(buf, sizeof(buf), "\\u%04x", c);
                        quoted += buf;
                    } else {
                        quoted += (char) c;
                    }
            }
        }
        return quoted + "\"";
    }

    void indent() { out_ << '\n' << std::string(2 * scope_has_items_.size(), ' '); }

    // Emits the comma and newline that precede an array element or object key.
    void separate() {
        if (scope_has_items_.empty()) {
            return;
        }
        if (scope_has_items_.back()) {
            out_ << ',';
        }
        scope_has_items_.back() = true;
        indent();
    }

    void before_value() {
        if (after_key_) {
            after_key_ = false;
        } else {
            separate();
        }
    }

    void scalar(const std::string & text) {
        before_value();
        out_ << text;
    }

    void open(char bracket) {
        before_value();
        out_ << bracket;
        scope_has_items_.push_back(false);
    }

    void close(char bracket) {
        const bool had_items = scope_has_items_.back();
        scope_has_items_.pop_back();
        if (had_items) {
            indent();
        }
        out_ << bracket;
    }
};

// ---------------------------------------------------------------------------
// llama.cpp helpers
// ---------------------------------------------------------------------------

struct ModelDeleter   { void operator()(llama_model * m) const   { llama_model_free(m); } };
struct ContextDeleter { void operator()(llama_context * c) const { llama_free(c); } };
using ModelPtr   = std::unique_ptr<llama_model, ModelDeleter>;
using ContextPtr = std::unique_ptr<llama_context, ContextDeleter>;

// Owns a llama_batch; each token belongs to one sequence (id 0 unless given).
class Batch {
public:
    explicit Batch(int capacity) : batch_(llama_batch_init(capacity, 0, 1)), capacity_(capacity) {}
    ~Batch() { llama_batch_free(batch_); }
    Batch(const Batch &) = delete;
    Batch & operator=(const Batch &) = delete;

    void clear() { batch_.n_tokens = 0; }

    void add(llama_token token, llama_pos pos, bool want_logits, llama_seq_id seq = 0) {
        if (batch_.n_tokens >= capacity_) {
            throw std::logic_error("batch capacity exceeded");
        }
        const int i = batch_.n_tokens++;
        batch_.token[i]     = token;
        batch_.pos[i]       = pos;
        batch_.n_seq_id[i]  = 1;
        batch_.seq_id[i][0] = seq;
        batch_.logits[i]    = want_logits ? 1 : 0;
    }

    int size() const { return batch_.n_tokens; }
    const llama_batch & get() const { return batch_; }

private:
    llama_batch batch_;
    int         capacity_;
};

struct LoadedModel {
    ModelPtr    model;
    std::string path;
    uint64_t    file_size = 0;
    std::string desc;
    std::string arch;
    int         n_vocab = 0;
    int         n_layer = 0;
    uint64_t    n_params = 0;
    // Experts per mixture-of-experts layer and experts each token uses; 0 for a dense model.
    int         n_expert = 0;
    int         n_expert_used = 0;
    // Tensors that an override placed (see LogState::tensors_overridden).
    int         tensors_overridden = 0;
};

// A string from the model's GGUF metadata, or "" when the key is absent.
std::string model_metadata(const llama_model * model, const std::string & key) {
    char buf[256] = {};
    return llama_model_meta_val_str(model, key.c_str(), buf, sizeof(buf)) < 0 ? "" : std::string(buf);
}

int model_metadata_int(const llama_model * model, const std::string & key) {
    const std::string text = model_metadata(model, key);
    return text.empty() ? 0 : std::atoi(text.c_str());
}

// The buffer types --override-tensor may name, as upstream's parse_tensor_buffer_overrides collects
// them: each ggml device's default buffer type under ggml_backend_buft_name (CPU, CUDA0, ...).
std::map<std::string, ggml_backend_buffer_type_t> device_buffer_types() {
    std::map<std::string, ggml_backend_buffer_type_t> types;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        if (ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(ggml_backend_dev_get(i))) {
            types[ggml_backend_buft_name(buft)] = buft;
        }
    }
    // --cpu-moe in upstream names ggml_backend_cpu_buffer_type() itself, which is the CPU device's.
    types.emplace(hiraishin::kCpuBufferType, ggml_backend_cpu_buffer_type());
    return types;
}

// The overrides as llama_model_params.tensor_buft_overrides takes them: ending in a null pattern,
// their patterns pointing into `overrides`, which must outlive the model's loading.
std::vector<llama_model_tensor_buft_override> buffer_overrides(const std::vector<hiraishin::TensorOverride> & overrides) {
    std::vector<llama_model_tensor_buft_override> entries;
    try {
        for (const auto & [override_, buft] : hiraishin::resolve_buffer_types(overrides, device_buffer_types())) {
            entries.push_back({override_->pattern.c_str(), buft});
        }
    } catch (const hiraishin::OverrideError & e) {
        throw UsageError(e.what());
    }
    entries.push_back({nullptr, nullptr});
    return entries;
}

// "--cpu-moe" or "--n-cpu-moe, --override-tensor": the options that placed tensors, once each.
std::string override_flags(const std::vector<hiraishin::TensorOverride> & overrides) {
    std::string flags;
    for (const auto & override_ : overrides) {
        if (flags.find(override_.flag) == std::string::npos) {
            flags += (flags.empty() ? "" : ", ") + override_.flag;
        }
    }
    return flags;
}

// llama.cpp's loader reports a non-GGUF file only through its log; checking
// the magic first gives a direct answer for the most common mistake.
void check_gguf_file(const std::string & flag, const std::string & path) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec)) {
        throw UsageError(flag + ": model file '" + path + "' does not exist or is not a regular file");
    }
    std::ifstream file(path, std::ios::binary);
    char magic[4] = {};
    if (!file.read(magic, sizeof(magic))) {
        throw UsageError(flag + ": cannot read '" + path + "' (empty or unreadable file)");
    }
    if (std::memcmp(magic, "GGUF", 4) != 0) {
        throw UsageError(flag + ": '" + path + "' is not a GGUF file (its first 4 bytes are not \"GGUF\")");
    }
}

LoadedModel load_model(const std::string & flag, const std::string & path, int n_gpu_layers,
                       const std::vector<hiraishin::TensorOverride> & overrides = {}) {
    check_gguf_file(flag, path);
    llama_model_params params = llama_model_default_params();
    params.n_gpu_layers = n_gpu_layers;
    const std::vector<llama_model_tensor_buft_override> placement = buffer_overrides(overrides);
    params.tensor_buft_overrides = overrides.empty() ? nullptr : placement.data();
    g_log.recent_errors.clear();
    g_log.tensors_overridden = 0;
    ModelPtr model(llama_model_load_from_file(path.c_str(), params));
    if (!model) {
        throw UsageError(flag + ": llama.cpp could not load '" + path + "'" + recent_llama_errors());
    }

    LoadedModel loaded;
    loaded.path      = path;
    loaded.file_size = (uint64_t) std::filesystem::file_size(path);
    char desc[256]   = {};
    llama_model_desc(model.get(), desc, sizeof(desc));
    loaded.desc      = desc;
    loaded.arch      = model_metadata(model.get(), "general.architecture");
    loaded.n_vocab   = llama_vocab_n_tokens(llama_model_get_vocab(model.get()));
    loaded.n_layer   = llama_model_n_layer(model.get());
    loaded.n_params  = llama_model_n_params(model.get());
    loaded.n_expert      = model_metadata_int(model.get(), loaded.arch + ".expert_count");
    loaded.n_expert_used = model_metadata_int(model.get(), loaded.arch + ".expert_used_count");
    loaded.tensors_overridden = g_log.tensors_overridden;
    loaded.model     = std::move(model);
    if (!overrides.empty() && loaded.tensors_overridden == 0) {
        // Not an error, as in llama.cpp: but a measurement "with the experts on the CPU" of a model
        // whose tensors stayed where they were would measure something else, so it is said.
        fprintf(stderr, "%s: warning: %s matched no tensor of '%s'%s, so every tensor is where --ngl puts it\n",
                kToolName, override_flags(overrides).c_str(), path.c_str(),
                loaded.n_expert == 0 ? " (it has no experts: not a mixture-of-experts model)" : "");
    }
    return loaded;
}

// How many sequences a context holds side by side, and whether they share one KV cache.
struct Sequences {
    int n_seq_max = 1;
    std::optional<bool> kv_unified;  // unset: llama.cpp's default
};

// mtp_of: a context of the model's MTP block (LLAMA_CONTEXT_TYPE_MTP) beside that target context, as
// llama-server's --spec-type draft-mtp makes one.
ContextPtr make_context(const Options & opts, llama_model * model, int max_batch, Sequences sequences = {},
                        llama_context * mtp_of = nullptr) {
    llama_context_params params = llama_context_default_params();
    if (mtp_of != nullptr) {
        params.ctx_type  = LLAMA_CONTEXT_TYPE_MTP;
        params.ctx_other = mtp_of;
        params.n_rs_seq  = 0;
    }
    // --ctx cells for each sequence, as llama-server -c N -np K gives each slot N/K
    params.n_ctx           = opts.n_ctx * (uint32_t) sequences.n_seq_max;
    // The prompt is prefilled in one batch, so one micro-batch must hold it.
    params.n_batch         = (uint32_t) std::max({512, opts.n_prompt, max_batch});
    params.n_ubatch        = params.n_batch;
    params.n_seq_max       = (uint32_t) sequences.n_seq_max;
    params.kv_unified      = sequences.kv_unified.value_or(params.kv_unified);
    params.n_threads       = opts.n_threads;
    params.n_threads_batch = opts.n_threads;
    params.flash_attn_type = flash_attn_type(opts.fa_name);
    params.type_k          = opts.cache_type_k.type;
    params.type_v          = opts.cache_type_v.type;
    params.no_perf         = true;

    g_log.recent_errors.clear();
    ContextPtr ctx(llama_init_from_model(model, params));
    if (!ctx) {
        // llama_init_from_model returns null both for configurations the
        // backend rejects (cache type, flash attention) and for allocation
        // failures; llama.cpp's own error lines say which.
        throw UsageError("could not create a llama.cpp context with ctx=" + std::to_string(opts.n_ctx) +
                         ", fa=" + opts.fa_name + ", K cache " + opts.cache_type_k.name + ", V cache " +
                         opts.cache_type_v.name +
                         ": the backend may not support this cache type / flash attention combination,"
                         " or memory ran out" + recent_llama_errors());
    }
    return ctx;
}

void decode_or_throw(llama_context * ctx, const Batch & batch, const char * what) {
    const int32_t rc = llama_decode(ctx, batch.get());
    if (rc != 0) {
        const char * meaning = rc == 1 ? " (no KV slot for the batch)"
                             : rc == 2 ? " (aborted)"
                             : rc == -1 ? " (invalid batch)" : " (fatal error)";
        throw RuntimeFailure(std::string("llama_decode failed during ") + what + " with status " +
                             std::to_string(rc) + meaning + recent_llama_errors());
    }
}

const float * logits_or_throw(llama_context * ctx, int32_t index) {
    const float * logits = llama_get_logits_ith(ctx, index);
    if (!logits) {
        throw RuntimeFailure("llama_get_logits_ith returned no logits for batch index " + std::to_string(index));
    }
    return logits;
}

void remove_from(llama_context * ctx, llama_pos first_removed) {
    if (!llama_memory_seq_rm(llama_get_memory(ctx), 0, first_removed, -1)) {
        throw RuntimeFailure("llama_memory_seq_rm could not roll the KV cache back to position " +
                             std::to_string(first_removed) + " (this memory type cannot drop a suffix)");
    }
}

// Greedy choice; ties go to the lowest token id so the choice is well defined.
llama_token argmax(const float * logits, int n_vocab) {
    llama_token best = 0;
    for (int i = 1; i < n_vocab; ++i) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    return best;
}

// splitmix64: a tiny generator whose output is the same with every compiler
// and standard library, unlike std::uniform_int_distribution.
uint64_t splitmix64(uint64_t & state) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

// Prompt tokens drawn uniformly from the vocabulary, skipping control,
// unknown and unused tokens, whose embeddings may be meaningless or that
// could end the sequence.
std::vector<llama_token> draw_prompt(const llama_model * model, int n_prompt, uint64_t seed) {
    const llama_vocab * vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int excluded = LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN | LLAMA_TOKEN_ATTR_UNUSED;

    std::vector<llama_token> prompt;
    prompt.reserve(n_prompt);
    uint64_t state = seed;
    for (int attempts = 0; (int) prompt.size() < n_prompt; ++attempts) {
        if (attempts > 1000 * n_prompt) {
            throw UsageError("the model's vocabulary has (almost) no ordinary tokens to draw a prompt from");
        }
        const auto token = (llama_token) (splitmix64(state) % (uint64_t) n_vocab);
        if ((llama_vocab_get_attr(vocab, token) & excluded) == 0 && !llama_vocab_is_eog(vocab, token)) {
            prompt.push_back(token);
        }
    }
    return prompt;
}

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
    return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double mean_of(const std::vector<double> & values) {
    return values.empty() ? NAN : std::accumulate(values.begin(), values.end(), 0.0) / values.size();
}

double median_of(std::vector<double> values) {
    if (values.empty()) {
        return NAN;
    }
    const size_t mid = values.size() / 2;
    std::nth_element(values.begin(), values.begin() + mid, values.end());
    const double upper = values[mid];
    if (values.size() % 2 == 1) {
        return upper;
    }
    return (*std::max_element(values.begin(), values.begin() + mid) + upper) / 2.0;
}

// Prefills the whole prompt as one batch, requesting logits for its last
// token only; every run uses this identical batch so that runs can differ
// only in what happens after the prompt.
void prefill(llama_context * ctx, const std::vector<llama_token> & prompt) {
    Batch batch((int) prompt.size());
    for (size_t i = 0; i < prompt.size(); ++i) {
        batch.add(prompt[i], (llama_pos) i, i + 1 == prompt.size());
    }
    decode_or_throw(ctx, batch, "prompt prefill");
}

// Runs one single-token and one batched decode and forgets them, so that
// one-time costs (graph allocation, weight repacking, cold caches) do not
// land in the first timed step. The logits are never used.
void warm_up(llama_context * ctx, const std::vector<llama_token> & prompt, int batch_size) {
    const int n = std::max(1, std::min(batch_size, (int) prompt.size()));
    Batch batch(n);
    for (int i = 0; i < n; ++i) {
        batch.add(prompt[i], i, true);
    }
    decode_or_throw(ctx, batch, "warm-up");
    batch.clear();
    batch.add(prompt[n % prompt.size()], n, true);
    decode_or_throw(ctx, batch, "warm-up");
    llama_synchronize(ctx);
    llama_memory_clear(llama_get_memory(ctx), true);
}

// ---------------------------------------------------------------------------
// Plain greedy decoding (the reference)
// ---------------------------------------------------------------------------

struct GreedyTrace {
    // generated[i] sits at KV position n_prompt + i; generated[0] comes from the prefill.
    std::vector<llama_token> generated;
    // step_logits[i * n_vocab ...]: logits produced by decoding generated[i] alone,
    // i.e. the logits for position n_prompt + i. Empty unless requested.
    std::vector<float>  step_logits;
    // step_hashes[i]: row_hash of those logits, where the whole rows would not fit in memory (slots).
    std::vector<uint64_t> step_hashes;
    std::vector<double> step_ms;
    double prefill_ms = 0.0;
};

// FNV-1a over raw bytes, as 16 hex digits: a fingerprint of the plain decoding,
// so that two builds (e.g. patched with the switch on, and stock) can be shown
// to decode one token at a time to the same bytes.
std::string fnv1a64_hex(const void * data, size_t n_bytes) {
    uint64_t h = 0xcbf29ce484222325ULL;
    const auto * p = static_cast<const unsigned char *>(data);
    for (size_t i = 0; i < n_bytes; ++i) {
        h = (h ^ p[i]) * 0x100000001b3ULL;
    }
    char buf[17];
    snprintf(buf, sizeof(buf), "%016llx", (unsigned long long) h);
    return buf;
}

// A fingerprint of one position's logits, bit for bit: the slots subcommand keeps one per position
// of each request instead of the rows (8 requests of 600 positions over a 152k vocabulary would be
// 2.9 GB). Two rows with the same bytes get the same hash; rows that differ collide with a chance of
// 2^-64.
uint64_t row_hash(const float * logits, int n_vocab) {
    uint64_t h = 0x6a09e667f3bcc909ULL;
    for (int i = 0; i < n_vocab; ++i) {
        uint32_t bits;
        std::memcpy(&bits, &logits[i], sizeof(bits));
        uint64_t state = h ^ bits;
        h = splitmix64(state);
    }
    return h;
}

// Decodes n_gen single-token steps after the prompt: each step feeds the
// previous argmax and yields the logits for its own position.
GreedyTrace run_plain_greedy(llama_context * ctx, const std::vector<llama_token> & prompt, int n_gen,
                             int n_vocab, bool keep_logits, bool keep_hashes = false) {
    GreedyTrace trace;
    trace.generated.reserve(n_gen);
    trace.step_ms.reserve(n_gen);
    if (keep_logits) {
        trace.step_logits.resize((size_t) n_gen * n_vocab);
    }

    llama_memory_clear(llama_get_memory(ctx), true);
    auto start = Clock::now();
    prefill(ctx, prompt);
    llama_synchronize(ctx);
    trace.prefill_ms = ms_since(start);
    trace.generated.push_back(argmax(logits_or_throw(ctx, -1), n_vocab));

    const auto n_prompt = (llama_pos) prompt.size();
    Batch batch(1);
    for (int i = 0; i < n_gen; ++i) {
        batch.clear();
        batch.add(trace.generated[i], n_prompt + i, true);
        start = Clock::now();
        decode_or_throw(ctx, batch, "plain one-token decoding");
        llama_synchronize(ctx);
        trace.step_ms.push_back(ms_since(start));

        const float * logits = logits_or_throw(ctx, 0);
        if (keep_logits) {
            std::memcpy(&trace.step_logits[(size_t) i * n_vocab], logits, sizeof(float) * n_vocab);
        }
        if (keep_hashes) {
            trace.step_hashes.push_back(row_hash(logits, n_vocab));
        }
        if (i + 1 < n_gen) {
            trace.generated.push_back(argmax(logits, n_vocab));
        }
    }
    return trace;
}

// ---------------------------------------------------------------------------
// replay: batched re-decoding of the reference tokens
// ---------------------------------------------------------------------------

struct ReplayResult {
    int    batch_size          = 0;
    int    positions_compared  = 0;
    int    positions_differ    = 0;
    int    argmax_flips        = 0;
    double max_abs_diff        = 0.0;
    std::optional<int> first_diff_pos;
    // Inclusive [first, last] KV position ranges whose logits differ.
    std::vector<std::pair<int, int>> diff_ranges;
    std::vector<double> batch_ms;

    bool identical() const { return positions_differ == 0; }
};

struct Judgement {
    const char * verdict;
    bool         passed;
};

// The verdict of a run and whether it meets the expectation; prints the verdict line.
// `expected_difference` is the difference that --expect differ asks for.
Judgement judge(Expectation expect, bool differs, bool expected_difference) {
    Judgement j = {differs ? "differ" : "identical", true};
    switch (expect) {
        case Expectation::Identical: j.passed = !differs;            break;
        case Expectation::Differ:    j.passed = expected_difference; break;
        case Expectation::None:      j.passed = true;                break;
    }
    printf("\nverdict  %s (expect %s: %s)\n", j.verdict, expectation_name(expect), j.passed ? "passed" : "FAILED");
    return j;
}

// Tokens a batch starting at KV position `first_pos` may hold without crossing
// into the next 256-cell window (the same rule as the speculative 256 guard:
// a verify batch attends exactly the window its first token attends alone).
int window_room(llama_pos first_pos) {
    return kKvWindowStep - first_pos % kKvWindowStep;
}

// Pushes the reference tokens through in batches of b and compares each
// position's logits with the one-token run. With the 256 guard a batch that
// would cross a multiple of 256 KV cells is cut there, as a guarded verify
// batch is; without it every batch holds b tokens. A trailing partial batch
// is left out so every compared position came from a batch the rule allows.
ReplayResult replay_in_batches(llama_context * ctx, const std::vector<llama_token> & prompt,
                               const GreedyTrace & reference, int b, int n_vocab, int reps, bool guard_256) {
    const int n_gen    = (int) reference.generated.size();
    const auto n_prompt = (llama_pos) prompt.size();
    // The batch boundaries: [starts[i], starts[i+1]).
    std::vector<int> starts = {0};
    while (true) {
        const int first = starts.back();
        int size = b;
        if (guard_256) {
            size = std::min(size, window_room(n_prompt + first));
        }
        if (first + size > n_gen) {
            break;
        }
        starts.push_back(first + size);
    }
    const int n_full = starts.back();

    ReplayResult result;
    result.batch_size         = b;
    result.positions_compared = n_full;

    std::vector<bool> differs(n_full, false);
    std::vector<bool> flips(n_full, false);
    Batch batch(b);

    for (int rep = 0; rep < reps; ++rep) {
        llama_memory_clear(llama_get_memory(ctx), true);
        prefill(ctx, prompt);

        for (size_t i = 0; i + 1 < starts.size(); ++i) {
            const int first = starts[i];
            const int size  = starts[i + 1] - first;
            batch.clear();
            for (int j = 0; j < size; ++j) {
                batch.add(reference.generated[first + j], n_prompt + first + j, true);
            }
            const auto start = Clock::now();
            decode_or_throw(ctx, batch, "batched replay");
            llama_synchronize(ctx);
            result.batch_ms.push_back(ms_since(start));

            for (int j = 0; j < size; ++j) {
                const int step = first + j;
                const float * replayed = logits_or_throw(ctx, j);
                const float * expected = &reference.step_logits[(size_t) step * n_vocab];
                const hiraishin::PositionComparison c = hiraishin::compare_position(replayed, expected, n_vocab);
                if (!c.differs) {
                    continue;
                }
                differs[step] = true;
                if (c.argmax_flip) {
                    flips[step] = true;
                }
                result.max_abs_diff = std::max(result.max_abs_diff, c.max_abs_diff);
            }
        }
    }

    hiraishin::PositionTally tally = hiraishin::tally_positions(differs, flips, n_prompt);
    result.positions_differ = tally.positions_differ;
    result.argmax_flips     = tally.argmax_flips;
    result.first_diff_pos   = tally.first_diff_pos;
    result.diff_ranges      = std::move(tally.diff_ranges);
    return result;
}

// ---------------------------------------------------------------------------
// spec: greedy speculative decoding
// ---------------------------------------------------------------------------

struct SpecOutcome {
    std::vector<llama_token> emitted;
    long long drafted        = 0;
    long long accepted       = 0;
    int       verify_batches = 0;
    int       largest_verify = 0;
    double    decode_ms      = 0.0;
    // Rollbacks through a checkpoint (recurrent and hybrid models): partial acceptances whose target state was
    // restored and the accepted tokens decoded again as one batch, and how many of those batches' last
    // positions chose another token than the verify pass had (0 where batches are invariant).
    int       restores             = 0;
    int       redecode_mismatches  = 0;
};

// The recurrent state of sequence 0, saved before a pass that may be partly rejected. A recurrent layer's
// state holds every token it has seen and cannot drop a suffix (llama_memory_seq_rm refuses), so a rejected
// draft is undone as llama-server undoes it: the state saved before the pass is loaded back, the attention
// layers' cells after it are removed, and the accepted tokens are decoded again.
class RecurrentCheckpoint {
public:
    static constexpr llama_state_seq_flags kFlags = LLAMA_STATE_SEQ_FLAGS_PARTIAL_ONLY;

    void save(llama_context * ctx) {
        const size_t size = llama_state_seq_get_size_ext(ctx, 0, kFlags);
        data_.resize(size);
        if (llama_state_seq_get_data_ext(ctx, data_.data(), size, 0, kFlags) != size) {
            throw RuntimeFailure("llama_state_seq_get_data_ext could not save the recurrent state (" +
                                 std::to_string(size) + " bytes)" + recent_llama_errors());
        }
        pos_max_ = llama_memory_seq_pos_max(llama_get_memory(ctx), 0);
    }

    // Back to the saved state: positions after pos_max() are gone from every layer.
    void restore(llama_context * ctx) const {
        if (llama_state_seq_set_data_ext(ctx, data_.data(), data_.size(), 0, kFlags) != data_.size()) {
            throw RuntimeFailure("llama_state_seq_set_data_ext could not load the recurrent state back (" +
                                 std::to_string(data_.size()) + " bytes)" + recent_llama_errors());
        }
        remove_from(ctx, pos_max_ + 1);
    }

    llama_pos pos_max() const { return pos_max_; }

private:
    std::vector<uint8_t> data_;
    llama_pos pos_max_ = -1;
};

bool has_recurrent_state(const llama_context * ctx) {
    const llama_model * model = llama_get_model(ctx);
    return llama_model_is_recurrent(model) || llama_model_is_hybrid(model);
}

// Number of draft tokens allowed when the last sampled token sits at KV
// position p0: the verify batch covers positions p0..p0+k, and keeping it
// inside one 256-cell window means p0+k stays below the next multiple of 256.
int draft_limit_for_window(llama_pos p0) {
    const int r = (p0 + 1) % kKvWindowStep;
    return r == 0 ? 0 : kKvWindowStep - r;
}

// Drafts from the target model's own MTP block, as llama-server's draft-mtp (common/speculative.cpp) does: the
// block reads a token beside the target's hidden state at the position before it, so every batch the target
// decodes is mirrored into the MTP context with the target's states shifted by one row, and a draft chains
// the block's own hidden states. Greedy: each draft token is the block's argmax.
class MtpDrafter {
public:
    MtpDrafter(llama_context * target, llama_context * mtp, int n_embd, int n_vocab, int capacity)
        : target_(target), mtp_(mtp), n_embd_(n_embd), n_vocab_(n_vocab), capacity_(capacity),
          tokens_(capacity), embd_((size_t) capacity * n_embd), pos_(capacity), n_seq_id_(capacity, 1),
          seq_ids_(capacity, &seq0_), logits_(capacity), pending_h_(n_embd, 0.0f) {
        llama_set_embeddings_nextn(target_, true, /*masked*/ false);
        llama_set_embeddings_nextn(mtp_, true, /*masked*/ true);
    }

    ~MtpDrafter() { llama_set_embeddings_nextn(target_, false, false); }
    MtpDrafter(const MtpDrafter &) = delete;
    MtpDrafter & operator=(const MtpDrafter &) = delete;

    void reset() {
        llama_memory_clear(llama_get_memory(mtp_), true);
        std::fill(pending_h_.begin(), pending_h_.end(), 0.0f);
        verify_h_.clear();
    }

    // After the target decoded `tokens` at positions first..: the MTP context takes the same tokens, each
    // beside the target's state one row earlier (the first beside the last state of the batch before).
    void process(const std::vector<llama_token> & tokens, llama_pos first) {
        const int n = (int) tokens.size();
        verify_h_.assign((size_t) n * n_embd_, 0.0f);
        for (int i = 0; i < n; ++i) {
            const float * h = llama_get_embeddings_nextn_ith(target_, i);
            if (h == nullptr) {
                throw RuntimeFailure("the target gave no MTP hidden state for row " + std::to_string(i) +
                                     recent_llama_errors());
            }
            std::copy(h, h + n_embd_, verify_h_.begin() + (ptrdiff_t) i * n_embd_);
        }
        remove_from(mtp_, first);
        for (int begin = 0; begin < n; begin += capacity_) {
            const int end = std::min(n, begin + capacity_);
            clear();
            for (int i = begin; i < end; ++i) {
                add(tokens[i], first + i, i == 0 ? pending_h_.data() : &verify_h_[(size_t) (i - 1) * n_embd_], false);
            }
            decode("mirroring a target batch");
        }
        pending_h_.assign(verify_h_.end() - n_embd_, verify_h_.end());
    }

    // The target accepted n drafts of the batch last processed: the next token it chose came from row n.
    void accept(int n_accepted) {
        const int rows = (int) (verify_h_.size() / n_embd_);
        const int row = std::min(n_accepted, rows - 1);
        pending_h_.assign(verify_h_.begin() + (ptrdiff_t) row * n_embd_, verify_h_.begin() + (ptrdiff_t) (row + 1) * n_embd_);
    }

    // k draft tokens after `last` at position p: the block's argmax, fed back with its own state.
    std::vector<llama_token> draft(llama_token last, llama_pos p, int k) {
        std::vector<llama_token> out;
        remove_from(mtp_, p);  // a draft region of the step before, or a rejected draft's mirrored row
        std::vector<float> h = pending_h_;
        llama_token token = last;
        for (int i = 0; i < k; ++i) {
            clear();
            add(token, p + i, h.data(), true);
            decode("drafting");
            token = argmax(logits_or_throw(mtp_, 0), n_vocab_);
            out.push_back(token);
            const float * next_h = llama_get_embeddings_nextn_ith(mtp_, 0);
            if (next_h == nullptr) {
                throw RuntimeFailure("the MTP block gave no hidden state" + recent_llama_errors());
            }
            h.assign(next_h, next_h + n_embd_);
        }
        return out;
    }

private:
    void clear() { n_ = 0; }

    void add(llama_token token, llama_pos pos, const float * h, bool want_logits) {
        tokens_[n_] = token;
        std::copy(h, h + n_embd_, embd_.begin() + (ptrdiff_t) n_ * n_embd_);
        pos_[n_] = pos;
        logits_[n_] = want_logits ? 1 : 0;
        ++n_;
    }

    void decode(const char * what) {
        // llama_batch_init makes either tokens or embeddings; the MTP block reads both.
        llama_batch batch = {};
        batch.n_tokens = n_;
        batch.token    = tokens_.data();
        batch.embd     = embd_.data();
        batch.pos      = pos_.data();
        batch.n_seq_id = n_seq_id_.data();
        batch.seq_id   = seq_ids_.data();
        batch.logits   = logits_.data();
        const int32_t rc = llama_decode(mtp_, batch);
        if (rc != 0) {
            throw RuntimeFailure(std::string("llama_decode failed in the MTP context (") + what + "): " +
                                 std::to_string(rc) + recent_llama_errors());
        }
    }

    llama_context * target_;
    llama_context * mtp_;
    int n_embd_;
    int n_vocab_;
    int capacity_;
    int n_ = 0;
    llama_seq_id seq0_ = 0;
    std::vector<llama_token> tokens_;
    std::vector<float> embd_;
    std::vector<llama_pos> pos_;
    std::vector<int32_t> n_seq_id_;
    std::vector<llama_seq_id *> seq_ids_;
    std::vector<int8_t> logits_;
    std::vector<float> pending_h_;  // the target's state at the row before the next token to mirror or draft after
    std::vector<float> verify_h_;   // the target's states of the batch last processed, one row each
};

SpecOutcome run_speculative(const Options & opts, llama_context * target, llama_context * draft,
                            const std::vector<llama_token> & prompt, int n_gen, int n_vocab,
                            MtpDrafter * mtp = nullptr) {
    SpecOutcome out;
    const auto n_prompt = (llama_pos) prompt.size();

    // Token at any KV position of the sequence built so far.
    auto token_at = [&](llama_pos pos) {
        return pos < n_prompt ? prompt[pos] : out.emitted[pos - n_prompt];
    };

    llama_memory_clear(llama_get_memory(target), true);
    prefill(target, prompt);
    out.emitted.push_back(argmax(logits_or_throw(target, -1), n_vocab));
    if (mtp != nullptr) {
        mtp->reset();
        mtp->process(prompt, 0);
    } else {
        llama_memory_clear(llama_get_memory(draft), true);
        prefill(draft, prompt);
    }
    llama_synchronize(draft);  // keep the prefill out of the timed loop
    llama_pos draft_n_past = n_prompt;  // positions [0, draft_n_past) are in the draft's KV cache

    Batch verify(kMaxVerifyBatch);
    Batch single(1);
    std::vector<llama_token> drafts;
    const bool target_checkpoints = has_recurrent_state(target);
    const bool draft_checkpoints  = mtp == nullptr && has_recurrent_state(draft);
    RecurrentCheckpoint target_checkpoint;
    RecurrentCheckpoint draft_checkpoint;

    const auto start = Clock::now();
    while ((int) out.emitted.size() < n_gen) {
        const llama_token last = out.emitted.back();
        const llama_pos   p0   = n_prompt + (llama_pos) out.emitted.size() - 1;

        // Each step emits accepted drafts plus one target token; never draft past n_gen.
        int k = std::min({opts.n_draft, kMaxVerifyBatch - 1, n_gen - (int) out.emitted.size() - 1});
        if (opts.guard_256) {
            k = std::min(k, draft_limit_for_window(p0));
        }

        drafts.clear();
        if (k > 0 && mtp != nullptr) {
            drafts = mtp->draft(last, p0, k);
        } else if (k > 0) {
            // Catch the draft up one token at a time (normally just `last`), so a
            // self-draft computes exactly what plain decoding computes.
            for (llama_pos pos = draft_n_past; pos <= p0; ++pos) {
                single.clear();
                single.add(token_at(pos), pos, true);
                decode_or_throw(draft, single, "draft catch-up");
            }
            draft_n_past = p0 + 1;
            if (draft_checkpoints) {
                draft_checkpoint.save(draft);  // the state after `last`, which every outcome keeps
            }
            drafts.push_back(argmax(logits_or_throw(draft, 0), n_vocab));
            while ((int) drafts.size() < k) {
                single.clear();
                single.add(drafts.back(), draft_n_past, true);
                decode_or_throw(draft, single, "drafting");
                ++draft_n_past;
                drafts.push_back(argmax(logits_or_throw(draft, 0), n_vocab));
            }
        }

        if (target_checkpoints && k > 0) {
            target_checkpoint.save(target);  // the state before `last`
        }
        // Verify [last, d1..dk] in one batch; logits at batch index i predict the token after it.
        verify.clear();
        verify.add(last, p0, true);
        for (int i = 0; i < k; ++i) {
            verify.add(drafts[i], p0 + 1 + i, true);
        }
        decode_or_throw(target, verify, "verification");
        if (mtp != nullptr) {
            std::vector<llama_token> verified{last};
            verified.insert(verified.end(), drafts.begin(), drafts.begin() + k);
            mtp->process(verified, p0);
        }
        ++out.verify_batches;
        out.largest_verify = std::max(out.largest_verify, verify.size());

        int n_accepted = 0;
        llama_token next = argmax(logits_or_throw(target, 0), n_vocab);
        while (n_accepted < k && next == drafts[n_accepted]) {
            out.emitted.push_back(drafts[n_accepted]);
            ++n_accepted;
            next = argmax(logits_or_throw(target, n_accepted), n_vocab);
        }
        out.emitted.push_back(next);
        out.drafted  += k;
        out.accepted += n_accepted;
        if (mtp != nullptr) {
            mtp->accept(n_accepted);
        }

        // Both caches keep exactly the accepted prefix, last..d_accepted at p0..p0+n_accepted.
        const llama_pos keep_end = p0 + n_accepted + 1;
        if (target_checkpoints && n_accepted < k) {
            // As llama-server does: back to the state before the pass, then the accepted prefix once more as
            // one batch, whose state must be what one-token steps would have left.
            target_checkpoint.restore(target);
            verify.clear();
            verify.add(last, p0, n_accepted == 0);
            for (int i = 0; i < n_accepted; ++i) {
                verify.add(drafts[i], p0 + 1 + i, i == n_accepted - 1);
            }
            decode_or_throw(target, verify, "re-decoding the accepted tokens");
            ++out.restores;
            if (argmax(logits_or_throw(target, -1), n_vocab) != next) {
                ++out.redecode_mismatches;
            }
        } else if (!target_checkpoints) {
            remove_from(target, keep_end);
        }
        if (mtp == nullptr && draft_n_past > keep_end) {
            if (draft_checkpoints) {
                // the state after `last`; the accepted drafts come back through the next step's catch-up
                draft_checkpoint.restore(draft);
                draft_n_past = draft_checkpoint.pos_max() + 1;
            } else {
                remove_from(draft, keep_end);
                draft_n_past = keep_end;
            }
        }
    }
    llama_synchronize(target);
    out.decode_ms = ms_since(start);
    out.emitted.resize(n_gen);
    return out;
}

struct SpecPromptResult {
    uint64_t seed = 0;
    int      tokens_compared = 0;
    std::optional<int> first_mismatch;
    SpecOutcome outcome;
    double plain_tokens_per_s = 0.0;
    double spec_tokens_per_s  = 0.0;

    double acceptance_rate() const {
        return outcome.drafted == 0 ? NAN : (double) outcome.accepted / (double) outcome.drafted;
    }
};

// ---------------------------------------------------------------------------
// Reporting
// ---------------------------------------------------------------------------

const char * device_type_name(enum ggml_backend_dev_type type) {
    switch (type) {
        case GGML_BACKEND_DEVICE_TYPE_CPU:   return "cpu";
        case GGML_BACKEND_DEVICE_TYPE_GPU:   return "gpu";
        case GGML_BACKEND_DEVICE_TYPE_IGPU:  return "igpu";
        case GGML_BACKEND_DEVICE_TYPE_ACCEL: return "accel";
        default:                             return "other";
    }
}

struct DeviceInfo {
    std::string name;
    std::string description;
    std::string type;
};

std::vector<DeviceInfo> list_devices() {
    std::vector<DeviceInfo> devices;
    for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        devices.push_back({ggml_backend_dev_name(dev), ggml_backend_dev_description(dev),
                           device_type_name(ggml_backend_dev_type(dev))});
    }
    return devices;
}

// The workers' devices, registered as llama.cpp's --rpc does (common/arg.cpp, add_rpc_devices): the model's
// offloaded layers are then split across them and the local GPUs.
void add_rpc_servers(const std::vector<std::string> & servers) {
    if (servers.empty()) {
        return;
    }
    ggml_backend_reg_t rpc_reg = ggml_backend_reg_by_name("RPC");
    if (rpc_reg == nullptr) {
        throw RuntimeFailure("--rpc: this build has no RPC backend (libggml-rpc.so); build it with GGML_RPC=ON");
    }
    using add_server_t = ggml_backend_reg_t (*)(const char * endpoint);
    auto add_server = (add_server_t) ggml_backend_reg_get_proc_address(rpc_reg, "ggml_backend_rpc_add_server");
    if (add_server == nullptr) {
        throw RuntimeFailure("--rpc: the RPC backend has no ggml_backend_rpc_add_server");
    }
    for (const auto & server : servers) {
        g_log.recent_errors.clear();
        ggml_backend_reg_t reg = add_server(server.c_str());
        if (reg == nullptr) {
            // ggml-rpc has logged why: no connection, another protocol version, or its batch-invariant mode
            throw RuntimeFailure("--rpc: the RPC server " + server + " could not be used" + recent_llama_errors());
        }
        ggml_backend_register(reg);
    }
}

// With backends built as loadable modules, a module that was not found
// leaves no device at all; say where llama.cpp looks instead of failing later
// with a model-loading error.
void require_a_device() {
    if (ggml_backend_dev_count() == 0) {
        throw RuntimeFailure("no ggml backend device is available: the backend modules (libggml-cpu*.so, "
                             "libggml-cuda.so, ...) must be in this executable's directory or the current "
                             "directory, or GGML_BACKEND_PATH must name one");
    }
}

// Environment switches that batch-invariant builds read; recorded so a result
// file says which mode produced it.
const char * const kEnvSwitches[] = {"GGML_CUDA_BATCH_INVARIANT", "GGML_BATCH_INVARIANT"};

void write_common_json(JsonWriter & json, const Options & opts, const LoadedModel & model) {
    json.key("tool").value(kToolName);
    json.key("version").value(kToolVersion);
    json.key("patched_commit").value(kPatchedCommit[0] != '\0' ? kPatchedCommit : nullptr);
    json.key("mode").value(mode_name(opts.mode));
    json.key("model_path").value(model.path);
    json.key("model_size_bytes").value(model.file_size);
    json.key("model_desc").value(model.desc);
    json.key("model_arch").value(model.arch);
    json.key("model_n_params").value(model.n_params);
    json.key("n_vocab").value(model.n_vocab);
    json.key("n_layer").value(model.n_layer);
    json.key("n_expert").value(model.n_expert);
    json.key("n_expert_used").value(model.n_expert_used);
    json.key("devices").begin_array();
    for (const auto & dev : list_devices()) {
        json.begin_object();
        json.key("name").value(dev.name);
        json.key("description").value(dev.description);
        json.key("type").value(dev.type);
        json.end_object();
    }
    json.end_array();
    json.key("system_info").value(llama_print_system_info());
    json.key("ctx").value((long long) opts.n_ctx);
    json.key("fa").value(opts.fa_name);
    json.key("n_gpu_layers").value(opts.n_gpu_layers);
    json.key("rpc_servers").begin_array();
    for (const auto & server : opts.rpc_servers) {
        json.value(server);
    }
    json.end_array();
    json.key("tensor_overrides").begin_array();
    for (const auto & override_ : opts.tensor_overrides) {
        json.begin_object();
        json.key("pattern").value(override_.pattern);
        json.key("buffer_type").value(override_.buffer_type);
        json.key("flag").value(override_.flag);
        json.end_object();
    }
    json.end_array();
    json.key("tensors_overridden").value(model.tensors_overridden);
    json.key("cache_type_k").value(opts.cache_type_k.name);
    json.key("cache_type_v").value(opts.cache_type_v.name);
    json.key("n_prompt").value(opts.n_prompt);
    json.key("n_gen").value(opts.n_gen);
    json.key("seed").value(opts.seed);
    json.key("threads").value(opts.n_threads);
    json.key("env").begin_object();
    for (const char * name : kEnvSwitches) {
        json.key(name).value(std::getenv(name));
    }
    json.end_object();
    // the mode the library resolved from both switches (ggml_batch_invariant), which is what ran
    json.key("batch_invariant").value(ggml_batch_invariant());
}

void write_json_file(const std::string & path, const JsonWriter & json) {
    std::ofstream file(path, std::ios::binary | std::ios::trunc);
    file << json.str();
    if (!file.good()) {
        throw RuntimeFailure("could not write the JSON report to '" + path + "'");
    }
}

// The closing fields every report has, then the file.
void finish_report(JsonWriter & json, const Options & opts, const Judgement & judgement) {
    json.key("verdict").value(judgement.verdict);
    json.key("expect").value(expectation_name(opts.expect));
    json.key("passed").value(judgement.passed);
    json.end_object();
    write_json_file(opts.json_path, json);
}

std::string format_bytes(uint64_t bytes) {
    char buf[32];
    snprintf(buf, sizeof(buf), "%.1f MiB", bytes / (1024.0 * 1024.0));
    return buf;
}

void print_header(const Options & opts, const LoadedModel & model) {
    printf("%s %s: %s\n", kToolName, kToolVersion, mode_name(opts.mode));
    printf("model    %s (%s, %s, n_vocab %d, n_layer %d)\n", model.path.c_str(), format_bytes(model.file_size).c_str(),
           model.desc.c_str(), model.n_vocab, model.n_layer);
    if (model.n_expert > 0) {
        printf("experts  %d per layer, %d used per token\n", model.n_expert, model.n_expert_used);
    }
    if (!opts.tensor_overrides.empty()) {
        // --n-cpu-moe 48 is 48 patterns: the flags and the count say it in one line.
        printf("placed   %d tensor%s by %s (%zu pattern%s)\n", model.tensors_overridden,
               model.tensors_overridden == 1 ? "" : "s", override_flags(opts.tensor_overrides).c_str(),
               opts.tensor_overrides.size(), opts.tensor_overrides.size() == 1 ? "" : "s");
    }
    for (const auto & dev : list_devices()) {
        printf("device   %s: %s (%s)\n", dev.name.c_str(), dev.description.c_str(), dev.type.c_str());
    }
    printf("config   ctx %u, fa %s, ngl %d, K %s, V %s, prompt %d, generate %d, seed %" PRIu64 ", threads %d\n",
           opts.n_ctx, opts.fa_name.c_str(), opts.n_gpu_layers, opts.cache_type_k.name.c_str(),
           opts.cache_type_v.name.c_str(), opts.n_prompt, opts.n_gen, opts.seed, opts.n_threads);
    for (const char * name : kEnvSwitches) {
        const char * value = std::getenv(name);
        if (value) {
            printf("env      %s=%s\n", name, value);
        }
    }
    printf("mode     batch-invariant %s\n", ggml_batch_invariant() ? "on" : "off");
}

std::string optional_to_string(const std::optional<int> & value) {
    return value ? std::to_string(*value) : "-";
}

// ---------------------------------------------------------------------------
// Subcommands
// ---------------------------------------------------------------------------

int run_replay(const Options & opts) {
    LoadedModel model = load_model("--model", opts.model_path, opts.n_gpu_layers, opts.tensor_overrides);
    const int largest_batch = opts.batch_sizes.empty() ? 1 : opts.batch_sizes.back();
    ContextPtr ctx = make_context(opts, model.model.get(), largest_batch);
    print_header(opts, model);

    const std::vector<llama_token> prompt = draw_prompt(model.model.get(), opts.n_prompt, opts.seed);
    warm_up(ctx.get(), prompt, largest_batch);
    const GreedyTrace reference = run_plain_greedy(ctx.get(), prompt, opts.n_gen, model.n_vocab, true);
    printf("plain    %d one-token steps: %.3f ms mean, %.3f ms median (prefill %.1f ms)\n\n",
           (int) reference.step_ms.size(), mean_of(reference.step_ms), median_of(reference.step_ms),
           reference.prefill_ms);

    std::vector<int> sizes = opts.batch_sizes;
    if (opts.check_b1) {
        sizes.insert(sizes.begin(), 1);
    }

    printf("%4s %9s %9s %7s %12s %10s %10s %10s\n", "b", "compared", "differ", "flips", "max|diff|",
           "first-pos", "ms/batch", "median");
    std::vector<ReplayResult> results;
    for (const int b : sizes) {
        ReplayResult r = replay_in_batches(ctx.get(), prompt, reference, b, model.n_vocab, opts.timing_reps,
                                           opts.guard_256);
        printf("%4d %9d %9d %7d %12.6g %10s %10.3f %10.3f\n", r.batch_size, r.positions_compared,
               r.positions_differ, r.argmax_flips, r.max_abs_diff, optional_to_string(r.first_diff_pos).c_str(),
               mean_of(r.batch_ms), median_of(r.batch_ms));
        fflush(stdout);
        results.push_back(std::move(r));
    }

    bool any_differ        = false;
    bool any_batched_differ = false;
    bool b1_identical      = true;
    for (const auto & r : results) {
        any_differ = any_differ || !r.identical();
        if (r.batch_size == 1) {
            b1_identical = r.identical();
        } else {
            any_batched_differ = any_batched_differ || !r.identical();
        }
    }
    if (!b1_identical) {
        fprintf(stderr, "warning: b=1 replay differs from the one-token run, so decoding is not even "
                        "run-to-run deterministic here; batched results are not meaningful\n");
    }

    // A difference counts as the expected one only if b = 1 stayed exact.
    const auto [verdict, passed] = judge(opts.expect, any_differ, any_batched_differ && b1_identical);

    if (!opts.json_path.empty()) {
        JsonWriter json;
        json.begin_object();
        write_common_json(json, opts, model);
        json.key("timing_reps").value(opts.timing_reps);
        json.key("guard_256").value(opts.guard_256);
        json.key("plain").begin_object();
        json.key("steps").value((int) reference.step_ms.size());
        json.key("prefill_ms").value(reference.prefill_ms);
        json.key("ms_per_token_mean").value(mean_of(reference.step_ms));
        json.key("ms_per_token_median").value(median_of(reference.step_ms));
        json.key("tokens_fnv1a64").value(fnv1a64_hex(reference.generated.data(), reference.generated.size() * sizeof(llama_token)));
        json.key("logits_fnv1a64").value(fnv1a64_hex(reference.step_logits.data(), reference.step_logits.size() * sizeof(float)));
        json.end_object();
        json.key("results").begin_array();
        for (const auto & r : results) {
            json.begin_object();
            json.key("b").value(r.batch_size);
            json.key("sanity_check").value(r.batch_size == 1);
            json.key("positions_compared").value(r.positions_compared);
            json.key("positions_differ").value(r.positions_differ);
            json.key("argmax_flips").value(r.argmax_flips);
            json.key("max_abs_diff").value(r.max_abs_diff);
            json.key("first_diff_pos");
            r.first_diff_pos ? json.value(*r.first_diff_pos) : json.null();
            json.key("diff_position_ranges").begin_array();
            for (const auto & [first, last] : r.diff_ranges) {
                json.inline_array({first, last});
            }
            json.end_array();
            json.key("batches_timed").value((int) r.batch_ms.size());
            json.key("ms_per_batch_mean").value(mean_of(r.batch_ms));
            json.key("ms_per_batch_median").value(median_of(r.batch_ms));
            json.key("identical").value(r.identical());
            json.end_object();
        }
        json.end_array();
        finish_report(json, opts, {verdict, passed});
    }
    return passed ? kExitOk : kExitExpectationFailed;
}

// ---------------------------------------------------------------------------
// slots: requests side by side in one context, as a server's slots
// ---------------------------------------------------------------------------

// One request of the slots subcommand: its prompt, and its tokens and logits decoded alone.
struct SlotRequest {
    int      slot = 0;
    uint64_t seed = 0;
    std::vector<llama_token> prompt;
    GreedyTrace reference;
    int positions_differ = 0;
};

// What the shared run did with one verify batch size: positions compared and how many differ.
struct SlotsBatchResult {
    int b                  = 0;
    int batches            = 0;
    int positions_compared = 0;
    int positions_differ   = 0;
    int argmax_flips       = 0;
    std::optional<int> first_diff_pos;

    bool identical() const { return positions_differ == 0; }
};

// A request's next step in the shared run.
struct SlotState {
    int request     = -1;  // index into the requests, -1 while idle
    int prompt_fed  = 0;
    int tokens_fed  = 0;   // reference tokens fed after the prompt
    int batches_fed = 0;   // verify batches fed, which picks the next size
};

// One position the shared batch asks logits for.
struct SlotsOutput {
    int request;
    int step;  // the reference step whose logits it must reproduce
    int b;     // the size of the verify batch it came in
};

int run_slots(const Options & opts) {
    LoadedModel model = load_model("--model", opts.model_path, opts.n_gpu_layers, opts.tensor_overrides);
    std::vector<int> sizes = opts.batch_sizes;
    if (opts.check_b1) {
        sizes.insert(sizes.begin(), 1);
    }
    const int largest_batch = *std::max_element(sizes.begin(), sizes.end());
    const int n_slots       = opts.n_slots;

    // The reference: each request alone, in a context of its own.
    ContextPtr alone = make_context(opts, model.model.get(), largest_batch);
    print_header(opts, model);
    printf("slots    %d, KV cache %s, %d requests, prompts in chunks of %d tokens, slot s starting at step %d*s, "
           "256 guard %s\n", n_slots, opts.kv_unified ? "unified" : "a stream per slot", 2 * n_slots,
           kSlotsPromptChunk, kSlotsStagger, opts.guard_256 ? "on" : "off");

    std::vector<SlotRequest> requests(2 * n_slots);
    for (int r = 0; r < (int) requests.size(); ++r) {
        SlotRequest & request = requests[r];
        request.slot   = r % n_slots;
        request.seed   = opts.seed + (uint64_t) r;
        request.prompt = draw_prompt(model.model.get(), opts.n_prompt, request.seed);
        if (r == 0) {
            warm_up(alone.get(), request.prompt, largest_batch);
        }
        request.reference = run_plain_greedy(alone.get(), request.prompt, opts.n_gen, model.n_vocab, false, true);
    }
    alone.reset();
    printf("alone    %zu requests of %d tokens decoded one token at a time\n\n", requests.size(), opts.n_gen);

    // The shared run: every slot's sequence in one context, one llama_decode per step.
    const int step_capacity = n_slots * std::max(kSlotsPromptChunk, largest_batch);
    ContextPtr shared = make_context(opts, model.model.get(), step_capacity, {n_slots, opts.kv_unified});
    llama_memory_t memory = llama_get_memory(shared.get());
    const auto n_prompt = (llama_pos) opts.n_prompt;

    std::map<int, SlotsBatchResult> by_b;
    for (const int b : sizes) {
        by_b[b].b = b;
    }
    std::vector<SlotState> slots(n_slots);
    std::vector<int> next_request(n_slots);  // the slot's next request: r = slot + n_slots * round
    for (int s = 0; s < n_slots; ++s) {
        next_request[s] = s;
    }
    Batch batch(step_capacity);
    std::vector<SlotsOutput> outputs;
    std::vector<std::pair<int, int>> diff_positions;  // (request, KV position)
    int steps = 0;
    const auto started = Clock::now();

    for (int step = 0;; ++step) {
        batch.clear();
        outputs.clear();
        bool pending = false;
        for (int s = 0; s < n_slots; ++s) {
            SlotState & slot = slots[s];
            if (slot.request < 0 && next_request[s] < (int) requests.size() && step >= kSlotsStagger * s) {
                slot = SlotState{};
                slot.request = next_request[s];
                next_request[s] += n_slots;
            }
            if (slot.request < 0) {
                pending = pending || next_request[s] < (int) requests.size();
                continue;
            }
            pending = true;
            const SlotRequest & request = requests[slot.request];
            if (slot.prompt_fed < opts.n_prompt) {
                const int chunk = std::min(kSlotsPromptChunk, opts.n_prompt - slot.prompt_fed);
                for (int j = 0; j < chunk; ++j) {
                    batch.add(request.prompt[slot.prompt_fed + j], slot.prompt_fed + j, false, s);
                }
                slot.prompt_fed += chunk;
                continue;
            }
            // Slots take the sizes in turn from different places, so that one batch joins verify batches
            // of different sizes.
            int b = sizes[(s + slot.batches_fed) % sizes.size()];
            b = std::min(b, opts.n_gen - slot.tokens_fed);
            if (opts.guard_256) {
                b = std::min(b, window_room(n_prompt + slot.tokens_fed));
            }
            for (int j = 0; j < b; ++j) {
                const int at = slot.tokens_fed + j;
                batch.add(request.reference.generated[at], n_prompt + at, true, s);
                outputs.push_back({slot.request, at, b});
            }
            slot.tokens_fed += b;
            slot.batches_fed += 1;
            if (by_b.count(b)) {
                by_b[b].batches += 1;
            }
        }
        if (!pending) {
            break;
        }
        if (batch.size() == 0) {
            continue;
        }
        decode_or_throw(shared.get(), batch, "the slots' shared batch");
        steps += 1;

        int output_index = 0;
        for (int i = 0; i < batch.size(); ++i) {
            if (!batch.get().logits[i]) {
                continue;
            }
            const SlotsOutput & out = outputs[output_index++];
            SlotRequest & request = requests[out.request];
            const float * logits = logits_or_throw(shared.get(), i);
            // A size cut short by the end of the request or the 256 guard is counted under its own size.
            SlotsBatchResult & result = by_b[out.b];
            result.b = out.b;
            result.positions_compared += 1;
            if (row_hash(logits, model.n_vocab) == request.reference.step_hashes[out.step]) {
                continue;
            }
            const int position = (int) n_prompt + out.step;
            result.positions_differ += 1;
            request.positions_differ += 1;
            diff_positions.emplace_back(out.request, position);
            const bool last = out.step + 1 >= (int) request.reference.generated.size();
            if (!last && argmax(logits, model.n_vocab) != request.reference.generated[out.step + 1]) {
                result.argmax_flips += 1;
            }
            if (!result.first_diff_pos || position < *result.first_diff_pos) {
                result.first_diff_pos = position;
            }
        }

        // A finished request leaves its slot: its cells are freed for the next request, which starts
        // at the next step, as a server slot takes the next request.
        for (int s = 0; s < n_slots; ++s) {
            SlotState & slot = slots[s];
            if (slot.request >= 0 && slot.tokens_fed >= opts.n_gen) {
                if (!llama_memory_seq_rm(memory, s, -1, -1)) {
                    throw RuntimeFailure("llama_memory_seq_rm could not free slot " + std::to_string(s));
                }
                slot.request = -1;
            }
        }
    }
    const double shared_ms = ms_since(started);

    printf("%4s %9s %9s %9s %7s %10s\n", "b", "batches", "compared", "differ", "flips", "first-pos");
    bool any_differ = false;
    for (const auto & [b, r] : by_b) {
        printf("%4d %9d %9d %9d %7d %10s\n", b, r.batches, r.positions_compared, r.positions_differ, r.argmax_flips,
               optional_to_string(r.first_diff_pos).c_str());
        any_differ = any_differ || !r.identical();
    }
    printf("\n%-8s %6s %6s %9s\n", "request", "slot", "seed", "differ");
    for (int r = 0; r < (int) requests.size(); ++r) {
        printf("%-8d %6d %6" PRIu64 " %9d\n", r, requests[r].slot, requests[r].seed, requests[r].positions_differ);
    }
    printf("shared   %d batches in %.1f ms\n", steps, shared_ms);

    const auto [verdict, passed] = judge(opts.expect, any_differ, any_differ);

    if (!opts.json_path.empty()) {
        JsonWriter json;
        json.begin_object();
        write_common_json(json, opts, model);
        json.key("slots").value(n_slots);
        json.key("kv_unified").value(opts.kv_unified);
        json.key("prompt_chunk").value(kSlotsPromptChunk);
        json.key("stagger_steps").value(kSlotsStagger);
        json.key("guard_256").value(opts.guard_256);
        json.key("shared_batches").value(steps);
        json.key("shared_ms").value(shared_ms);
        json.key("requests").begin_array();
        for (const auto & request : requests) {
            json.begin_object();
            json.key("slot").value(request.slot);
            json.key("seed").value(request.seed);
            json.key("positions_compared").value((int) request.reference.generated.size());
            json.key("positions_differ").value(request.positions_differ);
            json.key("tokens_fnv1a64").value(fnv1a64_hex(request.reference.generated.data(),
                                                         request.reference.generated.size() * sizeof(llama_token)));
            json.end_object();
        }
        json.end_array();
        json.key("results").begin_array();
        for (const auto & [b, r] : by_b) {
            json.begin_object();
            json.key("b").value(b);
            json.key("batches").value(r.batches);
            json.key("positions_compared").value(r.positions_compared);
            json.key("positions_differ").value(r.positions_differ);
            json.key("argmax_flips").value(r.argmax_flips);
            json.key("first_diff_pos");
            r.first_diff_pos ? json.value(*r.first_diff_pos) : json.null();
            json.key("identical").value(r.identical());
            json.end_object();
        }
        json.end_array();
        finish_report(json, opts, {verdict, passed});
    }
    return passed ? kExitOk : kExitExpectationFailed;
}

int run_spec(const Options & opts) {
    LoadedModel target = load_model("--model", opts.model_path, opts.n_gpu_layers, opts.tensor_overrides);
    std::optional<LoadedModel> separate_draft;
    if (!opts.draft_model_path.empty()) {
        separate_draft = load_model("--draft-model", opts.draft_model_path, opts.n_gpu_layers);
        if (separate_draft->n_vocab != target.n_vocab) {
            throw UsageError("the draft model's vocabulary (" + std::to_string(separate_draft->n_vocab) +
                             " tokens) differs from the target's (" + std::to_string(target.n_vocab) + ")");
        }
    }
    const LoadedModel & draft = separate_draft ? *separate_draft : target;
    if (opts.mtp && llama_model_n_layer_nextn(target.model.get()) <= 0) {
        throw UsageError("--mtp: " + target.path + " has no MTP block (its nextn_predict_layers is 0)");
    }

    ContextPtr target_ctx = make_context(opts, target.model.get(), kMaxVerifyBatch);
    // The MTP context mirrors every target batch, the prompt's too, so one of its batches holds a prompt.
    const int mtp_capacity = std::max(opts.n_prompt, kMaxVerifyBatch);
    ContextPtr draft_ctx  = opts.mtp ? make_context(opts, target.model.get(), mtp_capacity, {}, target_ctx.get())
                                     : make_context(opts, draft.model.get(), 1);
    print_header(opts, target);
    printf("draft    %s%s, n_draft %d, 256 guard %s, verify batches <= %d tokens\n",
           opts.mtp ? "the model's MTP block" : draft.path.c_str(),
           opts.mtp || separate_draft ? "" : " (self-draft)", opts.n_draft, opts.guard_256 ? "on" : "off",
           kMaxVerifyBatch);
    printf("rollback %s\n\n", has_recurrent_state(target_ctx.get())
               ? "recurrent state: restored from a checkpoint, accepted tokens decoded again as one batch"
               : "KV cells removed (llama_memory_seq_rm)");

    printf("%6s %9s %15s %11s %12s %12s %9s\n", "seed", "compared", "first-mismatch", "acceptance",
           "plain tok/s", "spec tok/s", "verifies");
    std::vector<SpecPromptResult> results;
    for (int p = 0; p < opts.n_prompts; ++p) {
        SpecPromptResult r;
        r.seed = opts.seed + (uint64_t) p;
        const std::vector<llama_token> prompt = draw_prompt(target.model.get(), opts.n_prompt, r.seed);
        if (p == 0) {
            warm_up(target_ctx.get(), prompt, kMaxVerifyBatch);
            if (!opts.mtp) {
                warm_up(draft_ctx.get(), prompt, 1);
            }
        }

        // Only the first n_gen-1 steps are needed to produce n_gen tokens, but
        // the extra step keeps the reference identical to the replay subcommand's.
        const GreedyTrace reference = run_plain_greedy(target_ctx.get(), prompt, opts.n_gen, target.n_vocab, false);
        const double plain_ms = std::accumulate(reference.step_ms.begin(), reference.step_ms.end(), 0.0);
        r.plain_tokens_per_s = opts.n_gen / (plain_ms / 1000.0);

        // The target outputs the MTP block's hidden states only while it drafts: the reference above is plain
        // decoding as a user runs it.
        std::optional<MtpDrafter> mtp;
        if (opts.mtp) {
            mtp.emplace(target_ctx.get(), draft_ctx.get(), llama_model_n_embd(target.model.get()), target.n_vocab,
                        mtp_capacity);
        }
        r.outcome = run_speculative(opts, target_ctx.get(), draft_ctx.get(), prompt, opts.n_gen, target.n_vocab,
                                    mtp ? &*mtp : nullptr);
        mtp.reset();
        r.spec_tokens_per_s = opts.n_gen / (r.outcome.decode_ms / 1000.0);
        r.tokens_compared   = opts.n_gen;
        for (int i = 0; i < opts.n_gen; ++i) {
            if (r.outcome.emitted[i] != reference.generated[i]) {
                r.first_mismatch = i;
                break;
            }
        }
        char acceptance[16] = "-";
        if (r.outcome.drafted > 0) {
            snprintf(acceptance, sizeof(acceptance), "%.1f%%", 100.0 * r.acceptance_rate());
        }
        printf("%6" PRIu64 " %9d %15s %11s %12.1f %12.1f %9d\n", r.seed, r.tokens_compared,
               optional_to_string(r.first_mismatch).c_str(), acceptance, r.plain_tokens_per_s,
               r.spec_tokens_per_s, r.outcome.verify_batches);
        fflush(stdout);
        results.push_back(std::move(r));
    }

    const bool any_mismatch = std::any_of(results.begin(), results.end(),
                                          [](const SpecPromptResult & r) { return r.first_mismatch.has_value(); });
    const auto [verdict, passed] = judge(opts.expect, any_mismatch, any_mismatch);

    if (!opts.json_path.empty()) {
        JsonWriter json;
        json.begin_object();
        write_common_json(json, opts, target);
        json.key("draft_model_path").value(opts.mtp ? std::string("mtp") : draft.path);
        json.key("draft_model_desc").value(opts.mtp ? std::string("the model's MTP block") : draft.desc);
        json.key("self_draft").value(!opts.mtp && !separate_draft.has_value());
        json.key("mtp").value(opts.mtp);
        json.key("n_draft").value(opts.n_draft);
        json.key("max_verify_batch").value(kMaxVerifyBatch);
        json.key("guard_256").value(opts.guard_256);
        json.key("results").begin_array();
        for (const auto & r : results) {
            json.begin_object();
            json.key("seed").value(r.seed);
            json.key("tokens_compared").value(r.tokens_compared);
            json.key("first_mismatch");
            r.first_mismatch ? json.value(*r.first_mismatch) : json.null();
            json.key("identical").value(!r.first_mismatch.has_value());
            json.key("drafted").value(r.outcome.drafted);
            json.key("accepted").value(r.outcome.accepted);
            json.key("acceptance_rate").value(r.acceptance_rate());
            json.key("verify_batches").value(r.outcome.verify_batches);
            json.key("largest_verify_batch").value(r.outcome.largest_verify);
            json.key("checkpoint_restores").value(r.outcome.restores);
            json.key("redecode_mismatches").value(r.outcome.redecode_mismatches);
            json.key("plain_tokens_per_s").value(r.plain_tokens_per_s);
            json.key("spec_tokens_per_s").value(r.spec_tokens_per_s);
            json.end_object();
        }
        json.end_array();
        finish_report(json, opts, {verdict, passed});
    }
    return passed ? kExitOk : kExitExpectationFailed;
}

// ---------------------------------------------------------------------------
// bench: verify-pass cost per batch size
// ---------------------------------------------------------------------------

struct TimingSummary {
    std::vector<double> ms;

    double median() const { return median_of(ms); }
    double mean() const { return mean_of(ms); }
    double min() const { return ms.empty() ? NAN : *std::min_element(ms.begin(), ms.end()); }
    double max() const { return ms.empty() ? NAN : *std::max_element(ms.begin(), ms.end()); }
};

void write_timing_json(JsonWriter & json, const TimingSummary & t) {
    json.key("median_ms").value(t.median());
    json.key("mean_ms").value(t.mean());
    json.key("min_ms").value(t.min());
    json.key("max_ms").value(t.max());
    json.key("samples_ms").begin_array();
    for (const double ms : t.ms) {
        json.value(ms);
    }
    json.end_array();
}

// Where every timed pass starts: right after the prompt. A KV cache drops a pass's cells; a model with recurrent
// layers cannot drop a suffix of its state (llama_memory_seq_rm refuses), so its state after the prompt is saved
// once and loaded back after each pass, outside the timed region, as llama-server's checkpoints do.
class PassStart {
public:
    PassStart(llama_context * ctx, const std::vector<llama_token> & prompt)
        : n_past_((llama_pos) prompt.size()), recurrent_(has_recurrent_state(ctx)) {
        if (recurrent_) {
            llama_memory_clear(llama_get_memory(ctx), true);
            prefill(ctx, prompt);
            llama_synchronize(ctx);
            checkpoint_.save(ctx);
        } else {
            remove_from(ctx, n_past_);
        }
    }

    void go_back(llama_context * ctx) const {
        if (recurrent_) {
            checkpoint_.restore(ctx);
        } else {
            remove_from(ctx, n_past_);
        }
    }

    llama_pos n_past() const { return n_past_; }
    // how the report names it
    const char * method() const { return recurrent_ ? "recurrent state checkpoint" : "KV cells removed"; }

private:
    llama_pos           n_past_;
    bool                recurrent_;
    RecurrentCheckpoint checkpoint_;
};

// One verify pass as speculative decoding makes it: b tokens at positions
// n_past..n_past+b-1, logits for all of them, waited for, then dropped from
// the KV cache (start.go_back) so that every pass starts from the same n_past. Each batch size
// runs its passes back to back, as a decoding loop that keeps one size would,
// so that per-size state (CUDA graphs, allocations) is reused as in serving.
TimingSummary time_verify_passes(llama_context * ctx, const std::vector<llama_token> & tokens, const PassStart & start,
                                 int batch_size, int warmup, int reps) {
    const llama_pos n_past = start.n_past();
    Batch batch(batch_size);
    TimingSummary timing;
    timing.ms.reserve(reps);
    for (int pass = 0; pass < warmup + reps; ++pass) {
        batch.clear();
        for (int i = 0; i < batch_size; ++i) {
            batch.add(tokens[(pass + i) % tokens.size()], n_past + i, true);
        }
        const auto started = Clock::now();
        decode_or_throw(ctx, batch, "a timed verify pass");
        llama_synchronize(ctx);
        const double ms = ms_since(started);
        if (pass >= warmup) {
            timing.ms.push_back(ms);
        }
        start.go_back(ctx);
    }
    return timing;
}

struct BandwidthResult {
    std::string device;
    uint64_t    bytes_copied = 0;
    TimingSummary timing;

    // A copy reads and writes every byte once.
    double gb_per_s() const { return 2.0 * (double) bytes_copied / (timing.median() * 1e-3) / 1e9; }
};

// Memory bandwidth of the device that holds the model, measured the way the
// backend moves memory: ggml_cpy between two tensors of `mib` MiB each, which
// the CUDA backend runs as a device-to-device cudaMemcpyAsync.
BandwidthResult measure_copy_bandwidth(uint64_t mib, int reps) {
    ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
    if (!dev) {
        dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    }
    if (!dev) {
        throw RuntimeFailure("no GPU or CPU backend device to measure copy bandwidth on");
    }
    std::unique_ptr<ggml_backend, decltype(&ggml_backend_free)> backend(ggml_backend_dev_init(dev, nullptr),
                                                                         ggml_backend_free);
    if (!backend) {
        throw RuntimeFailure(std::string("could not start the ") + ggml_backend_dev_name(dev) + " backend");
    }

    const size_t n_graph_nodes = 8;
    ggml_init_params params = {
        /*.mem_size   =*/ ggml_tensor_overhead() * 4 + ggml_graph_overhead_custom(n_graph_nodes, false),
        /*.mem_buffer =*/ nullptr,
        /*.no_alloc   =*/ true,
    };
    std::unique_ptr<ggml_context, decltype(&ggml_free)> ctx(ggml_init(params), ggml_free);
    const int64_t n_floats = (int64_t) (mib * 1024 * 1024 / sizeof(float));
    ggml_tensor * src = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_floats);
    ggml_tensor * dst = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, n_floats);
    std::unique_ptr<ggml_backend_buffer, decltype(&ggml_backend_buffer_free)> buffer(
        ggml_backend_alloc_ctx_tensors(ctx.get(), backend.get()), ggml_backend_buffer_free);
    if (!buffer) {
        throw RuntimeFailure("could not allocate 2 x " + std::to_string(mib) + " MiB on " +
                             ggml_backend_dev_name(dev) + " for the bandwidth measurement; lower --bandwidth-mib");
    }
    ggml_backend_buffer_clear(buffer.get(), 0);

    ggml_cgraph * graph = ggml_new_graph_custom(ctx.get(), n_graph_nodes, false);
    ggml_build_forward_expand(graph, ggml_cpy(ctx.get(), src, dst));

    BandwidthResult result;
    result.device       = ggml_backend_dev_description(dev);
    result.bytes_copied = ggml_nbytes(src);
    for (int pass = 0; pass < reps + 2; ++pass) {
        const auto start = Clock::now();
        if (ggml_backend_graph_compute(backend.get(), graph) != GGML_STATUS_SUCCESS) {
            throw RuntimeFailure("the bandwidth copy failed on " + std::string(ggml_backend_dev_name(dev)));
        }
        ggml_backend_synchronize(backend.get());
        if (pass >= 2) {
            result.timing.ms.push_back(ms_since(start));
        }
    }
    return result;
}

int run_bench(const Options & opts) {
    LoadedModel model = load_model("--model", opts.model_path, opts.n_gpu_layers, opts.tensor_overrides);
    const int largest_batch = *std::max_element(opts.batch_sizes.begin(), opts.batch_sizes.end());
    ContextPtr ctx = make_context(opts, model.model.get(), largest_batch);
    print_header(opts, model);

    const std::vector<llama_token> prompt = draw_prompt(model.model.get(), opts.n_prompt, opts.seed);
    // Tokens fed to the timed passes: any ordinary tokens do, the cost does not depend on them.
    const std::vector<llama_token> pass_tokens = draw_prompt(model.model.get(), kMaxVerifyBatch * 4, opts.seed + 1);
    warm_up(ctx.get(), prompt, largest_batch);

    // Plain decoding first; it leaves the prompt and n_gen tokens in the cache.
    const GreedyTrace plain = run_plain_greedy(ctx.get(), prompt, opts.n_gen, model.n_vocab, false);
    const double plain_ms = std::accumulate(plain.step_ms.begin(), plain.step_ms.end(), 0.0);
    const double plain_tokens_per_s = opts.n_gen / (plain_ms / 1000.0);
    printf("plain    %d one-token steps: %.3f ms median, %.1f tokens/s\n\n", opts.n_gen, median_of(plain.step_ms),
           plain_tokens_per_s);

    // Every pass starts right after the prompt.
    const PassStart start(ctx.get(), prompt);
    printf("%4s %10s %10s %10s %10s %10s\n", "b", "median ms", "mean ms", "min ms", "max ms", "x b=1");
    std::vector<std::pair<int, TimingSummary>> passes;
    double b1_median = NAN;
    for (const int b : opts.batch_sizes) {
        TimingSummary t = time_verify_passes(ctx.get(), pass_tokens, start, b,
                                             opts.bench_warmup, opts.bench_reps);
        if (b == 1) {
            b1_median = t.median();
        }
        printf("%4d %10.3f %10.3f %10.3f %10.3f %10.2f\n", b, t.median(), t.mean(), t.min(), t.max(),
               t.median() / b1_median);
        fflush(stdout);
        passes.emplace_back(b, std::move(t));
    }

    std::optional<BandwidthResult> bandwidth;
    if (opts.bandwidth_mib > 0) {
        bandwidth = measure_copy_bandwidth(opts.bandwidth_mib, opts.bench_reps);
        printf("\ncopy     %s: %.1f GB/s (read + write of %s, median of %d)\n", bandwidth->device.c_str(),
               bandwidth->gb_per_s(), format_bytes(bandwidth->bytes_copied).c_str(), opts.bench_reps);
    }

    if (!opts.json_path.empty()) {
        JsonWriter json;
        json.begin_object();
        write_common_json(json, opts, model);
        json.key("model_tensor_bytes").value((uint64_t) llama_model_size(model.model.get()));
        json.key("warmup").value(opts.bench_warmup);
        json.key("reps").value(opts.bench_reps);
        json.key("plain").begin_object();
        json.key("steps").value((int) plain.step_ms.size());
        json.key("tokens_per_s").value(plain_tokens_per_s);
        json.key("ms_per_token_median").value(median_of(plain.step_ms));
        json.key("ms_per_token_mean").value(mean_of(plain.step_ms));
        json.end_object();
        json.key("verify_passes").begin_array();
        for (const auto & [b, t] : passes) {
            json.begin_object();
            json.key("b").value(b);
            json.key("n_past").value(opts.n_prompt);
            write_timing_json(json, t);
            json.end_object();
        }
        json.end_array();
        json.key("pass_rewind").value(start.method());
        json.key("copy_bandwidth");
        if (bandwidth) {
            json.begin_object();
            json.key("device").value(bandwidth->device);
            json.key("bytes_copied").value(bandwidth->bytes_copied);
            json.key("gb_per_s").value(bandwidth->gb_per_s());
            write_timing_json(json, bandwidth->timing);
            json.end_object();
        } else {
            json.null();
        }
        finish_report(json, opts, {"measured", true});
    }
    return kExitOk;
}

}  // namespace

int main(int argc, char ** argv) {
    Options opts;
    try {
        opts = parse_options(argc, argv);
    } catch (const UsageError & e) {
        fprintf(stderr, "%s: error: %s\n", kToolName, e.what());
        return kExitUsageError;
    }

    g_log.verbose = opts.verbose;
    llama_log_set(log_callback, nullptr);
    // Backends may be built as loadable modules (GGML_BACKEND_DL); without this
    // call such a build would silently run on no device at all.
    ggml_backend_load_all();
    llama_backend_init();

    int status = kExitOk;
    try {
        add_rpc_servers(opts.rpc_servers);
        require_a_device();
        switch (opts.mode) {
            case Mode::Replay: status = run_replay(opts); break;
            case Mode::Spec:   status = run_spec(opts);   break;
            case Mode::Bench:  status = run_bench(opts);  break;
            case Mode::Slots:  status = run_slots(opts);  break;
        }
    } catch (const UsageError & e) {
        fprintf(stderr, "%s: error: %s\n", kToolName, e.what());
        status = kExitUsageError;
    } catch (const RuntimeFailure & e) {
        fprintf(stderr, "%s: runtime failure: %s\n", kToolName, e.what());
        status = kExitRuntimeFailure;
    } catch (const std::exception & e) {
        fprintf(stderr, "%s: runtime failure: %s\n", kToolName, e.what());
        status = kExitRuntimeFailure;
    }
    llama_backend_free();
    return status;
}
