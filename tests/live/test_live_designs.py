"""The designs as real llama-server builds (``pcspec/live/designs.py``, docs/DESIGNS.md).

* every design of the model either maps to a tree and package files, or says it has no build;
* each patch is a ``git format-patch`` file in llama.cpp's style, and a design's patches apply
  cleanly, in order, with ``patch -p1`` to its tree (skipped when the tree's sdist is not cached);
  each patch of ``fixed`` implements extension points of the model (``pcspec.model.design``), and
  together they are what ``fixed@0c1e570`` runs beyond ``pr30137@0c1e570``;
* ``pcspec build --design`` refuses what it cannot build in one line, exit 2;
* a built design's server (skipped when it is not built: ``pcspec build --design
  NAME``) answers a completion and a slot save on a tiny model, and logs the checkpoint and
  cache lines its patch touches.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from pcspec.live import build, upstream
from pcspec.live.designs import (
    DESIGNS,
    FAULTS_PATCHES,
    PATCH_DIR,
    UNAVAILABLE,
    Design,
    DesignUnavailable,
    design_of,
    with_faults,
)
from pcspec.logcheck.events import SaveFailed
from pcspec.model.designs import DESIGNS as MODEL_DESIGNS
from tests.support.paths import ROOT

PATCHED = tuple(name for name, d in DESIGNS.items() if d.patches)
OCTOBER = tuple(name for name, d in DESIGNS.items() if d.tree == "0c1e570")
NOVEMBER = ("baseline@november", "pr30137@november", "fixed@november")


def test_every_design_of_the_model_is_buildable_or_says_why_not() -> None:
    assert set(OCTOBER) | set(UNAVAILABLE) == set(MODEL_DESIGNS)
    assert not set(DESIGNS) & set(UNAVAILABLE)
    assert DESIGNS["baseline"].patches == ()
    assert set(PATCHED) == {"pr30137", "pr27451", "fixed", *NOVEMBER}
    # the November builds are named as the model names them, and the model knows each name
    from pcspec.model.designs import get_design

    assert set(DESIGNS) - set(OCTOBER) == set(NOVEMBER)
    for name in NOVEMBER:
        assert get_design(name).rules.name == "november"
    assert design_of("november") is DESIGNS["pr30137@november"]


@pytest.mark.parametrize("name", list(DESIGNS))
def test_a_design_maps_to_its_tree_and_existing_package_files(name: str) -> None:
    d = design_of(name)
    assert d.tree in build.TREES
    for p in d.patch_paths():
        assert p.is_file(), p
        assert p.resolve().is_relative_to(PATCH_DIR.resolve())
        assert re.fullmatch(r"\d{4}-[a-z0-9-]+\.patch", p.name), p.name
    # patches/<folder>/NNNN-<slug>.patch, after the whole patch list of a design it builds on
    folder = d.patches[-1].split("/")[0] if d.patches else name
    assert folder in (name, name.replace("@", "-"), "november")
    own = [p for p in d.patches if p.split("/")[0] == folder]
    base = d.patches[: len(d.patches) - len(own)]
    assert d.patches[len(base):] == tuple(own)
    if base:
        (other,) = {p.split("/")[0] for p in base}
        assert design_of(other).patches == base
    numbers = [int(p.split("/")[1][:4]) for p in d.patches]
    assert numbers == list(range(1, len(numbers) + 1))  # numbered in the order they apply


def test_every_patch_file_belongs_to_a_design() -> None:
    used = {p.resolve() for d in DESIGNS.values() for p in d.patch_paths()}
    used |= {(PATCH_DIR / p).resolve() for p in FAULTS_PATCHES}
    # the test-only patches of a line's upstream run (pcspec/live/upstream.py: TEST_PATCHES)
    used |= {(PATCH_DIR / p).resolve() for ps in upstream.TEST_PATCHES.values() for p in ps}
    assert set(PATCH_DIR.resolve().glob("*/*.patch")) == used
    # the top-level folder and what the package holds (the link in a checkout, a copy in an
    # installed wheel) are the same files
    def files(d: Path) -> dict[str, bytes]:
        return {str(f.relative_to(d)): f.read_bytes() for f in sorted(d.glob("*/*.patch"))}

    assert files(ROOT / "patches") == files(PATCH_DIR)


def test_designs_are_distinct_builds() -> None:
    keys = {build.build_key(d.tree, d.patch_paths(), d.flags) for d in DESIGNS.values()}
    assert len(keys) == len(DESIGNS)
    assert build.build_key(DESIGNS["baseline"].tree) == build.build_key()  # baseline is the October build


def _diff_files(text: str) -> list[str]:
    return re.findall(r"^diff --git a/(\S+) b/\S+$", text, flags=re.M)


def _added_lines(text: str) -> list[str]:
    return [line[1:] for line in text.splitlines() if line.startswith("+") and not line.startswith("+++")]


def _check_format_patch(text: str) -> None:
    lines = text.splitlines()
    assert re.fullmatch(r"From [0-9a-f]{40} Mon Sep 17 00:00:00 2001", lines[0])
    assert lines[1].startswith("From: ") and lines[2].startswith("Date: ")
    assert re.match(r"Subject: \[PATCH\] (server|llama) : ", lines[3])
    message = text.split("\n---\n", 1)[0]
    assert "0c1e570" in message or "b11549" in message  # the message names the tree it applies to
    for added in _added_lines(text):
        assert added == added.rstrip(), f"trailing whitespace: {added!r}"
        assert "\t" not in added, f"a tab: {added!r}"
        assert (len(added) - len(added.lstrip(" "))) % 4 == 0, f"indentation not in fours: {added!r}"


@pytest.mark.parametrize("name", ["pr30137", "pr27451"])
def test_a_port_is_a_format_patch_in_llama_cpp_style(name: str) -> None:
    (path,) = design_of(name).patch_paths()
    text = path.read_text(encoding="utf-8")
    _check_format_patch(text)
    assert "Original-commit: " in text


# The extension points of model/design.py each patch of ``fixed`` implements (``Fixed``'s own, where
# it departs from ``PR30137``), in the order they apply, and how its message names them.
FIXED_POINTS: dict[str, tuple[set[str], str]] = {
    "0002": ({"cache_update_busy_slot"}, "Fixed.cache_update_busy_slot = False"),
    "0003": ({"entry_sizes", "candidate_size"}, "Fixed.entry_sizes and Fixed.candidate_size"),
    "0004": ({"prompt_save", "alloc_scope"}, "Fixed.prompt_save"),  # (it builds the entry in the try)
    "0005": ({"checkpoint_pos_min"}, "Fixed.checkpoint_pos_min"),
    "0006": ({"update_cache_on_select"}, "Fixed.update_cache_on_select"),
    # the failures contained in two patches: the cache load, then the checkpoints and the truncation
    "0007": ({"load_entry"}, "Fixed.load_entry"),
    "0008": ({"limit_after_bad_alloc"}, "Fixed.limit_after_bad_alloc"),
    "0009": ({"checkpoint_create_failed", "checkpoint_load_failed", "restore_failed", "seq_rm_refused"},
             "Fixed.checkpoint_create_failed, Fixed.checkpoint_load_failed, Fixed.restore_failed and"
             " Fixed.seq_rm_refused"),
    "0010": ({"file_restore_begin", "file_restore_refuses", "file_checkpoint_refused"},
             "Fixed.file_restore_begin, Fixed.file_restore_refuses and Fixed.file_checkpoint_refused"),
    "0011": ({"sync_draft"}, "Fixed.sync_draft"),
    "0012": ({"invalidated"}, "Fixed.invalidated"),  # (the November rule, which the October tree lacks)
    "0013": ({"kept_checkpoint"}, "Fixed.kept_checkpoint"),
    "0014": ({"resume", "restore_choice"}, "Fixed.resume and Fixed.restore_choice"),
}


@pytest.mark.parametrize("path", [p for p in design_of("fixed").patch_paths() if p.parent.name == "fixed"],
                         ids=lambda p: p.name[:4])
def test_a_patch_of_fixed_is_one_change_a_maintainer_can_review(path: Path) -> None:
    """One patch per change: each is a format-patch in llama.cpp's style whose message says what
    and why, and which pcspec property it makes hold (a paragraph "pcspec: ..." naming the
    extension points of the model it implements)."""
    text = path.read_text(encoding="utf-8")
    _check_format_patch(text)
    message = text.split("\n---\n", 1)[0]
    pcspec = message.split("\npcspec: ", 1)[1]
    assert re.search(r"\b[A-Z]+-\d\b", pcspec), "names no property"
    assert " ".join(pcspec.split()).startswith(FIXED_POINTS[path.name[:4]][1])


def test_the_patches_of_fixed_implement_its_points_and_no_other() -> None:
    """``pcspec live --design fixed`` compares the build with ``fixed@0c1e570``: the model's
    design under the October tree's rule set. The points where it runs
    other code than pr30137's are exactly those the patches name, and the two run under the same
    rule set."""
    from pcspec.live import calibrate
    from pcspec.model.design import POINTS, implementation

    ours, base = calibrate.variant("fixed@0c1e570"), calibrate.variant("pr30137@0c1e570")
    differ = {p for p in POINTS if implementation(ours, p) != implementation(base, p)}
    assert differ == set().union(*(points for points, _ in FIXED_POINTS.values()))
    assert ours.rules == base.rules


# fixed's series rebased onto the November server: the same points, renumbered after November's two
# patches; the October 0012 (the November invalidation) is upstream there, and 0015 is the appendix
# check the October tree had no appendix for.
FIXED_NOVEMBER_POINTS: dict[str, tuple[set[str], str]] = {
    f"{int(n) + 1:04d}": v for n, v in FIXED_POINTS.items() if n not in ("0012", "0013", "0014")
} | {
    "0011": ({"file_restore_begin", "file_restore_refuses"}, "Fixed.file_restore_begin and Fixed.file_restore_refuses"),
    "0013": FIXED_POINTS["0013"],
    "0014": FIXED_POINTS["0014"],
    "0015": ({"file_checkpoint_refused"}, "Fixed.file_checkpoint_refused"),
}


@pytest.mark.parametrize("path", [p for p in design_of("fixed@november").patch_paths()
                                  if p.parent.name == "fixed-november"], ids=lambda p: p.name[:4])
def test_a_patch_of_fixed_on_november_is_one_change_a_maintainer_can_review(path: Path) -> None:
    """As the October series: a format patch in llama.cpp's style, one change, its message naming
    the tree it applies to and the points of ``Fixed`` it implements."""
    text = path.read_text(encoding="utf-8")
    _check_format_patch(text)
    message = text.split("\n---\n", 1)[0]
    assert "Applies to master after #30137" in message
    pcspec = message.split("\npcspec: ", 1)[1]
    assert re.search(r"\b[A-Z]+-\d\b", pcspec), "names no property"
    assert " ".join(pcspec.split()).startswith(FIXED_NOVEMBER_POINTS[path.name[:4]][1])


def test_the_patches_of_fixed_on_november_implement_its_points_and_no_other() -> None:
    """``pcspec live --design fixed@november`` compares the build with the model's ``fixed`` under
    the November rules: the points where it runs other code than ``pr30137@november`` are those
    the patches name, and ``invalidated``, whose rule is the November code's own (patches/november/0001)."""
    from pcspec.live import calibrate
    from pcspec.model.design import POINTS, implementation

    ours, base = calibrate.variant("fixed@november"), calibrate.variant("pr30137@november")
    differ = {p for p in POINTS if implementation(ours, p) != implementation(base, p)}
    assert differ == set().union(*(points for points, _ in FIXED_NOVEMBER_POINTS.values()), {"invalidated"})
    assert ours.rules == base.rules
    assert set(FIXED_NOVEMBER_POINTS) == {p.name[:4] for p in design_of("fixed@november").patch_paths()
                                          if p.parent.name == "fixed-november"}


