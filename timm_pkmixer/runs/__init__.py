"""What a run folder holds, read and written in one place: train.py's files (`run_folder`: args.yaml, summary.csv,
checkpoints, a run's state), the launch marker `pkmixer launch` writes into it (`launch_marker`), what made it
(`provenance`: the environment `pkmixer train` records), and the report's epochs.csv (`epochs_csv`). The room where
the launcher (which writes runs) and the report (which reads them) meet; imports only the model core."""
