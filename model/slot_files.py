"""``POST /slots/{id}?action=save|restore|erase`` (server-context.cpp: handle_slots_action).

Files are byte-exact slot files (``pcspec.model.slotfile``) kept in the server's in-memory
disk (``Server.files``). The opaque sequence-state blobs are, in the model, a compact
self-delimiting encoding of the symbolic state (``encode_content``): a real ``state_write``
layout would cost the modelled bytes, and nothing in the server looks inside the blob except
``state_read``, which the model mirrors by decoding it.

Semantics as of #30137's merged diff (November 2026: #26004's appendix as #30137 adapted it):

* save writes the target state and, when the slot has checkpoints, the SCKP appendix; the
  draft state is not saved (the C++ never saves it);
* restore fails (400, slot cleared) on a bad header or tokens, a prompt that does not fit,
  or a state that does not load; a bad appendix is ignored with a reason; restored
  checkpoints get ``id_task = -1`` and are capped at the last ``n_ctx_checkpoints``; one
  draft checkpoint is test-loaded and the draft sequence is then removed, and
  the draft data of all restored checkpoints is dropped if it did not fit;
* a state whose cell count is 0 (a file saved from an empty slot) clears nothing in the C++;
* a design may clear the sequence before restoring, refuse a file or a checkpoint record, and
  bring the draft context to the restored tokens (``Design.file_restore_begin``,
  ``file_restore_refuses``, ``file_checkpoint_refused``, ``sync_draft``: ``fixed`` does all four).
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING

from pcspec.model import events as ev
from pcspec.model.checkpoint import Checkpoint, drop_all, hold
from pcspec.model.config import MemoryKind
from pcspec.model.errors import PcspecError
from pcspec.model.heap import Abort, BadAlloc, Buffer
from pcspec.model.memory import FULL, PARTIAL_ONLY, StateImage
from pcspec.model.processing import GEN_SPAN, VOCAB_GEN
from pcspec.model.slotfile import (
    HEADER_BYTES,
    FileCheckpoint,
    SlotFile,
    encode_appendix,
    read_slot_file,
    write_slot_file,
)

if TYPE_CHECKING:
    from pcspec.model.server import Server
    from pcspec.model.slot import Slot

_MAGIC = b"PCSY"
_KINDS = list(MemoryKind)
_TAG_IMAGE, _TAG_SPEC, _TAG_GARBAGE = 1, 2, 0


# -- the symbolic blob codec ----------------------------------------------------------------------


def encode_content(content: object, unwritten: bool = False) -> bytes:
    """A self-delimiting blob: ``PCSY``, u32 total length, u8 tag, then the identity (for an
    image whose SWA cells lie out of position order, that order after it)."""
    body: bytes
    if unwritten:
        body = bytes([_TAG_GARBAGE])
    elif isinstance(content, StateImage):
        attn = content.attn
        part = content.part
        body = struct.pack("<BBBi", _TAG_IMAGE, _KINDS.index(content.kind), content.scope, content.part_lo)
        for seq in (attn, part):
            if seq is None:
                body += struct.pack("<i", -1)
            else:
                body += struct.pack(f"<i{len(seq)}i", len(seq), *seq)
        order = content.swa_order
        if list(order) != sorted(order):  # the SWA cells' write order, when not ascending
            body += struct.pack(f"<i{len(order)}i", len(order), *order)
    elif isinstance(content, tuple) and len(content) == 2 and content[0] == "spec":
        toks = content[1]
        body = struct.pack(f"<Bi{len(toks)}i", _TAG_SPEC, len(toks), *toks)
    else:
        body = bytes([_TAG_GARBAGE])
    return _MAGIC + struct.pack("<I", 8 + len(body)) + body


def decode_content(blob: bytes) -> object | None:
    """``state_read`` of a blob: the identity, or None when it does not parse."""
    if len(blob) < 9 or blob[:4] != _MAGIC or struct.unpack_from("<I", blob, 4)[0] != len(blob):
        return None
    tag = blob[8]
    try:
        if tag == _TAG_IMAGE:
            kind_i, scope, part_lo = struct.unpack_from("<BBi", blob, 9)
            if kind_i >= len(_KINDS) or scope not in (FULL, PARTIAL_ONLY):
                return None
            pos = 15
            seqs: list[tuple[int, ...] | None] = []
            for _ in range(2):
                (n,) = struct.unpack_from("<i", blob, pos)
                pos += 4
                if n == -1:
                    seqs.append(None)
                    continue
                if n < 0 or pos + 4 * n > len(blob):
                    return None
                seqs.append(struct.unpack_from(f"<{n}i", blob, pos))
                pos += 4 * n
            order: tuple[int, ...] = ()
            if pos < len(blob):
                (n,) = struct.unpack_from("<i", blob, pos)
                order = struct.unpack_from(f"<{n}i", blob, pos + 4) if n > 0 else ()
                pos += 4 + 4 * max(n, 0)
                part = seqs[1]
                if part is None or sorted(order) != list(range(part_lo, len(part))):
                    return None  # not the cells of the window: cell metadata that does not read
            if pos != len(blob):
                return None
            return StateImage(_KINDS[kind_i], scope, seqs[0], seqs[1], part_lo, order)
        if tag == _TAG_SPEC:
            (n,) = struct.unpack_from("<i", blob, 9)
            if n < 0 or 13 + 4 * n != len(blob):
                return None
            return ("spec", struct.unpack_from(f"<{n}i", blob, 13))
    except struct.error:
        return None
    return None


def symbolic_state_size(data: bytes, at: int) -> int | None:
    """The length of the model's symbolic state blob at ``data[at:]`` (its own length field),
    or None when no such blob starts there: what the model's ``state_read`` consumes."""
    if at + 8 > len(data) or data[at : at + 4] != _MAGIC:
        return None
    size: int = struct.unpack_from("<I", data, at + 4)[0]
    return size if size >= 4 else None


