"""pcspec live against the newest builds pcspec knows (b11549, b11434): a short fuzzed session per
model kind under the build's own rule set, the slot files b11549 writes (state-sequence version
4, with the checkpoint appendix) read exactly, and a slot file of one version refused by a
server of the other, as the model refuses it.

Each test skips when its build is not cached: ``pcspec build --tree b11549``
(about 7 minutes from cold on 2 cores, docs/LIVE.md; the October server for the cross-version
test: ``pcspec build``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pcspec.live.build import find_server

pytestmark = pytest.mark.live  # real llama-server builds

NEWEST = find_server("b11549")
B11434 = find_server("b11434")
OCTOBER = find_server()
pytest.importorskip("gguf", reason="pip install gguf (the live models are made with it)")

from pcspec.live.campaign import campaign  # noqa: E402
from pcspec.live.client import Client  # noqa: E402
from pcspec.live.models import KINDS, ensure_model  # noqa: E402
from pcspec.live.process import Flags, ServerProcess  # noqa: E402
from pcspec.model.state_versions import RESTORE_LOAD_FAILED  # noqa: E402
from tests.support.live import Found, explained, replay  # noqa: E402

SESSION_REQUESTS = 24
# one slot, checkpoints 16 tokens apart, so that a 300-token prompt leaves several in the slot
FLAGS = Flags(n_slots=1, n_ctx=2048, n_batch=64, n_ubatch=32, cache_ram_mib=8, ctx_checkpoints=4,
              checkpoint_min_step=16)
PROMPT = [128 + (11 * i + 3) % 128 for i in range(300)]


def _need(binary: Path | None, how: str) -> Path:
    if binary is None:
        pytest.skip(f"not built: run `pcspec build {how}`")
    return binary


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("models")


@pytest.mark.parametrize("build", ["b11549", "b11434"])
@pytest.mark.parametrize("kind", KINDS)
def test_short_live_session_on_a_newer_build(build: str, kind: str, models: Path, tmp_path: Path) -> None:
    """Every request answered, checked against the model under the build's rule set (the
    binary names its build, ``pcspec live`` picks the rule set from it), the log checker and
    the uncached answer; every finding explained."""
    binary = _need(NEWEST if build == "b11549" else B11434, f"--tree {build}")
    rep = campaign(binary, kind, models, tmp_path, seed=11, requests=SESSION_REQUESTS, seconds=240,
                   run_requests=SESSION_REQUESTS, timeout=15, do_shrink=False, concurrency=False,
                   variant=build)
    assert rep.requests >= SESSION_REQUESTS
    assert rep.transparency_checks > 0 and rep.compared_segments > 0
    bad = [f"{r.finding.rule} at op {r.finding.op}: {r.finding.message} ({r.directory})" for r in rep.unexplained]
    assert not bad, "unexplained findings:\n" + "\n".join(bad)


def _save(binary: Path, kind: str, models: Path, workdir: Path) -> tuple[Path, str, int]:
    """A 300-token prompt on a fresh server, then ``POST /slots/0?action=save``: the file, the
    server's log and the reply's ``n_saved``."""
    server = ServerProcess(binary, ensure_model(kind, models), FLAGS, workdir, name=f"save-{kind}")
    with server:
        client = Client(server.url, timeout=30)
        assert client.completion(PROMPT, n_predict=1).ok
        reply = client.slot_action(0, "save", "f.bin")
        assert reply.ok, reply.error
    return server.slot_dir / "f.bin", server.log_bytes().decode("utf-8", "replace"), int(reply.data["n_saved"])


def _inspect(path: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-m", "pcspec", "slotfile", "inspect", "--json", str(path)],
                         capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    data: dict[str, object] = json.loads(out.stdout)
    return data


@pytest.mark.parametrize("kind", KINDS)
def test_slot_files_b11549_writes_are_read_exactly(kind: str, models: Path, tmp_path: Path) -> None:
    """A file b11549 saved, of every memory kind: version 4, every byte accounted for (the state
    parsed to its end, the appendix after it, nothing left over), the tokens the reply counted
    and, in the appendix, the checkpoints the slot held (the ``n_tokens`` of the log's
    ``created context checkpoint`` lines, the newest ``--ctx-checkpoints``; a KV cache makes
    none, and b11549 then appends nothing: server-context.cpp:2625-2627 of b11549)."""
    path, log, n_saved = _save(_need(NEWEST, "--tree b11549"), kind, models, tmp_path)
    info = _inspect(path)
    assert info["state_version"] == 4
    assert info["n_read"] == info["total_bytes"] == path.stat().st_size and info["trailing_bytes"] == 0
    tokens = info["tokens"]
    assert isinstance(tokens, dict) and tokens["count"] == n_saved
    created = [int(line.split("n_tokens = ")[1].split(",")[0]) for line in log.splitlines()
               if "created context checkpoint" in line]
    appendix = info["appendix"]
    assert isinstance(appendix, dict)
    assert (not created) == (kind == "kv")
    if not created:
        assert appendix["status"] == "absent", appendix
        return
    assert appendix["status"] == "valid", appendix
    records = appendix["checkpoints"]
    assert isinstance(records, list)
    assert [r["n_tokens"] for r in records] == created[-FLAGS.ctx_checkpoints:]


@pytest.mark.parametrize(("writer", "reader"), [("b11549", "0c1e570"), ("0c1e570", "b11549"),
                                                ("b11434", "0c1e570")])
def test_a_slot_file_of_another_version_is_refused(writer: str, reader: str, models: Path, tmp_path: Path) -> None:
    """``llama_state_seq_load_file`` takes only its own state-sequence version (src/llama-context.cpp
    :3331-3334 at 0c1e570, 3421-3423 of b11549): the restore answers ``Unable to restore slot: No
    available space in KV cache or invalid slot save file`` and clears the slot, and the log
    names the file's version. The model refuses the same file with the same answer
    (tests/model/test_rule_sets.py: test_a_slot_file_is_restored_by_a_build_of_its_version_only)."""
    builds = {"b11549": (NEWEST, "--tree b11549"), "b11434": (B11434, "--tree b11434"), "0c1e570": (OCTOBER, "")}
    w, r = _need(*builds[writer]), _need(*builds[reader])
    path, _log, _n = _save(w, "swa", models, tmp_path / "w")
    server = ServerProcess(r, ensure_model("swa", models), FLAGS, tmp_path / "r", name="restore")
    with server:
        shutil.copy(path, server.slot_dir / "f.bin")
        client = Client(server.url, timeout=30)
        reply = client.slot_action(0, "restore", "f.bin")
        log = server.log_bytes().decode("utf-8", "replace")
        after = client.completion(PROMPT[:40], n_predict=1)
    assert not reply.ok and f"Unable to restore slot: {RESTORE_LOAD_FAILED}" in str(reply.error), reply
    version = 4 if writer != "0c1e570" else 3
    assert f"unknown (magic, version) for sequence state file: 67677371, {version:08x}" in log
    assert after.ok and after.data.get("timings", {}).get("cache_n", 0) == 0  # the slot was cleared


def _replayed(binary: Path, build: str, name: str, models: Path, tmp_path: Path) -> Found:
    """The workload ``name`` run on ``binary``, compared with the model under ``build``'s rules."""
    return explained(replay(binary, name, models, tmp_path, variant=build))


