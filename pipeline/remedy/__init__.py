"""The remedy ladder: when the int8 model fails the parity gate, repairs tried in order of cost, judged on the tuning
split. ladder.py climbs; rungs/ holds one module per rung; judge.py says whether an attempt passes and how well the
split can tell; near_ties.py says why nothing passed; outcome.py records what was tried; table.py prints it;
tuning_split.py draws the split; tuning_task.py is what a task supplies; float_edits.py edits the float weights."""
