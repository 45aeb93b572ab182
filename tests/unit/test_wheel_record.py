"""A wheel's RECORD is checked as pip and `wheel` check it, before a wheel is published or smoke-tested.

A member changed after the build and the wheel zipped again has a right CRC but a stale RECORD hash: `hiraishin
index` refuses it, naming the member, and writes nothing. `hiraishin smoke` refuses what is not a hiraishin-llama
wheel (a text file, another project's wheel, a wheel changed by hand) as bad input, exit 2, not as a failed
smoke test (9), and before it makes a venv.
"""

from __future__ import annotations

import csv
import io
import re
import time
import zipfile
from pathlib import Path

import pytest

from hiraishin_build.errors import ConfigError, IndexBuildError, SmokeFailed
from hiraishin_build.index import build_index

from ..helpers import PLAIN, hiraishin, make_wheel, record_hash, record_is_consistent

MEMBER = "hiraishin_llama/marker.txt"
VERSION = "9079.2+cpu"
INFO = f"hiraishin_llama-{VERSION}.dist-info"
RECORD = f"{INFO}/RECORD"
AS_BUILT = b"as built\n"


def good_wheel(directory: Path) -> Path:
    return make_wheel(directory, {MEMBER: (AS_BUILT, PLAIN)}, version=VERSION,
                      tag="py3-none-manylinux_2_35_x86_64")


def rezipped(wheel: Path, *, change: dict[str, bytes] | None = None, add: dict[str, bytes] | None = None,
             drop: tuple[str, ...] = (), record: bytes | None = None) -> Path:
    """``wheel`` written again in place as a hand edit does: members changed (``change``: name -> new bytes),
    added (``add``) or dropped (``drop``), its RECORD kept as it was (or replaced by ``record``). Every CRC
    is right: only the RECORD tells."""
    with zipfile.ZipFile(wheel) as source:
        entries = [(item, source.read(item)) for item in source.infolist()]
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as dest:
        for item, data in entries:
            if item.filename in drop:
                continue
            if item.filename == RECORD and record is not None:
                data = record
            dest.writestr(item, (change or {}).get(item.filename, data))
        for name, data in (add or {}).items():
            dest.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)
    with zipfile.ZipFile(wheel) as archive:
        assert archive.testzip() is None  # the zip itself is whole
    return wheel


def record_rows(wheel: Path) -> list[list[str]]:
    with zipfile.ZipFile(wheel) as archive:
        return list(csv.reader(io.StringIO(archive.read(RECORD).decode())))


def with_record(rows: list[list[str]]) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


def tampered(directory: Path, how: str) -> tuple[Path, str]:
    """A labelled wheel changed after it was built in one way; what its refusal must say."""
    wheel = good_wheel(directory)
    if how == "a member changed":
        patched = b"patched by hand\n"
        rezipped(wheel, change={MEMBER: patched})
        said = (f"its member {MEMBER} does not match its RECORD: its hash is {record_hash(patched)}, "
                f"RECORD says {record_hash(AS_BUILT)}, and it is {len(patched)} bytes, RECORD says {len(AS_BUILT)}")
    elif how == "a member not in RECORD":
        rezipped(wheel, add={"hiraishin_llama/extra.py": b"print('added')\n"})
        said = "its member hiraishin_llama/extra.py is not listed in its RECORD"
    elif how == "a RECORD line for a missing member":
        rezipped(wheel, drop=(MEMBER,))
        said = f"its RECORD lists {MEMBER}, which the wheel does not hold"
    elif how == "a size that differs":
        rows = [[name, digest, "99" if name == MEMBER else size] for name, digest, size in record_rows(wheel)]
        rezipped(wheel, record=with_record(rows))
        said = f"its member {MEMBER} does not match its RECORD: it is 9 bytes, RECORD says 99"
    elif how == "a member without a hash":
        rows = [[name, "" if name == MEMBER else digest, size] for name, digest, size in record_rows(wheel)]
        rezipped(wheel, record=with_record(rows))
        said = f"its member {MEMBER} does not match its RECORD: RECORD gives it no hash"
    elif how == "no RECORD":
        rezipped(wheel, drop=(RECORD,))
        said = "it has no .dist-info/RECORD"
    else:
        raise AssertionError(how)
    if how != "no RECORD":
        assert not record_is_consistent(wheel)  # as the helpers judge it too
    return wheel, said


HOW = ["a member changed", "a member not in RECORD", "a RECORD line for a missing member", "a size that differs",
       "a member without a hash", "no RECORD"]


