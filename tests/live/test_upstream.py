"""llama.cpp's own server tests against each design's build (``pcspec/live/upstream.py``).

* the junit parsing and the comparison with baseline, on small hand-made reports;
* the plugin that points upstream's presets at local models, on a stand-in ``utils.py``;
* bad input in one line, exit 2 (an unknown design, an unbuilt one, a missing extra, a test file
  the tree lacks);
* live: one small upstream file on baseline's build, parsed;
* each design's reference (the unpatched build of its tree's line: baseline, or the November
  server for the b11549 designs), the November line's test patch, and live, the regression tests
  of that patch on both November builds: every one fails on the November server and passes on
  ``fixed@november``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pcspec.live import build, upstream
from pcspec.live.upstream import Case, compare, parse_junit

XML = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="1" failures="2" skipped="1" tests="6">
 <testcase classname="unit.test_basic" name="test_ok" time="0.1"/>
 <testcase classname="unit.test_basic" name="test_bad" time="0.1">
  <failure message="assert 404 == 200&#10;more">trace</failure></testcase>
 <testcase classname="unit.test_basic" name="test_setup" time="0.1"><error message="fixture boom">x</error></testcase>
 <testcase classname="unit.test_basic" name="test_skip[a-1]" time="0.0">
  <skipped type="pytest.skip" message="needs a model from Hugging Face (x): no network">s</skipped></testcase>
 <testcase classname="unit.test_slot_save" name="test_both" time="0.1">
  <failure message="first">f</failure><error message="teardown">e</error></testcase>
 <testcase classname="unit.test_slot_save" name="test_twice" time="0.1"/>
 <testcase classname="unit.test_slot_save" name="test_twice" time="0.1"><error message="teardown only">e</error>
 </testcase>
</testsuite></testsuites>
"""


def test_parse_junit_reads_each_outcome_and_its_first_message_line() -> None:
    cases = parse_junit(XML)
    assert cases == {
        "unit.test_basic::test_ok": Case("passed"),
        "unit.test_basic::test_bad": Case("failed", "assert 404 == 200"),
        "unit.test_basic::test_setup": Case("error", "fixture boom"),
        "unit.test_basic::test_skip[a-1]": Case("skipped", "needs a model from Hugging Face (x): no network"),
        "unit.test_slot_save::test_both": Case("failed", "first"),  # a failure outranks its teardown error
        "unit.test_slot_save::test_twice": Case("error", "teardown only"),  # the worse of the two reports
    }
    assert [parse_junit(XML.replace('<failure message="assert', '<skipped message="assert')
                        .replace("</failure></testcase>", "</skipped></testcase>"))["unit.test_basic::test_bad"]
            .outcome] == ["skipped"]


def test_compare_names_regressions_removed_failures_and_other_changes() -> None:
    baseline = {"a": Case("passed"), "b": Case("failed", "m"), "c": Case("passed"), "d": Case("skipped"),
              "e": Case("error", "boom"), "same": Case("failed", "x"), "gone": Case("passed"),
              "f": Case("passed")}
    design = {"a": Case("failed", "assert 1 == 2"), "b": Case("passed"), "c": Case("passed"), "d": Case("passed"),
              "e": Case("passed"), "same": Case("failed", "y"), "new": Case("error", "collect"),
              "f": Case("error", "fixture")}
    comp = compare(baseline, design)
    assert [(d.test, d.baseline, d.design, d.message) for d in comp.regressions] == [
        ("a", "passed", "failed", "assert 1 == 2"), ("f", "passed", "error", "fixture")]
    assert [(d.test, d.message) for d in comp.removed] == [("b", "m"), ("e", "boom")]
    assert [(d.test, d.baseline, d.design) for d in comp.changed] == [
        ("d", "skipped", "passed"), ("gone", "passed", "absent"), ("new", "absent", "error")]
    assert compare(baseline, baseline) == upstream.Comparison((), (), ())


