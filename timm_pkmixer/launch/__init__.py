"""The launch wing: a folder of recipes run through `pkmixer train`, one process per run, and followed.

* `tasks`: one run as a task (its recipe, run folder, record and log in ``DIR/launch/``, and its process);
* `executors`: where tasks run (:data:`~.executors.EXECUTORS`: this machine, or SLURM through submitit);
* `lock`: who is launching a folder;
* `launcher`: `pkmixer launch` (plan, lock, start, wait) and `pkmixer status` (each run's state).

It stands beside ``experiments/`` (whose recipes, train.py and run-folder reader it uses) and imports nothing above.
"""
