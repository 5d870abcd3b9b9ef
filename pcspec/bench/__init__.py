"""``pcspec bench``: what each design costs, measured on its real server beside the model's
prediction (docs/BENCH.md): workloads (``workload``), the model's run (``predict``), the live
measurements (``measure``), the runs side by side (``run``) and the table and plot (``report``)."""
