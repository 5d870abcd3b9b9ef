"""The ownership graph (networkx) and REF-1 agree; DOT output names every holder."""

from __future__ import annotations

from pcspec.model.config import Config, MemoryKind
from pcspec.model.designs import DESIGNS
from pcspec.model.ownership import graph, to_dot
from pcspec.model.server import Server
from pcspec.properties.mutants import MUTANTS
from pcspec.properties.refs import ref1_refcounts_match_holders

CFG = Config(memory=MemoryKind.RECURRENT, n_ctx_slot=64, n_batch=8, n_ubatch=2, n_ctx_checkpoints=3,
             checkpoint_min_step=2, rs_bytes=64, n_slots=2, cache_ram=-1)


def _run(srv: Server) -> None:
    for toks in ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12], [1, 2, 3, 4, 5, 6, 7, 8, 20, 21, 22], [30, 31, 32, 33]):
        srv.request(tuple(toks), spans=(8,) if toks[0] == 1 else (), id_slot=0)
        srv.run()


def test_graph_in_degrees_are_the_refcounts() -> None:
    for v in DESIGNS.values():
        srv = Server(CFG, v)
        _run(srv)
        g = graph(srv)
        for node, data in g.nodes(data=True):
            obj = data.get("obj")
            if obj is not None:
                assert obj.refs == g.in_degree(node), (v.name, node)
        assert not ref1_refcounts_match_holders(srv, [])
        dot = to_dot(g)
        assert dot.startswith("digraph ownership") and "slot:0" in dot


def test_free_shared_mutant_frees_what_a_slot_holds() -> None:
    srv = Server(CFG, MUTANTS["mutant:free-shared"])
    srv.request(tuple(range(1, 13)), spans=(8,), id_slot=0)
    srv.run()
    srv.request((40, 41, 42), id_slot=1)  # idle caching saves slot 0, which keeps its checkpoints
    srv.run()
    assert srv.cache is not None and srv.cache.entries and srv.slots[0].prompt.checkpoints
    assert not ref1_refcounts_match_holders(srv, [])
    for e in list(srv.cache.entries):
        srv.cache.evict(e, "test")
    assert any("freed but still held" in m for m in ref1_refcounts_match_holders(srv, []))
