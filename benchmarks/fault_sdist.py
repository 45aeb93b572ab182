"""An sdist with planted faults, so that a faulted wheel is one build on the GPU machine.

    python3 benchmarks/fault_sdist.py SDIST FAULT.diff [FAULT.diff ...] [--out build/fault-sdist]

Writes OUT/<the sdist's name>, the same sdist with each diff (a benchmarks/faults/*.diff, against the
llama.cpp tree) applied to its llama.cpp/, and OUT/faults.json naming the sdist and the diffs with their
sha256. The name stays the sdist's, since gpu_session.sh finds the unpacked tree by it:

    gpu_session.sh build build/fault-sdist/hiraishin_llama-10400.22.tar.gz; install; smoke

Building the stack's wheel and then rebuilding it with a fault (gpu_session.sh fault) compiles the patched
file twice (a rebuild with mmvq.cu took 164-166 s on the H200: fault-moe-b7-stock-path-h200-rev17.json,
device-session-rev20-timings.json) and puts a compiler beside whatever runs meanwhile; a wheel from this
sdist compiles it once (317 s for the whole cu13-sm90 wheel: device-session-rev22-faults-timings.json).
The diffs go into a scratch copy: if one does not apply, nothing is written (an earlier output stays as it
was) and the error names the diff and what patch said.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tarfile
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from hiraishin_build import proc  # noqa: E402
from hiraishin_build.errors import HiraishinError  # noqa: E402
from hiraishin_build.sdist import write_tarball  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


class FaultSdistError(HiraishinError):
    """The sdist or a diff cannot make a faulted sdist."""


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _top_directory(members: list[tarfile.TarInfo], sdist: Path) -> str:
    tops = {member.name.split("/", 1)[0] for member in members}
    if len(tops) != 1:
        raise FaultSdistError(f"{sdist} has {len(tops)} top-level entries ({', '.join(sorted(tops)[:3])}); "
                              "an sdist has one directory", hint="pass the sdist `hiraishin sdist` wrote")
    top = tops.pop()
    if not any(member.name.startswith(f"{top}/llama.cpp/") for member in members):
        raise FaultSdistError(f"{sdist} has no {top}/llama.cpp directory",
                              hint="pass a hiraishin-llama sdist (dist/hiraishin_llama-*.tar.gz)")
    return top


def _apply(diff: Path, tree: Path) -> None:
    # into the scratch copy: a diff that fails half way leaves nothing behind
    proc.run(["patch", "-p1", "--forward", "--batch", "-i", diff.resolve()],
             cwd=tree, what=f"applying {diff.name} to the sdist's llama.cpp",
             hint=f"{diff} does not fit this sdist's tree: make the diff against the stack the sdist "
                  "was made from (hiraishin patches apply, then git diff in work/llama.cpp)")


def _tree_files(top_dir: Path) -> list[tuple[str, int, bytes]]:
    """The unpacked sdist as write_tarball takes it: (name under the top directory, git-style mode, data)."""
    files = []
    for path in top_dir.rglob("*"):
        name = path.relative_to(top_dir).as_posix()
        if path.is_symlink():
            files.append((name, 0o120000, os.readlink(path).encode()))
        elif path.is_file():
            files.append((name, 0o100755 if path.stat().st_mode & 0o111 else 0o100644, path.read_bytes()))
    return files


def fault_sdist(sdist: Path, diffs: list[Path], out_dir: Path) -> Path:
    """OUT_DIR/<the sdist's name>: the sdist with `diffs` applied to its llama.cpp, written as `hiraishin sdist`
    writes one (sdist.write_tarball), so that with no diff it is the same bytes and with one only the files the
    diff changes differ."""
    if not sdist.is_file():
        raise FaultSdistError(f"no sdist at {sdist}", hint="run `hiraishin sdist` first, or give its path")
    for diff in diffs:
        if not diff.is_file():
            raise FaultSdistError(f"no diff at {diff}", hint="the faults are in benchmarks/faults/")
    with tarfile.open(sdist) as tar, tempfile.TemporaryDirectory(prefix="hiraishin-fault-sdist-") as scratch:
        top = _top_directory(tar.getmembers(), sdist)
        tar.extractall(scratch, filter="data")
        for diff in diffs:
            _apply(diff, Path(scratch) / top / "llama.cpp")
        out = out_dir / sdist.name
        write_tarball(out, top, _tree_files(Path(scratch) / top))
    (out_dir / "faults.json").write_text(json.dumps({
        "sdist": {"name": sdist.name, "sha256": _sha256(sdist)},
        "faults": [{"diff": diff.name, "sha256": _sha256(diff)} for diff in diffs],
        "faulted_sdist_sha256": _sha256(out),
    }, indent=1) + "\n")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sdist", type=Path)
    parser.add_argument("diffs", type=Path, nargs="+", metavar="FAULT.diff")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "fault-sdist")
    args = parser.parse_args(argv)
    try:
        out = fault_sdist(args.sdist, args.diffs, args.out)
    except HiraishinError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(f"{out} ({', '.join(diff.name for diff in args.diffs)} on {args.sdist.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
