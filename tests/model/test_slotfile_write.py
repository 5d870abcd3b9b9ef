"""`pcspec slotfile write`: the bytes are the model's own save, from tokens or after a trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pcspec.cli import main
from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import get_design
from pcspec.model.server import Server
from pcspec.model.slotfile import read_slot_file
from tests.support.common import TRACE_HEADER, trace_text

TOKENS = list(range(1, 21))


@pytest.fixture(autouse=True)
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)


def model_save(cfg: Config, tokens: list[int]) -> bytes:
    """What the modelled server writes, done by hand: one request, run, POST /slots/0?action=save."""
    srv = Server(cfg, get_design("fixed"))
    srv.request(tuple(tokens), n_predict=1, id_slot=0)
    srv.run()
    srv.slot_action("save", 0, "x")
    return srv.files["x"]


def test_from_tokens_is_the_model_save(capsys: pytest.CaptureFixture[str]) -> None:
    config = {"memory": "recurrent", "checkpoint_min_step": 4}
    assert main(["slotfile", "write", "s.bin", "--tokens", *map(str, TOKENS), "--config", json.dumps(config)]) == 0
    data = Path("s.bin").read_bytes()
    assert data == model_save(Config(memory=MemoryKind.RECURRENT, checkpoint_min_step=4), TOKENS)
    f = read_slot_file(data)
    assert f.tokens == TOKENS and f.appendix_status == "valid" and f.checkpoints
    assert "wrote s.bin: " in capsys.readouterr().out
    assert main(["slotfile", "inspect", "s.bin"]) == 0


def test_from_a_trace_saves_the_slot_when_idle(capsys: pytest.CaptureFixture[str]) -> None:
    # The trace ends mid-prompt: the save waits until the slot is idle, as the server defers it.
    Path("t.jsonl").write_text(trace_text({"op": "request", "tokens": TOKENS, "n_predict": 1}))
    assert main(["slotfile", "write", "s.bin", "--trace", "t.jsonl", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["variant"] == "baseline" and out["slot"] == 0 and out["tokens"] == len(TOKENS)
    assert read_slot_file(Path("s.bin").read_bytes()).tokens == TOKENS


def test_the_file_a_trace_saved_and_damaged(capsys: pytest.CaptureFixture[str]) -> None:
    Path("t.jsonl").write_text(
        trace_text(
            {"op": "request", "tokens": TOKENS, "n_predict": 1},
            {"op": "run"},
            {"op": "slot_save", "id_slot": 0, "filename": "a.bin"},
            {"op": "corrupt_file", "filename": "a.bin", "offset": 0, "data": [0]},
        )
    )
    assert main(["slotfile", "write", "s.bin", "--trace", "t.jsonl", "--saved", "a.bin"]) == 0
    assert "a restore refuses it: " in capsys.readouterr().out
    assert main(["slotfile", "inspect", "s.bin"]) == 2
    assert "bad magic" in capsys.readouterr().err
    assert main(["slotfile", "write", "s.bin", "--trace", "t.jsonl", "--saved", "b.bin"]) == 2
    assert "files it saved: a.bin" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--tokens", "1", "--slot", "1"], "--slot: slot 1 does not exist"),
        (["--tokens", *map(str, range(5000))], "kept 0 of the 5000 tokens"),
        (["--trace", "t.jsonl", "--config", "{}"], "--config goes with --tokens"),
        (["--tokens", "1", "--saved", "a.bin"], "--saved goes with --trace"),
        (["--trace", "t.jsonl", "--slot", "3"], "the trace's server has 1 slot(s)"),
    ],
)
def test_refused(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    Path("t.jsonl").write_text(trace_text(header=TRACE_HEADER))
    assert main(["slotfile", "write", "s.bin", *argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1
    assert not Path("s.bin").exists()
