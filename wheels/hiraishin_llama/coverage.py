"""``hiraishin-llama-coverage MODEL.gguf``: whether batch-invariant mode covers a model, per backend.

It reads the GGUF's header and tensor table only (a 60 GB model in well under a second) and says, for
each backend this wheel has (or the one given with --backend), whether every product of the model is
one the guarantee covers: its architecture, and the weight type of each matrix (dense products:
MUL_MAT; expert products: MUL_MAT_ID). What is covered, and the evidence for it, is the data file
coverage.json next to this module. What cannot be read from the file (flash attention, the KV cache
type, server slots, experts on the CPU) is said as what is also needed at run time.

Exit status: 0 covered on every backend checked; 1 not covered on one of them (greedy speculative
decoding there may differ from plain greedy decoding); 2 bad input, one line saying what (not a
GGUF file, cut short, a directory, a missing file, bad arguments, or a file llama.cpp's loader refuses: a
duplicated metadata key or tensor name, a tensor whose data offset is off the alignment or not where the
tensor before it ends, no tensors at all).
"""

from __future__ import annotations

import argparse
import difflib
import json
import mmap
import os
import re
import struct
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import gguf

from . import __version__, runtime
from ._args import ArgumentParser, report_path_problem, write_report

DATA_FILE = Path(__file__).with_name("coverage.json")
EXIT_NOT_COVERED, EXIT_USAGE = 1, 2
BACKENDS = ("cuda", "cpu")


class InputError(Exception):
    """The model file cannot be read as a GGUF model: the message says why, for one line after its path."""


class DataError(Exception):
    """The coverage data file is not as this module reads it."""


# ---------------------------------------------------------------------------------------------------------
# The GGUF header. gguf.GGUFReader builds a numpy view of every element of every array (the vocabulary:
# 3 s for SmolLM2's 49k tokens, about 10 s for a 152k-token Qwen vocabulary) and refuses tensor types the
# gguf package does not know (this fork's TQ3_1S/TQ4_1S), so the header is read here, by the GGUF spec,
# skipping arrays; the names and block sizes of the types come from the gguf package.

_GGUF_MAGIC = b"GGUF"
_SUPPORTED_VERSIONS = (2, 3)
_DEFAULT_ALIGNMENT = 32
_MAX_DIMS = 4  # GGML_MAX_DIMS
_V = gguf.GGUFValueType
_SCALAR_FORMATS = {_V.UINT8: "B", _V.INT8: "b", _V.UINT16: "H", _V.INT16: "h", _V.UINT32: "I", _V.INT32: "i",
                   _V.FLOAT32: "f", _V.BOOL: "?", _V.UINT64: "Q", _V.INT64: "q", _V.FLOAT64: "d"}


class _CutShort(Exception):
    """The header ends before what it describes."""


@dataclass(frozen=True)
class ArrayValue:
    """A metadata array, skipped: its element type and length only."""

    item_type: str
    length: int


@dataclass(frozen=True)
class TensorInfo:
    name: str
    type_id: int
    shape: tuple[int, ...]
    """ggml order: the row length first."""
    offset: int
    """Within the file's data section."""
    entry: int = field(default=0, compare=False)
    """Where the tensor's entry in the tensor table starts, in the file (for messages)."""


@dataclass(frozen=True)
class Header:
    path: Path
    metadata: dict[str, object]
    """Scalars and strings as values, arrays as ArrayValue; of a key written twice, the last value."""
    tensors: tuple[TensorInfo, ...]
    data_offset: int
    file_size: int
    keys: tuple[tuple[str, int], ...] = ()
    """Every metadata key in file order, duplicates included, with where its entry starts in the file."""
    alignment: int = _DEFAULT_ALIGNMENT


class _Cursor:
    def __init__(self, buffer: mmap.mmap | bytes, order: str) -> None:
        self.buffer, self.order, self.offset = buffer, order, 0
        self._structs: dict[str, struct.Struct] = {}

    def remaining(self) -> int:
        return len(self.buffer) - self.offset

    def value(self, fmt: str) -> int | float | bool:
        packer = self._structs.get(fmt)
        if packer is None:
            packer = self._structs[fmt] = struct.Struct(self.order + fmt)
        if packer.size > self.remaining():
            raise _CutShort
        (result,) = packer.unpack_from(self.buffer, self.offset)
        self.offset += packer.size
        return result

    def string(self) -> str:
        length = int(self.value("Q"))
        if length > self.remaining():
            raise _CutShort
        data = self.buffer[self.offset:self.offset + length]
        self.offset += length
        return bytes(data).decode("utf-8", errors="replace")

    def skip_strings(self, count: int) -> None:
        length_of = struct.Struct(self.order + "Q").unpack_from
        buffer, offset, end = self.buffer, self.offset, len(self.buffer)
        for _ in range(count):
            if offset + 8 > end:
                raise _CutShort
            offset += 8 + length_of(buffer, offset)[0]
        if offset > end:
            raise _CutShort
        self.offset = offset

    def metadata_value(self, value_type: int, key: str) -> object:
        if value_type == _V.STRING:
            return self.string()
        if value_type in _SCALAR_FORMATS:
            return self.value(_SCALAR_FORMATS[value_type])
        if value_type != _V.ARRAY:
            raise InputError(f"is not a valid GGUF file: metadata key {key!r} has the unknown value type {value_type}")
        item_type, length = int(self.value("I")), int(self.value("Q"))
        self.skip_array(item_type, length, key)
        return ArrayValue(_V(item_type).name, length)

    def skip_array(self, item_type: int, length: int, key: str) -> None:
        if item_type in _SCALAR_FORMATS:
            size = struct.calcsize(_SCALAR_FORMATS[item_type])
            if length * size > self.remaining():
                raise _CutShort
            self.offset += length * size
        elif item_type == _V.STRING:
            if length * 8 > self.remaining():
                raise _CutShort
            self.skip_strings(length)
        elif item_type == _V.ARRAY:
            if length * 12 > self.remaining():
                raise _CutShort
            for _ in range(length):
                inner_type, inner_length = int(self.value("I")), int(self.value("Q"))
                self.skip_array(inner_type, inner_length, key)
        else:
            raise InputError(f"is not a valid GGUF file: metadata key {key!r} is an array of the unknown value type "
                             f"{item_type}")


