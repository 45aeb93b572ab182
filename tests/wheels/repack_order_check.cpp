// Does the one-row kernel of the CPU backend's repacked weights (gemv) give each output element the bytes the
// 4-row kernel (gemm) gives it? Batch-invariant mode keeps stock's split of a batch (groups of 4 rows through
// gemm, the rest through gemv) only for the types where it does, so a token's product does not depend on the
// batch it comes in (patches/ggml-cpu-batch-invariant-mul-mat-and-flash-attention.patch).
//
//   repack_order_check LIBGGML_CPU.so ROWS     (ROWS: 4, or 16 for gemm's 16-row path)
//
// Loads one CPU variant library of a build, checks that the machine can run it (ggml_backend_score), fills
// repacked weights with random bytes of sane scales and 4096-wide activations, and compares, per type, gemm on
// ROWS rows (after the 4-row interleaved quantization) with the gemv batch-invariant mode takes on each row
// alone (after the one-row quantization), and with the stock gemv as a control. Prints one line per type:
//   TYPE bi=<differing outputs> stock=<differing outputs> of <outputs>
// Exit 0 when every bi count is 0, 1 when one is not, 2 when the library cannot be checked here, 3 when this
// machine cannot run the variant or the variant repacks no weights (built without AVX2).
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

using mat_fn      = void (*)(int, float *, size_t, const void *, const void *, int, int);
using quant_row   = void (*)(const float *, void *, int64_t);
using quant_4rows = void (*)(const float *, void *, int64_t, int64_t);

struct repacked_type {
    const char * name;        // the kernels' name: ggml_gemv_<name>, ggml_gemm_<name>
    const char * bi_suffix;   // the gemv batch-invariant mode calls: ggml_gemv_<name><bi_suffix>
    bool         q8_K;        // activations in Q8_K (256 per block), else Q8_0 (32 per block)
    int          weights_qk;  // weights per block of one column
    size_t       block_bytes; // bytes of one block of 8 interleaved columns
    int          n_scales;    // leading f16 scales of such a block (d, and dmin for the K types)
    bool         e8m0;        // MXFP4: 8 leading E8M0 exponent bytes instead
};

// the x86 kernels repack.cpp picks with AVX2 (8 columns interleaved, 8-byte chunks)
const repacked_type TYPES[] = {
    { "q4_0_8x8_q8_0",   "",            false,  32, 8*2 + 128,        8,  false },
    { "iq4_nl_8x8_q8_0", "",            false,  32, 8*2 + 128,        8,  false },
    { "mxfp4_8x8_q8_0",  "",            false,  32, 8 + 128,          0,  true  },
    { "q4_K_8x8_q8_K",   "_gemm_order", true,  256, 16*2 + 96 + 1024, 16, false },
    { "q2_K_8x8_q8_K",   "_gemm_order", true,  256, 16*2 + 128 + 512, 16, false },
};

constexpr int K       = 4096; // row length (one Qwen3-8B hidden row)
constexpr int COLUMNS = 64;   // weight columns: 8 groups of 8 interleaved

uint16_t small_half(float value) { // a positive normal f16 from a float in [2^-14, 2)
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    const uint32_t exponent = ((bits >> 23) & 0xff) - 127 + 15;
    return (uint16_t) ((exponent << 10) | ((bits >> 13) & 0x3ff));
}

int count_differing(const float * a, const float * b, int n) {
    int differing = 0;
    for (int i = 0; i < n; ++i) {
        differing += memcmp(a + i, b + i, sizeof(float)) != 0;
    }
    return differing;
}

} // namespace

