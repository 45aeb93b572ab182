"""The ``hiraishin`` command line: a thin layer over the library.

Only this module turns errors into messages and exit codes (see errors.py).
"""

from __future__ import annotations

import hashlib
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import click
from rich.markup import escape

from . import __version__, log, proc
from . import rebase as rebasing, report, tags
from .cache import CACHE_ENV, UpstreamCache
from .errors import HiraishinError, PathError, UpstreamError
from .fsutil import writable_directory
from .guard import KeptGroup
from .project import Project
from .recipe import find_recipe, load_recipes
from .sdist import build_sdist
from .series import read_series
from .sources import NAME_RULE, display_location, name_is_valid, same_repository, url_problem
from .smoke import PYPI, SmokeFailed, smoke_wheel
from .stack import apply_stack, check_stack, export_stack, load_stack
from .worktree import project_lock
from .wheelbuild import WheelResult, build_wheel


@dataclass
class Context:
    project_dir: Path | None
    cache_dir: Path | None

    def project(self) -> Project:
        return Project.find(self.project_dir)

    def cache(self) -> UpstreamCache:
        return UpstreamCache(self.cache_dir)


pass_context = click.make_pass_decorator(Context)


@click.group(cls=KeptGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="hiraishin")
@click.option("-v", "--verbose", count=True, help="Show every command run (-v).")
@click.option("--debug", is_flag=True, help="Show a traceback on errors.")
@click.option("--project", "project_dir", type=click.Path(file_okay=False, path_type=Path),
              help="The hiraishin-llama checkout (default: found from the current directory).")
@click.option("--cache-dir", type=click.Path(file_okay=False, path_type=Path), envvar="HIRAISHIN_CACHE_DIR",
              help="The upstream cache directory (env HIRAISHIN_CACHE_DIR; default: the user cache directory).")
@click.pass_context
def cli(ctx: click.Context, verbose: int, debug: bool, project_dir: Path | None, cache_dir: Path | None) -> None:
    """Keep the batch-invariant patch stack on llama.cpp and build its wheels."""
    log.configure(verbose)
    ctx.obj = Context(project_dir, cache_dir.resolve() if cache_dir else None)


# -- upstream ---------------------------------------------------------------

@cli.group()
def upstream() -> None:
    """The pinned upstream and its local cache."""


def _upstream_cache(obj: Context) -> UpstreamCache:
    """The cache, told whether the option or the variable chose its directory (named if it is unusable)."""
    chosen = click.get_current_context().find_root().get_parameter_source("cache_dir")
    given_as = {click.core.ParameterSource.ENVIRONMENT: CACHE_ENV,
                click.core.ParameterSource.COMMANDLINE: "--cache-dir"}.get(chosen) if chosen else None
    return UpstreamCache(obj.cache_dir, given_as=given_as)


def _source_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # A name that can never be a source's is a usage error (exit 2), not a state of the cache.
    if value is not None and not name_is_valid(value):
        raise click.BadParameter(f"'{value}' cannot name a source: use {NAME_RULE}", ctx=ctx, param=param)
    return value