def _file_problem(path: Path) -> str | None:
    """Why ``path`` is no model file to open, before reading it."""
    if path.is_dir():
        return "is a directory, not a model file; pass the .gguf file itself"
    if not path.exists():
        return "no such file; check the path"
    if not path.is_file():
        return "is not a regular file; pass a .gguf model file"
    return None


def read_header(path: Path) -> Header:
    """The metadata and tensor table of one GGUF file, without reading its tensor data."""
    problem = _file_problem(path)
    if problem:
        raise InputError(problem)
    try:
        with path.open("rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if size == 0:
                raise InputError("is empty; pass a .gguf model file")
            with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as buffer:
                return _parse(path, buffer, size)
    except OSError as error:
        raise InputError(f"cannot be read ({(error.strerror or str(error)).lower()}); check its permissions") from None


def _parse(path: Path, buffer: mmap.mmap, size: int) -> Header:
    if buffer[:4] != _GGUF_MAGIC:
        raise InputError("not a GGUF file (its first 4 bytes are not 'GGUF'); pass a .gguf model file")
    if size < 8:
        raise InputError(_cut_short("its version"))
    order = "<"
    version = struct.unpack_from("<I", buffer, 4)[0]
    if version & 0xFFFF == 0:  # written for the other byte order, as gguf.GGUFReader reads it
        order = ">"
        version = struct.unpack_from(">I", buffer, 4)[0]
    if version not in _SUPPORTED_VERSIONS:
        raise InputError(f"is GGUF version {version}, which llama.cpp does not read (it reads versions 2 and 3)")
    cursor = _Cursor(buffer, order)
    cursor.offset = 8
    where = "its counts of tensors and metadata keys"
    try:
        # No count is trusted beyond the bytes there: each key or tensor read raises _CutShort at the end.
        n_tensors, n_keys = int(cursor.value("Q")), int(cursor.value("Q"))
        metadata: dict[str, object] = {}
        keys = []
        for index in range(n_keys):
            where = f"its metadata (key {index + 1} of {n_keys})"
            entry = cursor.offset
            key = cursor.string()
            keys.append((key, entry))
            metadata[key] = cursor.metadata_value(int(cursor.value("I")), key)
        tensors = []
        for index in range(n_tensors):
            where = f"its tensor table (tensor {index + 1} of {n_tensors})"
            entry = cursor.offset
            name = cursor.string()
            n_dims = int(cursor.value("I"))
            if n_dims > _MAX_DIMS:
                raise InputError(f"is not a valid GGUF file: tensor {name!r} has {n_dims} dimensions (at most "
                                 f"{_MAX_DIMS})")
            shape = tuple(int(cursor.value("Q")) for _ in range(n_dims))
            tensors.append(TensorInfo(name, int(cursor.value("I")), shape, int(cursor.value("Q")), entry))
    except _CutShort:
        raise InputError(_cut_short(where)) from None
    alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or isinstance(alignment, bool) or alignment <= 0 or alignment & (alignment - 1):
        raise InputError(f"is not a valid GGUF file: general.alignment is {alignment!r}, not a power of two")
    data_offset = cursor.offset + -cursor.offset % alignment
    return Header(path, metadata, tuple(tensors), data_offset, size, tuple(keys), alignment)


def _cut_short(where: str) -> str:
    return f"is cut short: the file ends inside {where}; it is incomplete (an interrupted download or copy?)"


# ---------------------------------------------------------------------------------------------------------
# The coverage data (coverage.json), read into frozen dataclasses that reject what they do not know.


def _check_keys(value: object, where: str, required: Iterable[str], optional: Iterable[str] = ()) -> dict:
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected an object, got {type(value).__name__}")
    required, known = tuple(required), (*required, *optional)
    for key in value:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            raise DataError(f"{where}: unknown key {key!r}" + (f"; did you mean {close[0]!r}?" if close else
                                                                 f"; known: {', '.join(known)}"))
    for key in required:
        if key not in value:
            raise DataError(f"{where}: missing key {key!r}")
    return value


def _object(value: object, where: str) -> dict:
    """An object whose keys are names (architectures, types), not settings."""
    if not isinstance(value, dict):
        raise DataError(f"{where}: expected an object, got {type(value).__name__}")
    return value


def _strings(value: object, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) and item for item in value):
        raise DataError(f"{where}: expected a list of non-empty strings")
    return tuple(value)


