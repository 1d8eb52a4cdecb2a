"""The experiment harness: the paper's experiments as a loop over timm's own train.py.

* `recipes`: the packaged train.py recipes (``train_recipes/``), by name, with their batch and learning rate;
* `train_py`: finding, importing and running timm's train.py (``pkmixer train``), with `threads`' policy;
* `sweep_tables` and `sweep`: the paper's figures as records with sources, one recipe per point and seed;
* `report` and `figures`: train.py run folders back into the paper's tables and figures;
* `datasets`, `fashion_mnist`, `demo_data` and `demo`: the data the experiments and the demo train on, and the demo.

Nothing in the model core imports this package.
"""
