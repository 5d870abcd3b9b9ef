"""A design of one's own, as a llama.cpp developer would describe a change under review:
pcspec's ``fixed`` with its transactional save replaced by append-then-fill and nothing rolled
back (the C++'s pre-#30137 save). pcspec has no expectations of it: it must hold everything."""

from pcspec.model.design import Design
from pcspec.model.designs import Fixed


class NoRollback(Fixed):
    """fixed with the save of the C++ before #30137: append the entry, then fill it, nothing checked."""

    name = "norollback"
    prompt_save = Design.prompt_save  # the extension point it changes: the save, as Design has it


NOROLLBACK = NoRollback()

# The same design, with the violations its author knows of declared: pcspec then gates on
# everything else (uncomment to accept them).
# PCSPEC_EXPECT = {"NOROLLBACK": ["UNINIT-1", "UNINIT-2", "RB-1", "RB-2", "STATE-1"]}