# -- hiraishin index ------------------------------------------------------------------------------

@pytest.mark.parametrize("how", HOW)
def test_the_index_refuses_a_wheel_changed_after_its_build_naming_it_and_the_member(how: str, tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    make_wheel(dist / "good", {}, version="9079.2+cu13.sm90", tag="py3-none-any")  # not to be published alone
    wheel, said = tampered(dist / "cpu", how)
    with pytest.raises(IndexBuildError) as info:
        build_index(dist, tmp_path / "site")
    assert info.value.message == f"{wheel}: {said}"
    hint = info.value.hint or ""
    assert "rebuild the wheel" in hint and "never edit a built wheel by hand" in hint
    assert "nothing was written" in hint
    assert not (tmp_path / "site").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist"]  # no staging left behind


def test_the_index_command_refuses_a_changed_member_and_leaves_the_earlier_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    first = tmp_path / "first"
    make_wheel(first, {}, version="9079.1+cpu", tag="py3-none-any")
    assert hiraishin("index", str(first), "--out", str(site), cwd=tmp_path).returncode == 0
    published = {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()}
    dist = tmp_path / "dist"
    wheel, _ = tampered(dist, "a member changed")
    ran = hiraishin("index", str(dist), "--out", str(site), cwd=tmp_path)
    assert ran.returncode == IndexBuildError.exit_code, ran.stdout + ran.stderr
    assert "Traceback" not in ran.stderr
    said = " ".join(ran.stderr.split())  # the console wraps long lines
    assert f"{wheel.name}: its member {MEMBER} does not match its RECORD" in said
    assert "never edit a built wheel by hand" in said
    assert {str(p.relative_to(site)): p.read_bytes() for p in sorted(site.rglob("*")) if p.is_file()} == published
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dist", "first", "site"]


def test_a_good_wheel_still_indexes(tmp_path: Path) -> None:
    dist = tmp_path / "dist"
    wheel = good_wheel(dist)
    assert record_is_consistent(wheel)
    result = build_index(dist, tmp_path / "site")
    assert [w.filename for w in result.added] == [wheel.name]
    assert (tmp_path / "site" / "cpu" / "simple" / "hiraishin-llama" / wheel.name).read_bytes() == wheel.read_bytes()


# -- the check itself ---------------------------------------------------------------------------

def test_signatures_and_directory_entries_need_no_hash_and_a_real_wheel_passes(tmp_path: Path) -> None:
    from hiraishin_build.wheelcheck import verify_wheel

    wheel = rezipped(good_wheel(tmp_path), add={f"{INFO}/RECORD.jws": b"{}", f"{INFO}/RECORD.p7s": b"sig",
                                                "hiraishin_llama/empty/": b""})
    verify_wheel(wheel)
    # RECORD itself listed with no hash (as every tool writes it), or not listed at all: both as pip takes them.
    rows = [row for row in record_rows(wheel) if row[0] != RECORD]
    verify_wheel(rezipped(wheel, record=with_record(rows)))
    import ensurepip

    for real in sorted((Path(ensurepip.__file__).parent / "_bundled").glob("*.whl")):
        verify_wheel(real)  # pip's and setuptools' own wheels, as their tools wrote them


def test_directory_entries_listed_in_record_as_scikit_build_core_writes_them_pass(tmp_path: Path) -> None:
    """scikit-build-core puts each package directory into the zip and into RECORD with no hash and no size
    (`hiraishin_llama/,,`): a wheel this project builds must pass; a directory RECORD names but the zip lacks
    does not."""
    from hiraishin_build.wheelcheck import WheelInvalid, verify_wheel

    wheel = rezipped(good_wheel(tmp_path), add={"hiraishin_llama/": b"", "hiraishin_llama/bin/": b""})
    rows = record_rows(wheel)
    listed = rezipped(wheel, record=with_record([*rows, ["hiraishin_llama/", "", ""], ["hiraishin_llama/bin/", "", ""]]))
    verify_wheel(listed)
    ghost = rezipped(wheel, record=with_record([*rows, ["hiraishin_llama/lib/", "", ""]]))
    with pytest.raises(WheelInvalid, match="its RECORD lists hiraishin_llama/lib/, which the wheel does not hold"):
        verify_wheel(ghost)


def test_a_stronger_hash_than_sha256_is_taken_and_a_weaker_one_refused(tmp_path: Path) -> None:
    import base64
    import hashlib

    from hiraishin_build.wheelcheck import WheelInvalid, verify_wheel

    def digest(algorithm: str, data: bytes) -> str:
        raw = hashlib.new(algorithm, data).digest()
        return f"{algorithm}=" + base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    wheel = good_wheel(tmp_path)
    rows = record_rows(wheel)
    for algorithm, ok in (("sha512", True), ("md5", False)):
        changed = [[n, digest(algorithm, AS_BUILT) if n == MEMBER else d, s] for n, d, s in rows]
        rezipped(wheel, record=with_record(changed))
        if ok:
            verify_wheel(wheel)
        else:
            with pytest.raises(WheelInvalid, match=re.escape(f"{MEMBER} does not match its RECORD: RECORD hashes it "
                                                             "with md5")):
                verify_wheel(wheel)


def test_a_member_listed_twice_is_refused(tmp_path: Path) -> None:
    from hiraishin_build.wheelcheck import WheelInvalid, verify_wheel

    wheel = good_wheel(tmp_path)
    rows = record_rows(wheel)
    rezipped(wheel, record=with_record([*rows, next(r for r in rows if r[0] == MEMBER)]))
    with pytest.raises(WheelInvalid) as info:
        verify_wheel(wheel)
    assert info.value.message == f"{wheel}: its RECORD lists {MEMBER} twice"


def test_every_problem_is_named_not_only_the_first(tmp_path: Path) -> None:
    from hiraishin_build.wheelcheck import WheelInvalid, verify_wheel

    wheel = rezipped(good_wheel(tmp_path), change={MEMBER: b"x"}, add={"hiraishin_llama/extra.py": b""})
    with pytest.raises(WheelInvalid) as info:
        verify_wheel(wheel)
    assert info.value.message.startswith(f"{wheel}: its member {MEMBER} does not match its RECORD: ")
    assert info.value.message.endswith("; its member hiraishin_llama/extra.py is not listed in its RECORD")
    assert info.value.member == MEMBER


# -- hiraishin smoke: bad input, exit 2 ------------------------------------------------------------

def other_project_wheel(directory: Path) -> Path:
    """A whole wheel, RECORD right, of another project."""
    directory.mkdir(parents=True, exist_ok=True)
    info = "otherproj-1.0.dist-info"
    files = {"otherproj/__init__.py": b"", f"{info}/METADATA": b"Metadata-Version: 2.1\nName: otherproj\nVersion: 1.0\n",
             f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    path = directory / "otherproj-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in files.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/RECORD", "".join(f"{n},{record_hash(d)},{len(d)}\n" for n, d in files.items())
                         + f"{info}/RECORD,,\n")
    return path


def smoke_refuses(wheel: Path, tmp_path: Path, *mentions: str) -> None:
    started = time.monotonic()
    ran = hiraishin("smoke", str(wheel), "--out", str(tmp_path / "smoke"), cwd=tmp_path)
    assert ran.returncode == ConfigError.exit_code, f"exit {ran.returncode}\n{ran.stdout}{ran.stderr}"
    assert ran.returncode != SmokeFailed.exit_code
    said = " ".join(ran.stderr.split())  # the console wraps long lines
    for mention in mentions:
        assert mention in said, said
    assert "Traceback" not in ran.stderr
    assert not (tmp_path / "smoke").exists()  # refused before the venv
    assert time.monotonic() - started < 10


def test_smoke_refuses_a_text_file_named_x_whl_as_bad_input(tmp_path: Path) -> None:
    text = tmp_path / "x.whl"
    text.write_text("not a wheel\n")
    smoke_refuses(text, tmp_path, f"{text}: not a wheel's file name", "NAME-VERSION-PYTHON-ABI-PLATFORM.whl")


def test_smoke_refuses_a_text_file_with_a_wheels_name_as_bad_input(tmp_path: Path) -> None:
    text = tmp_path / "hiraishin_llama-9079.4+cpu-py3-none-any.whl"
    text.write_text("<html>a download that went wrong</html>\n")
    smoke_refuses(text, tmp_path, f"{text}: not a wheel")


def test_smoke_refuses_another_projects_wheel_as_bad_input(tmp_path: Path) -> None:
    other = other_project_wheel(tmp_path / "dist")
    smoke_refuses(other, tmp_path, f"{other} is a wheel of otherproj, not a hiraishin-llama wheel")


def test_smoke_refuses_a_wheel_changed_after_its_build_as_bad_input(tmp_path: Path) -> None:
    wheel, _ = tampered(tmp_path / "dist", "a member changed")
    smoke_refuses(wheel, tmp_path, f"{wheel}: its member {MEMBER} does not match its RECORD",
                  "never edit a built wheel by hand")
