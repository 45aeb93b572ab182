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

from . import __version__, log
from . import rebase as rebasing, report, tags
from .cache import UpstreamCache
from .errors import HiraishinError, PathError, PinMismatchError, UpstreamError
from .project import Project
from .recipe import find_recipe, load_recipes
from .sdist import build_sdist
from .series import read_series
from .sources import display_location, same_repository
from .smoke import PYPI, SmokeFailed, smoke_wheel
from .stack import apply_stack, check_stack, export_stack, load_stack
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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


@upstream.command("fetch")
@click.option("--from", "location", metavar="PATH_OR_URL",
              help="Fetch from this repository: the pin's, a fork, or a local mirror of either "
                   "(default: the pin's url, or with --name, where that source was fetched from last).")
@click.option("--url", metavar="URL",
              help="With --from a mirror: the repository it mirrors. The pin records it when a rebase moves onto "
                   "one of this source's tags (default: the pin's url for a mirror that has the pinned tag at the "
                   "pinned commit, else the --from location itself).")
@click.option("--name", metavar="NAME",
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
    """
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    if url and not location:
        raise click.UsageError("--url goes with --from PATH_OR_URL (the mirror it describes)")
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
        if isinstance(exc, PinMismatchError) or same_repository(source.url, pin.url):
            raise
        # Another repository than the pin's was fetched: that went well, but
        # the pin's own tag is not in the cache yet.
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
    click.echo(f"ok: {pin.ref} = {pin.commit} (in {', '.join(check.sources)})")


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
    found = table.lookup(pin.ref)
    if found is None:
        state = "absent (no source has it)"
    else:
        state = "; ".join(
            f"{'matches the pin' if commit == pin.commit else f'MOVED to {commit}'} in {name}"
            for name, commit in sorted(found[1].items())
        )
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
@click.option("--source", "source_name", metavar="NAME", help="Only this source's tags.")
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
    with log.step(f"applying the stack in {target}"):
        result = apply_stack(project, obj.cache(), target, force=force)
    click.echo(f"applied {len(result.applied)} patch(es) on {result.base[:12]} in {target}")


@patches.command("export")
@workdir_option
@pass_context
def patches_export(obj: Context, workdir: Path | None) -> None:
    """Write patches/ back from the work branch (deterministic)."""
    project = obj.project()
    target = (workdir or project.default_workdir).resolve()
    result = export_stack(project, target)
    for name, change in result.changes.items():
        click.echo(f"{change.value:>9}  {name}")
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
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path),
              help="Where to write it (default: dist/ in the project; dist/without-NAME/ with --without).")
@click.option("--without", "omit", multiple=True, metavar="PATCH",
              help="Leave this patch out (repeatable): a build that shows what the patch fixes, not for release.")
@pass_context
def sdist_command(obj: Context, out_dir: Path | None, omit: tuple[str, ...]) -> None:
    """Write the reproducible source distribution: patched upstream + wheels/."""
    project = obj.project()
    default = project.dist_dir
    if omit:
        default = default / _without_dir_name(omit, read_series(project.patches_dir).names)
    with log.step("making the sdist"):
        result = build_sdist(project, obj.cache(), (out_dir or default).resolve(), omit=frozenset(omit))
    click.echo(f"{result.path}\nsha256 {result.sha256}  version {result.version}  {result.files} files")


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
           isolated: bool, jobs: int | None, extra_defines: Mapping[str, str] | None = None) -> WheelResult:
    from . import doctor

    recipe = find_recipe(project.recipes_dir, recipe_name)
    # Refused before the sdist is made: it takes minutes, and this machine may lack nvcc or cuBLAS (exit 11).
    toolchain = doctor.detect()
    doctor.require_buildable(recipe, toolchain)
    if sdist is None:
        with log.step("making the sdist"):
            sdist = build_sdist(project, cache, project.dist_dir).path
    # Wheels go beside their sdist: a fault build's (dist/without-NAME/) never mixes with releases.
    out_dir = sdist.resolve().parent / "wheels" / recipe.name
    with log.step(f"building the {recipe.name} wheel"):
        return build_wheel(sdist.resolve(), recipe, out_dir, build_dir=project.root / "build" / recipe.name,
                           isolated=isolated, jobs=jobs, extra_defines=extra_defines, toolchain=toolchain)


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
jobs_option = click.option("-j", "--jobs", type=int, help="Parallel build jobs (default: all cores).")


@cli.command("wheel")
@click.option("--recipe", "recipe_name", required=True, help="A recipe in recipes/ (see `hiraishin recipes`).")
@click.option("--sdist", type=click.Path(exists=True, path_type=Path),
              help="Build from this sdist, or the directory it unpacks to, which then keeps the sources of an "
                   "incremental rebuild (default: make one first).")
@isolation_option
@jobs_option
@click.option("-D", "--cmake-define", "cmake_defines", multiple=True, metavar="KEY=VALUE", callback=_parse_defines,
              help="An extra CMake define on top of the recipe's (repeatable), e.g. HIRAISHIN_BUILD_TESTS=ON "
                   "to also build upstream's op tests in the build directory.")
@pass_context
def wheel_command(obj: Context, recipe_name: str, sdist: Path | None, no_isolation: bool, jobs: int | None,
                  cmake_defines: dict[str, str]) -> None:
    """Build a wheel from the sdist with a recipe's CMake defines."""
    result = _wheel(obj.project(), obj.cache(), recipe_name, sdist, not no_isolation, jobs, cmake_defines)
    click.echo(f"{result.path}  ({result.size / 1e6:.1f} MB, version {result.version}, {', '.join(result.tags)})")


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
@click.option("--serve-model", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              help="Also start the wheel's llama-server with this GGUF and ask it one completion.")
@click.argument("smoke_args", nargs=-1, type=click.UNPROCESSED)
@pass_context
def smoke_command(obj: Context, wheel: Path, system_site_packages: bool, find_links: Path | None, from_index: bool,
                  deps_index: str, out_dir: Path | None, serve_model: Path | None, smoke_args: tuple[str, ...]) -> None:
    """Install WHEEL in a fresh venv and run hiraishin-llama-smoke (extra args after --)."""
    target = (out_dir or wheel.parent / "smoke").resolve()
    result = smoke_wheel(wheel.resolve(), target, system_site_packages=system_site_packages, find_links=find_links,
                         from_index=from_index, deps_index=deps_index, smoke_args=smoke_args, serve_model=serve_model)
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


@cli.command("index")
@click.argument("wheel_dir", type=click.Path(file_okay=False, exists=True, path_type=Path))
@click.option("--out", "site", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The site: SITE/<variant>/simple/ per variant (wheels already there are kept).")
@click.option("--deps-index", metavar="URL", default=PYPI, show_default=True, envvar="HIRAISHIN_DEPS_INDEX",
              help="Where the wheels' dependencies come from, in the install commands printed.")
def index_command(wheel_dir: Path, site: Path, deps_index: str) -> None:
    """PEP 503 indexes per variant from the labelled wheels under WHEEL_DIR."""
    from .index import build_index, install_command

    result = build_index(wheel_dir.resolve(), site.resolve(), deps_index=deps_index)
    for reason in result.skipped:
        click.echo(f"skipped: {reason}", err=True)
    for variant, wheels in result.variants.items():
        url = (result.site / variant / "simple").as_uri()
        click.echo(f"{variant:<12} {len(wheels)} wheel(s): {install_command(wheels, url, deps_index)}")
    if result.variants_json:
        click.echo(f"variant metadata (draft PEP 825): {result.variants_json}")
    if not result.variants:
        click.echo(f"no labelled hiraishin_llama wheels under {wheel_dir}", err=True)


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
    """Write the generated pages of docs/: the command reference and what exactness costs.

    docs/commands.md comes from these commands' own help; docs/cost.md from the
    latest hiraishin-llama-bench results in benchmarks/results/ (the highest
    stack revision). Edit those, not the pages.
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
@click.option("--from", "source", metavar="PATH_OR_URL",
              help="Fill the cache from this repository when it lacks the pin.")
@click.option("--recipe", "recipe_name", help="Build this recipe (default: the one for this machine's GPU and CUDA).")
@isolation_option
@jobs_option
@click.option("--no-smoke", is_flag=True, help="Stop after building the wheel.")
@pass_context
def build(obj: Context, source: str | None, recipe_name: str | None, no_isolation: bool,
          jobs: int | None, no_smoke: bool) -> None:
    """The main job: upstream -> sdist -> wheel -> smoke test, for this machine."""
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    read_series(project.patches_dir)
    if source or not cache.exists() or not cache.store().commit_exists(pin.commit):
        with log.step(f"fetching {pin.ref}"):
            cache.fetch(source or pin.url, pin)
    cache.verify(pin)
    if recipe_name is None:
        from . import doctor

        env = doctor.detect()
        recipe, passed_over = doctor.recipe_for(env, load_recipes(project.recipes_dir))
        recipe_name = recipe.name
        click.echo(f"recipe for this machine: {recipe_name} "
                   f"(GPU compute capability: {', '.join(doctor.compute_capabilities(env)) or 'none'}, "
                   f"nvcc: {env.nvcc.version or 'none'})")
        for reason in passed_over:
            click.echo(f"  not {reason} (`hiraishin doctor` says how to fix it)")
    wheel = _wheel(project, cache, recipe_name, None, not no_isolation, jobs)
    click.echo(f"wheel: {wheel.path} ({wheel.size / 1e6:.1f} MB)")
    if no_smoke:
        return
    with log.step("smoke test"):
        result = smoke_wheel(wheel.path, wheel.path.parent / "smoke", system_site_packages=True)
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
    if len(modes) != 1:
        raise click.UsageError("give exactly one of --onto REF, --continue, --skip, --abort, --scan REF...")
    if bool(refs) != scan:
        raise click.UsageError("--scan takes one or more REFs; the other modes take none (use --onto REF)")
    if dry_run and not onto:
        raise click.UsageError("--dry-run goes with --onto REF")
    project, cache = obj.project(), obj.cache()
    target = (workdir or project.default_workdir).resolve()
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
    default = project.default_workdir.parent / ("rebase-scan" if scan else "rebase-report")
    written = report.write(report_base or default, text, data)
    click.echo(data if as_json else text, nl=False)
    click.echo(f"report: {written[0]} and {written[1]}", err=True)
    if stopped is not None:
        raise stopped


def main() -> None:
    try:
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
