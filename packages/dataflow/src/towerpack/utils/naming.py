"""Names that the trainer gives graph elements, shared with code that looks them up."""

#: The op that increments the global step once per training step.
GLOBAL_STEP_INCR_OP_NAME = "global_step_incr"
#: The graph collection of the moving-average update ops made by ``add_moving_summary``.
MOVING_SUMMARY_OPS_KEY = "MOVING_SUMMARY_OPS"