@pytest.mark.parametrize("build", ["b11549", "b11434"])
def test_f3_is_gone_where_the_file_carries_the_checkpoints(build: str, models: Path, tmp_path: Path) -> None:
    """docs/FINDINGS.md, F3 on the newer builds: a 300-token SWA prompt leaves checkpoints, the
    slot is saved and restored, and a prompt sharing 270 tokens follows. b11434 writes no
    appendix: the restored slot has no checkpoint and the prompt is re-processed whole (F3).
    b11549 appends the checkpoints and restores them ("restored 2 context checkpoint(s)"): the
    one at n_tokens = 236 is restored and nothing is thrown away."""
    binary = _need(NEWEST if build == "b11549" else B11434, f"--tree {build}")
    found = _replayed(binary, build, "found/f3-swa-restore-with-checkpoints.jsonl", models, tmp_path)
    if build == "b11549":
        assert found == [], found
    else:
        assert [(c, (w or "")[:2]) for c, w in found] == [("waste:restore-extend", "F3")], found


@pytest.mark.parametrize(("name", "rule", "why"), [
    ("f1-pinned-busy-livelock.jsonl", "no-answer", "F1"),
    ("f2-swa-off-by-one.jsonl", "transparency", "F2"),
    ("found/f3-swa-restore-extend-4ops.jsonl", "waste:restore-extend", "F3"),
    ("found/f4-recurrent-unused-checkpoint.jsonl", "waste:unused-checkpoint", "F4"),
])
def test_the_findings_still_happen_on_b11549(name: str, rule: str, why: str, models: Path, tmp_path: Path) -> None:
    """F1, F2, F4, and F3 where the file has no checkpoint to carry (--ctx-checkpoints 0), from
    the workloads the fuzzer shrank on the October server, replayed on b11549 (docs/FINDINGS.md,
    "On the newer builds")."""
    found = _replayed(_need(NEWEST, "--tree b11549"), "b11549", name, models, tmp_path)
    assert any(c == rule and (w or "").startswith(why) for c, w in found), found


@pytest.mark.parametrize("build", ["b11549", "b11434", "0c1e570"])
def test_f5_hybrid_unified_resume_on_every_build(build: str, models: Path, tmp_path: Path) -> None:
    """docs/FINDINGS.md, F5, shrunk by the b11434 campaign to 3 requests: on the hybrid model
    with ``--kv-unified -np 2``, a 249-token prompt (slot 1), an unrelated 251-token one (slot 0;
    the first goes to the cache), then the first extended to 355 tokens: it is loaded from the
    cache into slot 1, slot 0 is saved and cleared, and the answer is 0.039 away from the
    uncached one, on every build. With one stream per slot nothing differs (the same requests
    with ``--no-kv-unified``: tests/data/live/found has only the failing form)."""
    builds = {"b11549": (NEWEST, "--tree b11549"), "b11434": (B11434, "--tree b11434"), "0c1e570": (OCTOBER, "")}
    binary = _need(*builds[build])
    rules = "october" if build == "0c1e570" else build
    found = _replayed(binary, rules, "found/f5-hybrid-unified-resume.jsonl", models, tmp_path)
    assert [(c, (w or "")[:2]) for c, w in found] == [("transparency", "F5")], found