def _non_empty(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # An empty value would read as "not given" (the default) or as the current directory: refuse it.
    if value is not None and not value.strip():
        raise click.BadParameter("empty: give a value, or leave the option out for its default", ctx=ctx, param=param)
    return value


def _non_empty_path(ctx: click.Context, param: click.Parameter, value: str | None) -> Path | None:
    # click would make Path("") of "", which is the current directory.
    return Path(value) if _non_empty(ctx, param, value) is not None else None


def _repository_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    problem = url_problem(value) if value is not None else None
    if problem:
        raise click.BadParameter(
            f"{value!r} is not a repository URL git understands: {problem}; give scheme://host/path "
            "(e.g. https://github.com/OWNER/NAME.git) or [user@]host:path", ctx=ctx, param=param)
    return value


@upstream.command("fetch")
@click.option("--from", "location", metavar="PATH_OR_URL", callback=_non_empty,
              help="Fetch from this repository: the pin's, a fork, or a local mirror of either "
                   "(default: the pin's url, or with --name, where that source was fetched from last).")
@click.option("--url", metavar="URL", callback=_repository_url,
              help="With --from a mirror: the repository it mirrors, as scheme://host/path or [user@]host:path "
                   "(file:///path for one on this machine). The pin records it when a rebase moves onto one of "
                   "this source's tags (default: what the source was recorded to stand for; the pin's url for a "
                   "mirror that has the pinned tag at the pinned commit; else the --from location itself).")
@click.option("--name", metavar="NAME", callback=_source_name,
              help="The source's name (default: the source that stands for the same repository, else one made "
                   "from its url, e.g. AtomicBot-ai-atomic-llama-cpp-turboquant). Without --from: fetch that "
                   "source again.")
@pass_context
def upstream_fetch(obj: Context, location: str | None, url: str | None, name: str | None) -> None:
    """Fetch a source's commits, trees, tags and branches into the cache, then check the pin.

    The cache holds several sources (the pin's repository, forks, mirrors), each
    with its own tags: fetching one never removes another's. `upstream tags`
    names each tag's source; `rebase --onto` takes a tag of any of them and moves
    the pin's url to the repository that tag came from.

    Nothing is written unless what came checks out: a repository said or taken to
    be the pin's must have the pinned ref at the pinned commit, and any other
    must hold the pinned commit (a fork) or be asked for by --name. A refused
    fetch leaves the cache as it was.
    """
    project, cache = obj.project(), _upstream_cache(obj)
    pin = project.pin()
    if url and not location:
        raise click.UsageError("--url goes with --from PATH_OR_URL (the mirror it describes)")
    cache.require_writable()
    with log.step(f"fetching into {cache.git_dir}"):
        if location is None and name is not None:
            result = cache.refetch(name, pin)
        else:
            result = cache.fetch(location or pin.url, pin, name=name, url=url)
    source = result.source
    changes = ", ".join(part for part in (
        f"{len(result.added)} new" if result.added else "",
        f"{len(result.removed)} gone" if result.removed else "",
        f"{len(result.moved)} moved" if result.moved else "",
    ) if part)
    click.echo(f"source {source.name}: {source.describe()}")
    click.echo(f"  {result.tags} tag(s){f' ({changes})' if changes else ''}, {result.branches} branch(es)"
               + ("" if result.has_pin_commit else f"; it does not have the pinned commit {pin.short}"))
    try:
        check = cache.verify(pin)
    except UpstreamError as exc:
        if same_repository(source.url, pin.url):
            raise
        # Another repository than the pin's was fetched and recorded: that went well (a fetch that
        # would not is refused before it writes), but the pin's own repository is not in the cache
        # yet to vouch for the pin.
        click.echo(f"note: {exc.message}\n  hint: {exc.hint}", err=True)
        return
    click.echo(f"pin: {pin.ref} = {pin.commit} (in {', '.join(check.sources)})")


@upstream.command("verify")
@pass_context
def upstream_verify(obj: Context) -> None:
    """Check that the pinned ref still names the pinned commit (offline)."""
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    check = cache.verify(pin)
    where = f"in {', '.join(check.sources)}" if check.sources else "in the cache; no source's tag or branch contains it"
    click.echo(f"ok: {pin.ref} = {pin.commit} ({where})")


@upstream.command("show")
@pass_context
def upstream_show(obj: Context) -> None:
    """Print the pin and the state of the cache."""
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    click.echo(f"pin file:  {project.pin_file}")
    click.echo(f"url:       {pin.url}")
    click.echo(f"ref:       {pin.ref}")
    click.echo(f"commit:    {pin.commit}")
    click.echo(f"cache:     {cache.git_dir}")
    if not cache.exists():
        click.echo("cached:    no (run `hiraishin upstream fetch`)")
        return
    store = cache.store()
    if not store.commit_exists(pin.commit):
        click.echo("cached:    no, the cache lacks the pinned commit (run `hiraishin upstream fetch`)")
    else:
        missing = len(cache.missing_blobs(pin.commit, pin.checkout))
        click.echo("cached:    yes" + (f", but {missing} file(s) still to fetch" if missing else ", complete"))
    table = cache.refs()
    found = None if pin.ref == pin.commit else table.lookup(pin.ref)
    if pin.ref == pin.commit:
        state = "the commit itself (nothing to move)"
    elif found is None:
        state = "absent (no source has it)"
    else:
        # Another repository's tag of the same name is its own, not a move, once the pin's repository has one.
        own = {name for name in found[1] if same_repository(table.sources[name].url, pin.url)}

        def said(name: str, commit: str) -> str:
            if commit == pin.commit:
                return f"matches the pin in {name}"
            return f"its own, at {commit}, in {name}" if own and name not in own else f"MOVED to {commit} in {name}"

        state = "; ".join(said(name, commit) for name, commit in sorted(found[1].items()))
    click.echo(f"ref state: {state}")
    click.echo("sources:" + ("   none" if not table.sources else ""))
    for source in table.sources.values():
        own = " (the pin's repository)" if same_repository(source.url, pin.url) else ""
        click.echo(f"  {source.name}: {len(table.tags(source.name))} tag(s){own}")
        click.echo(f"    url:     {source.url or '(unknown: its remote was removed)'}")
        if source.mirrored and source.location:
            click.echo(f"    fetched from: {display_location(source.location)}")


@upstream.command("tags")
@click.option("--since", metavar="REF", help="List the tags newer than REF instead of the pin.")
@click.option("--source", "source_name", metavar="NAME", callback=_source_name, help="Only this source's tags.")
@pass_context
def upstream_tags(obj: Context, since: str | None, source_name: str | None) -> None:
    """The tags in the cache newer than the pin, oldest first, with the sources that have them.

    A tag that two sources give different commits is listed once per commit, as
    SOURCE/TAG, which is also how `rebase --onto` takes it.
    """
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    table = cache.refs()
    if source_name is not None:
        table.source(source_name)
    if since is None:
        name, commit = pin.ref, pin.commit
    else:
        resolved = tags.resolve(table, since)
        name, commit = resolved.name, resolved.commit
    found = tags.newer_than(table, name, commit, source=source_name)
    if not found:
        click.echo(f"no tag in the cache is newer than {name} ({commit[:12]}); `hiraishin upstream fetch` brings new ones")
        return
    click.echo(f"{len(found)} tag(s) newer than {name} ({commit[:12]}), oldest first:")
    rows = [(placed.tag.label, f"b{placed.tag.build}" if placed.tag.build is not None else "-", str(placed.tag.date),
             placed.tag.commit[:12], "descendant" if placed.relation is tags.Relation.NEWER else "diverged, later",
             ", ".join(placed.tag.sources) + ("  (sources disagree on this tag)" if placed.tag.disputed else ""))
            for placed in found]
    click.echo("\n".join(f"  {line}" for line in log.table_lines(rows)))


@upstream.command("remove")
@click.argument("source_name", metavar="SOURCE", callback=_source_name)
@click.option("--force", is_flag=True,
              help="Remove it even when it is the only source with the pinned commit (the cache then cannot "
                   "check out the pin until another is fetched).")
@pass_context
def upstream_remove(obj: Context, source_name: str, force: bool) -> None:
    """Remove a source from the cache: its remote, its settings and its tags and branches.

    The commits and file contents it brought stay in the cache, so fetching it
    again is cheap; the command prints how (`upstream fetch --from <where it was
    fetched from> --name SOURCE`). The only source that holds the pinned commit
    is kept unless --force. One fetch or removal runs in a cache at a time.
    """
    project, cache = obj.project(), _upstream_cache(obj)
    pin = project.pin()
    removed = cache.remove(source_name, pin, force=force)
    source = removed.source
    click.echo(f"removed the source {source.name}: "
               + (source.describe() if source.url else "(no url recorded: its remote had been removed)"))
    click.echo(f"  {removed.tags} tag(s) and {removed.branches} branch(es) gone; its objects stay in the cache")
    for warning in removed.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"to get it back: {removed.fetch_again}")


