// Tests of replay_compare.h: the comparison must see a difference in any bit of
// any logit at any compared position. Built and run by tests/wheels/test_replay_compare.py:
//   c++ -std=c++17 -o replay_compare_test replay_compare_test.cpp && ./replay_compare_test
// Prints one line per failed check and a closing "N passed, M failed" line; exits 1 on a failure.

#include "replay_compare.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

namespace {

int passed = 0;
int failed = 0;

void check(bool ok, const char * what) {
    if (ok) {
        ++passed;
    } else {
        ++failed;
        std::printf("FAILED: %s\n", what);
    }
}

std::vector<float> logits(int n) {
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i) {
        v[i] = 0.25f * (float) ((i * 7) % 11) - 1.0f;  // largest (1.5) first at i = 3
    }
    return v;
}

void position_checks() {
    const int n = 32;
    const std::vector<float> expected = logits(n);
    using hiraishin::compare_position;

    std::vector<float> same = expected;
    const auto c_same = compare_position(same.data(), expected.data(), n);
    check(!c_same.differs && !c_same.argmax_flip && c_same.max_abs_diff == 0.0, "identical logits are identical");

    for (int at : {0, n / 2, n - 1}) {
        std::vector<float> one_ulp = expected;
        one_ulp[at] = std::nextafter(one_ulp[at], std::numeric_limits<float>::infinity());
        const auto c = compare_position(one_ulp.data(), expected.data(), n);
        char what[96];
        std::snprintf(what, sizeof what, "one ulp at logit %d of %d differs", at, n);
        check(c.differs, what);
        std::snprintf(what, sizeof what, "one ulp at logit %d: max |diff| is that ulp", at);
        check(c.max_abs_diff > 0.0 && c.max_abs_diff < 1e-6, what);
        check(!c.argmax_flip, "one ulp below the maximum flips nothing");
    }

    std::vector<float> tiny = expected;
    tiny[n - 1] += 1e-7f;  // far below any tolerance a float comparison would use
    check(compare_position(tiny.data(), expected.data(), n).differs, "a difference of 1e-7 differs");

    std::vector<float> zeros(n, 0.0f);
    std::vector<float> negative_zero(n, 0.0f);
    negative_zero[n - 1] = -0.0f;
    const auto c_zero = compare_position(negative_zero.data(), zeros.data(), n);
    check(c_zero.differs && c_zero.max_abs_diff == 0.0, "-0.0 against 0.0 differs (bits), with max |diff| 0");

    std::vector<float> nan_expected = expected;
    nan_expected[3] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> nan_replayed = nan_expected;
    check(!compare_position(nan_replayed.data(), nan_expected.data(), n).differs, "the same NaN bits are identical");

    std::vector<float> flipped = expected;
    flipped[n - 1] = 10.0f;
    const auto c_flip = compare_position(flipped.data(), expected.data(), n);
    check(c_flip.differs && c_flip.argmax_flip, "a new maximum in the last logit flips the argmax");
    check(std::fabs(c_flip.max_abs_diff - (10.0 - expected[n - 1])) < 1e-9, "max |diff| is the largest difference");

    check(hiraishin::first_argmax(expected.data(), n) == 3, "argmax of the test logits");
    std::vector<float> tie(n, 1.0f);
    check(hiraishin::first_argmax(tie.data(), n) == 0, "a tie goes to the first index");
}

void tally_checks() {
    using hiraishin::tally_positions;
    const int first_pos = 100;

    const auto none = tally_positions(std::vector<bool>(8, false), std::vector<bool>(8, false), first_pos);
    check(none.positions_differ == 0 && !none.first_diff_pos && none.diff_ranges.empty() && none.argmax_flips == 0,
          "no differing step: nothing counted");

    std::vector<bool> last(8, false);
    last[7] = true;
    const auto t_last = tally_positions(last, last, first_pos);
    check(t_last.positions_differ == 1, "a difference at the last step is counted");
    check(t_last.first_diff_pos && *t_last.first_diff_pos == first_pos + 7, "the last step's KV position is named");
    check(t_last.argmax_flips == 1, "a flip at the last step is counted");
    check(t_last.diff_ranges.size() == 1 && t_last.diff_ranges[0].first == first_pos + 7 &&
              t_last.diff_ranges[0].second == first_pos + 7,
          "the last step makes its own range");

    std::vector<bool> first(8, false);
    first[0] = true;
    const auto t_first = tally_positions(first, std::vector<bool>(8, false), first_pos);
    check(t_first.positions_differ == 1 && t_first.first_diff_pos && *t_first.first_diff_pos == first_pos,
          "a difference at the first step is counted at the first position");

    const std::vector<bool> runs = {false, true, true, false, true, false, true, true};
    const auto t_runs = tally_positions(runs, std::vector<bool>(8, false), first_pos);
    check(t_runs.positions_differ == 5, "every differing step is counted");
    check(t_runs.diff_ranges.size() == 3 && t_runs.diff_ranges[0] == std::make_pair(first_pos + 1, first_pos + 2) &&
              t_runs.diff_ranges[1] == std::make_pair(first_pos + 4, first_pos + 4) &&
              t_runs.diff_ranges[2] == std::make_pair(first_pos + 6, first_pos + 7),
          "adjacent differing steps merge into ranges");

    const auto t_one = tally_positions(std::vector<bool>(1, true), std::vector<bool>(1, false), 5);
    check(t_one.positions_differ == 1 && *t_one.first_diff_pos == 5, "a single compared step that differs");
}

}  // namespace

int main() {
    position_checks();
    tally_checks();
    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