@dataclass(frozen=True)
class Entry:
    """What the data says of one architecture, or of one weight type on one backend and product kind."""

    covered: bool
    evidence: tuple[str, ...] = ()
    """Files (relative to the repository root) that show it covered; never empty for a covered entry."""
    reason: str = ""
    """Why it is not covered; never empty for an entry that is not."""
    note: str = ""
    """Printed when a model uses it: a basis weaker than a measured model."""

    @classmethod
    def parse(cls, value: object, where: str) -> Entry:
        value = _check_keys(value, where, ("covered",), ("evidence", "reason", "note"))
        covered = value["covered"]
        if not isinstance(covered, bool):
            raise DataError(f"{where}: covered must be true or false")
        evidence = _strings(value.get("evidence", []), f"{where}.evidence")
        reason, note = value.get("reason", ""), value.get("note", "")
        if not isinstance(reason, str) or not isinstance(note, str):
            raise DataError(f"{where}: reason and note must be strings")
        if covered and not evidence:
            raise DataError(f"{where}: a covered entry needs its evidence (files under benchmarks/results/)")
        if not covered and not reason:
            raise DataError(f"{where}: an entry that is not covered needs its reason")
        return cls(covered, evidence, reason, note)


@dataclass(frozen=True)
class Table:
    """The weight types of one product kind on one backend."""

    default_reason: str
    """The reason for a type the table does not list."""
    types: Mapping[str, Entry]

    def entry(self, type_name: str) -> Entry:
        return self.types.get(type_name) or Entry(False, reason=self.default_reason)


@dataclass(frozen=True)
class Note:
    """A backend's note for models that have a kind of product, about what the file cannot say."""

    when: str
    text: str
    evidence: tuple[str, ...]
    unless_claimed: str = ""
    """A list in the build's stack information (stack.json): when it names the backend, the note is left out."""


@dataclass(frozen=True)
class Backend:
    tables: Mapping[str, Table]
    """By product kind: dense (MUL_MAT) and experts (MUL_MAT_ID)."""
    notes: tuple[Note, ...]


@dataclass(frozen=True)
class ForkType:
    name: str
    block: tuple[int, int] | None
    """Elements per block and bytes per block; None where not needed (KV cache types)."""


@dataclass(frozen=True)
class Coverage:
    """coverage.json."""

    architectures: Mapping[str, Entry]
    unlisted_architecture_reason: str
    recurrent_tensor_markers: tuple[str, ...]
    recurrent_key_markers: tuple[str, ...]
    recurrent_reason: str
    backends: Mapping[str, Backend]
    fork_types: Mapping[int, ForkType]
    """Type ids of this fork: they win over the gguf package's names (the fork renumbered 42-47)."""
    run_time: tuple[str, ...]
    pending_evidence: tuple[str, ...]
    features: Mapping[str, Mapping[str, Entry]] = field(default_factory=dict)
    """What a run may use beside the model (KV types, slots, splits), by feature, then backend where it applies."""

    def evidence(self) -> set[str]:
        """Every evidence file the data names."""
        files = {path for entry in self.architectures.values() for path in entry.evidence}
        for backend in self.backends.values():
            files |= {path for table in backend.tables.values() for entry in table.types.values()
                      for path in entry.evidence}
            files |= {path for note in backend.notes for path in note.evidence}
        files |= {path for by_backend in self.features.values() for entry in by_backend.values()
                  for path in entry.evidence}
        return files


PRODUCT_KINDS = ("dense", "experts")


def parse_coverage(data: object) -> Coverage:
    data = _check_keys(data, "coverage data", ("architectures", "unlisted_architecture_reason", "recurrent",
                                               "backends", "run_time"), ("about", "pending_evidence", "fork_types",
                                                                            "features"))
    architectures = _object(data["architectures"], "architectures")
    recurrent = _check_keys(data["recurrent"], "recurrent", ("tensor_markers", "key_markers", "reason"))
    backends = {}
    for name, value in _check_keys(data["backends"], "backends", (), BACKENDS).items():
        value = _check_keys(value, f"backends.{name}", PRODUCT_KINDS, ("notes",))
        tables = {}
        for kind in PRODUCT_KINDS:
            where = f"backends.{name}.{kind}"
            table = _check_keys(value[kind], where, ("default_reason", "types"))
            types = _object(table["types"], f"{where}.types")
            tables[kind] = Table(str(table["default_reason"]),
                                 {type_name: Entry.parse(entry, f"{where}.types.{type_name}")
                                  for type_name, entry in types.items()})
        notes = []
        for index, note in enumerate(value.get("notes", [])):
            where = f"backends.{name}.notes[{index}]"
            note = _check_keys(note, where, ("when", "text", "evidence"), ("unless_claimed",))
            if note["when"] not in PRODUCT_KINDS + ("router",):
                raise DataError(f"{where}: when must be a product kind ({', '.join(PRODUCT_KINDS)}, router)")
            notes.append(Note(note["when"], note["text"], _strings(note["evidence"], f"{where}.evidence"),
                              note.get("unless_claimed", "")))
        backends[name] = Backend(tables, tuple(notes))
    fork_types = {}
    for type_id, value in _object(data.get("fork_types", {}), "fork_types").items():
        value = _check_keys(value, f"fork_types.{type_id}", ("name", "block"))
        block = value["block"]
        fork_types[int(type_id)] = ForkType(value["name"], tuple(block) if block else None)
    return Coverage(
        architectures={name: Entry.parse(entry, f"architectures.{name}") for name, entry in architectures.items()},
        unlisted_architecture_reason=str(data["unlisted_architecture_reason"]),
        recurrent_tensor_markers=_strings(recurrent["tensor_markers"], "recurrent.tensor_markers"),
        recurrent_key_markers=_strings(recurrent["key_markers"], "recurrent.key_markers"),
        recurrent_reason=str(recurrent["reason"]),
        backends=backends, fork_types=fork_types,
        run_time=_strings(data["run_time"], "run_time"),
        pending_evidence=_strings(data.get("pending_evidence", []), "pending_evidence"),
        features={name: {backend: Entry.parse(entry, f"features.{name}.{backend}")
                         for backend, entry in _check_keys(by_backend, f"features.{name}", (), BACKENDS).items()}
                  for name, by_backend in _object(data.get("features", {}), "features").items()})


