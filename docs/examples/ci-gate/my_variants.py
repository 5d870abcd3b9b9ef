"""A design of one's own, as a llama.cpp developer would describe a change under review:
pcspec's ``fixed`` with its transactional save replaced by append-then-fill and nothing rolled
back (the C++'s pre-#30137 save). pcspec has no expectations of it: it must hold everything."""

import dataclasses

from pcspec.model.variants import FIXED, SaveProtocol  # MIGRATE

NOROLLBACK = dataclasses.replace(FIXED, name="norollback", save_protocol=SaveProtocol.APPEND_FILL)

# The same design, with the violations its author knows of declared: pcspec then gates on
# everything else (uncomment to accept them).
# PCSPEC_EXPECT = {"NOROLLBACK": ["UNINIT-1", "UNINIT-2", "RB-1", "RB-2", "STATE-1"]}
