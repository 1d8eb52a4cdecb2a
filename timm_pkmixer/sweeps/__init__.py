"""Recipes and the sweeps that write them: the packaged train.py recipes by name (`recipes`), the paper's figures as
records with sources (`sweep_tables`), one recipe per point and seed of an experiment (`sweep_planners`,
`sweep_plan`), its Markdown (`sweep_render`) and the folder it writes (`sweep_write`: the recipes, sweep.json,
SWEEP.md). Imports the core and `runs/`."""
