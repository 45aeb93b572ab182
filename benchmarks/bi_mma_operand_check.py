"""Check, bit for bit, how the superblock-order candidates build their operands from a block's bytes.

    python3 benchmarks/bi_mma_operand_check.py [TRIALS]

Q5_K (stack patch 25): the m16n8k16 kernel spreads two quant bytes into the low bytes of two f16 lanes (__byte_perm 0x4140 / 0x4342), ORs in
the weight's fifth bit (qh) as 16 next to a low nibble or 256 next to a high one, forms 1024 + x by lop3, and scales it
with one f16 fma: (1024 + q)*sc - 1024*sc, or (1024 + 16*q)*(sc/16) - 64*sc. This replays those operations on random
blocks (numpy's float16 for the constants, the fma exact in float64 and rounded once) and counts every A value that is
not q*sc for the q that dequantize_row_q5_K gives (nibble + 16*((qh[l] >> s) & 1)).

Q8_0 (q8-0-block-order.patch): a 34-byte block is only 2-byte aligned, so both kernels read the aligned 32-bit words
its bytes lie in and shift by 16 where it starts mid-word. This places random blocks at both offsets in a buffer, replays
the dp4a kernel's words (part p of a block, one of its lane's 4 threads: quants 8p..8p+7) and the mma kernel's (thread t: quants 8t..8t+7 as
(1024 + (q ^ 128)) - 1152 in f16, in the k order of the A operand), and d, and counts what differs.

IQ4_XS (iq4-xs-superblock-order.patch): replays which bytes and nibbles each thread takes (get_int_from_table_16 taken
as one table lookup per nibble), the f16 conversion of the table's int8 values and the 6-bit scales read from the
block's first 8 bytes, against dequantize_row_iq4_xs's layout (sub-block s is qs bytes 16s..16s + 15, byte l's low
nibble weight l and its high nibble weight 16 + l; scale 4 bits of scales_l[s/2], 2 of scales_h, minus 32).

Q2_K (stack patch 26): replays the words each thread reads, the 2-bit extraction by shift and mask in the
f16 lanes, the scale and minimum of the thread's sub-block and the fused f16 scaling, against dequantize_row_q2_K's
layout (q8_1 block b = 4n + j: bits 2j of qs bytes 32n..32n + 31, sub-blocks 2b and 2b + 1).

Q3_K (stack patch 28): a 110-byte block is 2-byte aligned; replays the aligned words and funnel shifts
both kernels read, the 3-bit weights from qs and hmask (bi_sb_q3_K_weights), the 6-bit scales from the 12 bytes
(bi_sb_q3_K_scale) and the f16 operand (1024 + q) - 1028, against dequantize_row_q3_K's unpacking.

Exit 1 if anything differs.
"""
import sys

import numpy as np


def byte_perm(x: int, y: int, selector: int) -> int:
    pool = [(x >> (8 * i)) & 0xFF for i in range(4)] + [(y >> (8 * i)) & 0xFF for i in range(4)]
    return sum(pool[(selector >> (4 * i)) & 0x7] << (8 * i) for i in range(4))


def as_f16(bits: int) -> float:
    return float(np.array([bits], dtype=np.uint16).view(np.float16)[0])


def mismatches(trials: int, seed: int = 1) -> int:
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(trials):
        qs = rng.integers(0, 256, 32)  # the 32 quant bytes of sub-block pair j: low nibbles 2j, high nibbles 2j + 1
        qh = rng.integers(0, 256, 32)  # fifth bits: bit s of byte l is weight l of sub-block s
        j = int(rng.integers(0, 4))
        sc = [int(rng.integers(0, 64)) for _ in range(2)]
        for t in range(4):  # thread t of a group holds weights 8t..8t+7
            words = [sum(int(qs[8 * t + 4 * w + k]) << (8 * k) for k in range(4)) for w in range(2)]
            highs = [sum(int(qh[8 * t + 4 * w + k]) << (8 * k) for k in range(4)) for w in range(2)]
            for i in range(2):
                s = 2 * j + i
                mask = 0x001F001F if i == 0 else 0x01F001F0
                scale = float(np.float16(sc[i]) * np.float16(1.0 if i == 0 else 0.0625))
                offset = float(np.float16((-1024 if i == 0 else -64) * sc[i]))
                for h in range(2):
                    for p, selector in enumerate((0x4140, 0x4342)):
                        quants, high = byte_perm(words[h], 0, selector), byte_perm(highs[h], 0, selector)
                        if i == 0:
                            value = (quants & 0x000F000F) | (((high >> s) << 4) & 0x00100010)
                        else:
                            value = quants | (((high >> s) << 8) & 0x01000100)
                        value = (value & mask) | 0x64006400
                        for lane in range(2):
                            a = float(np.float16(as_f16((value >> (16 * lane)) & 0xFFFF) * scale + offset))
                            weight = 8 * t + 4 * h + 2 * p + lane
                            q = ((int(qs[weight]) >> (4 * i)) & 0xF) + 16 * ((int(qh[weight]) >> s) & 1)
                            bad += a != q * sc[i]
    return bad


