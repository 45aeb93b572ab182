"""The ``hiraishin`` command line: a thin layer over the library.

Only this module turns errors into messages and exit codes (see errors.py).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import click

from . import __version__, log
from .cache import UpstreamCache
from .errors import HiraishinError
from .project import Project
from .series import read_series
from .stack import apply_stack, check_stack, export_stack, load_stack


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
@click.option("--from", "source", metavar="PATH_OR_URL",
              help="Fetch from this repository (e.g. a local mirror) instead of the pin's url.")
@pass_context
def upstream_fetch(obj: Context, source: str | None) -> None:
    """Fill or update the cache, then verify the pin."""
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    with log.step(f"fetching {pin.ref} into {cache.git_dir}"):
        cache.fetch(source or pin.url, pin)
    cache.verify(pin)
    click.echo(f"cached {pin.ref} = {pin.commit} in {cache.git_dir}")


@upstream.command("verify")
@pass_context
def upstream_verify(obj: Context) -> None:
    """Check that the pinned ref still names the pinned commit (offline)."""
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    cache.verify(pin)
    click.echo(f"ok: {pin.ref} = {pin.commit}")


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
    resolved = store.resolve(pin.ref)
    state = "absent" if resolved is None else ("matches the pin" if resolved == pin.commit else f"MOVED to {resolved}")
    click.echo(f"ref state: {state}")
    click.echo(f"source:    {cache.source()}")


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


# -- the main job -----------------------------------------------------------

@cli.command("build")
@click.option("--from", "source", metavar="PATH_OR_URL",
              help="Fill the cache from this repository when it lacks the pin.")
@workdir_option
@pass_context
def build(obj: Context, source: str | None, workdir: Path | None) -> None:
    """Fetch the upstream if needed, verify the pin and apply the stack."""
    project, cache = obj.project(), obj.cache()
    pin = project.pin()
    read_series(project.patches_dir)
    if source or not cache.exists() or not cache.store().commit_exists(pin.commit):
        with log.step(f"fetching {pin.ref}"):
            cache.fetch(source or pin.url, pin)
    cache.verify(pin)
    target = (workdir or project.default_workdir).resolve()
    with log.step(f"applying the stack in {target}"):
        result = apply_stack(project, cache, target, pin=pin)
    click.echo(f"applied {len(result.applied)} patch(es) on {pin.ref} in {target}")


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
        log.console.print(f"[bold red]error:[/bold red] {exc}", markup=True, highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)


if __name__ == "__main__":
    main()
