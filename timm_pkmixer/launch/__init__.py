"""The launch wing: a folder of recipes run through `pkmixer train`, one process per run, and followed.

* `tasks`: one run as a task (its recipe, run folder, record and log in ``DIR/launch/``, and its process);
* `executors`: where tasks run (:data:`~.executors.EXECUTORS`: this machine, or SLURM through submitit);
* `lock`: who is launching a folder;
* `records`: the run records, the recorded train.py arguments and the folder's id in ``DIR/launch/``;
* `ownership`: a run folder's owner and what it was asked to train (its launch marker: stale runs);
* `liveness`: whether the process a record names is the one that wrote it (PID, start time, boot);
* `errors`: the wing's exceptions (`state_file`: what is wrong with one of its files, in its words);
* `launcher`: `pkmixer launch` (plan, lock, start, wait) and `pkmixer status` (each run's state).

Its files are opened by :mod:`timm_pkmixer.state_files`; it reads run folders through ``runs/`` (the room the report
reads them through too), runs recipes through ``training/``, and imports nothing above.
"""
