"""Training: finding, importing and running timm's train.py on a recipe (`train_py`), how many CPU threads a run
takes (`threads`), torchrun's environment (`env`), what made a run (`provenance`: the versions, commit, device
and threads written into its folder), and `pkmixer demo`'s own two-model loop (`demo`). Imports the
core, `data/` and `sweeps/` (the recipes)."""