def funnelshift_r(lo: int, hi: int, shift: int) -> int:
    return (((hi << 32) | lo) >> (shift & 31)) & 0xFFFFFFFF


def q8_0_mismatches(trials: int, seed: int = 2) -> int:
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(trials):
        offset = int(rng.choice([0, 2]))
        block = rng.integers(0, 256, 34).astype(np.uint8)  # d (2 bytes), then 32 int8 quants
        memory = np.zeros(offset + 34 + (-(offset + 34)) % 4, dtype=np.uint8)
        memory[offset:offset + 34] = block
        words = [int.from_bytes(memory[4 * i:4 * i + 4].tobytes(), "little") for i in range(len(memory) // 4)]
        quants = block[2:].view(np.int8).astype(int)
        d = float(block[:2].view(np.float16)[0])
        # bi_q8_0_d
        bad += as_f16((words[0] >> (8 * offset)) & 0xFFFF) != d and not np.isnan(d)
        # bi_q8_0_part::load, part p: q[0], q[1] hold quants 8p..8p+7, from the words that hold bytes 2 + 8p on (an
        # index past `words` would be a read past the block's last word)
        for part in range(4):
            start = offset + 2 + 8 * part
            first = start // 4
            if start % 4 == 0:
                part_words = [words[first], words[first + 1]]
            else:
                part_words = [funnelshift_r(words[first], words[first + 1], 16),
                              funnelshift_r(words[first + 1], words[first + 2], 16)]
            for k, word in enumerate(part_words):
                got = [int(np.int8(np.uint8((word >> (8 * i)) & 0xFF))) for i in range(4)]
                bad += got != list(quants[8 * part + 4 * k:8 * part + 4 * k + 4])
        # mul_mat_vec_q8_0_bi_mma_sb: thread t, mma h, A registers 0 (k = 2t, 2t+1) and 2 (k = 2t+8, 2t+9)
        for t in range(4):
            first = (offset + 2) // 4 + 2 * t
            lo, mid = words[first], words[first + 1]
            hi = words[first + 2] if offset == 0 else 0
            pair_words = [funnelshift_r(lo, mid, 16), funnelshift_r(mid, hi, 16)] if offset == 0 else [lo, mid]
            for h in range(2):
                for register, selector in ((0, 0x4140), (2, 0x4342)):
                    bits = byte_perm(pair_words[h] ^ 0x80808080, 0x64, selector)
                    for lane in range(2):
                        value = float(np.float16(as_f16((bits >> (16 * lane)) & 0xFFFF) - 1152.0))
                        weight = 8 * t + 4 * h + (register // 2) * 2 + lane
                        bad += value != quants[weight]
    return bad


KVALUES_IQ4NL = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)


def iq4_xs_mismatches(trials: int, seed: int = 3) -> int:
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(trials):
        header = rng.integers(0, 256, 8).astype(np.uint8)  # d, scales_h, scales_l[4]
        qs = rng.integers(0, 256, 128).astype(np.uint8)
        scales_h = int(header[2]) | int(header[3]) << 8
        words = (int.from_bytes(header[:4].tobytes(), "little"), int.from_bytes(header[4:].tobytes(), "little"))
        for s in range(8):
            # bi_sb_iq4_xs_scale from the header's two words
            got = (((words[1] >> (4 * s)) & 0x0F) | (((words[0] >> 16) >> (2 * s) & 0x03) << 4)) - 32
            want = (((int(header[4 + s // 2]) >> (4 * (s % 2))) & 0x0F) | (((scales_h >> (2 * s)) & 0x03) << 4)) - 32
            bad += got != want
            weights = [KVALUES_IQ4NL[qs[16 * s + (w % 16)] >> (4 * (w // 16)) & 0x0F] for w in range(32)]
            # mul_mat_vec_iq4_xs_bi_mma_sb: thread t reads the uint2 at qs byte 16s + 8*(t % 2), keeps its low nibbles'
            # values for t < 2 and its high nibbles' for t >= 2
            for t in range(4):
                base = 16 * s + 8 * (t % 2)
                for h in range(2):
                    nibbles = [(int(qs[base + 4 * h + i]) >> (0 if t < 2 else 4)) & 0x0F for i in range(4)]
                    values = sum((KVALUES_IQ4NL[n] & 0xFF) << (8 * i) for i, n in enumerate(nibbles))
                    for register, selector in ((0, 0x4140), (2, 0x4342)):
                        bits = byte_perm(values ^ 0x80808080, 0x64, selector)
                        for lane in range(2):
                            value = float(np.float16(as_f16((bits >> (16 * lane)) & 0xFFFF) - 1152.0))
                            bad += value != weights[8 * t + 4 * h + (register // 2) * 2 + lane]
            # bi_sb_iq4_xs_half: word j of the sub-block gives weights 4j..4j + 3 (low) and 16 + 4j.. (high)
            for j in range(4):
                low = [KVALUES_IQ4NL[qs[16 * s + 4 * j + i] & 0x0F] for i in range(4)]
                high = [KVALUES_IQ4NL[qs[16 * s + 4 * j + i] >> 4] for i in range(4)]
                bad += low != weights[4 * j:4 * j + 4] or high != weights[16 + 4 * j:20 + 4 * j]
    return bad


def q2_k_mismatches(trials: int, seed: int = 4) -> int:
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(trials):
        block = rng.integers(0, 256, 84).astype(np.uint8)  # scales[16], qs[64], dm
        words = [int.from_bytes(block[4 * i:4 * i + 4].tobytes(), "little") for i in range(21)]
        scales, qs = block[:16], block[16:80]
        for b in range(8):
            n, j = divmod(b, 4)
            # dequantize_row_q2_K: weight w of q8_1 block b
            q = [(int(qs[32 * n + w]) >> (2 * j)) & 3 for w in range(32)]
            sub = [2 * b + (w >= 16) for w in range(32)]
            # mul_mat_vec_q2_K_bi_mma_sb, thread t
            for t in range(4):
                pair_words = (words[4 + 8 * n + 2 * t], words[4 + 8 * n + 2 * t + 1])
                s_t = 2 * b + t // 2
                sc_m = (words[s_t // 4] >> (8 * (s_t % 4))) & 0xFF
                sc, m = sc_m & 0x0F, sc_m >> 4
                bad += (sc, m) != (int(scales[sub[8 * t]]) & 0x0F, int(scales[sub[8 * t]]) >> 4)
                for h in range(2):
                    for register, selector in ((0, 0x4140), (2, 0x4342)):
                        bits = ((byte_perm(pair_words[h], 0, selector) >> (2 * j)) & 0x00030003) | 0x64006400
                        for lane in range(2):
                            scale, offset = float(np.float16(sc)), float(np.float16(-1024 * sc))
                            a = float(np.float16(as_f16((bits >> (16 * lane)) & 0xFFFF) * scale + offset))
                            w = 8 * t + 4 * h + (register // 2) * 2 + lane
                            bad += a != q[w] * sc or sub[w] != s_t
            # bi_sb_q2_K_half, h = n: word k holds weights 4k..4k+3 (bits 2j); scales bytes 2j, 2j + 1 of the half
            for k in range(8):
                word = words[4 + 8 * n + k]
                bad += [(word >> (8 * i + 2 * j)) & 3 for i in range(4)] != q[4 * k:4 * k + 4]
            pair = (words[2 * n + j // 2] >> (16 * (j % 2))) & 0xFFFF
            bad += (pair & 0xFF, pair >> 8) != (int(scales[2 * b]), int(scales[2 * b + 1]))
    return bad


def q3_k_reference(block: np.ndarray) -> tuple[list[int], list[int]]:
    """dequantize_row_q3_K's integer weights (q - 4, before the scale) and its 16 scales minus 32, as ggml unpacks them."""
    hmask, qs, scale_bytes = block[:32], block[32:96], block[96:108]
    aux = [int.from_bytes(scale_bytes[4 * i:4 * i + 4].tobytes(), "little") for i in range(3)] + [0]
    kmask1, kmask2 = 0x03030303, 0x0F0F0F0F
    tmp = aux[2]
    aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4)
    aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4)
    aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4)
    aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4)
    scales = [int(np.int8(np.uint8((aux[i // 4] >> (8 * (i % 4))) & 0xFF))) - 32 for i in range(16)]
    weights = []
    for n in range(2):
        for j in range(4):
            for w in range(32):
                low = (int(qs[32 * n + w]) >> (2 * j)) & 3
                weights.append(low - (0 if int(hmask[w]) & (1 << (4 * n + j)) else 4))
    return weights, scales


def q3_k_mismatches(trials: int, seed: int = 5) -> int:
    """Both kernels' reads of a 110-byte block at offsets 0 and 2: the aligned words (an index past `words` would be a
    read past the block's last word), the funnel shifts, bi_sb_q3_K_weights, bi_sb_q3_K_scale and the f16 operand."""
    rng = np.random.default_rng(seed)
    bad = 0
    for _ in range(trials):
        offset = int(rng.choice([0, 2]))
        block = rng.integers(0, 256, 110).astype(np.uint8)
        weights, scales = q3_k_reference(block)
        memory = np.zeros(offset + 110 + (-(offset + 110)) % 4, dtype=np.uint8)
        memory[offset:offset + 110] = block
        words = [int.from_bytes(memory[4 * i:4 * i + 4].tobytes(), "little") for i in range(len(memory) // 4)]

        def load_words(byte: int, n: int) -> list[int]:  # bi_sb_q6_K_half::load_words at block byte `byte`
            address = offset + byte
            first, shift = address // 4, 8 * (address & 2)
            return [funnelshift_r(words[first + i], words[first + i + 1], shift) for i in range(n)]

        pairs = [int(memory[offset + 96 + 2 * i]) | int(memory[offset + 97 + 2 * i]) << 8 for i in range(6)]
        scale_words = [pairs[2 * i] | pairs[2 * i + 1] << 16 for i in range(3)]

        def scale(sub: int) -> int:  # bi_sb_q3_K_scale
            low = (scale_words[(sub % 8) // 4] >> (8 * (sub % 4) + 4 * (sub // 8))) & 0x0F
            high = (scale_words[2] >> (8 * (sub % 4) + 2 * (sub // 4))) & 0x03
            return (low | high << 4) - 32

        def q3_weights(qs_word: int, hm_word: int, n: int, j: int) -> list[int]:  # bi_sb_q3_K_weights, minus 4
            q = ((qs_word >> (2 * j)) & 0x03030303) | (((hm_word >> (4 * n + j)) & 0x01010101) << 2)
            return [((q >> (8 * i)) & 0xFF) - 4 for i in range(4)]

        bad += [scale(sub) for sub in range(16)] != scales
        # bi_sb_q3_K_half, thread h: qs bytes 32h.., hmask bytes 0..31; sub-block 8h + j, word i: weights
        # 128h + 32(j/2) + 16(j%2) + 4i..+3
        for h in range(2):
            qs, hm = load_words(32 + 32 * h, 8), load_words(0, 8)
            for j in range(8):
                for i in range(4):
                    first = 128 * h + 32 * (j // 2) + 16 * (j % 2) + 4 * i
                    got = q3_weights(qs[4 * (j % 2) + i], hm[4 * (j % 2) + i], h, j // 2)
                    bad += got != weights[first:first + 4]
        # mul_mat_vec_q3_K_bi_mma_sb, thread t: hm[hi] at byte 16hi + 4t, qs[2n + hi] at byte 32 + 32n + 16hi + 4t;
        # sub-block 2b + hi of q8_1 block b = 4n + j, weights 32b + 16hi + 4t..+3, as (1024 + q) - 1028 in f16
        for t in range(4):
            address = offset + 4 * t
            first, shift = address // 4, 8 * (address & 2)
            hm = [funnelshift_r(words[first + 4 * i], words[first + 4 * i + 1], shift) for i in range(2)]
            qs = [funnelshift_r(words[first + 8 + 4 * i], words[first + 8 + 4 * i + 1], shift) for i in range(4)]
            for b in range(8):
                n, j = b // 4, b % 4
                for hi in range(2):
                    q = ((qs[2 * n + hi] >> (2 * j)) & 0x03030303) | (((hm[hi] >> (4 * n + j)) & 0x01010101) << 2)
                    for register, selector in ((0, 0x4140), (2, 0x4342)):
                        bits = byte_perm(q, 0x64, selector)
                        for lane in range(2):
                            value = float(np.float16(as_f16((bits >> (16 * lane)) & 0xFFFF) - 1028.0))
                            bad += value != weights[32 * b + 16 * hi + 4 * t + (register // 2) * 2 + lane]
    return bad


if __name__ == "__main__":
    trials = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    bad = mismatches(trials)
    print(f"Q5_K: {trials} random sub-block pairs, 4 threads each: {bad} A values differ from q*sc")
    bad_q8_0 = q8_0_mismatches(trials)
    print(f"Q8_0: {trials} random blocks at offsets 0 and 2: {bad_q8_0} values differ from the block's")
    bad_iq4_xs = iq4_xs_mismatches(trials)
    print(f"IQ4_XS: {trials} random blocks: {bad_iq4_xs} values or scales differ from the block's")
    bad_q2_k = q2_k_mismatches(trials)
    print(f"Q2_K: {trials} random blocks: {bad_q2_k} values, scales or sub-blocks differ from the block's")
    bad_q3_k = q3_k_mismatches(trials)
    print(f"Q3_K: {trials} random blocks at offsets 0 and 2: {bad_q3_k} values or scales differ from the block's")
    sys.exit(1 if bad or bad_q8_0 or bad_iq4_xs or bad_q2_k or bad_q3_k else 0)
