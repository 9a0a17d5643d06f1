"""Exact resume: data positions, the protocol stages implement, item tags, the ledger, the tracker.

Read ``protocol.py`` first (what a stage says about itself to be resumed), then ``tracker.py``
(PositionTracker, which drives the stages) and ``position.py`` (DataPosition, what a checkpoint holds).
"""
