"""Exact resume: data positions, the protocol stages implement, item tags, the ledger, the tracker."""
