// The --batches list of hiraishin-replay, apart from llama.cpp so that a small
// test (replay_batches_test.cpp) can hold it to the forms hiraishin-llama-smoke
// accepts (wheels/hiraishin_llama/_args.py, parse_batches): sizes, ranges and
// open ranges, mixed in one comma-separated list ("2,4,8-12", "2-4", "2-").
#pragma once

#include <cctype>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace hiraishin {

// What is wrong with a --batches value; the message names the value and how to write it.
struct BatchListError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

namespace detail {

inline std::string trimmed(const std::string & text) {
    size_t first = 0;
    size_t last  = text.size();
    while (first < last && std::isspace((unsigned char) text[first])) {
        ++first;
    }
    while (last > first && std::isspace((unsigned char) text[last - 1])) {
        --last;
    }
    return text.substr(first, last - first);
}

// Digits only: a sign or a blank would make "2--4" or "-4" look like a range.
inline bool all_digits(const std::string & text) {
    if (text.empty()) {
        return false;
    }
    for (const char c : text) {
        if (!std::isdigit((unsigned char) c)) {
            return false;
        }
    }
    return true;
}

// The value of a digit string, or max_size + 1 for anything larger (so that a
// huge number is refused as out of range, never overflows).
inline long long bounded_value(const std::string & digits, int max_size) {
    long long value = 0;
    for (const char c : digits) {
        value = value * 10 + (c - '0');
        if (value > max_size) {
            return (long long) max_size + 1;
        }
    }
    return value;
}

}  // namespace detail

// "2-16", "2-" (2 to open_range_end), "2,4,8-12" -> the sorted batch sizes, each in 1..max_size.
// An open range ends at open_range_end, the largest verify batch, as in hiraishin-llama-smoke.
inline std::vector<int> parse_batch_list(const std::string & text, int open_range_end, int max_size) {
    const std::string form = "batch sizes must look like 2-16, 2- (2 to " + std::to_string(open_range_end) +
                             ") or 2,4,8, got '" + text + "'";
    const std::string range = "batch sizes must be between 1 and " + std::to_string(max_size) + ", got '" + text + "'";
    std::set<int> sizes;
    size_t start = 0;
    while (true) {
        const size_t comma = text.find(',', start);
        const std::string item = detail::trimmed(text.substr(start, comma == std::string::npos ? std::string::npos
                                                                                               : comma - start));
        const size_t dash = item.find('-');
        const std::string first = detail::trimmed(item.substr(0, dash));
        const std::string last  = dash == std::string::npos ? "" : detail::trimmed(item.substr(dash + 1));
        if (!detail::all_digits(first) || (!last.empty() && !detail::all_digits(last))) {
            throw BatchListError(form);
        }
        const long long low  = detail::bounded_value(first, max_size);
        const long long high = dash == std::string::npos ? low
                             : last.empty()              ? (long long) open_range_end
                                                         : detail::bounded_value(last, max_size);
        if (high < low) {
            throw BatchListError("the range '" + item + "' in '" + text + "' runs backwards; write " + last + "-" +
                                 first);
        }
        // Checked before the range is expanded: 2-99999999999 must not fill memory first.
        if (low < 1 || high > max_size) {
            throw BatchListError(range);
        }
        for (long long b = low; b <= high; ++b) {
            sizes.insert((int) b);
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    return {sizes.begin(), sizes.end()};
}

}  // namespace hiraishin
