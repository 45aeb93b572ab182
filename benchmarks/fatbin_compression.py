"""How much of the CUDA backend's device code nvcc's fatbin compression modes save, measured on a sample of its
translation units, one or more per family (mmq instances, flash-attention instances, mat-vec kernels, ...), each
compiled as the wheel's recipe compiles it but once per mode. No GPU is needed.

    python3 benchmarks/fatbin_compression.py BUILD_DIR OUT.json [--modes speed size] [--arch 90] [--jobs 2]

BUILD_DIR is a configured CMake build of the work tree with GGML_CUDA=ON (benchmarks/device/kernel_local_build.sh
makes one; ninja's command for each sample is taken from it). The recipe's code generation is put in place of the
build's: SASS and PTX of compute_<arch> (``<arch>-real;<arch>-virtual``), flash attention on. For each object the
size of its .nv_fatbin section is read with readelf; the family totals are the sample's mean times the family's
object count in the build.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import datetime
import json
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

OBJ_DIR = "ggml/src/ggml-cuda/CMakeFiles/ggml-cuda.dir/"
FAMILIES = {  # family -> (pattern of its objects, the sampled objects)
    "mmq instances": (r"template-instances/mmq-instance-", ["template-instances/mmq-instance-q4_k.cu.o",
                                                            "template-instances/mmq-instance-q8_0.cu.o"]),
    "flash attention mma instances": (r"template-instances/fattn-mma-",
                                      ["template-instances/fattn-mma-f16-instance-ncols1_8-ncols2_4.cu.o"]),
    "flash attention vec instances": (r"template-instances/fattn-vec-",
                                      ["template-instances/fattn-vec-instance-q8_0-q8_0.cu.o"]),
    "flash attention tile instances": (r"template-instances/fattn-tile-",
                                       ["template-instances/fattn-tile-instance-dkq128-dv128.cu.o"]),
    "mmf instances": (r"template-instances/mmf-instance-", ["template-instances/mmf-instance-ncols_10.cu.o"]),
    "mmvq (mat-vec, batch-invariant kernels)": (r"mmvq\.cu\.o$", ["mmvq.cu.o"]),
}


def fatbin_bytes(obj: Path) -> int:
    sections = subprocess.run(["readelf", "-S", "-W", str(obj)], capture_output=True, text=True, check=True).stdout
    match = re.search(r"\.nv_fatbin\s+\S+\s+\S+\s+\S+\s+([0-9a-f]+)", sections)
    if match is None:
        raise SystemExit(f"{obj}: no .nv_fatbin section")
    return int(match.group(1), 16)


def compile_command(build: Path, target: str, mode: str, arch: str, out: Path) -> list[str]:
    line = subprocess.run(["ninja", "-C", str(build), "-t", "commands", OBJ_DIR + target], capture_output=True,
                          text=True, check=True).stdout.strip().splitlines()[-1]
    # the build's own output, dependency file and code generation go; the recipe's come in their place
    keep: list[str] = []
    args = iter(shlex.split(line))
    for arg in args:
        if arg in ("-MT", "-MF", "-o"):
            next(args)  # and its value
        elif arg != "-MD" and arg != "-DGGML_CUDA_NO_FA" and not arg.startswith("--generate-code="):
            keep.append(arg)
    nvcc, rest = keep[0], keep[1:]
    return [nvcc, f"-compress-mode={mode}", f"--generate-code=arch=compute_{arch},code=[compute_{arch},sm_{arch}]",
            *rest, "-o", str(out)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("build", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--modes", nargs="+", default=["speed", "size"])
    parser.add_argument("--arch", default="90")
    parser.add_argument("--jobs", type=int, default=2)
    options = parser.parse_args()
    targets = subprocess.run(["ninja", "-C", str(options.build), "-t", "targets", "all"], capture_output=True,
                             text=True, check=True).stdout
    objects = sorted({m.group(1) for m in re.finditer(re.escape(OBJ_DIR) + r"(\S+\.cu\.o):", targets)})
    work = Path(tempfile.mkdtemp(prefix="fatbin-"))
    jobs = [(family, sample, mode) for family, (_, samples) in FAMILIES.items() for sample in samples
            for mode in options.modes]

    def run(job: tuple[str, str, str]) -> dict:
        family, sample, mode = job
        out = work / f"{mode}-{Path(sample).name}"
        command = compile_command(options.build, sample, mode, options.arch, out)
        started = time.monotonic()
        subprocess.run(command, check=True, capture_output=True, text=True)
        return {"family": family, "object": sample, "mode": mode, "nvcc": command[0],
                "fatbin_bytes": fatbin_bytes(out),
                "object_bytes": out.stat().st_size, "compile_s": round(time.monotonic() - started, 1)}

    with concurrent.futures.ThreadPoolExecutor(options.jobs) as pool:
        samples = list(pool.map(run, jobs))
    families = []
    for family, (pattern, _) in FAMILIES.items():
        count = sum(1 for o in objects if re.search(pattern, o))
        row = {"family": family, "objects_in_build": count}
        for mode in options.modes:
            sizes = [s["fatbin_bytes"] for s in samples if s["family"] == family and s["mode"] == mode]
            row[f"{mode}_fatbin_bytes_estimated"] = round(sum(sizes) / len(sizes) * count)
        families.append(row)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    nvcc = subprocess.run([samples[0]["nvcc"], "--version"], capture_output=True,
                          text=True).stdout.strip().splitlines()[-1]
    result = {"commit": commit, "recorded": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "device": "build machine, no GPU", "nvcc": nvcc, "arch": f"{options.arch}-real;{options.arch}-virtual",
              "command": " ".join(shlex.quote(a) for a in sys.argv), "samples": samples, "families": families}
    options.out.write_text(json.dumps(result, indent=1) + "\n")
    for row in families:
        print(row)


if __name__ == "__main__":
    main()
