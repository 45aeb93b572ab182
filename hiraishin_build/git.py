"""Git, one short function per verb.

Porcelain work that libgit2 cannot do (partial-clone fetches, sparse checkout,
``am``, ``format-patch``) runs the git CLI through :func:`proc.run`. Read-only
questions about objects (does the cache hold this blob? which commit does this
tag name?) go through pygit2, in process: it is fast on thousands of objects
and, unlike the CLI on a partial clone, never starts a network fetch to answer.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import pygit2
from packaging.version import Version

from . import proc, timeouts
from .errors import GitTooOld


# An identity for the commits this tool makes (git am), fixed so that applying
# the same stack twice gives the same commits, whatever the user's settings.
TOOL_IDENTITY = {
    "GIT_COMMITTER_NAME": "hiraishin",
    "GIT_COMMITTER_EMAIL": "hiraishin@localhost",
    "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
}

# User and system configuration must not shape what we write to patches/
# (diff.noprefix, diff.algorithm, format.signOff, core.abbrev, ...).
ISOLATED_CONFIG = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
}


# sparse-checkout --no-cone and partial-clone fetches as used here need this.
MINIMUM_GIT = Version("2.35")


@functools.cache
def require_git() -> Version:
    out = proc.run(["git", "--version"], hint="install git 2.35 or newer").stdout
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", out)
    if not match:
        raise GitTooOld(f"cannot read the git version from {out.strip()!r}")
    found = Version(match.group(0))
    if found < MINIMUM_GIT:
        raise GitTooOld(
            f"git {found} is too old: hiraishin needs git {MINIMUM_GIT} or newer",
            hint="install a newer git (e.g. from your distribution's backports)",
        )
    return found


def git(
    repo: Path | None,
    *args: str,
    env: dict[str, str] | None = None,
    input: str | None = None,
    check: bool = True,
    what: str | None = None,
    hint: str | None = None,
    limit: timeouts.Limit = timeouts.COMMAND,
) -> proc.Completed:
    require_git()
    prefix = ["git"] if repo is None else ["git", "-C", str(repo)]
    return proc.run([*prefix, *args], env=env, input=input, check=check, what=what, hint=hint, limit=limit)


# For commands that reach another repository. Without a terminal prompt, a
# URL that asks for credentials (GitHub answers so for a repository that does
# not exist) fails at once instead of waiting for input no one will type.
NETWORK_ENV = {"GIT_TERMINAL_PROMPT": "0"}
# An HTTP transfer that moves less than 1 kB/s for a minute is given up.
NETWORK_CONFIG = ("-c", "http.lowSpeedLimit=1000", "-c", "http.lowSpeedTime=60")


def init(path: Path, *, bare: bool = False) -> None:
    git(None, "init", "--quiet", *(["--bare"] if bare else []), "--initial-branch=main", str(path))


def config_set(repo: Path, key: str, value: str) -> None:
    git(repo, "config", key, value)


def config_replace_all(repo: Path, key: str, values: Sequence[str]) -> None:
    git(repo, "config", "--unset-all", key, check=False)
    for value in values:
        git(repo, "config", "--add", key, value)


def config_get(repo: Path, key: str) -> str | None:
    result = git(repo, "config", "--get", key, check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def config_get_regexp(repo: Path, pattern: str) -> list[tuple[str, str]]:
    """(key, value) of every setting whose key matches ``pattern``, in file order.

    Git lowercases section and key names in the answer; subsection names
    (a remote's name) keep their case.
    """
    result = git(repo, "config", "--null", "--get-regexp", pattern, check=False)
    items: list[tuple[str, str]] = []
    for record in result.stdout.split("\0"):
        if record:
            key, _, value = record.partition("\n")
            items.append((key, value))
    return items


def config_remove_section(repo: Path, section: str) -> None:
    git(repo, "config", "--remove-section", section, check=False)


def ls_remote(url: str, *, upload_pack: str, what: str, hint: str | None = None) -> list[tuple[str, str]]:
    """(object id, ref name) of what ``url`` advertises for HEAD; a cheap "is it there?".

    ``upload_pack`` is the program a local repository is served by; other
    transports choose their own (git warns if told one).
    """
    service = [f"--upload-pack={upload_pack}"] if url.startswith("file://") else []
    out = git(
        None, *NETWORK_CONFIG, "ls-remote", *service, url, "HEAD",
        env=NETWORK_ENV, limit=timeouts.CONNECT, what=what, hint=hint,
    ).stdout
    return [(line.split("\t")[0], line.split("\t")[1]) for line in out.splitlines() if "\t" in line]


def fetch_as_promisor(
    repo: Path, url: str, refspecs: Sequence[str], *, remote: str, upload_pack: str, what: str,
    hint: str | None = None,
) -> None:
    """A blobless fetch of ``refspecs`` from ``url`` through a remote that
    exists only for this command (``-c``): the configuration file is not
    written, whatever happens, and the pack is kept as a promisor pack, so
    git knows the blobs it leaves out may be fetched later."""
    settings = {
        "url": url,
        "promisor": "true",
        "partialclonefilter": "blob:none",
        "uploadpack": upload_pack,
    }
    config = [arg for key, value in settings.items() for arg in ("-c", f"remote.{remote}.{key}={value}")]
    git(
        repo, *NETWORK_CONFIG, *config,
        "fetch", "--quiet", "--no-write-fetch-head", "--no-tags", "--no-auto-gc", "--recurse-submodules=no",
        "--filter=blob:none", remote, *refspecs,
        env=NETWORK_ENV, what=what, hint=hint, limit=timeouts.NETWORK,
    )


def update_refs(repo: Path, updates: Mapping[str, str | None], *, what: str) -> None:
    """Set (object id) or delete (None) each ref, all or none: one transaction."""
    if not updates:
        return
    commands = "".join(
        f"update {ref} {target}\n" if target is not None else f"delete {ref}\n" for ref, target in updates.items()
    )
    git(repo, "update-ref", "--stdin", input=commands, what=what)


def refs_containing(repo: Path, commit: str, prefixes: Sequence[str]) -> list[str]:
    """Refs under ``prefixes`` from which ``commit`` is reachable."""
    out = git(repo, "for-each-ref", "--contains", commit, "--format=%(refname)", *prefixes).stdout
    return [line for line in out.splitlines() if line]


def fetch_objects(repo: Path, remote: str, object_ids: Iterable[str], *, what: str, hint: str | None = None) -> None:
    """Fetch exactly these objects, the way git's own lazy fetch does."""
    git(
        repo,
        *NETWORK_CONFIG,
        "-c", "fetch.negotiationAlgorithm=noop",
        "fetch", "--quiet", remote, "--no-tags", "--no-write-fetch-head",
        "--recurse-submodules=no", "--filter=blob:none", "--stdin",
        input="".join(f"{oid}\n" for oid in object_ids),
        env=NETWORK_ENV,
        what=what,
        hint=hint,
        limit=timeouts.NETWORK,
    )


def sparse_checkout_set(repo: Path, patterns: Sequence[str]) -> None:
    git(repo, "sparse-checkout", "set", "--no-cone", "--stdin", input="".join(f"{p}\n" for p in patterns))


def checkout_new_branch(repo: Path, branch: str, commit: str) -> None:
    # Without --force: a file that would be overwritten stops the checkout.
    git(repo, "checkout", "--quiet", "--no-guess", "-B", branch, commit, what=f"checking out {commit[:12]}")


def status_porcelain(repo: Path) -> list[str]:
    return [line for line in git(repo, "status", "--porcelain=v1", "--untracked-files=normal").stdout.splitlines() if line]


def rev_parse(repo: Path, rev: str) -> str | None:
    result = git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}", check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def rev_list(repo: Path, base: str, head: str) -> list[str]:
    """Commits in base..head, oldest first; merges are rejected by the caller."""
    out = git(repo, "rev-list", "--reverse", "--parents", f"{base}..{head}").stdout
    return [line for line in out.splitlines() if line]


