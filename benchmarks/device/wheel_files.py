"""What a built wheel is made of, for the GPU machine (which has no unzip): the newest hiraishin-llama wheel of a
directory, its size and every file in it with its size and its compressed size in the zip, largest first.

    python3 benchmarks/device/wheel_files.py WHEEL_DIR [--since EPOCH_SECONDS]

Prints the listing as JSON, or {} when the directory holds no wheel written since EPOCH_SECONDS (default: any),
so a failed build never reports the wheel of an earlier one.
"""

from __future__ import annotations

import argparse
import json
import zipfile
from pathlib import Path


def listing(wheel_dir: Path, since: float = 0.0) -> dict:
    wheels = [p for p in wheel_dir.glob("hiraishin_llama-*.whl") if p.stat().st_mtime >= since]
    if not wheels:
        return {}
    wheel = max(wheels, key=lambda p: p.stat().st_mtime)
    with zipfile.ZipFile(wheel) as archive:
        files = sorted(({"file": i.filename, "bytes": i.file_size, "in_zip_bytes": i.compress_size}
                        for i in archive.infolist()), key=lambda f: -f["in_zip_bytes"])
    return {"wheel": wheel.name, "bytes": wheel.stat().st_size, "files": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel_dir", type=Path)
    parser.add_argument("--since", type=float, default=0.0)
    args = parser.parse_args()
    print(json.dumps(listing(args.wheel_dir, args.since), indent=1))


if __name__ == "__main__":
    main()
