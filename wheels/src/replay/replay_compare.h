// The comparison at the heart of hiraishin-replay, apart from llama.cpp so that
// a small test (replay_compare_test.cpp) can hold it to its promise: a
// position differs when any of its n_vocab logits differs in any bit, and every
// compared position is counted.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

namespace hiraishin {

// The first index of the largest logit (as greedy decoding picks it).
inline int first_argmax(const float * logits, int n_vocab) {
    int best = 0;
    for (int i = 1; i < n_vocab; ++i) {
        if (logits[i] > logits[best]) {
            best = i;
        }
    }
    return best;
}

struct PositionComparison {
    bool   differs      = false;
    bool   argmax_flip  = false;
    double max_abs_diff = 0.0;
};

// One position's logits, replayed against expected: bit for bit over all n_vocab floats.
inline PositionComparison compare_position(const float * replayed, const float * expected, int n_vocab) {
    PositionComparison c;
    if (std::memcmp(replayed, expected, sizeof(float) * (size_t) n_vocab) == 0) {
        return c;
    }
    c.differs     = true;
    c.argmax_flip = first_argmax(replayed, n_vocab) != first_argmax(expected, n_vocab);
    for (int v = 0; v < n_vocab; ++v) {
        // A NaN difference compares false and is left out of the maximum;
        // memcmp above still counts the position as differing.
        c.max_abs_diff = std::max(c.max_abs_diff, (double) std::fabs(replayed[v] - expected[v]));
    }
    return c;
}

struct PositionTally {
    int positions_differ = 0;
    int argmax_flips     = 0;
    std::optional<int> first_diff_pos;
    // Inclusive [first, last] KV position ranges whose logits differ.
    std::vector<std::pair<int, int>> diff_ranges;
};

// Counts the differing positions of steps 0..n-1, where step s sits at KV position first_pos + s.
inline PositionTally tally_positions(const std::vector<bool> & differs, const std::vector<bool> & flips, int first_pos) {
    PositionTally t;
    const int n = (int) differs.size();
    for (int step = 0; step < n; ++step) {
        if (differs[step]) {
            const int pos = first_pos + step;
            ++t.positions_differ;
            if (!t.first_diff_pos) {
                t.first_diff_pos = pos;
            }
            if (!t.diff_ranges.empty() && t.diff_ranges.back().second == pos - 1) {
                t.diff_ranges.back().second = pos;
            } else {
                t.diff_ranges.emplace_back(pos, pos);
            }
        }
        t.argmax_flips += flips[step] ? 1 : 0;
    }
    return t;
}

}  // namespace hiraishin
