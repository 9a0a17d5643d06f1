"""Resizing a running job in place: the rank's end of the launcher's plan, the regroup, the input."""
