// Tests of replay_overrides.h: hiraishin-replay's --cpu-moe, --n-cpu-moe and --override-tensor place
// tensors as llama.cpp's common arguments do, and refuse a bad value with a message naming it.
// Built and run by tests/wheels/test_replay_overrides.py:
//   c++ -std=c++17 -o replay_overrides_test replay_overrides_test.cpp && ./replay_overrides_test
// Prints one line per failed check and a closing "N passed, M failed" line; exits 1 on a failure.

#include "replay_overrides.h"

#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

int passed = 0;
int failed = 0;

void check(bool ok, const std::string & what) {
    if (ok) {
        ++passed;
    } else {
        ++failed;
        std::printf("FAILED: %s\n", what.c_str());
    }
}

// The first override whose pattern llama.cpp's loader would find in `tensor` (std::regex_search,
// first match decides), or "" when none matches.
std::string placement(const std::vector<hiraishin::TensorOverride> & overrides, const std::string & tensor) {
    for (const auto & override_ : overrides) {
        if (std::regex_search(tensor, std::regex(override_.pattern))) {
            return override_.buffer_type;
        }
    }
    return "";
}

void accepts(const std::string & text, const std::vector<std::pair<std::string, std::string>> & expected) {
    try {
        const auto overrides = hiraishin::parse_override_list("--override-tensor", text);
        bool same = overrides.size() == expected.size();
        for (size_t i = 0; same && i < overrides.size(); ++i) {
            same = overrides[i].pattern == expected[i].first && overrides[i].buffer_type == expected[i].second &&
                   overrides[i].flag == "--override-tensor";
        }
        check(same, "'" + text + "' was read as expected");
    } catch (const hiraishin::OverrideError & e) {
        check(false, "'" + text + "' was refused: " + e.what());
    }
}

void refuses(const std::string & text, const std::string & message_part) {
    try {
        hiraishin::parse_override_list("-ot", text);
        check(false, "'" + text + "' was accepted");
    } catch (const hiraishin::OverrideError & e) {
        const std::string message = e.what();
        check(message.rfind("-ot", 0) == 0 && message.find(message_part) != std::string::npos &&
                  message.find("'" + text + "'") != std::string::npos,
              "'" + text + "' was refused with \"" + message + "\", which should start with the flag, say \"" +
                  message_part + "\" and name the value");
    }
}

// Tensor names of the mixture-of-experts architectures the smoke test runs (qwen3moe, gpt-oss).
void expert_patterns() {
    const std::vector<hiraishin::TensorOverride> all = {hiraishin::all_experts_on_cpu("--cpu-moe")};
    for (const char * tensor : {"blk.0.ffn_up_exps.weight", "blk.47.ffn_down_exps.weight", "blk.3.ffn_gate_exps.weight",
                                "blk.2.ffn_gate_up_exps.weight", "blk.1.ffn_up_chexps.weight",
                                "blk.5.ffn_gate_exps.bias"}) {
        check(placement(all, tensor) == "CPU", std::string("--cpu-moe puts ") + tensor + " on the CPU");
    }
    // The router, the shared experts, attention and the dense FFN stay where --ngl puts them.
    for (const char * tensor : {"blk.0.ffn_gate_inp.weight", "blk.0.ffn_up_shexp.weight", "blk.0.attn_q.weight",
                                "blk.0.ffn_up.weight", "output.weight", "token_embd.weight", "blk.0.exp_probs_b.bias"}) {
        check(placement(all, tensor).empty(), std::string("--cpu-moe leaves ") + tensor + " alone");
    }

    const auto first_two = hiraishin::first_layers_experts_on_cpu("--n-cpu-moe", 2);
    check(first_two.size() == 2 && first_two[0].pattern == "blk\\.0\\.ffn_(up|down|gate|gate_up)_(ch|)exps" &&
              first_two[1].flag == "--n-cpu-moe",
          "--n-cpu-moe 2 is upstream's llm_ffn_exps_block_regex for layers 0 and 1");
    check(placement(first_two, "blk.1.ffn_down_exps.weight") == "CPU", "--n-cpu-moe 2 places layer 1's experts");
    // "blk\.1\." must not match layers 10-19: the dot after the number is part of the pattern.
    check(placement(first_two, "blk.10.ffn_down_exps.weight").empty(), "--n-cpu-moe 2 leaves layer 10 alone");
    check(placement(first_two, "blk.2.ffn_up_exps.weight").empty(), "--n-cpu-moe 2 leaves layer 2 alone");
    check(hiraishin::first_layers_experts_on_cpu("--n-cpu-moe", 0).empty(), "--n-cpu-moe 0 places nothing");
}

void override_lists() {
    accepts("exps=CPU", {{"exps", "CPU"}});
    accepts("blk\\.[0-3]\\.ffn_.*_exps=CPU,output=CUDA0", {{"blk\\.[0-3]\\.ffn_.*_exps", "CPU"}, {"output", "CUDA0"}});
    // As upstream: split at the first '=', so a buffer type name is taken whole.
    accepts("a=b=c", {{"a", "b=c"}});

    refuses("exps", "has no '='");
    refuses("", "has no '='");
    refuses("exps=CPU,", "has no '='");
    refuses("=CPU", "has no tensor pattern before '='");
    refuses("exps=", "has no buffer type after '='");
    refuses("blk.(=CPU", "is not a regular expression");
    refuses("[=CPU", "is not a regular expression");
}

void buffer_types() {
    const std::map<std::string, int> available = {{"CPU", 1}, {"CUDA0", 2}};
    std::vector<hiraishin::TensorOverride> overrides = hiraishin::parse_override_list("-ot", "exps=CUDA0,output=CPU");
    overrides.push_back(hiraishin::all_experts_on_cpu("--cpu-moe"));
    const auto resolved = hiraishin::resolve_buffer_types(overrides, available);
    check(resolved.size() == 3 && resolved[0].second == 2 && resolved[1].second == 1 && resolved[2].second == 1 &&
              resolved[2].first == &overrides[2],
          "buffer types are looked up by name, each override keeping its own");

    for (const char * name : {"cpu", "CUDA1", "Cpu"}) {
        try {
            hiraishin::resolve_buffer_types(hiraishin::parse_override_list("-ot", std::string("exps=") + name), available);
            check(false, std::string("unknown buffer type ") + name + " was accepted");
        } catch (const hiraishin::OverrideError & e) {
            const std::string message = e.what();
            check(message.find(std::string("unknown buffer type '") + name + "'") != std::string::npos &&
                      message.find("this build's buffer types: CPU, CUDA0") != std::string::npos,
                  "unknown buffer type " + std::string(name) + " is refused with the names there are: " + message);
        }
    }
    try {
        hiraishin::resolve_buffer_types(std::vector<hiraishin::TensorOverride>{hiraishin::all_experts_on_cpu("--cpu-moe")},
                                        std::map<std::string, int>{});
        check(false, "a build without devices accepted --cpu-moe");
    } catch (const hiraishin::OverrideError & e) {
        check(std::string(e.what()).rfind("--cpu-moe: ", 0) == 0, "the message names the flag that asked");
    }
}

}  // namespace

int main() {
    expert_patterns();
    override_lists();
    buffer_types();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
