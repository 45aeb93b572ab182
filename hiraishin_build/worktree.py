"""The work tree where the stack is applied: a sparse checkout of the pin.

It is a plain git repository whose object store borrows from the upstream
cache (git alternates), so creating one copies no history and needs no network.
A small state file inside its git directory records what the tool last wrote,
so that commits a maintainer made since, and not yet exported, are never
thrown away by a re-apply.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import git, lock
from .cache import UpstreamCache
from .errors import WorkTreeError, WorkTreeLocked
from .fsutil import atomic_write_text
from .log import get_logger
from .sparse import SparseRules

WORK_BRANCH = "hiraishin/work"
BACKUP_REF_PREFIX = "refs/hiraishin/backup/"
STATE_NAME = "hiraishin-state.json"
# The project's lock for every command that writes its work tree or patches/ (apply, export, rebase), in its
# work/ directory; the name is the one rebase has always used, so a rebase and an apply exclude each other.
PROJECT_LOCK_NAME = "hiraishin-rebase.lock"
# How long a stale index.lock of an interrupted apply may take to go away by itself (a git child still finishing).
INDEX_LOCK_GRACE_SECONDS = 5.0


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

    in_progress: str = ""
    """The command that is writing the work tree now ("apply"), written before its first change and cleared
    when it ends: a state that still names one after the command has gone says it was interrupted, and
    that everything in the work tree beyond the base came from patches/ (nothing of a maintainer's)."""


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
                             written=dict(data.get("written", {})), in_progress=str(data.get("in_progress", "")))
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

    def interrupted(self) -> str:
        """The command whose run in this work tree was interrupted ("apply"), or "" when none was."""
        return self.read_state().in_progress if self.is_initialized() else ""

    def clear_debris(self) -> None:
        """What an interrupted `git am` or checkout leaves: its session directory and a stale index lock.

        Only for a work tree whose state says the tool's own command was interrupted, under the project
        lock: no hiraishin process is in it now. A git child of a killed process may still be finishing,
        so an index lock gets a few seconds to go away by itself first.
        """
        index_lock = self.git_dir / "index.lock"
        deadline = time.monotonic() + INDEX_LOCK_GRACE_SECONDS
        while index_lock.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        index_lock.unlink(missing_ok=True)
        shutil.rmtree(self.git_dir / "rebase-apply", ignore_errors=True)

    def prepare(self, cache: UpstreamCache, commit: str, rules: SparseRules, *, force: bool,
                journal: WorkState | None = None) -> None:
        """Make the work tree a clean checkout of ``commit`` on the work branch.

        Refuses uncommitted changes always, and commits made since the tool
        last wrote the branch unless ``force``; with ``force`` the old branch
        head is kept under refs/hiraishin/backup/ so nothing is lost. A work
        tree that an interrupted apply left half-written holds nothing of the
        maintainer's: it is reset without asking. ``journal`` is the state
        written before the first change (the caller's command in progress);
        without it the state says the bare checkout.
        """
        journal = journal or WorkState(base=commit, head=commit)
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
                self.write_state(journal)
                git.checkout_new_branch(self.path, WORK_BRANCH, commit)
            except BaseException:
                # Only what this call made is removed; a pre-existing empty
                # directory is left as it was.
                if created:
                    shutil.rmtree(self.path, ignore_errors=True)
                else:
                    shutil.rmtree(self.git_dir, ignore_errors=True)
                raise
            return
        interrupted = self.interrupted()
        if interrupted:
            get_logger().warning("an interrupted `hiraishin patches %s` left %s half-written; resetting it (its "
                                 "commits all came from patches/, which is untouched)", interrupted, self.path)
            self.clear_debris()
            self.write_state(journal)
            git.sparse_checkout_set(self.path, rules.git_patterns())
            git.reset_branch(self.path, WORK_BRANCH, commit)
            # files a killed `git am` created but did not commit; ignored ones (a build directory) stay
            git.clean_untracked(self.path)
            return
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
        # The journal goes first: a kill during the checkout leaves a state that says so.
        self.write_state(journal)
        git.checkout_new_branch(self.path, WORK_BRANCH, commit)

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


@contextlib.contextmanager
def project_lock(project_root: Path, command: str) -> Iterator[None]:
    """Hold the project's lock while ``command`` writes its work tree or patches/, or refuse at once,
    naming the holder; the lock ends with its process, however it ends."""
    path = project_root / "work" / PROJECT_LOCK_NAME

    def refuse(holder: lock.Holder | None) -> WorkTreeLocked:
        who = holder.describe() if holder else "a process that has not written its name yet"
        return WorkTreeLocked(
            f"another hiraishin command is working in the project {project_root} ({who}); "
            f"`{command}` changed nothing",
            hint="wait for it to finish (or stop it), then run this again; the lock ends with its process, "
                 "so an interrupted command never holds it",
        )

    with lock.exclusive(path, refuse):
        yield