# -- patches ----------------------------------------------------------------

workdir_option = click.option(
    "--workdir", type=click.Path(file_okay=False, path_type=Path),
    help="The work tree (default: work/llama.cpp in the project).",
)


@cli.group()
def patches() -> None:
    """The ordered patch stack in patches/."""


@patches.command("list")
@pass_context
def patches_list(obj: Context) -> None:
    """Show the stack: order, subject and files each patch touches."""
    project = obj.project()
    _, stack, _ = load_stack(project)
    for number, patch in enumerate(stack, start=1):
        click.echo(f"{number:>2}. {patch.name}")
        click.echo(f"    {patch.subject}")
        for file in patch.files:
            click.echo(f"      {file}")


@patches.command("apply")
@workdir_option
@click.option("--force", is_flag=True,
              help="Reset a work branch with unexported commits (they are kept under refs/hiraishin/backup/).")
@pass_context
def patches_apply(obj: Context, workdir: Path | None, force: bool) -> None:
    """Check out the pin and apply every patch as a commit (git am -3)."""
    project = obj.project()
    target = (workdir or project.default_workdir).resolve()
    writable_directory(target if target.exists() else target.parent, what="the work tree's directory",
                       given_as="--workdir")
    with project_lock(project.root, "hiraishin patches apply"), log.step(f"applying the stack in {target}"):
        result = apply_stack(project, obj.cache(), target, force=force)
    click.echo(f"applied {len(result.applied)} patch(es) on {result.base[:12]} in {target}")


@patches.command("export")
@workdir_option
@click.option("--overwrite", is_flag=True,
              help="Replace files of patches/ edited by hand since `patches apply` with the work branch's version "
                   "(without it such an edit stops the export).")
@pass_context
def patches_export(obj: Context, workdir: Path | None, overwrite: bool) -> None:
    """Write patches/ back from the work branch (deterministic).

    Refuses a work branch that does not hold the whole stack (after an apply that stopped at a patch, or
    during a stopped rebase, whose `--continue` writes patches/ itself), and files of patches/ edited by
    hand since they were applied, unless --overwrite: patches/ is never left without patches it had.
    """
    project = obj.project()
    target = (workdir or project.default_workdir).resolve()
    with project_lock(project.root, "hiraishin patches export"):
        result = export_stack(project, target, overwrite_edits=overwrite)
    for name, change in result.changes.items():
        click.echo(f"{change.value:>9}  {name}")
    if result.series_changed:
        click.echo(f"{'changed':>9}  series")
    click.echo("patches/ updated" if result.changed else "patches/ unchanged")


@patches.command("check")
@pass_context
def patches_check(obj: Context) -> None:
    """Apply and re-export in a temporary place; fail on any difference."""
    project = obj.project()
    started = time.monotonic()
    result = check_stack(project, obj.cache())
    click.echo(
        f"ok: {len(result.patches)} patch(es) apply without fuzz and re-export byte-identical "
        f"({time.monotonic() - started:.1f} s)"
    )


# -- wheels -----------------------------------------------------------------

@cli.command("recipes")
@pass_context
def recipes_command(obj: Context) -> None:
    """List the wheel recipes."""
    project = obj.project()
    rows: list[tuple[str, str]] = []
    for recipe in load_recipes(project.recipes_dir):
        needs = "a C/C++ compiler, cmake, ninja"
        if recipe.backend == "cuda":
            major, minor = recipe.min_cuda or (recipe.cuda_major, 0)
            needs += f", CUDA {recipe.cuda_major} nvcc" + (f" ({major}.{minor} or newer)" if minor else "")
            needs += f"; runs with the [{recipe.extra}] extra"
        arch = f" [{', '.join(recipe.architectures)}]" if recipe.architectures else ""
        rows += [(recipe.name, f"{recipe.description}{arch}"), ("", f"needs: {needs}"),
                 ("", f"size budget: {recipe.size_budget_mb:g} MB; version label +{recipe.variant}")]
    click.echo("\n".join(log.table_lines(rows)))


