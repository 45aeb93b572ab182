// Where hiraishin-replay puts a model's tensors: --cpu-moe, --n-cpu-moe N and --override-tensor
// PATTERN=BUFFER_TYPE, read as llama.cpp's common arguments read them (common/arg.cpp, common/common.h),
// so that a placement a user runs llama-server with is the one the replay measures. Apart from
// llama.cpp so that a small test (replay_overrides_test.cpp) can hold the parsing and the buffer type
// lookup to upstream's rules without a model or a backend.
#pragma once

#include <map>
#include <regex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace hiraishin {

// The expert tensors of a mixture-of-experts layer: upstream's LLM_FFN_EXPS_REGEX (common/common.h),
// which its --cpu-moe puts on the CPU. "ch" covers the chunked expert tensors some architectures have,
// gate_up the fused gate and up projections.
inline const char * const kExpertTensorRegex = "\\.ffn_(up|down|gate|gate_up)_(ch|)exps";

// The expert tensors of layer `layer` alone: upstream's llm_ffn_exps_block_regex, one per layer of
// --n-cpu-moe N.
inline std::string expert_block_regex(int layer) {
    return "blk\\." + std::to_string(layer) + kExpertTensorRegex;
}

// The buffer type --cpu-moe and --n-cpu-moe name: the CPU device's, as llama.cpp calls it.
inline const char * const kCpuBufferType = "CPU";

// One tensor placement: tensors whose name matches `pattern` (std::regex_search, as llama.cpp's
// loader matches it) go to the buffer type named `buffer_type`. `flag` is the option that asked for
// it, for messages and the report. The first override that matches a tensor decides, as in llama.cpp.
struct TensorOverride {
    std::string pattern;
    std::string buffer_type;
    std::string flag;
};

// What is wrong with a placement option; the message names the value and how to write it.
struct OverrideError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

// llama.cpp compiles each pattern with std::regex for every tensor it loads; a pattern that does not
// compile would fail the load with a message that does not name the option, so it is refused here.
inline void check_pattern(const std::string & flag, const std::string & item, const std::string & pattern) {
    try {
        const std::regex compiled(pattern);
        (void) compiled;
    } catch (const std::regex_error & e) {
        throw OverrideError(flag + ": '" + pattern + "' in '" + item + "' is not a regular expression (" +
                            e.what() + "); tensor patterns are ECMAScript regular expressions, e.g. exps or "
                            "blk\\.[0-3]\\.ffn_.*_exps");
    }
}

// --override-tensor "PATTERN=BUFFER_TYPE[,PATTERN=BUFFER_TYPE...]", split as upstream's
// parse_tensor_buffer_overrides splits it: at commas, then at the first '=' of each item.
inline std::vector<TensorOverride> parse_override_list(const std::string & flag, const std::string & text) {
    const std::string form = " expects PATTERN=BUFFER_TYPE[,PATTERN=BUFFER_TYPE...], e.g. exps=CPU";
    std::vector<TensorOverride> overrides;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        const size_t eq = item.find('=');
        if (eq == std::string::npos) {
            throw OverrideError(flag + form + "; '" + item + "' in '" + text + "' has no '='");
        }
        TensorOverride override_ = {item.substr(0, eq), item.substr(eq + 1), flag};
        if (override_.pattern.empty()) {
            throw OverrideError(flag + form + "; '" + item + "' in '" + text + "' has no tensor pattern before '='");
        }
        if (override_.buffer_type.empty()) {
            throw OverrideError(flag + form + "; '" + item + "' in '" + text + "' has no buffer type after '='");
        }
        check_pattern(flag, item, override_.pattern);
        overrides.push_back(std::move(override_));
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return overrides;
}

// --cpu-moe: every expert tensor on the CPU (upstream's llm_ffn_exps_cpu_override).
inline TensorOverride all_experts_on_cpu(const std::string & flag) {
    return {kExpertTensorRegex, kCpuBufferType, flag};
}

// --n-cpu-moe N: the expert tensors of layers 0..N-1 on the CPU, one pattern per layer as upstream
// makes them. Layers the model does not have match nothing.
inline std::vector<TensorOverride> first_layers_experts_on_cpu(const std::string & flag, int n_layers) {
    std::vector<TensorOverride> overrides;
    for (int layer = 0; layer < n_layers; ++layer) {
        overrides.push_back({expert_block_regex(layer), kCpuBufferType, flag});
    }
    return overrides;
}

// Each override with the buffer type its name stands for in `available` (upstream: the default
// buffer type of every ggml device, by ggml_backend_buft_name). An unknown name is refused with
// the names there are, as upstream prints them.
template <typename BufferType>
std::vector<std::pair<const TensorOverride *, BufferType>> resolve_buffer_types(
        const std::vector<TensorOverride> & overrides, const std::map<std::string, BufferType> & available) {
    std::vector<std::pair<const TensorOverride *, BufferType>> resolved;
    for (const TensorOverride & override_ : overrides) {
        const auto it = available.find(override_.buffer_type);
        if (it == available.end()) {
            std::string names;
            for (const auto & [name, buft] : available) {
                names += (names.empty() ? "" : ", ") + name;
            }
            throw OverrideError(override_.flag + ": unknown buffer type '" + override_.buffer_type + "' in '" +
                                override_.pattern + "=" + override_.buffer_type + "'; this build's buffer types: " +
                                (names.empty() ? "none (no backend device was found)" : names) +
                                " (names are case-sensitive)");
        }
        resolved.emplace_back(&override_, it->second);
    }
    return resolved;
}

}  // namespace hiraishin
