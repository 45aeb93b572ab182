"""What this machine can build and run: GPU architecture, CUDA compiler."""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass

from . import proc
from .recipe import Recipe


@dataclass(frozen=True)
class Machine:
    compute_capabilities: tuple[str, ...]
    """Of the GPUs nvidia-smi reports, e.g. ("90",)."""

    cuda_major: int | None
    """Of the nvcc on PATH."""


def gpu_compute_capabilities() -> tuple[str, ...]:
    if shutil.which("nvidia-smi") is None:
        return ()
    result = proc.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"], check=False)
    if result.returncode != 0:
        return ()
    return tuple(line.strip().replace(".", "") for line in result.stdout.splitlines() if line.strip())


def nvcc_major() -> int | None:
    if shutil.which("nvcc") is None:
        return None
    match = re.search(r"release (\d+)\.", proc.run(["nvcc", "--version"], check=False).stdout)
    return int(match.group(1)) if match else None


def detect() -> Machine:
    return Machine(gpu_compute_capabilities(), nvcc_major())


def recipe_for(machine: Machine, recipes: list[Recipe]) -> Recipe:
    """The CUDA recipe for this GPU and toolkit, else the CPU recipe."""
    by_name = {recipe.name: recipe for recipe in recipes}
    if machine.cuda_major is not None:
        for capability in machine.compute_capabilities:
            name = f"cu{machine.cuda_major}-sm{capability}"
            if name in by_name:
                return by_name[name]
    return by_name["cpu"]