@cli.command("sdist")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), callback=_non_empty_path,
              help="Where to write it (default: dist/ in the project; dist/without-NAME/ with --without).")
@click.option("--without", "omit", multiple=True, metavar="PATCH",
              help="Leave this patch out (repeatable): a build that shows what the patch fixes, not for release.")
@pass_context
@proc.stopping_on_signals()
def sdist_command(obj: Context, out_dir: Path | None, omit: tuple[str, ...]) -> None:
    """Write the reproducible source distribution: patched upstream + wheels/."""
    project = obj.project()
    default = project.dist_dir
    if omit:
        series = read_series(project.patches_dir)
        # Checked before any directory is made for the build.
        _require_listed(omit, series.names, f"{project.patches_dir.name}/{series.series_file.name}")
        default = default / _without_dir_name(omit, series.names)
    target = writable_directory((out_dir or default).resolve(), what="the sdist's output directory",
                                given_as="--out" if out_dir else "--out (its default is dist/ in the project)")
    with log.step("making the sdist"):
        result = build_sdist(project, obj.cache(), target, omit=frozenset(omit))
    click.echo(f"{result.path}\nsha256 {result.sha256}  version {result.version}  {result.files} files")


def _require_listed(omit: tuple[str, ...], series: tuple[str, ...], shown: str) -> None:
    """--without names patches of the series: a usage error (exit 2) otherwise, with the closest name."""
    import difflib

    for name in omit:
        if name not in series:
            close = difflib.get_close_matches(name, series, n=1)
            raise click.BadParameter(
                f"'{name}' is not in {shown}" + (f"; did you mean '{close[0]}'?" if close else "")
                + " (`hiraishin patches list` shows the stack)", param_hint="'--without'")


def _without_dir_name(omit: tuple[str, ...], series: tuple[str, ...]) -> str:
    """dist/ subdirectory of an sdist built without some patches: named after them while that
    stays a usable file name, ``stock`` without any, else a count and a digest of the names."""
    names = sorted(set(name.removesuffix(".patch") for name in omit))
    if set(omit) >= set(series):
        return "stock"
    joined = "without-" + "+".join(names)
    if len(joined) <= 120:
        return joined
    digest = hashlib.sha256("\n".join(names).encode()).hexdigest()[:8]
    return f"without-{len(names)}-patches-{digest}"


def _wheel(project: Project, cache: UpstreamCache, recipe_name: str, sdist: Path | None,
           isolated: bool, jobs: int | None, extra_defines: Mapping[str, str] | None = None,
           manylinux: str = "auto") -> WheelResult:
    from . import doctor, timeouts, wheelbuild

    recipe = find_recipe(project.recipes_dir, recipe_name)
    # Refused before the sdist is made: it takes minutes, and this machine may lack nvcc or cuBLAS (exit 11),
    # a define may clash with the recipe's, a time limit may be malformed, an output directory unwritable.
    toolchain = doctor.detect()
    doctor.require_buildable(recipe, toolchain)
    build_dir = project.root / "build" / recipe.name
    wheelbuild.config_settings(recipe, build_dir, extra_defines)
    timeouts.check_settings(timeouts.BUILD, timeouts.COMMAND)
    # Wheels go beside their sdist: a fault build's (dist/without-NAME/) never mixes with releases.
    sdist_dir = sdist.resolve().parent if sdist is not None else project.dist_dir.resolve()
    wheelbuild.check_output_paths(sdist_dir / "wheels" / recipe.name, build_dir)
    if sdist is None:
        with log.step("making the sdist"):
            sdist = build_sdist(project, cache, project.dist_dir).path
    out_dir = sdist.resolve().parent / "wheels" / recipe.name
    with log.step(f"building the {recipe.name} wheel"):
        return build_wheel(sdist.resolve(), recipe, out_dir, build_dir=build_dir, isolated=isolated, jobs=jobs,
                           extra_defines=extra_defines, toolchain=toolchain, manylinux=manylinux)


def _parse_defines(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    defines: dict[str, str] = {}
    for value in values:
        key, sep, setting = value.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key):
            raise click.BadParameter(f"{value!r} is not KEY=VALUE with a CMake variable name as KEY, "
                                     "e.g. -D HIRAISHIN_BUILD_TESTS=ON", ctx=ctx, param=param)
        defines[key] = setting
    return defines


isolation_option = click.option(
    "--no-build-isolation", "no_isolation", is_flag=True,
    help="Build with the build tools already installed (scikit-build-core, cmake, ninja) instead of fetching them.",
)
jobs_option = click.option("-j", "--jobs", type=click.IntRange(min=1), metavar="N",
                           help="Parallel build jobs (default: all cores).")