def _fake_suite(tmp_path: Path) -> Path:
    """A stand-in for tools/server/tests: utils.py with upstream's preset and process shapes."""
    d = tmp_path / "tests"
    (d / "unit").mkdir(parents=True)
    (d / "utils.py").write_text(
        "class ServerProcess:\n"
        "    model_hf_repo = 'ggml-org/models'\n    model_hf_file = 'x.gguf'\n    model_url = None\n"
        "    mmproj_url = None\n    model_file = None\n    offline = False\n    external_server = False\n"
        "    def start(self):\n        self.started = True\n"
        "class ServerPreset:\n"
        "    @staticmethod\n    def load_all():\n        raise RuntimeError('would download every preset')\n"
        "    @staticmethod\n    def tinyllama2():\n"
        "        s = ServerProcess()\n        s.model_hf_repo = 'ggml-org/test-model-stories260K'\n"
        "        s.model_hf_file = None\n        s.n_ctx = 512\n        return s\n"
        "    @staticmethod\n    def tinygemma3():\n"
        "        s = ServerProcess()\n        s.model_hf_repo = 'ggml-org/tinygemma3-GGUF:Q8_0'\n        return s\n")
    (d / "conftest.py").write_text("import pytest\nfrom utils import *\n\n\n"
                                   "@pytest.fixture(scope='session', autouse=True)\n"
                                   "def load_server_presets():\n    ServerPreset.load_all()\n")
    (d / "unit" / "test_fake.py").write_text(
        "from utils import *\n\nserver = ServerPreset.tinyllama2()\n\n"
        "def test_local():\n    s = ServerPreset.tinyllama2()\n"
        "    assert (s.model_file, s.model_hf_repo, s.model_hf_file, s.offline, s.n_ctx) == ('/m/kv.gguf', None, None,"
        " True, 512)\n    s.start()\n    assert s.started\n\n"
        "def test_module_level_preset_too():\n    assert server.model_file == '/m/kv.gguf'\n\n"
        "def test_unmapped_preset():\n    ServerPreset.tinygemma3().start()\n\n"
        "def test_own_repo():\n    s = ServerPreset.tinyllama2()\n    s.model_hf_repo = 'bartowski/Phi'\n"
        "    s.start()\n")
    (d / f"{upstream.PLUGIN_NAME}.py").write_text(upstream.PLUGIN)
    return d


def _run_fake(d: Path, *extra: str) -> dict[str, Case]:
    xml = d / "out.xml"
    env = {"PATH": "/usr/bin:/bin", upstream.ENV_MODELS: json.dumps({"tinyllama2": "/m/kv.gguf"}),
           "PYTHONPATH": str(d)}
    subprocess.run([sys.executable, "-m", "pytest", *extra, "-p", "no:cacheprovider", "-p", "no:pcspec", "-q",
                    f"--junitxml={xml}", "unit/test_fake.py"], cwd=d, env=env, capture_output=True, check=False,
                   timeout=120)
    return parse_junit(xml.read_text())


@pytest.mark.slow
def test_the_plugin_points_presets_at_local_models_and_skips_what_would_download(tmp_path: Path) -> None:
    d = _fake_suite(tmp_path)
    cases = _run_fake(d, "-p", upstream.PLUGIN_NAME)
    assert {t.split("::")[1]: c.outcome for t, c in cases.items()} == {
        "test_local": "passed", "test_module_level_preset_too": "passed", "test_unmapped_preset": "skipped",
        "test_own_repo": "skipped"}
    assert "tinygemma3-GGUF" in cases["unit.test_fake::test_unmapped_preset"].message
    # without the plugin the session's load_all would download: every test errors
    without = _run_fake(d)
    assert without and all(c.outcome == "error" for c in without.values())


