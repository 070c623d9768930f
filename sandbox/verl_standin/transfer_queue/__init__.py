"""STAND-IN for the ``transfer_queue`` package (sandbox only): verl 0.9.1's V1 trainer imports it
(``verl/trainer/main_ppo.py:137``, ``verl/trainer/ppo/v1/trainer_base.py:30``), so a real verl image has it and
preflight looks for it. Nothing here is used beyond the import."""