manylinux_option = click.option(
    "--manylinux", type=click.Choice(["auto", "recipe", "host"]), default="auto", show_default=True,
    help="The glibc floor the wheel is held to: the recipe's `manylinux` (a wheel that needs a newer glibc or "
         "libstdc++ symbol fails the build, naming it), this machine's glibc, or auto: the recipe's where this "
         "machine's glibc is at or below it (a manylinux image), else this machine's, with a warning.")


@cli.command("wheel")
@click.option("--recipe", "recipe_name", required=True, help="A recipe in recipes/ (see `hiraishin recipes`).")
@click.option("--sdist", type=click.Path(exists=True, path_type=Path),
              help="Build from this sdist, or the directory it unpacks to, which then keeps the sources of an "
                   "incremental rebuild; a build directory made from other sources is cleared first "
                   "(default: make one first).")
@isolation_option
@jobs_option
@manylinux_option
@click.option("-D", "--cmake-define", "cmake_defines", multiple=True, metavar="KEY=VALUE", callback=_parse_defines,
              help="An extra CMake define on top of the recipe's (repeatable), e.g. HIRAISHIN_BUILD_TESTS=ON "
                   "to also build upstream's op tests in the build directory.")
@pass_context
@proc.stopping_on_signals()
def wheel_command(obj: Context, recipe_name: str, sdist: Path | None, no_isolation: bool, jobs: int | None,
                  manylinux: str, cmake_defines: dict[str, str]) -> None:
    """Build a wheel from the sdist with a recipe's CMake defines."""
    result = _wheel(obj.project(), obj.cache(), recipe_name, sdist, not no_isolation, jobs, cmake_defines, manylinux)
    click.echo(f"{result.path}  ({result.size / 1e6:.1f} MB, version {result.version}, {', '.join(result.tags)})")