def _sdist(t: build.Tree) -> Path:
    """The tree's sdist from build.py's cache (the build step fetches it: ``python -m
    pcspec.live.build``, as .ci/run does); a test never downloads it, so it skips without it."""
    found = sorted((build.cache_root() / "sdist").glob(f"{t.archive_stem}.tar.gz"))
    if not found:
        pytest.skip(f"the {t.name} sdist is not in pcspec's cache (pcspec build --tree {t.name})")
    return found[0]


@pytest.mark.parametrize(("name", "faults"), [*((n, False) for n in PATCHED), *((n, True) for n in OCTOBER)])
def test_a_patch_applies_cleanly_to_its_tree(name: str, faults: bool, tmp_path: Path) -> None:
    """Each design's patches, and with ``faults`` the fault points after them (they touch only
    src/, which no design changes), apply to the tree with no offset or fuzz."""
    if shutil.which("patch") is None:
        pytest.skip("no `patch` program")
    d: Design = design_of(name)
    t = build.tree_of(d.tree)
    tarball = _sdist(t)
    patches = with_faults(d)[0] if faults else d.patch_paths()
    files = {f for p in patches for f in _diff_files(p.read_text(encoding="utf-8"))}
    assert files
    with tarfile.open(tarball) as tf:
        members = [m for m in tf.getmembers()
                   if any(m.name.endswith(f"/{t.folder}/{f}") and "/.git/" not in m.name for f in files)]
        tf.extractall(tmp_path, members=members, filter="data")
    (src,) = tmp_path.glob(f"*/{t.folder}")
    for f in files:
        assert (src / f).is_file(), f"{f} is not in the {t.name} tree"
    for p in patches:
        done = subprocess.run(["patch", "-p1", "--forward", "-i", str(p)], cwd=src,
                              capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, done.stdout + done.stderr
        # cleanly: no hunk moved or fuzzed, nothing rejected
        assert not re.search(r"offset|fuzz|FAILED|reject", done.stdout, flags=re.I), done.stdout
    assert not list(src.rglob("*.orig")) and not list(src.rglob("*.rej"))


def test_the_wheel_ships_the_patches(tmp_path: Path) -> None:
    """An installed pcspec builds a design without a checkout: the patches are package data."""
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT, checkout, symlinks=True, ignore=shutil.ignore_patterns(
        ".git", ".mypy_cache", ".ruff_cache", ".hypothesis", ".pytest_cache", "__pycache__", "build", "pcspec-out"))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"),
         "."], cwd=checkout, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    (wheel,) = (tmp_path / "dist").glob("pcspec-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for d in DESIGNS.values():
        for rel in d.patches:
            assert f"pcspec/live/patches/{rel}" in names, sorted(n for n in names if "live" in n)


# -- the command line ------------------------------------------------------------------------------


def _run_build(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    rc = build.main(args)
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_a_design_without_a_build_is_refused_in_one_line(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # (every design of the model has a build now; the refusal stays for one that has not)
    monkeypatch.delitem(DESIGNS, "fixed")
    monkeypatch.setitem(UNAVAILABLE, "fixed", "no patch")
    rc, out, err = _run_build(["--design", "fixed"], capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1
    assert "'fixed' is not available as a build yet" in err
    with pytest.raises(DesignUnavailable):
        design_of("fixed")


@pytest.mark.parametrize("args, says", [
    (["--design", "nope"], "unknown design 'nope'"),
    (["--design", "pr30137", "--tree", "b11549"], "built from tree 0c1e570, not b11549"),
    (["--where", "--patch", "/no/such.patch"], "no such patch file"),
])
def test_bad_design_arguments_are_one_line_exit_2(args: list[str], says: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = _run_build(args, capsys)
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and says in err, err


@pytest.mark.parametrize("name", list(DESIGNS))
def test_design_where_names_the_design_build(name: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv(build.ENV_CACHE, str(tmp_path))
    monkeypatch.delenv(build.ENV_SERVER, raising=False)
    d = design_of(name)
    rc, out, _err = _run_build(["--design", name, "--where"], capsys)
    assert rc == 1  # not built in an empty cache
    assert Path(out.strip()) == build.cached_server(d.tree, d.patch_paths(), d.flags)
    assert out.strip().endswith(f"-p{len(d.patches)}/llama-server" if d.patches else "/llama-server")


def test_a_sanitizer_build_is_a_build_of_its_own(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--sanitize`` adds llama.cpp's ASan and UBSan options to the flags, so the binary is cached
    apart from the design's plain build (and from its fault build)."""
    from pcspec.live.designs import SANITIZE_FLAGS

    monkeypatch.setenv(build.ENV_CACHE, str(tmp_path))
    monkeypatch.delenv(build.ENV_SERVER, raising=False)
    d = design_of("pr30137")
    rc, out, _err = _run_build(["--design", "pr30137", "--sanitize", "--where"], capsys)
    assert rc == 1
    assert Path(out.strip()) == build.cached_server(d.tree, d.patch_paths(), SANITIZE_FLAGS)
    assert Path(out.strip()) != build.cached_server(d.tree, d.patch_paths())
    assert SANITIZE_FLAGS == ("-DLLAMA_SANITIZE_ADDRESS=ON", "-DLLAMA_SANITIZE_UNDEFINED=ON")


# -- a built design's server -----------------------------------------------------------------------


def _binary(name: str) -> Path:
    d = design_of(name)
    found = build.find_server(d.tree, d.patch_paths(), d.flags) if d.patches else build.find_server(d.tree)
    if found is None:
        pytest.skip(f"design {name} not built: run `pcspec build --design {name}` "
                    f"(cached as {build.cached_server(d.tree, d.patch_paths(), d.flags)})")
    return found


@pytest.mark.parametrize("name", list(DESIGNS))
def test_a_built_design_answers_a_completion_and_a_slot_save(name: str, tmp_path: Path) -> None:
    """pcspec.live.smoke: a checkpoint created, a prompt saved to the cache with it and loaded
    back, the checkpoint restored, the slot saved (the code the patches change)."""
    binary = _binary(name)
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    from pcspec.live.smoke import smoke

    res = smoke(binary, tmp_path)
    assert res.completions_ok and res.saved_whole, res.summary()
    assert not res.missing(), f"not in the log: {res.missing()}\n{res.summary()}"
    assert not res.lines(SaveFailed)  # #30137's check: every save was whole
    if name == "pr30137":
        assert b"failed to save complete prompt state" in binary.read_bytes()  # the check is compiled in


def _kept_as_0013_logs(records: list[str]) -> list[str]:
    """baseline's records with each supersede of a checkpoint and its re-creation at the same
    n_tokens (the restored one, in the smoke run) as fixed's 0013 logs keeping it."""
    out: list[str] = []
    superseded: str | None = None
    for r in records:
        if (m := re.search(r"superseding context checkpoint at n_tokens = (\d+)$", r)) is not None:
            superseded = m[1]
            out.append(r[:m.start()] + f"keeping the restored context checkpoint at n_tokens = {superseded} "
                       "instead of re-creating it")
        elif superseded is not None and f"n_tokens = {superseded}," in r and "created context checkpoint" in r:
            superseded = None
        else:
            out.append(r)
    return out


@pytest.mark.parametrize("name", [n for n in PATCHED if n in OCTOBER])
def test_a_built_design_logs_what_baseline_logs(name: str, tmp_path: Path) -> None:
    """The ports change how checkpoints are held, not what the server does with them: the
    smoke run's checkpoint and cache lines (and the cache's size accounting) are baseline's; on
    fixed too, but for the pos_min its patch 0005 records, 0014's lines of its choice and 0013's
    kept checkpoint."""
    binary, baseline = _binary(name), _binary("baseline")
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    from pcspec.live.smoke import smoke

    ours, theirs = smoke(binary, tmp_path / name), smoke(baseline, tmp_path / "baseline")
    if name != "fixed":
        assert ours.records() and ours.records() == theirs.records()
        return
    # fixed's 0005 records where an SWA checkpoint's data starts: max(pos_min, pos_max - n_swa + 1)
    # (the smoke model's window is 32); 0014 logs its choice and restores in resume_prompt; 0013
    # keeps the checkpoint task 20 restored where baseline supersedes it with a copy (PERF-2);
    # every other field of every line is baseline's
    from pcspec.live.models import N_SWA

    pos = re.compile(r"pos_min = (-?\d+), pos_max = (-?\d+)")
    choice = re.compile(r"\| context checkpoint \(.*\) resumes at n_past = ")
    mine = [r.replace("resume_promp:", "  operator():") for r in ours.records() if not choice.search(r)]
    baseline = _kept_as_0013_logs(theirs.records())
    assert mine and len(baseline) < len(theirs.records())
    assert [pos.sub("pos", r) for r in mine] == [pos.sub("pos", r) for r in baseline]
    for a, b in zip(mine, baseline, strict=True):
        if (m := pos.search(b)) is not None:
            mine = pos.search(a)
            assert mine is not None
            pos_min, pos_max = int(m[1]), int(m[2])
            assert (int(mine[1]), int(mine[2])) == (max(pos_min, pos_max - N_SWA + 1), pos_max), (a, b)


def test_the_fault_points_are_reviewable_patches_on_src_only() -> None:
    """patches/faults: format patches in llama.cpp's style that touch no file a design's patch
    touches (so they apply after any design), name each LLAMA_FAULTS site, and map each to the
    model's fault sites (designs.FAULT_SITES, model/heap.py: Faults.SITES)."""
    from pcspec.live.designs import FAULT_SITES
    from pcspec.model.heap import Faults

    texts = [(PATCH_DIR / p).read_text(encoding="utf-8") for p in FAULTS_PATCHES]
    for text in texts:
        _check_format_patch(text)
    text = "\n".join(texts)
    touched = {f for t in texts for f in _diff_files(t)}
    assert touched == {"src/CMakeLists.txt", "src/llama-context.cpp", "src/llama-context.h"}
    for d in DESIGNS.values():
        assert not touched & {f for p in d.patch_paths() for f in _diff_files(p.read_text(encoding="utf-8"))}
    for site, model_sites in FAULT_SITES.items():
        assert f"'{site.split('.SIZE')[0]}" in text or f'"{site}' in text, site
        assert set(model_sites) <= set(Faults.SITES), site
    assert "#ifdef LLAMA_FAULT_POINTS" in text and "option(LLAMA_FAULT_POINTS" in text


@pytest.mark.slow
def test_the_model_of_fixed_s_build_breaks_only_what_its_tree_lacks() -> None:
    """Every point of ``fixed`` has its patch, so the model of its build (``fixed@0c1e570``)
    violates only what the October tree itself lacks: FILE-1, a slot file without the
    checkpoint appendix (#26004 came after 0c1e570; docs/FINDINGS.md). 600 examples of walk 0
    (the documented 4,000 take about a minute)."""
    from pcspec.engines.walker import Walker
    from pcspec.live import calibrate

    walk = Walker(calibrate.variant("fixed@0c1e570")).walk(0, 600)
    assert walk.complete and set(walk.first) <= {"FILE-1"}, {k: f.violation.message for k, f in walk.first.items()}
    # and the walk can fail: the October slot files are met in it
    assert "FILE-1" in walk.first
