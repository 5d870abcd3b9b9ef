"""Judge one live run: what the server did against the oracles and the model.

A finding is a ``pcspec.core.results.Finding`` of kind ``divergence``: the server did something
else than the model or an oracle allows. ``rule`` is its class, ``at`` the operation where it
shows, ``message`` the detail, ``data`` its figures; ``to_json`` below writes it as live's
reports always have (``class``, ``op``, ``detail``, the figures). The classes, and what each
means:

=============================  ================================================================
``crash``                      the server process died (a GGML_ASSERT, a signal): a server bug
``no-answer``                  a request got no answer within the bound (a hang, a livelock)
``transparency``               cached and uncached top-k log-probabilities differ: the cached
                               state was not the state of its tokens (STATE-1 seen from outside)
``served``                     the reply's ``cache_n`` / ``prompt_n`` differ from the model's
``http``                       the server answered an error where the model did not, or back
``model:<record kind>``        the log's records of that kind differ from the model's
``model:slot_file_contents``   a saved file's tokens or appendix differ from the model's file
``logcheck:<rule>``            the log checker found the log breaking one of its rules
``waste:restore-extend``       a request extending a slot's restored tokens re-processed all
``waste:unused-checkpoint``    full re-processing while the slot held a checkpoint that is a
                               prefix of the prompt (observations: behaviour, not wrong output)
=============================  ================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pcspec.core.results import Finding, divergence
from pcspec.live.client import Reply, cache_n, prompt_n
from pcspec.live.compare import diff
from pcspec.live.driver import Observation, Run
from pcspec.live.ops import together
from pcspec.live.predict import Prediction, Predictor
from pcspec.live.schedule import read_schedule
from pcspec.live.slotfiles import Source, compare
from pcspec.live.transparency import Reference
from pcspec.live.waste import WasteWatch
from pcspec.logcheck import Options, check_events, parse_bytes
from pcspec.logcheck.logged import logged
from pcspec.logcheck.options import options_for
from pcspec.model.design import Design
from pcspec.model.logged import Logged, Served, SlotFile
from pcspec.model.processing import VOCAB_GEN

SERVER_BUGS = ("crash", "no-answer", "transparency")


def is_bug(f: Finding) -> bool:
    return f.rule in SERVER_BUGS


def is_observation(f: Finding) -> bool:
    return f.rule.startswith("waste:")


def to_json(f: Finding) -> dict[str, Any]:
    """Live's own field names for a finding (``class``, ``op``, ``detail``, then its figures)."""
    return {"class": f.rule, "op": f.at, "detail": f.message, **f.data}


@dataclass
class Analysis:
    findings: list[Finding] = field(default_factory=list)
    n_requests: int = 0
    n_checked: int = 0  # transparency checks made
    n_compared: int = 0  # segments compared with the model
    max_logprob_diff: float = 0.0
    predictor: Predictor | None = None

    def first(self, *, observations: bool = False) -> Finding | None:
        for f in self.findings:
            if observations or not is_observation(f):
                return f
        return None


def segments(run: Run) -> list[list[int]]:
    """Op indices that ran together: one synchronous op, or async requests and their wait."""
    obs = run.observations
    return [[obs[i].index for i in g] for g in together([o.op for o in obs])]


def server_records(log: bytes, obs_list: list[Observation]) -> list[Logged]:
    """The records of the server's log lines of these operations."""
    return list(logged(parse_bytes(log[obs_list[0].log_start:max(o.log_end for o in obs_list)]).events))


def _served(reply: Reply | None) -> Served | None:
    if reply is None or not reply.ok:
        return None
    c, p = cache_n(reply), prompt_n(reply)
    return None if c is None or p is None else Served(c, p)


def _slot_file(res: dict[str, Any] | None, ok: bool, action: str) -> SlotFile | None:
    """A slot-file action's result (the server's reply, or the model's) as the record."""
    if res is None:
        return None
    if not ok:
        return SlotFile("failed", None)
    v = res.get({"save": "n_saved", "restore": "n_restored", "erase": "n_erased"}[action])
    return SlotFile(action, int(v) if isinstance(v, int) else None)


# Record kinds not compared: how a cached prompt's checkpoints reach a slot after a load is
# not logged, and the model's context-shift erasures are one line in the log.
IGNORED: frozenset[str] = frozenset()