def load_coverage(path: Path | None = None) -> Coverage:
    path = DATA_FILE if path is None else path
    try:
        return parse_coverage(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, DataError) as error:
        raise DataError(f"{path}: {error}") from None


def type_name(type_id: int, data: Coverage) -> str:
    """A tensor type's name: this fork's where it numbers differently, else the gguf package's."""
    if type_id in data.fork_types:
        return data.fork_types[type_id].name
    try:
        return gguf.GGMLQuantizationType(type_id).name
    except ValueError:
        return f"type {type_id}"


def _block(type_id: int, data: Coverage) -> tuple[int, int] | None:
    if type_id in data.fork_types:
        return data.fork_types[type_id].block
    try:
        return gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(type_id)]
    except (ValueError, KeyError):
        return None


# ---------------------------------------------------------------------------------------------------------
# The model: one file, or every part of a split one.

# llama.cpp's split file names (llama_split_path): PREFIX-00001-of-00003.gguf.
_SPLIT_NAME = re.compile(r"^(?P<prefix>.*)-(?P<no>\d{5})-of-(?P<count>\d{5})\.gguf$")


@dataclass(frozen=True)
class Model:
    path: Path
    architecture: str
    metadata: Mapping[str, object]
    tensors: tuple[TensorInfo, ...]
    parts: tuple[Path, ...]

    def key(self, name: str) -> object:
        return self.metadata.get(f"{self.architecture}.{name}")

    def count(self, name: str) -> int:
        value = self.key(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


# What llama.cpp's loader refuses in a file that reads: gguf_init_from_file_impl (ggml/src/gguf.cpp) stops at a
# duplicated key or tensor name, a row length that is no multiple of its type's block, and a tensor whose data
# offset is not where the tensor before it ends, padded to the alignment; llama_model_loader at tensor data past
# the end of the file (llama-model-loader.h), a tensor in two parts of a split model, and a model without tensors.
_INVALID = "is not a valid GGUF file: "
_REFUSED = "which llama.cpp's loader refuses"
_WRITE_AGAIN = "the file was written wrongly: convert or download the model again"


def _nbytes(tensor: TensorInfo, data: Coverage) -> int | None:
    """The tensor's size in bytes as ggml_nbytes has it, or None where its type's block is unknown or its rows are
    no whole number of blocks."""
    block = _block(tensor.type_id, data)
    row = tensor.shape[0] if tensor.shape else 1
    if block is None or row % block[0]:
        return None
    elements = 1
    for dim in tensor.shape:
        elements *= dim
    return elements // block[0] * block[1]


def structural_problems(header: Header, data: Coverage) -> list[str]:
    """What llama.cpp's loader refuses in this file, in the order it checks, one message each (for one line after
    the file's path: what is wrong, where in the file, what to do); empty for a file it reads. Whether a model has
    tensors at all, and each tensor once across the parts of a split model, are read_model's to say: the first
    part of a split model may hold none (llama-gguf-split --no-tensor-first-split)."""
    problems = []
    first_of: dict[str, int] = {}
    for index, (key, entry) in enumerate(header.keys):
        first = first_of.setdefault(key, index)
        if first != index:
            problems.append(f"{_INVALID}duplicate key {key!r} in its metadata (key {index + 1} of {len(header.keys)}, "
                            f"at byte {entry}; first as key {first + 1}, at byte {header.keys[first][1]}), "
                            f"{_REFUSED}; {_WRITE_AGAIN}")
    n_tensors = len(header.tensors)
    first_of = {}
    for index, tensor in enumerate(header.tensors):
        where = f"tensor {index + 1} of {n_tensors}, at byte {tensor.entry}"
        first = first_of.setdefault(tensor.name, index)
        if first != index:
            problems.append(f"{_INVALID}duplicate tensor name {tensor.name!r} in its tensor table ({where}; first as "
                            f"tensor {first + 1}, at byte {header.tensors[first].entry}), {_REFUSED}; {_WRITE_AGAIN}")
        block = _block(tensor.type_id, data)
        row = tensor.shape[0] if tensor.shape else 1
        if block is not None and row % block[0]:
            problems.append(f"{_INVALID}tensor {tensor.name!r} ({where}) of type {type_name(tensor.type_id, data)} "
                            f"has rows of {row} elements, not a whole number of its blocks of {block[0]}, "
                            f"{_REFUSED}; {_WRITE_AGAIN}")
    # The data offsets: each a multiple of the alignment, and where the tensor before it ends, padded. The loader
    # stops at the first that is not, and so does this; past a tensor whose size is unknown, only the alignment.
    alignment = header.alignment
    given = ("its general.alignment" if "general.alignment" in header.metadata
             else "the default: the file has no general.alignment")
    expected: int | None = 0
    before = ""
    for index, tensor in enumerate(header.tensors):
        what = (f"{_INVALID}tensor {tensor.name!r} (tensor {index + 1} of {n_tensors}, its entry at byte "
                f"{tensor.entry}) has the data offset {tensor.offset} (from the data section's start, byte "
                f"{header.data_offset})")
        if tensor.offset % alignment:
            problems.append(f"{what}, not a multiple of the alignment {alignment} ({given}), {_REFUSED}; "
                            f"{_WRITE_AGAIN}")
            break
        if expected is not None and tensor.offset != expected:
            since = (f"where {before!r} before it ends, padded to the alignment {alignment}" if before
                     else "the start of the data section")
            problems.append(f"{what}, expected {expected} ({since}), {_REFUSED}; {_WRITE_AGAIN}")
            break
        size = _nbytes(tensor, data)
        expected = None if size is None or expected is None else expected + size + -size % alignment
        before = tensor.name
    # A file whose data stops before its tensors end was cut short after its header.
    end, last = 0, ""
    for tensor in header.tensors:
        size = _nbytes(tensor, data)
        if size is not None and header.data_offset + tensor.offset + size > end:
            end, last = header.data_offset + tensor.offset + size, tensor.name
    if end > header.file_size:
        problems.append(f"is cut short: its tensor data ends at byte {end} ({last}), the file has "
                        f"{header.file_size}; it is incomplete (an interrupted download or copy?)")
    return problems


def _check_structure(header: Header, data: Coverage) -> None:
    """Raises InputError with the first of the file's structural problems: llama.cpp's loader stops at it."""
    problems = structural_problems(header, data)
    if problems:
        more = len(problems) - 1
        raise InputError(problems[0] + (f" (and {more} more problem{'s' if more > 1 else ''} after it)" if more
                                        else ""))


def _model_problem(headers: list[Header]) -> str | None:
    """What llama_model_loader refuses in a model of several parts: a tensor in two of them."""
    part_of: dict[str, int] = {}
    for number, part in enumerate(headers):
        for tensor in part.tensors:
            first = part_of.setdefault(tensor.name, number)
            if first != number:
                return (f"is not a valid split model: tensor {tensor.name!r} is in part {first + 1} "
                        f"({headers[first].path.name}) and again in part {number + 1} ({part.path.name}), "
                        f"{_REFUSED}; split the model again with llama-gguf-split")
    return None


def read_model(path: Path, data: Coverage) -> Model:
    """The model's metadata and tensor table; raises InputError (for the path given) when it cannot be read."""
    header = read_header(path)
    _check_structure(header, data)
    count = header.metadata.get("split.count", 0)
    headers = [header]
    if isinstance(count, int) and count > 1:
        headers = _split_parts(path, header, count, data)
    problem = _model_problem(headers)
    if problem:
        raise InputError(problem)
    first = headers[0]
    architecture = first.metadata.get("general.architecture")
    if not isinstance(architecture, str) or not architecture:
        raise InputError("has no general.architecture key, so it is no llama.cpp model")
    tensors = tuple(tensor for part in headers for tensor in part.tensors)
    if not tensors:
        where = f"in any of its {len(headers)} parts" if len(headers) > 1 else "(its tensor table is empty)"
        raise InputError(f"has no tensors {where}, so llama.cpp loads no model from it; pass the model file itself, "
                         "not one that holds only metadata or a vocabulary")
    return Model(path, architecture, first.metadata, tensors, tuple(part.path for part in headers))


def _split_parts(path: Path, header: Header, count: int, data: Coverage) -> list[Header]:
    number = header.metadata.get("split.no", 0)
    match = _SPLIT_NAME.match(path.name)
    if match is None or int(match["count"]) != count:
        raise InputError(f"is part {int(number) + 1} of {count} of a split model, but its name is not "
                         f"PREFIX-{int(number) + 1:05d}-of-{count:05d}.gguf, so the other parts cannot be found; "
                         "pass a part under the name llama-gguf-split gave it")
    headers = []
    for index in range(count):
        part = path.with_name(f"{match['prefix']}-{index + 1:05d}-of-{count:05d}.gguf")
        if part == path:
            headers.append(header)
            continue
        which = f"is part {int(number) + 1} of {count} of a split model, and its part {index + 1} ({part.name})"
        if not part.exists():
            raise InputError(f"{which} is not next to it; keep every part in one directory")
        try:
            part_header = read_header(part)
            _check_structure(part_header, data)
        except InputError as error:
            raise InputError(f"{which} {error}") from None
        if part_header.metadata.get("split.count") != count or part_header.metadata.get("split.no") != index:
            raise InputError(f"{which} says it is not (its split.no and split.count differ)")
        headers.append(part_header)
    return headers


# ---------------------------------------------------------------------------------------------------------
# What the model computes: its products and their weight types, by llama.cpp's tensor names.

# 3-D expert tensors (MUL_MAT_ID): blk.N.ffn_{gate,up,down,gate_up}_exps and the _chexps variants.
_EXPERTS = re.compile(r"^blk\.\d+\.ffn_(?:gate|up|down|gate_up)_(?:ch)?exps\.weight$")
# The router: an F32 product in real models, judged as a dense product.
_ROUTER = re.compile(r"^blk\.\d+\.ffn_gate_inp(?:_shexp)?\.weight$")
# Row lookups (GET_ROWS, exact at any batch size): no product, except a token embedding that is also the output.
_LOOKUPS = ("token_embd.weight", "position_embd.weight", "token_types.weight", "per_layer_token_embd.weight")
TIED_OUTPUT = "token_embd.weight"


@dataclass(frozen=True)
class Product:
    kind: str
    """dense, experts or router (judged as dense)."""
    type_name: str
    tensor: str


def _is_recurrent_tensor(name: str, data: Coverage) -> bool:
    return any(marker in name for marker in data.recurrent_tensor_markers)


def products(model: Model, data: Coverage) -> list[Product]:
    """The weight matrices the model multiplies by, with the kind of product each is."""
    found = []
    names = {tensor.name for tensor in model.tensors}
    for tensor in model.tensors:
        name = tensor.name
        if not name.endswith(".weight") or len(tensor.shape) < 2 or "norm" in name or "attn_sinks" in name:
            continue
        if _is_recurrent_tensor(name, data):
            continue  # the architecture's finding names them
        if name in _LOOKUPS:
            # Without output.weight llama.cpp multiplies by the token embedding (tied embeddings).
            if name == TIED_OUTPUT and "output.weight" not in names:
                found.append(Product("dense", type_name(tensor.type_id, data), name))
            continue
        kind = "experts" if _EXPERTS.match(name) else "router" if _ROUTER.match(name) else "dense"
        found.append(Product(kind, type_name(tensor.type_id, data), name))
    return found


def recurrent_evidence(model: Model, data: Coverage) -> tuple[list[str], list[str]]:
    """The tensors and the metadata keys that show recurrent state."""
    tensors = [t.name for t in model.tensors if _is_recurrent_tensor(t.name, data)]
    keys = [key for key in model.metadata if key.startswith(f"{model.architecture}.")
            and any(marker in key[len(model.architecture):] for marker in data.recurrent_key_markers)]
    return tensors, keys


# ---------------------------------------------------------------------------------------------------------
# The verdict per backend.

_KIND_ORDER = {"dense": 0, "experts": 1, "router": 2}


@dataclass(frozen=True)
class Finding:
    """One architecture, build claim or (product kind, weight type) of the model, and what the data says of it."""

    what: str
    """e.g. "dense Q5_0", "architecture qwen3next", "build"."""
    covered: bool
    reason: str = ""
    tensors: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    note: str = ""
    detail: str = ""
    """What is printed after ``what`` in parentheses, where the tensors do not say it."""

    def described(self) -> str:
        if self.detail:
            return f"{self.what} ({self.detail})"
        if not self.tensors:
            return self.what
        if len(self.tensors) == 1:
            tied = " (the output matrix, tied to the token embedding)" if self.tensors[0] == TIED_OUTPUT else ""
            return f"{self.what} (1 tensor: {self.tensors[0]}{tied})"
        return f"{self.what} ({len(self.tensors)} tensors, e.g. {self.tensors[0]})"


@dataclass(frozen=True)
class Verdict:
    backend: str
    in_wheel: bool
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def covered(self) -> bool:
        return all(finding.covered for finding in self.findings)

    @property
    def problems(self) -> list[Finding]:
        return [finding for finding in self.findings if not finding.covered]


def architecture_finding(model: Model, data: Coverage) -> Finding:
    what = f"architecture {model.architecture}"
    tensors, keys = recurrent_evidence(model, data)
    entry = data.architectures.get(model.architecture)
    if tensors or keys:
        if tensors:
            detail = f"1 tensor: {tensors[0]}" if len(tensors) == 1 else f"{len(tensors)} tensors, e.g. {tensors[0]}"
        else:
            detail = f"metadata key {keys[0]}"
        if entry is not None and entry.covered:
            # a hybrid architecture whose models were measured exact (the build must claim hybrids too)
            return Finding(what, True, tensors=tuple(tensors + keys), evidence=entry.evidence, note=entry.note,
                           detail=detail)
        # A listed recurrent architecture names its ops; any other with recurrent state gets the generic reason.
        reason = entry.reason if entry is not None else data.recurrent_reason
        return Finding(what, False, reason, tuple(tensors + keys), detail=detail)
    if entry is None:
        return Finding(what, False, data.unlisted_architecture_reason)
    return Finding(what, entry.covered, entry.reason, evidence=entry.evidence, note=entry.note)


def build_findings(backend: str, has_experts: bool, build: Mapping[str, object],
                   has_recurrent_state: bool = False) -> list[Finding]:
    """What this build claims exact, from its stack information (stack.json): nothing beyond it is covered."""
    if "exact_backends" not in build:
        return [Finding("build", False, "this installation has no stack information (stack.json: a source tree, "
                                        "not a built wheel), so it claims no backend exact")]
    findings = []
    if backend not in build.get("exact_backends", []):  # type: ignore[operator]
        findings.append(Finding("build", False, f"this wheel's patch stack does not claim {backend} exact "
                                                "(exact_backends in its stack.json)"))
    elif has_experts and backend not in build.get("exact_moe_backends", []):  # type: ignore[operator]
        findings.append(Finding("build", False, f"this wheel's patch stack does not claim mixture-of-experts models "
                                                f"exact on {backend} (exact_moe_backends in its stack.json)"))
    if has_recurrent_state and backend in build.get("exact_backends", []) \
            and backend not in build.get("exact_hybrid_backends", []):  # type: ignore[operator]
        findings.append(Finding("build", False, f"this wheel's patch stack does not claim models with recurrent "
                                                f"layers exact on {backend} (exact_hybrid_backends in its stack.json)"))
    omitted = build.get("omitted_patches")
    if omitted:
        findings.append(Finding("build", False, f"built without {', '.join(omitted)} (a fault build, not a release)"))  # type: ignore[arg-type]
    return findings


def judge(model: Model, backend: str, data: Coverage, build: Mapping[str, object] | None = None,
          built: Iterable[str] | None = None) -> Verdict:
    """Whether batch-invariant mode covers ``model`` on ``backend``, finding by finding."""
    build = runtime.build_info() if build is None else build
    built = runtime.built_backends() if built is None else list(built)
    found = products(model, data)
    kinds = {product.kind for product in found}
    recurrent = any(recurrent_evidence(model, data))
    findings = [architecture_finding(model, data), *build_findings(backend, "experts" in kinds, build, recurrent)]
    tables = data.backends[backend].tables
    grouped: dict[tuple[str, str], list[str]] = {}
    for product in found:
        grouped.setdefault((product.kind, product.type_name), []).append(product.tensor)
    # Kinds as _KIND_ORDER has them, types by their ggml ids.
    ids = {type_name(tensor.type_id, data): tensor.type_id for tensor in model.tensors}
    for (kind, name), tensors in sorted(grouped.items(), key=lambda item: (_KIND_ORDER[item[0][0]], ids[item[0][1]])):
        entry = tables["experts" if kind == "experts" else "dense"].entry(name)
        findings.append(Finding(f"{kind} {name}", entry.covered, entry.reason, tuple(tensors), entry.evidence,
                                entry.note))
    claims = {key: value for key, value in build.items() if isinstance(value, list)}
    notes = [note.text for note in data.backends[backend].notes
             if note.when in kinds and backend not in claims.get(note.unless_claimed, [])]
    return Verdict(backend, backend in built, tuple(findings), tuple(notes))


# ---------------------------------------------------------------------------------------------------------
# What is printed, and the JSON report.


def describe_model(model: Model) -> str:
    parts = [model.architecture]
    n_expert = model.count("expert_count")
    if n_expert:
        parts.append(f"{n_expert} experts, {model.count('expert_used_count')} used")
    details = ", ".join(parts)
    n_layer = model.count("block_count")
    tail = [f"{n_layer} layer{'s' if n_layer != 1 else ''}"] if n_layer else []
    if len(model.parts) > 1:
        tail.append(f"{len(model.parts)} files")
    return f"{model.path.name} ({details}{'; ' + ', '.join(tail) if tail else ''})"


# run_time's condition on slots, and the feature that says where several slots are covered too.
_ONE_SLOT = "one server slot"
_SEVERAL_SLOTS = "several server slots with drafts"


def run_time_conditions(data: Coverage, backends: Iterable[str]) -> list[str]:
    """data.run_time for these backends: its one-slot condition says where several slots are covered too
    (features' "several server slots with drafts": the CPU backend, not CUDA)."""
    backends = list(backends)
    slots = data.features.get(_SEVERAL_SLOTS, {})
    several = [backend for backend in backends if backend in slots and slots[backend].covered]
    one = [backend for backend in backends if backend not in several]
    said = _ONE_SLOT if not several else "one or several server slots" if not one else \
        f"{_ONE_SLOT} on {' and '.join(one)} (several on {' and '.join(several)})"
    return [said if condition == _ONE_SLOT else condition for condition in data.run_time]


def render(model: Model, verdicts: list[Verdict], data: Coverage) -> str:
    width = max(len(verdict.backend) for verdict in verdicts) + 1
    lines = [f"model: {describe_model(model)}"]
    # Each note once, naming the backends it holds for unless it holds for all of them.
    notes: dict[str, list[str]] = {}
    for verdict in verdicts:
        label = f"{verdict.backend + ':':<{width}}"
        if verdict.covered:
            by_kind: dict[str, list[str]] = {}
            for finding in verdict.findings:
                kind, _, name = finding.what.partition(" ")
                if kind in _KIND_ORDER:
                    by_kind.setdefault(kind, []).append(name)
            summary = "; ".join(f"{kind} {', '.join(names)}" for kind, names in by_kind.items())
            lines.append(f"{label} covered ({summary})" if summary else f"{label} covered")
        else:
            problems = verdict.problems
            if len(problems) == 1:
                lines.append(f"{label} NOT covered: {problems[0].described()}: {problems[0].reason}")
            else:
                lines.append(f"{label} NOT covered:")
                lines += [f"  {problem.described()}: {problem.reason}" for problem in problems]
        if not verdict.in_wheel:
            lines.append(f"note: this wheel has no {verdict.backend} backend: the {verdict.backend} line says what "
                         f"the {verdict.backend} wheels of its patch stack cover")
        texts = [f"{finding.what}: {finding.note}" for finding in verdict.findings if finding.covered and finding.note]
        for text in [*texts, *verdict.notes]:
            notes.setdefault(text, []).append(verdict.backend)
    for text, backends in notes.items():
        where = "" if len(backends) == len(verdicts) and len(verdicts) > 1 else f"on {' and '.join(backends)}, "
        lines.append(f"note: {where}{text}")
    not_covered = [verdict.backend for verdict in verdicts if not verdict.covered]
    if not_covered:
        lines.append(f"so on {' and '.join(not_covered)} greedy speculative decoding may differ from plain greedy "
                     "decoding")
    lines.append(f"at run time: {'; '.join(run_time_conditions(data, [verdict.backend for verdict in verdicts]))}")
    return "\n".join(lines)


def _finding_report(finding: Finding) -> dict:
    return {"what": finding.what, "covered": finding.covered, "reason": finding.reason or None,
            "tensors": len(finding.tensors), "example": finding.tensors[0] if finding.tensors else None,
            "evidence": list(finding.evidence), "note": finding.note or None}


def report(model: Model, verdicts: list[Verdict], data: Coverage) -> dict:
    return {
        "tool": "hiraishin-llama-coverage",
        "version": __version__,
        "model": {"path": str(model.path), "files": [str(part) for part in model.parts],
                  "architecture": model.architecture, "n_layer": model.count("block_count"),
                  "n_expert": model.count("expert_count"), "n_expert_used": model.count("expert_used_count"),
                  "n_tensors": len(model.tensors)},
        "covered": all(verdict.covered for verdict in verdicts),
        "backends": {verdict.backend: {"covered": verdict.covered, "in_this_wheel": verdict.in_wheel,
                                       "findings": [_finding_report(finding) for finding in verdict.findings],
                                       "notes": list(verdict.notes)}
                     for verdict in verdicts},
        "run_time": run_time_conditions(data, [verdict.backend for verdict in verdicts]),
        "data": str(DATA_FILE),
    }


# ---------------------------------------------------------------------------------------------------------
# The line the wheel's llama-server, llama-cli and llama-speculative-simple print at start in batch-invariant mode.

# llama.cpp's options that name the target model, and those that keep every layer off the GPU.
_MODEL_OPTIONS = ("-m", "--model")
_GPU_LAYER_OPTIONS = ("-ngl", "--gpu-layers", "--n-gpu-layers")
_DEVICE_OPTIONS = ("-dev", "--device")
_EXPERTS_ON_CPU_FLAGS = ("-cmoe", "--cpu-moe")
_EXPERT_LAYERS_ON_CPU_OPTIONS = ("-ncmoe", "--n-cpu-moe")
_OVERRIDE_OPTIONS = ("-ot", "--override-tensor")


def _option_values(args: list[str], names: tuple[str, ...]) -> list[str]:
    """The values given to any of ``names`` (``-m X`` and ``--model=X`` alike), in order."""
    values = []
    for index, arg in enumerate(args):
        if arg in names and index + 1 < len(args):
            values.append(args[index + 1])
        else:
            name, equals, value = arg.partition("=")
            if equals and name in names:
                values.append(value)
    return values


def launch_backend(args: list[str], built: Iterable[str]) -> str:
    """The backend a program started with ``args`` computes the model's layers on: CUDA where this wheel has it,
    unless no layer goes to a GPU (``-ngl 0``, ``--device none``)."""
    if "cuda" not in built:
        return "cpu"
    layers = _option_values(args, _GPU_LAYER_OPTIONS)
    devices = _option_values(args, _DEVICE_OPTIONS)
    if (layers and layers[-1].strip() == "0") or (devices and devices[-1].strip().lower() == "none"):
        return "cpu"
    return "cuda"


def experts_on_cpu(args: list[str]) -> bool:
    """Whether ``args`` put expert tensors on the CPU: --cpu-moe, --n-cpu-moe N > 0, or an -ot rule for them."""
    if any(arg in _EXPERTS_ON_CPU_FLAGS for arg in args):
        return True
    if any(value.strip() not in ("", "0") for value in _option_values(args, _EXPERT_LAYERS_ON_CPU_OPTIONS)):
        return True
    rules = [rule for value in _option_values(args, _OVERRIDE_OPTIONS) for rule in value.split(",")]
    return any("exps" in pattern and buffer.strip().upper() == "CPU"
               for pattern, _, buffer in (rule.rpartition("=") for rule in rules))


def launch_line(args: list[str], data: Coverage | None = None, build: Mapping[str, object] | None = None,
                built: Iterable[str] | None = None) -> str | None:
    """One line on whether batch-invariant mode covers the model a program was started with, or None where it names
    no local model file (``-hf``, or none at all). It never stops the program: what it cannot read it says."""
    models = _option_values(args, _MODEL_OPTIONS)
    if not models:
        return None
    path = Path(models[-1])
    built = list(runtime.built_backends() if built is None else built)
    backend = launch_backend(args, built)
    try:
        data = load_coverage() if data is None else data
        model = read_model(path, data)
    except (DataError, InputError) as error:
        return f"coverage of {path} not checked: {error}"
    verdict = judge(model, backend, data, build, built)
    # The notes on experts are there only where this build does not claim them exact on the CPU; here the run's own
    # options say whether they are on the CPU.
    reasons = [f"{problem.described()}: {problem.reason}" for problem in verdict.problems]
    if backend != "cpu" and experts_on_cpu(args):
        expert_notes = {note.text for note in data.backends[backend].notes if note.when == "experts"}
        reasons += [note for note in verdict.notes if note in expert_notes]
    if not reasons:
        return f"batch-invariant mode covers {path.name} on {backend}"
    problems = "; ".join(reasons)
    return (f"batch-invariant mode does NOT cover {path.name} on {backend} ({problems}), so greedy speculative "
            "decoding may differ from plain greedy decoding (hiraishin-llama-coverage MODEL says more)")


def build_parser(prog: str) -> ArgumentParser:
    parser = ArgumentParser(prog=prog, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", type=Path, metavar="MODEL.gguf",
                        help="the model (of a split model, any of its parts, named as llama-gguf-split names them)")
    parser.add_argument("--backend", choices=BACKENDS, default=None,
                        help="judge this backend only (default: every backend this wheel has; this one has "
                             f"{' and '.join(runtime.built_backends())})")
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="also write the report as JSON to PATH")
    return parser


