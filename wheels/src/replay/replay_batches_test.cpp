// Tests of replay_batches.h: hiraishin-replay's --batches takes the forms
// hiraishin-llama-smoke takes, and refuses the rest with a message naming the value.
// Built and run by tests/wheels/test_replay_batches.py:
//   c++ -std=c++17 -o replay_batches_test replay_batches_test.cpp && ./replay_batches_test
// Prints one line per failed check and a closing "N passed, M failed" line; exits 1 on a failure.

#include "replay_batches.h"

#include <cstdio>
#include <string>
#include <vector>

namespace {

int passed = 0;
int failed = 0;

// As hiraishin-replay calls it: open ranges end at the largest verify batch, 16.
constexpr int kOpenRangeEnd = 16;
constexpr int kMaxSize      = 1 << 20;

std::string joined(const std::vector<int> & sizes) {
    std::string text;
    for (const int b : sizes) {
        text += (text.empty() ? "" : ",") + std::to_string(b);
    }
    return text;
}

void accepts(const std::string & text, const std::vector<int> & expected) {
    try {
        const std::vector<int> sizes = hiraishin::parse_batch_list(text, kOpenRangeEnd, kMaxSize);
        if (sizes == expected) {
            ++passed;
            return;
        }
        std::printf("FAILED: '%s' gave %s, expected %s\n", text.c_str(), joined(sizes).c_str(),
                    joined(expected).c_str());
    } catch (const hiraishin::BatchListError & e) {
        std::printf("FAILED: '%s' was refused: %s\n", text.c_str(), e.what());
    }
    ++failed;
}

void refuses(const std::string & text, const std::string & message_part) {
    try {
        const std::vector<int> sizes = hiraishin::parse_batch_list(text, kOpenRangeEnd, kMaxSize);
        std::printf("FAILED: '%s' was accepted as %s\n", text.c_str(), joined(sizes).c_str());
    } catch (const hiraishin::BatchListError & e) {
        const std::string message = e.what();
        if (message.find(message_part) != std::string::npos && message.find("'" + text + "'") != std::string::npos) {
            ++passed;
            return;
        }
        std::printf("FAILED: '%s' was refused with \"%s\", which does not say \"%s\" and name the value\n",
                    text.c_str(), message.c_str(), message_part.c_str());
    }
    ++failed;
}

std::vector<int> range(int first, int last) {
    std::vector<int> sizes;
    for (int b = first; b <= last; ++b) {
        sizes.push_back(b);
    }
    return sizes;
}

}  // namespace

int main() {
    // The forms the smoke test passes on and documents.
    accepts("2", {2});
    accepts("2,4,8", {2, 4, 8});
    accepts("2-4", {2, 3, 4});
    accepts("2-16", range(2, 16));
    accepts("2,4,8-12", {2, 4, 8, 9, 10, 11, 12});
    accepts("2-4,16", {2, 3, 4, 16});
    accepts("2-", range(2, 16));
    accepts("15-", {15, 16});
    accepts("1-16", range(1, 16));
    accepts("16,2,2,3-4", {2, 3, 4, 16});
    accepts(" 2 - 4 , 8 ", {2, 3, 4, 8});
    accepts("4-4", {4});
    // Beyond the verify batches, for measurements: sizes up to the limit the tool sets.
    accepts("32", {32});
    accepts("20-22", {20, 21, 22});

    refuses("", "must look like 2-16");
    refuses("x", "must look like 2-16");
    refuses("2,x", "must look like 2-16");
    refuses("2,,3", "must look like 2-16");
    refuses("-4", "must look like 2-16");
    refuses("2--4", "must look like 2-16");
    refuses("2-4-6", "must look like 2-16");
    refuses("+2", "must look like 2-16");
    refuses("8-2", "runs backwards; write 2-8");
    refuses("0", "between 1 and 1048576");
    refuses("0-3", "between 1 and 1048576");
    refuses("2-99999999999999999999", "between 1 and 1048576");
    refuses("99999999999999999999", "between 1 and 1048576");

    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