def update_ref(repo: Path, ref: str, commit: str) -> None:
    git(repo, "update-ref", ref, commit)


def am(repo: Path, patch: Path, *, three_way: bool = True) -> proc.Completed:
    """Apply one format-patch file as a commit.

    ``three_way`` falls back to a merge when the context moved; without it the
    patch must apply as written. --keep-cr: a patch to a CRLF file must keep
    its carriage returns.
    """
    mode = "--3way" if three_way else "--no-3way"
    return git(repo, "am", mode, "--keep-cr", "--quiet", str(patch), env=TOOL_IDENTITY, check=False)


def am_abort(repo: Path) -> None:
    git(repo, "am", "--abort", check=False)


def am_continue(repo: Path) -> proc.Completed:
    return git(repo, "am", "--continue", env=TOOL_IDENTITY, check=False)


def am_in_progress(repo: Path) -> bool:
    # git am keeps its session in rebase-apply/; the "applying" marker tells
    # it apart from an interrupted `git rebase`, which uses the same directory.
    return (repo / ".git" / "rebase-apply" / "applying").is_file()


def unmerged_paths(repo: Path) -> list[str]:
    out = git(repo, "diff", "--name-only", "--diff-filter=U", "-z").stdout
    return sorted({path for path in out.split("\0") if path})


def head_ref(repo: Path) -> str | None:
    """The branch HEAD points to (refs/heads/...), or None when detached."""
    result = git(repo, "symbolic-ref", "--quiet", "HEAD", check=False)
    return result.stdout.strip() if result.returncode == 0 else None


