"""Reports: train.py run folders back into the paper's tables (`report`) and figures (`figures`, `curve_figures`:
curves, min–max bands over seeds). Reads runs through `runs/` and the experiments' names from `sweeps/`."""
