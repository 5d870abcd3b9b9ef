"""The designs pcspec models, as real ``llama-server`` builds: a llama.cpp tree and the patches
that turn it into the design (docs/DESIGNS.md says what each patch is and where it departs from
the upstream change it ports).

============  ========  =================================================================
design        tree      patches (``pcspec/live/patches/<design>/``, applied with ``patch -p1``)
============  ========  =================================================================
``baseline``  0c1e570   none: the October tree as it is
``pr30137``   0c1e570   #30137 (reference-counted shared checkpoints), ported to 0c1e570
``pr27451``   0c1e570   #27451 (shared payload buffers, guarded cache-entry construction)
``fixed``     0c1e570   #30137's port, then pcspec's own design (the overrides of ``Fixed``)
============  ========  =================================================================

The November server, today's upstream master as near as a tree pip can fetch makes it, and
``fixed`` on it, are built from b11549 and named as the model names them, ``DESIGN@RULES``:

======================  ========  =======================================================
design                  tree      patches
======================  ========  =======================================================
``baseline@november``   b11549    the November invalidation (the code #30137 was merged on)
``pr30137@november``    b11549    the November invalidation (the code #30137 was merged on),
(also ``november``)               then the merged #30137 itself (``patches/november/``)
``fixed@november``      b11549    those two, then ``fixed``'s series rebased onto them
                                  (``patches/fixed-november/``), the slot-file checks included
======================  ========  =======================================================

Their builds name themselves ``build 11549 (november)`` (``Design.flags``), so that the log
checker and ``pcspec live`` choose the ``november`` rule set from the build line.

A design built on another's patches lists them first (``fixed``: ``pr30137/0001-...``), so each
patch file is kept once, in the folder of the design that introduced it.

The patch files are package data: an installed pcspec builds every design without a checkout.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pcspec.model.designs import renamed_error

# The patches live at the repository's top level (patches/), like model/, properties/ and
# proofs/; pcspec/live/patches is a symbolic link to it, so the wheel ships them as data.
PATCH_DIR = Path(__file__).resolve().parent / "patches"


class DesignUnavailable(ValueError):
    """A design name pcspec knows but cannot build, or one it does not know."""


@dataclass(frozen=True)
class Design:
    name: str
    tree: str  # a name of pcspec.live.build.TREES
    patches: tuple[str, ...]  # in order, relative to PATCH_DIR
    ports: str  # the upstream change the patches port ("" for none)
    # CMake flags of the build beyond the tree's (the November builds name their commit, which
    # the log checker reads: pcspec.logcheck.builds.KNOWN_BUILDS)
    flags: tuple[str, ...] = ()

    def patch_paths(self) -> tuple[Path, ...]:
        return tuple(PATCH_DIR / p for p in self.patches)


NOVEMBER_PATCHES = (
    "november/0001-server-erase-checkpoints-past-the-shared-prefix.patch",
    "november/0002-server-reference-counted-checkpoints.patch",
)
# fixed's series on the November server, one patch per override of Fixed, in order (the October
# series' 0012 is upstream there: the November invalidation is NOVEMBER_PATCHES' first).
FIXED_NOVEMBER_PATCHES: tuple[str, ...] = (
    "fixed-november/0003-server-no-cache-update-on-busy-pinned-slot.patch",
    "fixed-november/0004-server-unique-accounting-of-shared-checkpoints.patch",
    "fixed-november/0005-server-transactional-prompt-cache-save.patch",
    "fixed-november/0006-server-swa-checkpoint-payload-pos-min.patch",
    "fixed-november/0007-server-empty-pinned-slot-consults-cache.patch",
    "fixed-november/0008-server-drop-cache-entry-on-failed-load.patch",
    "fixed-november/0009-server-keep-cache-limit-on-bad-alloc.patch",
    "fixed-november/0010-server-contain-context-checkpoint-failures.patch",
    "fixed-november/0011-server-check-restored-slot-file-against-its-state.patch",
    "fixed-november/0012-server-sync-draft-context-on-slot-restore.patch",
    "fixed-november/0013-server-keep-restored-checkpoint.patch",
    "fixed-november/0014-server-resume-from-best-state.patch",
    "fixed-november/0015-server-check-slot-file-appendix-against-the-slot.patch",
)
NOVEMBER_FLAGS = ("-DLLAMA_BUILD_COMMIT=november",)

DESIGNS: dict[str, Design] = {
    d.name: d
    for d in (
        Design("baseline", "0c1e570", (), ""),
        Design("pr30137", "0c1e570", ("pr30137/0001-server-reference-counted-checkpoints.patch",),
               "#30137 (merge e152332a1)"),
        Design("pr27451", "0c1e570", ("pr27451/0001-server-share-checkpoint-state-harden-cache-oom.patch",),
               "#27451 (head 5c7018ed7)"),
        # pcspec's design, one patch per override of Fixed (docs/DESIGNS.md, "fixed"), on the port of #30137.
        Design("fixed", "0c1e570", (
            "pr30137/0001-server-reference-counted-checkpoints.patch",
            "fixed/0002-server-no-cache-update-on-busy-pinned-slot.patch",  # Fixed.cache_update_busy_slot
            "fixed/0003-server-unique-accounting-of-shared-checkpoints.patch",  # Fixed.entry_sizes, candidate_size
            "fixed/0004-server-transactional-prompt-cache-save.patch",  # Fixed.prompt_save, alloc_scope
            "fixed/0005-server-swa-checkpoint-payload-pos-min.patch",  # Fixed.checkpoint_pos_min
            "fixed/0006-server-empty-pinned-slot-consults-cache.patch",  # Fixed.update_cache_on_select
            "fixed/0007-server-drop-cache-entry-on-failed-load.patch",  # Fixed.load_entry
            "fixed/0008-server-keep-cache-limit-on-bad-alloc.patch",  # Fixed.limit_after_bad_alloc
            "fixed/0009-server-contain-context-checkpoint-failures.patch",  # Fixed.checkpoint_*_failed, ...
            "fixed/0010-server-check-restored-slot-file-against-its-state.patch",  # Fixed.file_restore_*
            "fixed/0011-server-sync-draft-context-on-slot-restore.patch",  # Fixed.sync_draft
            "fixed/0012-server-erase-checkpoints-past-the-shared-prefix.patch",  # Fixed.invalidated
            "fixed/0013-server-keep-restored-checkpoint.patch",  # Fixed.kept_checkpoint
            "fixed/0014-server-resume-from-best-state.patch",  # Fixed.resume, restore_choice
        ), ""),
        # The November server: b11549, the invalidation of the code #30137 was merged on, the
        # merged #30137 (docs/DESIGNS.md, "The November server").
        # #30137's parent on b11549: the November server without #30137 (pcspec bench compares the two).
        Design("baseline@november", "b11549", NOVEMBER_PATCHES[:1], "", NOVEMBER_FLAGS),
        Design("pr30137@november", "b11549", NOVEMBER_PATCHES, "#30137 (merge e152332a1) on b11549",
               NOVEMBER_FLAGS),
        Design("fixed@november", "b11549", (*NOVEMBER_PATCHES, *FIXED_NOVEMBER_PATCHES), "", NOVEMBER_FLAGS),
    )
}
# Other names of a design.
ALIASES: dict[str, str] = {"november": "pr30137@november"}

# The fault points (docs/DESIGNS.md, "Fault points"): two patches on src/, which no design's patch
# touches, so they apply after any design's; compiled in only with the CMake option, and a build
# without them never gets the patches: it stays the design's, byte for byte.
FAULTS_PATCHES = (
    "faults/0001-llama-fault-points-for-the-state-calls.patch",
    "faults/0002-llama-allocation-fault-points.patch",
)
FAULTS_FLAGS = ("-DLLAMA_FAULT_POINTS=ON",)
FAULTS_TREE = "0c1e570"
# LLAMA_FAULTS sites of the patches -> the model's fault sites they stand for (model/heap.py:
# Faults). ``alloc.SIZE`` is the n-th ``operator new`` of exactly SIZE bytes: it stands for the
# model's allocation site whose buffer has that size (``alloc_site``).
FAULT_SITES: dict[str, tuple[str, ...]] = {
    "state.write.short": ("state.write.short",),
    "state.read.partial": ("ckpt.write.tgt", "ckpt.write.dft"),
    "state.read.full": ("load.write.tgt", "load.write.dft"),
    "state.load.file": ("file.write.tgt",),
    "alloc.SIZE": ("ckpt.alloc", "save.alloc.main", "save.alloc.drft"),
}


def alloc_site(size: int, nth: int) -> str:
    """The ``LLAMA_FAULTS`` item that fails the ``nth`` allocation of a ``size``-byte buffer:
    a checkpoint's data (the model's ``ckpt.alloc``) or a cache entry's state
    (``save.alloc.main``, ``save.alloc.drft``), which every design allocates with its exact size
    (patches/faults/0002)."""
    if size <= 0 or nth <= 0:
        raise ValueError(f"alloc fault point: size and call must be positive, not {size} and {nth}")
    return f"alloc.{size}@{nth}"


def with_faults(design: Design) -> tuple[tuple[Path, ...], tuple[str, ...]]:
    """The patches and CMake flags of ``design``'s build with the fault points compiled in (the
    fault patches are written for src/ of the October tree: another tree is refused)."""
    if design.tree != FAULTS_TREE:
        raise DesignUnavailable(f"the fault points are patches of the {FAULTS_TREE} tree; design {design.name!r} is "
                                f"built from {design.tree} (docs/DESIGNS.md, \"Fault points\")")
    return (*design.patch_paths(), *(PATCH_DIR / p for p in FAULTS_PATCHES)), (*design.flags, *FAULTS_FLAGS)


# A sanitizer build (``pcspec build --design D --sanitize``): llama.cpp's own options,
# which compile src/, common/ and tools/ with -fsanitize=address,undefined (cmake/common.cmake:36-57
# at 0c1e570) and leave ggml as it is, so ggml's objects come from the compiler cache.
SANITIZE_FLAGS = ("-DLLAMA_SANITIZE_ADDRESS=ON", "-DLLAMA_SANITIZE_UNDEFINED=ON")


# Designs of the model that have no build yet, with the reason.
UNAVAILABLE: dict[str, str] = {}


def design_of(name: str) -> Design:
    """The buildable design ``name``; ``DesignUnavailable`` (one line) otherwise, which for an
    old name (``master``) says what it is called now (``pcspec.model.designs.renamed_error``)."""
    name = ALIASES.get(name, name)
    if name in DESIGNS:
        if DESIGNS[name].patches and not PATCH_DIR.is_dir():
            # (a checkout made without symbolic links has a one-line text file here)
            raise DesignUnavailable(
                "pcspec/live/patches is not a folder: this copy of pcspec was made without symbolic "
                "links; clone again with them (git config --global core.symlinks true)"
            )
        return DESIGNS[name]
    renamed = renamed_error(name)
    if renamed is not None:
        raise DesignUnavailable(renamed.why)
    if name in UNAVAILABLE:
        raise DesignUnavailable(f"design {name!r} is not available as a build yet: {UNAVAILABLE[name]} "
                                f"(buildable: {', '.join(DESIGNS)})")
    raise DesignUnavailable(f"unknown design {name!r}; buildable: {', '.join(DESIGNS)}")
