"""The violating cases of the golden suite: for every property, short model traces on which a
design or a mutant violates it (``pcspec verify``'s counterexamples, shrunk by replay).

Lowered under ``fixed`` they are the holding case of the same trace: a port of ``fixed`` must
reproduce ``fixed``'s observations there, and a port broken at the seam the property guards
diverges there. ``tests/conform/test_conform_golden.py`` checks that each still violates its property
on its variant and that ``fixed`` holds every property on it.

Refresh them from a verify run (``pcspec verify --out DIR``) with::

    python -m pcspec.conform.witnesses DIR

which rewrites the data block below (one JSON object per witness, cut into lines of 100
characters, witnesses separated by a blank line: name, variant, property, the model
configuration's non-default keys, the operations).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pcspec.conform.scenarios import Scenario
from pcspec.core.trace import config_diff, load
from pcspec.model.config import Config

DATA = r"""
{"config":{"cache_idle_slots":false,"cache_ram":200,"cell_bytes":8,"checkpoint_min_step":8,"draft_ce
ll_bytes":4,"draft_rs_bytes":32,"has_draft":true,"kv_unified":true,"n_batch":8,"n_ctx_checkpoints":4
,"n_ctx_slot":96,"n_rs_seq":2,"n_slots":3,"n_swa":4,"n_ubatch":2,"rs_bytes":64,"swa_cells":8},"name"
:"witness-master-ckpt-1","ops":[{"n_predict":3,"op":"request","spans":[8],"tokens":[1,2,3,4,5,6,7,8,
137,140,143,146,149]},{"op":"inject","site":"ckpt.alloc"},{"n_predict":3,"op":"request","spans":[8,1
8],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149,152,155,1091,1034,1001,148,151]},{"op":"step"},{"op
":"step"},{"op":"step"},{"n_predict":3,"op":"request","spans":[8,18],"tokens":[1,2,3,4,5,6,7,8,174,1
77,180,183,186,189,192,1095,1005,1080,185,188,191]},{"max_steps":500,"op":"run"}],"shows":[["master"
,"CKPT-1"],["pr27451","CKPT-1"]]}

{"config":{"cache_idle_slots":false,"cache_ram":-1,"cell_bytes":8,"checkpoint_min_step":8,"draft_cel
l_bytes":4,"draft_memory":"recurrent","draft_rs_bytes":32,"has_draft":true,"memory":"recurrent","n_b
atch":16,"n_ctx_checkpoints":2,"n_ctx_slot":128,"n_swa":4,"n_ubatch":2,"rs_bytes":64,"slot_prompt_si
milarity":0.0,"spec_bytes":8,"swa_cells":8},"name":"witness-master-ckpt-2","ops":[{"op":"inject","si
te":"ckpt.alloc"},{"n_predict":3,"op":"request","tokens":[1,2,3,4,5]},{"max_steps":500,"op":"run"}],
"shows":[["master","CKPT-2"],["pr27451","CKPT-2"]]}

{"config":{"cache_ram":700,"cell_bytes":8,"checkpoint_min_step":2,"draft_cell_bytes":4,"draft_memory
":"swa","draft_rs_bytes":32,"has_draft":true,"kv_unified":true,"n_batch":8,"n_ctx_checkpoints":4,"n_
ctx_slot":128,"n_slots":3,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"spec_by
tes":8,"swa_cells":8},"name":"witness-master-imm-2","ops":[{"n_predict":3,"op":"request","tokens":[1
]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","tokens":[1]},{"op":"inject","site":"l
oad.write.dft"},{"n_predict":3,"op":"request","tokens":[1]}],"shows":[["master","IMM-2"],["pr27451",
"IMM-2"],["pr30137","IMM-2"]]}

