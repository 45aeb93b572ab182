"""Compare two sdists' llama.cpp trees file by file: what a change of patches/ did to the built source.

    python3 benchmarks/compare_sdists.py OLD.tar.gz NEW.tar.gz [--json OUT]

Reads both tarballs in memory (no unpacking) and compares every member under
<sdist>/llama.cpp/: its bytes and its mode. Prints a summary and exits 0 when
the two trees are byte-identical, 1 when any file differs, is missing from one,
or has another mode. Files outside llama.cpp/ (the wheel project, the build
info that names the patches) are listed apart: they may differ by design.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tarfile
from pathlib import Path

TREE = "llama.cpp"


def members(sdist: Path) -> tuple[dict[str, tuple[str, int]], dict[str, tuple[str, int]]]:
    """(llama.cpp files, other files) of an sdist: path below the top directory -> (sha256, mode)."""
    tree: dict[str, tuple[str, int]] = {}
    other: dict[str, tuple[str, int]] = {}
    with tarfile.open(sdist) as tar:
        for info in tar:
            if not info.isfile():
                continue
            _, _, path = info.name.partition("/")
            data = tar.extractfile(info).read()
            entry = (hashlib.sha256(data).hexdigest(), info.mode)
            (tree if path.split("/", 1)[0] == TREE else other)[path] = entry
    return tree, other


def compare(old: dict[str, tuple[str, int]], new: dict[str, tuple[str, int]]) -> dict[str, list[str]]:
    return {
        "only_in_old": sorted(old.keys() - new.keys()),
        "only_in_new": sorted(new.keys() - old.keys()),
        "content_differs": sorted(p for p in old.keys() & new.keys() if old[p][0] != new[p][0]),
        "mode_differs": sorted(p for p in old.keys() & new.keys() if old[p][1] != new[p][1]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args()
    (old_tree, old_other), (new_tree, new_other) = members(args.old), members(args.new)
    tree = compare(old_tree, new_tree)
    identical = not any(tree.values())
    report = {
        "old": {"name": args.old.name, "sha256": hashlib.sha256(args.old.read_bytes()).hexdigest(),
                "llama_cpp_files": len(old_tree)},
        "new": {"name": args.new.name, "sha256": hashlib.sha256(args.new.read_bytes()).hexdigest(),
                "llama_cpp_files": len(new_tree)},
        "llama_cpp_identical": identical,
        "llama_cpp": tree,
        "files_compared": len(old_tree.keys() & new_tree.keys()),
        "outside_llama_cpp_differs": sorted(p for p in old_other.keys() | new_other.keys()
                                            if old_other.get(p) != new_other.get(p)),
    }
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"llama.cpp trees: {report['files_compared']} files compared, "
          + ("byte-identical (content and mode)" if identical else
             ", ".join(f"{len(v)} {k.replace('_', ' ')}" for k, v in tree.items() if v)))
    print(f"outside llama.cpp/: {len(report['outside_llama_cpp_differs'])} file(s) differ: "
          + ", ".join(report["outside_llama_cpp_differs"]))
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