def checkout_force(repo: Path, target: str, *, detach: bool = False) -> None:
    """Switch to ``target`` discarding local changes to tracked files."""
    git(repo, "checkout", "--quiet", "--force", *(["--detach"] if detach else []), target,
        what=f"checking out {target}")


def reset_branch(repo: Path, branch: str, commit: str) -> None:
    """Point ``branch`` at ``commit`` and make it the checked-out, clean branch."""
    git(repo, "checkout", "--quiet", "--force", "--no-guess", "-B", branch, commit,
        what=f"resetting {branch} to {commit[:12]}")


def clean_untracked(repo: Path) -> None:
    """Remove untracked files and directories; ignored ones are kept."""
    git(repo, "clean", "--quiet", "--force", "-d", what="removing untracked files")


def delete_ref(repo: Path, ref: str) -> None:
    git(repo, "update-ref", "-d", ref, check=False)


def index_add_entries(repo: Path, index_file: Path, entries: Iterable[tuple[int, str, str]]) -> None:
    """Write (mode, blob, path) entries into a separate index file."""
    git(
        repo, "update-index", "--index-info",
        input="".join(f"{mode:o} {blob}\t{path}\n" for mode, blob, path in entries),
        env={"GIT_INDEX_FILE": str(index_file)},
    )


def apply_to_index(repo: Path, patch: Path, index_file: Path, *, reverse: bool = False, check_only: bool = False) -> bool:
    """Apply a patch to a separate index file only (no work tree); True if it applies.

    Applying writes the post-image blobs into the object store, which is what
    a later ``git am --3way`` needs to rebuild a patch's base.
    """
    args = ["apply", "--cached", *(["--reverse"] if reverse else []), *(["--check"] if check_only else []), str(patch)]
    return git(repo, *args, env={"GIT_INDEX_FILE": str(index_file)}, check=False).returncode == 0


def rev_list_touching(repo: Path, base: str | None, head: str, paths: Sequence[str]) -> list[str]:
    """Commits in base..head that change any of ``paths``, oldest first.

    Only trees are compared, so on a blobless clone this fetches nothing.
    """
    spec = [f"{base}..{head}"] if base else [head]
    out = git(repo, "rev-list", "--reverse", "--topo-order", *spec, "--", *paths).stdout
    return [line for line in out.splitlines() if line]


# Each flag pins something that would otherwise make a re-export of unchanged
# work differ from the committed file.
FORMAT_PATCH_FLAGS = (
    "--keep-subject",          # no "[PATCH n/m]" that shifts when the stack grows
    "--no-stat",               # diffstat widths depend on the terminal and git version
    "--no-signature",          # the signature defaults to the git version
    "--zero-commit",           # the commit hash changes on every re-apply
    "--full-index",            # abbreviated blob ids grow with the repository
    "--no-renames",            # rename detection is a heuristic that differs between versions
    "--diff-algorithm=myers",  # the algorithm must not come from configuration
    "--indent-heuristic",
    "--unified=3",
    "--no-color",
    "--no-numbered",
    "--no-thread",
    "--src-prefix=a/",
    "--dst-prefix=b/",
    "--encoding=UTF-8",
)


def format_patch(repo: Path, commit: str, out_dir: Path) -> Path:
    """Write one commit as a patch file in ``out_dir`` and return its path."""
    out = git(
        repo,
        "-c", "core.abbrev=40",
        "format-patch", *FORMAT_PATCH_FLAGS, "-1", commit, "-o", str(out_dir),
        env=ISOLATED_CONFIG,
        what=f"exporting commit {commit[:12]}",
    ).stdout.strip().splitlines()
    return Path(out[-1])


def _allow_partial_clones() -> None:
    # libgit2 refuses to open a repository with extensions.partialClone unless
    # told the extension is understood. For reading refs and testing which
    # objects are present it is: an absent blob is simply reported absent.
    allowed = pygit2.option(pygit2.enums.Option.GET_EXTENSIONS)
    if "partialclone" not in allowed:
        pygit2.option(pygit2.enums.Option.SET_EXTENSIONS, ["partialclone"], 1)