def main(argv: list[str] | None = None, prog: str = "hiraishin-llama-coverage") -> int:
    parser = build_parser(prog)
    args = parser.parse_args(argv)
    if args.json is not None:
        problem = report_path_problem(args.json)
        if problem:
            parser.error(f"--json {args.json}: {problem}")
    try:
        data = load_coverage()
    except DataError as error:
        print(f"{prog}: error: the coverage data cannot be read ({error}); reinstall the wheel", file=sys.stderr)
        return EXIT_USAGE
    try:
        model = read_model(args.model, data)
    except InputError as error:
        print(f"{prog}: error: {args.model}: {error}", file=sys.stderr)
        return EXIT_USAGE
    built = runtime.built_backends()
    backends = [args.backend] if args.backend else [b for b in BACKENDS if b in built and b in data.backends]
    verdicts = [judge(model, backend, data) for backend in backends]
    print(render(model, verdicts, data))
    if args.json is not None:
        try:
            write_report(args.json, report(model, verdicts, data))
        except OSError as error:
            print(f"{prog}: error: --json {args.json}: cannot be written ({(error.strerror or str(error)).lower()})",
                  file=sys.stderr)
            return EXIT_USAGE
    return 0 if all(verdict.covered for verdict in verdicts) else EXIT_NOT_COVERED


if __name__ == "__main__":
    sys.exit(main())
