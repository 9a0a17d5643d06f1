"""Names tensorpack 0.8-0.10 had and 0.11 removed, kept so that older scripts run unchanged.

Each one warns when used, naming what to write instead (``warn.py``). The symbolic functions are in
``symbolic.py``, re-exported by ``towerpack.trainer.symbolic_functions``; the removed layers are in
``towerpack.trainer.models.legacy``; ``TryResumeTraining`` and ``dump_chkpt_vars`` are in
``sessinit`` and ``varmanip``, where the reference had them.
"""