def _peek_state_size(data: bytes) -> int | None:
    """What the target's ``state_read`` will consume: the blob's own length field."""
    if len(data) < HEADER_BYTES:
        return None
    (n_words,) = struct.unpack_from("<I", data, 8)
    return symbolic_state_size(data, HEADER_BYTES + 4 * n_words)


# -- actions -----------------------------------------------------------------------------------------


def handle(srv: Server, action: str, id_slot: int, filename: str) -> None:
    """An action on an idle slot (``Server`` defers one on a processing slot first)."""
    slot = srv.slots[id_slot]
    if action == "erase":  # server-context.cpp:2641-2663
        srv.last_result = {"n_erased": slot.prompt.n_tokens}
        slot.prompt_clear(srv)
        return
    if action == "save":
        save(srv, slot, filename)
    elif action == "restore":
        restore(srv, slot, filename)
    else:
        raise PcspecError(f"unknown slot action {action!r} (save, restore, erase)")


def _file_checkpoint(ck: Checkpoint) -> tuple[FileCheckpoint, int]:
    unwritten = 0
    blobs: list[bytes] = []
    for b in (ck.tgt, ck.dft, ck.spec):
        if b is None:
            blobs.append(b"")
            continue
        unwritten += b.unwritten
        blobs.append(encode_content(b.content if b.complete else None, unwritten=b.unwritten > 0))
    return FileCheckpoint(ck.n_tokens, ck.pos_min, ck.pos_max, *blobs), unwritten