def analyse(run: Run, log: bytes, predictor: Predictor | None, reference: Reference | None,
            *, n_slots: int = 1, check_every: int = 1, logcheck: bool = True) -> Analysis:
    a = Analysis(n_requests=run.n_requests, predictor=predictor)
    ops = [o.op for o in run.observations]
    segs = segments(run)
    if run.fatal is not None:
        f = run.fatal
        a.findings.append(divergence("crash" if f.fatal == "crash" else "no-answer", f.index,
                                  f"the server {'died' if f.fatal == 'crash' else 'gave no answer'} "
                                  f"during operation {f.index} ({f.op.op})"))
    preds: list[Prediction] = []
    if predictor is not None:
        schedule = read_schedule(log.decode("utf-8", "replace"))
        lengths = {o.index: len(o.tokens) for o in run.observations if o.op.op == "request"}
        preds = predictor.follow(ops, segs, schedule, lengths)
    watch = WasteWatch(n_slots)
    for k, seg in enumerate(segs):
        obs_list = [run.observations[i] for i in seg]
        srv_recs = server_records(log, obs_list)
        for index, cls, detail in watch.observe(obs_list, srv_recs, log):
            a.findings.append(divergence(cls, index, detail))
        _judge_segment(a, run, obs_list, srv_recs, preds[k] if k < len(preds) else None, predictor)
        if reference is not None:
            for o in obs_list:
                if o.op.op == "request" and o.reply is not None and o.reply.ok and o.op.id % check_every == 0:
                    v = reference.check(o.tokens, o.reply, o.op.n_predict)
                    if v is None:
                        continue
                    a.n_checked += 1
                    a.max_logprob_diff = max(a.max_logprob_diff, v.max_diff)
                    if not v.ok:
                        a.findings.append(divergence("transparency", o.index, v.detail,
                                                     max_diff=round(v.max_diff, 4), step=v.step))
    if logcheck and log:
        _logcheck(a, run, log, logcheck_options(predictor.srv.design if predictor is not None else None))
    a.findings.sort(key=lambda f: (f.at, f.rule))
    return a


def _judge_segment(a: Analysis, run: Run, obs_list: list[Observation], srv_recs: list[Logged],
                   pred: Prediction | None, predictor: Predictor | None) -> None:
    first = obs_list[0].index
    if pred is None or predictor is None:
        return
    a.n_compared += 1
    for d in diff(srv_recs, pred.records, IGNORED):
        a.findings.append(divergence(f"model:{d.kind}", first, d.show(), difference=d.to_json()))
    for o in obs_list:
        op = o.op
        if op.op == "request":
            s_srv = _served(o.reply)
            s_mod = predictor.served.get(op.id)
            srv_err = o.reply is not None and o.reply.status not in (0, 200)
            mod_err = op.id in predictor.errors or s_mod is None
            if srv_err != mod_err and not o.fatal:
                a.findings.append(divergence("http", o.index, f"request {op.id}: server "
                                             f"{'error ' + o.reply.error if srv_err and o.reply else 'ok'}, model "
                                             f"{predictor.errors.get(op.id, 'no answer') if mod_err else 'ok'}"))
            elif s_srv is not None and s_mod is not None and s_srv != s_mod:
                a.findings.append(divergence("served", o.index, f"request {op.id}: server {s_srv.show()}, "
                                             f"model {s_mod.show()}"))
        elif op.op in ("slot_save", "slot_restore", "slot_erase"):
            action = op.op[5:]
            res = predictor.slot_results.get(o.index)
            sf_srv = _slot_file(o.reply.data if o.reply else None, o.reply is not None and o.reply.ok, action)
            sf_mod = _slot_file(res, res is not None and "error" not in res, action)
            if sf_srv is not None and sf_mod is not None and not sf_srv.matches(sf_mod):
                a.findings.append(divergence("model:slot_file", o.index,
                                             f"server {sf_srv.show()}, model {sf_mod.show()}"))
            mod_file = predictor.files.get(o.index)
            if o.file is not None and mod_file is not None:
                why = compare(o.file, mod_file, _sources(run, predictor, o.index), VOCAB_GEN)
                if why is not None:
                    a.findings.append(divergence("model:slot_file_contents", o.index,
                                                 f"{op.filename}: {why}"))


def _sources(run: Run, predictor: Predictor, before: int) -> list[Source]:
    """Each request's prompt and reply on both sides, of the requests sent before op ``before``."""
    out: list[Source] = []
    for o in run.observations[:before]:
        rid = o.op.id
        if o.op.op == "request" and rid in predictor.prompts:
            out.append((predictor.prompts[rid] + predictor.replies.get(rid, []),
                        run.prompts.get(rid, []) + run.replies.get(rid, [])))
    return out


def logcheck_options(variant: Design | None) -> Options:
    """The log checker's options for a server the model predicts under ``variant``
    (``pcspec.logcheck.options.options_for``: its rule set, the rules its points change)."""
    return options_for(variant)


def _logcheck(a: Analysis, run: Run, log: bytes, options: Options) -> None:
    result = check_events(parse_bytes(log).events, options)
    if not result.deviations:
        return
    # line -> op: the op whose log range holds the line's first byte
    starts = [0]
    for i, b in enumerate(log):
        if b == 10:
            starts.append(i + 1)
    for dv in result.deviations:
        off = starts[dv.line - 1] if 0 < dv.line <= len(starts) else 0
        op = next((o.index for o in run.observations if o.log_start <= off < max(o.log_end, o.log_start + 1)), -1)
        a.findings.append(divergence(f"logcheck:{dv.rule}", op, f"log line {dv.line}: {dv.message}",
                                     line=dv.line))

