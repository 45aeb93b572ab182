"""What a GGUF model is, from its metadata: its architecture, experts and recurrent layers.

Kept apart from _args (which coverage imports) because telling a recurrent model
needs coverage.json's markers: coverage -> _args, modelinfo -> coverage, no cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import coverage


@dataclass(frozen=True)
class ModelKind:
    """What a GGUF model is, from its metadata: enough to tell a mixture-of-experts model from a dense one."""

    architecture: str
    n_expert: int
    """Experts per layer ({architecture}.expert_count); 0 for a dense model."""
    n_expert_used: int
    """Experts each token uses ({architecture}.expert_used_count); 0 for a dense model."""
    recurrent: bool = False
    """It has recurrent layers: a metadata key that coverage.json's recurrent.key_markers name (ssm.*,
    shortconv.*, wkv.*), as hiraishin-llama-coverage finds them."""

    @property
    def is_moe(self) -> bool:
        return self.n_expert > 0


def _field_value(field: object) -> str | int:
    # ReaderField.contents() is not in every gguf release the wheel accepts; parts and data are.
    value = field.parts[field.data[0]]  # type: ignore[attr-defined]
    import gguf

    if field.types and field.types[0] == gguf.GGUFValueType.STRING:  # type: ignore[attr-defined]
        return bytes(value).decode(errors="replace")
    return int(value[0])


def model_kind(path: Path) -> ModelKind | None:
    """The model's architecture and experts, or None when its metadata cannot be read (a file cut short, a
    GGUF version the gguf package does not know): the caller must then not assume the model is dense."""
    import gguf

    try:
        fields = gguf.GGUFReader(path).fields
        architecture = str(_field_value(fields["general.architecture"]))
        counts = [fields.get(f"{architecture}.{key}") for key in ("expert_count", "expert_used_count")]
        n_expert, n_expert_used = (int(_field_value(field)) if field is not None else 0 for field in counts)
    except (OSError, ValueError, KeyError, IndexError, TypeError):
        return None
    try:
        markers = coverage.load_coverage().recurrent_key_markers
    except coverage.DataError:
        return None  # no markers to tell a recurrent model by: judged as the caller judges an unreadable one
    recurrent = any(key.startswith(architecture) and any(marker in key[len(architecture):] for marker in markers)
                    for key in fields)
    return ModelKind(architecture, n_expert, n_expert_used, recurrent)