def save(srv: Server, slot: Slot, filename: str) -> None:
    """Slot save: ``llama_state_seq_save_file`` of the target, then the appendix."""
    img = srv.ctx_tgt.state_write(slot.id, FULL)
    records: list[FileCheckpoint] = []
    unwritten = 0
    # The October build writes no checkpoint appendix (it came with #26004, after that tree).
    for ck in slot.prompt.checkpoints if srv.design.rules.slot_file_appendix else []:
        rec, n = _file_checkpoint(ck)
        records.append(rec)
        unwritten += n
    # (the header carries the build's LLAMA_STATE_SEQ_VERSION: 3 at 0c1e570, 4 from b11434)
    data = write_slot_file(slot.prompt.tokens, encode_content(img), records,
                           state_version=srv.design.rules.state_seq_version)
    srv.files[filename] = data
    # (the count a design reports: Design.bytes_reported; the #26004 bug the author acknowledged,
    # July 2026, left the appendix out: the mutant appendix-uncounted)
    n_written = srv.design.bytes_reported(len(data), len(encode_appendix(records)))
    srv.last_result = {"n_saved": slot.prompt.n_tokens, "n_written": n_written}
    srv.heap.emit(ev.FileWrite(
        slot=slot.id,
        filename=filename,
        n_saved=slot.prompt.n_tokens,
        n_written=n_written,
        size=len(data),
        unwritten=unwritten,
        checkpoints=[(r.n_tokens, r.pos_min, r.pos_max) for r in records],
    ))


def _fail(srv: Server, slot: Slot, filename: str, reason: str) -> None:
    """ "Unable to restore slot: <reason>" -- the slot is cleared (prompt_clear)."""
    srv.heap.emit(ev.FileRestoreFailed(slot=slot.id, filename=filename, reason=reason))
    srv.last_result = {"error": reason}
    slot.prompt_clear(srv)


def trusting_walk(srv: Server, data: bytes, at: int | None) -> None:
    """A reader that allocates every appendix blob from its length field, unchecked (the
    mutant trust-size-field, at ``Design.file_read``); ``at``: where the appendix starts."""
    if at is None or at + 12 > len(data):
        return
    (count,) = struct.unpack_from("<I", data, at + 8)
    pos = at + 12
    for _ in range(min(count, 64)):
        pos += 16
        for _ in range(3):
            if pos + 8 > len(data):
                return
            (n,) = struct.unpack_from("<Q", data, pos)
            try:
                buf = srv.heap.allocate(n, "file", zero_init=False)
            except BadAlloc:
                raise Abort("load_slot_checkpoints", f"uncaught std::bad_alloc allocating {n} bytes") from None
            srv.heap.release(buf)
            pos += 8 + min(n, len(data))