def _gguf_model(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    from .smoke import gguf_problem

    problem = gguf_problem(value) if value is not None else None
    if problem:
        raise click.BadParameter(f"{value} {problem}; pass a .gguf model file", ctx=ctx, param=param)
    return value


@cli.command("smoke", context_settings={"ignore_unknown_options": True})
@click.argument("wheel", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--system-site-packages", is_flag=True, help="Let the venv see the system's packages (e.g. NVIDIA runtime wheels).")
@click.option("--find-links", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="Install the wheel's dependencies from this directory only (no index).")
@click.option("--from-index", is_flag=True,
              help="Install as a user does: hiraishin-llama[<extra>]==<version> from the wheel's own index.")
@click.option("--deps-index", metavar="URL", default=PYPI, show_default=True, envvar="HIRAISHIN_DEPS_INDEX",
              help="With --from-index and no --find-links: where the dependencies come from.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), help="Where the venv and report go.")
@click.option("--serve-model", type=click.Path(dir_okay=False, exists=True, path_type=Path), callback=_gguf_model,
              help="Also start the wheel's llama-server with this GGUF and ask it one completion.")
@click.argument("smoke_args", nargs=-1, type=click.UNPROCESSED)
@pass_context
@proc.stopping_on_signals()
def smoke_command(obj: Context, wheel: Path, system_site_packages: bool, find_links: Path | None, from_index: bool,
                  deps_index: str, out_dir: Path | None, serve_model: Path | None, smoke_args: tuple[str, ...]) -> None:
    """Install WHEEL in a fresh venv and run hiraishin-llama-smoke (extra args after --)."""
    target = (out_dir or wheel.parent / "smoke").resolve()
    result = smoke_wheel(wheel.resolve(), target, system_site_packages=system_site_packages, find_links=find_links,
                         from_index=from_index, deps_index=deps_index, smoke_args=smoke_args, serve_model=serve_model)
    if result.refused is not None:
        # Its arguments are the user's (after --): a usage error, as the program itself says (exit 2). It points
        # to its own --help, but it runs in the smoke venv, not on the user's PATH.
        said = result.refused.removesuffix(" (see hiraishin-llama-smoke --help)")
        raise click.UsageError(f"hiraishin-llama-smoke refused to run: {said}; "
                               "`hiraishin smoke WHEEL -- --help` lists its options")
    click.echo(f"smoke report: {result.report_path}")
    if not result.passed:
        raise SmokeFailed(f"the smoke test failed; report: {result.report_path}")


@cli.command("doctor")
@click.option("--recipe", "recipe_name", help="Check only this recipe; exit 11 when this machine cannot build it.")
@pass_context
def doctor_command(obj: Context, recipe_name: str | None) -> None:
    """The build toolchain here (compilers, cmake, ninja, nvcc, CUDA libraries, GPU) and which recipes it builds."""
    from . import doctor

    project = obj.project()
    recipes = [find_recipe(project.recipes_dir, recipe_name)] if recipe_name else load_recipes(project.recipes_dir)
    env = doctor.detect()
    verdicts = [doctor.check_recipe(recipe, env) for recipe in recipes]
    click.echo("\n".join(doctor.report_lines(env, verdicts)))
    if recipe_name:
        doctor.require_buildable(recipes[0], env)


def _directory_url(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--assets-url and --site-url: an http(s) URL of a directory, or a usage error (exit 2)."""
    from .errors import IndexBuildError
    from .index import SITE_URL_EXAMPLE, directory_url, release_assets_url

    if value is None:
        return None
    try:
        if param.name == "assets_url":
            release_assets_url(value)
        else:
            directory_url(value, f"--{(param.name or '').replace('_', '-')}", SITE_URL_EXAMPLE)
    except IndexBuildError as error:
        raise click.BadParameter(f"{value!r} is not an http(s) URL of a directory; {error.hint}", ctx=ctx,
                                 param=param) from None
    return value


@cli.command("index")
@click.argument("wheel_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--out", "site", required=True, type=click.Path(file_okay=False), callback=_non_empty_path,
              help="The site: SITE/<variant>/simple/ per variant (wheels already there are kept).")
@click.option("--deps-index", metavar="URL", default=PYPI, show_default=True, envvar="HIRAISHIN_DEPS_INDEX",
              help="Where the wheels' dependencies come from, in the install commands printed.")
@click.option("--assets-url", metavar="URL", callback=_directory_url,
              help="Link the new wheels at URL/FILE (the release's assets, e.g. https://github.com/OWNER/REPO/"
                   "releases/download/TAG) instead of copying them into the site; earlier releases stay listed "
                   "from SITE/index.json.")
@click.option("--assets-out", type=click.Path(file_okay=False), callback=_non_empty_path,
              help="With --assets-url: where to write the files to upload there (the wheels and their .metadata).")
@click.option("--site-url", metavar="URL", envvar="HIRAISHIN_SITE_URL", callback=_directory_url,
              help="Where the site will be served (e.g. https://OWNER.github.io/REPO), for the install commands of "
                   "its root page; kept in SITE/index.json for later runs.")
@proc.stopping_on_signals()
def index_command(wheel_dir: Path, site: Path, deps_index: str, assets_url: str | None,
                  assets_out: Path | None, site_url: str | None) -> None:
    """PEP 503 indexes per variant from the labelled wheels under WHEEL_DIR."""
    from .index import build_index, install_command

    if (assets_url is None) != (assets_out is None):
        missing = "--assets-out" if assets_url else "--assets-url"
        raise click.UsageError(f"--assets-url and --assets-out go together ({missing} is missing): give both, where "
                               "the release's assets will be and where to write them for upload, or neither to keep "
                               "the wheels in the site")
    result = build_index(wheel_dir.resolve(), site.resolve(), deps_index=deps_index, assets_url=assets_url,
                         assets_out=assets_out.resolve() if assets_out else None, site_url=site_url)
    for reason in result.skipped:
        click.echo(f"skipped: {reason}", err=True)
    for variant, wheels in result.variants.items():
        url = f"{result.site_url}/{variant}/simple" if result.site_url else (result.site / variant / "simple").as_uri()
        click.echo(f"{variant:<12} {len(wheels)} wheel(s): {install_command(wheels, url, deps_index)}")
    if result.variants_json:
        click.echo(f"variant metadata (draft PEP 825): {result.variants_json}")


def _release_version(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from packaging.version import InvalidVersion, Version

    try:
        Version(value)
    except InvalidVersion:
        raise click.BadParameter(f"{value!r} is not a version: give a release's version, e.g. 10400.20", ctx=ctx,
                                 param=param) from None
    return value


def _yank_reason(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value.strip():
        raise click.BadParameter("a yank needs its reason: say why, e.g. --reason 'wrong tokens with KV q8_0 on "
                                 "sm_86'; pip shows it to whoever installs the release by its pin", ctx=ctx,
                                 param=param)
    return value


@cli.command("yank")
@click.argument("version", callback=_release_version)
@click.option("--site", required=True, type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="The site hiraishin index wrote (for a published one, its index.json fetched into it first).")
@click.option("--reason", required=True, callback=_yank_reason,
              help="Why: pip shows it to whoever installs the release by its pin.")
@click.option("--deps-index", metavar="URL", default=PYPI, show_default=True, envvar="HIRAISHIN_DEPS_INDEX",
              help="Where the wheels' dependencies come from, in the install commands of the root page.")
@proc.stopping_on_signals()
def yank_command(version: str, site: Path, reason: str, deps_index: str) -> None:
    """Yank release VERSION (PEP 592): every variant's wheel of it stays listed, installed only by its pin."""
    from .index import yank_release

    for wheel in yank_release(site.resolve(), version, reason, deps_index=deps_index):
        click.echo(f"yanked     {wheel.variant}/{wheel.filename}")


# -- CI ---------------------------------------------------------------------

@cli.command("matrix")
@click.option("--format", "output_format", type=click.Choice(["table", "json", "github"]), default="table",
              show_default=True,
              help="table: for people; json: readable JSON; github: the compact {\"include\": [...]} object for "
                   "strategy.matrix (echo \"matrix=$(hiraishin matrix --format github)\" >> \"$GITHUB_OUTPUT\").")
@click.option("--recipe", "only", multiple=True, metavar="NAME",
              help="Only these recipes (repeatable; default: every recipe in recipes/).")
@pass_context
def matrix_command(obj: Context, output_format: str, only: tuple[str, ...]) -> None:
    """The CI wheel matrix: one job per recipe, from recipes/ and ci/matrix.toml."""
    from . import matrix

    project = obj.project()
    jobs = matrix.build_matrix(project, only)
    if output_format == "github":
        click.echo(matrix.github_json(jobs))
    elif output_format == "json":
        click.echo(matrix.readable_json(jobs, project), nl=False)
    else:
        click.echo("\n".join(log.table_lines(matrix.table_rows(jobs), header=matrix.TABLE_HEADER)))
        click.echo(f"{len(jobs)} job(s) from {project.recipes_dir} and {matrix.config_path(project)}", err=True)


@cli.group()
def workflows() -> None:
    """The GitHub Actions workflows: ci/workflows/ installed as .github/workflows/."""


@workflows.command("sync")
@pass_context
def workflows_sync(obj: Context) -> None:
    """Write .github/workflows/ from ci/workflows/ (stale generated files are removed)."""
    from . import workflows as wf

    result = wf.sync(obj.project())
    for name in result.written:
        click.echo(f"  written    {wf.INSTALLED_DIR / name}")
    for name in result.removed:
        click.echo(f"  removed    {wf.INSTALLED_DIR / name} (its source is gone)")
    for name in result.foreign:
        click.echo(f"  left alone {wf.INSTALLED_DIR / name} (not generated from {wf.SOURCE_DIR}/)", err=True)
    click.echo(f"{len(result.written)} written, {len(result.unchanged)} unchanged, {len(result.removed)} removed")


@workflows.command("check")
@click.option("--json", "json_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write the actionlint result (version, files, findings) to this JSON file.")
@pass_context
def workflows_check(obj: Context, json_path: Path | None) -> None:
    """Fail unless .github/workflows/ is what ci/workflows/ generates and actionlint finds no problem."""
    import json

    from . import workflows as wf

    project = obj.project()
    wf.check_sync(project)
    result = wf.lint_installed(project)
    if json_path is not None:
        json_path.write_text(json.dumps(result.as_dict(), indent=2) + "\n")
    wf.require_clean(result)
    shellcheck = "with shellcheck on run: blocks" if result.shellcheck else "without shellcheck (none on PATH)"
    click.echo(f"ok: {len(result.files)} workflow(s) in sync with {wf.SOURCE_DIR}/ and clean under "
               f"{result.version} ({shellcheck})")


@cli.command("docs")
@click.option("--check", "check_only", is_flag=True,
              help="Write nothing; fail (exit 7) while a generated page differs from what would be written.")
@pass_context
def docs_command(obj: Context, check_only: bool) -> None:
    """Write the generated docs: command reference, costs, scope tables, install commands.

    docs/commands.md comes from these commands' own help; docs/cost.md from the
    latest hiraishin-llama-bench results in benchmarks/results/ (the highest
    stack revision); the scope tables of README.md and docs/guarantee.md from
    wheels/hiraishin_llama/coverage.json; the install commands of README.md,
    docs/wheels.md and docs/guarantee.md from recipes/, in the form of the
    site's front page. Edit those, not the pages.
    """
    from . import docgen

    project = obj.project()
    if check_only:
        checked = docgen.check(project, cli)
        click.echo(f"ok: {len(checked)} generated page(s) up to date: "
                   + ", ".join(path.relative_to(project.root).as_posix() for path in checked))
        return
    result = docgen.write(project, cli)
    for path in result.written:
        click.echo(f"  written    {path.relative_to(project.root).as_posix()}")
    click.echo(f"{len(result.written)} written, {len(result.unchanged)} unchanged")


# -- the main job -----------------------------------------------------------

@cli.command("build")
@click.option("--from", "source", metavar="PATH_OR_URL", callback=_non_empty,
              help="Fill the cache from this repository when it lacks the pin.")
@click.option("--recipe", "recipe_name", help="Build this recipe (default: the one for this machine's GPU and CUDA).")
@isolation_option
@jobs_option
@manylinux_option
@click.option("--no-smoke", is_flag=True, help="Stop after building the wheel.")
@pass_context
@proc.stopping_on_signals()
def build(obj: Context, source: str | None, recipe_name: str | None, no_isolation: bool,
          jobs: int | None, manylinux: str, no_smoke: bool) -> None:
    """The main job: upstream -> sdist -> wheel -> smoke test, for this machine."""
    from . import doctor, timeouts, wheelbuild

    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    read_series(project.patches_dir)
    # The recipe, this machine's toolchain, the output directories and the time limits are checked before the
    # fetch, which can take minutes: a typo in --recipe is reported at once, not after it.
    env = doctor.detect()
    if recipe_name is None:
        recipe, passed_over = doctor.recipe_for(env, load_recipes(project.recipes_dir))
        recipe_name = recipe.name
        click.echo(f"recipe for this machine: {recipe_name} "
                   f"(GPU compute capability: {', '.join(doctor.compute_capabilities(env)) or 'none'}, "
                   f"nvcc: {env.nvcc.version or 'none'})")
        for reason in passed_over:
            click.echo(f"  not {reason} (`hiraishin doctor` says how to fix it)")
    else:
        recipe = find_recipe(project.recipes_dir, recipe_name)
    doctor.require_buildable(recipe, env)
    wheelbuild.check_output_paths(project.dist_dir.resolve() / "wheels" / recipe.name,
                                  project.root / "build" / recipe.name)
    timeouts.check_settings(timeouts.NETWORK, timeouts.BUILD, timeouts.COMMAND)
    if source or not cache.exists() or not cache.store().commit_exists(pin.commit):
        with log.step(f"fetching {pin.ref}"):
            cache.fetch(source or pin.url, pin)
    cache.verify(pin)
    wheel = _wheel(project, cache, recipe_name, None, not no_isolation, jobs, manylinux=manylinux)
    click.echo(f"wheel: {wheel.path} ({wheel.size / 1e6:.1f} MB)")
    if no_smoke:
        return
    with log.step("smoke test"):
        result = smoke_wheel(wheel.path, wheel.path.parent / "smoke", system_site_packages=True)
    if result.refused is not None:
        raise SmokeFailed(f"hiraishin-llama-smoke refused to run: {result.refused}",
                          hint=f"run `hiraishin smoke {wheel.path}` with the arguments it needs")
    click.echo(f"wheel:        {wheel.path}\nsmoke report: {result.report_path}")
    if not result.passed:
        raise SmokeFailed(f"the smoke test failed; report: {result.report_path}")


# -- rebase -----------------------------------------------------------------

@cli.command("rebase")
@click.option("--onto", metavar="REF",
              help="Apply the stack onto this upstream tag, branch or commit, from any source in the cache "
                   "(SOURCE/TAG picks one source's tag). The pin then records the url of the source it came from.")
@click.option("--continue", "resume", is_flag=True, help="Go on after resolving a conflict, or after an interruption.")
@click.option("--skip", is_flag=True, help="Drop the patch the rebase stopped at (the report records it) and go on.")
@click.option("--abort", is_flag=True, help="Put patches/, the pin and the work tree back exactly as before.")
@click.option("--dry-run", is_flag=True, help="With --onto: the whole report from a throwaway work tree; nothing changes.")
@click.option("--scan", is_flag=True, help="Try the stack on every REF given and print a compatibility table.")
@click.argument("refs", nargs=-1, metavar="[REF...]")
@workdir_option
@click.option("--report", "report_base", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the report to REPORT.txt and REPORT.json (default: work/rebase-report, work/rebase-scan).")
@click.option("--json", "as_json", is_flag=True, help="Print the JSON report instead of the text.")
@pass_context
def rebase_command(obj: Context, onto: str | None, resume: bool, skip: bool, abort: bool, dry_run: bool, scan: bool,
                   refs: tuple[str, ...], workdir: Path | None, report_base: Path | None, as_json: bool) -> None:
    """Move the stack onto another upstream ref, patch by patch, and the pin with it.

    A rebase of a project is one process at a time: a second one (in any work
    tree of the project) is refused while the first runs.
    """
    modes = [flag for flag, on in (("--onto", onto), ("--continue", resume), ("--skip", skip),
                                   ("--abort", abort), ("--scan", scan)) if on]
    if dry_run and not onto:
        raise click.UsageError("--dry-run goes with --onto REF")
    if len(modes) != 1:
        raise click.UsageError("give exactly one of --onto REF, --continue, --skip, --abort, --scan REF...")
    if bool(refs) != scan:
        raise click.UsageError("--scan takes one or more REFs; the other modes take none (use --onto REF)")
    project, cache = obj.project(), obj.cache()
    target = (workdir or project.default_workdir).resolve()
    default = project.default_workdir.parent / ("rebase-scan" if scan else "rebase-report")
    # Checked before the rebase moves anything: a stop must never be hidden behind a report it cannot write.
    writable_directory((report_base or default).parent, what="the report's directory",
                       given_as="--report" if report_base else "the project's work/ directory")
    if abort:
        aborted = rebasing.abort(project, target)
        click.echo(f"aborted the rebase onto {aborted.onto_ref}; restored: " + (", ".join(aborted.restored) or "nothing had changed"))
        return
    if scan:
        scanned = rebasing.scan(project, cache, refs)
        text, data, stopped = report.scan_text(scanned), report.scan_json(scanned), None
    else:
        if onto:
            found = rebasing.dry_run(project, cache, onto) if dry_run else rebasing.start(project, cache, onto, target)
        else:
            found = (rebasing.continue_ if resume else rebasing.skip)(project, cache, target)
        text, data, stopped = report.rebase_text(found), report.rebase_json(found), rebasing.stopped_error(found)
    written = report.write(report_base or default, text, data)
    click.echo(data if as_json else text, nl=False)
    click.echo(f"report: {written[0]} and {written[1]}", err=True)
    if stopped is not None:
        raise stopped


def main() -> None:
    try:
        with proc.stopping_on_signals():
            cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        click.echo("aborted", err=True)
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except HiraishinError as exc:
        if "--debug" in sys.argv[1:]:
            raise
        _report(exc)
    except OSError as exc:
        # The last line of defence: commands check their paths before they work (fsutil), but a file
        # system can still refuse later (full, gone read-only). Say which path, never a traceback.
        if "--debug" in sys.argv[1:]:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        _report(PathError(f"cannot use{where}: {exc.strerror or exc}",
                          hint="check that the path exists, is writable and has space; --debug shows where it failed"))


def _report(exc: HiraishinError) -> None:
    # The message is text, not markup: "[checkout]" in a hint must print as written.
    log.console.print(f"[bold red]error:[/bold red] {escape(str(exc))}", markup=True, highlight=False,
                      soft_wrap=True)
    sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
