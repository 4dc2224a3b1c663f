"""`jetfleet eval fleet`: the lab as one power budget, emulated (``lab.py``: the simulation; ``report.py``: the
table)."""