def restore(srv: Server, slot: Slot, filename: str) -> None:
    """Slot restore (server-context.cpp:2576-2640; #30137's merged diff for the appendix).

    Order: the C++ loads the state (``llama_state_seq_load_file``, which reads the token
    words and the state together) and only then deserializes and checks the tokens
    (``server_tokens::deserialize``, the ``n_ctx`` check, ``validate``); any failure clears
    the slot (``prompt_clear``: tokens, checkpoints and both sequences). The model parses the
    whole file first and loads the state after: every failure still ends in the same cleared
    slot, so only the order of the events differs, not the state any property judges."""
    heap, cfg, design = srv.heap, srv.cfg, srv.design
    heap.emit(ev.FileRestoreBegin(slot=slot.id, filename=filename))
    data = srv.files.get(filename)
    if data is None:
        _fail(srv, slot, filename, "failed to open file")
        return
    try:
        parsed = read_slot_file(
            data,
            filename,
            design.appendix_cap(cfg.n_ctx_checkpoints),
            state_size=_peek_state_size(data),
            expected_version=design.rules.state_seq_version,  # this build's loader takes its own only
        )
    except PcspecError as exc:
        _fail(srv, slot, filename, exc.why)
        return
    design.file_read(srv, data, parsed.appendix_offset)
    if len(parsed.tokens) > cfg.n_ctx_slot:
        _fail(srv, slot, filename, "Restored prompt does not fit in the slot context")
        return
    img = decode_content(parsed.state)
    tgt = srv.ctx_tgt
    mem = tgt.seqs[slot.id]
    if heap.faults.hit("file.write.tgt") or not isinstance(img, StateImage) or img.kind != mem.kind:
        tgt.seq_rm(slot.id, -1)  # state_read failed: the destination sequence was removed
        _fail(srv, slot, filename, "No available space in KV cache or invalid slot save file")
        return
    tokens = tuple(parsed.tokens)
    if img.describes() != tokens and not (img.attn is not None and img.attn == tokens):
        # The server cannot see this (the blob is opaque to it); the model can, and keeps
        # the C++ behaviour: the tokens are installed as written.
        heap.emit(ev.FileSemanticMismatch(filename=filename))
    design.file_restore_begin(srv, slot)
    if img.describes() or img.attn:
        tgt.state_read(slot.id, img)  # state_read_meta runs seq_rm(dest) first, then loads
    # else: a state with cell_count == 0 clears nothing (llama-kv-cache.cpp: state_read)
    bad = invalid_token(tokens, cfg.n_vocab)
    if bad is not None:
        # server-context.cpp:2609-2611: restored.validate(ctx_tgt) after the state is loaded
        # (2596-2602); the throw lands in the catch that clears the slot (2616-2618)
        _fail(srv, slot, filename, f"Invalid tokens in slot save file: token {tokens[bad]} at index {bad}")
        return
    # (the C++ does not compare the state's positions with the tokens, so a token list that
    # still parses after corruption, a packed list whose marker became a legacy list, say, is
    # installed over a state of another length: fixed refuses it, Design.file_restore_refuses)
    why = design.file_restore_refuses(srv, slot, mem.n_tokens, len(tokens))
    if why is not None:
        tgt.seq_rm(slot.id, -1)
        _fail(srv, slot, filename, why)
        return
    slot.prompt.tokens = tokens  # slot.prompt.clear(), then the tokens are installed
    drop_all(heap, slot.prompt)
    slot.restored = None
    design.sync_draft(srv, slot)  # (the C++ leaves the draft as it is)
    _restore_checkpoints(srv, slot, parsed, filename)
    n_read = design.bytes_reported(parsed.n_read, parsed.appendix_bytes)
    srv.last_result = {"n_restored": len(tokens), "n_read": n_read}
    heap.emit(ev.FileRestore(
        slot=slot.id,
        filename=filename,
        n_restored=len(tokens),
        n_read=n_read,
        consumed=parsed.n_read,
        size=len(data),
        appendix=parsed.appendix_status,
    ))


def invalid_token(tokens: tuple[int, ...], n_vocab: int | None) -> int | None:
    """Index of the first id ``server_tokens::validate`` refuses for a vocabulary of
    ``n_vocab`` (``t >= n_vocab``, server-common.cpp:784; negative ids are refused when the
    file is read, ``slotfile._check_token_ids``); None with no vocabulary. The ids the model
    samples (``processing.sample_token``: VOCAB_GEN .. VOCAB_GEN + GEN_SPAN - 1) stand for
    tokens the real model sampled, so they are in any vocabulary."""
    if n_vocab is None:
        return None
    return next((i for i, t in enumerate(tokens)
                 if t >= n_vocab and not VOCAB_GEN <= t < VOCAB_GEN + GEN_SPAN), None)