def test_bad_input_is_one_line_exit_2(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert upstream.main(["--design", "nosuch"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "unknown design 'nosuch'" in err
    monkeypatch.setattr(build, "find_server", lambda *a, **k: None)
    assert upstream.main(["--design", "pr30137"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "design 'baseline' is not built" in err


def test_a_missing_extra_is_named(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                  tmp_path: Path) -> None:
    assert upstream.missing_extra(["json"]) is None
    # (only modules every Python has, then the missing one: the test does not depend on which
    # extras this environment installed)
    monkeypatch.setattr(upstream, "NEEDS", {"json": "upstream", "pcspec_no_such_module": "upstream"})
    assert upstream.missing_extra() == ("llama.cpp's server tests need pcspec_no_such_module: install the upstream "
                                        "extra (pip install 'pcspec[upstream]')")
    binary = tmp_path / "llama-server"
    binary.write_text("")
    monkeypatch.setattr(build, "find_server", lambda *a, **k: binary)
    assert upstream.main(["--design", "baseline"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "install the upstream extra" in err


def _sdist() -> Path:
    t = build.tree_of(build.DEFAULT_TREE)
    return build.cache_root() / "sdist" / f"{t.archive_stem}.tar.gz"


@pytest.mark.slow
def test_a_test_file_the_tree_lacks_is_one_line_exit_2(capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    if not _sdist().is_file():
        pytest.skip(f"the October sdist is not cached ({_sdist()})")
    binary = tmp_path / "llama-server"
    binary.write_text("")
    monkeypatch.setattr(build, "find_server", lambda *a, **k: binary)
    monkeypatch.setattr(upstream, "missing_extra", lambda *a: None)
    assert upstream.main(["--design", "baseline", "--tests", "unit/test_nosuch.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "has no test file unit/test_nosuch.py" in err


@pytest.mark.live
@pytest.mark.slow
def test_upstream_test_basic_on_baseline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    if build.find_server() is None:
        pytest.skip("no baseline build (python -m pcspec.live.build)")
    if upstream.missing_extra():
        pytest.skip(str(upstream.missing_extra()))
    rc = upstream.main(["--design", "baseline", "--tests", "unit/test_basic.py", "--json", "--out", str(tmp_path)])
    assert rc == 0  # baseline alone: nothing to differ from
    doc = json.loads(capsys.readouterr().out)
    run = doc["runs"]["baseline"]
    assert sum(run["counts"].values()) == len(run["cases"]) >= 5
    assert run["cases"]["unit.test_basic::test_server_start_simple"]["outcome"] == "passed"
    assert run["cases"]["unit.test_basic::test_server_props"]["outcome"] == "passed"
    skipped = run["cases"]["unit.test_basic::test_load_split_model"]
    assert skipped["outcome"] == "skipped" and "no network" in skipped["message"]
    assert doc["comparisons"] == {}
    assert (tmp_path / "baseline.xml").is_file() and (tmp_path / "baseline.log").is_file()


def test_a_regression_exits_1_and_a_removed_failure_0(capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    outcomes = {"baseline": {"t": Case("passed"), "u": Case("failed", "m")},
                "pr30137": {"t": Case("passed"), "u": Case("passed")},
                "fixed": {"t": Case("failed", "assert 1 == 2"), "u": Case("failed", "m")}}
    monkeypatch.setattr(upstream, "extract_tests", lambda tree, dest: tmp_path)
    monkeypatch.setattr(upstream, "prepare", lambda tests_dir, models, line="baseline": {})
    monkeypatch.setattr(upstream, "run_design", lambda name, *a: upstream.Run(name, "bin", 1.0, 1, outcomes[name]))
    (tmp_path / "unit").mkdir()
    (tmp_path / "unit" / "test_x.py").write_text("")
    bins = {n: ("0c1e570", tmp_path / n) for n in ("baseline", "pr30137")}
    assert upstream._run_all(bins, ["unit/test_x.py"], None, False, 10) == 0
    assert "pr30137: removed u: failed on baseline, passed here (m)" in capsys.readouterr().out
    bins["fixed"] = ("0c1e570", tmp_path / "fixed")
    assert upstream._run_all(bins, ["unit/test_x.py"], None, True, 10) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["comparisons"]["fixed"]["regressions"] == [
        {"test": "t", "baseline": "passed", "design": "failed", "message": "assert 1 == 2"}]
    assert doc["runs"]["fixed"]["counts"] == {"passed": 0, "failed": 2, "error": 0, "skipped": 0}


def test_all_runs_every_unit_file_and_excludes_tests(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert upstream.main(["--all", "--tests", "unit/test_basic.py"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exclude each other" in err
    seen: list[list[str]] = []
    monkeypatch.setattr(upstream, "extract_tests", lambda tree, dest: tmp_path)
    monkeypatch.setattr(upstream, "prepare", lambda tests_dir, models, line="baseline": {})
    monkeypatch.setattr(upstream, "run_design",
                        lambda name, b, d, files, *a: seen.append(list(files)) or upstream.Run(name, "bin", 1.0, 0))
    (tmp_path / "unit").mkdir()
    for f in ("test_b.py", "test_a.py", "helper.py"):
        (tmp_path / "unit" / f).write_text("")
    assert upstream._run_all({"baseline": ("0c1e570", tmp_path / "m")}, None, None, True, 10) == 0
    assert seen == [["unit/test_a.py", "unit/test_b.py"]]
    assert json.loads(capsys.readouterr().out)["tests"] == ["unit/test_a.py", "unit/test_b.py"]


@pytest.mark.slow
def test_a_run_that_times_out_takes_its_servers_with_it(tmp_path: Path) -> None:
    import time

    d = _fake_suite(tmp_path)
    pidfile = tmp_path / "child.pid"
    (d / "unit" / "test_hang.py").write_text(
        "import subprocess, time\n\ndef test_hang():\n"
        f"    p = subprocess.Popen(['sleep', '60'])\n    open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
        "    time.sleep(60)\n")
    t0 = time.monotonic()
    with pytest.raises(RuntimeError, match="design baseline: timed out after 5 s"):
        upstream.run_design("baseline", tmp_path / "llama-server", d, ["unit/test_hang.py"], {}, tmp_path, 5)
    assert time.monotonic() - t0 < 30
    pid = int(pidfile.read_text())
    time.sleep(0.2)
    status = Path(f"/proc/{pid}/status")
    # the server-like child is gone too: dead (a zombie until whoever adopted it reaps it) or reaped
    assert not status.exists() or "State:\tZ" in status.read_text()


REGRESSIONS = "unit/test_prompt_cache_checkpoints.py"  # the file patches/november-tests/0016 adds


def test_each_design_is_compared_with_the_unpatched_build_of_its_tree() -> None:
    assert [upstream.reference_of(n) for n in ("baseline", "pr30137", "pr27451", "fixed")] == ["baseline"] * 4
    assert [upstream.reference_of(n) for n in ("november", "pr30137@november", "fixed@november")] == [
        "pr30137@november"] * 3
    # a line's reference first, then its designs by their canonical names, once each; lines in the
    # order they are first named
    assert upstream.groups_of(["fixed@november", "fixed", "november", "fixed@november"]) == {
        "pr30137@november": ["pr30137@november", "fixed@november"], "baseline": ["baseline", "fixed"]}
    assert upstream.groups_of(["november"]) == {"pr30137@november": ["pr30137@november"]}
    # no --design: the October line, as before the November designs existed
    assert upstream.OCTOBER == ("baseline", "pr30137", "pr27451", "fixed")
    with pytest.raises(upstream.UpstreamError, match="unknown design 'nosuch'"):
        upstream.reference_of("nosuch")


def test_the_november_line_has_its_test_patch_and_october_none() -> None:
    assert set(upstream.TEST_PATCHES) == {"pr30137@november"}
    (patch,) = upstream.TEST_PATCHES["pr30137@november"]
    text = (upstream.PATCH_DIR / patch).read_text()
    touched = [line.split()[-1] for line in text.splitlines() if line.startswith("diff --git ")]
    # tests only: no design's build changes, nothing to rebuild
    assert touched and all(t.startswith("b/tools/server/tests/") for t in touched), touched
    assert f"b/tools/server/tests/{REGRESSIONS}" in touched


def test_binaries_put_each_reference_before_its_designs(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: list[str] = []

    def find(tree: str, patches: object = (), flags: object = ()) -> Path:
        asked.append(tree)
        return tmp_path / f"{tree}-{len(asked)}"

    monkeypatch.setattr(build, "find_server", find)
    bins = upstream._binaries(["fixed@november", "pr27451"])
    assert list(bins) == ["pr30137@november", "fixed@november", "baseline", "pr27451"]
    assert [t for t, _ in bins.values()] == ["b11549", "b11549", "0c1e570", "0c1e570"]


def test_a_november_design_is_compared_with_the_november_server(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                tmp_path: Path) -> None:
    outcomes = {"pr30137@november": {"t": Case("passed"), "r": Case("failed", "assert 0 == 7")},
                "fixed@november": {"t": Case("passed"), "r": Case("passed")},
                "baseline": {"t": Case("failed", "m"), "r": Case("passed")},
                "fixed": {"t": Case("failed", "m"), "r": Case("passed")}}
    patched: list[tuple[Path, tuple[str, ...]]] = []
    monkeypatch.setattr(upstream, "extract_tests", lambda tree, dest: tmp_path / tree)
    monkeypatch.setattr(upstream, "apply_test_patches", lambda d, patches: patched.append((d, tuple(patches))))
    monkeypatch.setattr(upstream, "prepare", lambda tests_dir, models, line="baseline": {})
    monkeypatch.setattr(upstream, "run_design", lambda name, *a: upstream.Run(name, "bin", 1.0, 1, outcomes[name]))
    for tree in ("b11549", "0c1e570"):
        (tmp_path / tree / "unit").mkdir(parents=True)
        (tmp_path / tree / "unit" / "test_x.py").write_text("")
    bins = {n: (t, tmp_path / n) for n, t in (("pr30137@november", "b11549"), ("fixed@november", "b11549"),
                                              ("baseline", "0c1e570"), ("fixed", "0c1e570"))}
    assert upstream._run_all(bins, ["unit/test_x.py"], None, True, 10) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["references"] == {"pr30137@november": "pr30137@november", "fixed@november": "pr30137@november",
                                 "baseline": "baseline", "fixed": "baseline"}
    # fixed@november is compared with the November server, not with the October baseline
    assert doc["comparisons"]["fixed@november"]["removed"] == [
        {"test": "r", "baseline": "failed", "design": "passed", "message": "assert 0 == 7"}]
    assert doc["comparisons"]["fixed@november"]["regressions"] == []
    assert doc["comparisons"]["fixed"] == {"regressions": [], "removed": [], "changed": []}
    assert set(doc["comparisons"]) == {"fixed@november", "fixed"}
    assert patched == [(tmp_path / "b11549", upstream.TEST_PATCHES["pr30137@november"])]
    assert doc["lines"]["pr30137@november"]["test_patches"] == list(upstream.TEST_PATCHES["pr30137@november"])
    assert upstream._run_all(bins, ["unit/test_x.py"], None, False, 10) == 0
    out = capsys.readouterr().out.splitlines()
    # the counts side by side, each line's reference first
    assert out[0].split() == ["pr30137@november", "fixed@november"]
    assert out[1].split() == ["passed", "1", "2"] and out[2].split() == ["failed", "1", "0"]
    assert out[5].split() == ["seconds", "1", "1"]
    assert out[6].split() == ["baseline", "fixed"]
    assert ("fixed@november: removed r: failed on pr30137@november, passed here (assert 0 == 7)" in out
            and "fixed: every test as on baseline" in out)


def test_the_november_line_gives_the_speculative_tests_their_models(tmp_path: Path) -> None:
    pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")
    from pcspec.live.models import model_key

    october = tmp_path / "october"
    november = tmp_path / "november"
    october.mkdir()
    november.mkdir()
    assert upstream.prepare(october, tmp_path / "models") == {
        "tinyllama2": str(tmp_path / "models" / model_key("kv-text", 0))}
    assert not list((october / "tmp").iterdir())
    models = upstream.prepare(november, tmp_path / "models", "pr30137@november")
    assert models["stories15m_moe"] == models["tinyllama2"]  # unit/test_speculative.py's target
    # its draft, which the fixture's download_file keeps when the file is there
    draft = november / "tmp" / "stories15M-q4_0.gguf"
    assert draft.read_bytes() == Path(models["tinyllama2"]).read_bytes()
    assert (november / f"{upstream.PLUGIN_NAME}.py").read_text() == upstream.PLUGIN


def _sdist_of(tree: str) -> Path:
    t = build.tree_of(tree)
    return build.cache_root() / "sdist" / f"{t.archive_stem}.tar.gz"


@pytest.mark.slow
def test_the_november_test_patch_applies_to_the_b11549_tests(tmp_path: Path) -> None:
    if not _sdist_of("b11549").is_file():
        pytest.skip(f"the b11549 sdist is not cached ({_sdist_of('b11549')})")
    tests_dir = upstream.extract_tests("b11549", tmp_path)
    assert (tests_dir.parents[2] / "gguf-py" / "gguf" / "gguf_writer.py").is_file()  # the test writes its models
    upstream.apply_test_patches(tests_dir, upstream.TEST_PATCHES["pr30137@november"])
    assert (tests_dir / REGRESSIONS).is_file()
    assert "ctx_checkpoints: int | None = None" in (tests_dir / "utils.py").read_text()
    with pytest.raises(upstream.UpstreamError, match="does not apply"):  # twice: refused, not reversed
        upstream.apply_test_patches(tests_dir, upstream.TEST_PATCHES["pr30137@november"])


@pytest.mark.live
@pytest.mark.slow
def test_the_regression_tests_fail_on_november_and_pass_on_fixed_november(capsys: pytest.CaptureFixture[str],
                                                                          tmp_path: Path) -> None:
    from pcspec.live.designs import design_of

    for name in ("pr30137@november", "fixed@november"):
        d = design_of(name)
        if build.find_server(d.tree, d.patch_paths(), d.flags) is None:
            pytest.skip(f"not built: python -m pcspec.live.build --design {name}")
    if upstream.missing_extra():
        pytest.skip(str(upstream.missing_extra()))
    rc = upstream.main(["--design", "fixed@november", "--tests", REGRESSIONS, "--json", "--out", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0  # removed failures only, no regression
    november, fixed = (doc["runs"][n]["cases"] for n in ("pr30137@november", "fixed@november"))
    assert set(november) == set(fixed) and len(november) == 7
    assert {t: c["outcome"] for t, c in november.items()} == dict.fromkeys(november, "failed")
    assert {t: c["outcome"] for t, c in fixed.items()} == dict.fromkeys(fixed, "passed")
    assert sorted(d["test"] for d in doc["comparisons"]["fixed@november"]["removed"]) == sorted(november)