int main(int argc, char ** argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s LIBGGML_CPU.so ROWS\n", argv[0]);
        return 2;
    }
    const int rows = atoi(argv[2]);
    if (rows <= 0 || rows % 4 != 0) {
        fprintf(stderr, "ROWS must be a positive multiple of 4, not %s\n", argv[2]);
        return 2;
    }
    void * lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
        fprintf(stderr, "cannot load %s: %s\n", argv[1], dlerror());
        return 2;
    }
    auto score = (int (*)(void)) dlsym(lib, "ggml_backend_score");
    if (score != nullptr && score() == 0) {
        printf("variant not supported by this CPU\n");
        return 3;
    }
    // repack.cpp picks these kernels only where the variant was built with AVX2 (ggml_cpu_has_avx2 reports
    // the build's flags); without it no weight is repacked and the kernels below are not the ones it ships
    auto has_avx2 = (int (*)(void)) dlsym(lib, "ggml_cpu_has_avx2");
    if (has_avx2 != nullptr && has_avx2() == 0) {
        printf("variant built without AVX2: it repacks no weights\n");
        return 3;
    }
    auto cpu_init = (void (*)(void)) dlsym(lib, "ggml_cpu_init");
    if (cpu_init == nullptr) {
        fprintf(stderr, "%s has no ggml_cpu_init: not a ggml CPU backend library\n", argv[1]);
        return 2;
    }
    cpu_init();

    std::mt19937 rng(1234);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    int failures = 0;
    for (const repacked_type & type : TYPES) {
        const std::string gemv_name = std::string("ggml_gemv_") + type.name;
        auto gemm       = (mat_fn) dlsym(lib, (std::string("ggml_gemm_") + type.name).c_str());
        auto gemv_stock = (mat_fn) dlsym(lib, gemv_name.c_str());
        auto gemv_bi    = (mat_fn) dlsym(lib, (gemv_name + type.bi_suffix).c_str());
        auto one_row    = (quant_row) dlsym(lib, type.q8_K ? "quantize_row_q8_K" : "quantize_row_q8_0");
        // ggml_quantize_mat_t<8, GGML_TYPE_Q8_K or GGML_TYPE_Q8_0>, the 4-row quantization these kernels take
        auto four_rows  = (quant_4rows) dlsym(lib, type.q8_K ? "_Z19ggml_quantize_mat_tILl8EL9ggml_type15EEvPKfPvll"
                                                              : "_Z19ggml_quantize_mat_tILl8EL9ggml_type8EEvPKfPvll");
        if (!gemm || !gemv_stock || !gemv_bi || !one_row || !four_rows) {
            fprintf(stderr, "%s: missing kernels in %s (gemm %p, gemv %p, %s%s %p)\n", type.name, argv[1],
                    (void *) gemm, (void *) gemv_stock, gemv_name.c_str(), type.bi_suffix, (void *) gemv_bi);
            return 2;
        }
        const size_t row_bytes = type.q8_K ? (K / 256) * (4 + 256 + 32) : (K / 32) * (2 + 32);

        std::vector<uint8_t> weights((COLUMNS / 8) * (K / type.weights_qk) * type.block_bytes);
        for (uint8_t & byte : weights) {
            byte = (uint8_t) rng();
        }
        for (size_t offset = 0; offset < weights.size(); offset += type.block_bytes) {
            uint8_t * block = weights.data() + offset;
            if (type.e8m0) {
                for (int i = 0; i < 8; ++i) {
                    block[i] = (uint8_t) (120 + rng() % 8);
                }
            }
            for (int i = 0; i < type.n_scales; ++i) {
                const uint16_t scale = small_half(0.001f + 0.01f * (float) (rng() % 1000) / 1000.0f);
                memcpy(block + 2*i, &scale, sizeof scale);
            }
        }
        std::vector<float> activations((size_t) rows * K);
        for (float & x : activations) {
            x = uniform(rng);
        }

        std::vector<uint8_t> interleaved(rows * row_bytes);
        for (int group = 0; group < rows / 4; ++group) {
            four_rows(activations.data() + (size_t) group * 4 * K, interleaved.data() + group * 4 * row_bytes, 4, K);
        }
        std::vector<float> by_gemm((size_t) rows * COLUMNS);
        gemm(K, by_gemm.data(), COLUMNS, weights.data(), interleaved.data(), rows, COLUMNS);

        int bi_differing = 0, stock_differing = 0;
        std::vector<uint8_t> quantized(row_bytes);
        std::vector<float> by_gemv(COLUMNS);
        for (int row = 0; row < rows; ++row) {
            one_row(activations.data() + (size_t) row * K, quantized.data(), K);
            gemv_bi(K, by_gemv.data(), COLUMNS, weights.data(), quantized.data(), 1, COLUMNS);
            bi_differing += count_differing(by_gemv.data(), by_gemm.data() + (size_t) row * COLUMNS, COLUMNS);
            gemv_stock(K, by_gemv.data(), COLUMNS, weights.data(), quantized.data(), 1, COLUMNS);
            stock_differing += count_differing(by_gemv.data(), by_gemm.data() + (size_t) row * COLUMNS, COLUMNS);
        }
        printf("%s bi=%d stock=%d of %d\n", type.name, bi_differing, stock_differing, rows * COLUMNS);
        failures += bi_differing != 0;
    }
    return failures == 0 ? 0 : 1;
}
