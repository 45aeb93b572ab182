"""The work tree where the stack is applied: a sparse checkout of the pin.

It is a plain git repository whose object store borrows from the upstream
cache (git alternates), so creating one copies no history and needs no network.
A small state file inside its git directory records what the tool last wrote,
so that commits a maintainer made since, and not yet exported, are never
thrown away by a re-apply.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import git
from .cache import UpstreamCache
from .errors import WorkTreeError
from .fsutil import atomic_write_text
from .log import get_logger
from .sparse import SparseRules

WORK_BRANCH = "hiraishin/work"
BACKUP_REF_PREFIX = "refs/hiraishin/backup/"
STATE_NAME = "hiraishin-state.json"


@dataclass(frozen=True)
class WorkState:
    base: str
    """The upstream commit the work branch starts from."""

    head: str
    """The work branch's commit when the tool last applied or exported the stack."""

    missing: tuple[str, ...] = ()
    """Patches of the series the work branch lacks: the one that did not apply and every one after it.
    An export of such a branch would delete them from patches/, so export refuses it."""

    written: dict[str, str] = field(default_factory=dict)
    """sha256 of each file of patches/ (series included) as the tool last applied or wrote it, so that an
    export notices a file edited by hand since, instead of overwriting it."""


class WorkTree:
    def __init__(self, path: Path) -> None:
        self.path = path

    @property
    def git_dir(self) -> Path:
        return self.path / ".git"

    @property
    def state_file(self) -> Path:
        return self.git_dir / STATE_NAME

    def is_initialized(self) -> bool:
        return self.state_file.is_file()

    def read_state(self) -> WorkState:
        if not self.is_initialized():
            raise WorkTreeError(
                f"{self.path} is not a hiraishin work tree",
                hint="create it with `hiraishin patches apply --workdir DIR`",
            )
        try:
            data = json.loads(self.state_file.read_text(encoding="utf-8"))
            # states written before `missing` and `written` were recorded lack them
            return WorkState(base=data["base"], head=data["head"], missing=tuple(data.get("missing", ())),
                             written=dict(data.get("written", {})))
        except (ValueError, KeyError, TypeError) as exc:
            raise WorkTreeError(
                f"{self.state_file}: unreadable state ({exc})",
                hint="move the work tree aside and run `hiraishin patches apply` again",
            ) from None

    def write_state(self, state: WorkState) -> None:
        atomic_write_text(self.state_file, json.dumps(asdict(state), indent=2) + "\n")

    def head(self) -> str:
        commit = git.rev_parse(self.path, "HEAD")
        if commit is None:
            raise WorkTreeError(f"{self.path}: the work branch has no commit")
        return commit

    def uncommitted_changes(self) -> list[str]:
        return git.status_porcelain(self.path)

    def refuse_if_dirty(self, action: str) -> None:
        changes = self.uncommitted_changes()
        if changes:
            shown = "\n".join(f"    {line}" for line in changes[:10])
            more = f"\n    ... and {len(changes) - 10} more" if len(changes) > 10 else ""
            raise WorkTreeError(
                f"{self.path} has uncommitted changes; refusing to {action}:\n{shown}{more}",
                hint="commit them (then `hiraishin patches export`) or stash them; nothing was changed",
            )

    def unexported_commits(self) -> bool:
        return self.head() != self.read_state().head

    def prepare(self, cache: UpstreamCache, commit: str, rules: SparseRules, *, force: bool) -> None:
        """Make the work tree a clean checkout of ``commit`` on the work branch.

        Refuses uncommitted changes always, and commits made since the tool
        last wrote the branch unless ``force``; with ``force`` the old branch
        head is kept under refs/hiraishin/backup/ so nothing is lost.
        """
        if self.path.exists() and not self.is_initialized():
            if any(self.path.iterdir()):
                raise WorkTreeError(
                    f"{self.path} exists and is not a hiraishin work tree; refusing to touch it",
                    hint="pass another --workdir, or move that directory aside",
                )
        if not self.is_initialized():
            created = not self.path.exists()
            try:
                self._create(cache, rules)
                git.checkout_new_branch(self.path, WORK_BRANCH, commit)
            except BaseException:
                # Only what this call made is removed; a pre-existing empty
                # directory is left as it was.
                if created:
                    shutil.rmtree(self.path, ignore_errors=True)
                else:
                    shutil.rmtree(self.git_dir, ignore_errors=True)
                raise
            self.write_state(WorkState(base=commit, head=commit))
            return
        else:
            self.refuse_if_dirty("reset the work branch")
            if self.unexported_commits():
                if not force:
                    raise WorkTreeError(
                        f"{self.path}: the work branch has commits that are not in patches/ "
                        f"(HEAD {self.head()[:12]}, last written {self.read_state().head[:12]})",
                        hint="run `hiraishin patches export` to keep them, or pass --force "
                        "(the old branch is then kept under refs/hiraishin/backup/)",
                    )
                backup = f"{BACKUP_REF_PREFIX}{self.head()}"
                git.update_ref(self.path, backup, self.head())
                get_logger().warning("kept the previous work branch as %s", backup)
            git.sparse_checkout_set(self.path, rules.git_patterns())
        git.checkout_new_branch(self.path, WORK_BRANCH, commit)
        self.write_state(WorkState(base=commit, head=commit))

    def _create(self, cache: UpstreamCache, rules: SparseRules) -> None:
        get_logger().info("creating work tree %s", self.path)
        self.path.mkdir(parents=True, exist_ok=True)
        git.init(self.path)
        (self.git_dir / "objects" / "info" / "alternates").write_text(f"{cache.objects_dir}\n", encoding="utf-8")
        # The index lists the excluded files too, and their blobs are absent.
        # git writes such trees (commit, am) only in a partial clone, so the
        # cache is registered as this repository's promisor remote. Nothing is
        # ever fetched from it: the needed blobs are already reachable through
        # the alternates.
        git.config_set(self.path, "core.repositoryformatversion", "1")
        git.config_set(self.path, "extensions.partialClone", "upstream")
        git.config_set(self.path, "remote.upstream.url", str(cache.git_dir))
        git.config_set(self.path, "remote.upstream.promisor", "true")
        git.config_set(self.path, "remote.upstream.fetch", "+refs/tags/*:refs/tags/*")
        git.sparse_checkout_set(self.path, rules.git_patterns())