def implausible(srv: Server, n_tokens: int, n_file_tokens: int, pos_min: int, pos_max: int,
                data_tgt: bytes) -> str | None:
    """Why a well-formed record (a checkpoint at ``n_tokens`` of a file of ``n_file_tokens``)
    cannot be a checkpoint of this server's memory (``fixed``'s ``Design.file_checkpoint_refused``).

    The C++ installs whatever parses; a wrong ``pos_min`` or ``n_tokens`` then steers the
    restore arithmetic into a ``seq_rm`` the memory refuses (an abort). A server knows its
    memory kind, so it can reject positions no checkpoint of it can have.
    """
    # A record whose length fields were damaged can still parse, with a payload cut short or
    # running into the next field. The server can dry-run the memory's ``state_read_meta``
    # over the target blob before trusting it; the model's equivalent is decoding the blob.
    # (A bad draft blob is handled as #30137's merged diff does: it test-loads one and drops
    # the draft data.)
    if not isinstance(decode_content(data_tgt), StateImage):
        return f"the target payload of the checkpoint at n_tokens {n_tokens} is not a state this server wrote"
    if not 1 <= n_tokens <= n_file_tokens or pos_max != n_tokens - 1:
        return f"checkpoint at n_tokens {n_tokens} with pos_max {pos_max} does not fit {n_file_tokens} tokens"
    kind = srv.cfg.memory
    if kind in (MemoryKind.RECURRENT, MemoryKind.HYBRID) and pos_min != pos_max:
        return f"a recurrent checkpoint has pos_min == pos_max (got [{pos_min}, {pos_max}])"
    if kind == MemoryKind.SWA and not max(0, pos_max - srv.cfg.swa_cells + 1) <= pos_min <= pos_max:
        return f"an SWA checkpoint spans at most {srv.cfg.swa_cells} cells (got [{pos_min}, {pos_max}])"
    return None


def _restore_checkpoints(srv: Server, slot: Slot, parsed: SlotFile, filename: str) -> None:
    heap, design = srv.heap, srv.design
    if not design.rules.slot_file_appendix:
        return  # October: the tokens come back with no checkpoint (prompt.clear(), 2614-2620)
    if parsed.appendix_status in ("truncated", "invalid"):
        heap.emit(ev.FileAppendixIgnored(filename=filename, reason=parsed.appendix_reason))
    records = parsed.checkpoints or []
    n_file = slot.prompt.n_tokens
    why = next((w for r in records
                if (w := design.file_checkpoint_refused(srv, r.n_tokens, n_file, r.pos_min, r.pos_max, r.data_tgt))),
               None)
    if why is not None:  # like the reader: a problem anywhere ignores the whole appendix
        heap.emit(ev.FileAppendixIgnored(filename=filename, reason=why))
        records = []
    restored: list[Checkpoint] = []
    for rec in records:
        ck = Checkpoint(heap.new_id(), rec.n_tokens, -1, rec.pos_min, rec.pos_max)
        bufs: list[Buffer | None] = []
        for role, blob, ctx in (("ckpt_tgt", rec.data_tgt, srv.ctx_tgt), ("ckpt_dft", rec.data_dft, srv.ctx_dft),
                                ("ckpt_spec", rec.data_spec, None)):
            if not blob:
                bufs.append(None)
                continue
            content = decode_content(blob)
            # The buffer has the payload's size in a real file: the state's size as the context
            # wrote it (server-context.cpp:2684-2686 of b11549 read it by its length field), not
            # the length of the model's encoding of it; the prompt cache counts these bytes
            mem = ctx.seqs[slot.id] if ctx is not None else None
            size = (mem.image_size(content) if mem is not None and isinstance(content, StateImage)
                    and content.kind == mem.kind else len(blob))
            buf = heap.allocate(size, role, design.zero_init)
            heap.fill(buf, content if content is not None else ("garbage", filename), size)
            bufs.append(buf)
        ck.tgt, ck.dft, ck.spec = bufs
        restored.append(ck)
    dft = srv.ctx_dft
    if dft is not None and restored and restored[-1].dft is not None:
        # Test-load one draft checkpoint, then remove the draft sequence (#30137's merged diff).
        ok = dft.set_data(heap, slot.id, restored[-1].dft, "ckpt.write.dft") == restored[-1].dft.size
        dft.seq_rm(slot.id, -1)
        design.sync_draft(srv, slot)
        if not ok:
            heap.emit(ev.FileDraftDropped(filename=filename))
            for ck in restored:  # clear_dft: drops data_dft and data_spec
                heap.release(ck.dft)
                heap.release(ck.spec)
                ck.dft = ck.spec = None
    for ck in restored:
        hold(heap, slot.prompt, ck)  # the buffers' one reference each is the checkpoint's