class ObjectStore:
    """In-process, read-only view of a repository's refs and objects."""

    def __init__(self, git_dir: Path) -> None:
        _allow_partial_clones()
        self._repo = pygit2.Repository(str(git_dir))

    def has(self, object_id: str) -> bool:
        return pygit2.Oid(hex=object_id) in self._repo.odb

    def commit_exists(self, commit: str) -> bool:
        try:
            obj = self._repo.get(commit)
        except (ValueError, pygit2.GitError):
            return False
        return isinstance(obj, pygit2.Commit)

    def resolve(self, ref: str) -> str | None:
        """The commit a tag, branch, or full or abbreviated hash names, or None."""
        for name in (f"refs/tags/{ref}", f"refs/remotes/origin/{ref}", f"refs/heads/{ref}"):
            reference = self._repo.references.get(name)
            if reference is not None:
                return str(reference.peel(pygit2.Commit).id)
        if len(ref) == 40 and self.commit_exists(ref):
            return ref
        if re.fullmatch(r"[0-9a-f]{7,39}", ref):
            try:
                return str(self._repo.revparse_single(ref).peel(pygit2.Commit).id)
            except (KeyError, ValueError, pygit2.GitError):
                return None
        return None

    def _commit(self, commit: str) -> pygit2.Commit:
        return self._repo[commit].peel(pygit2.Commit)

    def commit_time(self, commit: str) -> int:
        return int(self._commit(commit).commit_time)

    def subject(self, commit: str) -> str:
        return self._commit(commit).message.split("\n", 1)[0].strip()

    def parents(self, commit: str) -> list[str]:
        return [str(oid) for oid in self._commit(commit).parent_ids]

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return ancestor == descendant or bool(self._repo.descendant_of(descendant, ancestor))

    def commit_count(self, commit: str) -> int:
        """Commits in ``commit``'s history, itself included (``git rev-list --count``)."""
        walker = self._repo.walk(self._commit(commit).id, pygit2.enums.SortMode.NONE)
        return sum(1 for _ in walker)

    def merge_base(self, a: str, b: str) -> str | None:
        base = self._repo.merge_base(a, b)
        return str(base) if base is not None else None

    def entry(self, commit: str, path: str) -> tuple[int, str] | None:
        """(file mode, blob id) of ``path`` in ``commit``, or None if absent."""
        try:
            found = self._commit(commit).peel(pygit2.Tree)[path]
        except KeyError:
            return None
        return (int(found.filemode), str(found.id)) if found.type_str == "blob" else None

    def blobs(self, commit: str) -> Iterable[tuple[str, str]]:
        """(path, blob id) of every file in ``commit``; submodules are skipped."""
        for path, oid, _ in self._entries(commit):
            yield path, oid

    def files(self, commit: str, keep: Callable[[str], bool]) -> Iterable[tuple[str, int, bytes]]:
        """(path, git file mode, content) of the blobs in ``commit`` whose path ``keep`` accepts."""
        for path, oid, mode in self._entries(commit):
            if keep(path):
                blob = self._repo[oid]
                assert isinstance(blob, pygit2.Blob)
                yield path, mode, blob.data

    def _entries(self, commit: str) -> Iterable[tuple[str, str, int]]:
        stack: list[tuple[str, pygit2.Tree]] = [("", self._repo[commit].peel(pygit2.Tree))]
        while stack:
            prefix, tree = stack.pop()
            for entry in tree:
                path = prefix + (entry.name or "")
                if entry.type_str == "tree":
                    subtree = self._repo[entry.id]
                    assert isinstance(subtree, pygit2.Tree)
                    stack.append((path + "/", subtree))
                elif entry.type_str == "blob":
                    yield path, str(entry.id), entry.filemode

    def references(self, prefix: str) -> list[tuple[str, str, str | None]]:
        """(name, target, commit) of every ref under ``prefix``: ``target`` is
        what the ref stores (an annotated tag's own object), ``commit`` what it
        peels to, None when that is not a commit (a tag of a tree or blob)."""
        found: list[tuple[str, str, str | None]] = []
        for name in self._repo.references:
            if not name.startswith(prefix):
                continue
            reference = self._repo.references[name].resolve()
            try:
                commit: str | None = str(reference.peel(pygit2.Commit).id)
            except (ValueError, KeyError, pygit2.GitError, pygit2.InvalidSpecError):
                commit = None
            found.append((name, str(reference.target), commit))
        return sorted(found)


def diff_zero_context(repo: Path, old: str, new: str) -> str:
    """The diff old..new without context lines, so each hunk names exactly the lines it removes."""
    return git(repo, "diff", "--unified=0", "--no-renames", "--no-color", "--diff-algorithm=myers",
               "--no-ext-diff", old, new, env=ISOLATED_CONFIG).stdout


def blame_commits(repo: Path, base: str, head: str, path: str, start: int, count: int) -> list[str]:
    """The commit that last wrote each of lines start..start+count-1 of ``path`` at ``head``.

    Lines older than ``base`` name ``base``: the range keeps blame from walking
    history a blobless clone does not hold.
    """
    out = git(repo, "blame", "--porcelain", "-L", f"{start},+{count}", f"{base}..{head}", "--", path,
              env=ISOLATED_CONFIG).stdout
    commits: list[str] = []
    for line in out.splitlines():
        fields = line.split(" ")
        # a line-group header: "<sha> <orig line> <final line> [<count>]"
        if len(fields) in (3, 4) and len(fields[0]) == 40 and all(c in "0123456789abcdef" for c in fields[0]):
            commits.append(fields[0])
    return commits
