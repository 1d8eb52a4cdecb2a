"""Training: finding, importing and running timm's train.py on a recipe (`train_py`), how many CPU threads a run
takes (`threads`) and torchrun's environment (`env`), and `pkmixer demo`'s own two-model loop (`demo`). Imports the
core, `data/` and `sweeps/` (the recipes)."""
