"""The scalar formulas, written once for every target, with their proofs and primitives."""