{"config":{"cache_idle_slots":false,"cache_ram":700,"cell_bytes":8,"checkpoint_min_step":2,"ctx_shif
t":true,"draft_cell_bytes":4,"draft_memory":"recurrent","draft_rs_bytes":32,"has_draft":true,"memory
":"recurrent","n_batch":8,"n_ctx_checkpoints":3,"n_ctx_slot":96,"n_rs_seq":2,"n_slots":2,"n_swa":4,"
n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"spec_bytes":8,"swa_cells":8},"name":"witness
-master-live-1","ops":[{"n_predict":3,"op":"request","tokens":[1]},{"n_predict":3,"op":"request","to
kens":[1]},{"op":"inject","site":"save.alloc.drft"},{"n_predict":3,"op":"request","tokens":[1]},{"ma
x_steps":500,"op":"run"}],"shows":[["master","LIVE-1"],["master","RB-2"],["pr27451","LIVE-1"],["pr27
451","RB-2"],["pr30137","LIVE-1"],["pr30137","RB-2"]]}

{"config":{"cache_idle_slots":false,"cache_ram":700,"cell_bytes":8,"checkpoint_min_step":2,"ctx_shif
t":true,"draft_cell_bytes":4,"draft_memory":"recurrent","draft_rs_bytes":32,"has_draft":true,"memory
":"recurrent","n_batch":8,"n_ctx_checkpoints":3,"n_ctx_slot":96,"n_rs_seq":2,"n_slots":2,"n_swa":4,"
n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"spec_bytes":8,"swa_cells":8},"name":"witness
-master-noabort-1","ops":[{"op":"inject","site":"ckpt.read.tgt"},{"n_predict":3,"op":"request","toke
ns":[137,140,143,146,149]},{"max_steps":500,"op":"run"}],"shows":[["master","NOABORT-1"],["pr27451",
"NOABORT-1"],["pr30137","NOABORT-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-master-perf-1","ops":[{"n_
predict":3,"op":"request","tokens":[1,2,3,4,5]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"re
quest","tokens":[1]}],"shows":[["master","PERF-1"],["mutant:undercount","ACC-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-master-perf-2","ops":[{"n_
predict":3,"op":"request","tokens":[1,2,3,4,5]},{"n_predict":3,"op":"request","tokens":[1,2]},{"max_
steps":500,"op":"run"}],"shows":[["master","PERF-2"],["pr27451","PERF-2"],["pr30137","PERF-2"]]}

{"config":{"cache_ram":2500,"cell_bytes":8,"checkpoint_min_step":2,"draft_cell_bytes":4,"draft_rs_by
tes":32,"has_draft":true,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":2,"n_ctx_slot":96,"n_slo
ts":3,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"swa_cells":8},"name":"witness-master-progress-1","ops":[
{"id_slot":0,"n_predict":3,"op":"request","spans":[8],"tokens":[1,2,3,4,5,6,7,8,148]},{"max_steps":5
00,"op":"run"},{"n_predict":3,"op":"request","spans":[8,14],"tokens":[1,2,3,4,5,6,7,8,170,173,176,17
9,182,185,366,369,372,375,378,381,384,387,390,393,396]},{"id_slot":0,"n_predict":3,"op":"request","s
pans":[8],"tokens":[1,2,3,4,5,6,7,8,133,136,139,142,145,148,151,154,157,160]},{"n_predict":3,"op":"r
equest","spans":[8,20],"tokens":[1,2,3,4,5,6,7,8,133,136,139,142,145,148,151,154,157,160,163,166,329
,332]},{"id_slot":0,"n_predict":3,"op":"request","spans":[8,14],"tokens":[1,2,3,4,5,6,7,8,170,173,17
6,179,182,185,366,369,372,375,378,381,384,387]},{"n_predict":3,"op":"request","spans":[8,22],"tokens
":[196,199,202,205,208,211,214,217,403,406,409,412,415,418,421,424,427,430,433,1023,1038,1088,229,23
2,235,238]},{"max_steps":500,"op":"run"}],"shows":[["master","PROGRESS-1"],["pr27451","PROGRESS-1"],
["pr30137","PROGRESS-1"]]}

{"config":{"cache_idle_slots":false,"cache_ram":-1,"cell_bytes":8,"checkpoint_min_step":2,"draft_cel
l_bytes":4,"draft_rs_bytes":32,"has_draft":true,"memory":"hybrid","n_batch":8,"n_ctx_checkpoints":3,
"n_ctx_slot":128,"n_slots":3,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"swa_cells":8},"name":"witness-mas
ter-rb-1","ops":[{"id_slot":0,"n_predict":3,"op":"request","tokens":[1]},{"op":"step"},{"op":"inject
","site":"save.read.tgt"},{"id_slot":0,"n_predict":3,"op":"request","tokens":[1]}],"shows":[["master
","RB-1"],["pr27451","RB-1"]]}

{"config":{"cache_idle_slots":false,"cache_ram":2500,"cell_bytes":8,"checkpoint_min_step":4,"ctx_shi
ft":true,"draft_cell_bytes":4,"draft_rs_bytes":32,"memory":"hybrid","n_batch":8,"n_ctx_checkpoints":
3,"n_ctx_slot":96,"n_slots":3,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"swa
_cells":8},"name":"witness-master-rb-3","ops":[{"op":"inject","site":"save.alloc.entry"},{"n_predict
":3,"op":"request","tokens":[1]},{"n_predict":3,"op":"request","tokens":[1]},{"n_predict":3,"op":"re
quest","tokens":[1]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","tokens":[1]}],"show
s":[["master","RB-3"],["pr30137","RB-3"]]}

{"config":{"cache_idle_slots":false,"cache_ram":-1,"cell_bytes":8,"checkpoint_min_step":8,"draft_cel
l_bytes":4,"draft_memory":"recurrent","draft_rs_bytes":32,"has_draft":true,"memory":"recurrent","n_b
atch":16,"n_ctx_checkpoints":2,"n_ctx_slot":128,"n_swa":4,"n_ubatch":2,"rs_bytes":64,"slot_prompt_si
milarity":0.0,"spec_bytes":8,"swa_cells":8},"name":"witness-master-restore-1","ops":[{"op":"inject",
"site":"ckpt.alloc"},{"n_predict":3,"op":"request","tokens":[1,2,3,4,5]},{"n_predict":3,"op":"reques
t","tokens":[1,2,3,4,5,6]},{"max_steps":500,"op":"run"}],"shows":[["master","RESTORE-1"],["pr27451",
"RESTORE-1"]]}

{"config":{"cache_ram":2500,"cell_bytes":8,"checkpoint_min_step":4,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"kv","n_batch":8,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_slots":3,"n_swa":4,"n_uba
tch":2,"rs_bytes":64,"swa_cells":8},"name":"witness-master-state-1","ops":[{"filename":"c.bin","id_s
lot":1,"op":"slot_save"},{"field":"tokens marker","filename":"c.bin","op":"corrupt_file","value":0},
{"filename":"c.bin","id_slot":0,"op":"slot_restore"}],"shows":[["master","STATE-1"],["pr27451","STAT
E-1"],["pr30137","STATE-1"]]}

{"config":{"cache_idle_slots":false,"cache_ram":700,"cell_bytes":8,"checkpoint_min_step":2,"ctx_shif
t":true,"draft_cell_bytes":4,"draft_memory":"recurrent","draft_rs_bytes":32,"has_draft":true,"memory
":"recurrent","n_batch":8,"n_ctx_checkpoints":3,"n_ctx_slot":96,"n_rs_seq":2,"n_slots":2,"n_swa":4,"
n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"spec_bytes":8,"swa_cells":8},"name":"witness
-mutant-appendix-uncounted-file-2","ops":[{"n_predict":3,"op":"request","tokens":[1,2,3,4,5]},{"file
name":"c.bin","id_slot":1,"op":"slot_save"},{"max_steps":500,"op":"run"}],"shows":[["mutant:appendix
-uncounted","FILE-2"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-mutant-free-shared-ref-1",
"ops":[{"n_predict":3,"op":"request","spans":[8,19],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149,15
2,155,158,1071,1021,1058,148,151,154,157,160,163,166,169]},{"n_predict":3,"op":"request","spans":[8,
19],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149,152,155,158,1071,1021,1058,148,151,154,157,160,163
,166,169,1067]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","tokens":[1]}],"shows":[[
"mutant:free-shared","REF-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-mutant-inplace-update-imm-
1","ops":[{"n_predict":3,"op":"request","tokens":[1,2,3,4,5]},{"n_predict":3,"op":"request","spans":
[8,19,30,41],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149,152,155,158,1071,1021,1058,148,151,154,15
7,160,163,166,169,1067,1002,1014,159,162,165,168,171,174,177,180,1063,1080,1000,170,173,176,179,182]
},{"max_steps":500,"op":"run"}],"shows":[["mutant:inplace-update","IMM-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-mutant-keep-invalidated-ck
pt-2","ops":[{"n_predict":3,"op":"request","tokens":[1,2,3,4,5,6]},{"n_predict":3,"op":"request","to
kens":[1]},{"max_steps":500,"op":"run"}],"shows":[["mutant:keep-invalidated","CKPT-2"],["mutant:keep
-invalidated","RESTORE-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-mutant-needless-restore-pe
rf-3","ops":[{"n_predict":3,"op":"request","spans":[8],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149
,152,155,158]},{"n_predict":3,"op":"request","spans":[8],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,1
49,152,155,158,1071,1021,1058]},{"max_steps":500,"op":"run"}],"shows":[["mutant:needless-restore","P
ERF-3"],["mutant:sweep-always","CKPT-4"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-mutant-no-cap-ckpt-1","ops
":[{"n_predict":3,"op":"request","spans":[8,19,30,41],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149,
152,155,158,1071,1021,1058,148,151,154,157,160,163,166,169,1067,1002,1014,159,162,165,168,171,174,17
7,180,1063,1080,1000,170,173,176,179,182]},{"max_steps":500,"op":"run"}],"shows":[["mutant:no-cap","
CKPT-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-mutant-no-make-room-acc-2"
,"ops":[{"n_predict":3,"op":"request","tokens":[1,2,3,4,5,6]},{"n_predict":3,"op":"request","spans":
[8],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149]},{"n_predict":3,"op":"request","spans":[8,19,30],
"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149,152,155,158,1071,1021,1058,148,151,154,157,160,163,166
,169,1067,1002,1014,159,162,165,168,171,174]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"requ
est","tokens":[1]}],"shows":[["mutant:no-make-room","ACC-2"]]}

{"config":{"cache_idle_slots":false,"cache_ram":-1,"cell_bytes":8,"checkpoint_min_step":2,"draft_cel
l_bytes":4,"draft_rs_bytes":32,"has_draft":true,"memory":"hybrid","n_batch":8,"n_ctx_checkpoints":3,
"n_ctx_slot":128,"n_slots":3,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"swa_cells":8},"name":"witness-mut
ant-noinit-unchecked-uninit-1","ops":[{"id_slot":0,"n_predict":3,"op":"request","tokens":[1]},{"op":
"step"},{"op":"step"},{"op":"step"},{"op":"step"},{"op":"step"},{"op":"step"},{"op":"inject","site":
"save.read.tgt"},{"id_slot":0,"n_predict":3,"op":"request","tokens":[144]},{"op":"step"},{"op":"step
"}],"shows":[["mutant:noinit-unchecked","UNINIT-1"]]}

{"config":{"cache_ram":400,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_byt
es":32,"kv_unified":true,"memory":"recurrent","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_
rs_seq":2,"n_slots":2,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":
8},"name":"witness-mutant-noinit-unchecked-uninit-2","ops":[{"n_predict":3,"op":"request","tokens":[
1]},{"max_steps":500,"op":"run"},{"op":"inject","site":"state.write.short"},{"n_predict":3,"op":"req
uest","tokens":[1]},{"n_predict":3,"op":"request","tokens":[1]}],"shows":[["mutant:noinit-unchecked"
,"UNINIT-2"]]}

{"config":{"cache_ram":400,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_byt
es":32,"kv_unified":true,"memory":"recurrent","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_
rs_seq":2,"n_slots":2,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":
8},"name":"witness-mutant-sweep-full-once-ckpt-4","ops":[{"op":"inject","site":"state.write.short"},
{"n_predict":3,"op":"request","spans":[8,20,26],"tokens":[1,2,3,4,5,6,7,8,174,177,180,183,186,189,19
2,195,198,1085,1076,1027,185,188,191,1064,1090,1000,196,199,202]},{"max_steps":500,"op":"run"},{"n_p
redict":3,"op":"request","tokens":[1]},{"n_predict":3,"op":"request","spans":[8,20,26],"tokens":[1,2
,3,4,5,6,7,8,174,177,180,183,186,189,192,195,198,1085,1076,1027,185,188,191,1064,1090,1000,196,199,2
02,1072,1006,1052]},{"op":"step"}],"shows":[["mutant:sweep-full-once","CKPT-4"]]}

{"config":{"cache_idle_slots":false,"cache_ram":700,"cell_bytes":8,"checkpoint_min_step":4,"ctx_shif
t":true,"draft_cell_bytes":4,"draft_rs_bytes":32,"has_draft":true,"kv_unified":true,"memory":"hybrid
","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_rs_seq":2,"n_slots":2,"n_swa":4,"n_ubatch":2
,"rs_bytes":64,"swa_cells":8},"name":"witness-mutant-trust-size-field-file-1","ops":[{"n_predict":3,
"op":"request","spans":[8],"tokens":[1,2,3,4,5,6,7,8,174,177,1081,1053,1087]},{"max_steps":500,"op":
"run"},{"filename":"c.bin","id_slot":1,"op":"slot_save"},{"field":"ckpt 1 data_dft length","filename
":"c.bin","op":"corrupt_file","value":18446744073709551614},{"filename":"c.bin","id_slot":1,"op":"sl
ot_restore"}],"shows":[["mutant:trust-size-field","FILE-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-mutant-undercount-limit-1"
,"ops":[{"n_predict":3,"op":"request","tokens":[1,2,3,4,5,6]},{"op":"inject","site":"load.write.tgt"
},{"n_predict":3,"op":"request","spans":[8,19,30],"tokens":[1,2,3,4,5,6,7,8,137,140,143,146,149,152,
155,158,1071,1021,1058,148,151,154,157,160,163,166,169,1067,1002,1014,159,162,165,168,171,174]},{"n_
predict":3,"op":"request","spans":[8],"tokens":[1,2,3,4,5,6,7,8,100,103,106,109,112]},{"max_steps":5
00,"op":"run"},{"n_predict":3,"op":"request","tokens":[1]}],"shows":[["mutant:undercount","LIMIT-1"]
]}

{"config":{"cache_idle_slots":false,"cache_ram":2500,"cell_bytes":8,"checkpoint_min_step":4,"ctx_shi
ft":true,"draft_cell_bytes":4,"draft_rs_bytes":32,"memory":"hybrid","n_batch":8,"n_ctx_checkpoints":
3,"n_ctx_slot":96,"n_slots":3,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"swa
_cells":8},"name":"witness-pr27451-acc-1","ops":[{"n_predict":3,"op":"request","tokens":[1]},{"op":"
step"},{"n_predict":3,"op":"request","tokens":[1]},{"n_predict":3,"op":"request","tokens":[1,2,3,4,5
]},{"n_predict":3,"op":"request","tokens":[1]},{"n_predict":3,"op":"request","spans":[8],"tokens":[1
,2,3,4,5,6,7,8,137]},{"n_predict":3,"op":"request","tokens":[1,2,3,4,5,6]},{"n_predict":3,"op":"requ
est","tokens":[1]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","tokens":[1]}],"shows"
:[["pr27451","ACC-1"],["pr30137","ACC-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"draft_cell_bytes":4,"draft_rs_by
tes":32,"memory":"hybrid","n_batch":16,"n_ctx_checkpoints":4,"n_ctx_slot":96,"n_swa":4,"n_ubatch":2,
"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness-pr27451-acc-3","ops":[{"n_
predict":3,"op":"request","spans":[8,11],"tokens":[1,2,3,4,5,6,7,8,174,177,180,381,384,387,390,393]}
,{"n_predict":3,"op":"request","spans":[8,19,30],"tokens":[1,2,3,4,5,6,7,8,100,103,106,109,112,115,1
18,121,1000,1080,1066,111,114,117,120,123,126,129,132,1093,1061,1052,122,125,128,131,134,137,140,143
,146,149,152]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","tokens":[1]}],"shows":[["
pr27451","ACC-3"],["pr30137","ACC-3"]]}

{"config":{"cache_idle_slots":false,"cache_ram":-1,"cell_bytes":8,"checkpoint_min_step":8,"draft_cel
l_bytes":4,"draft_memory":"recurrent","draft_rs_bytes":32,"has_draft":true,"memory":"recurrent","n_b
atch":16,"n_ctx_checkpoints":2,"n_ctx_slot":128,"n_swa":4,"n_ubatch":2,"rs_bytes":64,"slot_prompt_si
milarity":0.0,"spec_bytes":8,"swa_cells":8},"name":"witness-pr27451-perf-1","ops":[{"n_predict":3,"o
p":"request","tokens":[1,2,3,4,5]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","token
s":[1]}],"shows":[["pr27451","PERF-1"]]}

{"config":{"cache_idle_slots":false,"cache_ram":2500,"cell_bytes":8,"checkpoint_min_step":2,"draft_c
ell_bytes":4,"draft_memory":"hybrid","draft_rs_bytes":32,"has_draft":true,"kv_unified":true,"memory"
:"hybrid","n_batch":16,"n_ctx_checkpoints":3,"n_ctx_slot":128,"n_rs_seq":2,"n_slots":2,"n_swa":4,"n_
ubatch":2,"rs_bytes":64,"swa_cells":8},"name":"witness-pr30137-ckpt-1","ops":[{"op":"inject","site":
"load.write.dft"},{"n_predict":3,"op":"request","spans":[8,17],"tokens":[1,2,3,4,5,6,7,8,174,177,180
,183,186,189,1085,1018,1063,185]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","spans"
:[8],"tokens":[1,2,3,4,5,6,7,8,100,103,106,109,112,115,118]},{"op":"step"},{"n_predict":3,"op":"requ
est","tokens":[1,2,3,4,5]},{"n_predict":3,"op":"request","spans":[8,17],"tokens":[1,2,3,4,5,6,7,8,17
4,177,180,183,186,189,1085,1018,1063,185,188]},{"max_steps":500,"op":"run"}],"shows":[["pr30137","CK
PT-1"]]}

{"config":{"cache_idle_slots":false,"cache_ram":2500,"cell_bytes":8,"checkpoint_min_step":2,"draft_c
ell_bytes":4,"draft_memory":"hybrid","draft_rs_bytes":32,"has_draft":true,"kv_unified":true,"memory"
:"hybrid","n_batch":16,"n_ctx_checkpoints":3,"n_ctx_slot":128,"n_rs_seq":2,"n_slots":2,"n_swa":4,"n_
ubatch":2,"rs_bytes":64,"swa_cells":8},"name":"witness-pr30137-ckpt-2","ops":[{"n_predict":3,"op":"r
equest","tokens":[1,2,3]},{"op":"inject","site":"load.write.dft"},{"max_steps":500,"op":"run"},{"n_p
redict":3,"op":"request","tokens":[1]},{"op":"step"},{"n_predict":3,"op":"request","tokens":[1,2]},{
"n_predict":3,"op":"request","tokens":[1,2,3,4]},{"max_steps":500,"op":"run"}],"shows":[["pr30137","
CKPT-2"]]}

{"config":{"cache_idle_slots":false,"cache_ram":200,"cell_bytes":8,"checkpoint_min_step":8,"draft_ce
ll_bytes":4,"draft_rs_bytes":32,"has_draft":true,"kv_unified":true,"n_batch":8,"n_ctx_checkpoints":4
,"n_ctx_slot":96,"n_rs_seq":2,"n_slots":3,"n_swa":4,"n_ubatch":2,"rs_bytes":64,"swa_cells":8},"name"
:"witness-master-reuse-1","ops":[{"n_predict":3,"op":"request","tokens":[1]},{"op":"step"},{"n_predi
ct":3,"op":"request","tokens":[1]},{"max_steps":500,"op":"run"},{"n_predict":3,"op":"request","token
s":[1,2]},{"op":"step"}],"shows":[["master","REUSE-1"]]}

{"config":{"cache_ram":1200,"cell_bytes":8,"checkpoint_min_step":8,"ctx_shift":true,"draft_cell_byte
s":4,"draft_rs_bytes":32,"has_draft":true,"n_batch":8,"n_ctx_checkpoints":3,"n_ctx_slot":64,"n_slots
":3,"n_swa":4,"n_ubatch":4,"rs_bytes":64,"slot_prompt_similarity":0.0,"swa_cells":8},"name":"witness
-master-reuse-2","ops":[{"n_predict":3,"op":"request","tokens":[1]},{"max_steps":500,"op":"run"},{"n
_predict":3,"op":"request","tokens":[1]},{"id_slot":0,"n_predict":3,"op":"request","tokens":[1]}],"s
hows":[["master","REUSE-2"]]}

{"config":{"cache_idle_slots":false,"cache_ram":200,"cell_bytes":8,"checkpoint_min_step":2,"ctx_shif
t":true,"draft_cell_bytes":4,"draft_memory":"hybrid","draft_rs_bytes":32,"has_draft":true,"kv_unifie
d":true,"memory":"hybrid","n_batch":8,"n_ctx_checkpoints":3,"n_ctx_slot":96,"n_slots":3,"n_swa":4,"n
_ubatch":4,"rs_bytes":64,"spec_bytes":8,"swa_cells":8},"name":"witness-mutant-no-tail-break-ckpt-3",
"ops":[{"n_predict":3,"op":"request","tokens":[1,2,3,4,5]},{"op":"step"}],"shows":[["mutant:no-tail-
break","CKPT-3"]]}
"""


def witnesses() -> list[dict[str, Any]]:
    return [json.loads(block.replace("\n", "")) for block in DATA.strip().split("\n\n") if block.strip()]


def witness_scenarios() -> list[Scenario]:
    out = []
    for w in witnesses():
        shows = tuple((str(v), str(p)) for v, p in w["shows"])
        cfg = Config.from_json(w["config"], f"witness {w['name']}")
        what = ", ".join(f"{v} violates {p}" for v, p in shows)
        out.append(Scenario(str(w["name"]), f"{what} (pcspec verify, shrunk); fixed holds", cfg, list(w["ops"]), shows))
    return out


def refresh(out_dir: Path) -> str:
    """The data block for the counterexamples in a ``pcspec verify`` output folder (one
    witness per distinct trace, with every (variant, property) it shows)."""
    found: dict[str, dict[str, Any]] = {}
    for f in sorted(out_dir.glob("*.jsonl")):
        tr = load(f)
        if not tr.expect:
            continue
        pid = tr.expect[0]["property"]
        key = json.dumps([config_diff(tr.config), tr.ops], sort_keys=True)
        if key not in found:
            name = f"witness-{tr.variant.name.replace('mutant:', 'mutant-')}-{pid}".lower()
            found[key] = {"name": name, "shows": [], "config": config_diff(tr.config), "ops": tr.ops}
        found[key]["shows"].append([tr.variant.name, pid])
    lines = []
    for w in found.values():
        text = json.dumps(w, sort_keys=True, separators=(",", ":"))
        lines.append("\n".join(text[i : i + 100] for i in range(0, len(text), 100)))
    return "\n\n".join(lines)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m pcspec.conform.witnesses VERIFY_OUT_DIR", file=sys.stderr)
        return 2
    me = Path(__file__)
    text = me.read_text(encoding="utf-8")
    head, _, rest = text.partition('DATA = r"""\n')
    _, _, tail = rest.partition('"""\n')
    me.write_text(head + 'DATA = r"""\n' + refresh(Path(argv[0])) + '\n"""\n' + tail, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
